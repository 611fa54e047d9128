/// The policy's settings: those of the evacuation decision.
///
/// ```yaml
/// settings:
///   kubevirt:                    # optional: where the KubeVirt CR is; default: the one in the cluster
///     namespace: kubevirt
///     name: kubevirt
///   maxFailedEvacuations: 5      # give evac's own evacuation up after this many failed migrations
///   nodePressure:                # the same as disruption-cause's: release and placement levels
///     threshold: 3500Mi          # the kubelet's evictionSoft memory.available
///     headroom: 1Gi              # marks below threshold + headroom, releases from threshold + 2 x headroom
///   assumedBandwidth: 64Mi       # per migration and second, when KubeVirt's bandwidthPerMigration is unlimited
/// ```
pub type Settings = evac_core::evacuation::Settings;

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
        assert!(validate(br#"{"maxFailedEvacuations": 3, "nodePressure": {"threshold": "2Gi"}}"#).valid);
        let unknown = validate(br#"{"maxFailures": 3}"#);
        assert!(!unknown.valid);
        assert!(unknown.message.unwrap().contains("unknown field `maxFailures`"));
        let zero = validate(br#"{"maxFailedEvacuations": 0}"#);
        assert_eq!(zero.message.as_deref(), Some("maxFailedEvacuations must be greater than 0"));
        let pressure = validate(br#"{"nodePressure": {"threshold": "plenty"}}"#);
        assert_eq!(
            pressure.message.as_deref(),
            Some(r#"nodePressure.threshold: "plenty" is not a memory quantity (e.g. 3500Mi)"#)
        );
        let bandwidth = validate(br#"{"assumedBandwidth": "0"}"#);
        assert_eq!(
            bandwidth.message.as_deref(),
            Some(r#"assumedBandwidth: "0" is not a positive quantity (e.g. 64Mi)"#)
        );
        let half = validate(br#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#);
        assert_eq!(half.message.as_deref(), Some("kubevirt: both namespace and name must be set"));
        assert!(!validate(b"[").valid);
    }
}
