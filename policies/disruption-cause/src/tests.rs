//! The policy's glue on the fixtures of `test_data/`: a context `List` served as a cluster, the
//! AdmissionReviews decided through [`evaluate_at`], and its answers to what it cannot decide.

use evac_core::effect::EvacuationSource;
use evac_core::{Effect, ObjectRef};
use evac_policy_guest::wall_clock as now;
use evac_testkit::TestCluster;
use serde_json::{json, Value};

use super::*;

fn fixture(name: &str) -> Value {
    evac_testkit::test_data(env!("CARGO_MANIFEST_DIR"), name)
}

/// The objects of `context.json`.
fn context() -> TestCluster {
    TestCluster::new(fixture("context.json")["items"].as_array().unwrap().iter().cloned())
}

/// The ValidationRequest Kubewarden passes for a review fixture.
fn payload(review: &Value, settings: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"settings": settings, "request": review["request"]})).unwrap()
}

fn evaluate_review(review: &Value, cluster: &TestCluster) -> PolicyResponse {
    evaluate_with(review, json!({}), cluster)
}

/// The review decided with these settings.
fn evaluate_with(review: &Value, settings: Value, cluster: &TestCluster) -> PolicyResponse {
    let answer =
        evaluate_at(&payload(review, settings), cluster, now(), &mut Trace::off()).expect("an answer");
    serde_json::from_slice(&answer).expect("a PolicyResponse")
}

/// With KubeVirt's evacuation controller running (the default), evac holds the evacuation as a
/// request for the evacuation policy to mark in its order.
fn mark(vmi: &str, source: EvacuationSource) -> Effect {
    Effect::RequestEvacuation { vmi: ObjectRef::new("default", vmi), node: "node01".into(), source }
}

fn cause(value: &str) -> Option<std::collections::BTreeMap<String, String>> {
    Some([("evac.kubevirt.io/disruption-cause".to_owned(), value.to_owned())].into())
}

/// A launcher pod's disruption: its cause and how it was handled.
fn handled(value: &str, handling: &str) -> Option<std::collections::BTreeMap<String, String>> {
    let mut annotations = cause(value).unwrap();
    annotations.insert("evac.kubevirt.io/disruption-handling".to_owned(), handling.to_owned());
    Some(annotations)
}

#[test]
fn a_preempted_launcher_pod_marks_its_vm() {
    let response = evaluate_review(&fixture("preempted-launcher-update.json"), &context());
    assert!(response.accepted, "{response:?}");
    assert_eq!((response.code, response.message.as_deref()), (None, None));
    assert_eq!(response.effects, [mark("web-1", EvacuationSource::Preemption)]);
    assert_eq!(response.audit_annotations, handled("preemption", "evacuating"));

    // Without it, the VMI is marked at once.
    let settings = json!({"kubevirtEvacuationController": false});
    let response = evaluate_with(&fixture("preempted-launcher-update.json"), settings, &context());
    let marked = Effect::MarkForEvacuation {
        vmi: ObjectRef::new("default", "web-1"),
        node: "node01".into(),
        dry_run: false,
        source: Some(EvacuationSource::Preemption),
    };
    assert_eq!(response.effects, [marked]);
}

#[test]
fn a_node_short_of_memory_marks_the_fewest_vms() {
    // 3Gi available, 3500Mi + 1Gi wanted: db-1 (2Gi) covers the 1452Mi, web-1 (4Gi) is not
    // needed, gpu-1 may not migrate.
    let response = evaluate_review(&fixture("node-pressure-update.json"), &context());
    assert!(response.accepted, "{response:?}");
    assert_eq!(response.effects, [mark("db-1", EvacuationSource::NodePressure)]);
    assert_eq!(response.audit_annotations, cause("node-pressure"));

    // A lower threshold in the settings: 3Gi is plenty.
    let settings = json!({"nodePressure": {"threshold": "2Gi", "headroom": "512Mi"}});
    let response = evaluate_with(&fixture("node-pressure-update.json"), settings, &context());
    assert_eq!((response.accepted, response.effects.len(), response.audit_annotations), (true, 0, None));
}

#[test]
fn a_gate_that_is_off_marks_nothing() {
    let mut context = context();
    let kubevirt = context.objects_mut().iter_mut().find(|o| o["kind"] == "KubeVirt").unwrap();
    kubevirt["spec"]["configuration"]["developerConfiguration"]["featureGates"] =
        json!(["NodePressureEvictionLiveMigration"]);
    let response = evaluate_review(&fixture("preempted-launcher-update.json"), &context);
    assert!(response.accepted, "{response:?}");
    // Nothing marked or asked for: a Warning event on the VMI says the preemption is KubeVirt's.
    match response.effects.as_slice() {
        [Effect::RecordEvent { vmi, reason, message, .. }] => {
            assert_eq!((vmi.name.as_str(), reason.as_str()), ("web-1", "DisruptionLeftToKubeVirt"));
            assert!(message.contains("feature gate PreemptionEvictionLiveMigration is off"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(response.audit_annotations, handled("preemption", "gate-off"));
}

#[test]
fn requests_it_cannot_decide_are_rejected_with_the_reason() {
    let mut deployment = fixture("preempted-launcher-update.json");
    deployment["request"]["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    deployment["request"]["operation"] = json!("CREATE");
    let response = evaluate_review(&deployment, &context());
    assert!(!response.accepted);
    assert_eq!(response.code, Some(400));
    assert_eq!(
        response.message.as_deref(),
        Some(
            "disruption-cause evaluates Pod UPDATE/DELETE, Node CREATE/UPDATE and pods/hold CONNECT requests, not apps/v1 Deployment CREATE"
        )
    );

    let context = context().failing("VirtualMachineInstance", "the API server is unreachable");
    let response = evaluate_review(&fixture("preempted-launcher-update.json"), &context);
    // A failed read never blocks the request: allowed, with the failure as a warning.
    assert_eq!((response.accepted, response.code), (true, None));
    assert_eq!(
        response.warnings,
        Some(vec!["disruption-cause could not decide: the API server is unreachable".to_owned()])
    );
    assert!(response.effects.is_empty());
}

#[test]
fn a_payload_that_does_not_decode_is_an_error() {
    let error = evaluate_at(b"{\"request\": 7}", &context(), now(), &mut Trace::off()).unwrap_err();
    assert!(matches!(error, evac_policy_guest::GuestError::Request(_)), "{error:?}");
    assert!(error.to_string().starts_with("cannot decode the validation request"), "{error}");
}

#[test]
fn other_pods_get_kubewardens_plain_answer() {
    let mut review = fixture("preempted-launcher-update.json");
    review["request"]["object"]["metadata"]["labels"] = json!({"app": "nginx"});
    let answer = evaluate_at(&payload(&review, Value::Null), &context(), now(), &mut Trace::off()).unwrap();
    let json: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        json,
        json!({"accepted": true, "message": null, "code": null, "warnings": null,
               "audit_annotations": null, "mutated_object": null, "effects": []})
    );
}
