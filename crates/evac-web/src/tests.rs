//! The page's functions natively: the examples decide as `evac eval` answers them (the README's
//! example), inputs in YAML, and bad inputs get errors that say what is wrong.

use crate::decide::{decide, PolicyName};
use crate::examples::{EVICTIONS, EVICTION_CONTEXT, SCENARIOS};

const NOW: f64 = 1_700_000_000.0;

fn example(name: &str) -> &'static str {
    EVICTIONS.iter().find(|e| e.name == name).unwrap().text
}

#[test]
fn the_first_example_is_kubevirts_429_and_a_mark() {
    let answer =
        decide(PolicyName::PodEviction, example("01-drain-live-migratable"), EVICTION_CONTEXT, "", NOW)
            .unwrap();
    assert!(!answer.response.accepted);
    assert_eq!(answer.response.code, Some(429));
    assert_eq!(
        answer.response.message.as_deref(),
        Some(r#"Eviction triggered evacuation of VMI "default/web-1""#)
    );
    assert_eq!(answer.response.effects.len(), 1);
    assert_eq!(answer.response.effects[0].type_name(), "MarkForEvacuation");
    assert_eq!(answer.trace.last().unwrap(), "not yet marked -> 429, mark for evacuation from node01");
    assert_eq!(answer.reads[0], "get Pod default/virt-launcher-web-1-8xk2p: found");
}

#[test]
fn a_request_in_yaml_decides_as_in_json() {
    let json: serde_json::Value = serde_json::from_str(example("08-strategy-none")).unwrap();
    let yaml = serde_yaml::to_string(&json).unwrap();
    let from_json =
        decide(PolicyName::PodEviction, example("08-strategy-none"), EVICTION_CONTEXT, "", NOW).unwrap();
    let from_yaml = decide(PolicyName::PodEviction, &yaml, EVICTION_CONTEXT, "", NOW).unwrap();
    assert_eq!(format!("{:?}", from_json.response), format!("{:?}", from_yaml.response));
    assert!(from_yaml.response.accepted);
}

#[test]
fn the_policys_own_trace_or_its_reads_and_verdict() {
    let request = example("01-drain-live-migratable");
    // disruption-cause traces its own checks: an eviction is not a request it evaluates.
    let answer = decide(PolicyName::DisruptionCause, request, EVICTION_CONTEXT, "", NOW).unwrap();
    assert!(answer.trace.last().unwrap().ends_with("-> rejected (400)"), "{:?}", answer.trace);
    // evacuation has no trace of its own: its reads, then its verdict.
    let answer = decide(PolicyName::Evacuation, request, EVICTION_CONTEXT, "", NOW).unwrap();
    assert!(answer.trace.last().unwrap().starts_with("-> 400: "), "{:?}", answer.trace);
}

#[test]
fn bad_inputs_say_what_is_wrong() {
    let err = |policy: &str, request: &str, objects: &str, settings: &str| {
        let policy = PolicyName::parse(policy)?;
        decide(policy, request, objects, settings, NOW).map(|_| ())
    };
    let request = example("01-drain-live-migratable");
    let message = |r: Result<(), crate::WebError>| r.unwrap_err().to_string();
    assert!(message(err("nope", request, "", "")).contains("no policy \"nope\""));
    assert!(message(err("pod-eviction", "{", "", "")).contains("not valid JSON"));
    assert!(message(err("pod-eviction", "kind: Pod\nmetadata: {}", "", "")).contains("has no uid"));
    assert!(message(err("pod-eviction", request, "kind: Pod", "")).contains("the cluster objects"));
    assert!(message(err("pod-eviction", request, "", "[1]")).contains("must be an object"));
    assert!(message(err("pod-eviction", request, "", ": :")).contains("neither JSON nor YAML"));
}

#[test]
fn settings_a_host_would_refuse_are_reported_beside_the_answer() {
    let settings = r#"{"nodePressure": {"headroom": "-1Gi"}}"#;
    let request = example("01-drain-live-migratable");
    let answer = decide(PolicyName::DisruptionCause, request, EVICTION_CONTEXT, settings, NOW).unwrap();
    let refused = answer.settings_refused.expect("refused settings");
    assert!(refused.contains("is negative"), "{refused}");
    let plain = decide(PolicyName::DisruptionCause, request, EVICTION_CONTEXT, "", NOW).unwrap();
    assert!(plain.settings_refused.is_none());
}

#[test]
fn a_scenario_runs_with_kubevirt_alone_and_draws_its_report() {
    let drain = SCENARIOS.iter().find(|s| s.name == "drain").unwrap();
    let run = crate::scenario::run(drain.text).unwrap();
    assert_eq!((run.report.vms.migrated, run.report.vms.shut_down), (10, 2));
    assert!(run.html.contains("data-run=\"KubeVirt alone\""));
    assert!(!run.html.contains("<html"), "a fragment, not a page");
    assert!(!run.timeline.is_empty());
    assert!(crate::scenario::run("name: [").unwrap_err().to_string().contains("scenario"));
}
