//! The policy's glue, natively: the fixtures of `test_data/` (a drained node's UPDATE, a cluster
//! as a `v1 List`) through `evaluate_at`.

use std::collections::BTreeMap;

use evac_core::effect::{MigrationCause, EVICTION_IN_PROGRESS_ANNOTATION, REQUEST_EVICT_ONLY_ANNOTATION};
use evac_core::{ClusterReader, Effect, ObjectRef, PolicyResponse};
use evac_testkit::TestCluster;
use serde_json::{json, Value};

use evac_core::trace::Trace;

use super::evaluate_at;

/// 2026-11-21T10:00:00Z, twenty minutes into the drain of the fixtures.
const NOW: f64 = 1_795_255_200.0;

fn fixture(name: &str) -> Value {
    evac_testkit::test_data(env!("CARGO_MANIFEST_DIR"), name)
}

/// The objects of `test_data/context.json`.
fn context() -> TestCluster {
    TestCluster::new(fixture("context.json")["items"].as_array().unwrap().iter().cloned())
}

/// The payload, with evac creating the migrations itself (KubeVirt's evacuation controller off)
/// unless the settings say otherwise.
fn payload(request: &Value, mut settings: Value) -> Vec<u8> {
    if settings.get("kubevirtEvacuationController").is_none() {
        settings["kubevirtEvacuationController"] = json!(false);
    }
    serde_json::to_vec(&json!({"settings": settings, "request": request})).unwrap()
}

fn evaluate(payload: &[u8], cluster: &impl ClusterReader) -> PolicyResponse {
    serde_json::from_slice(
        &evaluate_at(payload, cluster, NOW, &mut Trace::off()).expect("a decodable payload"),
    )
    .unwrap()
}

fn drained_node_update() -> Value {
    fixture("node-update.json")["request"].clone()
}

fn migrate(vmi: &str) -> Effect {
    Effect::CreateMigration {
        vmi: ObjectRef::new("default", vmi),
        node: "node01".into(),
        cause: Some(MigrationCause::Drain),
        priority: None,
    }
}

fn annotate(namespace: &str, pod: &str, annotations: &[(&str, &str)]) -> Effect {
    let annotations: BTreeMap<String, Option<String>> =
        annotations.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
    Effect::AnnotatePod { pod: ObjectRef::new(namespace, pod), annotations }
}

#[test]
fn a_drained_node() {
    let response = evaluate(&payload(&drained_node_update(), json!({})), &context());
    assert!(response.accepted);
    assert_eq!((response.code, response.message), (None, None));
    assert_eq!(
        response.effects,
        [
            // Marked by an eviction, then one the drain taint moves: KubeVirt's 2 per node.
            migrate("web-1"),
            migrate("db-1"),
            annotate("default", "virt-launcher-web-1-7xk2p", &[(EVICTION_IN_PROGRESS_ANNOTATION, "true")]),
            // External: marked for capk, never migrated by KubeVirt, in progress all the same.
            annotate(
                "tenant",
                "virt-launcher-capk-1-m3n8v",
                &[(EVICTION_IN_PROGRESS_ANNOTATION, "true"), (REQUEST_EVICT_ONLY_ANNOTATION, "")]
            ),
        ]
    );
}

/// Beside KubeVirt's evacuation controller (the default), the node's marked VMIs are KubeVirt's
/// to migrate: the policy creates none.
#[test]
fn beside_kubevirt_nothing_is_created() {
    let settings = json!({"kubevirtEvacuationController": true});
    let response = evaluate(&payload(&drained_node_update(), settings), &context());
    assert!(response.accepted);
    assert!(
        !response.effects.iter().any(|e| matches!(e, Effect::CreateMigration { .. })),
        "{:?}",
        response.effects
    );
}

#[test]
fn a_migration_in_the_way() {
    // One more active evacuation from node01 leaves room for one.
    let context = context().with(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "kubevirt-evacuation-zz", "namespace": "default",
                     "annotations": {"kubevirt.io/evacuationMigration": "node01"}},
        "spec": {"vmiName": "gone-1"}, "status": {"phase": "Scheduling"}
    }));
    let response = evaluate(&payload(&drained_node_update(), json!({})), &context);
    let migrations: Vec<&Effect> =
        response.effects.iter().filter(|e| matches!(e, Effect::CreateMigration { .. })).collect();
    assert_eq!(migrations, [&migrate("web-1")]);
}

#[test]
fn requests_that_cannot_be_decided_are_rejected() {
    let mut pod_update = drained_node_update();
    pod_update["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    let response = evaluate(&payload(&pod_update, json!({})), &context());
    assert!(!response.accepted);
    assert_eq!(response.code, Some(400));
    assert_eq!(
        response.message.as_deref(),
        Some("this policy only evaluates Node requests, got UPDATE v1 Pod")
    );
    assert!(response.effects.is_empty());

    let response = evaluate(
        &payload(&drained_node_update(), json!({})),
        &context().failing_every_read("connection refused"),
    );
    assert_eq!(
        (response.accepted, response.code, response.message.as_deref()),
        (false, Some(500), Some("cannot read the cluster: connection refused"))
    );

    // A refusal says what to grant.
    let refused = "Policy has not been granted access to Kubernetes v1/Node resources. The violation has been reported.";
    let response =
        evaluate(&payload(&drained_node_update(), json!({})), &context().failing_every_read(refused));
    assert_eq!(
        (response.accepted, response.code, response.message.as_deref()),
        (
            false,
            Some(500),
            Some(
                "cannot read the cluster: Policy has not been granted access to Kubernetes v1/Node resources. \
                 The violation has been reported. (grant it in policies.yml: hostCapabilities kubernetes/*, \
                 and the resource in contextAwareResources)"
            )
        )
    );
}

#[test]
fn payloads_that_do_not_decode_are_errors() {
    let err = evaluate_at(b"{", &context(), NOW, &mut Trace::off()).unwrap_err();
    assert!(matches!(err, evac_policy_guest::GuestError::Request(_)), "{err:?}");
    let err = err.to_string();
    assert!(err.starts_with("cannot decode the validation request: "), "{err}");
    let unknown = payload(&drained_node_update(), json!({"maxFailures": 1}));
    let err = evaluate_at(&unknown, &context(), NOW, &mut Trace::off()).unwrap_err().to_string();
    assert!(err.contains("unknown field `maxFailures`"), "{err}");
}

#[test]
fn settings_reach_the_decision() {
    // Settings naming a KubeVirt CR that is not there: KubeVirt's defaults, no cluster-wide
    // strategy, so web-1 (no strategy of its own) stays.
    let settings = json!({"kubevirt": {"namespace": "elsewhere", "name": "kubevirt"}});
    let response = evaluate(&payload(&drained_node_update(), settings), &context());
    let migrations: Vec<&Effect> =
        response.effects.iter().filter(|e| matches!(e, Effect::CreateMigration { .. })).collect();
    assert_eq!(migrations, [&migrate("db-1")]);
}

/// Back-offs are measured against the wall clock, in seconds since the Unix epoch.
#[test]
fn the_clock_is_the_wall_clock() {
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let now = evac_policy_guest::wall_clock();
    assert!((now - wall).abs() < 60.0, "now() = {now}, the wall clock = {wall}");
}
