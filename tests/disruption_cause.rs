//! The built disruption-cause module, run in-process by evac's wasmtime host against static
//! clusters, with only the reads its metadata grants: each cause of a launcher pod's disruption
//! under each feature gate, user deletions, node pressure, and what it cannot decide.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use evac_cluster::MemoryStore;
use evac_core::effect::EvacuationSource;
use evac_core::{Effect, ObjectRef, PolicyResponse};
use evac_e2e::*;
use evac_runtime::capabilities::{KubernetesCapabilities, ResourceGrant};
use evac_runtime::kubewarden;
use evac_runtime::kubewarden::metadata::{self, Metadata};
use evac_runtime::wapc::{EngineOptions, Policy, PolicyEngine, PolicyModule};
use serde_json::{json, Value};

const PREEMPTION: &str = "PreemptionEvictionLiveMigration";
const NOEXECUTE: &str = "NoExecuteTaintEvictionLiveMigration";
const NODE_PRESSURE: &str = "NodePressureEvictionLiveMigration";
const ALL_GATES: [&str; 3] = [PREEMPTION, NOEXECUTE, NODE_PRESSURE];

/// The built module. Fails (does not skip) when it has not been built.
fn module_path() -> PathBuf {
    let path = repo_root().join("dist/policies/disruption-cause.wasm");
    assert!(path.is_file(), "the built policy module {} is missing: run `make build` first", path.display());
    path
}

fn module() -> PolicyModule {
    static MODULE: OnceLock<PolicyModule> = OnceLock::new();
    MODULE
        .get_or_init(|| {
            let engine = PolicyEngine::new(EngineOptions::default()).expect("engine");
            engine.load(&module_path()).unwrap_or_else(|e| panic!("cannot load the built module: {e:#}"))
        })
        .clone()
}

/// The metadata embedded in the built module.
fn embedded_metadata() -> Metadata {
    let bytes = std::fs::read(module_path()).expect("the built module");
    metadata::read(&bytes)
        .expect("readable metadata")
        .expect("the built module has no metadata: run `make build`")
}

/// The policy reading these objects, with the grants of its metadata and nothing more.
fn policy_of(objects: impl IntoIterator<Item = Value>) -> Policy {
    static GRANTS: OnceLock<BTreeSet<ResourceGrant>> = OnceLock::new();
    let grants = GRANTS.get_or_init(|| embedded_metadata().context_aware_resources).clone();
    let capabilities = KubernetesCapabilities::new(Arc::new(cluster(objects))).granting(grants);
    Policy::new(module(), Arc::new(capabilities))
}

fn evaluate(policy: &Policy, request: &Value) -> PolicyResponse {
    validate(policy, request).expect("validate")
}

fn kubevirt_with(gates: &[&str]) -> Value {
    with(kubevirt_cr(None), "/spec/configuration/developerConfiguration/featureGates", json!(gates))
}

/// VMI `vm`'s launcher pod on NODE, flagged `DisruptionTarget` with `reason` when given.
fn launcher(reason: Option<&str>) -> Value {
    let mut conditions = vec![json!({"type": "Ready", "status": "True"})];
    if let Some(reason) = reason {
        conditions.push(json!({"type": "DisruptionTarget", "status": "True", "reason": reason}));
    }
    with(launcher_pod(NS, "vm", NODE), "/status/conditions", json!(conditions))
}

fn node(pressure: bool, available: Option<&str>) -> Value {
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODE},
        "status": {"capacity": {"memory": "32Gi"}, "conditions": [
            {"type": "MemoryPressure", "status": if pressure { "True" } else { "False" }},
        ]},
    });
    if let Some(available) = available {
        node["metadata"]["annotations"] = json!({"evac.kubevirt.io/memory-available": available});
    }
    node
}

/// A core-group AdmissionRequest as Kubewarden passes it.
fn admission(kind: &str, resource: &str, operation: &str, object: Value, old_object: Value) -> Value {
    let metadata = if object.is_null() { &old_object["metadata"] } else { &object["metadata"] };
    json!({
        "uid": format!("e2e-{kind}-{operation}"),
        "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": resource},
        "name": metadata["name"],
        "namespace": metadata["namespace"].as_str().unwrap_or(""),
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kube-system:e2e"},
        "object": object,
        "oldObject": old_object,
        "dryRun": false,
    })
}

fn delete_pod(pod: Value) -> Value {
    admission("Pod", "pods", "DELETE", Value::Null, pod)
}

fn update_node(node: Value) -> Value {
    admission("Node", "nodes", "UPDATE", node, Value::Null)
}

fn mark(vmi: &str, source: EvacuationSource) -> Effect {
    Effect::MarkForEvacuation {
        vmi: ObjectRef::new(NS, vmi),
        node: NODE.into(),
        dry_run: false,
        source: Some(source),
    }
}

