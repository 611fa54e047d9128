//! One admission request, from the AdmissionReview's bytes to the AdmissionReview answered:
//! evaluate with the active version, carry out its effects, apply the policy mode, and compare
//! with the shadow version when there is one.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use evac_core::PolicyResponse;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::config::PolicyMode;
use super::metrics::{EffectLabels, FaultLabels, Metrics, ShadowLabels};
use super::registry::{ServedPolicy, Version};
use crate::cluster::ClusterWriter;
use crate::kubewarden;
use crate::wapc::EvalError;

/// KubeVirt's words when marking the VMI fails (`kubevirt failed marking the vmi for eviction`).
pub const FAILED_MARKING: &str = "kubevirt failed marking the vmi for eviction";

/// The audit annotations that say which version answered.
pub const VERSION_ANNOTATION: &str = "evac-policy-version";
pub const DIGEST_ANNOTATION: &str = "evac-policy-digest";

/// Why a request was not evaluated; answered with an HTTP error status.
#[derive(Debug)]
pub struct BadRequest(pub String);

#[derive(Deserialize)]
struct Review<'a> {
    #[serde(rename = "apiVersion", default)]
    api_version: Cow<'a, str>,
    #[serde(default)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    request: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct RequestHead<'a> {
    #[serde(borrow)]
    uid: Option<Cow<'a, str>>,
}

/// An AdmissionReview's request, checked: its raw JSON and its uid.
pub struct ParsedReview {
    pub request: Box<RawValue>,
    pub uid: String,
}

/// Checks the envelope: an `admission.k8s.io/v1` AdmissionReview with a request that has a uid.
pub fn parse_review(body: &[u8]) -> Result<ParsedReview, BadRequest> {
    let bad = |why: String| BadRequest(format!("invalid AdmissionReview: {why}"));
    let text = std::str::from_utf8(body).map_err(|e| bad(format!("not UTF-8: {e}")))?;
    let review: Review<'_> = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    if review.kind != "AdmissionReview" || review.api_version != "admission.k8s.io/v1" {
        return Err(bad(format!(
            "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got {:?} {:?}",
            review.api_version, review.kind
        )));
    }
    let request = review.request.ok_or_else(|| bad("no request".into()))?;
    let head: RequestHead<'_> =
        serde_json::from_str(request.get()).map_err(|e| bad(format!("request: {e}")))?;
    let uid = head.uid.filter(|uid| !uid.is_empty()).ok_or_else(|| bad("the request has no uid".into()))?;
    Ok(ParsedReview { uid: uid.into_owned(), request: request.to_owned() })
}

/// What answering one request needs besides the request.
pub struct Context {
    pub writer: Arc<dyn ClusterWriter>,
    pub metrics: Arc<Metrics>,
}

/// Evaluates a request with the policy's active version and answers the AdmissionReview.
pub async fn answer(context: &Context, served: Arc<ServedPolicy>, review: ParsedReview) -> ReviewAnswer {
    let started = Instant::now();
    let active = Arc::clone(&served.active);
    let request = Arc::new(review.request);
    let result = evaluate(&active, &request).await;
    // What a shadow comparison needs, kept only when there is a shadow.
    let compared =
        served.shadow.as_ref().map(|_| (result.as_ref().map(Verdict::of).ok(), review.uid.clone()));
    let outcome = match result {
        Ok(response) => Ok(carry_out(context, &served, response).await),
        Err(e) => Err((e.label(), e.to_string())),
    };
    let verdict = final_verdict(&served, &active, review.uid, outcome, context);
    served.latency.observe(started.elapsed().as_secs_f64());

    if let (Some(shadow), Some((active_verdict, uid))) = (&served.shadow, compared) {
        // Off the answer's path: the candidate never delays or changes it.
        let (shadow, metrics, served) =
            (Arc::clone(shadow), Arc::clone(&context.metrics), Arc::clone(&served));
        tokio::spawn(async move {
            let candidate = evaluate(&shadow, &request).await;
            compare(&metrics, &served, &shadow, &uid, active_verdict.as_ref(), &candidate);
        });
    }
    verdict
}

