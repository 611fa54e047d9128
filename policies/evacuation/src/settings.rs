use kubewarden_policy_sdk::settings::{SettingsValidationResponse, Validatable};
use serde::{Deserialize, Serialize};

/// The policy's settings: those of the evacuation decision.
///
/// ```yaml
/// settings:
///   kubevirt:                    # optional: where the KubeVirt CR is; default: the one in the cluster
///     namespace: kubevirt
///     name: kubevirt
///   maxFailedEvacuations: 5      # give an evacuation up after this many failed migrations in a row
///   nodePressureRelease: 4500Mi  # call a node-pressure evacuation off once this much memory is free
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Settings(evac_core::evacuation::Settings);

impl Settings {
    pub fn inner(&self) -> &evac_core::evacuation::Settings {
        &self.0
    }
}

impl Validatable for Settings {
    fn validate(&self) -> Result<(), String> {
        self.0.validate().map_err(|e| e.to_string())
    }
}

/// Kubewarden's `validate_settings` for these settings.
pub fn validate(payload: &[u8]) -> SettingsValidationResponse {
    evac_policy_guest::validate_settings::<Settings>(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_answers_every_payload() {
        assert!(validate(b"{}").valid);
        assert!(validate(b"null").valid);
        assert!(validate(br#"{"maxFailedEvacuations": 3, "nodePressureRelease": "2Gi"}"#).valid);
        let unknown = validate(br#"{"maxFailures": 3}"#);
        assert!(!unknown.valid);
        assert!(unknown.message.unwrap().contains("unknown field `maxFailures`"));
        let zero = validate(br#"{"maxFailedEvacuations": 0}"#);
        assert_eq!(zero.message.as_deref(), Some("maxFailedEvacuations must be greater than 0"));
        let release = validate(br#"{"nodePressureRelease": "plenty"}"#);
        assert_eq!(
            release.message.as_deref(),
            Some(r#"nodePressureRelease: "plenty" is not a quantity (e.g. 4500Mi)"#)
        );
        let half = validate(br#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#);
        assert_eq!(half.message.as_deref(), Some("kubevirt: both namespace and name must be set"));
        assert!(!validate(b"[").valid);
    }
}
