//! The policy's glue, natively: the fixtures of `test_data/` (a drained node's UPDATE, a cluster
//! as a `v1 List`) through `evaluate_at`.

use std::collections::BTreeMap;

use evac_core::cluster::{GetResource, ListResourcesAll};
use evac_core::effect::{
    MigrationCause, MigrationPriority, EVICTION_IN_PROGRESS_ANNOTATION, REQUEST_EVICT_ONLY_ANNOTATION,
};
use evac_core::{ClusterReader, Effect, ObjectRef, PolicyResponse, ReadError};
use serde_json::{json, Value};

use super::evaluate_at;

/// 2026-11-21T10:00:00Z, twenty minutes into the drain of the fixtures.
const NOW: f64 = 1_795_255_200.0;

fn fixture(name: &str) -> Value {
    let path = format!("{}/test_data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The objects of `test_data/context.json`; lists honour `k=v` label and `a.b=v` field selectors.
struct Context(Vec<Value>);

impl Context {
    fn load() -> Self {
        Self(fixture("context.json")["items"].as_array().unwrap().clone())
    }
}

fn matches(object: &Value, selector: Option<&str>, field: bool) -> bool {
    selector.is_none_or(|selector| {
        selector.split(',').all(|term| {
            let (key, value) = term.split_once('=').unwrap();
            let found = if field {
                object.pointer(&format!("/{}", key.replace('.', "/")))
            } else {
                object["metadata"]["labels"].get(key)
            };
            found.is_some_and(|v| v == value)
        })
    })
}

impl ClusterReader for Context {
    fn get_resource(&self, r: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        Err(ReadError::not_found(&r.api_version, &r.kind, &r.name))
    }

    fn list_resources_all(&self, r: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        let items: Vec<&Value> = self
            .0
            .iter()
            .filter(|o| o["kind"] == r.kind.as_str())
            .filter(|o| matches(o, r.label_selector.as_deref(), false))
            .filter(|o| matches(o, r.field_selector.as_deref(), true))
            .collect();
        Ok(serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap())
    }
}

/// A cluster whose reads all fail.
struct Unreachable;

impl ClusterReader for Unreachable {
    fn get_resource(&self, _: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        Err(ReadError::other("connection refused"))
    }

    fn list_resources_all(&self, _: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        Err(ReadError::other("connection refused"))
    }
}

fn payload(request: &Value, settings: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"settings": settings, "request": request})).unwrap()
}

fn evaluate(payload: &[u8], cluster: &impl ClusterReader) -> PolicyResponse {
    serde_json::from_slice(&evaluate_at(payload, cluster, NOW).expect("a decodable payload")).unwrap()
}

fn drained_node_update() -> Value {
    fixture("node-update.json")["request"].clone()
}

fn migrate(vmi: &str) -> Effect {
    Effect::CreateMigration {
        vmi: ObjectRef::new("default", vmi),
        node: "node01".into(),
        cause: Some(MigrationCause::Drain),
        priority: MigrationPriority::SystemCritical,
    }
}

fn annotate(namespace: &str, pod: &str, annotations: &[(&str, &str)]) -> Effect {
    let annotations: BTreeMap<String, Option<String>> =
        annotations.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect();
    Effect::AnnotatePod { pod: ObjectRef::new(namespace, pod), annotations }
}

#[test]
fn a_drained_node() {
    let response = evaluate(&payload(&drained_node_update(), json!({})), &Context::load());
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

#[test]
fn a_migration_in_the_way() {
    // One more active evacuation from node01 leaves room for one.
    let mut context = Context::load();
    context.0.push(json!({
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
    let response = evaluate(&payload(&pod_update, json!({})), &Context::load());
    assert!(!response.accepted);
    assert_eq!(response.code, Some(400));
    assert_eq!(
        response.message.as_deref(),
        Some("this policy only evaluates Node requests, got UPDATE v1 Pod")
    );
    assert!(response.effects.is_empty());

    let response = evaluate(&payload(&drained_node_update(), json!({})), &Unreachable);
    assert_eq!(
        (response.accepted, response.code, response.message.as_deref()),
        (false, Some(500), Some("cannot read the cluster: connection refused"))
    );
}

#[test]
fn payloads_that_do_not_decode_are_errors() {
    let err = evaluate_at(b"{", &Context::load(), NOW).unwrap_err();
    assert!(err.starts_with("cannot decode the validation request: "), "{err}");
    let unknown = payload(&drained_node_update(), json!({"maxFailures": 1}));
    let err = evaluate_at(&unknown, &Context::load(), NOW).unwrap_err();
    assert!(err.contains("unknown field `maxFailures`"), "{err}");
}

#[test]
fn settings_reach_the_decision() {
    // Settings naming a KubeVirt CR that is not there: KubeVirt's defaults, no cluster-wide
    // strategy, so web-1 (no strategy of its own) stays.
    let settings = json!({"kubevirt": {"namespace": "elsewhere", "name": "kubevirt"}});
    let response = evaluate(&payload(&drained_node_update(), settings), &Context::load());
    let migrations: Vec<&Effect> =
        response.effects.iter().filter(|e| matches!(e, Effect::CreateMigration { .. })).collect();
    assert_eq!(migrations, [&migrate("db-1")]);
}

/// Back-offs are measured against the wall clock, in seconds since the Unix epoch.
#[test]
fn the_clock_is_the_wall_clock() {
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let now = super::now();
    assert!((now - wall).abs() < 60.0, "now() = {now}, the wall clock = {wall}");
}
