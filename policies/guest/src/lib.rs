//! The guest side every evac policy module shares: its waPC glue ([`policy!`]), Kubewarden's
//! `kubernetes` host capabilities as the core's [`ClusterReader`](evac_core::ClusterReader), the
//! arena allocator, and the answers of `validate_settings`. A policy crate keeps only its
//! decision's evaluation (`lib.rs`).
//!
//! It depends on `evac-core` only among evac's crates, and must not depend on any host crate: a
//! module reads only through host capabilities and never writes.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod allocator;
mod capabilities;
mod error;
mod glue;
mod settings;

#[cfg(target_os = "wasi")]
pub use capabilities::host_capabilities;
pub use capabilities::KubernetesCalls;
pub use error::GuestError;
pub use settings::{
    check_settings_table, settings_answer, validate_settings, DecisionSettings, SettingsVerdict,
};

/// The core, for what [`policy!`] writes in a policy crate.
#[doc(hidden)]
pub use evac_core;

/// The SDK, for what [`policy!`] writes in a policy crate.
#[doc(hidden)]
pub use kubewarden_policy_sdk;

/// A policy's answer to `validate`: the encoded ValidationResponse (plus effects), or why the
/// module answers with a waPC error instead.
pub type Answer = Result<Vec<u8>, GuestError>;

/// Decodes a ValidationRequest with the policy's settings type: the first step of `validate`.
pub fn decode_request<'a, S>(
    payload: &'a [u8],
) -> Result<evac_core::model::ValidationRequest<'a, S>, GuestError>
where
    S: serde::Deserialize<'a> + Default,
{
    let text = evac_core::json_text(payload).map_err(|e| GuestError::Request(e.to_string()))?;
    serde_json::from_str(text).map_err(|e| GuestError::Request(e.to_string()))
}

/// Encodes a decision as the policy's answer: Kubewarden's ValidationResponse plus effects.
pub fn encode_decision(decision: evac_core::Decision) -> Answer {
    Ok(serde_json::to_vec(&evac_core::PolicyResponse::from(decision))?)
}

/// The wall clock in seconds since the Unix epoch (in a module, WASI's `clock_time_get`): what a
/// module's decisions that depend on time (back-offs, a hold's window) are measured against. A
/// host that simulates a cluster answers with its simulated time; a program linking the policy
/// crates passes its own clock instead.
pub fn wall_clock() -> f64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}
