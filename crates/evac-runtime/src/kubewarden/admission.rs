//! The AdmissionReview envelope (`admission.k8s.io/v1`).

use anyhow::{bail, Context, Result};
use serde_json::value::RawValue;
use serde_json::Value;

/// The AdmissionRequest inside an input that is either a whole AdmissionReview or a bare request.
pub fn request_from_input(input: &[u8]) -> Result<Box<RawValue>> {
    let value: Value = serde_json::from_slice(input).context("the request is not valid JSON")?;
    let Value::Object(object) = &value else {
        bail!("the request is not a JSON object: expected an AdmissionReview or an AdmissionRequest");
    };
    let request = if object.get("kind").and_then(Value::as_str) == Some("AdmissionReview") {
        match object.get("request") {
            Some(request @ Value::Object(_)) => request,
            _ => bail!("the AdmissionReview has no request"),
        }
    } else {
        &value
    };
    for field in ["uid", "operation"] {
        if !request.get(field).is_some_and(Value::is_string) {
            bail!("the AdmissionRequest has no {field}: expected an AdmissionReview or an AdmissionRequest");
        }
    }
    Ok(RawValue::from_string(serde_json::to_string(request)?)?)
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
}
