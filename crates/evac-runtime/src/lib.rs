//! evac's policy host: Kubewarden's protocol and host capabilities for any policy, and (feature
//! `wasmtime`, on by default) the waPC host that runs policy modules on wasmtime.
//!
//! - [`policy`]: what the host needs of a policy ([`WapcPolicy`]: waPC calls answered), however
//!   it runs;
//! - `wapc` (feature `wasmtime`, on by default): the waPC host (compiling modules, isolated and
//!   reusable instances, deadlines and memory limits);
//! - [`kubewarden`]: Kubewarden's policy protocol over any [`WapcPolicy`] (`validate`,
//!   `validate_settings`, `protocol_version`; policy metadata with `wasmtime`);
//! - [`capabilities`]: the host capabilities a policy may call, answered from an
//!   [`evac_cluster::ObjectSource`].
//!
//! The crate knows nothing of HTTP, async runtimes or Kubernetes clients: a module is evaluated
//! synchronously on the caller's thread, whoever the caller is (the policy server, the controller,
//! `evac eval`, a test). Without `wasmtime` it builds for `wasm32-unknown-unknown`: the browser
//! playground's policies answer through the same protocol and capabilities.
//!
//! It depends on `evac-core` and `evac-cluster` only among evac's crates.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![warn(missing_docs)]

pub mod capabilities;
pub mod kubewarden;
pub mod policy;
#[cfg(feature = "wasmtime")]
pub mod wapc;

pub use policy::{EvalError, InstanceStats, WapcPolicy};
