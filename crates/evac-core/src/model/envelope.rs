//! Kubewarden's envelopes around a request: the AdmissionReview (or bare AdmissionRequest) a user
//! gives, and the `validate` payload a policy receives. Shared by every host of the policies (the
//! wasm host, the browser playground), so that they hand a policy the same bytes.

use serde_json::value::RawValue;
use serde_json::Value;

/// Why an input is not an admission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotARequest(pub String);

impl core::fmt::Display for NotARequest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotARequest {}

/// The AdmissionRequest inside an input (JSON) that is either a whole AdmissionReview or a bare
/// request.
pub fn request_from_input(input: &[u8]) -> Result<Box<RawValue>, NotARequest> {
    let fail = |why: &str| NotARequest(why.to_owned());
    let value: Value = serde_json::from_slice(input)
        .map_err(|e| NotARequest(format!("the request is not valid JSON: {}", crate::json_error_text(&e))))?;
    let Value::Object(object) = &value else {
        return Err(fail(
            "the request is not a JSON object: expected an AdmissionReview or an AdmissionRequest",
        ));
    };
    let request = if object.get("kind").and_then(Value::as_str) == Some("AdmissionReview") {
        match object.get("request") {
            Some(request @ Value::Object(_)) => request,
            _ => return Err(fail("the AdmissionReview has no request")),
        }
    } else {
        &value
    };
    for field in ["uid", "operation"] {
        if !request.get(field).is_some_and(Value::is_string) {
            return Err(NotARequest(format!(
                "the AdmissionRequest has no {field}: expected an AdmissionReview or an AdmissionRequest"
            )));
        }
    }
    let text = serde_json::to_string(request).map_err(|e| NotARequest(e.to_string()))?;
    RawValue::from_string(text).map_err(|e| NotARequest(e.to_string()))
}

/// The `validate` payload: `{"request": ..., "settings": ...}`, assembled without re-encoding.
pub fn validation_payload(request: &RawValue, settings: &RawValue) -> Vec<u8> {
    let (request, settings) = (request.get().as_bytes(), settings.get().as_bytes());
    let mut payload = Vec::with_capacity(request.len() + settings.len() + 26);
    payload.extend_from_slice(br#"{"request":"#);
    payload.extend_from_slice(request);
    payload.extend_from_slice(br#","settings":"#);
    payload.extend_from_slice(settings);
    payload.push(b'}');
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_a_review_or_a_bare_request() {
        let review = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE"}}"#;
        assert_eq!(request_from_input(review).unwrap().get(), r#"{"operation":"CREATE","uid":"1"}"#);
        let bare = br#"{"uid":"1","operation":"CREATE"}"#;
        assert!(request_from_input(bare).is_ok());
    }

    #[test]
    fn refuses_what_is_not_a_request() {
        let err = |input: &[u8]| request_from_input(input).unwrap_err().to_string();
        assert!(err(b"{").contains("not valid JSON"));
        assert!(err(b"[]").contains("not a JSON object"));
        assert!(err(br#"{"kind":"AdmissionReview"}"#).contains("has no request"));
        assert!(err(br#"{"kind":"Pod","metadata":{}}"#).contains("has no uid"));
    }

    #[test]
    fn the_payload_holds_both_unchanged() {
        let request = RawValue::from_string(r#"{"uid": "1"}"#.into()).unwrap();
        let settings = RawValue::from_string("{}".into()).unwrap();
        assert_eq!(validation_payload(&request, &settings), br#"{"request":{"uid": "1"},"settings":{}}"#);
    }
}
