//! The table of the hold decision ([`evac_core::hold::decide`], asked through the disruption-cause
//! decision): each cause of a held launcher pod's termination × the feature gate, the VMI's
//! strategy and migratability, whether the VMI is being deleted, whether the node is gone, where
//! the VM runs, the preemptor's priority, whether the evacuation was taken up or given up, and the
//! time left; with the answer and its reason. Every row is decided at [`super::TABLE_NOW`]: a
//! harness that runs a module gives it that clock.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::objects::{
    kubevirt_cr, launcher_name, launcher_pod, node, vmi, with, NODE, NS, OTHER_NODE, OWN_STRATEGIES,
};
use super::{Case, Expected, ReadFailure, Text};
use evac_core::disruption::{NODE_PRESSURE_GATE, NOEXECUTE_TAINT_GATE, PREEMPTION_GATE};
use evac_core::effect::{EVACUATION_REQUEST_ANNOTATION, EVICTION_SOURCE_ANNOTATION};
use evac_core::hold::{
    HELD_SINCE_ANNOTATION, HOLD_DEADLINE_ANNOTATION, HOLD_RELEASED_AUDIT_ANNOTATION, HOLD_RELEASE_ANNOTATION,
    HOLD_WINDOW_ANNOTATION,
};
use evac_core::{Effect, ObjectRef};

const VM: &str = "vm";
const ALL_GATES: [&str; 3] = [PREEMPTION_GATE, NOEXECUTE_TAINT_GATE, NODE_PRESSURE_GATE];
/// When the rows' deletions began, and (unless a row says otherwise) their holds: 10 s before
/// [`super::TABLE_NOW`].
const STARTED: &str = "2026-11-21T09:44:50Z";
/// The deletion's end: `STARTED` plus the held pod's grace period (300 s of hold, 60 of KubeVirt's).
const DELETION_END: &str = "2026-11-21T09:50:50Z";
/// `STARTED` plus the 300 s window: when a fresh hold ends at the latest.
const WINDOW_END: &str = "2026-11-21T09:49:50Z";
/// [`super::TABLE_NOW`] as a timestamp.
const NOW: &str = "2026-11-21T09:45:00Z";

/// How the held pod's termination began.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Disruption {
    /// Deleted, with this `DisruptionTarget` reason (none: a plain `kubectl delete pod`).
    Deleted(Option<&'static str>),
    /// Stopped by the kubelet, without a deletion.
    Kubelet,
}

