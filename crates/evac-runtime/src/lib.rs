//! evac's wasm host: runs Kubewarden policy modules on wasmtime.
//!
//! - [`wapc`]: the waPC host (compiling modules, isolated and reusable instances, deadlines and
//!   memory limits);
//! - [`kubewarden`]: Kubewarden's policy protocol on top of it (`validate`,
//!   `validate_settings`, `protocol_version`, policy metadata);
//! - [`capabilities`]: the host capabilities a policy may call, answered from an
//!   [`evac_cluster::ObjectSource`].
//!
//! The crate knows nothing of HTTP, async runtimes or Kubernetes clients: a module is evaluated
//! synchronously on the caller's thread, whoever the caller is (the policy server, the controller,
//! `evac eval`, a test).

#![warn(missing_docs)]

pub mod capabilities;
pub mod kubewarden;
pub mod wapc;
