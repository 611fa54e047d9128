//! The table of the disruption-cause decision: every cause × eviction strategy × migratability ×
//! feature gate, for pod DELETEs and UPDATEs; user deletions; the pods that must be left alone;
//! node pressure's choice of VMs; requests it does not evaluate and failed reads.

use serde_json::{json, Value};

use super::objects::{kubevirt_cr, launcher_pod, node, vmi, with, NODE, NS, OTHER_NODE};
use super::{Case, Expected, ReadFailure, TestCluster, Text};
use evac_core::disruption::{
    self, Cause, DecideError, CAUSE_AUDIT_ANNOTATION, HANDLING_AUDIT_ANNOTATION, NODE_PRESSURE_GATE,
    NOEXECUTE_TAINT_GATE, PREEMPTION_GATE,
};
use evac_core::effect::{EvacuationSource, EventReason, ObjectRef};
use evac_core::model::AdmissionRequest;
use evac_core::{Effect, PolicyResponse};

const VM: &str = "vm";
const ALL_GATES: [&str; 3] = [PREEMPTION_GATE, NOEXECUTE_TAINT_GATE, NODE_PRESSURE_GATE];
const DELETED_AT: &str = "2026-11-21T09:40:00Z";

/// The disruption decision's answer to a case, natively on `cluster` (build it with
/// [`TestCluster::for_case`]), as the disruption-cause policy answers: a decision as it is, a
/// failed read allowed with the warning `disruption-cause could not decide: <error>` (a pod's
/// deletion is never blocked for it), any other error rejected with its code and message.
pub fn disruption_answer(case: &Case, cluster: &TestCluster) -> Result<PolicyResponse, String> {
    let text = case.request.to_string();
    let request: AdmissionRequest<'_> =
        serde_json::from_str(&text).map_err(|e| format!("the case's request does not decode: {e}"))?;
    let settings: disruption::Settings = super::settings(&case.settings)?;
    let none = PolicyResponse::from(evac_core::Decision::allow());
    Ok(match disruption::decide(&request, &settings, cluster, super::TABLE_NOW) {
        Ok(decision) => PolicyResponse::from(decision),
        Err(e @ DecideError::Read(_)) => {
            PolicyResponse { warnings: Some(vec![format!("disruption-cause could not decide: {e}")]), ..none }
        }
        Err(e) => {
            PolicyResponse { accepted: false, message: Some(e.to_string()), code: Some(e.code()), ..none }
        }
    })
}

// --- Requests --------------------------------------------------------------------------------

/// An AdmissionRequest of `kind` (`group/version/Kind` or `version/Kind`).
fn request(kind: &str, operation: &str, object: Value, old_object: Value) -> Value {
    let (group, rest) = kind.split_once('/').filter(|(_, rest)| rest.contains('/')).unwrap_or(("", kind));
    let (version, kind) = rest.split_once('/').expect("version/Kind");
    let resource = if kind.is_empty() { String::new() } else { evac_core::cluster::resource_for_kind(kind) };
    let field = |name: &str| {
        object["metadata"][name].as_str().or(old_object["metadata"][name].as_str()).unwrap_or("").to_owned()
    };
    json!({
        "uid": "00000000-0000-0000-0000-000000000001",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "name": field("name"),
        "namespace": field("namespace"),
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kube-system:disruptor"},
        "object": object,
        "oldObject": old_object,
        "dryRun": false,
    })
}

fn delete_pod(pod: Value) -> Value {
    request("v1/Pod", "DELETE", Value::Null, pod)
}

fn update_pod(pod: Value) -> Value {
    request("v1/Pod", "UPDATE", pod, launcher(None))
}

fn update_node(node: Value) -> Value {
    request("v1/Node", "UPDATE", node, Value::Null)
}

fn dry_run(request: Value) -> Value {
    with(request, "/dryRun", json!(true))
}

// --- Objects ---------------------------------------------------------------------------------

/// VM's running launcher pod on NODE, with a `DisruptionTarget` condition of `reason`.
fn launcher(reason: Option<&str>) -> Value {
    let mut conditions = vec![json!({"type": "Ready", "status": "True"})];
    if let Some(reason) = reason {
        conditions.push(json!({"type": "DisruptionTarget", "status": "True", "reason": reason}));
    }
    with(launcher_pod(NS, VM, NODE), "/status/conditions", json!(conditions))
}

fn terminating(object: Value) -> Value {
    with(object, "/metadata/deletionTimestamp", json!(DELETED_AT))
}

/// A running 1Gi VMI on NODE.
fn vm(name: &str, strategy: Option<&str>, migratable: bool) -> Value {
    vmi(NS, name, strategy, migratable, NODE)
}

/// The KubeVirt CR with these gates and cluster-wide strategy.
fn kubevirt(gates: &[&str], strategy: Option<&str>) -> Value {
    kubevirt_cr("kubevirt", strategy, gates)
}

/// A running VMI on NODE of `memory` (a quantity), strategy LiveMigrate, migratable.
fn sized(name: &str, memory: &str) -> Value {
    with(vm(name, Some("LiveMigrate"), true), "/spec/domain/memory/guest", json!(memory))
}

fn node_at(available: &str) -> Value {
    node(NODE, false, Some(available))
}

// --- Answers ---------------------------------------------------------------------------------

