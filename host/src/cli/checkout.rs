//! The checkout's files (`examples/`, `dist/`) that `evac demo`, `evac simulate` and
//! `evac sim serve` use by default, from whatever directory they are run: a default is looked up
//! in the current directory, then in the checkout the binary was built in
//! (`<checkout>/target/<profile>/evac`). A path given on the command line is taken as it is.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// The checkout the running binary was built in, when it runs from its `target/` directory.
pub fn of_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // <checkout>/target/<profile>/evac, or <checkout>/target/<triple>/<profile>/evac.
    exe.ancestors()
        .skip(1)
        .take(3)
        .find(|dir| dir.file_name().is_some_and(|n| n == "target"))
        .and_then(Path::parent)
        .filter(|checkout| checkout.join("examples").is_dir())
        .map(Path::to_path_buf)
}

/// `given`, or else the checkout's `default` (relative to the current directory, or to the
/// binary's checkout), which must exist.
pub fn file(given: Option<PathBuf>, default: &str) -> Result<PathBuf> {
    if let Some(given) = given {
        return Ok(given);
    }
    let here = PathBuf::from(default);
    if here.exists() {
        return Ok(here);
    }
    match of_binary() {
        Some(checkout) if checkout.join(default).exists() => Ok(checkout.join(default)),
        Some(checkout) => bail!(
            "{default} is neither in the current directory nor in evac's checkout {} (`make build` builds dist/)",
            checkout.display()
        ),
        None => bail!(
            "{default} is not in the current directory, and this evac runs outside a checkout: give the path"
        ),
    }
}

/// Where an output of the checkout's (`dist/demo/index.html`) goes by default: in the current
/// directory when it is a checkout, else in the binary's checkout, else here.
pub fn output(given: Option<PathBuf>, default: &str) -> PathBuf {
    if let Some(given) = given {
        return given;
    }
    if Path::new("examples").is_dir() {
        return PathBuf::from(default);
    }
    of_binary().map_or_else(|| PathBuf::from(default), |checkout| checkout.join(default))
}