/// VM's launcher pod on NODE as `launcher-hold` made it (the 300 s window, a 360 s grace),
/// disrupted so.
fn held_pod(disruption: Disruption) -> Value {
    let mut pod = launcher_pod(NS, VM, NODE);
    pod = with(pod, &format!("/metadata/annotations/{}", escape(HOLD_WINDOW_ANNOTATION)), json!("300"));
    pod = with(pod, "/spec/terminationGracePeriodSeconds", json!(360));
    if let Disruption::Deleted(reason) = disruption {
        pod = with(pod, "/metadata/deletionTimestamp", json!(DELETION_END));
        pod = with(pod, "/metadata/deletionGracePeriodSeconds", json!(360));
        if let Some(reason) = reason {
            let conditions = json!([{"type": "Ready", "status": "True"},
                                    {"type": "DisruptionTarget", "status": "True", "reason": reason}]);
            pod = with(pod, "/status/conditions", conditions);
        }
    }
    pod
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn annotated(pod: Value, key: &str, value: &str) -> Value {
    with(pod, &format!("/metadata/annotations/{}", escape(key)), json!(value))
}

/// The hold endpoint's request for `pod`, whose hold began at `started`.
fn hold_request(pod: Value, started: &str) -> Value {
    json!({
        "uid": "00000000-0000-0000-0000-00000000h01d",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "hold",
        "name": launcher_name(VM),
        "namespace": NS,
        "operation": "CONNECT",
        "userInfo": {"username": "system:serviceaccount:evac:evac-hold"},
        "object": pod,
        "options": {"apiVersion": "evac.kubevirt.io/v1alpha1", "kind": "HoldOptions",
                    "startedAt": started, "container": "compute"},
        "dryRun": false,
    })
}

/// VM, running on NODE with `strategy`, migratable or not; requested from NODE by evac.
fn requested_vm(strategy: Option<&str>, migratable: bool, source: &str) -> Value {
    let vmi = vmi(NS, VM, strategy, migratable, NODE);
    let vmi = annotated(vmi, EVACUATION_REQUEST_ANNOTATION, NODE);
    annotated(vmi, EVICTION_SOURCE_ANNOTATION, source)
}

fn pod_ref() -> ObjectRef {
    ObjectRef::new(NS, launcher_name(VM))
}

/// Held (429), with this state, and the hold recorded on the pod (begun at STARTED, ending at
/// WINDOW_END) unless the pod records it already.
fn hold(state: &str) -> Expected {
    Expected::reject(
        429,
        format!(
            "holding the termination of {NS}/{} while its VM migrates away: {state}; at the latest until {WINDOW_END}",
            launcher_name(VM)
        ),
    )
    .with_effect(recorded(WINDOW_END))
}

fn recorded(until: &str) -> Effect {
    Effect::AnnotatePod {
        pod: pod_ref(),
        annotations: BTreeMap::from([
            (HELD_SINCE_ANNOTATION.to_owned(), Some(STARTED.to_owned())),
            (HOLD_DEADLINE_ANNOTATION.to_owned(), Some(until.to_owned())),
        ]),
    }
}

/// Released (allowed), for this reason, a pod without the hook: nothing to record.
fn release_unhooked(code: &str, why: &str) -> Expected {
    Expected::allow().with_audit_annotation(HOLD_RELEASED_AUDIT_ANNOTATION, &format!("{code}: {why}"))
}

/// Released, for this reason: the pod's hook ends now, and so does its VM's time (its deadline
/// becomes now).
fn release(code: &str, why: &str) -> Expected {
    release_unhooked(code, why).with_effect(Effect::AnnotatePod {
        pod: pod_ref(),
        annotations: BTreeMap::from([(HOLD_DEADLINE_ANNOTATION.to_owned(), Some(NOW.to_owned()))]),
    })
}

/// Released from a hold that was recorded: the same.
fn release_held(code: &str, why: &str) -> Expected {
    release(code, why)
}

/// A row: the objects besides the pod (which the request carries, and the cluster holds too).
fn row(name: &str, pod: Value, started: &str, others: Vec<Value>, expected: Expected) -> Case {
    let mut objects = vec![pod.clone()];
    objects.extend(others);
    Case::new(format!("hold: {name}"), objects, hold_request(pod, started), expected)
}

fn cluster(vm: Value, gates: &[&str]) -> Vec<Value> {
    vec![vm, node(NODE, false, None), node(OTHER_NODE, false, None), kubevirt_cr("kubevirt", None, gates)]
}

/// Every case of the hold decision.
pub fn hold_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    causes(&mut cases);
    strategies(&mut cases);
    the_vm_and_its_node(&mut cases);
    preemptors(&mut cases);
    time_and_evacuation(&mut cases);
    kubelet(&mut cases);
    requests_and_reads(&mut cases);
    cases
}

/// A deletion's cause: its name in the rows, its `DisruptionTarget` reason, and the gate and
/// cause name of an evacuation it may ask for.
type Cause = (&'static str, Option<&'static str>, Option<(&'static str, &'static str)>);

/// Each cause of a deletion, with its gate on and off.
fn causes(cases: &mut Vec<Case>) {
    let causes: [Cause; 6] = [
        ("preemption", Some("PreemptionByScheduler"), Some((PREEMPTION_GATE, "preemption"))),
        ("taint manager", Some("DeletionByTaintManager"), Some((NOEXECUTE_TAINT_GATE, "taint-manager"))),
        ("api eviction", Some("EvictionByEvictionAPI"), None),
        ("pod gc", Some("DeletionByPodGC"), None),
        ("a user's delete", None, None),
        ("an unknown reason", Some("SomethingElse"), None),
    ];
    for (name, reason, evacuated) in causes {
        let pod = held_pod(Disruption::Deleted(reason));
        match evacuated {
            Some((gate, cause)) => {
                let source = if cause == "preemption" { "preemption" } else { "noexecute-taint" };
                let vm = requested_vm(Some("LiveMigrate"), true, source);
                cases.push(row(
                    &format!("{name}, gate on: held"),
                    pod.clone(),
                    STARTED,
                    cluster(vm.clone(), &ALL_GATES),
                    hold(&format!("its evacuation from {NODE} is requested ({cause})")),
                ));
                let others: Vec<&str> = ALL_GATES.iter().copied().filter(|g| *g != gate).collect();
                cases.push(row(
                    &format!("{name}, gate off: released"),
                    pod,
                    STARTED,
                    cluster(vm, &others),
                    release("gate-off", &format!("feature gate {gate} is off")),
                ));
            }
            None => {
                let cause = match reason {
                    Some("EvictionByEvictionAPI") => "api-eviction",
                    Some("DeletionByPodGC") => "pod-gc",
                    _ => "unknown",
                };
                let vm = vmi(NS, VM, Some("LiveMigrate"), true, NODE);
                cases.push(row(
                    &format!("{name}: released"),
                    pod,
                    STARTED,
                    cluster(vm, &ALL_GATES),
                    release("not-evacuated", &format!("a disruption evac does not evacuate for ({cause})")),
                ));
            }
        }
    }
}

