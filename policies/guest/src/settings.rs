//! Kubewarden's `validate_settings`, for the settings of any of the core's decisions.

use evac_core::InvalidSettings;
use kubewarden_policy_sdk::settings::SettingsValidationResponse;
use serde::de::DeserializeOwned;

/// The settings of one of the core's decisions, as a policy module takes them: decoded from the
/// policy's `settings` (missing or `null`: the defaults) and checked by the decision's own rules.
pub trait DecisionSettings: DeserializeOwned + Default {
    /// The decision's own check of the settings (`kubevirt: both namespace and name must be set`).
    fn check(&self) -> Result<(), InvalidSettings>;
}

/// Each decision's settings check themselves with their own `validate`.
macro_rules! decision_settings {
    ($($settings:ty),* $(,)?) => {
        $(impl DecisionSettings for $settings {
            fn check(&self) -> Result<(), InvalidSettings> {
                self.validate()
            }
        })*
    };
}

decision_settings!(
    evac_core::eviction::Settings,
    evac_core::disruption::Settings,
    evac_core::evacuation::Settings,
    evac_core::hold::LauncherHoldSettings,
);

/// Settings that do not decode are invalid too, with the reason (the SDK's helper answers those
/// with an error instead). `null` means the defaults. The message is the reason alone: hosts say
/// "invalid settings" around it (policy-server: "Policy settings are invalid: ...").
pub fn validate_settings<S: DecisionSettings>(payload: &[u8]) -> SettingsValidationResponse {
    let settings = match serde_json::from_slice::<Option<S>>(payload) {
        Ok(settings) => settings.unwrap_or_default(),
        Err(e) => return SettingsValidationResponse { valid: false, message: Some(e.to_string()) },
    };
    match settings.check() {
        Ok(()) => SettingsValidationResponse { valid: true, message: None },
        Err(message) => SettingsValidationResponse { valid: false, message: Some(message.to_string()) },
    }
}

/// Validates a policy's settings: Kubewarden's SettingsValidationResponse, encoded, as a module's
/// `validate_settings` answers.
pub fn settings_answer<S: DecisionSettings>(payload: &[u8]) -> Result<Vec<u8>, crate::GuestError> {
    Ok(serde_json::to_vec(&validate_settings::<S>(payload))?)
}

/// What a settings payload gets from [`validate_settings`], in a policy's table of them.
#[derive(Debug, Clone, Copy)]
pub enum SettingsVerdict<'a> {
    /// Valid.
    Valid,
    /// Invalid, whatever the message.
    Invalid,
    /// Invalid with exactly this message.
    InvalidBecause(&'a str),
    /// Invalid with a message that mentions this.
    InvalidMentioning(&'a str),
}

/// Checks a policy's table of settings payloads and what each gets from [`validate_settings`],
/// after the rows every policy shares (`{}` and `null` are the defaults, valid); fails listing
/// every row that answered otherwise. For the policies' tests.
pub fn check_settings_table<S: DecisionSettings>(rows: &[(&str, SettingsVerdict<'_>)]) {
    let defaults = [("{}", SettingsVerdict::Valid), ("null", SettingsVerdict::Valid)];
    let failures: Vec<String> = defaults
        .iter()
        .chain(rows)
        .filter_map(|(payload, expected)| {
            let got = validate_settings::<S>(payload.as_bytes());
            let message = got.message.as_deref().unwrap_or_default();
            let right = match expected {
                SettingsVerdict::Valid => got.valid,
                SettingsVerdict::Invalid => !got.valid,
                SettingsVerdict::InvalidBecause(text) => !got.valid && message == *text,
                SettingsVerdict::InvalidMentioning(text) => !got.valid && message.contains(text),
            };
            (!right)
                .then(|| format!("{payload}: expected {expected:?}, got valid {} ({message:?})", got.valid))
        })
        .collect();
    assert!(failures.is_empty(), "settings answered otherwise:\n  - {}", failures.join("\n  - "));
}
