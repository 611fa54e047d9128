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
    use super::*;

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
        use evac_policy_guest::SettingsVerdict::*;
        evac_policy_guest::check_settings_table::<Settings>(&[
            (r#"{"kubevirtt": {}}"#, InvalidMentioning("unknown field `kubevirtt`")),
            (
                r#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#,
                InvalidBecause("kubevirt: both namespace and name must be set"),
            ),
            ("[", Invalid),
        ]);
    }
}
