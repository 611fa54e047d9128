//! AdmissionReviews in and out: the envelope checked, the request run through the
//! [`Pipeline`], and the answer `kube-apiserver` expects (`uid`, `allowed`, a denial's
//! `status.code` and `status.message`, a mutation's JSON patch, warnings, audit annotations).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::pipeline::{Evaluation, Pipeline, ShadowRun};
use crate::registry::ServedPolicy;

/// The audit annotation that names the version that answered (`label@sha256:<12 hex digits>`).
pub const VERSION_ANNOTATION: &str = "evac-policy-version";
/// The audit annotation with the full digest of the version that answered.
pub const DIGEST_ANNOTATION: &str = "evac-policy-digest";

/// Why a request was not evaluated; answered with an HTTP error status.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadRequest(pub String);

/// The envelope, read leniently: `kind` of any JSON type, so that a bare AdmissionRequest (whose
/// `kind` is a group/version/kind object) is told apart from a broken document.
#[derive(Deserialize)]
struct Review<'a> {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<serde_json::Value>,
    #[serde(default)]
    kind: Option<serde_json::Value>,
    #[serde(borrow)]
    request: Option<&'a RawValue>,
    #[serde(default)]
    operation: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RequestHead<'a> {
    #[serde(borrow)]
    uid: Option<Cow<'a, str>>,
}

/// An AdmissionReview's request, checked: its raw JSON and its uid.
pub struct ParsedReview {
    /// The AdmissionRequest, as received.
    pub request: Box<RawValue>,
    /// Its uid, which the answer must repeat.
    pub uid: String,
}

/// Checks the envelope: an `admission.k8s.io/v1` AdmissionReview with a request that has a uid.
pub fn parse_review(body: &[u8]) -> Result<ParsedReview, BadRequest> {
    let bad = |why: String| BadRequest(format!("invalid AdmissionReview: {why}"));
    let text = std::str::from_utf8(body).map_err(|e| bad(format!("not UTF-8: {e}")))?;
    let review: Review<'_> = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let text_of = |field: &Option<serde_json::Value>| match field {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    };
    let (api_version, kind) = (text_of(&review.api_version), text_of(&review.kind));
    if kind != "AdmissionReview" || api_version != "admission.k8s.io/v1" {
        if review.operation.is_some() && review.request.is_none() {
            return Err(bad(
                "expected an AdmissionReview (apiVersion admission.k8s.io/v1, kind AdmissionReview), got what looks \
                 like a bare AdmissionRequest: send it as the review's `request`"
                    .into(),
            ));
        }
        return Err(bad(format!(
            "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got {api_version:?} {kind:?}"
        )));
    }
    let request = review.request.ok_or_else(|| bad("no request".into()))?;
    let head: RequestHead<'_> =
        serde_json::from_str(request.get()).map_err(|e| bad(format!("request: {e}")))?;
    let uid = head.uid.filter(|uid| !uid.is_empty()).ok_or_else(|| bad("the request has no uid".into()))?;
    Ok(ParsedReview { uid: uid.into_owned(), request: request.to_owned() })
}

/// Evaluates a request with a policy through the pipeline and answers the AdmissionReview. The
/// shadow evaluation, if any, is returned to run after the answer is sent.
pub async fn answer(
    pipeline: &Pipeline,
    served: &Arc<ServedPolicy>,
    review: ParsedReview,
) -> (ReviewAnswer, Option<ShadowRun>) {
    let request = Arc::new(review.request);
    let (evaluation, shadow) = pipeline.evaluate(served, Arc::clone(&request), &review.uid).await;
    let mut answer = review_answer(review.uid, evaluation);
    apply_mutation(&mut answer.response, served, &request);
    if let Some(message) = &served.message {
        answer.response.replace_rejection_message(message);
    }
    (answer, shadow)
}

#[derive(Deserialize)]
struct RequestObject<'a> {
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
}

