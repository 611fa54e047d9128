use std::path::PathBuf;
use std::time::Duration;

pub use crate::policy::EvalError;

/// Why a [`PolicyEngine`](super::PolicyEngine) could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// wasmtime refused the engine's configuration.
    #[error("cannot set up the wasm engine: {0}")]
    Setup(String),
    /// The compile cache's directory cannot serve.
    #[error(transparent)]
    CacheDir(#[from] CacheDirError),
    /// The thread that advances deadlines could not be started.
    #[error("cannot start the epoch thread: {0}")]
    EpochThread(std::io::Error),
}

/// Why a directory cannot hold the compile cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheDirError {
    /// It was missing and could not be created.
    #[error("cannot create the compile cache directory {}: {error}", .dir.display())]
    Create {
        /// The directory.
        dir: PathBuf,
        /// Why not.
        error: std::io::Error,
    },
    /// Its metadata could not be read.
    #[error("cannot read the compile cache directory {}: {error}", .dir.display())]
    Read {
        /// The directory.
        dir: PathBuf,
        /// Why not.
        error: std::io::Error,
    },
    /// It is there but others could change what it holds.
    #[error(
        "refusing the compile cache directory {}: {why}; it holds machine code the server runs, so \
         it must be a directory only this user can write",
        .dir.display()
    )]
    Unsafe {
        /// The directory.
        dir: PathBuf,
        /// What makes it unsafe.
        why: String,
    },
}

/// Why a policy module could not be loaded: each variant is the message a user reads.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// The module file could not be read.
    #[error("cannot read policy module {}: {error}", .path.display())]
    Read {
        /// The module file.
        path: PathBuf,
        /// Why not.
        error: std::io::Error,
    },
    /// The module file was read but is no policy module.
    #[error("cannot load policy module {}: {error}", .path.display())]
    Load {
        /// The module file.
        path: PathBuf,
        /// Why not.
        error: Box<ModuleError>,
    },
    /// The bytes are neither the binary format nor WebAssembly text.
    #[error(
        "not a WebAssembly module: it starts with neither the binary format's magic bytes (\\0asm) \
         nor WebAssembly text"
    )]
    NotWebAssembly,
    /// The bytes do not parse, validate or compile (the first line of why).
    #[error("not a valid WebAssembly module: {0}")]
    Invalid(String),
    /// The module's initial memory is beyond the engine's limit.
    #[error(
        "the module starts with {initial_kib} KiB of memory, more than the memory limit of {limit_kib} KiB"
    )]
    MemoryOverLimit {
        /// The memory it starts with.
        initial_kib: u64,
        /// The engine's limit.
        limit_kib: usize,
    },
    /// It lacks what makes a module a waPC policy (exports, signatures).
    #[error("{0}")]
    NotWapc(String),
    /// It imports functions the host does not provide.
    #[error("the module needs imports the evac host does not provide: {0}")]
    Imports(String),
    /// The host's functions could not be linked (a host defect, not the module's).
    #[error("cannot link the host functions: {0}")]
    Link(String),
}

/// Marks a memory growth refused by the limiter, so the trap it causes is reported as such.
#[derive(Debug)]
pub(crate) struct MemoryLimitExceeded;

impl std::fmt::Display for MemoryLimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("memory limit exceeded")
    }
}

impl std::error::Error for MemoryLimitExceeded {}

/// The first line of an error with its causes (as `{:#}` shows them): what a one-line message
/// about a module needs of a parser's or compiler's report.
pub(crate) fn first_line(error: &dyn std::fmt::Display) -> String {
    format!("{error:#}").lines().next().unwrap_or_default().to_owned()
}

/// Describes a wasmtime error on one line: the trap, and the innermost function it happened in.
pub(crate) fn describe_trap(error: &wasmtime::Error) -> String {
    let what = match error.downcast_ref::<wasmtime::Trap>() {
        Some(trap) => trap.to_string(),
        None => error.root_cause().to_string(),
    };
    let frame = error
        .downcast_ref::<wasmtime::WasmBacktrace>()
        .and_then(|bt| bt.frames().iter().find_map(|f| f.func_name().map(str::to_owned)));
    let what = what.lines().next().unwrap_or_default().to_owned();
    match frame {
        Some(function) => format!("{what} (in {function})"),
        None => what,
    }
}

/// Maps a failed guest call to what happened.
pub(crate) fn classify(error: wasmtime::Error, memory_limit: usize, timeout: Duration) -> EvalError {
    if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
        return EvalError::MemoryLimit(memory_limit);
    }
    if let Some(wasmtime::Trap::Interrupt) = error.downcast_ref::<wasmtime::Trap>() {
        return EvalError::Timeout(timeout);
    }
    EvalError::Trap(describe_trap(&error))
}
