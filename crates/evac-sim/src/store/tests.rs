use std::sync::Arc;

use serde_json::{json, Value};

use super::*;

fn pods() -> Kind {
    Kind::new("v1", "Pod")
}

fn clock_at_start() -> Store {
    let start =
        chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
    Store::new(Arc::new(SimClock::starting_at(start)), 100)
}

fn running_pod(name: &str, node: &str, grace: Option<u64>) -> Value {
    let mut pod =
        json!({"metadata": {"name": name}, "spec": {"nodeName": node}, "status": {"phase": "Running"}});
    if let Some(grace) = grace {
        pod["spec"]["terminationGracePeriodSeconds"] = json!(grace);
    }
    pod
}

/// A pod's deletion marks: deletionTimestamp, deletionGracePeriodSeconds, terminate-at-ms.
fn deletion_marks(store: &Store, name: &str) -> (Value, Value, Value) {
    let pod = store.get(&pods(), "default", name).unwrap();
    let at = |pointer: &str| pod.pointer(pointer).cloned().unwrap_or(Value::Null);
    (
        at("/metadata/deletionTimestamp"),
        at("/metadata/deletionGracePeriodSeconds"),
        at("/metadata/annotations/sim.evac.io~1terminate-at-ms"),
    )
}

#[test]
fn graceful_deletion_marks_running_pods_with_their_grace_period() {
    let store = clock_at_start();
    store.create(&pods(), "default", running_pod("default-grace", "n1", None), false).unwrap();
    store.create(&pods(), "default", running_pod("own-grace", "n1", Some(60)), false).unwrap();
    store.create(&pods(), "default", running_pod("explicit", "n1", Some(60)), false).unwrap();
    store.clock().advance(std::time::Duration::from_millis(1_500));

    let answer = store.delete_gracefully(&pods(), "default", "default-grace", None, false).unwrap();
    assert_eq!(answer["metadata"]["deletionGracePeriodSeconds"], 30);
    assert_eq!(
        deletion_marks(&store, "default-grace"),
        (json!("2026-01-01T00:00:31Z"), json!(30), json!("31500")),
        "clock + 30 s, in whole seconds; the annotation keeps the milliseconds"
    );
    store.delete_gracefully(&pods(), "default", "own-grace", None, false).unwrap();
    assert_eq!(
        deletion_marks(&store, "own-grace"),
        (json!("2026-01-01T00:01:01Z"), json!(60), json!("61500"))
    );
    store.delete_gracefully(&pods(), "default", "explicit", Some(5), false).unwrap();
    assert_eq!(deletion_marks(&store, "explicit"), (json!("2026-01-01T00:00:06Z"), json!(5), json!("6500")));
    // The pod stays, still running, for its kubelet to remove.
    assert_eq!(store.get(&pods(), "default", "own-grace").unwrap()["status"]["phase"], "Running");
}

#[test]
fn a_second_deletion_can_shorten_the_grace_period_but_not_lengthen_it() {
    let store = clock_at_start();
    store.create(&pods(), "default", running_pod("a", "n1", Some(60)), false).unwrap();
    store.delete_gracefully(&pods(), "default", "a", None, false).unwrap();
    let first = deletion_marks(&store, "a");
    store.clock().advance(std::time::Duration::from_secs(2));

    let revision = store.revision();
    store.delete_gracefully(&pods(), "default", "a", Some(100), false).unwrap();
    store.delete_gracefully(&pods(), "default", "a", None, false).unwrap();
    store.delete_gracefully(&pods(), "default", "a", Some(58), false).unwrap();
    assert_eq!(
        deletion_marks(&store, "a"),
        first,
        "62 s and 60 s from now are later than the first deadline"
    );
    assert_eq!(store.revision(), revision);

    store.delete_gracefully(&pods(), "default", "a", Some(10), false).unwrap();
    assert_eq!(deletion_marks(&store, "a"), (json!("2026-01-01T00:00:12Z"), json!(10), json!("12000")));
}

#[test]
fn some_deletions_are_immediate() {
    let store = clock_at_start();
    store.create(&pods(), "default", running_pod("grace-0", "n1", None), false).unwrap();
    store.create(&pods(), "default", running_pod("own-grace-0", "n1", Some(0)), false).unwrap();
    store.create(&pods(), "default", running_pod("unbound", "", None), false).unwrap();
    let mut failed = running_pod("failed", "n1", None);
    failed["status"]["phase"] = json!("Failed");
    store.create(&pods(), "default", failed, false).unwrap();
    let mut succeeded = running_pod("succeeded", "n1", None);
    succeeded["status"]["phase"] = json!("Succeeded");
    store.create(&pods(), "default", succeeded, false).unwrap();
    let vmis = Kind::new("kubevirt.io/v1", "VirtualMachineInstance");
    store.create(&vmis, "default", running_pod("vm", "n1", Some(30)), false).unwrap();

    store.delete_gracefully(&pods(), "default", "grace-0", Some(0), false).unwrap();
    for name in ["own-grace-0", "unbound", "failed", "succeeded"] {
        store.delete_gracefully(&pods(), "default", name, None, false).unwrap();
    }
    // A VMI that stopped goes at once; one that runs is only marked, its finalizer holding it.
    let mut stopped = running_pod("stopped", "n1", Some(30));
    stopped["status"]["phase"] = json!("Succeeded");
    store.create(&vmis, "default", stopped, false).unwrap();
    store.delete_gracefully(&vmis, "default", "stopped", None, false).unwrap();
    assert_eq!(store.get(&vmis, "default", "stopped").unwrap_err().code, 404);
    store.delete_gracefully(&vmis, "default", "vm", None, false).unwrap();
    let marked = store.get(&vmis, "default", "vm").unwrap();
    assert!(marked.pointer("/metadata/deletionTimestamp").is_some(), "{marked}");
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 30);
    store.delete_gracefully(&vmis, "default", "vm", Some(0), false).unwrap();
    assert_eq!(store.get(&vmis, "default", "vm").unwrap_err().code, 404);
    assert!(store.list(&pods(), None, None, None).0.is_empty());
    assert_eq!(store.delete_gracefully(&pods(), "default", "gone", None, false).unwrap_err().code, 404);
}

#[test]
fn dry_run_graceful_deletions_change_nothing() {
    let store = clock_at_start();
    store.create(&pods(), "default", running_pod("a", "n1", None), false).unwrap();
    store.create(&pods(), "default", running_pod("unbound", "", None), false).unwrap();
    let revision = store.revision();
    let answer = store.delete_gracefully(&pods(), "default", "a", None, true).unwrap();
    assert_eq!(answer["metadata"]["deletionGracePeriodSeconds"], 30, "the answer is what would be");
    store.delete_gracefully(&pods(), "default", "a", Some(0), true).unwrap();
    store.delete_gracefully(&pods(), "default", "unbound", None, true).unwrap();
    assert_eq!(store.revision(), revision);
    assert_eq!(deletion_marks(&store, "a"), (Value::Null, Value::Null, Value::Null));
    assert!(store.get(&pods(), "default", "unbound").is_ok());
}
