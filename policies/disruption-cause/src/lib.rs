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
//!
//! It depends on `evac-core` and `evac-policy-guest` only, never on a host crate.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use evac_core::disruption;
use evac_core::model::ValidationRequest;
use evac_core::trace::Trace;
use evac_core::{ClusterReader, PolicyResponse};
use evac_policy_guest::Answer;

mod settings;

pub use settings::Settings;

evac_policy_guest::policy! {
    settings: Settings,
    evaluate_at: evaluate_at,
}

/// Decodes a ValidationRequest, decides it at `now` (seconds since the Unix epoch) and encodes
/// the response.
///
/// A request the decision does not evaluate is rejected with the reason (a misconfigured
/// webhook rule). A failed read is not a reason to block a pod's deletion or a node's update, nor
/// to hold a pod's termination: the request is allowed, with the failure as a warning and no
/// effect. Only a payload that does not decode is a waPC error.
///
/// `trace` records the decision's checks (the browser playground shows them; `Trace::off()`
/// records nothing).
pub fn evaluate_at<C: ClusterReader>(payload: &[u8], cluster: &C, now: f64, trace: &mut Trace) -> Answer {
    let validation: ValidationRequest<Settings> = evac_policy_guest::decode_request(payload)?;
    match disruption::decide_traced(&validation.request, &validation.settings, cluster, now, trace) {
        Ok(decision) => evac_policy_guest::encode_decision(decision),
        Err(e @ disruption::DecideError::Read(_)) => Ok(serde_json::to_vec(&allowed_with_warning(&e))?),
        Err(e) => Ok(serde_json::to_vec(&rejection(&e))?),
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
