//! The hold endpoint's one question, the same wherever it runs (`evac hold` on a node, the
//! simulator's node endpoint, a benchmark): may a held launcher pod's termination go on?
//!
//! A kubelet running a launcher container's `preStop` hook calls the node's hold endpoint; the
//! endpoint asks the `disruption-cause` policy through the pipeline (mode, shadow, effects) with
//! a `CONNECT` of `pods/hold` ([`evac_core::hold::decision`]) as often as it needs to, and answers
//! the kubelet when the hold ends. The endpoint never holds blindly: an evaluation that fails, a
//! policy in monitor mode, an answer that is neither an allow nor a 429, all end the hold, as
//! KubeVirt alone would have had it end. The start and end of a hold are `Normal` events on the
//! pod (`TerminationHeld`, `TerminationReleased`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use evac_core::effect::{EventReason, ObjectRef};
use evac_core::hold::{HELD_SINCE_ANNOTATION, HOLD_RELEASED_AUDIT_ANNOTATION, HOLD_SUBRESOURCE};
use evac_core::kubevirt::POD_KIND;
use evac_evaluator::{Pipeline, PolicyMode};
use serde_json::value::RawValue;

use crate::DISRUPTION_CAUSE;

/// What the endpoint answers a hook with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Keep holding: the VM migrates away (the policy's words).
    Hold(String),
    /// End the hold, for this reason.
    Release(String),
}

/// Asks `disruption-cause` about holds, through a pipeline.
#[derive(Clone)]
pub struct Holder {
    pipeline: Pipeline,
}

/// Hold request uids, unique within the process.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

impl Holder {
    /// Holds decided by the pipeline's `disruption-cause` policy, effects carried out by its
    /// executor.
    pub fn new(pipeline: Pipeline) -> Self {
        Self { pipeline }
    }

    /// The pipeline it asks through.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Whether the termination of `pod` (its JSON, as the endpoint last read it), whose hook on
    /// `container` began at `started_at` (seconds since the Unix epoch), is still to be held. The
    /// hold's start and end are recorded as events on the pod.
    pub async fn ask(&self, pod: &str, started_at: f64, container: &str) -> Verdict {
        let head: PodHead<'_> = serde_json::from_str(pod).unwrap_or_default();
        let pod_ref = ObjectRef::new(head.metadata.namespace, head.metadata.name);
        let verdict = self.decide(pod, &pod_ref, started_at, container).await;
        let executor = self.pipeline.executor();
        match &verdict {
            Verdict::Hold(message) => {
                executor.tell_pod(&pod_ref, "", EventReason::TerminationHeld, message).await;
            }
            // Only a pod that was held: every other launcher pod's hook is answered at once.
            Verdict::Release(why) if head.metadata.annotations.contains_key(HELD_SINCE_ANNOTATION) => {
                let message = format!("evac ended the hold of the pod's termination: {why}");
                executor.tell_pod(&pod_ref, "", EventReason::TerminationReleased, &message).await;
            }
            Verdict::Release(_) => {}
        }
        verdict
    }

