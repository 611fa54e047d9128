//! The eviction verdict natively: every row of its table ([`evac_testkit::eviction_cases`]),
//! decided on a [`TestCluster`]; and what only a native run sees: the reads each decision makes,
//! the requests it does not decide, settings and wire formats.

use serde_json::json;

use evac_core::effect::EvacuationSource;
use evac_core::eviction::*;
use evac_core::model::AdmissionRequest;
use evac_core::trace::Trace;
use evac_core::{Decision, Effect, ObjectRef};
use evac_testkit::{check_cases, eviction_answer, eviction_cases, Case, TestCluster};

const NS: &str = "default";
const NODE: &str = "node01";
const VMI: &str = "vm";
/// The launcher pod of VMI in the table.
const POD: &str = "virt-launcher-vm-abcde";

/// The table's case `name`.
fn case(name: &str) -> Case {
    eviction_cases().into_iter().find(|case| case.name == name).unwrap_or_else(|| panic!("no case {name:?}"))
}

/// The reads the decision of `case` makes.
fn reads_of(case: &Case) -> Vec<String> {
    let cluster = TestCluster::for_case(case);
    eviction_answer(case, &cluster).expect("an answer");
    cluster.reads()
}

#[test]
fn every_row_of_the_table() {
    check_cases("eviction", &eviction_cases(), |case| eviction_answer(case, &TestCluster::for_case(case)));
}

/// The KubeVirt CR is read only when the VMI has no strategy of its own.
#[test]
fn the_cluster_wide_strategy_is_read_only_as_a_fallback() {
    let cases: Vec<Case> =
        eviction_cases().into_iter().filter(|case| case.name.starts_with("first eviction: ")).collect();
    assert_eq!(cases.len(), 72);
    let pod = POD;
    for case in &cases {
        let own_strategy = !case.name.starts_with("first eviction: VMI unset,");
        let mut expected =
            vec![format!("get Pod {NS}/{pod}"), format!("get VirtualMachineInstance {NS}/{VMI}")];
        if !own_strategy {
            expected.push("list KubeVirt".into());
        }
        assert_eq!(reads_of(case), expected, "{}", case.name);
    }
}

#[test]
fn reads_are_made_only_as_needed() {
    let pod = POD;
    let hotplug = "hp-volume-x7k2p";
    let rows: &[(&str, &[String])] = &[
        (
            "settings: the CR there is, named",
            &[
                format!("get Pod {NS}/{pod}"),
                format!("get VirtualMachineInstance {NS}/{VMI}"),
                "get KubeVirt kubevirt/kubevirt".into(),
            ],
        ),
        // A pod KubeVirt does not act on: only the pod.
        (
            "not a running launcher pod: a launcher pod without kubevirt.io/domain",
            &[format!("get Pod {NS}/{pod}")],
        ),
        ("not a running launcher pod: a plain pod", &[format!("get Pod {NS}/nginx")]),
        // The VMI is read only once the owner is known to be its running launcher pod.
        (
            "hotplug pod: the launcher pod is gone",
            &[format!("get Pod {NS}/{hotplug}"), format!("get Pod {NS}/{pod}")],
        ),
        (
            "hotplug pod: the launcher pod cannot be read",
            &[format!("get Pod {NS}/{hotplug}"), format!("get Pod {NS}/{pod}")],
        ),
        (
            "hotplug pod: the VMI runs",
            &[
                format!("get Pod {NS}/{hotplug}"),
                format!("get Pod {NS}/{pod}"),
                format!("get VirtualMachineInstance {NS}/{VMI}"),
            ],
        ),
    ];
    for (name, expected) in rows {
        assert_eq!(reads_of(&case(name)), *expected, "{name}");
    }
}

#[test]
fn only_pods_eviction_create_is_decided() {
    let cluster = TestCluster::default();
    let text = case("first eviction: VMI LiveMigrate, no KubeVirt CR, migratable").request.to_string();
    let parse = || serde_json::from_str::<AdmissionRequest<'_>>(&text).unwrap();

    let mut request = parse();
    request.sub_resource = Default::default();
    let err = decide(&request, &Settings::default(), &cluster).unwrap_err();
    assert_eq!(err.to_string(), "this policy only evaluates pods/eviction CREATE requests, got CREATE pods");

    let mut request = parse();
    request.operation = "DELETE".into();
    let err = decide(&request, &Settings::default(), &cluster).unwrap_err();
    assert_eq!(err.got, "DELETE pods/eviction");

    let mut request = parse();
    request.resource.group = "kubevirt.io".into();
    request.resource.resource = "virtualmachineinstances".into();
    request.sub_resource = Default::default();
    let err = decide(&request, &Settings::default(), &cluster).unwrap_err();
    assert_eq!(err.got, "CREATE virtualmachineinstances.kubevirt.io");
    assert!(cluster.reads().is_empty());
}

#[test]
fn settings_validation() {
    assert!(Settings::default().validate().is_ok());
    let bad = Settings { kubevirt: Some(KubeVirtRef { namespace: String::new(), name: "kubevirt".into() }) };
    assert_eq!(bad.validate().unwrap_err(), "kubevirt: both namespace and name must be set");
    assert!(
        serde_json::from_value::<Settings>(json!({"kubeVirt": {}})).is_err(),
        "unknown fields are refused"
    );
}

