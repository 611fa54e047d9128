//! Compiled modules kept on disk, so a restart, or a swap back to a version compiled before, loads
//! machine code instead of compiling again (about 0.3 s per module here, against well under a
//! millisecond to load a cached one).
//!
//! An entry is keyed by the digest of the module as compiled and by the engine's compatibility
//! hash (wasmtime version, engine configuration, CPU features): an entry from another build or
//! another machine is never loaded, it just is not found.
//!
//! Loading an entry runs its bytes as machine code, so the cache trusts nothing it did not write
//! itself (`docs/security.md`):
//! - the directory is created private (0700) and refused when it is a symbolic link, belongs to
//!   another user, or others may write to it ([`prepare_dir`]);
//! - an entry is loaded only if it is a regular file of this user that others cannot write, and
//!   its contents match the SHA-256 digest written in its header when it was stored: a damaged
//!   entry (or one in another format) is removed and the module compiled again;
//! - entries are written to a new temporary file (created exclusively, never through a link),
//!   then renamed into place; the oldest are pruned beyond [`MAX_ENTRIES`].

// Loading a precompiled module is unsafe in wasmtime: the bytes become machine code.
#![allow(unsafe_code)]

use std::fs::{self, File, OpenOptions};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::{Module, Result};

use super::error::CacheDirError;
use super::PolicyEngine;

/// The first bytes of an entry: the format, then the payload's SHA-256, then the payload
/// (`Module::serialize`).
const MAGIC: &[u8] = b"evac-cwasm-1\n";
const DIGEST_LEN: usize = 32;

/// How many entries the directory keeps; the least recently written go first.
pub(crate) const MAX_ENTRIES: usize = 64;

/// The compile cache's default directory: `$XDG_CACHE_HOME/evac`, else `$HOME/.cache/evac`;
/// `None` when neither is set.
pub fn default_dir() -> Option<PathBuf> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_CACHE_HOME")
        .map(|d| d.join("evac"))
        .or_else(|| absolute("HOME").map(|h| h.join(".cache/evac")))
}

/// [`default_dir`] when it can serve as the cache (created, or already there and safe); `None`
/// otherwise, with a warning: without a cache, modules are compiled at every start.
pub fn usable_default_dir() -> Option<PathBuf> {
    let dir = default_dir()?;
    match prepare_dir(&dir) {
        Ok(()) => Some(dir),
        Err(e) => {
            tracing::warn!("running without a compile cache: {e}");
            None
        }
    }
}

/// Makes sure `dir` is a directory only this user can write: creates it (0700) when missing,
/// refuses it when it is a symbolic link, belongs to another user, or is writable by others.
pub(crate) fn prepare_dir(dir: &Path) -> Result<(), CacheDirError> {
    if fs::symlink_metadata(dir).is_err() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|error| CacheDirError::Create { dir: dir.to_owned(), error })?;
    }
    let metadata =
        fs::symlink_metadata(dir).map_err(|error| CacheDirError::Read { dir: dir.to_owned(), error })?;
    let refuse = |why: String| CacheDirError::Unsafe { dir: dir.to_owned(), why };
    if metadata.file_type().is_symlink() {
        return Err(refuse("it is a symbolic link".into()));
    }
    if !metadata.is_dir() {
        return Err(refuse("it is not a directory".into()));
    }
    let user = effective_uid();
    if metadata.uid() != user {
        return Err(refuse(format!("it belongs to uid {}, not to this user (uid {user})", metadata.uid())));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(refuse(format!("others may write to it (mode {:o})", metadata.mode() & 0o777)));
    }
    Ok(())
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Compiles a module, through the engine's cache directory when it has one.
pub(crate) fn compile(engine: &PolicyEngine, bytes: &[u8]) -> Result<Module> {
    let Some(dir) = &engine.options().cache_dir else {
        return Module::new(engine.engine(), bytes);
    };
    let path = entry_path(engine, dir, bytes);
    match read_entry(&path) {
        Ok(Some(payload)) => {
            // SAFETY: the payload is what `store` below wrote from `Module::serialize` of this
            // engine configuration (the compatibility hash is part of the name): the file is this
            // user's, in a directory only this user can write, and its digest matches. wasmtime
            // checks the header again and refuses a mismatched artifact.
            match unsafe { Module::deserialize(engine.engine(), &payload) } {
                Ok(module) => {
                    tracing::debug!(path = %path.display(), "loaded a compiled module from the cache");
                    return Ok(module);
                }
                Err(e) => discard(&path, &format!("wasmtime refuses it: {e}")),
            }
        }
        Ok(None) => {}
        Err(why) => discard(&path, &why),
    }
    let module = Module::new(engine.engine(), bytes)?;
    if let Err(e) = store(&module, &path) {
        // The cache only saves time: a failure to write it is not a failure to load.
        tracing::warn!(path = %path.display(), "cannot write the compile cache: {e}");
    }
    Ok(module)
}

