/// The policy's settings: those of the disruption-cause decision.
///
/// ```yaml
/// settings:
///   kubevirt:            # optional: where the KubeVirt CR is; default: the one in the cluster
///     namespace: kubevirt
///     name: kubevirt
///   nodePressure:        # optional
///     threshold: 3500Mi  # the kubelet's evictionSoft memory.available
///     headroom: 1Gi      # act this much sooner, so migrations finish before the kubelet kills
/// ```
pub type Settings = evac_core::disruption::Settings;

#[cfg(test)]
mod tests {
    use kubewarden_policy_sdk::settings::SettingsValidationResponse;

    use super::*;

    /// Kubewarden's `validate_settings` for these settings.
    fn validate(payload: &[u8]) -> SettingsValidationResponse {
        evac_policy_guest::validate_settings::<Settings>(payload)
    }

    #[test]
    fn validation_answers_every_payload() {
        assert!(validate(b"{}").valid);
        assert!(validate(b"null").valid);
        assert!(validate(br#"{"nodePressure": {"threshold": "2Gi", "headroom": "0"}}"#).valid);
        let unknown = validate(br#"{"nodepressure": {}}"#);
        assert!(!unknown.valid);
        assert!(unknown.message.unwrap().contains("unknown field `nodepressure`"));
        let bad = validate(br#"{"nodePressure": {"headroom": "a lot"}}"#);
        assert_eq!(
            bad.message.as_deref(),
            Some(r#"nodePressure.headroom: "a lot" is not a memory quantity (e.g. 3500Mi)"#)
        );
        let half = validate(br#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#);
        assert_eq!(half.message.as_deref(), Some("kubevirt: both namespace and name must be set"));
        assert!(!validate(b"[").valid);
    }
}