/// Each eviction strategy × migratability, for a preemption with its gate on.
fn strategies(cases: &mut Vec<Case>) {
    let pod = held_pod(Disruption::Deleted(Some("PreemptionByScheduler")));
    let requested = format!("its evacuation from {NODE} is requested (preemption)");
    for strategy in OWN_STRATEGIES {
        for migratable in [true, false] {
            let name = format!("strategy {}, migratable {migratable}", strategy.unwrap_or("unset"));
            let vm = requested_vm(strategy, migratable, "preemption");
            let expected = match strategy {
                Some("LiveMigrate" | "LiveMigrateIfPossible") if migratable => hold(&requested),
                Some("External") => hold(&requested),
                _ => {
                    release("strategy", "the VMI's eviction strategy and migratability call for no migration")
                }
            };
            cases.push(row(&name, pod.clone(), STARTED, cluster(vm, &ALL_GATES), expected));
        }
    }
    // The cluster-wide strategy stands in for a VMI's unset one.
    let vm = requested_vm(None, true, "preemption");
    let mut objects = cluster(vm, &[]);
    objects[3] = kubevirt_cr("kubevirt", Some("LiveMigrate"), &ALL_GATES);
    cases.push(row("strategy from the cluster: held", pod, STARTED, objects, hold(&requested)));
}

/// The VMI being deleted, missing, stopped or moved; the node gone.
fn the_vm_and_its_node(cases: &mut Vec<Case>) {
    let pod = held_pod(Disruption::Deleted(Some("PreemptionByScheduler")));
    let vm = requested_vm(Some("LiveMigrate"), true, "preemption");
    let deleting = with(vm.clone(), "/metadata/deletionTimestamp", json!(STARTED));
    cases.push(row(
        "the VMI is being deleted",
        pod.clone(),
        STARTED,
        cluster(deleting, &ALL_GATES),
        release("vmi-deleted", "the VMI is being deleted: its user stops the VM"),
    ));
    let mut no_vmi = cluster(vm.clone(), &ALL_GATES);
    no_vmi.remove(0);
    cases.push(row(
        "no VMI",
        pod.clone(),
        STARTED,
        no_vmi,
        release("no-vmi", "the pod's VMI is not on its node: deleted, or migrated away"),
    ));
    let mut no_node = cluster(vm.clone(), &ALL_GATES);
    no_node.remove(1);
    cases.push(row(
        "the node is gone",
        pod.clone(),
        STARTED,
        no_node,
        release("node-gone", "the pod's node is gone"),
    ));
    let mut down = cluster(vm.clone(), &ALL_GATES);
    down[1] = with(
        node(NODE, false, None),
        "/spec/taints",
        json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
    );
    cases.push(row(
        "the node is down",
        pod.clone(),
        STARTED,
        down,
        release("node-down", "the pod's node is down: no VM migrates away from it"),
    ));
    let moved = with(vm.clone(), "/status/nodeName", json!(OTHER_NODE));
    cases.push(row(
        "the VM has migrated",
        annotated(
            annotated(pod.clone(), HELD_SINCE_ANNOTATION, STARTED),
            HOLD_DEADLINE_ANNOTATION,
            WINDOW_END,
        ),
        STARTED,
        cluster(moved, &ALL_GATES),
        release_held("migrated", &format!("the VM has migrated away: it runs on {OTHER_NODE}")),
    ));
    let stopped = with(vm, "/status/phase", json!("Succeeded"));
    cases.push(row(
        "the VM has stopped",
        pod,
        STARTED,
        cluster(stopped, &ALL_GATES),
        release("not-running", "the VM is not running on the pod's node (phase Succeeded)"),
    ));
}

/// A pending pod nominated to the node, of `priority`.
fn preemptor(priority: i64) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "urgent", "namespace": "batch"},
        "spec": {"priority": priority, "containers": [{"name": "c", "image": "c"}]},
        "status": {"phase": "Pending", "nominatedNodeName": NODE},
    })
}

