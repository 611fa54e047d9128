//! The disruption-cause decision natively: every row of its table
//! ([`evac_testkit::disruption_cases`]), decided on a [`TestCluster`]; and what only a native run
//! sees: the classification of causes, node pressure's selection, the reads each decision makes,
//! settings and the response's audit annotations.

use std::collections::BTreeMap;

use serde_json::Value;

use evac_core::disruption::*;
use evac_core::model::AdmissionRequest;
use evac_core::{Decision, ObjectRef, PolicyResponse};
use evac_testkit::{check_cases, disruption_answer, disruption_cases, Case, TestCluster};

const NS: &str = "default";
const GI: f64 = 1024.0 * 1024.0 * 1024.0;

/// The reads the decision of `case` makes.
fn reads_of(case: &Case) -> Vec<String> {
    let cluster = TestCluster::for_case(case);
    disruption_answer(case, &cluster).expect("an answer");
    cluster.reads()
}

#[test]
fn every_row_of_the_table() {
    check_cases("disruption", &disruption_cases(), |case| {
        disruption_answer(case, &TestCluster::for_case(case))
    });
}

/// Reads are made only as needed: nothing for a pod that is not a disrupted launcher pod or a
/// healthy node, the VMI alone for a user's deletion, the node when no condition names the cause
/// or when the cause may call for an evacuation (a node that is down moves nothing), the
/// configuration only for a cause behind a gate.
#[test]
fn reads_are_made_only_as_needed() {
    let cases = disruption_cases();
    let mut checked = 0;
    for case in &cases {
        let expected: &[&str] = if case.name.starts_with("left alone: ") {
            &[]
        } else if case.name.starts_with("user deletion: ") {
            // Neither the node nor the KubeVirt CR matters.
            &["get VirtualMachineInstance default/vm"]
        } else {
            continue;
        };
        assert_eq!(reads_of(case), expected, "{}", case.name);
        checked += 1;
    }
    assert_eq!(checked, 9 + 84);

    let vmi = "get VirtualMachineInstance default/vm";
    let vmis = "list VirtualMachineInstance kubevirt.io/nodeName=node01";
    let metrics = "get NodeMetrics node01";
    let rows: &[(&str, &[&str])] = &[
        ("the pod the VM runs in: the VM runs in this pod", &[vmi, "get Node node01", "list KubeVirt"]),
        // Without a condition, the node names the cause.
        ("missing: no node", &[vmi, "get Node node01"]),
        // A cause without a gate reads no configuration.
        (
            "cause: DELETE, DeletionByPodGC, VMI LiveMigrate, cluster-wide unset, migratable, gates none",
            &[vmi],
        ),
        ("missing: no VMI", &[vmi]),
        ("missing: the pod names no VMI", &[]),
        // A pod without a node reads none.
        ("missing: a pod without a node", &[vmi]),
        ("settings: the named CR", &[vmi, "get Node node01", "get KubeVirt kubevirt/kv"]),
        // The node's memory.available: its NodeMetrics, first (a node update that is not short of
        // memory reads nothing more).
        ("node pressure: the gate is off", &[metrics, "list KubeVirt"]),
        ("node pressure: just enough available", &[metrics]),
        ("node pressure: no figure, no pressure", &[metrics]),
        // Where the chosen VMs can go, with each node's metrics: read only once there are some.
        (
            "node pressure: 3Gi short: one VM covers it",
            &[metrics, "list KubeVirt", vmis, "list Node", "get NodeMetrics node02"],
        ),
        ("node pressure: 3Gi short, 3Gi leaving", &[metrics, "list KubeVirt", vmis]),
    ];
    for (name, expected) in rows {
        let case = cases.iter().find(|case| case.name == *name).unwrap_or_else(|| panic!("no case {name:?}"));
        assert_eq!(reads_of(case), *expected, "{name}");
    }
}

#[test]
fn causes_read_as_kebab_case() {
    let all = [
        (Cause::ApiEviction, "api-eviction"),
        (Cause::Preemption, "preemption"),
        (Cause::TaintManager, "taint-manager"),
        (Cause::KubeletEviction, "kubelet-eviction"),
        (Cause::NodePressure, "node-pressure"),
        (Cause::PodGc, "pod-gc"),
        (Cause::UserDeletion, "user-deletion"),
        (Cause::Unknown, "unknown"),
    ];
    for (cause, text) in all {
        assert_eq!(cause.as_str(), text);
    }
}

#[test]
fn classification() {
    // (DisruptionTarget reason, VMI being deleted, node MemoryPressure, cause)
    let cases = [
        (Some("PreemptionByScheduler"), false, false, Cause::Preemption),
        (Some("DeletionByTaintManager"), false, false, Cause::TaintManager),
        (Some("TerminationByKubelet"), false, false, Cause::KubeletEviction),
        (Some("EvictionByEvictionAPI"), false, false, Cause::ApiEviction),
        (Some("DeletionByPodGC"), false, false, Cause::PodGc),
        (Some("SomethingNew"), false, false, Cause::Unknown),
        (None, false, false, Cause::Unknown),
        (None, false, true, Cause::NodePressure),
        // The condition names the cause even on a node under pressure.
        (Some("PreemptionByScheduler"), false, true, Cause::Preemption),
        (Some("SomethingNew"), false, true, Cause::Unknown),
        // A VMI being deleted is its user's shutdown, whatever else holds.
        (None, true, false, Cause::UserDeletion),
        (None, true, true, Cause::UserDeletion),
        (Some("PreemptionByScheduler"), true, false, Cause::UserDeletion),
        (Some("DeletionByTaintManager"), true, true, Cause::UserDeletion),
        (Some("TerminationByKubelet"), true, true, Cause::UserDeletion),
    ];
    for (reason, deleted, pressure, cause) in cases {
        assert_eq!(
            classify(reason, deleted, pressure),
            cause,
            "{reason:?} deleted={deleted} pressure={pressure}"
        );
    }
}

