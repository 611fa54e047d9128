//! Compiled modules kept on disk, so a restart, or a swap back to a version compiled before, loads
//! machine code instead of compiling again (about 0.3 s per module here, against well under a
//! millisecond to map a cached one).
//!
//! An entry is keyed by the digest of the module as compiled and by the engine's compatibility
//! hash (wasmtime version, engine configuration, CPU features): an entry from another build or
//! another machine is never loaded, it just is not found.

// Loading a precompiled module is unsafe in wasmtime: the bytes become machine code.
#![allow(unsafe_code)]

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::{Module, Result};

use super::PolicyEngine;

/// Compiles a module, through the engine's cache directory when it has one.
pub(crate) fn compile(engine: &PolicyEngine, bytes: &[u8]) -> Result<Module> {
    let Some(dir) = &engine.options().cache_dir else {
        return Module::new(engine.engine(), bytes);
    };
    let path = entry_path(engine, dir, bytes);
    if path.exists() {
        // SAFETY: entries are only ever written by `store` below, from `Module::serialize` of this
        // engine configuration (the compatibility hash is part of the name), into a directory the
        // server owns. wasmtime checks the header again and refuses a mismatched artifact.
        match unsafe { Module::deserialize_file(engine.engine(), &path) } {
            Ok(module) => {
                tracing::debug!(path = %path.display(), "loaded a compiled module from the cache");
                return Ok(module);
            }
            Err(e) => tracing::warn!(path = %path.display(), "ignoring an unusable cache entry: {e}"),
        }
    }
    let module = Module::new(engine.engine(), bytes)?;
    if let Err(e) = store(&module, &path) {
        // The cache only saves time: a failure to write it is not a failure to load.
        tracing::warn!(path = %path.display(), "cannot write the compile cache: {e:#}");
    }
    Ok(module)
}

fn entry_path(engine: &PolicyEngine, dir: &Path, bytes: &[u8]) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    engine.engine().precompile_compatibility_hash().hash(&mut hasher);
    let digest = hex::encode(Sha256::digest(bytes));
    dir.join(format!("{digest}-{:016x}.cwasm", hasher.finish()))
}

/// Writes an entry atomically (temporary file, then rename), so a reader never sees half of one.
fn store(module: &Module, path: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let dir = path.parent().context("cache entry without a directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let bytes = module.serialize().map_err(anyhow::Error::from)?;
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&temporary, bytes).with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("cannot rename to {}", path.display()))?;
    Ok(())
}
