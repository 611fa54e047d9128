//! The built evacuation module, run in-process by evac's wasmtime host against static clusters:
//! KubeVirt's evacuation controller end to end (waPC, host capabilities limited to the module's
//! `contextAwareResources`, the WASI clock, Kubewarden's protocol).
//!
//! The module reads the wall clock, so the timestamps of past migrations are set relative to the
//! real time.

use std::path::PathBuf;
use std::sync::Arc;

use evac_core::effect::{
    EventReason, MigrationCause, EVICTION_IN_PROGRESS_ANNOTATION as IN_PROGRESS,
    REQUEST_EVICT_ONLY_ANNOTATION as EVICT_ONLY,
};
use evac_core::PolicyId;
use evac_core::{Effect, ObjectRef, PolicyResponse};
use evac_e2e::*;
use evac_runtime::capabilities::{KubernetesCapabilities, ResourceGrant};
use evac_runtime::kubewarden;
use evac_runtime::wapc::{Policy, PolicyModule};
use evac_testkit::ReadFailure;
use serde_json::{json, Value};

fn module_path() -> PathBuf {
    built_policy(PolicyId::Evacuation)
}

fn module() -> PolicyModule {
    built_module(PolicyId::Evacuation)
}

/// The `contextAwareResources` embedded in the built module: all it may read.
fn embedded_grants() -> Vec<ResourceGrant> {
    let bytes = std::fs::read(module_path()).expect("the module");
    let metadata = kubewarden::metadata::read(&bytes).expect("a module").expect("embedded metadata");
    assert_eq!(metadata.rules[0].resources, ["nodes"]);
    assert_eq!(metadata.rules[0].operations, ["UPDATE"]);
    metadata.context_aware_resources.into_iter().collect()
}

/// The policy over these objects and a schedulable OTHER_NODE with room for every VM, granted
/// what its metadata declares.
fn policy(objects: impl IntoIterator<Item = Value>) -> Policy {
    let objects = objects.into_iter().chain([node(OTHER_NODE)]);
    let capabilities = KubernetesCapabilities::new(Arc::new(cluster(objects))).granting(embedded_grants());
    Policy::new(module(), Arc::new(capabilities))
}

/// The AdmissionRequest of an UPDATE of `node`.
fn node_update(node: Value) -> Value {
    json!({
        "uid": "e2e-node-update",
        "kind": {"group": "", "version": "v1", "kind": "Node"},
        "resource": {"group": "", "version": "v1", "resource": "nodes"},
        "name": node["metadata"]["name"],
        "operation": "UPDATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:e2e"},
        "object": node,
        "oldObject": null,
        "dryRun": false,
    })
}

/// The decision with evac creating the migrations itself (`kubevirtEvacuationController: false`):
/// what its own evacuation controller decides.
fn decide(policy: &Policy, node: Value) -> PolicyResponse {
    decide_with(policy, node, &json!({"kubevirtEvacuationController": false}))
}

fn decide_with(policy: &Policy, node: Value, settings: &Value) -> PolicyResponse {
    let response = validate_with_settings(policy, &node_update(node), settings).expect("validate");
    assert!(response.accepted, "{response:?}");
    assert_eq!((response.code, response.message.as_deref()), (None, None));
    response
}

/// With the default settings, beside KubeVirt's evacuation controller: the drain's marked VMIs
/// are KubeVirt's to migrate (evac creates nothing), and the migration KubeVirt created for one of
/// them gets its cause.
#[test]
fn beside_kubevirt_the_module_creates_nothing_and_records_causes() {
    let created = migration("kubevirt-evacuation-k1", "a", "Running", Some(NODE), 0);
    let objects = [
        vec![kubevirt_cr(None), created],
        with_pod(marked(vm("a", Some("LiveMigrate"), true))).to_vec(),
        with_pod(marked(vm("b", Some("LiveMigrate"), true))).to_vec(),
    ]
    .concat();
    let response = decide_with(&policy(objects), drained(), &json!({}));
    assert!(
        !response.effects.iter().any(|e| matches!(e, Effect::CreateMigration { .. })),
        "{:?}",
        response.effects
    );
    let annotated: Vec<&Effect> =
        response.effects.iter().filter(|e| matches!(e, Effect::AnnotateMigration { .. })).collect();
    let expected = Effect::AnnotateMigration {
        migration: ObjectRef::new(NS, "kubevirt-evacuation-k1"),
        cause: MigrationCause::Drain,
    };
    assert_eq!(annotated, [&expected]);
}

