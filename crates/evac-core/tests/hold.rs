//! The hold decision natively: every row of its table, and what the launcher-hold mutation adds
//! to a launcher pod.

use serde_json::{json, Value};

use evac_core::hold::mutation::{Mutation, HOLD_SKIPPED_ANNOTATION};
use evac_core::hold::*;
use evac_core::model::{AdmissionRequest, Pod};
use evac_testkit::{check_cases, disruption_answer, hold_cases, TestCluster};

/// Every row of the hold table, natively.
#[test]
fn every_row_of_the_hold_table() {
    let cases = hold_cases();
    check_cases("hold", &cases, |case| disruption_answer(case, &TestCluster::for_case(case)));
}

/// A launcher pod as virt-controller creates it (no name yet: `generateName`).
fn launcher_create(containers: Value) -> Value {
    json!({
        "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default", "operation": "CREATE",
        "object": {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "virt-launcher-web-1-", "namespace": "default",
                         "labels": {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": "uid-1"},
                         "annotations": {"kubevirt.io/domain": "web-1"}},
            "spec": {"terminationGracePeriodSeconds": 60, "containers": containers},
        },
    })
}

fn mutate_json(request: &Value, settings: &LauncherHoldSettings) -> Mutation {
    let text = request.to_string();
    let request: AdmissionRequest<'_> = serde_json::from_str(&text).unwrap();
    mutate(&request, settings).unwrap()
}

#[test]
fn a_launcher_pod_gets_the_hook_on_every_container_and_a_longer_grace() {
    let containers = json!([
        {"name": "compute", "image": "virt-launcher"},
        {"name": "volumecontainerdisk", "image": "disk"},
        {"name": "hook-sidecar-0", "image": "hook", "lifecycle": {"preStop": {"exec": {"command": ["x"]}}}},
    ]);
    let Mutation::Mutated(pod) = mutate_json(&launcher_create(containers), &LauncherHoldSettings::default())
    else {
        panic!("a launcher pod is mutated")
    };
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 360);
    assert_eq!(
        pod["spec"]["containers"][0]["lifecycle"]["preStop"],
        json!({"httpGet": {"host": "127.0.0.1", "port": 9190, "path": "/hold/default/web-1/compute", "scheme": "HTTP"}})
    );
    assert_eq!(
        pod["spec"]["containers"][1]["lifecycle"]["preStop"]["httpGet"]["path"],
        "/hold/default/web-1/volumecontainerdisk"
    );
    assert_eq!(pod["spec"]["containers"][2]["lifecycle"]["preStop"], json!({"exec": {"command": ["x"]}}));
    assert_eq!(pod["metadata"]["annotations"][HOLD_WINDOW_ANNOTATION], "300");
    assert_eq!(pod["metadata"]["annotations"][HOLD_SKIPPED_ANNOTATION], "hook-sidecar-0");
    assert_eq!(pod["metadata"]["annotations"]["kubevirt.io/domain"], "web-1", "the rest is kept");

    // Mutating the mutated pod again changes nothing (a webhook may be called twice).
    let mut again = launcher_create(json!([]));
    again["object"] = pod;
    assert_eq!(
        mutate_json(&again, &LauncherHoldSettings::default()),
        Mutation::Unchanged("the pod is held already")
    );
}