#[test]
fn audit_annotations_reach_the_response_only_when_set() {
    let response = PolicyResponse::from(
        Decision::allow().with_audit_annotation(CAUSE_AUDIT_ANNOTATION, Cause::Preemption.as_str()),
    );
    let annotations = BTreeMap::from([(CAUSE_AUDIT_ANNOTATION.to_owned(), "preemption".to_owned())]);
    assert_eq!(response.audit_annotations, Some(annotations));
    let json = serde_json::to_value(PolicyResponse::from(Decision::allow())).unwrap();
    assert_eq!(json["audit_annotations"], Value::Null);
}

#[test]
fn selection_is_fewest_then_least_memory() {
    let candidate = |name: &str, gib: f64| Candidate { vmi: ObjectRef::new(NS, name), memory: gib * GI };
    let names = |chosen: Vec<Candidate>| chosen.into_iter().map(|c| c.vmi.name).collect::<Vec<_>>();
    let pool = || vec![candidate("d", 1.0), candidate("a", 4.0), candidate("c", 2.0), candidate("b", 2.0)];
    assert_eq!(names(select_covering(pool(), 0.0)), Vec::<String>::new());
    assert_eq!(names(select_covering(pool(), -3.0 * GI)), Vec::<String>::new());
    assert_eq!(names(select_covering(pool(), 0.5 * GI)), ["d"]);
    assert_eq!(names(select_covering(pool(), 2.0 * GI)), ["b"]);
    assert_eq!(names(select_covering(pool(), 4.5 * GI)), ["a", "d"]);
    assert_eq!(names(select_covering(pool(), 6.5 * GI)), ["a", "b", "d"]);
    assert_eq!(names(select_covering(pool(), 9.0 * GI)), ["a", "b", "c", "d"]);
    assert_eq!(names(select_covering(pool(), 99.0 * GI)), ["a", "b", "c", "d"]);
    // VMs of unknown size come last and help only a best effort.
    let with_unknown = vec![candidate("x", 0.0), candidate("a", 1.0)];
    assert_eq!(names(select_covering(with_unknown.clone(), 0.5 * GI)), ["a"]);
    assert_eq!(names(select_covering(with_unknown, 2.0 * GI)), ["a", "x"]);
}

#[test]
fn settings_validate_quantities() {
    assert_eq!(Settings::default().validate(), Ok(()));
    let settings: Settings = serde_json::from_str(r#"{"nodePressure": {"headroom": "512Mi"}}"#).unwrap();
    assert_eq!(settings.node_pressure, NodePressure { threshold: "3500Mi".into(), headroom: "512Mi".into() });
    let bad: Settings = serde_json::from_str(r#"{"nodePressure": {"threshold": "lots"}}"#).unwrap();
    assert_eq!(
        bad.validate(),
        Err(r#"nodePressure.threshold: "lots" is not a memory quantity (e.g. 3500Mi)"#.into())
    );
    let bad: Settings = serde_json::from_str(r#"{"nodePressure": {"headroom": "-1Gi"}}"#).unwrap();
    assert!(bad.validate().unwrap_err().0.starts_with("nodePressure.headroom"));
    let half: Settings =
        serde_json::from_str(r#"{"kubevirt": {"namespace": "kubevirt", "name": ""}}"#).unwrap();
    assert_eq!(half.validate(), Err("kubevirt: both namespace and name must be set".into()));
    assert!(serde_json::from_str::<Settings>(r#"{"nodepressure": {}}"#).is_err());
    assert!(serde_json::from_str::<Settings>(r#"{"nodePressure": {"treshold": "1Gi"}}"#).is_err());
    // Unvalidated settings reach a node decision as an error: the table's "node pressure: invalid
    // settings".
}

/// The trace decides nothing: on every row the traced decision is the decision, and its last step
/// names what was answered (allow, with the effect when there is one; a warning; a rejection).
#[test]
fn the_trace_ends_with_the_answer_on_every_row() {
    let holds: Vec<_> = evac_testkit::hold_cases();
    for case in disruption_cases().into_iter().chain(holds) {
        let hold = case.name.starts_with("hold: ");
        let cluster = TestCluster::for_case(&case);
        let text = case.request.to_string();
        let request: AdmissionRequest<'_> = serde_json::from_str(&text).unwrap();
        let Ok(settings) = serde_json::from_value::<Option<Settings>>(case.settings.clone()) else {
            continue;
        };
        let settings = settings.unwrap_or_default();
        let now = evac_testkit::TABLE_NOW;
        let plain = decide(&request, &settings, &cluster, now);
        let mut trace = evac_core::trace::Trace::on();
        let traced = decide_traced(&request, &settings, &cluster, now, &mut trace);
        assert_eq!(plain, traced, "{}", case.name);
        let last = trace.steps().last().unwrap_or_else(|| panic!("{}: an empty trace", case.name)).clone();
        assert!(last.contains("->"), "{}: the last step gives no answer: {last}", case.name);
        match &traced {
            Ok(decision) if hold && !decision.is_allowed() => {
                assert!(last.contains("hold (429)"), "{}: {last}", case.name)
            }
            Ok(decision) => {
                assert!(last.contains("allow"), "{}: {last}", case.name);
                if let (false, [effect]) = (hold, decision.effects.as_slice()) {
                    assert!(last.contains(effect.type_name()), "{}: {last}", case.name);
                }
            }
            Err(DecideError::Read(_)) => assert!(last.contains("warning"), "{}: {last}", case.name),
            Err(_) => assert!(last.contains("rejected"), "{}: {last}", case.name),
        }
    }
}
