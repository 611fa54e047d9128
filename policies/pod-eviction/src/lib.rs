//! pod-eviction: KubeVirt's `pods/eviction` verdict as a Kubewarden policy.
//!
//! The decision lives in `evac-core`; this crate reads the objects it asks for through Kubewarden's
//! `kubernetes` host capabilities and returns Kubewarden's ValidationResponse plus the effects
//! (`MarkForEvacuation`) that the host carries out. The module itself never writes.

use evac_core::eviction;
use evac_core::model::ValidationRequest;
use evac_core::{ClusterReader, PolicyResponse};
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};

#[cfg(any(target_arch = "wasm32", test))]
mod allocator;
mod capabilities;
mod settings;

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: allocator::Arena = allocator::Arena::new();

pub use settings::Settings;

#[no_mangle]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function("validate_settings", validate_settings);
    guest::register_function("protocol_version", kubewarden_policy_sdk::protocol_version_guest);
}

fn validate(payload: &[u8]) -> CallResult {
    Ok(evaluate(payload, &capabilities::HostCapabilities)?)
}

fn validate_settings(payload: &[u8]) -> CallResult {
    Ok(serde_json::to_vec(&settings::validate(payload))?)
}

/// Decodes a ValidationRequest, decides it and encodes the response.
pub fn evaluate<C: ClusterReader>(payload: &[u8], cluster: &C) -> Result<Vec<u8>, String> {
    let text =
        evac_core::json_text(payload).map_err(|e| format!("cannot decode the validation request: {e}"))?;
    let validation: ValidationRequest<Settings> =
        serde_json::from_str(text).map_err(|e| format!("cannot decode the validation request: {e}"))?;
    let decision = eviction::decide(&validation.request, validation.settings.inner(), cluster)
        .map_err(|e| e.to_string())?;
    serde_json::to_vec(&PolicyResponse::from(decision)).map_err(|e| e.to_string())
}
