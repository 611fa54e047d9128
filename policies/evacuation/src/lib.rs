//! evacuation: KubeVirt's evacuation controller, and its VMI controller's descheduler annotations,
//! as a Kubewarden policy on Nodes.
//!
//! The decision lives in `evac-core`; this crate reads the objects it asks for through Kubewarden's
//! `kubernetes` host capabilities and answers every update of a Node with Kubewarden's
//! ValidationResponse (accepted whenever it can be decided: the policy never blocks a drain) plus
//! the effects that the host carries out: `CreateMigration`, `AnnotatePod`, `ClearEvacuation`.
//! The module itself never writes.
//!
//! It depends on `evac-core` and `evac-policy-guest` only, never on a host crate.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use evac_core::evacuation::{self, Context, Flavor, RequestError};
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

#[cfg(test)]
mod tests;

/// Decodes a ValidationRequest, decides it at `now` (seconds since the Unix epoch) and encodes
/// the response. A request that cannot be decided is rejected with the reason (400 for a request
/// that is not an update of a Node, 500 for a failed read); only a payload that does not decode
/// is an error of the call itself.
///
/// `trace` records the decision's checks (the browser playground shows them; `Trace::off()`
/// records nothing).
pub fn evaluate_at<C: ClusterReader>(payload: &[u8], cluster: &C, now: f64, trace: &mut Trace) -> Answer {
    let validation: ValidationRequest<Settings> = evac_policy_guest::decode_request(payload)?;
    match evacuation::decide_request(
        &validation.request,
        &validation.settings,
        cluster,
        &mut Context { flavor: Flavor::Evac, now, trace },
    ) {
        Ok(decision) => evac_policy_guest::encode_decision(decision),
        Err(e) => Ok(serde_json::to_vec(&rejection(&e))?),
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