/// The evacuation of a VMI for `source`, with KubeVirt's evacuation controller running (the
/// default): a request for the evacuation decision to mark in its order; a dry run is answered
/// with the dry-run mark.
fn mark_in(namespace: &str, name: &str, node: &str, dry_run: bool, source: EvacuationSource) -> Effect {
    if dry_run {
        return marking(namespace, name, node, true, source);
    }
    Effect::RequestEvacuation { vmi: ObjectRef::new(namespace, name), node: node.into(), source }
}

/// The mark itself: what evac writes when it creates the migrations itself
/// (`kubevirtEvacuationController: false`), and a dry run's answer.
fn marking(namespace: &str, name: &str, node: &str, dry_run: bool, source: EvacuationSource) -> Effect {
    Effect::MarkForEvacuation {
        vmi: ObjectRef::new(namespace, name),
        node: node.into(),
        dry_run,
        source: Some(source),
    }
}

fn mark(name: &str, source: EvacuationSource) -> Effect {
    mark_in(NS, name, NODE, false, source)
}

/// Allowed, with the cause recorded, and these effects.
fn caused(cause: &str, effects: impl IntoIterator<Item = Effect>) -> Expected {
    Expected::allow().with_audit_annotation(CAUSE_AUDIT_ANNOTATION, cause).with_effects(effects)
}

/// A launcher pod's disruption: allowed, with its cause and how it was handled recorded, and these
/// effects.
fn handled(cause: &str, handling: &str, effects: impl IntoIterator<Item = Effect>) -> Expected {
    caused(cause, effects).with_audit_annotation(HANDLING_AUDIT_ANNOTATION, handling)
}

/// A disruption evac would have turned into an evacuation, left to KubeVirt for its gate: the
/// Warning event on the VMI says so.
fn gate_off(cause: Cause, gate: &str) -> Expected {
    handled(
        cause.as_str(),
        "gate-off",
        [Effect::RecordEvent {
            vmi: ObjectRef::new(NS, VM),
            node: NODE.into(),
            reason: EventReason::DisruptionLeftToKubeVirt,
            message: disruption::gate_off_message(cause, gate),
        }],
    )
}

fn pressure_marks(names: &[&str]) -> Expected {
    caused("node-pressure", names.iter().map(|name| mark(name, EvacuationSource::NodePressure)))
}

/// Every case of the disruption-cause decision.
pub fn disruption_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    causes(&mut cases);
    down_nodes(&mut cases);
    user_deletions(&mut cases);
    pods(&mut cases);
    node_pressure(&mut cases);
    bad_requests_and_failed_reads(&mut cases);
    cases.iter_mut().for_each(serve_node_metrics);
    cases
}

/// metrics-server's NodeMetrics for every node of a case with a memory figure (its capacity,
/// none of it in use: the whole capacity is available), in the case's objects, where every host
/// of the tables serves them from.
fn serve_node_metrics(case: &mut Case) {
    let request_nodes = [&case.request["object"], &case.request["oldObject"]]
        .into_iter()
        .filter(|object| object["kind"] == "Node")
        .cloned()
        .collect::<Vec<_>>();
    let mut names: Vec<String> = case
        .objects
        .iter()
        .filter(|object| object["kind"] == "Node")
        .chain(&request_nodes)
        .filter(|node| node.pointer("/status/capacity/memory").is_some())
        .filter_map(|node| node.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    case.objects.extend(names.iter().map(|name| super::objects::idle_node_metrics(name)));
}

/// How a pod's disruption reaches the decision.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    /// DELETE: the pod in `oldObject`, without a deletionTimestamp yet.
    Delete,
    /// UPDATE of a pod with a deletionTimestamp.
    UpdateTerminating,
    /// UPDATE that only sets the condition (the scheduler and taint manager do this first).
    UpdateCondition,
}

impl Op {
    fn request(self, pod: Value) -> Value {
        match self {
            Op::Delete => delete_pod(pod),
            Op::UpdateTerminating => update_pod(terminating(pod)),
            Op::UpdateCondition => update_pod(pod),
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Op::Delete => "DELETE",
            Op::UpdateTerminating => "UPDATE of a terminating pod",
            Op::UpdateCondition => "UPDATE of the condition",
        }
    }
}