fn cause(value: &str) -> Option<BTreeMap<String, String>> {
    Some([("evac.kubevirt.io/disruption-cause".to_owned(), value.to_owned())].into())
}

/// Allowed, with this cause recorded and exactly these effects.
fn check_allowed(case: &str, response: &PolicyResponse, cause_value: &str, effects: &[Effect]) {
    assert!(response.accepted, "{case}: expected allowed, got {response:?}");
    assert_eq!((response.code, response.message.as_deref()), (None, None), "{case}");
    assert_eq!(response.audit_annotations, cause(cause_value), "{case}: cause");
    assert_eq!(response.effects, effects, "{case}: effects");
    assert_eq!(response.mutated_object, None, "{case}: a validating policy mutated");
}

#[test]
fn every_cause_under_each_gate_and_user_deletions() {
    // (DisruptionTarget reason, node under MemoryPressure, cause, the gate and mark it needs)
    let causes = [
        (
            Some("PreemptionByScheduler"),
            false,
            "preemption",
            Some((PREEMPTION, EvacuationSource::Preemption)),
        ),
        (
            Some("DeletionByTaintManager"),
            false,
            "taint-manager",
            Some((NOEXECUTE, EvacuationSource::NoexecuteTaint)),
        ),
        (
            Some("TerminationByKubelet"),
            false,
            "kubelet-eviction",
            Some((NODE_PRESSURE, EvacuationSource::NodePressure)),
        ),
        (None, true, "node-pressure", Some((NODE_PRESSURE, EvacuationSource::NodePressure))),
        (Some("EvictionByEvictionAPI"), false, "api-eviction", None),
        (Some("DeletionByPodGC"), false, "pod-gc", None),
        (None, false, "unknown", None),
    ];
    for (reason, pressure, cause_value, needs) in causes {
        for gates in ["needed", "all others", "none"] {
            for vmi_deleted in [false, true] {
                let enabled: Vec<&str> = match (gates, needs) {
                    ("needed", Some((gate, _))) => vec![gate],
                    ("all others", needed) => {
                        ALL_GATES.into_iter().filter(|g| needed.is_none_or(|(n, _)| n != *g)).collect()
                    }
                    _ => vec![],
                };
                let mut vm = vmi(NS, "vm", Some("LiveMigrate"), true, NODE);
                if vmi_deleted {
                    vm = with(vm, "/metadata/deletionTimestamp", json!("2026-11-21T09:40:00Z"));
                }
                let policy = policy_of([vm, kubevirt_with(&enabled), node(pressure, None)]);
                let response = evaluate(&policy, &delete_pod(launcher(reason)));
                let case = format!("{reason:?} pressure={pressure} gates={gates} vmi_deleted={vmi_deleted}");
                match needs {
                    _ if vmi_deleted => check_allowed(&case, &response, "user-deletion", &[]),
                    Some((_, source)) if gates == "needed" => {
                        check_allowed(&case, &response, cause_value, &[mark("vm", source)])
                    }
                    _ => check_allowed(&case, &response, cause_value, &[]),
                }
            }
        }
    }
}

#[test]
fn the_eviction_strategy_decides_the_mark() {
    // (VMI strategy, cluster-wide strategy, LiveMigratable, marked)
    let cases = [
        (Some("LiveMigrate"), None, true, true),
        (Some("LiveMigrate"), None, false, false),
        (Some("LiveMigrateIfPossible"), None, true, true),
        (Some("LiveMigrateIfPossible"), None, false, false),
        (Some("External"), None, false, true),
        (Some("None"), Some("LiveMigrate"), true, false),
        (None, Some("LiveMigrate"), true, true),
        (None, None, true, false),
    ];
    for (strategy, cluster_wide, migratable, marked) in cases {
        let cr = with(kubevirt_with(&ALL_GATES), "/spec/configuration/evictionStrategy", json!(cluster_wide));
        let policy = policy_of([vmi(NS, "vm", strategy, migratable, NODE), cr]);
        let response = evaluate(&policy, &delete_pod(launcher(Some("DeletionByTaintManager"))));
        let effects = if marked { vec![mark("vm", EvacuationSource::NoexecuteTaint)] } else { vec![] };
        let case = format!("{strategy:?}/{cluster_wide:?} migratable={migratable}");
        check_allowed(&case, &response, "taint-manager", &effects);
    }
}

#[test]
fn the_condition_update_before_a_deletion_marks_too() {
    let policy = policy_of([vmi(NS, "vm", Some("LiveMigrate"), true, NODE), kubevirt_with(&ALL_GATES)]);
    let request = with(
        admission("Pod", "pods", "UPDATE", launcher(Some("PreemptionByScheduler")), launcher(None)),
        "/subResource",
        json!("status"),
    );
    let response = evaluate(&policy, &request);
    check_allowed("status UPDATE", &response, "preemption", &[mark("vm", EvacuationSource::Preemption)]);
    // A migration target's pod: the VM runs on the other node.
    let policy = policy_of([vmi(NS, "vm", Some("LiveMigrate"), true, OTHER_NODE), kubevirt_with(&ALL_GATES)]);
    let response = evaluate(&policy, &delete_pod(launcher(Some("PreemptionByScheduler"))));
    check_allowed("target pod", &response, "preemption", &[]);
}

