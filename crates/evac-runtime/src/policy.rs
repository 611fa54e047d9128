//! What a policy host needs of a policy, however the policy runs: Kubewarden's waPC calls
//! (`validate`, `validate_settings`, `protocol_version`) answered with bytes, or why not.
//!
//! The wasm host (`wapc::Policy`, feature `wasmtime`) runs a module on wasmtime; the
//! browser playground links the policy crates themselves and answers the same calls with the
//! same code. The evaluation pipeline sees only this trait.

use std::time::Duration;

/// A policy that answers Kubewarden's waPC calls.
pub trait WapcPolicy: Send + Sync {
    /// Calls a waPC operation (`validate`, ...) and returns the policy's answer.
    fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, EvalError>;

    /// Creates idle instances ahead of the first evaluations, where the policy has instances.
    fn prewarm(&self) -> Result<(), EvalError> {
        Ok(())
    }

    /// Counters of the policy's instances, where it has instances.
    fn instance_stats(&self) -> Option<InstanceStats> {
        None
    }
}

/// Counters of a module's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceStats {
    /// Instances created.
    pub created: u64,
    /// Evaluations that ran on an instance reset to its post-init state.
    pub reused: u64,
}

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
