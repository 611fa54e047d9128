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
#[test]
fn validation_answers_every_payload() {
    use evac_policy_guest::SettingsVerdict::*;
    evac_policy_guest::check_settings_table::<Settings>(&[
        (r#"{"maxFailedEvacuations": 3, "nodePressure": {"threshold": "2Gi"}}"#, Valid),
        (r#"{"maxFailures": 3}"#, InvalidMentioning("unknown field `maxFailures`")),
        (r#"{"maxFailedEvacuations": 0}"#, InvalidBecause("maxFailedEvacuations must be greater than 0")),
        (
            r#"{"nodePressure": {"threshold": "plenty"}}"#,
            InvalidBecause(r#"nodePressure.threshold: "plenty" is not a memory quantity (e.g. 3500Mi)"#),
        ),
        (
            r#"{"assumedBandwidth": "0"}"#,
            InvalidBecause(r#"assumedBandwidth: "0" is not a positive quantity (e.g. 64Mi)"#),
        ),
        (
            r#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#,
            InvalidBecause("kubevirt: both namespace and name must be set"),
        ),
        ("[", Invalid),
    ]);
}
