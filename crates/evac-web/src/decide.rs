//! One admission request through one policy, in the page: the policy crate's own `evaluate`
//! function (the code its wasm module runs), over the pasted cluster objects, with the same
//! `validate` payload a Kubewarden host builds and the same answer it decodes.

use std::cell::RefCell;
use std::sync::Arc;

use chrono::DateTime;
use evac_cluster::{CoreReader, MemoryStore};
use evac_core::model::envelope;
use evac_core::trace::Trace;
use evac_core::{ClusterReader, PolicyId, PolicyResponse};
use evac_sim::SimClock;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::reads::Recording;
use crate::WebError;

/// The policy named `name` (its module's name: `pod-eviction`, ...).
pub fn policy(name: &str) -> Result<PolicyId, WebError> {
    name.parse().map_err(|e: evac_core::policy_id::UnknownPolicy| WebError::new(e.to_string()))
}

/// A verdict as the page shows it.
#[derive(Debug, Serialize)]
pub struct Answer {
    /// The policy's response, as its module returns it (effects included).
    pub response: PolicyResponse,
    /// The decision's checks in order, the answer last.
    pub trace: Vec<String>,
    /// The cluster reads the decision made, in order.
    pub reads: Vec<String>,
    /// Why the policy's `validate_settings` refuses the settings, when it does (a Kubewarden
    /// host would not serve the policy with them).
    pub settings_refused: Option<String>,
}

/// Decides `request` (an AdmissionReview or AdmissionRequest, JSON or YAML) with `policy` over
/// `objects` (a `v1 List`, JSON or YAML, as `kubectl get -o yaml` prints it; empty for none),
/// `settings` (JSON or YAML; empty for none) at `now` (seconds since the Unix epoch).
pub fn decide(
    policy: PolicyId,
    request: &str,
    objects: &str,
    settings: &str,
    now: f64,
) -> Result<Answer, WebError> {
    let request = envelope::request_from_input(to_json(request, "the request")?.as_bytes())
        .map_err(|e| WebError::new(e.to_string()))?;
    let settings = settings_of(settings)?;
    let start = DateTime::from_timestamp_millis((now * 1000.0) as i64)
        .ok_or_else(|| WebError::new(format!("the time {now} is out of range")))?;
    let clock = Arc::new(SimClock::starting_at(start));
    let store = if objects.trim().is_empty() {
        MemoryStore::new(clock, 16)
    } else {
        MemoryStore::from_objects_with_clock(objects_of(objects)?, clock)
            .map_err(|e| WebError::new(format!("the cluster objects: {e}")))?
    };
    decide_with(policy, &request, &settings, &CoreReader(&store), now)
}

thread_local! {
    /// The cluster text parsed last, and its objects: the page decides again at every keystroke
    /// in the request, and parsing the pasted cluster (YAML) is most of a verdict's time. The
    /// store is still built afresh for every decision, on that decision's clock.
    static PARSED: RefCell<Option<(String, Vec<Value>)>> = const { RefCell::new(None) };
}

/// The objects of a pasted `v1 List`, parsed once per text.
fn objects_of(text: &str) -> Result<Vec<Value>, WebError> {
    PARSED.with(|parsed| {
        let mut parsed = parsed.borrow_mut();
        if let Some((_, objects)) = parsed.as_ref().filter(|(seen, _)| seen == text) {
            return Ok(objects.clone());
        }
        let objects =
            evac_cluster::list_items(text).map_err(|e| WebError::new(format!("the cluster objects: {e}")))?;
        *parsed = Some((text.to_owned(), objects.clone()));
        Ok(objects)
    })
}

/// [`decide`] on a request and settings already in JSON, over any reader of the cluster: what
/// the page runs once it has read its inputs (and what a harness runs with reads made to fail).
pub fn decide_with(
    policy: PolicyId,
    request: &RawValue,
    settings: &RawValue,
    cluster: &dyn ClusterReader,
    now: f64,
) -> Result<Answer, WebError> {
    // A host refuses to serve a policy whose settings it rejects; the page says so and still
    // shows what `validate` answers with them, as the module would.
    let settings_refused = check_settings(policy, settings)?;
    let payload = envelope::validation_payload(request, settings);
    let reader = Recording::new(cluster);
    let mut trace = Trace::on();
    let encoded = match policy {
        PolicyId::PodEviction => pod_eviction::evaluate_traced(&payload, &reader, &mut trace),
        PolicyId::DisruptionCause => disruption_cause::evaluate_at(&payload, &reader, now, &mut trace),
        PolicyId::Evacuation => evacuation::evaluate_at(&payload, &reader, now, &mut trace),
        PolicyId::LauncherHold => launcher_hold::evaluate(&payload),
    }
    .map_err(|e| WebError::new(format!("the policy could not evaluate the request: {e}")))?;
    let response: PolicyResponse = serde_json::from_slice(&encoded)
        .map_err(|e| WebError::new(format!("the policy's answer does not decode: {e}")))?;
    let reads = reader.into_reads();
    Ok(Answer { response, trace: trace.into_steps(), reads, settings_refused })
}

/// The settings' validation as the module answers `validate_settings`: `Some(why)` when invalid.
fn check_settings(policy: PolicyId, settings: &RawValue) -> Result<Option<String>, WebError> {
    let payload = settings.get().as_bytes();
    let answer = match policy {
        PolicyId::PodEviction => pod_eviction::settings_answer(payload),
        PolicyId::DisruptionCause => disruption_cause::settings_answer(payload),
        PolicyId::Evacuation => evacuation::settings_answer(payload),
        PolicyId::LauncherHold => launcher_hold::settings_answer(payload),
    }
    .map_err(|e| WebError::new(e.to_string()))?;
    let answer: Value = serde_json::from_slice(&answer).map_err(|e| WebError::new(e.to_string()))?;
    Ok((answer["valid"] != Value::Bool(true))
        .then(|| answer["message"].as_str().unwrap_or("without a reason").to_owned()))
}

/// Settings as JSON: an object or `null`, or `{}` when nothing is given.
fn settings_of(text: &str) -> Result<Box<RawValue>, WebError> {
    let json = if text.trim().is_empty() { "{}".to_owned() } else { to_json(text, "the settings")? };
    let value: Value = serde_json::from_str(&json).map_err(|e| WebError::new(e.to_string()))?;
    // `null` stays `null`, as Kubewarden passes a policy without settings.
    let json = match value {
        Value::Null | Value::Object(_) => json,
        _ => return Err(WebError::new("the settings must be an object")),
    };
    RawValue::from_string(json).map_err(|e| WebError::new(e.to_string()))
}

/// JSON text as it is, or YAML turned into JSON.
pub(crate) fn to_json(text: &str, what: &str) -> Result<String, WebError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return Ok(text.to_owned());
    }
    let value: Value = serde_yaml::from_str(text)
        .map_err(|e| WebError::new(format!("{what} is neither JSON nor YAML: {e}")))?;
    serde_json::to_string(&value).map_err(|e| WebError::new(e.to_string()))
}