#[test]
fn the_window_and_port_come_from_the_settings_and_a_missing_grace_is_kubernetes_default() {
    let mut request = launcher_create(json!([{"name": "compute"}]));
    request["object"]["spec"].as_object_mut().unwrap().remove("terminationGracePeriodSeconds");
    let settings = LauncherHoldSettings { window_seconds: 600, port: 10190 };
    let Mutation::Mutated(pod) = mutate_json(&request, &settings) else { panic!("mutated") };
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 630);
    assert_eq!(pod["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["port"], 10190);
    assert_eq!(pod["metadata"]["annotations"][HOLD_WINDOW_ANNOTATION], "600");
}

#[test]
fn other_requests_are_left_unchanged() {
    let settings = LauncherHoldSettings::default();
    let mut plain = launcher_create(json!([{"name": "nginx"}]));
    plain["object"]["metadata"]["labels"] = json!({"app": "nginx"});
    assert_eq!(mutate_json(&plain, &settings), Mutation::Unchanged("not a virt-launcher pod"));
    let mut update = launcher_create(json!([{"name": "compute"}]));
    update["operation"] = json!("UPDATE");
    assert_eq!(mutate_json(&update, &settings), Mutation::Unchanged("not a pod creation"));
    let mut node = launcher_create(json!([]));
    node["kind"] = json!({"group": "", "version": "v1", "kind": "Node"});
    assert_eq!(mutate_json(&node, &settings), Mutation::Unchanged("not a pod creation"));
    let mut nameless = launcher_create(json!([{"name": "compute"}]));
    nameless["object"]["metadata"]["annotations"] = json!({});
    assert_eq!(mutate_json(&nameless, &settings), Mutation::Unchanged("the launcher pod names no VMI"));
    let mut empty = launcher_create(json!([]));
    empty["object"] = Value::Null;
    assert_eq!(mutate_json(&empty, &settings), Mutation::Unchanged("the request carries no pod"));
    let mut broken = launcher_create(json!([]));
    broken["object"] = json!({"metadata": {"labels": "not a map"}});
    let text = broken.to_string();
    let request: AdmissionRequest<'_> = serde_json::from_str(&text).unwrap();
    assert_eq!(mutate(&request, &settings).unwrap(), Mutation::Unchanged("not a virt-launcher pod"));
}

#[test]
fn settings_are_checked() {
    assert!(LauncherHoldSettings::default().validate().is_ok());
    let zero = LauncherHoldSettings { window_seconds: 0, ..Default::default() };
    assert_eq!(zero.validate().unwrap_err(), "windowSeconds must be between 1 and 86400, got 0");
    let port = LauncherHoldSettings { port: 0, ..Default::default() };
    assert_eq!(port.validate().unwrap_err(), "port must not be 0");
    let unknown = serde_json::from_value::<LauncherHoldSettings>(json!({"window": 3}));
    assert!(unknown.unwrap_err().to_string().contains("unknown field `window`"));
}

#[test]
fn hook_paths_name_the_vmi_and_container() {
    assert_eq!(hook_path("default", "web-1", "compute"), "/hold/default/web-1/compute");
    assert_eq!(parse_hook_path("/hold/default/web-1/compute"), Some(("default", "web-1", "compute")));
    assert_eq!(parse_hook_path("/hold/ns/vm.with.dots/c?x=1"), Some(("ns", "vm.with.dots", "c")));
    for bad in [
        "/hold/default/web-1",
        "/hold/a/b/c/d",
        "/other/a/b/c",
        "/hold//b/c",
        "/hold/a/b%2F/c",
        "/hold/../b/c/",
    ] {
        assert_eq!(parse_hook_path(bad), None, "{bad}");
    }
}

fn pod(value: Value) -> String {
    value.to_string()
}

fn deadline_of(text: &str, virt_handler: VirtHandler) -> f64 {
    let pod: Pod<'_> = serde_json::from_str(text).unwrap();
    termination_deadline(&pod, virt_handler)
}

/// Deleted at 09:40:00 (t = 1795253880 - 360 = ...): the deadlines a stock and a proposal
/// virt-handler give, with and without the hold.
#[test]
fn deadlines_follow_sigterm_under_a_stock_virt_handler() {
    let end = "2026-11-21T09:46:00Z"; // deletion at 09:40:00 with a 360 s grace
    let end_s = evac_core::model::time::unix_seconds(end).unwrap();
    let started = end_s - 360.0;
    let held = pod(json!({"metadata": {"deletionTimestamp": end, "deletionGracePeriodSeconds": 360,
                                       "annotations": {HOLD_WINDOW_ANNOTATION: "300"}}}));
    assert_eq!(deadline_of(&held, VirtHandler::Stock), started + 300.0);
    assert_eq!(deadline_of(&held, VirtHandler::Proposal), end_s);
    // Deleted with a shorter grace than the window: the kubelet ends the hook at the grace.
    let short = pod(json!({"metadata": {"deletionTimestamp": end, "deletionGracePeriodSeconds": 30,
                                        "annotations": {HOLD_WINDOW_ANNOTATION: "300"}}}));
    assert_eq!(deadline_of(&short, VirtHandler::Stock), end_s);
    let bare = pod(json!({"metadata": {"deletionTimestamp": end, "deletionGracePeriodSeconds": 60}}));
    assert_eq!(deadline_of(&bare, VirtHandler::Stock), end_s - 60.0, "SIGTERM comes at once");
    assert_eq!(deadline_of(&bare, VirtHandler::Proposal), end_s);
    // A hold's recorded deadline wins under stock; under the proposal the later of the two.
    let recorded =
        pod(json!({"metadata": {"annotations": {HOLD_DEADLINE_ANNOTATION: "2026-11-21T09:45:00Z"}}}));
    assert_eq!(deadline_of(&recorded, VirtHandler::Stock), end_s - 60.0);
    assert_eq!(deadline_of(&pod(json!({})), VirtHandler::Stock), f64::INFINITY);
    assert_eq!(deadline_of(&pod(json!({})), VirtHandler::Proposal), f64::INFINITY);
}
