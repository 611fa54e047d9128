use std::time::Duration;

pub use crate::policy::EvalError;

/// Marks a memory growth refused by the limiter, so the trap it causes is reported as such.
#[derive(Debug)]
pub(crate) struct MemoryLimitExceeded;

impl std::fmt::Display for MemoryLimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("memory limit exceeded")
    }
}

impl std::error::Error for MemoryLimitExceeded {}

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
