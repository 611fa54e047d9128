//! evacuation: KubeVirt's evacuation controller, and its VMI controller's descheduler annotations,
//! as a Kubewarden policy on Nodes.
//!
//! The decision lives in `evac-core`; this crate reads the objects it asks for through Kubewarden's
//! `kubernetes` host capabilities and answers every update of a Node with Kubewarden's
//! ValidationResponse (accepted whenever it can be decided: the policy never blocks a drain) plus
//! the effects that the host carries out: `CreateMigration`, `AnnotatePod`, `ClearEvacuation`.
//! The module itself never writes.

use evac_core::evacuation::{self, RequestError};
use evac_core::model::ValidationRequest;
use evac_core::trace::Trace;
use evac_core::{ClusterReader, PolicyResponse};
#[cfg(target_os = "wasi")]
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult};

mod settings;
#[cfg(test)]
mod tests;

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

#[cfg(target_os = "wasi")]
fn validate_settings(payload: &[u8]) -> CallResult {
    Ok(settings_answer(payload)?)
}

/// Validates the policy's settings: Kubewarden's SettingsValidationResponse, encoded, as the
/// module's `validate_settings` answers.
pub fn settings_answer(payload: &[u8]) -> Result<Vec<u8>, String> {
    serde_json::to_vec(&settings::validate(payload)).map_err(|e| e.to_string())
}

/// The wall clock (WASI `clock_time_get`): back-offs are measured against it. A host that
/// simulates a cluster answers with its simulated time.
#[cfg(any(target_os = "wasi", test))]
fn now() -> f64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Decodes a ValidationRequest, decides it at `now` (seconds since the Unix epoch) and encodes
/// the response. A request that cannot be decided is rejected with the reason (400 for a request
/// that is not an update of a Node, 500 for a failed read); only a payload that does not decode
/// is an error of the call itself.
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
    match evacuation::decide_request_traced(
        &validation.request,
        validation.settings.inner(),
        cluster,
        now,
        trace,
    ) {
        Ok(decision) => evac_policy_guest::encode_decision(decision),
        Err(e) => serde_json::to_vec(&rejection(&e)).map_err(|e| e.to_string()),
    }
}

fn rejection(error: &RequestError) -> PolicyResponse {
    PolicyResponse {
        accepted: false,
        message: Some(match error {
            RequestError::Read(read) if read.is_refused() => {
                format!("{error} ({})", evac_core::cluster::REFUSAL_HINT)
            }
            _ => error.to_string(),
        }),
        code: Some(error.code()),
        warnings: None,
        audit_annotations: None,
        mutated_object: None,
        effects: Vec::new(),
    }
}