/// Evaluations slower than this move to the blocking pool.
const INLINE_BUDGET: Duration = Duration::from_millis(5);

/// Runs the module. Evaluations take tens of microseconds, less than handing them to another
/// thread costs, so they run on the connection's own thread; a version that once ran past
/// [`INLINE_BUDGET`] (a slow or looping module) runs on the blocking pool from then on, so it
/// cannot hold the connection threads up to its deadline again and again.
async fn evaluate(version: &Arc<Version>, request: &Arc<Box<RawValue>>) -> Result<PolicyResponse, EvalError> {
    if !version.offloaded.load(Ordering::Relaxed) {
        let started = Instant::now();
        let result = kubewarden::validate(&version.policy, request, &version.settings);
        if started.elapsed() > INLINE_BUDGET {
            tracing::info!(version = %version.name, "slow evaluations: moving this version to the blocking pool");
            version.offloaded.store(true, Ordering::Relaxed);
        }
        return result;
    }
    let (version, request) = (Arc::clone(version), Arc::clone(request));
    tokio::task::spawn_blocking(move || kubewarden::validate(&version.policy, &request, &version.settings))
        .await
        .unwrap_or_else(|e| Err(EvalError::Trap(format!("the evaluation thread failed: {e}"))))
}

/// Carries out the effects of a verdict (none in monitor mode). A failed effect of a denial turns
/// the answer into KubeVirt's 429 denial with the failure, so the client retries and nothing is
/// left half done; a failed effect of an allowed request becomes a warning.
async fn carry_out(context: &Context, served: &ServedPolicy, mut response: PolicyResponse) -> PolicyResponse {
    if served.mode == PolicyMode::Monitor {
        return response;
    }
    for effect in std::mem::take(&mut response.effects) {
        let name = effect.type_name();
        let result = context.writer.apply(&effect).await;
        let labels = EffectLabels {
            policy: served.id.clone(),
            effect: name,
            result: if result.is_ok() { "applied" } else { "failed" },
        };
        context.metrics.effects.get_or_create(&labels).inc();
        if let Err(e) = result {
            tracing::warn!(policy = %served.id, ?effect, "effect failed: {e}");
            if response.accepted {
                // An allowed request (a pod deletion seen by disruption-cause) is never blocked
                // by its side effect: the client learns of the failure as a warning.
                response.warnings.get_or_insert_with(Vec::new).push(format!("{name} failed: {e}"));
                continue;
            }
            response.accepted = false;
            response.code = Some(evac_core::response::TOO_MANY_REQUESTS);
            response.message = Some(format!("{FAILED_MARKING}: {e}"));
            break;
        }
        response.effects.push(effect);
    }
    response
}

fn final_verdict(
    served: &ServedPolicy,
    active: &Version,
    uid: String,
    outcome: Result<PolicyResponse, (&'static str, String)>,
    context: &Context,
) -> ReviewAnswer {
    let mut audit = BTreeMap::new();
    audit.insert(VERSION_ANNOTATION.to_owned(), active.name.clone());
    audit.insert(DIGEST_ANNOTATION.to_owned(), active.digest.clone());
    let mut answer = Answer { uid, allowed: true, status: None, warnings: None, audit_annotations: audit };
    match outcome {
        Ok(response) => {
            if response.accepted { &served.outcomes.accepted } else { &served.outcomes.rejected }.inc();
            for (key, value) in response.audit_annotations.unwrap_or_default() {
                answer.audit_annotations.entry(key).or_insert(value);
            }
            answer.warnings = response.warnings;
            if !response.accepted && served.mode == PolicyMode::Monitor {
                tracing::info!(
                    policy = %served.id, uid = %answer.uid, message = response.message.as_deref().unwrap_or_default(),
                    "monitor mode: the request would have been rejected"
                );
            } else if !response.accepted {
                answer.allowed = false;
                answer.status = Some(Status::denial(response.code, response.message));
            }
        }
        Err((kind, error)) => {
            served.outcomes.error.inc();
            let labels = FaultLabels { policy: served.id.clone(), version: active.name.clone(), kind };
            context.metrics.faults.get_or_create(&labels).inc();
            tracing::warn!(policy = %served.id, version = %active.name, uid = %answer.uid, "evaluation failed: {error}");
            if served.mode == PolicyMode::Protect {
                answer.allowed = false;
                let message = format!("policy {} failed to evaluate the request: {error}", served.id);
                answer.status = Some(Status { code: 500, message });
            }
        }
    }
    ReviewAnswer { api_version: "admission.k8s.io/v1", kind: "AdmissionReview", response: answer }
}

/// The AdmissionReview answered (`admission.k8s.io/v1`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewAnswer {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: Answer,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    pub audit_annotations: BTreeMap<String, String>,
}

