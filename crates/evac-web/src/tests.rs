//! The page's functions natively: the examples decide as `evac eval` answers them (the README's
//! example), inputs in YAML, and bad inputs get errors that say what is wrong.

use evac_core::PolicyId;

use crate::decide::decide;
use crate::examples::{EVICTIONS, EVICTION_CONTEXT, SCENARIOS};
use crate::scenario::Runs;

const NOW: f64 = 1_700_000_000.0;

fn example(name: &str) -> &'static str {
    EVICTIONS.iter().find(|e| e.name == name).unwrap().text
}

#[test]
fn the_first_example_is_kubevirts_429_and_a_mark() {
    let answer =
        decide(PolicyId::PodEviction, example("01-drain-live-migratable"), EVICTION_CONTEXT, "", NOW)
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
        decide(PolicyId::PodEviction, example("08-strategy-none"), EVICTION_CONTEXT, "", NOW).unwrap();
    let from_yaml = decide(PolicyId::PodEviction, &yaml, EVICTION_CONTEXT, "", NOW).unwrap();
    assert_eq!(format!("{:?}", from_json.response), format!("{:?}", from_yaml.response));
    assert!(from_yaml.response.accepted);
}

#[test]
fn every_policy_traces_its_own_checks_to_the_answer() {
    let request = example("01-drain-live-migratable");
    // An eviction is not a request disruption-cause or evacuation evaluates: they say so last.
    let answer = decide(PolicyId::DisruptionCause, request, EVICTION_CONTEXT, "", NOW).unwrap();
    assert!(answer.trace.last().unwrap().ends_with("-> rejected (400)"), "{:?}", answer.trace);
    let answer = decide(PolicyId::Evacuation, request, EVICTION_CONTEXT, "", NOW).unwrap();
    assert_eq!(
        answer.trace,
        ["-> rejected (400): this policy only evaluates Node requests, got CREATE policy/v1 Eviction"]
    );
    // A cordoned node01 of the examples' cluster: db-1 is marked for it, and KubeVirt's
    // evacuation controller (on by default) migrates it; web-1 is not marked.
    let node = r#"{"kind": {"group": "", "version": "v1", "kind": "Node"}, "operation": "UPDATE",
        "name": "node01", "uid": "u",
        "object": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node01"}, "spec": {"unschedulable": true}}}"#;
    let answer = decide(PolicyId::Evacuation, node, EVICTION_CONTEXT, "", NOW).unwrap();
    let trace = answer.trace.join("\n");
    assert!(trace.contains("node UPDATE of node01"), "{trace}");
    assert!(
        trace.contains("default/db-1: marked for node01; KubeVirt's evacuation controller migrates it"),
        "{trace}"
    );
    assert!(trace.contains("default/web-1: not marked; stays"), "{trace}");
    assert!(answer.trace.last().unwrap().starts_with("-> allow"), "{trace}");
}

#[test]
fn bad_inputs_say_what_is_wrong() {
    let err = |policy: &str, request: &str, objects: &str, settings: &str| {
        let policy = crate::decide::policy(policy)?;
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
    let answer = decide(PolicyId::DisruptionCause, request, EVICTION_CONTEXT, settings, NOW).unwrap();
    let refused = answer.settings_refused.expect("refused settings");
    assert!(refused.contains("is negative"), "{refused}");
    let plain = decide(PolicyId::DisruptionCause, request, EVICTION_CONTEXT, "", NOW).unwrap();
    assert!(plain.settings_refused.is_none());
}

fn scenario(name: &str) -> &'static str {
    SCENARIOS.iter().find(|s| s.name == name).unwrap().text
}

#[test]
fn a_scenario_runs_with_kubevirt_alone_and_draws_its_report() {
    let run = crate::scenario::run(scenario("drain"), Runs::KubeVirt).unwrap();
    let [alone] = run.runs.as_slice() else { panic!("one run") };
    assert_eq!(alone.label, "KubeVirt alone");
    assert_eq!((alone.report.vms.migrated, alone.report.vms.shut_down), (10, 2));
    assert!(run.html.contains("data-run=\"KubeVirt alone\""));
    assert!(!run.html.contains("data-run=\"with evac\""));
    assert!(!run.html.contains("<html"), "a fragment, not a page");
    assert!(!alone.timeline.is_empty());
    assert!(crate::scenario::run("name: [", Runs::Both).unwrap_err().to_string().contains("scenario"));
}

