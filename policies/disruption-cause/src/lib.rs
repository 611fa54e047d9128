//! disruption-cause: what is about to disrupt a KubeVirt `virt-launcher` pod (scheduler
//! preemption, a `NoExecute` taint, the kubelet's node-pressure eviction), as a Kubewarden policy
//! that marks the VM for evacuation instead of letting it shut down, and marks VMs ahead of the
//! kubelet on nodes short of memory.
//!
//! The decision lives in `evac-core`; this crate reads the objects it asks for through Kubewarden's
//! `kubernetes` host capabilities and returns Kubewarden's ValidationResponse plus the effects
//! (`MarkForEvacuation`, `RequestEvacuation`, `AnnotatePod`) that the host carries out. It
//! always allows a disruption: it runs on pod deletions, which it must never block. It also
//! answers the hold endpoint (a `CONNECT` of `pods/hold`): allowed ends a hold of a launcher
//! pod's termination, 429 keeps it while the VM migrates away; what it cannot decide ends the
//! hold, never keeps it.

use evac_core::disruption;
use evac_core::model::ValidationRequest;
use evac_core::trace::Trace;
use evac_core::{ClusterReader, PolicyResponse};
#[cfg(target_os = "wasi")]
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};

mod settings;

// Only in the policy module: linked into another program (the browser playground), the policy
// is its functions and the program keeps its own allocator.
#[cfg(target_os = "wasi")]
#[global_allocator]
static ALLOCATOR: evac_policy_guest::allocator::Arena = evac_policy_guest::allocator::Arena::new();

pub use settings::Settings;

/// The waPC entry point: registers the operations the host calls. Only in the policy module
/// (wasm32-wasip1): another program linking the crate calls [`evaluate`]-style functions itself.
// An exported, unmangled symbol is how every waPC host finds the entry point.
#[cfg(target_os = "wasi")]
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn wapc_init() {
    guest::register_function("validate", validate);
    guest::register_function("validate_settings", validate_settings);
    guest::register_function("protocol_version", kubewarden_policy_sdk::protocol_version_guest);
}

#[cfg(target_os = "wasi")]
fn validate(payload: &[u8]) -> CallResult {
    Ok(evaluate_at(payload, &evac_policy_guest::host_capabilities(), now())?)
}

/// The wall clock (WASI `clock_time_get`): a hold's window is measured against it. A host that
/// simulates a cluster answers with its simulated time.
#[cfg(any(target_os = "wasi", test))]
fn now() -> f64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(target_os = "wasi")]
fn validate_settings(payload: &[u8]) -> CallResult {
    Ok(settings_answer(payload)?)
}

/// Validates the policy's settings: Kubewarden's SettingsValidationResponse, encoded, as the
/// module's `validate_settings` answers.
pub fn settings_answer(payload: &[u8]) -> Result<Vec<u8>, String> {
    serde_json::to_vec(&settings::validate(payload)).map_err(|e| e.to_string())
}

/// Decodes a ValidationRequest, decides it at `now` (seconds since the Unix epoch) and encodes
/// the response.
///
/// A request the decision does not evaluate is rejected with the reason (a misconfigured
/// webhook rule). A failed read is not a reason to block a pod's deletion or a node's update, nor
/// to hold a pod's termination: the request is allowed, with the failure as a warning and no
/// effect. Only a payload that does not decode is a waPC error.
pub fn evaluate_at<C: ClusterReader>(payload: &[u8], cluster: &C, now: f64) -> Result<Vec<u8>, String> {
    evaluate_traced_at(payload, cluster, now, &mut Trace::off())
}

/// [`evaluate_at`], recording the decision's checks in `trace` (the browser playground shows them).
pub fn evaluate_traced_at<C: ClusterReader>(
    payload: &[u8],
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Result<Vec<u8>, String> {
    let validation: ValidationRequest<Settings> = evac_policy_guest::decode_request(payload)?;
    match disruption::decide_traced(&validation.request, validation.settings.inner(), cluster, now, trace) {
        Ok(decision) => evac_policy_guest::encode_decision(decision),
        Err(e @ disruption::DecideError::Read(_)) => {
            serde_json::to_vec(&allowed_with_warning(&e)).map_err(|e| e.to_string())
        }
        Err(e) => serde_json::to_vec(&rejection(&e)).map_err(|e| e.to_string()),
    }
}

fn allowed_with_warning(error: &disruption::DecideError) -> PolicyResponse {
    PolicyResponse {
        accepted: true,
        message: None,
        code: None,
        warnings: Some(vec![match error {
            disruption::DecideError::Read(read) if read.is_refused() => {
                format!("disruption-cause could not decide ({}): {error}", evac_core::cluster::REFUSAL_HINT)
            }
            _ => format!("disruption-cause could not decide: {error}"),
        }]),
        audit_annotations: None,
        mutated_object: None,
        effects: Vec::new(),
    }
}

fn rejection(error: &disruption::DecideError) -> PolicyResponse {
    PolicyResponse {
        accepted: false,
        message: Some(error.to_string()),
        code: Some(error.code()),
        warnings: None,
        audit_annotations: None,
        mutated_object: None,
        effects: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
