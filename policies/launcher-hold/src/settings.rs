/// The policy's settings: those of the `launcher-hold` mutation.
///
/// ```yaml
/// settings:
///   windowSeconds: 300   # the longest a hold keeps a launcher pod's SIGTERM back
///   port: 9190           # the hold endpoint's port on the node's 127.0.0.1
/// ```
pub type Settings = evac_core::hold::LauncherHoldSettings;

#[cfg(test)]
#[test]
fn validation_answers_every_payload() {
    use evac_policy_guest::SettingsVerdict::*;
    evac_policy_guest::check_settings_table::<Settings>(&[
        (r#"{"windowSeconds": 600, "port": 10190}"#, Valid),
        (r#"{"windowSeconds": 0}"#, InvalidBecause("windowSeconds must be between 1 and 86400, got 0")),
        (r#"{"window": 60}"#, InvalidMentioning("unknown field `window`")),
        (r#"{"port": 70000}"#, Invalid),
        ("[", Invalid),
    ]);
}