/// The drain example with evac: the two VMs KubeVirt alone shuts down (`evictionStrategy: None`
/// and a non-migratable `LiveMigrateIfPossible`, which KubeVirt's webhook lets go) are the
/// ones evac cannot migrate either; every run of the pair keeps the invariants.
#[test]
fn a_scenario_runs_with_evac_beside_kubevirt_alone() {
    let run = crate::scenario::run(scenario("drain"), Runs::Both).unwrap();
    let [alone, evac] = run.runs.as_slice() else { panic!("two runs") };
    assert_eq!((alone.label.as_str(), evac.label.as_str()), ("KubeVirt alone", "with evac"));
    assert!(run.problems.is_empty(), "{:?}", run.problems);
    assert!(evac.report.vms.shut_down <= alone.report.vms.shut_down);
    assert!(
        evac.report.evac_effects.keys().any(|k| k.starts_with("pod-eviction ")),
        "{:?}",
        evac.report.evac_effects
    );
    assert!(evac.report.controller.as_ref().is_some_and(|c| c.evaluations > 0), "the controller ran");
    for label in ["KubeVirt alone", "with evac"] {
        assert!(run.html.contains(&format!("data-run=\"{label}\"")), "{label}");
    }
}

/// `descheduler`'s baseline is another scenario, `descheduler-naive`, which the page has, and
/// names its run by its `label`, the naive descheduler, not KubeVirt alone.
#[test]
fn a_baseline_named_by_the_scenario_is_the_page_s() {
    let both = crate::scenario::run(scenario("descheduler"), Runs::Both).unwrap();
    let naive = crate::scenario::run(scenario("descheduler-naive"), Runs::KubeVirt).unwrap();
    assert_eq!(both.runs[0].report.scenario, naive.runs[0].report.scenario);
    assert_eq!(
        (both.runs[0].label.as_str(), both.runs[1].label.as_str()),
        ("naive descheduler", "with evac")
    );
    assert_eq!(naive.runs[0].label, "naive descheduler");
    assert!(both.html.contains("data-run=\"naive descheduler\""));
    assert!(!both.html.contains("KubeVirt alone\""), "no run is named KubeVirt alone");
    let unknown = scenario("descheduler").replace("baseline: descheduler-naive.yaml", "baseline: other.yaml");
    let error = crate::scenario::run(&unknown, Runs::Both).unwrap_err().to_string();
    assert!(error.contains("other.yaml is not one of the page's scenarios"), "{error}");
    assert!(crate::scenario::run(&unknown, Runs::Evac).is_ok(), "evac alone needs no baseline");
    assert!(Runs::parse("neither").is_err());
}

