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
#[test]
fn validation_answers_every_payload() {
    use evac_policy_guest::SettingsVerdict::*;
    evac_policy_guest::check_settings_table::<Settings>(&[
        (r#"{"nodePressure": {"threshold": "2Gi", "headroom": "0"}}"#, Valid),
        (r#"{"nodepressure": {}}"#, InvalidMentioning("unknown field `nodepressure`")),
        (
            r#"{"nodePressure": {"headroom": "a lot"}}"#,
            InvalidBecause(r#"nodePressure.headroom: "a lot" is not a memory quantity (e.g. 3500Mi)"#),
        ),
        (
            r#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#,
            InvalidBecause("kubevirt: both namespace and name must be set"),
        ),
        ("[", Invalid),
    ]);
}