    async fn decide(&self, pod: &str, pod_ref: &ObjectRef, started_at: f64, container: &str) -> Verdict {
        let Some(served) = self.pipeline.registry().current().get(DISRUPTION_CAUSE).cloned() else {
            return Verdict::Release(format!("no policy `{DISRUPTION_CAUSE}` is served to decide holds"));
        };
        let uid = format!("evac-hold-{}", NEXT_UID.fetch_add(1, Ordering::Relaxed));
        let request = hold_request(&uid, pod_ref, pod, started_at, container);
        let (evaluation, shadow) = self.pipeline.evaluate(&served, Arc::new(request), &uid).await;
        if let Some(shadow) = shadow {
            shadow.run().await;
        }
        let response = match evaluation.outcome {
            Ok(response) => response,
            Err(fault) => {
                return Verdict::Release(format!("evac could not decide ({}): {}", fault.kind, fault.message))
            }
        };
        let why = || {
            response
                .audit_annotations
                .as_ref()
                .and_then(|a| a.get(HOLD_RELEASED_AUDIT_ANNOTATION).cloned())
                .or_else(|| response.warnings.as_ref().map(|w| w.join("; ")))
                .unwrap_or_else(|| "the policy allowed it".to_owned())
        };
        let message = response.message.clone().unwrap_or_default();
        match (response.accepted, response.code, evaluation.mode) {
            (true, _, _) => Verdict::Release(why()),
            (false, Some(429), PolicyMode::Monitor) => {
                Verdict::Release(format!("monitor mode (the policy would hold: {message})"))
            }
            (false, Some(429), PolicyMode::Protect) => Verdict::Hold(message),
            (false, code, _) => Verdict::Release(format!(
                "the policy refused the hold request ({}): {message}",
                code.map_or_else(|| "no code".to_owned(), |c| c.to_string())
            )),
        }
    }
}

/// The `CONNECT` of `pods/hold` the endpoint sends: the pod spliced in as it was read.
pub fn hold_request(
    uid: &str,
    pod: &ObjectRef,
    object: &str,
    started_at: f64,
    container: &str,
) -> Box<RawValue> {
    let started = chrono_free_timestamp(started_at);
    let head = serde_json::json!({
        "uid": uid,
        "kind": {"group": "", "version": POD_KIND.0, "kind": POD_KIND.1},
        "resource": {"group": "", "version": POD_KIND.0, "resource": "pods"},
        "subResource": HOLD_SUBRESOURCE,
        "name": pod.name,
        "namespace": pod.namespace,
        "operation": "CONNECT",
        "userInfo": {"username": "system:serviceaccount:evac:evac-hold"},
        "options": {"apiVersion": "evac.kubevirt.io/v1alpha1", "kind": "HoldOptions",
                    "startedAt": started, "container": container},
        "dryRun": false,
    });
    let mut text = head.to_string();
    text.pop();
    text.push_str(r#","object":"#);
    text.push_str(if serde_json::from_str::<&RawValue>(object).is_ok() { object } else { "null" });
    text.push('}');
    RawValue::from_string(text).expect("an object spliced into a JSON object is JSON")
}

/// RFC 3339 in whole seconds, UTC (`1970-01-01T00:00:00Z`), without a calendar library.
fn chrono_free_timestamp(seconds: f64) -> String {
    let secs = seconds.max(0.0).floor() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

#[derive(Default, serde::Deserialize)]
struct PodHead<'a> {
    #[serde(borrow, default)]
    metadata: Metadata<'a>,
}

#[derive(Default, serde::Deserialize)]
struct Metadata<'a> {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(borrow, default)]
    annotations: std::collections::BTreeMap<&'a str, &'a RawValue>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(chrono_free_timestamp(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(chrono_free_timestamp(1_795_254_300.7), "2026-11-21T09:45:00Z");
        assert_eq!(chrono_free_timestamp(951_782_400.0), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn the_request_carries_the_pod_and_the_hold() {
        let pod = r#"{"metadata":{"name":"virt-launcher-vm-x","namespace":"default"}}"#;
        let request = hold_request(
            "u",
            &ObjectRef::new("default", "virt-launcher-vm-x"),
            pod,
            1_795_254_300.0,
            "compute",
        );
        let value: serde_json::Value = serde_json::from_str(request.get()).unwrap();
        assert_eq!(value["object"]["metadata"]["name"], "virt-launcher-vm-x");
        assert_eq!(value["subResource"], "hold");
        assert_eq!(value["operation"], "CONNECT");
        assert_eq!(value["options"]["startedAt"], "2026-11-21T09:45:00Z");
        assert_eq!(value["options"]["container"], "compute");
        let broken = hold_request("u", &ObjectRef::new("d", "p"), "{not json", 0.0, "c");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(broken.get()).unwrap()["object"],
            serde_json::Value::Null
        );
    }
}