fn discard(path: &Path, why: &str) {
    tracing::warn!(path = %path.display(), "discarding a compile cache entry: {why}");
    let _ = fs::remove_file(path);
}

fn entry_path(engine: &PolicyEngine, dir: &Path, bytes: &[u8]) -> PathBuf {
    let mut hasher = DefaultHasher::new();
    engine.engine().precompile_compatibility_hash().hash(&mut hasher);
    let digest = hex::encode(Sha256::digest(bytes));
    dir.join(format!("{digest}-{:016x}.cwasm", hasher.finish()))
}

/// The payload of the entry at `path`: `None` when there is none; why not, when there is one that
/// must not be loaded (the entry is then discarded, and the reason logged).
fn read_entry(path: &Path) -> Result<Option<Vec<u8>>, String> {
    let metadata = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    if !metadata.file_type().is_file() {
        return Err("it is not a regular file".into());
    }
    if metadata.uid() != effective_uid() {
        return Err(format!("it belongs to uid {}, not to this user", metadata.uid()));
    }
    if metadata.mode() & 0o022 != 0 {
        return Err(format!("others may write to it (mode {:o})", metadata.mode() & 0o777));
    }
    let mut contents = Vec::with_capacity(metadata.len() as usize);
    File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .and_then(|mut file| file.read_to_end(&mut contents))
        .map_err(|e| format!("cannot read it: {e}"))?;
    let Some(rest) = contents.strip_prefix(MAGIC) else {
        return Err("it is not an entry of this cache's format".into());
    };
    if rest.len() < DIGEST_LEN {
        return Err("it is truncated".into());
    }
    let (digest, payload) = rest.split_at(DIGEST_LEN);
    if Sha256::digest(payload).as_slice() != digest {
        return Err("its contents do not match the digest written with it (damaged)".into());
    }
    Ok(Some(payload.to_vec()))
}

/// Writes an entry: to a new temporary file (exclusively created, never through a link), then
/// renamed into place, so a reader never sees half of one; then prunes the oldest entries. An
/// error is why not, for the log: the cache only saves time.
fn store(module: &Module, path: &Path) -> Result<(), String> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let dir = path.parent().ok_or("cache entry without a directory")?;
    let payload = module.serialize().map_err(|e| format!("{e:#}"))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("entry");
    let temporary =
        dir.join(format!(".{name}.{}.{}.tmp", std::process::id(), SEQUENCE.fetch_add(1, Ordering::Relaxed)));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(MAGIC)?;
            file.write_all(&Sha256::digest(&payload))?;
            file.write_all(&payload)?;
            file.sync_all()
        })
        .map_err(|e| format!("cannot write {}: {e}", temporary.display()));
    // A rename replaces a link at the destination; it never writes through it.
    let renamed = written.and_then(|()| {
        fs::rename(&temporary, path).map_err(|e| format!("cannot rename to {}: {e}", path.display()))
    });
    if renamed.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    renamed?;
    prune(dir);
    Ok(())
}

/// Removes the least recently written entries beyond [`MAX_ENTRIES`].
fn prune(dir: &Path) {
    let Ok(listing) = fs::read_dir(dir) else { return };
    let mut entries: Vec<(std::time::SystemTime, PathBuf)> = listing
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    if entries.len() <= MAX_ENTRIES {
        return;
    }
    entries.sort();
    for (_, path) in &entries[..entries.len() - MAX_ENTRIES] {
        let _ = fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests;