fn mark(dry_run: bool, source: Option<EvacuationSource>) -> Effect {
    Effect::MarkForEvacuation { vmi: ObjectRef::new(NS, VMI), node: NODE.into(), dry_run, source }
}

#[test]
fn effect_wire_format() {
    let effect = mark(true, Some(EvacuationSource::Descheduler));
    assert_eq!(
        serde_json::to_string(&effect).unwrap(),
        r#"{"type":"MarkForEvacuation","vmi":{"namespace":"default","name":"vm"},"node":"node01","dryRun":true,"source":"descheduler"}"#
    );
    assert_eq!(
        serde_json::to_string(&mark(false, None)).unwrap(),
        r#"{"type":"MarkForEvacuation","vmi":{"namespace":"default","name":"vm"},"node":"node01","dryRun":false,"source":null}"#
    );
}

#[test]
fn response_wire_format() {
    let response = evac_core::PolicyResponse::from(Decision::deny("no").with_effect(mark(false, None)));
    let value = serde_json::to_value(&response).unwrap();
    assert_eq!(value["accepted"], json!(false));
    assert_eq!(value["code"], json!(429));
    assert_eq!(value["message"], json!("no"));
    assert_eq!(value["effects"][0]["type"], json!("MarkForEvacuation"));
    for field in ["warnings", "audit_annotations", "mutated_object"] {
        assert!(value.as_object().unwrap().contains_key(field), "{field}");
    }
    let allowed = serde_json::to_value(evac_core::PolicyResponse::from(Decision::allow())).unwrap();
    assert_eq!(allowed["accepted"], json!(true));
    assert_eq!(allowed["effects"], json!([]));
}

/// The trace decides nothing: on every row the traced decision is the decision, and its last step
/// names the verdict that was given (allow, or 429 and a mark, or a denial).
#[test]
fn the_trace_ends_with_the_verdict_on_every_row() {
    for case in eviction_cases() {
        let cluster = TestCluster::for_case(&case);
        let text = case.request.to_string();
        let request: AdmissionRequest<'_> = serde_json::from_str(&text).unwrap();
        let settings: Settings = serde_json::from_value(case.settings.clone()).unwrap_or_default();
        let plain = decide(&request, &settings, &cluster).map(evac_core::PolicyResponse::from);
        let mut trace = Trace::on();
        let traced =
            decide_traced(&request, &settings, &cluster, &mut trace).map(evac_core::PolicyResponse::from);
        assert_eq!(format!("{plain:?}"), format!("{traced:?}"), "{}", case.name);
        let last = trace.steps().last().unwrap_or_else(|| panic!("{}: an empty trace", case.name)).clone();
        assert!(last.contains("->"), "{}: the last step gives no verdict: {last}", case.name);
        match traced {
            Ok(response) if response.accepted => assert!(last.contains("allow"), "{}: {last}", case.name),
            Ok(response) if !response.effects.is_empty() => {
                assert!(last.contains("429") && last.contains("mark"), "{}: {last}", case.name)
            }
            Ok(_) => assert!(!last.contains("allow"), "{}: {last}", case.name),
            Err(_) => assert!(last.contains("rejected"), "{}: {last}", case.name),
        }
    }
}

#[test]
fn a_drain_of_a_migratable_vm_is_traced_in_kubevirts_order() {
    let case = eviction_cases()
        .into_iter()
        .find(|case| {
            let answer = eviction_answer(case, &TestCluster::for_case(case));
            case.name.starts_with("first eviction: ") && answer.is_ok_and(|a| !a.effects.is_empty())
        })
        .expect("a first eviction that marks");
    let cluster = TestCluster::for_case(&case);
    let text = case.request.to_string();
    let request: AdmissionRequest<'_> = serde_json::from_str(&text).unwrap();
    let settings: Settings = serde_json::from_value(case.settings.clone()).unwrap_or_default();
    let mut trace = Trace::on();
    decide_traced(&request, &settings, &cluster, &mut trace).unwrap();
    let steps = trace.into_steps();
    let order = ["eviction of pod", "virt-launcher", "VMI", "strategy", "live-migratable", "not yet marked"];
    assert_eq!(steps.len(), order.len(), "{steps:?}");
    for (step, expected) in steps.iter().zip(order) {
        assert!(step.contains(expected), "{step:?} should say {expected:?} ({steps:?})");
    }
}

/// A launcher pod that has completed is left to the API server, and the trace says why: it is a
/// launcher pod, finished, not a pod of another kind.
#[test]
fn a_completed_launcher_pod_is_traced_as_finished() {
    for phase in ["Succeeded", "Failed"] {
        let case = case(&format!("not a running launcher pod: a launcher pod that {phase}"));
        let cluster = TestCluster::for_case(&case);
        let text = case.request.to_string();
        let request: AdmissionRequest<'_> = serde_json::from_str(&text).unwrap();
        let mut trace = Trace::on();
        let decision = decide_traced(&request, &Settings::default(), &cluster, &mut trace).unwrap();
        assert_eq!(decision, Decision::allow(), "{phase}");
        let steps = trace.into_steps();
        let expected = format!("launcher pod has completed ({phase}) -> allow");
        assert!(steps.iter().any(|s| s == &expected), "{steps:?} should say {expected:?}");
    }
}
