//! Table-driven tests of the disruption-cause decision: every cause x eviction strategy x
//! migratability x feature gate, for pod DELETEs and UPDATEs; user deletions; the pods that must
//! be left alone; node pressure's choice of VMs; bad requests and failed reads.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::cluster::{GetResource, ListResourcesAll};
use crate::{PolicyResponse, Verdict};

const NS: &str = "default";
const NODE: &str = "node01";
const OTHER_NODE: &str = "node02";
const VM: &str = "vm";
const GI: f64 = 1024.0 * 1024.0 * 1024.0;
const ALL_GATES: [&str; 3] = [PREEMPTION_GATE, NOEXECUTE_TAINT_GATE, NODE_PRESSURE_GATE];

/// An in-memory cluster that records its reads and honours `key=value` label selectors.
#[derive(Default)]
struct FakeCluster {
    objects: Vec<Value>,
    failing_kinds: BTreeMap<String, String>,
    reads: RefCell<Vec<String>>,
}

impl FakeCluster {
    fn of(objects: impl IntoIterator<Item = Value>) -> Self {
        Self { objects: objects.into_iter().collect(), ..Self::default() }
    }

    fn failing(mut self, kind: &str, message: &str) -> Self {
        self.failing_kinds.insert(kind.into(), message.into());
        self
    }

    fn reads(&self) -> Vec<String> {
        self.reads.borrow().clone()
    }

    fn fail(&self, kind: &str) -> Result<(), ReadError> {
        self.failing_kinds.get(kind).map_or(Ok(()), |message| Err(ReadError::other(message.clone())))
    }
}

impl ClusterReader for FakeCluster {
    fn get_resource(&self, r: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        let namespace = r.namespace.as_deref().unwrap_or("");
        self.reads.borrow_mut().push(format!("get {} {namespace}/{}", r.kind, r.name));
        self.fail(&r.kind)?;
        self.objects
            .iter()
            .find(|o| {
                o["kind"] == r.kind.as_str()
                    && o["metadata"]["namespace"].as_str().unwrap_or("") == namespace
                    && o["metadata"]["name"] == r.name.as_str()
            })
            .map(|o| serde_json::to_vec(o).unwrap())
            .ok_or_else(|| ReadError::not_found(&r.api_version, &r.kind, &r.name))
    }

    fn list_resources_all(&self, r: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        let selector = r.label_selector.as_deref().unwrap_or("");
        self.reads.borrow_mut().push(format!("list {} {selector}", r.kind).trim_end().to_owned());
        self.fail(&r.kind)?;
        let selected = |o: &&Value| match selector.split_once('=') {
            Some((key, value)) => o["metadata"]["labels"][key] == value,
            None => true,
        };
        let items: Vec<&Value> =
            self.objects.iter().filter(|o| o["kind"] == r.kind.as_str()).filter(selected).collect();
        Ok(serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap())
    }
}

/// `value` with the field at JSON pointer `pointer` set to `new` (`~1` in a key is `/`).
fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let mut target = &mut value;
    for key in pointer.split('/').skip(1).map(|k| k.replace("~1", "/")) {
        target = target.as_object_mut().expect("an object on the way").entry(key).or_insert(json!({}));
    }
    *target = new;
    value
}

/// A running launcher pod of VMI `vm` on NODE, with a `DisruptionTarget` condition of `reason`.
fn launcher(reason: Option<&str>) -> Value {
    let mut conditions = vec![json!({"type": "Ready", "status": "True"})];
    if let Some(reason) = reason {
        conditions.push(json!({"type": "DisruptionTarget", "status": "True", "reason": reason}));
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "virt-launcher-vm-abcde", "namespace": NS,
            "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": VM},
            "annotations": {"kubevirt.io/domain": VM},
        },
        "spec": {"nodeName": NODE},
        "status": {"phase": "Running", "conditions": conditions},
    })
}

fn terminating(pod: Value) -> Value {
    with(pod, "/metadata/deletionTimestamp", json!("2026-11-21T09:40:00Z"))
}

/// A running 1Gi VMI on NODE.
fn vmi(name: &str, strategy: Option<&str>, migratable: bool) -> Value {
    let mut vmi = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": NS, "labels": {"kubevirt.io/nodeName": NODE}},
        "spec": {"domain": {"memory": {"guest": "1Gi"}}},
        "status": {"nodeName": NODE, "phase": "Running", "conditions": [
            {"type": "LiveMigratable", "status": if migratable { "True" } else { "False" }},
        ]},
    });
    if let Some(strategy) = strategy {
        vmi["spec"]["evictionStrategy"] = json!(strategy);
    }
    vmi
}