/// Turns a policy's mutation into the answer's JSON patch, as Kubewarden does
/// (`policy-evaluator` `AdmissionResponse::from_policy_validation_response`,
/// `AdmissionResponseHandler::apply_mutation_constraint` and `apply_monitor_mode`): the RFC 6902
/// difference between the request's object and the mutated one (none when they are equal),
/// base64-encoded, `patchType: JSONPatch`. In monitor mode the patch is dropped; in protect mode a
/// policy without `allowedToMutate` that mutates rejects the request; a mutation of a request
/// without an object (a DELETE) is refused.
fn apply_mutation(answer: &mut Answer, served: &ServedPolicy, request: &RawValue) {
    let Some(mutated) = answer.mutated_object.take() else { return };
    if !answer.allowed || served.mode == crate::config::PolicyMode::Monitor {
        return;
    }
    let original = serde_json::from_str::<RequestObject<'_>>(request.get())
        .ok()
        .and_then(|r| r.object)
        .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok())
        .filter(|object| !object.is_null());
    let Some(original) = original else {
        answer.reject(
            "Incoming object is null, which happens only with DELETE operations, but the policy is attempting a \
             mutation. This is not allowed",
        );
        return;
    };
    let patch = json_patch::diff(&original, &mutated);
    if patch.0.is_empty() {
        return;
    }
    if !served.allowed_to_mutate {
        answer.reject(&format!(
            "Request rejected by policy {}. The policy attempted to mutate the request, but it is currently \
             configured to not allow mutations.",
            served.id
        ));
        return;
    }
    use base64::Engine as _;
    // A patch of JSON values always encodes; were it not to, the request is refused rather than
    // answered with an empty patch that would drop the mutation unseen.
    let encoded = match serde_json::to_vec(&patch) {
        Ok(encoded) => encoded,
        Err(e) => {
            answer
                .reject(&format!("Request rejected by policy {}: its patch does not encode: {e}", served.id));
            return;
        }
    };
    answer.patch = Some(base64::engine::general_purpose::STANDARD.encode(encoded));
    answer.patch_type = Some("JSONPatch");
}

/// The AdmissionReview answer of an evaluation: its verdict once the mode is applied, its warnings,
/// and audit annotations naming the version that answered. A fault is a 500 denial naming the
/// policy (in protect mode).
pub fn review_answer(uid: String, evaluation: Evaluation) -> ReviewAnswer {
    let mut audit = BTreeMap::new();
    audit.insert(VERSION_ANNOTATION.to_owned(), evaluation.version.clone());
    audit.insert(DIGEST_ANNOTATION.to_owned(), evaluation.digest.clone());
    let allowed = evaluation.allowed();
    let mut answer = Answer {
        uid,
        allowed,
        status: None,
        patch_type: None,
        patch: None,
        warnings: None,
        audit_annotations: audit,
        mutated_object: None,
    };
    match evaluation.outcome {
        Ok(response) => {
            for (key, value) in response.audit_annotations.unwrap_or_default() {
                answer.audit_annotations.entry(key).or_insert(value);
            }
            answer.warnings = response.warnings;
            answer.mutated_object = response.mutated_object;
            if !allowed {
                answer.status = Some(Status::denial(response.code, response.message));
            }
        }
        Err(fault) => {
            if !allowed {
                let message =
                    format!("policy {} failed to evaluate the request: {}", evaluation.policy, fault.message);
                answer.status = Some(Status { code: 500, message, details: None });
            }
        }
    }
    ReviewAnswer { api_version: "admission.k8s.io/v1", kind: "AdmissionReview", response: answer }
}

/// The AdmissionReview answered (`admission.k8s.io/v1`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewAnswer {
    /// `admission.k8s.io/v1`.
    pub api_version: &'static str,
    /// `AdmissionReview`.
    pub kind: &'static str,
    /// The answer.
    pub response: Answer,
}