/// A schedulable, untainted node.
fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

/// NODE being drained: cordoned, with virt-handler's drain taint.
fn drained() -> Value {
    let node = with(node(NODE), "/spec/unschedulable", json!(true));
    with(
        node,
        "/spec/taints",
        json!([{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
               {"key": "kubevirt.io/drain", "effect": "NoSchedule"}]),
    )
}

/// A running VMI on NODE, labelled with it as KubeVirt does.
fn vm(name: &str, strategy: Option<&str>, migratable: bool) -> Value {
    with(vmi(NS, name, strategy, migratable, NODE), "/metadata/labels", json!({"kubevirt.io/nodeName": NODE}))
}

fn marked(vmi: Value) -> Value {
    with(vmi, "/status/evacuationNodeName", json!(NODE))
}

/// A VMI and its launcher pod (annotated with the domain only).
fn with_pod(vmi: Value) -> [Value; 2] {
    let name = vmi["metadata"]["name"].as_str().unwrap().to_owned();
    [vmi, launcher_pod(NS, &name, NODE)]
}

/// A timestamp `seconds` before now.
fn ago(seconds: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::seconds(seconds))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A migration of `vmi` (an evacuation from `evacuation_from` when given), finished
/// `ended_ago` seconds ago when its phase is final.
fn migration(name: &str, vmi: &str, phase: &str, evacuation_from: Option<&str>, ended_ago: i64) -> Value {
    let mut migration = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name, "namespace": NS, "creationTimestamp": ago(ended_ago + 60)},
        "spec": {"vmiName": vmi},
        "status": {"phase": phase},
    });
    if matches!(phase, "Succeeded" | "Failed") {
        migration["status"]["migrationState"] = json!({"endTimestamp": ago(ended_ago)});
    }
    if let Some(node) = evacuation_from {
        migration["metadata"]["annotations"] = json!({"kubevirt.io/evacuationMigration": node});
    }
    migration
}

fn migrate(vmi: &str, cause: MigrationCause) -> Effect {
    Effect::CreateMigration {
        vmi: ObjectRef::new(NS, vmi),
        node: NODE.into(),
        cause: Some(cause),
        priority: None,
    }
}

fn drain(vmi: &str) -> Effect {
    migrate(vmi, MigrationCause::Drain)
}

fn annotate(vmi: &str, annotations: &[(&str, Option<&str>)]) -> Effect {
    Effect::AnnotatePod {
        pod: ObjectRef::new(NS, launcher_name(vmi)),
        annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.map(str::to_owned))).collect(),
    }
}

fn migrations(response: &PolicyResponse) -> Vec<&Effect> {
    response.effects.iter().filter(|e| matches!(e, Effect::CreateMigration { .. })).collect()
}

#[test]
fn a_drained_node_migrates_two_at_a_time() {
    let objects = [
        vec![kubevirt_cr(None)],
        with_pod(marked(vm("a", Some("LiveMigrate"), true))).to_vec(),
        with_pod(marked(vm("b", Some("LiveMigrate"), true))).to_vec(),
        with_pod(marked(vm("c", Some("LiveMigrate"), true))).to_vec(),
        // Not marked: the drain taint moves it, after the marked ones.
        with_pod(vm("d", Some("LiveMigrateIfPossible"), true)).to_vec(),
        // Marked for capk, which acts on it: never migrated, in progress all the same.
        with_pod(marked(vm("e", Some("External"), false))).to_vec(),
        // On another node: not read.
        vec![vmi(NS, "f", Some("LiveMigrate"), true, OTHER_NODE), launcher_pod(NS, "f", OTHER_NODE)],
    ]
    .concat();
    let response = decide(&policy(objects), drained());
    let in_progress = [(IN_PROGRESS, Some("true")), (EVICT_ONLY, Some(""))];
    assert_eq!(
        response.effects,
        [
            drain("a"),
            drain("b"),
            annotate("a", &in_progress),
            annotate("b", &in_progress),
            annotate("c", &in_progress),
            annotate("d", &[(EVICT_ONLY, Some(""))]),
            annotate("e", &in_progress),
        ]
    );
}