/// The preemptor's priority against `hold.preemptorPriority`.
fn preemptors(cases: &mut Vec<Case>) {
    let pod = held_pod(Disruption::Deleted(Some("PreemptionByScheduler")));
    let vm = requested_vm(Some("LiveMigrate"), true, "preemption");
    let requested = format!("its evacuation from {NODE} is requested (preemption)");
    let critical = |priority: i64| {
        release(
            "critical-preemptor",
            &format!(
                "the pod was preempted for batch/urgent, of priority {priority}, which is never kept waiting"
            ),
        )
    };
    for (priority, settings, expected) in [
        (1000, json!({}), hold(&requested)),
        (1_999_999_999, json!({}), hold(&requested)),
        (2_000_000_000, json!({}), critical(2_000_000_000)),
        (2_000_001_000, json!({}), critical(2_000_001_000)),
        (1000, json!({"hold": {"preemptorPriority": 1000}}), critical(1000)),
    ] {
        let mut objects = cluster(vm.clone(), &ALL_GATES);
        objects.push(preemptor(priority));
        let name = format!("preemptor of priority {priority}, settings {settings}");
        cases.push(row(&name, pod.clone(), STARTED, objects, expected).with_settings(settings));
    }
    // A taint's eviction has no preemptor: a pod nominated to the node does not end its hold.
    let tainted = held_pod(Disruption::Deleted(Some("DeletionByTaintManager")));
    let mut objects = cluster(requested_vm(Some("LiveMigrate"), true, "noexecute-taint"), &ALL_GATES);
    objects.push(preemptor(2_000_000_000));
    cases.push(row(
        "a critical pod nominated to a tainted node",
        tainted,
        STARTED,
        objects,
        hold(&format!("its evacuation from {NODE} is requested (taint-manager)")),
    ));
}

/// The window, the evacuation taken up (requested, marked) or not, and given up.
fn time_and_evacuation(cases: &mut Vec<Case>) {
    let pod = held_pod(Disruption::Deleted(Some("PreemptionByScheduler")));
    let recorded_pod = annotated(
        annotated(pod.clone(), HELD_SINCE_ANNOTATION, STARTED),
        HOLD_DEADLINE_ANNOTATION,
        WINDOW_END,
    );
    let requested = requested_vm(Some("LiveMigrate"), true, "preemption");
    let plain = vmi(NS, VM, Some("LiveMigrate"), true, NODE);
    let marked = with(plain.clone(), "/status/evacuationNodeName", json!(NODE));
    cases.push(row(
        "recorded already: held without effects",
        recorded_pod.clone(),
        STARTED,
        cluster(requested.clone(), &ALL_GATES),
        Expected {
            effects: Vec::new(),
            ..hold(&format!("its evacuation from {NODE} is requested (preemption)"))
        },
    ));
    cases.push(row(
        "marked: held",
        pod.clone(),
        STARTED,
        cluster(marked, &ALL_GATES),
        hold(&format!("marked for evacuation from {NODE} (preemption)")),
    ));
    cases.push(row(
        "not taken up yet: held",
        pod.clone(),
        STARTED,
        cluster(plain.clone(), &ALL_GATES),
        hold("waiting for its evacuation to be asked for (preemption)"),
    ));
    let early = "2026-11-21T09:44:20Z";
    cases.push(row(
        "not taken up within 30 s: released",
        annotated(annotated(pod.clone(), HELD_SINCE_ANNOTATION, early), HOLD_DEADLINE_ANNOTATION, WINDOW_END),
        early,
        cluster(plain, &ALL_GATES),
        release_held("not-taken-up", "no evacuation of the VM began within 30 s"),
    ));
    let long_ago = "2026-11-21T09:39:59Z";
    cases.push(row(
        "the window has passed: released",
        annotated(
            annotated(pod.clone(), HELD_SINCE_ANNOTATION, long_ago),
            HOLD_DEADLINE_ANNOTATION,
            WINDOW_END,
        ),
        long_ago,
        cluster(requested.clone(), &ALL_GATES),
        release_held("window-over", "the hold window of 300 s has passed"),
    ));
    let given_up = annotated(recorded_pod, HOLD_RELEASE_ANNOTATION, "no other node accepts it");
    cases.push(row(
        "given up by the evacuation: released",
        given_up,
        STARTED,
        cluster(requested, &ALL_GATES),
        release_held("given-up", "the evacuation was given up: no other node accepts it"),
    ));
    // The hold's start is not said (or lies ahead): it begins now.
    let fresh = Expected {
        effects: vec![Effect::AnnotatePod {
            pod: pod_ref(),
            annotations: BTreeMap::from([
                (HELD_SINCE_ANNOTATION.to_owned(), Some(NOW.to_owned())),
                (HOLD_DEADLINE_ANNOTATION.to_owned(), Some("2026-11-21T09:50:00Z".to_owned())),
            ]),
        }],
        ..Expected::reject(
            429,
            format!(
                "holding the termination of {NS}/{} while its VM migrates away: its evacuation from {NODE} is \
                 requested (preemption); at the latest until 2026-11-21T09:50:00Z",
                launcher_name(VM)
            ),
        )
    };
    for (name, started) in [("no start", ""), ("a start ahead", "2030-01-01T00:00:00Z")] {
        cases.push(row(
            &format!("{name}: the hold begins now"),
            pod.clone(),
            started,
            cluster(requested_vm(Some("LiveMigrate"), true, "preemption"), &ALL_GATES),
            fresh.clone(),
        ));
    }
}