fn kubevirt(gates: &[&str], strategy: Option<&str>) -> Value {
    let mut cr = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {"configuration": {"developerConfiguration": {"featureGates": gates}}},
    });
    if let Some(strategy) = strategy {
        cr["spec"]["configuration"]["evictionStrategy"] = json!(strategy);
    }
    cr
}

/// A node, with `MemoryPressure` when `pressure` and the available-memory annotation when given.
fn node(name: &str, pressure: bool, available: Option<&str>) -> Value {
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "status": {"capacity": {"memory": "32Gi"}, "conditions": [
            {"type": "MemoryPressure", "status": if pressure { "True" } else { "False" }},
            {"type": "Ready", "status": "True"},
        ]},
    });
    if let Some(available) = available {
        node["metadata"]["annotations"] = json!({"evac.kubevirt.io/memory-available": available});
    }
    node
}

/// The text of an AdmissionRequest of `kind` (`group/version/kind` or `version/kind`).
fn request(kind: &str, operation: &str, object: Value, old_object: Value) -> String {
    let (group, rest) = kind.split_once('/').filter(|(_, r)| r.contains('/')).unwrap_or(("", kind));
    let (version, kind) = rest.split_once('/').unwrap();
    serde_json::to_string(&json!({
        "uid": "00000000-0000-0000-0000-000000000001",
        "kind": {"group": group, "version": version, "kind": kind},
        "name": object["metadata"]["name"].as_str().or(old_object["metadata"]["name"].as_str()).unwrap_or(""),
        "namespace": object["metadata"]["namespace"].as_str().or(old_object["metadata"]["namespace"].as_str()).unwrap_or(""),
        "operation": operation, "object": object, "oldObject": old_object, "dryRun": false,
    }))
    .unwrap()
}

fn delete_pod(pod: Value) -> String {
    request("v1/Pod", "DELETE", Value::Null, pod)
}

fn update_pod(pod: Value) -> String {
    request("v1/Pod", "UPDATE", pod, launcher(None))
}

fn update_node(node: Value) -> String {
    request("v1/Node", "UPDATE", node, Value::Null)
}

fn dry_run(request: String) -> String {
    let value: Value = serde_json::from_str(&request).unwrap();
    with(value, "/dryRun", json!(true)).to_string()
}

fn decide_with(request: &str, settings: &Settings, cluster: &FakeCluster) -> Result<Decision, DecideError> {
    decide(&serde_json::from_str(request).unwrap(), settings, cluster)
}

fn run(request: &str, cluster: &FakeCluster) -> Decision {
    decide_with(request, &Settings::default(), cluster).expect("a decision")
}

fn mark(name: &str, node: &str, source: EvacuationSource) -> Effect {
    Effect::MarkForEvacuation {
        vmi: ObjectRef::new(NS, name),
        node: node.into(),
        dry_run: false,
        source: Some(source),
    }
}