/// Every cause, under each feature gate, for every eviction strategy (the VMI's and the
/// cluster-wide one) and migratability: only preemption, the taint manager and node pressure
/// evacuate, each behind its own gate, and only VMIs whose strategy asks for a migration.
fn causes(cases: &mut Vec<Case>) {
    // (reason, node under MemoryPressure, cause, the gate and source it needs)
    let causes = [
        (
            Some("PreemptionByScheduler"),
            false,
            "preemption",
            Some((PREEMPTION_GATE, EvacuationSource::Preemption)),
        ),
        (
            Some("DeletionByTaintManager"),
            false,
            "taint-manager",
            Some((NOEXECUTE_TAINT_GATE, EvacuationSource::NoexecuteTaint)),
        ),
        (
            Some("TerminationByKubelet"),
            false,
            "kubelet-eviction",
            Some((NODE_PRESSURE_GATE, EvacuationSource::NodePressure)),
        ),
        (None, true, "node-pressure", Some((NODE_PRESSURE_GATE, EvacuationSource::NodePressure))),
        // The condition names the cause even on a node under pressure.
        (
            Some("PreemptionByScheduler"),
            true,
            "preemption",
            Some((PREEMPTION_GATE, EvacuationSource::Preemption)),
        ),
        (Some("EvictionByEvictionAPI"), false, "api-eviction", None),
        (Some("DeletionByPodGC"), false, "pod-gc", None),
        (Some("SomethingNew"), true, "unknown", None),
        (None, false, "unknown", None),
    ];
    // (VMI strategy, cluster-wide strategy, whether a migratable / unmigratable VMI is marked)
    let strategies = [
        (Some("LiveMigrate"), None, (true, false)),
        (Some("LiveMigrateIfPossible"), None, (true, false)),
        (Some("External"), None, (true, true)),
        (Some("None"), None, (false, false)),
        (Some("Bogus"), None, (false, false)),
        (None, None, (false, false)),
        (None, Some("LiveMigrate"), (true, false)),
        (None, Some("LiveMigrateIfPossible"), (true, false)),
        (None, Some("External"), (true, true)),
        (Some("None"), Some("LiveMigrate"), (false, false)),
        (Some("LiveMigrate"), Some("None"), (true, false)),
    ];
    for op in [Op::Delete, Op::UpdateTerminating, Op::UpdateCondition] {
        for (reason, pressure, cause, needs) in causes {
            let mut gate_sets = vec!["the one needed", "all others", "none"];
            if needs.is_some() {
                gate_sets.push("all");
            }
            for (strategy, cluster_wide, (marks_migratable, marks_unmigratable)) in strategies {
                for migratable in [true, false] {
                    for &gates in &gate_sets {
                        let needed = needs.map(|(gate, _)| gate);
                        let enabled: Vec<&str> = match gates {
                            "the one needed" => needed.into_iter().collect(),
                            "all others" => ALL_GATES.into_iter().filter(|g| Some(*g) != needed).collect(),
                            "all" => ALL_GATES.to_vec(),
                            _ => vec![],
                        };
                        let objects = vec![
                            vm(VM, strategy, migratable),
                            kubevirt(&enabled, cluster_wide),
                            node(NODE, pressure, None),
                        ];
                        let marks = if migratable { marks_migratable } else { marks_unmigratable };
                        let external = strategy == Some("External")
                            || (strategy.is_none() && cluster_wide == Some("External"));
                        let expected = match needs {
                            // An UPDATE that neither deletes nor flags the pod is no disruption.
                            _ if op == Op::UpdateCondition && reason.is_none() => Expected::allow(),
                            None => handled(cause, "no-evacuation", []),
                            Some(_) if !marks => handled(cause, "not-migratable", []),
                            // An External VMI's mark is its external controller's request: at once.
                            Some((gate, source)) if enabled.contains(&gate) && external => {
                                handled(cause, "evacuating", [marking(NS, VM, NODE, false, source)])
                            }
                            Some((gate, source)) if enabled.contains(&gate) => {
                                handled(cause, "evacuating", [mark(VM, source)])
                            }
                            Some((gate, _)) => gate_off(disruption::classify(reason, false, pressure), gate),
                        };
                        let name = format!(
                            "cause: {}, {}{}, VMI {}, cluster-wide {}, {}, gates {gates}",
                            op.describe(),
                            reason.unwrap_or("no condition"),
                            if pressure { ", node under memory pressure" } else { "" },
                            strategy.unwrap_or("unset"),
                            cluster_wide.unwrap_or("unset"),
                            if migratable { "migratable" } else { "not migratable" },
                        );
                        cases.push(Case::new(name, objects, op.request(launcher(reason)), expected));
                    }
                }
            }
        }
    }
}