/// A linked policy reads through the capabilities the registry binds it to: a resource its
/// `contextAwareResources` do not grant is refused in Kubewarden's words, as the wasm host
/// refuses it to the module; a module the page does not link is a clear error.
#[test]
fn linked_policies_read_only_what_they_are_granted() {
    use std::path::Path;
    use std::sync::Arc;

    use evac_evaluator::ModuleLoader;
    use evac_runtime::capabilities::KubernetesCapabilities;

    let clock = Arc::new(evac_sim::SimClock::default());
    let store = Arc::new(
        evac_cluster::MemoryStore::from_list_with_clock(EVICTION_CONTEXT, Arc::clone(&clock) as _).unwrap(),
    );
    let loader = crate::linked::LinkedPolicies::new(Arc::clone(&store) as _, clock);
    let path = Path::new("dist/policies/pod-eviction.wasm");
    let bytes = loader.read(path).unwrap();
    let only_pods =
        KubernetesCapabilities::new(loader.source()).granting([evac_cluster::Kind::new("v1", "Pod")]);
    let policy = loader.bind(&bytes, path, Arc::new(only_pods), None).unwrap();
    let request =
        evac_core::model::envelope::request_from_input(example("01-drain-live-migratable").as_bytes())
            .unwrap();
    let settings = serde_json::value::RawValue::from_string("{}".into()).unwrap();
    let response = evac_runtime::kubewarden::validate(&*policy, &request, &settings).unwrap();
    let message = response.message.unwrap_or_default();
    assert!(
        message.contains(
            "Policy has not been granted access to Kubernetes kubevirt.io/v1/VirtualMachineInstance"
        ),
        "{message}"
    );
    let everything = KubernetesCapabilities::new(loader.source());
    let policy = loader.bind(&bytes, path, Arc::new(everything), None).unwrap();
    let response = evac_runtime::kubewarden::validate(&*policy, &request, &settings).unwrap();
    assert_eq!((response.accepted, response.code), (false, Some(429)));
    assert_eq!(evac_runtime::kubewarden::protocol_version(&*policy).unwrap(), "v1");
    let unknown = policy.call("mutate", b"{}").unwrap_err().to_string();
    assert_eq!(unknown, "the policy returned an error: No handler registered for function mutate");
    let error = loader.read(Path::new("dist/policies/other.wasm")).unwrap_err().to_string();
    assert!(error.contains("the page links no such policy"), "{error}");
    assert!(loader
        .bind(b"not a linked module", path, Arc::new(KubernetesCapabilities::new(loader.source())), None)
        .is_err());
}

/// The pasted cluster is parsed once per text: the same text decides the same, another text
/// (here without the VMI) is read afresh, and the first text again is the first answer.
#[test]
fn a_changed_cluster_is_read_again() {
    let request = example("01-drain-live-migratable");
    let first = decide(PolicyId::PodEviction, request, EVICTION_CONTEXT, "", NOW).unwrap();
    let again = decide(PolicyId::PodEviction, request, EVICTION_CONTEXT, "", NOW).unwrap();
    assert_eq!(format!("{:?}", first.response), format!("{:?}", again.response));
    assert_eq!(first.response.code, Some(429));
    let without_vmis = r#"{"apiVersion": "v1", "kind": "List", "items": []}"#;
    let other = decide(PolicyId::PodEviction, request, without_vmis, "", NOW).unwrap();
    assert_ne!(format!("{:?}", other.response), format!("{:?}", first.response));
    let back = decide(PolicyId::PodEviction, request, EVICTION_CONTEXT, "", NOW).unwrap();
    assert_eq!(format!("{:?}", back.response), format!("{:?}", first.response));
}

/// The example requests of disruption-cause and evacuation decide in the page as their README's
/// table says `evac eval` answers them (`tests/examples.rs` checks the built modules).
#[test]
fn the_policies_examples_decide_as_their_readmes_say() {
    use crate::examples::REQUESTS;
    let readmes = [
        ("disruption-cause", include_str!("../../../examples/disruption-cause/README.md")),
        ("evacuation", include_str!("../../../examples/evacuation/README.md")),
    ];
    for (policy, readme) in readmes {
        let examples = REQUESTS.iter().find(|p| p.policy.as_str() == policy).unwrap();
        let rows = evac_testkit::examples::readme_rows(readme);
        assert_eq!(rows.len(), examples.requests.len(), "{policy}");
        for row in rows {
            let example = examples.requests.iter().find(|e| e.name == row[0]).unwrap();
            let name = crate::decide::policy(policy).unwrap();
            let answer = decide(name, example.text, examples.context, examples.settings, NOW).unwrap();
            assert!(answer.settings_refused.is_none(), "{:?}", answer.settings_refused);
            let response = serde_json::to_value(&answer.response).unwrap();
            let (verdict, effects) = evac_testkit::examples::in_words(&response);
            assert_eq!((verdict.as_str(), effects.as_str()), (row[1], row[2]), "{policy}: {}", row[0]);
        }
    }
}
