//! The guest side every evac policy module shares: Kubewarden's `kubernetes` host capabilities as
//! the core's [`ClusterReader`](evac_core::ClusterReader), the arena allocator, and the answers
//! of `validate_settings`. A policy crate keeps only its decision's glue (`lib.rs`) and settings.

pub mod allocator;
mod capabilities;
mod settings;

#[cfg(target_os = "wasi")]
pub use capabilities::host_capabilities;
pub use capabilities::KubernetesCalls;
pub use settings::validate_settings;

/// Decodes a ValidationRequest with the policy's settings type: the first step of `validate`.
pub fn decode_request<'a, S>(payload: &'a [u8]) -> Result<evac_core::model::ValidationRequest<'a, S>, String>
where
    S: serde::Deserialize<'a> + Default,
{
    let text =
        evac_core::json_text(payload).map_err(|e| format!("cannot decode the validation request: {e}"))?;
    serde_json::from_str(text).map_err(|e| format!("cannot decode the validation request: {e}"))
}

/// Encodes a decision as the policy's answer: Kubewarden's ValidationResponse plus effects.
pub fn encode_decision(decision: evac_core::Decision) -> Result<Vec<u8>, String> {
    serde_json::to_vec(&evac_core::PolicyResponse::from(decision)).map_err(|e| e.to_string())
}