/// `metav1.Status` of a denial: the code and message `kubectl` shows.
#[derive(Debug, Serialize)]
pub struct Status {
    pub code: u16,
    pub message: String,
}

impl Status {
    /// A policy's denial. Its code is kept when it is an error code (KubeVirt's are 429); a
    /// missing or lower one becomes 400, which is what clients would make of it anyway.
    pub fn denial(code: Option<u16>, message: Option<String>) -> Self {
        Self { code: code.filter(|code| *code >= 400).unwrap_or(400), message: message.unwrap_or_default() }
    }
}

/// The parts of a verdict two versions must agree on.
#[derive(Debug, PartialEq)]
struct Verdict {
    accepted: bool,
    code: Option<u16>,
    message: Option<String>,
}

impl Verdict {
    fn of(response: &PolicyResponse) -> Self {
        Self { accepted: response.accepted, code: response.code, message: response.message.clone() }
    }
}

/// Compares the shadow's answer with the active version's verdict (`None`: the active version
/// failed).
fn compare(
    metrics: &Metrics,
    served: &ServedPolicy,
    shadow: &Version,
    uid: &str,
    active: Option<&Verdict>,
    candidate: &Result<PolicyResponse, EvalError>,
) {
    let result = match (active, candidate) {
        (Some(a), Ok(c)) if *a == Verdict::of(c) => "agree",
        (Some(a), Ok(c)) => {
            tracing::warn!(
                policy = %served.id, uid, active = %served.active.name, candidate = %shadow.name,
                active_allowed = a.accepted, candidate_allowed = c.accepted,
                active_message = a.message.as_deref().unwrap_or_default(),
                candidate_message = c.message.as_deref().unwrap_or_default(),
                "shadow version disagrees"
            );
            "disagree"
        }
        (_, Err(e)) => {
            tracing::warn!(policy = %served.id, uid, candidate = %shadow.name, "shadow version failed: {e}");
            "error"
        }
        (None, Ok(_)) => "disagree",
    };
    let labels = ShadowLabels {
        policy: served.id.clone(),
        active: served.active.name.clone(),
        candidate: shadow.name.clone(),
        result,
    };
    metrics.shadow.get_or_create(&labels).inc();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_keep_their_code() {
        let status = Status::denial(Some(429), Some("no".into()));
        assert_eq!((status.code, status.message.as_str()), (429, "no"));
        assert_eq!(Status::denial(None, None).code, 400);
        assert_eq!(Status::denial(Some(200), None).code, 400);
    }

    #[test]
    fn reviews_are_checked_before_evaluation() {
        let ok = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","operation":"CREATE"}}"#;
        let parsed = parse_review(ok).unwrap();
        assert_eq!(parsed.uid, "u1");
        assert_eq!(parsed.request.get(), r#"{"uid":"u1","operation":"CREATE"}"#);
        let err = |body: &[u8]| parse_review(body).err().unwrap().0;
        assert!(err(b"{").contains("invalid AdmissionReview: EOF"));
        assert!(err(b"\xff").contains("not UTF-8"));
        assert!(err(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}"#)
            .contains("expected apiVersion admission.k8s.io/v1"));
        assert!(
            err(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#).contains("no request")
        );
        assert!(err(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}"#
        )
        .contains("no uid"));
    }
}