#[test]
fn parallel_limits_count_active_migrations() {
    let limited = with(
        kubevirt_cr(None),
        "/spec/configuration/migrations",
        json!({"parallelMigrationsPerCluster": 3, "parallelOutboundMigrationsPerNode": 10}),
    );
    let vms = || ["a", "b", "c"].into_iter().flat_map(|n| with_pod(marked(vm(n, Some("LiveMigrate"), true))));
    let policy_with_active = |active: usize| {
        let elsewhere = (0..active)
            .map(|i| migration(&format!("m{i}"), &format!("x{i}"), "Running", Some(OTHER_NODE), 0));
        policy([limited.clone()].into_iter().chain(vms()).chain(elsewhere))
    };
    let all = decide(&policy_with_active(0), drained());
    assert_eq!(migrations(&all), [&drain("a"), &drain("b"), &drain("c")]);
    let one = decide(&policy_with_active(2), drained());
    assert_eq!(migrations(&one), [&drain("a")]);
    assert_eq!(migrations(&decide(&policy_with_active(3), drained())), Vec::<&Effect>::new());

    // A VMI already migrating is left to it, and its pod stays in progress; the migration, which
    // someone else created without a cause, gets one.
    let objects = [
        vec![kubevirt_cr(None)],
        vec![marked(vm("a", Some("LiveMigrate"), true))],
        vec![with(
            launcher_pod(NS, "a", NODE),
            "/metadata/annotations",
            json!({
            "kubevirt.io/domain": "a", IN_PROGRESS: "true", EVICT_ONLY: ""}),
        )],
        vec![migration("m", "a", "Running", Some(NODE), 0)],
    ]
    .concat();
    let cause =
        Effect::AnnotateMigration { migration: ObjectRef::new(NS, "m"), cause: MigrationCause::Drain };
    assert_eq!(decide(&policy(objects), drained()).effects, [cause]);
}

#[test]
fn back_off_after_failed_evacuations() {
    let objects = |failures: &[i64]| {
        let failed = failures
            .iter()
            .enumerate()
            .map(|(i, ago)| migration(&format!("f{i}"), "a", "Failed", Some(NODE), *ago));
        [kubevirt_cr(None)]
            .into_iter()
            .chain(with_pod(marked(vm("a", Some("LiveMigrate"), true))))
            .chain(failed)
            .collect::<Vec<_>>()
    };
    // One failure: 20 s.
    assert_eq!(migrations(&decide(&policy(objects(&[5])), drained())), Vec::<&Effect>::new());
    assert_eq!(migrations(&decide(&policy(objects(&[60])), drained())), [&drain("a")]);
    // Three in a row: 80 s.
    assert_eq!(migrations(&decide(&policy(objects(&[900, 800, 60])), drained())), Vec::<&Effect>::new());
    assert_eq!(migrations(&decide(&policy(objects(&[900, 800, 100])), drained())), [&drain("a")]);
    // Five in a row: 320 s, capped at 300 s. A drain's mark is never given up: the drain waits
    // for the VM, as it does with KubeVirt alone.
    assert_eq!(
        migrations(&decide(&policy(objects(&[5000, 4000, 3000, 2000, 200])), drained())),
        Vec::<&Effect>::new()
    );
    assert_eq!(
        migrations(&decide(&policy(objects(&[5000, 4000, 3000, 2000, 1000])), drained())),
        [&drain("a")]
    );
}

