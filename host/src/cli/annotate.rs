use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use evac_runtime::kubewarden::metadata::{self, Metadata};
use evac_runtime::wapc::{EngineOptions, PolicyEngine};

#[derive(Debug, Args)]
pub struct AnnotateArgs {
    /// The policy's metadata.yml.
    #[arg(long, short)]
    metadata: PathBuf,
    /// Where to write the annotated module.
    #[arg(long, short)]
    output: PathBuf,
    /// The module to annotate.
    module: PathBuf,
}

pub fn run(args: AnnotateArgs) -> Result<()> {
    let text = std::fs::read_to_string(&args.metadata)
        .with_context(|| format!("cannot read {}", args.metadata.display()))?;
    let mut metadata =
        Metadata::from_yaml(&text).with_context(|| format!("in {}", args.metadata.display()))?;
    let bytes =
        std::fs::read(&args.module).with_context(|| format!("cannot read {}", args.module.display()))?;

    // As kwctl does: ask the module its protocol version, which also proves it runs.
    if metadata.execution_mode == "kubewarden-wapc" {
        let engine = PolicyEngine::new(EngineOptions { max_concurrent: 1, ..EngineOptions::default() })?;
        let module =
            engine.compile(&bytes).with_context(|| format!("cannot load {}", args.module.display()))?;
        let policy = evac_runtime::wapc::Policy::new(
            module,
            std::sync::Arc::new(evac_runtime::capabilities::NoCapabilities),
        );
        let version = evac_runtime::kubewarden::protocol_version(&policy)
            .context("asking the module its protocol version")?;
        if version != "v1" {
            bail!("the module speaks Kubewarden protocol {version:?}, not v1");
        }
        metadata.protocol_version = Some(version);
    }
    let annotated = metadata::embed(&bytes, &metadata)?;
    std::fs::write(&args.output, annotated)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    Ok(())
}
