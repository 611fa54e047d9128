use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::SimClock;

fn store() -> Store {
    Store::new(Arc::new(SimClock::default()), 10_000)
}

/// A running VMI on `node`, marked for evacuation from `marked` ("" for none).
fn vmi(store: &Store, name: &str, node: &str, marked: &str) {
    let mut status = json!({"nodeName": node, "phase": "Running"});
    if !marked.is_empty() {
        status["evacuationNodeName"] = json!(marked);
    }
    let vmi = json!({"metadata": {"name": name}, "status": status});
    store.create(&vmis(), "default", vmi, false).unwrap();
}

fn all_migrations(store: &Store) -> Vec<Arc<Value>> {
    store.list(&migrations(), None, None, None).0
}

fn is_active(migration: &Value) -> bool {
    !matches!(text(migration, "/status/phase"), "Succeeded" | "Failed")
}

/// The VMIs of the active migrations.
fn active_vmis(store: &Store) -> BTreeSet<String> {
    all_migrations(store)
        .iter()
        .filter(|m| is_active(m))
        .map(|m| text(m, "/spec/vmiName").to_owned())
        .collect()
}

fn set_migration_phase(store: &Store, name: &str, phase: &str) {
    let status = json!({"status": {"phase": phase,
                                   "migrationState": {"endTimestamp": store.clock().timestamp()}}});
    store.patch(&migrations(), "default", name, &Patch::Merge(status), false).unwrap();
}