/// Pods the kubelet stops without deleting them.
fn kubelet(cases: &mut Vec<Case>) {
    let pod = held_pod(Disruption::Kubelet);
    let vm = requested_vm(Some("LiveMigrate"), true, "node-pressure");
    let mut pressed = cluster(vm.clone(), &ALL_GATES);
    pressed[1] = node(NODE, true, None);
    cases.push(row(
        "kubelet, node under pressure: held",
        pod.clone(),
        STARTED,
        pressed.clone(),
        hold(&format!("its evacuation from {NODE} is requested (kubelet-eviction)")),
    ));
    let mut gate_off = pressed;
    gate_off[3] = kubevirt_cr("kubevirt", None, &[PREEMPTION_GATE, NOEXECUTE_TAINT_GATE]);
    cases.push(row(
        "kubelet, node under pressure, gate off: released",
        pod.clone(),
        STARTED,
        gate_off,
        release("gate-off", &format!("feature gate {NODE_PRESSURE_GATE} is off")),
    ));
    // Under the marking level by its metrics, without the condition yet.
    let mut low = cluster(vm.clone(), &ALL_GATES);
    low[1] = node(NODE, false, Some("4Gi"));
    low.push(
        json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": NODE},
                    "timestamp": STARTED, "window": "10s", "usage": {"cpu": "0", "memory": "1Gi"}}),
    );
    cases.push(row(
        "kubelet, node short of memory by its metrics: held",
        pod.clone(),
        STARTED,
        low,
        hold(&format!("its evacuation from {NODE} is requested (kubelet-eviction)")),
    ));
    let waiting = Expected::reject(
        429,
        format!(
            "holding the termination of {NS}/{} while its VM migrates away: waiting for the node's memory \
             pressure to show; at the latest until 2026-11-21T09:45:05Z",
            launcher_name(VM)
        ),
    );
    cases.push(row(
        "kubelet, no pressure yet: held a while",
        pod.clone(),
        STARTED,
        cluster(vm.clone(), &ALL_GATES),
        waiting,
    ));
    let early = "2026-11-21T09:44:40Z";
    cases.push(row(
        "kubelet, no pressure within 15 s: released",
        pod,
        early,
        cluster(vm, &ALL_GATES),
        release("no-pressure", "the kubelet stops the pod and the node shows no memory pressure"),
    ));
}

/// What cannot be decided: a pod that is not a launcher, a request without its pod, reads that fail.
fn requests_and_reads(cases: &mut Vec<Case>) {
    let vm = requested_vm(Some("LiveMigrate"), true, "preemption");
    let other = json!({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "nginx", "namespace": NS, "deletionTimestamp": DELETION_END},
                       "spec": {"nodeName": NODE}});
    cases.push(row(
        "not a launcher pod",
        other,
        STARTED,
        cluster(vm.clone(), &ALL_GATES),
        release_unhooked("not-a-launcher", "not a virt-launcher pod"),
    ));
    let pod = held_pod(Disruption::Deleted(Some("PreemptionByScheduler")));
    let mut request = hold_request(pod.clone(), STARTED);
    request["object"] = Value::Null;
    cases.push(Case::new(
        "hold: a request without its pod",
        cluster(vm.clone(), &ALL_GATES),
        request,
        Expected::reject(400, "a hold request without the pod"),
    ));
    let failing = row("the VMI cannot be read", pod, STARTED, cluster(vm, &ALL_GATES), Expected::allow())
        .with_failure(ReadFailure::of_kind("VirtualMachineInstance", "connection refused"));
    let warned = Expected::allow().with_warning(Text::Prefix("disruption-cause could not decide: ".into()));
    cases.push(Case { expected: warned, ..failing });
}