/// Allow, with the cause recorded (when there is one) and these effects.
fn allowed(cause: Option<Cause>, effects: Vec<Effect>) -> Decision {
    let decision = Decision { effects, ..Decision::allow() };
    match cause {
        Some(cause) => decision.with_audit_annotation(CAUSE_AUDIT_ANNOTATION, cause.as_str()),
        None => decision,
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

#[test]
fn every_cause_strategy_migratability_and_gate() {
    // (reason, node under MemoryPressure, cause, the gate and source it needs)
    let causes = [
        (
            Some("PreemptionByScheduler"),
            false,
            Cause::Preemption,
            Some((PREEMPTION_GATE, EvacuationSource::Preemption)),
        ),
        (
            Some("DeletionByTaintManager"),
            false,
            Cause::TaintManager,
            Some((NOEXECUTE_TAINT_GATE, EvacuationSource::NoexecuteTaint)),
        ),
        (
            Some("TerminationByKubelet"),
            false,
            Cause::KubeletEviction,
            Some((NODE_PRESSURE_GATE, EvacuationSource::NodePressure)),
        ),
        (None, true, Cause::NodePressure, Some((NODE_PRESSURE_GATE, EvacuationSource::NodePressure))),
        (
            Some("PreemptionByScheduler"),
            true,
            Cause::Preemption,
            Some((PREEMPTION_GATE, EvacuationSource::Preemption)),
        ),
        (Some("EvictionByEvictionAPI"), false, Cause::ApiEviction, None),
        (Some("DeletionByPodGC"), false, Cause::PodGc, None),
        (Some("SomethingNew"), true, Cause::Unknown, None),
        (None, false, Cause::Unknown, None),
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
    let mut cases = 0;
    for op in [Op::Delete, Op::UpdateTerminating, Op::UpdateCondition] {
        for (reason, pressure, cause, needs) in causes {
            for (strategy, cluster_wide, (marks_migratable, marks_unmigratable)) in strategies {
                for migratable in [true, false] {
                    for gates in ["needed", "all others", "none"] {
                        let enabled: Vec<&str> = match (gates, needs) {
                            ("needed", Some((gate, _))) => vec![gate],
                            ("needed", None) | ("none", _) => vec![],
                            (_, needed) => {
                                ALL_GATES.into_iter().filter(|g| Some(*g) != needed.map(|n| n.0)).collect()
                            }
                        };
                        let cluster = FakeCluster::of([
                            vmi(VM, strategy, migratable),
                            kubevirt(&enabled, cluster_wide),
                            node(NODE, pressure, None),
                        ]);
                        let pod = launcher(reason);
                        let text = match op {
                            Op::Delete => delete_pod(pod),
                            Op::UpdateTerminating => update_pod(terminating(pod)),
                            Op::UpdateCondition => update_pod(pod),
                        };
                        let marks = if migratable { marks_migratable } else { marks_unmigratable };
                        let expected = match needs {
                            // An UPDATE that neither deletes nor flags the pod is no disruption.
                            _ if op == Op::UpdateCondition && reason.is_none() => allowed(None, vec![]),
                            Some((_, source)) if gates == "needed" && marks => {
                                allowed(Some(cause), vec![mark(VM, NODE, source)])
                            }
                            _ => allowed(Some(cause), vec![]),
                        };
                        let case = format!(
                            "{op:?} {reason:?} pressure={pressure} strategy={strategy:?}/{cluster_wide:?} migratable={migratable} gates={gates}"
                        );
                        assert_eq!(run(&text, &cluster), expected, "{case}");
                        cases += 1;
                    }
                }
            }
        }
    }
    assert_eq!(cases, 3 * 9 * 11 * 2 * 3);
}

#[test]
fn a_vmi_being_deleted_is_never_marked() {
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
            let deleted = with(
                vmi(VM, Some(strategy), true),
                "/metadata/deletionTimestamp",
                json!("2026-11-21T09:40:00Z"),
            );
            let cluster = FakeCluster::of([deleted, kubevirt(&ALL_GATES, None), node(NODE, true, None)]);
            for text in [delete_pod(launcher(reason)), update_pod(terminating(launcher(reason)))] {
                let case = format!("{reason:?} {strategy}");
                assert_eq!(run(&text, &cluster), allowed(Some(Cause::UserDeletion), vec![]), "{case}");
            }
            // Neither the node nor the KubeVirt CR matters.
            assert_eq!(
                cluster.reads().iter().filter(|r| !r.starts_with("get VirtualMachineInstance")).count(),
                0
            );
        }
    }
}

/// A cluster where a preempted launcher pod's VM would be marked.
fn preemption_cluster(vmi: Value) -> FakeCluster {
    FakeCluster::of([vmi, kubevirt(&ALL_GATES, None), node(NODE, false, None)])
}

#[test]
fn the_vm_is_marked_only_from_the_pod_it_runs_in_and_once() {
    let preempted = || delete_pod(launcher(Some("PreemptionByScheduler")));
    let marked = allowed(Some(Cause::Preemption), vec![mark(VM, NODE, EvacuationSource::Preemption)]);
    let unmarked = allowed(Some(Cause::Preemption), vec![]);
    let base = || vmi(VM, Some("LiveMigrate"), true);
    let cases = [
        ("the VM runs in this pod", base(), &marked),
        // The pod is a migration's target: its VM runs elsewhere.
        ("a migration target pod", with(base(), "/status/nodeName", json!(OTHER_NODE)), &unmarked),
        ("a VMI still scheduling", with(base(), "/status/phase", json!("Scheduled")), &unmarked),
        ("a VMI that has stopped", with(base(), "/status/phase", json!("Succeeded")), &unmarked),
        ("already marked for this node", with(base(), "/status/evacuationNodeName", json!(NODE)), &unmarked),
        // A stale mark for another node does not stand for this one.
        ("marked for another node", with(base(), "/status/evacuationNodeName", json!(OTHER_NODE)), &marked),
    ];
    for (case, vmi, expected) in cases {
        assert_eq!(&run(&preempted(), &preemption_cluster(vmi)), expected, "{case}");
    }
}

#[test]
fn pods_that_are_not_disrupted_launchers_are_left_alone() {
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
    let cases = [
        ("a plain pod deleted", delete_pod(terminating(plain.clone()))),
        (
            "a plain pod preempted",
            delete_pod(with(
                plain,
                "/status/conditions",
                json!([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]),
            )),
        ),
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
    for (case, text) in cases {
        let cluster = preemption_cluster(vmi(VM, Some("LiveMigrate"), true));
        assert_eq!(run(&text, &cluster), Decision::allow(), "{case}");
        assert_eq!(cluster.reads(), Vec::<String>::new(), "{case}: nothing is read");
    }
}

#[test]
fn reads_are_made_only_as_needed() {
    let cluster = preemption_cluster(vmi(VM, Some("LiveMigrate"), true));
    run(&delete_pod(launcher(Some("PreemptionByScheduler"))), &cluster);
    assert_eq!(cluster.reads(), ["get VirtualMachineInstance default/vm", "list KubeVirt"]);

    // Without a condition, the node names the cause.
    let cluster = preemption_cluster(vmi(VM, Some("LiveMigrate"), true));
    assert_eq!(run(&delete_pod(launcher(None)), &cluster), allowed(Some(Cause::Unknown), vec![]));
    assert_eq!(cluster.reads(), ["get VirtualMachineInstance default/vm", "get Node /node01"]);

    // A cause without a gate reads no configuration.
    let cluster = preemption_cluster(vmi(VM, Some("LiveMigrate"), true));
    run(&delete_pod(launcher(Some("DeletionByPodGC"))), &cluster);
    assert_eq!(cluster.reads(), ["get VirtualMachineInstance default/vm"]);
}

#[test]
fn dry_runs_mark_as_dry_runs() {
    let cluster = preemption_cluster(vmi(VM, Some("LiveMigrate"), true));
    let decision = run(&dry_run(delete_pod(launcher(Some("DeletionByTaintManager")))), &cluster);
    let effect = Effect::MarkForEvacuation {
        vmi: ObjectRef::new(NS, VM),
        node: NODE.into(),
        dry_run: true,
        source: Some(EvacuationSource::NoexecuteTaint),
    };
    assert_eq!(decision, allowed(Some(Cause::TaintManager), vec![effect]));
}

#[test]
fn missing_objects() {
    let preempted = delete_pod(launcher(Some("PreemptionByScheduler")));
    let lm = || vmi(VM, Some("LiveMigrate"), true);
    // No VMI (it is gone, or the pod names none): the cause is recorded, nothing is marked.
    let cluster = FakeCluster::of([kubevirt(&ALL_GATES, None)]);
    assert_eq!(run(&preempted, &cluster), allowed(Some(Cause::Preemption), vec![]));
    assert_eq!(cluster.reads(), ["get VirtualMachineInstance default/vm"]);
    let no_domain = with(launcher(Some("PreemptionByScheduler")), "/metadata/annotations", json!({}));
    let cluster = preemption_cluster(lm());
    assert_eq!(run(&delete_pod(no_domain), &cluster), allowed(Some(Cause::Preemption), vec![]));
    assert_eq!(cluster.reads(), Vec::<String>::new());
    // No KubeVirt CR: no gate is on.
    assert_eq!(run(&preempted, &FakeCluster::of([lm()])), allowed(Some(Cause::Preemption), vec![]));
    // No node: no pressure.
    let cluster = FakeCluster::of([lm(), kubevirt(&ALL_GATES, None)]);
    assert_eq!(run(&delete_pod(launcher(None)), &cluster), allowed(Some(Cause::Unknown), vec![]));
    // A pod without a node reads none.
    let unscheduled = with(launcher(None), "/spec/nodeName", json!(""));
    let cluster = FakeCluster::of([lm(), kubevirt(&ALL_GATES, None)]);
    assert_eq!(run(&delete_pod(unscheduled), &cluster), allowed(Some(Cause::Unknown), vec![]));
    assert_eq!(cluster.reads(), ["get VirtualMachineInstance default/vm"]);
}

#[test]
fn settings_name_the_kubevirt_cr() {
    let named = |name: &str, gates: &[&str]| with(kubevirt(gates, None), "/metadata/name", json!(name));
    let cluster =
        FakeCluster::of([vmi(VM, Some("LiveMigrate"), true), named("a-first", &[]), named("kv", &ALL_GATES)]);
    let preempted = delete_pod(launcher(Some("PreemptionByScheduler")));
    let settings = |name: &str| Settings {
        kubevirt: Some(crate::eviction::KubeVirtRef { namespace: "kubevirt".into(), name: name.into() }),
        ..Settings::default()
    };
    let decision = decide_with(&preempted, &settings("kv"), &cluster).unwrap();
    assert_eq!(
        decision,
        allowed(Some(Cause::Preemption), vec![mark(VM, NODE, EvacuationSource::Preemption)])
    );
    let decision = decide_with(&preempted, &settings("a-first"), &cluster).unwrap();
    assert_eq!(decision, allowed(Some(Cause::Preemption), vec![]));
    // The first CR in the cluster, without settings.
    assert_eq!(run(&preempted, &cluster), allowed(Some(Cause::Preemption), vec![]));
}

#[test]
fn the_pods_namespace_names_the_vmi() {
    let other = with(vmi(VM, Some("LiveMigrate"), true), "/metadata/namespace", json!("tenant"));
    let pod = with(launcher(Some("PreemptionByScheduler")), "/metadata/namespace", json!("tenant"));
    let cluster = preemption_cluster(other);
    let expected = Effect::MarkForEvacuation {
        vmi: ObjectRef::new("tenant", VM),
        node: NODE.into(),
        dry_run: false,
        source: Some(EvacuationSource::Preemption),
    };
    assert_eq!(run(&delete_pod(pod), &cluster), allowed(Some(Cause::Preemption), vec![expected]));
}

#[test]
fn unsupported_requests_are_errors() {
    let cases = [
        ("apps/v1/Deployment", "CREATE", "apps/v1 Deployment CREATE"),
        ("v1/Pod", "CREATE", "v1 Pod CREATE"),
        ("v1/Pod", "CONNECT", "v1 Pod CONNECT"),
        ("v1/Node", "DELETE", "v1 Node DELETE"),
        ("policy/v1/Eviction", "CREATE", "policy/v1 Eviction CREATE"),
        ("example.com/v1/Pod", "DELETE", "example.com/v1 Pod DELETE"),
        ("v1/", "", "v1 <no kind> <no operation>"),
    ];
    for (kind, operation, got) in cases {
        let text = request(kind, operation, launcher(None), launcher(None));
        let error = decide_with(&text, &Settings::default(), &FakeCluster::default()).unwrap_err();
        let message = format!(
            "disruption-cause evaluates Pod UPDATE/DELETE and Node CREATE/UPDATE requests, not {got}"
        );
        assert_eq!(error, DecideError::UnsupportedRequest(got.into()));
        assert_eq!(error.to_string(), message);
        assert_eq!(error.code(), 400);
    }
}

#[test]
fn failed_reads_are_errors() {
    let lm = || vmi(VM, Some("LiveMigrate"), true);
    let cases = [
        ("VirtualMachineInstance", delete_pod(launcher(Some("PreemptionByScheduler")))),
        ("KubeVirt", delete_pod(launcher(Some("PreemptionByScheduler")))),
        ("Node", delete_pod(launcher(None))),
        ("KubeVirt", update_node(node(NODE, true, Some("1Gi")))),
        ("VirtualMachineInstance", update_node(node(NODE, true, Some("1Gi")))),
    ];
    for (kind, text) in cases {
        let cluster = FakeCluster::of([lm(), kubevirt(&ALL_GATES, None), node(NODE, false, None)])
            .failing(kind, "connection refused");
        let error = decide_with(&text, &Settings::default(), &cluster).unwrap_err();
        assert_eq!(error, DecideError::Read(ReadError::other("connection refused")), "{kind}");
        assert_eq!((error.code(), error.to_string()), (500, "connection refused".to_owned()));
    }
    // An object that does not decode is a failed read too.
    let cluster = FakeCluster::of([with(lm(), "/status", json!("broken")), kubevirt(&ALL_GATES, None)]);
    let error =
        decide_with(&delete_pod(launcher(Some("PreemptionByScheduler"))), &Settings::default(), &cluster);
    assert!(error.unwrap_err().to_string().starts_with("cannot decode the VirtualMachineInstance"));
}

#[test]
fn audit_annotations_reach_the_response_only_when_set() {
    let response = PolicyResponse::from(allowed(Some(Cause::Preemption), vec![]));
    let annotations = BTreeMap::from([(CAUSE_AUDIT_ANNOTATION.to_owned(), "preemption".to_owned())]);
    assert_eq!(response.audit_annotations, Some(annotations));
    let json = serde_json::to_value(PolicyResponse::from(Decision::allow())).unwrap();
    assert_eq!(json["audit_annotations"], Value::Null);
    assert_eq!(allowed(None, vec![]).verdict, Verdict::Allow);
}

// --- Node pressure ---------------------------------------------------------------------------

/// A running VMI on NODE of `memory` (a quantity), strategy LiveMigrate, migratable.
fn sized(name: &str, memory: &str) -> Value {
    with(vmi(name, Some("LiveMigrate"), true), "/spec/domain/memory/guest", json!(memory))
}

/// Threshold 12Gi and headroom 1Gi: a node wants 13Gi available.
fn pressure_settings() -> Settings {
    Settings {
        node_pressure: NodePressure { threshold: "12Gi".into(), headroom: "1Gi".into() },
        ..Settings::default()
    }
}

/// The VMs a, b, c, d (4, 2, 2, 1 Gi), all gates on, plus `extra` objects.
fn pressure_cluster(extra: impl IntoIterator<Item = Value>) -> FakeCluster {
    let mut objects = vec![
        sized("c", "2Gi"),
        sized("a", "4Gi"),
        sized("d", "1Gi"),
        sized("b", "2Gi"),
        kubevirt(&ALL_GATES, None),
    ];
    objects.extend(extra);
    FakeCluster::of(objects)
}

fn marks(names: &[&str]) -> Vec<Effect> {
    names.iter().map(|name| mark(name, NODE, EvacuationSource::NodePressure)).collect()
}

fn decide_node(node: Value, cluster: &FakeCluster) -> Decision {
    decide_with(&update_node(node), &pressure_settings(), cluster).expect("a decision")
}

#[test]
fn node_pressure_marks_the_fewest_vms_that_cover_the_deficit() {
    let marked =
        |name: &str, memory: &str| with(sized(name, memory), "/status/evacuationNodeName", json!(NODE));
    // (case, MemoryPressure, memory-available, extra objects, VMs marked in order)
    let cases = [
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
    for (case, pressure, available, extra, expected) in cases {
        let cluster = pressure_cluster(extra);
        let decision = decide_node(node(NODE, pressure, available), &cluster);
        assert_eq!(decision, allowed(Some(Cause::NodePressure), marks(&expected)), "{case}");
    }
}

#[test]
fn best_effort_marks_every_eligible_vm() {
    let settings = Settings {
        node_pressure: NodePressure { threshold: "20Gi".into(), headroom: "0".into() },
        ..Settings::default()
    };
    let decision = decide_with(&update_node(node_at("1Gi")), &settings, &pressure_cluster([])).unwrap();
    assert_eq!(decision, allowed(Some(Cause::NodePressure), marks(&["a", "b", "c", "d"])));
}

fn node_at(available: &str) -> Value {
    node(NODE, false, Some(available))
}

#[test]
fn only_eligible_vms_on_the_node_are_chosen() {
    let big = |name: &str| sized(name, "16Gi");
    let ineligible = [
        with(big("not-running"), "/status/phase", json!("Scheduling")),
        with(big("deleted"), "/metadata/deletionTimestamp", json!("2026-11-21T09:40:00Z")),
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
    ];
    let external = with(
        with(sized("external", "16Gi"), "/spec/evictionStrategy", json!("External")),
        "/status/conditions",
        json!([]),
    );
    let mut objects = ineligible.to_vec();
    objects.extend([sized("small", "1Gi"), kubevirt(&ALL_GATES, None)]);
    // 11Gi short: a best effort with the one eligible VM, until a large one is eligible too.
    let decision = decide_node(node_at("2Gi"), &FakeCluster::of(objects.clone()));
    assert_eq!(decision, allowed(Some(Cause::NodePressure), marks(&["small"])));
    objects.push(external);
    let decision = decide_node(node_at("2Gi"), &FakeCluster::of(objects));
    assert_eq!(decision, allowed(Some(Cause::NodePressure), marks(&["external"])));
}

#[test]
fn cluster_wide_strategy_and_namespace_ties() {
    let plain = |ns: &str, name: &str| {
        let mut vmi = sized(name, "4Gi");
        vmi["metadata"]["namespace"] = json!(ns);
        vmi["spec"].as_object_mut().unwrap().remove("evictionStrategy");
        vmi
    };
    let cluster =
        FakeCluster::of([plain("zeta", "a"), plain("alpha", "z"), kubevirt(&ALL_GATES, Some("LiveMigrate"))]);
    let expected = Effect::MarkForEvacuation {
        vmi: ObjectRef::new("alpha", "z"),
        node: NODE.into(),
        dry_run: false,
        source: Some(EvacuationSource::NodePressure),
    };
    assert_eq!(decide_node(node_at("10Gi"), &cluster), allowed(Some(Cause::NodePressure), vec![expected]));
    // Without a cluster-wide strategy, neither is eligible.
    let cluster = FakeCluster::of([plain("zeta", "a"), plain("alpha", "z"), kubevirt(&ALL_GATES, None)]);
    assert_eq!(decide_node(node_at("2Gi"), &cluster), allowed(Some(Cause::NodePressure), vec![]));
}

#[test]
fn node_pressure_needs_its_gate_and_reads_nothing_when_healthy() {
    let gates_without_node_pressure = [PREEMPTION_GATE, NOEXECUTE_TAINT_GATE];
    let cluster = FakeCluster::of([sized("a", "4Gi"), kubevirt(&gates_without_node_pressure, None)]);
    assert_eq!(decide_node(node_at("2Gi"), &cluster), allowed(Some(Cause::NodePressure), vec![]));
    assert_eq!(cluster.reads(), ["list KubeVirt"]);

    for (case, healthy) in
        [("just enough", node_at("13Gi")), ("no figure, no pressure", node(NODE, false, None))]
    {
        let cluster = pressure_cluster([]);
        assert_eq!(decide_node(healthy, &cluster), Decision::allow(), "{case}");
        assert_eq!(cluster.reads(), Vec::<String>::new(), "{case}");
    }

    let cluster = pressure_cluster([]);
    decide_node(node_at("2Gi"), &cluster);
    assert_eq!(cluster.reads(), ["list KubeVirt", "list VirtualMachineInstance kubevirt.io/nodeName=node01"]);
}

#[test]
fn node_creates_dry_runs_and_default_settings() {
    let cluster = pressure_cluster([]);
    let text = dry_run(request("v1/Node", "CREATE", node_at("10Gi"), Value::Null));
    let decision = decide_with(&text, &pressure_settings(), &cluster).unwrap();
    let effect = Effect::MarkForEvacuation {
        vmi: ObjectRef::new(NS, "a"),
        node: NODE.into(),
        dry_run: true,
        source: Some(EvacuationSource::NodePressure),
    };
    assert_eq!(decision, allowed(Some(Cause::NodePressure), vec![effect]));

    // The defaults want 3500Mi + 1Gi = 4524Mi: 4524Mi available is enough, 4523Mi is 1Mi short.
    let decision = run(&update_node(node_at("4524Mi")), &pressure_cluster([]));
    assert_eq!(decision, Decision::allow());
    let decision = run(&update_node(node_at("4523Mi")), &pressure_cluster([]));
    assert_eq!(decision, allowed(Some(Cause::NodePressure), marks(&["d"])));

    // A node that does not decode has nothing to act on.
    assert_eq!(run(&update_node(json!({"status": 7})), &pressure_cluster([])), Decision::allow());
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
    // Unvalidated settings reach a node decision as an error, not a guess.
    let error = decide_with(&update_node(node_at("1Gi")), &bad, &pressure_cluster([])).unwrap_err();
    assert_eq!(error.code(), 500);
    assert!(error.to_string().starts_with("invalid settings: nodePressure.headroom"), "{error}");
}
