/// The policy's settings: those of the `launcher-hold` mutation.
///
/// ```yaml
/// settings:
///   windowSeconds: 300   # the longest a hold keeps a launcher pod's SIGTERM back
///   port: 9190           # the hold endpoint's port on the node's 127.0.0.1
/// ```
pub type Settings = evac_core::hold::LauncherHoldSettings;

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
        assert!(validate(br#"{"windowSeconds": 600, "port": 10190}"#).valid);
        let zero = validate(br#"{"windowSeconds": 0}"#);
        assert_eq!(zero.message.as_deref(), Some("windowSeconds must be between 1 and 86400, got 0"));
        let unknown = validate(br#"{"window": 60}"#);
        assert!(unknown.message.unwrap().contains("unknown field `window`"));
        let port = validate(br#"{"port": 70000}"#);
        assert!(!port.valid);
        assert!(!validate(b"[").valid);
    }
}
