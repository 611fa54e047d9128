//! pod-eviction: KubeVirt's `pods/eviction` verdict as a Kubewarden policy.
//!
//! The decision lives in `evac-core`; this crate reads the objects it asks for through Kubewarden's
//! `kubernetes` host capabilities and returns Kubewarden's ValidationResponse plus the effects
//! (`MarkForEvacuation`) that the host carries out. The module itself never writes.

use evac_core::eviction;
use evac_core::model::ValidationRequest;
use evac_core::ClusterReader;
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};

mod settings;

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: evac_policy_guest::allocator::Arena = evac_policy_guest::allocator::Arena::new();

pub use settings::Settings;

/// The waPC entry point: registers the operations the host calls.
// An exported, unmangled symbol is how every waPC host finds the entry point.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function("validate_settings", validate_settings);
    guest::register_function("protocol_version", kubewarden_policy_sdk::protocol_version_guest);
}

fn validate(payload: &[u8]) -> CallResult {
    Ok(evaluate(payload, &evac_policy_guest::HostCapabilities)?)
}

fn validate_settings(payload: &[u8]) -> CallResult {
    Ok(serde_json::to_vec(&settings::validate(payload))?)
}

/// Decodes a ValidationRequest, decides it and encodes the response.
pub fn evaluate<C: ClusterReader>(payload: &[u8], cluster: &C) -> Result<Vec<u8>, String> {
    let validation: ValidationRequest<Settings> = evac_policy_guest::decode_request(payload)?;
    let decision = eviction::decide(&validation.request, validation.settings.inner(), cluster)
        .map_err(|e| e.to_string())?;
    evac_policy_guest::encode_decision(decision)
}