/// A node that is down (its kubelet stopped reporting: not Ready, tainted unreachable by the node
/// lifecycle controller) runs no hook and migrates no VM away: its pods' deletions by the taint
/// manager, or by preemption, are recorded and ask for nothing.
fn down_nodes(cases: &mut Vec<Case>) {
    let not_ready = with(
        node(NODE, false, None),
        "/status/conditions",
        json!([{"type": "MemoryPressure", "status": "False"},
               {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"}]),
    );
    let unreachable = with(
        node(NODE, false, None),
        "/spec/taints",
        json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
               {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]),
    );
    for (how, down) in [("not Ready", not_ready), ("tainted unreachable", unreachable)] {
        for (reason, cause) in
            [("DeletionByTaintManager", "taint-manager"), ("PreemptionByScheduler", "preemption")]
        {
            let objects = vec![vm(VM, Some("LiveMigrate"), true), kubevirt(&ALL_GATES, None), down.clone()];
            let name = format!("node down ({how}): {reason}");
            cases.push(Case::new(
                name,
                objects,
                Op::UpdateTerminating.request(launcher(Some(reason))),
                handled(cause, "node-down", []),
            ));
        }
    }
}

/// A VMI being deleted is its user's shutdown, whatever else holds: never marked.
fn user_deletions(cases: &mut Vec<Case>) {
    let reasons = [
        Some("PreemptionByScheduler"),
        Some("DeletionByTaintManager"),
        Some("TerminationByKubelet"),
        Some("EvictionByEvictionAPI"),
        Some("DeletionByPodGC"),
        Some("SomethingNew"),
        None,
    ];
    for reason in reasons {
        for strategy in ["LiveMigrate", "LiveMigrateIfPossible", "External"] {
            for op in [Op::Delete, Op::UpdateTerminating] {
                for (gates, enabled) in [("all", &ALL_GATES[..]), ("none", &[][..])] {
                    let objects = vec![
                        terminating(vm(VM, Some(strategy), true)),
                        kubevirt(enabled, None),
                        node(NODE, true, None),
                    ];
                    let name = format!(
                        "user deletion: {}, {}, VMI {strategy}, gates {gates}",
                        op.describe(),
                        reason.unwrap_or("no condition")
                    );
                    cases.push(Case::new(
                        name,
                        objects,
                        op.request(launcher(reason)),
                        handled("user-deletion", "no-evacuation", []),
                    ));
                }
            }
        }
    }
}

/// A cluster where a preempted launcher pod's VM would be marked.
fn preemption_cluster(vmi: Value) -> Vec<Value> {
    vec![vmi, kubevirt(&ALL_GATES, None), node(NODE, false, None)]
}

/// Which pods' disruptions count, and which VMIs they mark.
fn pods(cases: &mut Vec<Case>) {
    let preempted = || delete_pod(launcher(Some("PreemptionByScheduler")));
    let lm = || vm(VM, Some("LiveMigrate"), true);
    let marked = || handled("preemption", "evacuating", [mark(VM, EvacuationSource::Preemption)]);
    let unmarked = |handling| handled("preemption", handling, []);

    // Not from the pod the VM runs in (a migration target's), not a VM that has stopped or is not
    // running yet, and not twice.
    let rows = [
        ("the VM runs in this pod", lm(), marked()),
        (
            "a migration target pod",
            with(lm(), "/status/nodeName", json!(OTHER_NODE)),
            unmarked("not-running"),
        ),
        ("a VMI still scheduling", with(lm(), "/status/phase", json!("Scheduled")), unmarked("not-running")),
        ("a VMI that has stopped", with(lm(), "/status/phase", json!("Succeeded")), unmarked("not-running")),
        (
            "already marked for this node",
            with(lm(), "/status/evacuationNodeName", json!(NODE)),
            unmarked("already-evacuating"),
        ),
        (
            "already requested from this node",
            with(lm(), "/metadata/annotations", json!({"evac.kubevirt.io/evacuate-from": NODE})),
            unmarked("already-evacuating"),
        ),
        (
            "requested from another node",
            with(lm(), "/metadata/annotations", json!({"evac.kubevirt.io/evacuate-from": OTHER_NODE})),
            marked(),
        ),
        // A stale mark for another node does not stand for this one.
        ("marked for another node", with(lm(), "/status/evacuationNodeName", json!(OTHER_NODE)), marked()),
    ];
    for (row, vmi, expected) in rows {
        cases.push(Case::new(
            format!("the pod the VM runs in: {row}"),
            preemption_cluster(vmi),
            preempted(),
            expected,
        ));
    }
    // Without KubeVirt's evacuation controller, evac marks at once (it creates the migrations).
    let creating = json!({"kubevirtEvacuationController": false});
    cases.push(
        Case::new(
            "the pod the VM runs in: evac creates the migrations",
            preemption_cluster(lm()),
            preempted(),
            handled("preemption", "evacuating", [marking(NS, VM, NODE, false, EvacuationSource::Preemption)]),
        )
        .with_settings(creating.clone()),
    );
    cases.push(
        Case::new(
            "node pressure: evac creates the migrations",
            vec![
                kubevirt(&ALL_GATES, None),
                node_at("1Gi"),
                node(OTHER_NODE, false, Some("64Gi")),
                sized("big", "4Gi"),
            ],
            request("v1/Node", "UPDATE", node_at("1Gi"), node_at("1Gi")),
            caused("node-pressure", [marking(NS, "big", NODE, false, EvacuationSource::NodePressure)]),
        )
        .with_settings(creating),
    );

    // Pods that are not disrupted launcher pods: nothing is read, nothing recorded.
    let plain = with(
        with(launcher(None), "/metadata/labels", json!({"app": "nginx"})),
        "/metadata/annotations",
        json!({}),
    );
    let hotplug = with(
        launcher(Some("PreemptionByScheduler")),
        "/metadata/labels",
        json!({"kubevirt.io": "hotplug-disk"}),
    );
    let condition_false = with(
        launcher(None),
        "/status/conditions",
        json!([{"type": "DisruptionTarget", "status": "False", "reason": "PreemptionByScheduler"}]),
    );
    let preemption_condition =
        json!([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]);
    let rows = [
        ("a plain pod deleted", delete_pod(terminating(plain.clone()))),
        ("a plain pod preempted", delete_pod(with(plain, "/status/conditions", preemption_condition))),
        ("a hotplug volume pod", delete_pod(hotplug)),
        ("a launcher UPDATE without disruption", update_pod(launcher(None))),
        ("a DisruptionTarget condition that is False", update_pod(condition_false)),
        // The old pod's condition is history: the UPDATE's object is what the pod becomes.
        (
            "the condition only in oldObject",
            request("v1/Pod", "UPDATE", launcher(None), launcher(Some("PreemptionByScheduler"))),
        ),
        (
            "a DELETE without oldObject",
            request("v1/Pod", "DELETE", launcher(Some("PreemptionByScheduler")), Value::Null),
        ),
        (
            "an UPDATE without object",
            request("v1/Pod", "UPDATE", Value::Null, launcher(Some("PreemptionByScheduler"))),
        ),
        ("an undecodable pod", delete_pod(json!({"metadata": "nope"}))),
    ];
    for (row, request) in rows {
        cases.push(Case::new(
            format!("left alone: {row}"),
            preemption_cluster(lm()),
            request,
            Expected::allow(),
        ));
    }

    // The scheduler's status UPDATE that sets the condition, before it deletes the pod.
    let status_update = with(
        request("v1/Pod", "UPDATE", launcher(Some("PreemptionByScheduler")), launcher(None)),
        "/subResource",
        json!("status"),
    );
    cases.push(Case::new(
        "a status UPDATE setting the condition",
        vec![lm(), kubevirt(&ALL_GATES, None)],
        status_update,
        marked(),
    ));

    cases.push(Case::new(
        "a dry run with the gate off records no event",
        vec![lm(), kubevirt(&[], None), node(NODE, false, None)],
        dry_run(delete_pod(launcher(Some("DeletionByTaintManager")))),
        handled("taint-manager", "gate-off", []),
    ));
    cases.push(Case::new(
        "a dry run marks as a dry run",
        preemption_cluster(lm()),
        dry_run(delete_pod(launcher(Some("DeletionByTaintManager")))),
        handled(
            "taint-manager",
            "evacuating",
            [mark_in(NS, VM, NODE, true, EvacuationSource::NoexecuteTaint)],
        ),
    ));

    // Missing objects: the cause is recorded, nothing is marked.
    let no_domain = with(launcher(Some("PreemptionByScheduler")), "/metadata/annotations", json!({}));
    let unscheduled = with(launcher(None), "/spec/nodeName", json!(""));
    let rows = [
        ("no VMI", vec![kubevirt(&ALL_GATES, None)], preempted(), unmarked("no-vmi")),
        ("the pod names no VMI", preemption_cluster(lm()), delete_pod(no_domain), unmarked("no-vmi")),
        // No KubeVirt CR: no gate is on.
        ("no KubeVirt CR", vec![lm()], preempted(), gate_off(Cause::Preemption, PREEMPTION_GATE)),
        // No node: no pressure.
        (
            "no node",
            vec![lm(), kubevirt(&ALL_GATES, None)],
            delete_pod(launcher(None)),
            handled("unknown", "no-evacuation", []),
        ),
        (
            "a pod without a node",
            vec![lm(), kubevirt(&ALL_GATES, None)],
            delete_pod(unscheduled),
            handled("unknown", "no-evacuation", []),
        ),
    ];
    for (row, objects, request, expected) in rows {
        cases.push(Case::new(format!("missing: {row}"), objects, request, expected));
    }

    // The settings name the KubeVirt CR; without them, the first one listed.
    let named = |name: &str, gates: &[&str]| kubevirt_cr(name, None, gates);
    let objects = || vec![lm(), named("a-first", &[]), named("kv", &ALL_GATES)];
    let settings = |name: &str| json!({"kubevirt": {"namespace": "kubevirt", "name": name}});
    let rows = [
        ("the named CR", settings("kv"), marked()),
        ("another CR", settings("a-first"), gate_off(Cause::Preemption, PREEMPTION_GATE)),
        ("none named: the first listed", json!({}), gate_off(Cause::Preemption, PREEMPTION_GATE)),
    ];
    for (row, settings, expected) in rows {
        cases.push(
            Case::new(format!("settings: {row}"), objects(), preempted(), expected).with_settings(settings),
        );
    }

    let tenant_vmi = with(lm(), "/metadata/namespace", json!("tenant"));
    let tenant_pod = with(launcher(Some("PreemptionByScheduler")), "/metadata/namespace", json!("tenant"));
    cases.push(Case::new(
        "the pod's namespace names the VMI",
        preemption_cluster(tenant_vmi),
        delete_pod(tenant_pod),
        handled(
            "preemption",
            "evacuating",
            [mark_in("tenant", VM, NODE, false, EvacuationSource::Preemption)],
        ),
    ));
}

/// Node pressure ahead of the kubelet: the fewest VMs that cover the deficit, eligible ones only.
fn node_pressure(cases: &mut Vec<Case>) {
    let first = cases.len();
    pressure_marks_and_levels(cases);
    // Every VM chosen above has somewhere to go: another node, which publishes no figure.
    for case in &mut cases[first..] {
        case.objects.push(node(OTHER_NODE, false, None));
    }
    pressure_targets(cases);
}

/// Only VMs another node can take are marked: a node that accepts the VM and keeps the marking
/// level (threshold + headroom) available after taking it. The choice is made first, then the
/// chosen VMs are placed, the largest first, each booking its memory.
fn pressure_targets(cases: &mut Vec<Case>) {
    // Threshold 12Gi and headroom 1Gi: 13Gi wanted; the node has 8Gi: 5Gi short: a (4Gi) and d (1Gi).
    let settings = || json!({"nodePressure": {"threshold": "12Gi", "headroom": "1Gi"}});
    let vms = || {
        vec![
            sized("c", "2Gi"),
            sized("a", "4Gi"),
            sized("d", "1Gi"),
            sized("b", "2Gi"),
            kubevirt(&ALL_GATES, None),
        ]
    };
    let cordoned = |n: Value| with(n, "/spec/unschedulable", json!(true));
    // (case, the other nodes, VMs marked)
    let rows: Vec<(&str, Vec<Value>, Vec<&str>)> = vec![
        ("another node with room for both", vec![node(OTHER_NODE, false, Some("18Gi"))], vec!["a", "d"]),
        ("room for the smaller only", vec![node(OTHER_NODE, false, Some("16Gi"))], vec!["d"]),
        (
            "room for each on its own node",
            vec![node(OTHER_NODE, false, Some("17Gi")), node("node03", false, Some("14Gi"))],
            vec!["a", "d"],
        ),
        ("no other node has room", vec![node(OTHER_NODE, false, Some("13Gi"))], vec![]),
        ("no other node", vec![], vec![]),
        ("the other node is cordoned", vec![cordoned(node(OTHER_NODE, false, None))], vec![]),
    ];
    for (row, others, expected) in rows {
        let objects = [vms(), others].concat();
        cases.push(
            Case::new(
                format!("node pressure, targets: {row}"),
                objects,
                update_node(node_at("8Gi")),
                pressure_marks(&expected),
            )
            .with_settings(settings()),
        );
    }
    // The only other node is tainted: a VM goes there only with its own toleration (each VM's
    // tolerations, looked up by namespace and name), so of a and d only a, which tolerates it.
    let gpu_node = with(
        node(OTHER_NODE, false, Some("18Gi")),
        "/spec/taints",
        json!([{"key": "gpu", "effect": "NoSchedule"}]),
    );
    let mut objects = vms();
    objects[1] = with(objects[1].clone(), "/spec/tolerations", json!([{"key": "gpu", "operator": "Exists"}]));
    objects.push(gpu_node);
    cases.push(
        Case::new(
            "node pressure, targets: a tainted node takes only the VM that tolerates it",
            objects,
            update_node(node_at("8Gi")),
            pressure_marks(&["a"]),
        )
        .with_settings(settings()),
    );

    // Early: 12.5Gi available is over the threshold (12Gi), where the kubelet does not act, but
    // under threshold + headroom: 0.5Gi short, d (1Gi) covers it. The scheduler may put d on any
    // node that takes it, so it moves only if every such node keeps 13Gi after: node03 at 13.5Gi
    // would keep 12.5Gi. Under the threshold (8Gi) the kubelet will act, and one node with room
    // is enough.
    let two_targets =
        |node03: &str| vec![node(OTHER_NODE, false, Some("18Gi")), node("node03", false, Some(node03))];
    let rows: Vec<(&str, &str, &str, Vec<&str>)> = vec![
        ("early, a node the VM would bring under the level: no move", "12800Mi", "13824Mi", vec![]),
        ("early, every node stays clear: the move", "12800Mi", "14Gi", vec!["d"]),
        ("under the threshold, one node with room is enough", "8Gi", "13824Mi", vec!["a", "d"]),
    ];
    for (row, available, node03, expected) in rows {
        cases.push(
            Case::new(
                format!("node pressure, targets: {row}"),
                [vms(), two_targets(node03)].concat(),
                update_node(node_at(available)),
                pressure_marks(&expected),
            )
            .with_settings(settings()),
        );
    }
}

fn pressure_marks_and_levels(cases: &mut Vec<Case>) {
    // Threshold 12Gi and headroom 1Gi: a node wants 13Gi available.
    let pressure_settings = || json!({"nodePressure": {"threshold": "12Gi", "headroom": "1Gi"}});
    // The VMs a, b, c, d (4, 2, 2, 1 Gi), all gates on, plus `extra` objects.
    let pressure_cluster = |extra: Vec<Value>| {
        let mut objects = vec![sized("c", "2Gi"), sized("a", "4Gi"), sized("d", "1Gi"), sized("b", "2Gi")];
        objects.push(kubevirt(&ALL_GATES, None));
        objects.extend(extra);
        objects
    };
    let marked =
        |name: &str, memory: &str| with(sized(name, memory), "/status/evacuationNodeName", json!(NODE));
    // (case, MemoryPressure, memory available (the NodeMetrics show none in use), extra objects,
    // VMs marked in order)
    type Row<'a> = (&'a str, bool, Option<&'a str>, Vec<Value>, Vec<&'a str>);
    let rows: Vec<Row<'_>> = vec![
        ("3Gi short: one VM covers it", false, Some("10Gi"), vec![], vec!["a"]),
        (
            "1.5Gi short: the smallest that covers it, first by name",
            false,
            Some("11776Mi"),
            vec![],
            vec!["b"],
        ),
        ("1Gi short: exactly covered", false, Some("12Gi"), vec![], vec!["d"]),
        (
            "5Gi short: the largest, then the smallest that covers the rest",
            false,
            Some("8Gi"),
            vec![],
            vec!["a", "d"],
        ),
        ("5Gi short with a 6Gi VM: it alone", false, Some("8Gi"), vec![sized("e", "6Gi")], vec!["e"]),
        ("8Gi short: three VMs", false, Some("5Gi"), vec![], vec!["a", "b", "c"]),
        (
            "8Gi short with a 3Gi VM: still three",
            true,
            Some("5Gi"),
            vec![sized("f", "3Gi")],
            vec!["a", "f", "d"],
        ),
        ("12Gi short: best effort, every eligible VM", true, Some("1Gi"), vec![], vec!["a", "b", "c", "d"]),
        // A marked VM is leaving: its memory counts as freed.
        ("3Gi short, a 2Gi VM leaving", false, Some("10Gi"), vec![marked("m", "2Gi")], vec!["d"]),
        ("3Gi short, 3Gi leaving", false, Some("10Gi"), vec![marked("m", "3Gi")], vec![]),
        // Marked for another node: not leaving this one, and not eligible either.
        (
            "3Gi short, a VM marked for another node",
            false,
            Some("10Gi"),
            vec![with(sized("m", "8Gi"), "/status/evacuationNodeName", json!(OTHER_NODE))],
            vec!["a"],
        ),
        // The condition lingers after pressure ends (evictionPressureTransitionPeriod).
        ("MemoryPressure with plenty available", true, Some("14Gi"), vec![], vec![]),
        ("MemoryPressure, availability unknown: the largest", true, None, vec![], vec!["a"]),
        ("MemoryPressure, an unreadable figure: the largest", true, Some("-"), vec![], vec!["a"]),
        ("MemoryPressure, unknown, one already leaving", true, None, vec![marked("m", "1Gi")], vec![]),
    ];
    for (row, pressure, available, extra, expected) in rows {
        let case = Case::new(
            format!("node pressure: {row}"),
            pressure_cluster(extra),
            update_node(node(NODE, pressure, available)),
            pressure_marks(&expected),
        );
        cases.push(case.with_settings(pressure_settings()));
    }

    cases.push(
        Case::new(
            "node pressure: a threshold no VM can meet: best effort",
            pressure_cluster(vec![]),
            update_node(node_at("1Gi")),
            pressure_marks(&["a", "b", "c", "d"]),
        )
        .with_settings(json!({"nodePressure": {"threshold": "20Gi", "headroom": "0"}})),
    );

    // Only VMs running on the node, not being deleted, not marked, whose strategy migrates them.
    let big = |name: &str| sized(name, "16Gi");
    let mut objects = vec![
        with(big("not-running"), "/status/phase", json!("Scheduling")),
        terminating(big("deleted")),
        with(big("none"), "/spec/evictionStrategy", json!("None")),
        with(big("unmigratable"), "/status/conditions", json!([])),
        with(
            with(big("if-possible"), "/spec/evictionStrategy", json!("LiveMigrateIfPossible")),
            "/status/conditions",
            json!([]),
        ),
        // Labelled for this node, running on another (the label lags behind a migration).
        with(big("moved"), "/status/nodeName", json!(OTHER_NODE)),
        with(
            with(big("elsewhere"), "/status/nodeName", json!(OTHER_NODE)),
            "/metadata/labels/kubevirt.io~1nodeName",
            json!(OTHER_NODE),
        ),
        sized("small", "1Gi"),
        kubevirt(&ALL_GATES, None),
    ];
    // 11Gi short: a best effort with the one eligible VM, until a large one is eligible too.
    cases.push(
        Case::new(
            "node pressure: only eligible VMs",
            objects.clone(),
            update_node(node_at("2Gi")),
            pressure_marks(&["small"]),
        )
        .with_settings(pressure_settings()),
    );
    objects.push(with(
        with(sized("external", "16Gi"), "/spec/evictionStrategy", json!("External")),
        "/status/conditions",
        json!([]),
    ));
    cases.push(
        Case::new(
            "node pressure: an External VM, which would cover the shortfall, frees nothing",
            objects,
            update_node(node_at("2Gi")),
            // KubeVirt never migrates it (`VMIMigratableOnEviction`): relief counts only VMs that
            // leave, so the small one is still the best effort.
            pressure_marks(&["small"]),
        )
        .with_settings(pressure_settings()),
    );

    // The cluster-wide strategy applies; equal VMs are taken by namespace, then name.
    let plain = |namespace: &str, name: &str| {
        let vmi = with(sized(name, "4Gi"), "/metadata/namespace", json!(namespace));
        super::objects::without(vmi, "/spec/evictionStrategy")
    };
    cases.push(
        Case::new(
            "node pressure: the cluster-wide strategy, ties by namespace",
            vec![plain("zeta", "a"), plain("alpha", "z"), kubevirt(&ALL_GATES, Some("LiveMigrate"))],
            update_node(node_at("10Gi")),
            caused("node-pressure", [mark_in("alpha", "z", NODE, false, EvacuationSource::NodePressure)]),
        )
        .with_settings(pressure_settings()),
    );
    cases.push(
        Case::new(
            "node pressure: no strategy anywhere",
            vec![plain("zeta", "a"), plain("alpha", "z"), kubevirt(&ALL_GATES, None)],
            update_node(node_at("2Gi")),
            caused("node-pressure", []),
        )
        .with_settings(pressure_settings()),
    );

    // The gate; a healthy node reads nothing and records nothing.
    let rows = [
        (
            "the gate is off",
            vec![sized("a", "4Gi"), kubevirt(&[PREEMPTION_GATE, NOEXECUTE_TAINT_GATE], None)],
            update_node(node_at("2Gi")),
            caused("node-pressure", []),
        ),
        ("just enough available", pressure_cluster(vec![]), update_node(node_at("13Gi")), Expected::allow()),
        (
            "no figure, no pressure",
            pressure_cluster(vec![]),
            update_node(node(NODE, false, None)),
            Expected::allow(),
        ),
        (
            "a node CREATE, dry run",
            pressure_cluster(vec![]),
            dry_run(request("v1/Node", "CREATE", node_at("10Gi"), Value::Null)),
            caused("node-pressure", [mark_in(NS, "a", NODE, true, EvacuationSource::NodePressure)]),
        ),
        // A node that does not decode has nothing to act on.
        (
            "a node that does not decode",
            pressure_cluster(vec![]),
            update_node(json!({"status": 7})),
            Expected::allow(),
        ),
    ];
    for (row, objects, request, expected) in rows {
        cases.push(
            Case::new(format!("node pressure: {row}"), objects, request, expected)
                .with_settings(pressure_settings()),
        );
    }

    // The defaults want 3500Mi + 1Gi = 4524Mi: 4524Mi available is enough, 4523Mi is 1Mi short.
    let labelled = |name: &str, memory: &str| sized(name, memory);
    let vms = || vec![labelled("a", "4Gi"), labelled("b", "2Gi"), labelled("c", "1Gi")];
    let with_gates = |gates: &[&str]| {
        let mut objects = vms();
        objects.push(kubevirt(gates, None));
        objects
    };
    let no_node_pressure = [PREEMPTION_GATE, NOEXECUTE_TAINT_GATE];
    let rows = [
        ("4524Mi available: enough", with_gates(&ALL_GATES), node_at("4524Mi"), Expected::allow()),
        ("4523Mi available: 1Mi short", with_gates(&ALL_GATES), node_at("4523Mi"), pressure_marks(&["c"])),
        (
            "1452Mi short: the smallest that covers it",
            with_gates(&ALL_GATES),
            node_at("3Gi"),
            pressure_marks(&["b"]),
        ),
        (
            "4524Mi short: the largest, then what covers the rest",
            with_gates(&ALL_GATES),
            node(NODE, true, Some("0")),
            pressure_marks(&["a", "c"]),
        ),
        (
            "pressure, no figure: the largest",
            with_gates(&ALL_GATES),
            node(NODE, true, None),
            pressure_marks(&["a"]),
        ),
        (
            "the gate is off",
            with_gates(&no_node_pressure),
            node(NODE, true, Some("0")),
            caused("node-pressure", []),
        ),
        ("a healthy node", vms(), node_at("16Gi"), Expected::allow()),
    ];
    for (row, objects, node, expected) in rows {
        cases.push(Case::new(
            format!("node pressure, default settings: {row}"),
            objects,
            update_node(node),
            expected,
        ));
    }

    // Settings that do not validate reach a node decision as an error, not a guess.
    cases.push(
        Case::new(
            "node pressure: invalid settings",
            pressure_cluster(vec![]),
            update_node(node_at("1Gi")),
            Expected::reject_starting(500, "invalid settings: nodePressure.headroom"),
        )
        .with_settings(json!({"nodePressure": {"headroom": "-1Gi"}})),
    );
}

