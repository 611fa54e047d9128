/// The policy's settings: those of the eviction decision.
///
/// ```yaml
/// settings:
///   kubevirt:            # optional: where the KubeVirt CR is; default: the one in the cluster
///     namespace: kubevirt
///     name: kubevirt
/// ```
pub type Settings = evac_core::eviction::Settings;

#[cfg(test)]
mod tests {
    use kubewarden_policy_sdk::settings::SettingsValidationResponse;

    use super::*;

    /// Kubewarden's `validate_settings` for these settings.
    fn validate(payload: &[u8]) -> SettingsValidationResponse {
        evac_policy_guest::validate_settings::<Settings>(payload)
    }

    #[test]
    fn empty_settings_are_valid() {
        let settings: Settings = serde_json::from_str("{}").unwrap();
        assert!(settings.validate().is_ok());
    }

    #[test]
    fn a_half_named_kubevirt_cr_is_refused() {
        let settings: Settings =
            serde_json::from_str(r#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#).unwrap();
        assert!(settings.validate().is_err());
    }

    #[test]
    fn unknown_settings_are_refused() {
        assert!(serde_json::from_str::<Settings>(r#"{"kubevirtt": {}}"#).is_err());
    }

    #[test]
    fn validation_answers_every_payload() {
        assert!(validate(b"{}").valid);
        assert!(validate(b"null").valid);
        let unknown = validate(br#"{"kubevirtt": {}}"#);
        assert!(!unknown.valid);
        assert!(unknown.message.unwrap().contains("unknown field `kubevirtt`"));
        let half = validate(br#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#);
        assert_eq!(half.message.as_deref(), Some("kubevirt: both namespace and name must be set"));
        assert!(!validate(b"[").valid);
    }
}
