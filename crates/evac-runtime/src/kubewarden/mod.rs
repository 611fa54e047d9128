//! Kubewarden's policy protocol over any [`WapcPolicy`]: `validate`, `validate_settings`,
//! `protocol_version`, the AdmissionReview envelope, and policy metadata.

pub mod admission;
#[cfg(feature = "wasmtime")]
pub mod metadata;

use evac_core::PolicyResponse;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::policy::{EvalError, WapcPolicy};
pub use evac_core::model::envelope::validation_payload;

/// Kubewarden's answer to `validate_settings`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct SettingsValidation {
    /// Whether the settings are valid.
    pub valid: bool,
    /// Why not, when they are not.
    #[serde(default)]
    pub message: Option<String>,
}

/// Evaluates `validate` for an AdmissionRequest (raw JSON) with settings (raw JSON).
pub fn validate(
    policy: &dyn WapcPolicy,
    request: &RawValue,
    settings: &RawValue,
) -> Result<PolicyResponse, EvalError> {
    let answer = policy.call("validate", &validation_payload(request, settings))?;
    decode_answer(&answer, "ValidationResponse")
}

/// Decodes a module's answer; one that does not decode is the module's fault.
fn decode_answer<T: serde::de::DeserializeOwned>(answer: &[u8], what: &'static str) -> Result<T, EvalError> {
    let bad = |reason: String| EvalError::BadResponse { what, reason };
    let text = evac_core::json_text(answer).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(text).map_err(|e| bad(e.to_string()))
}

/// Asks the module whether `settings` are valid for it (`validate_settings`).
pub fn validate_settings(
    policy: &dyn WapcPolicy,
    settings: &RawValue,
) -> Result<SettingsValidation, EvalError> {
    let answer = policy.call("validate_settings", settings.get().as_bytes())?;
    decode_answer(&answer, "settings validation response")
}

/// The module's Kubewarden protocol version (`"v1"`).
pub fn protocol_version(policy: &dyn WapcPolicy) -> Result<String, EvalError> {
    let answer = policy.call("protocol_version", b"")?;
    decode_answer(&answer, "protocol version")
}
