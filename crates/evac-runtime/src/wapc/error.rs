use std::time::Duration;

/// Why an evaluation produced no answer. Each variant is one clear line for a user.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The evaluation ran past its deadline.
    #[error("the policy ran past its time limit of {}ms", .0.as_millis())]
    Timeout(Duration),
    /// The guest tried to grow its memory past the limit.
    #[error("the policy exceeded its memory limit of {} MiB", .0 / (1024 * 1024))]
    MemoryLimit(usize),
    /// The guest trapped (unreachable, out-of-bounds access, ...).
    #[error("the policy trapped: {0}")]
    Trap(String),
    /// The guest answered with a waPC error.
    #[error("the policy returned an error: {0}")]
    Guest(String),
    /// The guest's answer does not decode.
    #[error("the policy's answer is not a valid {what}: {reason}")]
    BadResponse {
        /// What the answer should have been (`ValidationResponse`, ...).
        what: &'static str,
        /// Why it is not.
        reason: String,
    },
    /// No instance could be created.
    #[error("the policy could not be started: {0}")]
    Instantiate(String),
    /// Every evaluation slot stayed busy until the deadline: too many evaluations at once.
    #[error("the host had no free evaluation slot ({0} in flight) before the deadline")]
    Overloaded(u32),
    /// The host's own code failed during the evaluation (a host capability panicked): not the
    /// policy's fault, and not a verdict.
    #[error("the host failed while evaluating the policy: {0}")]
    HostPanic(String),
}

impl EvalError {
    /// A short label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "timeout",
            Self::MemoryLimit(_) => "memory_limit",
            Self::Trap(_) => "trap",
            Self::Guest(_) => "guest_error",
            Self::BadResponse { .. } => "bad_response",
            Self::Instantiate(_) => "instantiate",
            Self::Overloaded(_) => "overloaded",
            Self::HostPanic(_) => "host_panic",
        }
    }
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