/// Requests it does not evaluate are rejected with the reason; a failed read never blocks the
/// request: it is allowed, with the failure as a warning.
fn bad_requests_and_failed_reads(cases: &mut Vec<Case>) {
    let rows = [
        ("apps/v1/Deployment", "CREATE", "apps/v1 Deployment CREATE"),
        ("v1/Pod", "CREATE", "v1 Pod CREATE"),
        ("v1/Pod", "CONNECT", "v1 Pod CONNECT"),
        ("v1/Node", "DELETE", "v1 Node DELETE"),
        ("policy/v1/Eviction", "CREATE", "policy/v1 Eviction CREATE"),
        ("example.com/v1/Pod", "DELETE", "example.com/v1 Pod DELETE"),
        ("v1/", "", "v1 <no kind> <no operation>"),
    ];
    for (kind, operation, got) in rows {
        let message = format!(
            "disruption-cause evaluates Pod UPDATE/DELETE, Node CREATE/UPDATE and pods/hold CONNECT requests, not {got}"
        );
        cases.push(Case::new(
            format!("not evaluated: {got}"),
            vec![kubevirt(&ALL_GATES, None)],
            request(kind, operation, launcher(None), launcher(None)),
            Expected::reject(400, message),
        ));
    }

    let lm = || vm(VM, Some("LiveMigrate"), true);
    let objects = || vec![lm(), kubevirt(&ALL_GATES, None), node(NODE, false, None)];
    let warned = |text: Text| Expected::allow().with_warning(text);
    let refused = || warned(Text::Exact("disruption-cause could not decide: connection refused".into()));
    let rows = [
        (
            "the VMI of a preempted pod",
            "VirtualMachineInstance",
            delete_pod(launcher(Some("PreemptionByScheduler"))),
        ),
        (
            "the KubeVirt CR of a preempted pod",
            "KubeVirt",
            delete_pod(launcher(Some("PreemptionByScheduler"))),
        ),
        ("the node of a pod without a condition", "Node", delete_pod(launcher(None))),
        ("the KubeVirt CR of a node under pressure", "KubeVirt", update_node(node(NODE, true, Some("1Gi")))),
        (
            "the VMIs of a node under pressure",
            "VirtualMachineInstance",
            update_node(node(NODE, true, Some("1Gi"))),
        ),
    ];
    for (row, kind, request) in rows {
        cases.push(
            Case::new(format!("failed read: {row}"), objects(), request, refused())
                .with_failure(ReadFailure::of_kind(kind, "connection refused")),
        );
    }
    // An object that does not decode is a failed read too.
    cases.push(Case::new(
        "failed read: a VMI that does not decode",
        vec![with(lm(), "/status", json!("broken")), kubevirt(&ALL_GATES, None)],
        delete_pod(launcher(Some("PreemptionByScheduler"))),
        warned(Text::Prefix(
            "disruption-cause could not decide: cannot decode the VirtualMachineInstance".into(),
        )),
    ));
}