/// The `response` of an AdmissionReview.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answer {
    /// The request's uid.
    pub uid: String,
    /// Whether the request may proceed.
    pub allowed: bool,
    /// A denial's code and message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// `JSONPatch` when the answer carries a mutation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// The mutation: an RFC 6902 JSON patch of the request's object, base64-encoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Warnings the client shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// Recorded in the API server's audit log.
    pub audit_annotations: BTreeMap<String, String>,
    /// The object as the policy mutated it, until it becomes the patch ([`answer`]).
    #[serde(skip)]
    pub mutated_object: Option<serde_json::Value>,
}

impl Answer {
    /// Turns the answer into a denial with `message` and no code (400 for the API server), and
    /// no patch: how Kubewarden refuses a mutation it must not apply.
    fn reject(&mut self, message: &str) {
        self.allowed = false;
        self.patch = None;
        self.patch_type = None;
        self.status = Some(Status::denial(None, Some(message.to_owned())));
    }

    /// A denial's message replaced by the policy's custom one (`message` in policies.yml); the
    /// policy's own goes to `details.causes`, as Kubewarden's policy-evaluator does
    /// (`admission_response_handler.rs` `apply_custom_rejection_message`). An allow is unchanged.
    pub fn replace_rejection_message(&mut self, message: &str) {
        if self.allowed {
            return;
        }
        if let Some(status) = &mut self.status {
            let original = std::mem::replace(&mut status.message, message.to_owned());
            status
                .details
                .get_or_insert_with(StatusDetails::default)
                .causes
                .push(StatusCause { message: original });
        }
    }
}

/// `metav1.Status` of a denial: the code and message `kubectl` shows.
#[derive(Debug, Serialize)]
pub struct Status {
    /// The HTTP code (KubeVirt's denials are 429).
    pub code: u16,
    /// The message `kubectl` prints.
    pub message: String,
    /// The policy's own message, when `message` in policies.yml replaced it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
}

/// `metav1.StatusDetails`, for its `causes`.
#[derive(Debug, Default, Serialize)]
pub struct StatusDetails {
    /// Why the request was denied.
    pub causes: Vec<StatusCause>,
}

/// `metav1.StatusCause`, with its message only.
#[derive(Debug, Serialize)]
pub struct StatusCause {
    /// The cause's text.
    pub message: String,
}

impl Status {
    /// A policy's denial. Its code is kept when it is an error code (KubeVirt's are 429); a
    /// missing or lower one becomes 400, which is what clients would make of it anyway.
    pub fn denial(code: Option<u16>, message: Option<String>) -> Self {
        Self {
            code: code.filter(|code| *code >= 400).unwrap_or(400),
            message: message.unwrap_or_default(),
            details: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_custom_rejection_message_keeps_the_policy_s_as_a_cause() {
        let answer = |allowed: bool| Answer {
            uid: "u".into(),
            allowed,
            status: (!allowed)
                .then(|| Status::denial(Some(429), Some("Eviction triggered evacuation".into()))),
            patch_type: None,
            patch: None,
            warnings: None,
            audit_annotations: BTreeMap::new(),
            mutated_object: None,
        };
        let mut denied = answer(false);
        denied.replace_rejection_message("ask the VM team");
        let json = serde_json::to_value(&denied).unwrap();
        assert_eq!(
            json["status"],
            serde_json::json!({"code": 429, "message": "ask the VM team",
                               "details": {"causes": [{"message": "Eviction triggered evacuation"}]}})
        );
        let mut allowed = answer(true);
        allowed.replace_rejection_message("ask the VM team");
        assert!(allowed.status.is_none());
    }

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
        // A bare AdmissionRequest: said so, not a serde position.
        let bare = br#"{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE"}"#;
        assert_eq!(
            err(bare),
            "invalid AdmissionReview: expected an AdmissionReview (apiVersion admission.k8s.io/v1, kind \
             AdmissionReview), got what looks like a bare AdmissionRequest: send it as the review's `request`"
        );
        assert!(err(br#"{"apiVersion":"v1","kind":"Pod"}"#).contains(r#"got "v1" "Pod""#));
        assert!(err(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""}}"#
        )
        .contains("no uid"));
    }
}