fn migration_of(store: &Store, vmi: &str) -> String {
    let all = all_migrations(store);
    let found = all.iter().find(|m| is_active(m) && text(m, "/spec/vmiName") == vmi).expect("a migration");
    text(found, "/metadata/name").to_owned()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn marked_vmis_get_a_migration_each_within_the_parallel_limits() {
    let store = store();
    for name in ["a0", "a1", "a2"] {
        vmi(&store, name, "n1", "n1");
    }
    for name in ["b0", "b1"] {
        vmi(&store, name, "n2", "n2");
    }
    vmi(&store, "unmarked", "n1", "");
    vmi(&store, "moved", "n3", "n1");
    // Marked, but not running (yet): no migration.
    let scheduling = json!({"metadata": {"name": "scheduling"},
                            "status": {"nodeName": "n1", "evacuationNodeName": "n1", "phase": "Scheduled"}});
    store.create(&vmis(), "default", scheduling, false).unwrap();

    let controller =
        VirtController { parallel_per_cluster: 3, parallel_outbound_per_node: 2, evacuation: true };
    assert_eq!(controller.reconcile(&store).unwrap(), None);
    assert_eq!(active_vmis(&store), set(&["a0", "a1", "b0"]), "2 from n1 at most, 3 in all");
    let all = all_migrations(&store);
    assert_eq!(all.len(), 3);
    for migration in &all {
        assert!(text(migration, "/metadata/name").starts_with("kubevirt-evacuation-"));
        let node = if text(migration, "/spec/vmiName").starts_with('a') { "n1" } else { "n2" };
        assert_eq!(annotation(migration, EVACUATION_MIGRATION_ANNOTATION), node);
        assert_eq!(text(migration, "/metadata/namespace"), "default");
    }

    // Nothing more while they run.
    controller.reconcile(&store).unwrap();
    assert_eq!(all_migrations(&store).len(), 3);

    // One succeeds (its VMI left n1): a2 gets its turn, b1 still waits for the cluster limit.
    set_migration_phase(&store, &migration_of(&store, "a0"), "Succeeded");
    store
        .patch(&vmis(), "default", "a0", &Patch::Merge(json!({"status": {"nodeName": "n4"}})), false)
        .unwrap();
    controller.reconcile(&store).unwrap();
    assert_eq!(active_vmis(&store), set(&["a1", "a2", "b0"]));
    assert_eq!(all_migrations(&store).len(), 4);
}

#[test]
fn no_second_migration_while_one_is_active() {
    let store = store();
    vmi(&store, "vm", "n1", "n1");
    let controller = VirtController::default();
    controller.reconcile(&store).unwrap();
    controller.reconcile(&store).unwrap();
    assert_eq!(all_migrations(&store).len(), 1);
    for phase in ["Scheduling", "Running"] {
        set_migration_phase(&store, &migration_of(&store, "vm"), phase);
        controller.reconcile(&store).unwrap();
        assert_eq!(all_migrations(&store).len(), 1, "{phase}");
    }
}

#[test]
fn after_a_failed_migration_the_next_waits_twenty_seconds() {
    let store = store();
    vmi(&store, "vm", "n1", "n1");
    let controller = VirtController::default();
    controller.reconcile(&store).unwrap();
    store.clock().advance(Duration::from_secs(7));
    set_migration_phase(&store, &migration_of(&store, "vm"), "Failed");
    let failed_at = Duration::from_secs(7);

    assert_eq!(controller.reconcile(&store).unwrap(), Some(failed_at + Duration::from_secs(20)));
    assert_eq!(all_migrations(&store).len(), 1);
    store.clock().advance(Duration::from_secs(19));
    assert_eq!(controller.reconcile(&store).unwrap(), Some(failed_at + Duration::from_secs(20)));
    assert_eq!(all_migrations(&store).len(), 1, "not before 20 s");

    store.clock().advance(Duration::from_secs(1));
    controller.reconcile(&store).unwrap();
    assert_eq!(all_migrations(&store).len(), 2);
    assert_eq!(active_vmis(&store), set(&["vm"]));
}

#[test]
fn without_the_evacuation_controller_no_migrations() {
    let store = store();
    vmi(&store, "vm", "n1", "n1");
    let controller = VirtController { evacuation: false, ..VirtController::default() };
    assert_eq!(controller.reconcile(&store).unwrap(), None);
    assert!(all_migrations(&store).is_empty());
}

fn failed_vmi(store: &Store, name: &str, run_strategy: Option<&str>) {
    let mut vmi = json!({"metadata": {"name": name},
                         "status": {"nodeName": "n1", "phase": "Failed", "reason": "PodDeleted"}});
    if let Some(strategy) = run_strategy {
        vmi["metadata"]["annotations"] = json!({RUN_STRATEGY_ANNOTATION: strategy});
    }
    store.create(&vmis(), "default", vmi, false).unwrap();
}

fn get_vmi(store: &Store, name: &str) -> Arc<Value> {
    store.get(&vmis(), "default", name).unwrap()
}

#[test]
fn always_vms_restart_in_a_new_launcher_pod() {
    let store = store();
    failed_vmi(&store, "vm", Some("Always"));
    let controller = VirtController::default();
    controller.reconcile(&store).unwrap();
    let vmi = get_vmi(&store, "vm");
    assert_eq!(text(&vmi, "/status/phase"), "Scheduling");
    assert_eq!(annotation(&vmi, RESTARTS_ANNOTATION), "1");
    assert_eq!(vmi.pointer("/status/nodeName"), None);
    let (launchers, _) = store.list(&pods(), None, None, None);
    assert_eq!(launchers.len(), 1);
    let pod = &launchers[0];
    let name = text(pod, "/metadata/name").to_owned();
    assert!(name.starts_with("virt-launcher-vm-"), "{name}");
    assert_eq!(annotation(pod, "kubevirt.io/domain"), "vm");
    assert_eq!(text(pod, "/status/phase"), "Pending");
    assert_eq!(text(pod, "/spec/nodeName"), "");

    // Not running until its pod is bound and running; no second pod meanwhile.
    controller.reconcile(&store).unwrap();
    store
        .patch(&pods(), "default", &name, &Patch::Merge(json!({"spec": {"nodeName": "n2"}})), false)
        .unwrap();
    controller.reconcile(&store).unwrap();
    assert_eq!(text(&get_vmi(&store, "vm"), "/status/phase"), "Scheduling");
    assert_eq!(store.list(&pods(), None, None, None).0.len(), 1);

    store
        .patch(&pods(), "default", &name, &Patch::Merge(json!({"status": {"phase": "Running"}})), false)
        .unwrap();
    controller.reconcile(&store).unwrap();
    let vmi = get_vmi(&store, "vm");
    assert_eq!(text(&vmi, "/status/phase"), "Running");
    assert_eq!(text(&vmi, "/status/nodeName"), "n2");
    assert_eq!(annotation(&vmi, RESTARTS_ANNOTATION), "1");
    assert_eq!(store.list(&pods(), None, None, None).0.len(), 1);
}

#[test]
fn failed_vms_without_the_always_strategy_stay_down() {
    let store = store();
    failed_vmi(&store, "plain", None);
    failed_vmi(&store, "manual", Some("Manual"));
    let controller = VirtController::default();
    controller.reconcile(&store).unwrap();
    for name in ["plain", "manual"] {
        let vmi = get_vmi(&store, name);
        assert_eq!(text(&vmi, "/status/phase"), "Failed");
        assert_eq!(annotation(&vmi, RESTARTS_ANNOTATION), "");
    }
    assert!(store.list(&pods(), None, None, None).0.is_empty());
}

#[test]
fn only_running_vmis_still_on_the_marked_node_are_evacuated() {
    let store = store();
    vmi(&store, "unmarked", "n1", "");
    vmi(&store, "moved", "n3", "n1");
    let scheduling = json!({"metadata": {"name": "scheduling"},
                            "status": {"nodeName": "n1", "evacuationNodeName": "n1", "phase": "Scheduled"}});
    store.create(&vmis(), "default", scheduling, false).unwrap();
    VirtController::default().reconcile(&store).unwrap();
    assert!(all_migrations(&store).is_empty());
    vmi(&store, "marked", "n1", "n1");
    VirtController::default().reconcile(&store).unwrap();
    assert_eq!(active_vmis(&store), set(&["marked"]));
}
