use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use evac_runtime::kubewarden::metadata;

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The policy module.
    module: PathBuf,
}

pub fn run(args: InspectArgs) -> Result<()> {
    let bytes =
        std::fs::read(&args.module).with_context(|| format!("cannot read {}", args.module.display()))?;
    match metadata::read(&bytes)? {
        Some(metadata) => println!("{}", serde_yaml::to_string(&metadata)?),
        None => anyhow::bail!(
            "{} carries no io.kubewarden.metadata section: annotate it first",
            args.module.display()
        ),
    }
    Ok(())
}