#[test]
fn a_node_short_of_memory_marks_the_fewest_vms() {
    let sized = |name: &str, memory: &str| {
        let vmi = vmi(NS, name, Some("LiveMigrate"), true, NODE);
        let vmi = with(vmi, "/metadata/labels", json!({"kubevirt.io/nodeName": NODE}));
        with(vmi, "/spec/domain/memory/guest", json!(memory))
    };
    let vms = || [sized("a", "4Gi"), sized("b", "2Gi"), sized("c", "1Gi")];
    // The defaults want 3500Mi + 1Gi = 4524Mi available. (case, node, gates, marked)
    let cases = [
        ("1452Mi short: the smallest that covers it", node(false, Some("3Gi")), &ALL_GATES[..], vec!["b"]),
        (
            "4524Mi short: the largest, then what covers the rest",
            node(true, Some("0")),
            &ALL_GATES[..],
            vec!["a", "c"],
        ),
        ("pressure, no figure: the largest", node(true, None), &ALL_GATES[..], vec!["a"]),
        ("the gate is off", node(true, Some("0")), &[PREEMPTION, NOEXECUTE][..], vec![]),
    ];
    for (case, node, gates, marked) in cases {
        let mut objects = vms().to_vec();
        objects.push(kubevirt_with(gates));
        let response = evaluate(&policy_of(objects), &update_node(node));
        let effects: Vec<Effect> =
            marked.iter().map(|name| mark(name, EvacuationSource::NodePressure)).collect();
        check_allowed(case, &response, "node-pressure", &effects);
    }
    // A healthy node is allowed without a word.
    let response = evaluate(&policy_of(vms()), &update_node(node(false, Some("16Gi"))));
    assert!(
        response.accepted && response.effects.is_empty() && response.audit_annotations.is_none(),
        "{response:?}"
    );
}

#[test]
fn what_it_cannot_decide_is_rejected_with_the_reason() {
    let policy = policy_of([kubevirt_with(&ALL_GATES)]);
    let mut request = delete_pod(launcher(None));
    request["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    request["operation"] = json!("CREATE");
    let response = evaluate(&policy, &request);
    assert!(!response.accepted);
    assert_eq!(response.code, Some(400));
    assert_eq!(
        response.message.as_deref(),
        Some("disruption-cause evaluates Pod UPDATE/DELETE and Node CREATE/UPDATE requests, not apps/v1 Deployment CREATE")
    );
    // A read the metadata does not grant is a failed read: the deletion is not blocked for it.
    let capabilities =
        KubernetesCapabilities::new(Arc::new(MemoryStore::empty())).granting([grant("v1", "Node")]);
    let policy = Policy::new(module(), Arc::new(capabilities));
    let response = evaluate(&policy, &delete_pod(launcher(Some("PreemptionByScheduler"))));
    assert_eq!((response.accepted, response.code), (true, None), "{response:?}");
    assert!(response.warnings.unwrap()[0].contains("contextAwareResources"));
    assert!(response.effects.is_empty());
}

#[test]
fn settings_are_validated_by_the_module() {
    let policy = policy_of([]);
    let answer =
        |settings: Value| kubewarden::validate_settings(&policy, &raw(&settings)).expect("an answer");
    assert!(answer(json!({"nodePressure": {"threshold": "2Gi", "headroom": "0"}})).valid);
    let bad = answer(json!({"nodePressure": {"threshold": "plenty"}}));
    assert_eq!(
        (bad.valid, bad.message.as_deref()),
        (false, Some(r#"nodePressure.threshold: "plenty" is not a memory quantity (e.g. 3500Mi)"#))
    );
    assert_eq!(kubewarden::protocol_version(&policy).unwrap(), "v1");
}

#[test]
fn the_built_module_carries_its_metadata() {
    let embedded = embedded_metadata();
    let yml = std::fs::read_to_string(repo_root().join("policies/disruption-cause/metadata.yml")).unwrap();
    let mut expected = Metadata::from_yaml(&yml).unwrap();
    expected.protocol_version = Some("v1".into());
    assert_eq!(embedded, expected, "dist/policies/disruption-cause.wasm is stale: run `make build`");
    assert!(!embedded.mutating);
    let grants: BTreeSet<ResourceGrant> = [
        grant("v1", "Node"),
        grant("kubevirt.io/v1", "VirtualMachineInstance"),
        grant("kubevirt.io/v1", "KubeVirt"),
    ]
    .into();
    assert_eq!(embedded.context_aware_resources, grants);
}