#[test]
fn evacs_own_marks_are_given_up_after_failures() {
    // A NoExecute taint's mark (evac's own cause) with five failed migrations in a row: called
    // off, with an event on the VMI, and the descheduler may evict the pod again.
    let vmi = with(marked(vm("a", Some("LiveMigrate"), true)), "/metadata/annotations", json!({}));
    let vmi = with(vmi, "/metadata/annotations/kubevirt.io~1eviction-source", json!("noexecute-taint"));
    let failed = [5000, 4000, 3000, 2000, 1000]
        .iter()
        .enumerate()
        .map(|(i, ago)| migration(&format!("f{i}"), "a", "Failed", Some(NODE), *ago));
    let objects = [kubevirt_cr(None)].into_iter().chain(with_pod(vmi)).chain(failed);
    let tainted = with(
        node(NODE),
        "/spec/taints",
        json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
    );
    let response = decide(&policy(objects), tainted);
    assert_eq!(
        response.effects,
        [
            Effect::ClearEvacuation { vmi: ObjectRef::new(NS, "a"), node: NODE.into() },
            Effect::RecordEvent {
                vmi: ObjectRef::new(NS, "a"),
                node: NODE.into(),
                reason: EventReason::EvacuationGivenUp,
                message: "evac gave up evacuating the VMI from node node01 (noexecute-taint) after 5 failed \
                          migrations in a row: it stays on the node"
                    .into(),
            },
            annotate("a", &[(EVICT_ONLY, Some(""))]),
        ]
    );
}

#[test]
fn causes_and_priorities_of_marks() {
    let from = |source: &str| {
        let vmi = with(marked(vm("a", Some("LiveMigrate"), true)), "/metadata/annotations", json!({}));
        with(vmi, "/metadata/annotations/kubevirt.io~1eviction-source", json!(source))
    };
    // The descheduler's rebalancing, on a schedulable node: maintenance priority.
    let response = decide(&policy(with_pod(from("descheduler"))), node(NODE));
    assert_eq!(migrations(&response), [&migrate("a", MigrationCause::Descheduler)]);
    // A NoExecute taint, still there.
    let tainted = with(
        node(NODE),
        "/spec/taints",
        json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]),
    );
    let response = decide(&policy(with_pod(from("noexecute-taint"))), tainted);
    assert_eq!(migrations(&response), [&migrate("a", MigrationCause::NoexecuteTaint)]);
    // ... and once it is gone: called off.
    let response = decide(&policy(with_pod(from("noexecute-taint"))), node(NODE));
    assert_eq!(
        response.effects,
        [
            Effect::ClearEvacuation { vmi: ObjectRef::new(NS, "a"), node: NODE.into() },
            annotate("a", &[(EVICT_ONLY, Some(""))]),
        ]
    );
}

#[test]
fn requests_it_cannot_decide_are_rejected() {
    let policy = policy(with_pod(marked(vm("a", Some("LiveMigrate"), true))));
    let mut pod_update = node_update(drained());
    pod_update["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    pod_update["object"] = launcher_pod(NS, "a", NODE);
    let response = validate(&policy, &pod_update).expect("validate");
    assert_eq!(
        (response.accepted, response.code, response.message.as_deref()),
        (false, Some(400), Some("this policy only evaluates Node requests, got UPDATE v1 Pod"))
    );
    assert!(response.effects.is_empty());

    let failing = Policy::new(
        module(),
        Arc::new(FailingReads {
            inner: KubernetesCapabilities::new(Arc::new(cluster([]))),
            failures: vec![ReadFailure::of_kind(
                "VirtualMachineInstanceMigration",
                "etcdserver: request timed out",
            )],
        }),
    );
    let response = validate(&failing, &node_update(drained())).expect("validate");
    assert_eq!(
        (response.accepted, response.code, response.message.as_deref()),
        (false, Some(500), Some("cannot read the cluster: etcdserver: request timed out"))
    );
}

#[test]
fn settings_are_validated() {
    let policy = policy([]);
    let answer =
        |settings: Value| kubewarden::validate_settings(&policy, &raw(&settings)).expect("validate_settings");
    assert!(answer(json!({})).valid);
    assert!(
        answer(json!({"maxFailedEvacuations": 3, "nodePressure": {"threshold": "2Gi", "headroom": "512Mi"},
                          "assumedBandwidth": "128Mi"}))
        .valid
    );
    let removed = answer(json!({"nodePressureRelease": "2Gi"}));
    assert!(!removed.valid, "{:?}", removed.message);
    let zero = answer(json!({"maxFailedEvacuations": 0}));
    assert_eq!(
        (zero.valid, zero.message.as_deref()),
        (false, Some("maxFailedEvacuations must be greater than 0"))
    );
}
