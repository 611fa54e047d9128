//! Kubewarden's `validate_settings`, for any settings type.

use kubewarden_policy_sdk::settings::{SettingsValidationResponse, Validatable};
use serde::de::DeserializeOwned;

/// Settings that do not decode are invalid too, with the reason (the SDK's helper answers those
/// with an error instead). `null` means the defaults. The message is the reason alone: hosts say
/// "invalid settings" around it (policy-server: "Policy settings are invalid: ...").
pub fn validate_settings<S>(payload: &[u8]) -> SettingsValidationResponse
where
    S: DeserializeOwned + Default + Validatable,
{
    let settings = match serde_json::from_slice::<Option<S>>(payload) {
        Ok(settings) => settings.unwrap_or_default(),
        Err(e) => return SettingsValidationResponse { valid: false, message: Some(e.to_string()) },
    };
    match settings.validate() {
        Ok(()) => SettingsValidationResponse { valid: true, message: None },
        Err(message) => SettingsValidationResponse { valid: false, message: Some(message) },
    }
}
