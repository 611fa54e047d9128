use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::actors::{annotation, text};
use crate::SimClock;

fn store() -> Store {
    let store = Store::new(Arc::new(SimClock::default()), 10_000);
    for node in ["n1", "n2", "n3", "n4"] {
        store.create(&nodes(), "", json!({"metadata": {"name": node}}), false).unwrap();
    }
    store
}

/// A running, live-migratable `LiveMigrate` VMI on `node` with its launcher pod, marked for
/// evacuation from `marked` ("" for none).
fn vmi(store: &Store, name: &str, node: &str, marked: &str) {
    vmi_with(store, name, node, marked, "LiveMigrate", "Running");
}

fn vmi_with(store: &Store, name: &str, node: &str, marked: &str, strategy: &str, phase: &str) {
    let mut status = json!({"nodeName": node, "phase": phase,
                            "conditions": [{"type": "LiveMigratable", "status": "True"}]});
    if !marked.is_empty() {
        status["evacuationNodeName"] = json!(marked);
    }
    let vmi = json!({"metadata": {"name": name, "labels": {"kubevirt.io/nodeName": node}},
                     "spec": {"evictionStrategy": strategy}, "status": status});
    store.create(&vmis(), "default", vmi, false).unwrap();
    let pod = json!({"metadata": {"name": format!("virt-launcher-{name}-abcde"),
                                  "labels": {"kubevirt.io": "virt-launcher"},
                                  "annotations": {"kubevirt.io/domain": name,
                                                  "descheduler.alpha.kubernetes.io/request-evict-only": ""}},
                     "spec": {"nodeName": node}, "status": {"phase": "Running"}});
    store.create(&pods(), "default", pod, false).unwrap();
}

fn all_migrations(store: &Store) -> Vec<Arc<Value>> {
    store.list(&crate::kinds::migrations(), None, None, None).0
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
    store.patch(&crate::kinds::migrations(), "default", name, &Patch::Merge(status), false).unwrap();
}

fn migration_of(store: &Store, vmi: &str) -> String {
    let all = all_migrations(store);
    let found = all.iter().find(|m| is_active(m) && text(m, "/spec/vmiName") == vmi).expect("a migration");
    text(found, "/metadata/name").to_owned()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn in_progress(store: &Store, vmi: &str) -> bool {
    let (pods, _) = store.list(&pods(), Some("default"), None, None);
    let pod = pods.iter().find(|p| annotation(p, "kubevirt.io/domain") == vmi).expect("a launcher pod");
    annotation(pod, "descheduler.alpha.kubernetes.io/eviction-in-progress") == "true"
}

#[test]
fn every_marked_vmi_gets_a_migration_at_once() {
    // KubeVirt 1.9 creates a migration per candidate; its migration controller holds them for
    // the parallel limits.
    let store = store();
    for name in ["a0", "a1", "a2"] {
        vmi(&store, name, "n1", "n1");
    }
    for name in ["b0", "b1"] {
        vmi(&store, name, "n2", "n2");
    }
    vmi(&store, "unmarked", "n1", "");
    vmi(&store, "moved", "n3", "n1");

    let controller = VirtController::default();
    assert_eq!(controller.reconcile(&store).unwrap(), None);
    assert_eq!(active_vmis(&store), set(&["a0", "a1", "a2", "b0", "b1"]));
    for migration in &all_migrations(&store) {
        assert!(text(migration, "/metadata/name").starts_with("kubevirt-evacuation-"));
        let node = if text(migration, "/spec/vmiName").starts_with('a') { "n1" } else { "n2" };
        assert_eq!(annotation(migration, evac_core::kubevirt::EVACUATION_MIGRATION_ANNOTATION), node);
        assert_eq!(
            annotation(migration, evac_core::kubevirt::CAUSE_ANNOTATION),
            "",
            "KubeVirt records no cause"
        );
        assert_eq!(text(migration, "/spec/priority"), "system-critical");
        assert_eq!(text(migration, "/metadata/namespace"), "default");
    }
    // The VMI controller's part: the marked VMIs' pods are being evicted in the background.
    assert!(in_progress(&store, "a0") && in_progress(&store, "b1"));
    assert!(!in_progress(&store, "unmarked"));

    // Nothing more while they run.
    controller.reconcile(&store).unwrap();
    assert_eq!(all_migrations(&store).len(), 5);
}

#[test]
fn external_and_none_vmis_are_marked_but_never_migrated() {
    // `VMIMigratableOnEviction`: somebody else acts on an External VMI's mark.
    let store = store();
    vmi_with(&store, "external", "n1", "n1", "External", "Running");
    vmi_with(&store, "none", "n1", "n1", "None", "Running");
    VirtController::default().reconcile(&store).unwrap();
    assert!(all_migrations(&store).is_empty());
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
fn after_a_failed_migration_the_next_is_created_at_once() {
    // The back-off is the migration controller's: the evacuation controller does not wait.
    let store = store();
    vmi(&store, "vm", "n1", "n1");
    let controller = VirtController::default();
    controller.reconcile(&store).unwrap();
    store.clock().advance(Duration::from_secs(7));
    set_migration_phase(&store, &migration_of(&store, "vm"), "Failed");
    controller.reconcile(&store).unwrap();
    assert_eq!(all_migrations(&store).len(), 2);
    assert_eq!(active_vmis(&store), set(&["vm"]));
}

#[test]
fn without_the_evacuation_controller_no_migrations() {
    let store = store();
    vmi(&store, "vm", "n1", "n1");
    let controller = VirtController::new(false);
    assert_eq!(controller.reconcile(&store).unwrap(), None);
    assert!(all_migrations(&store).is_empty());
}

#[test]
fn a_cancelled_mark_takes_the_pods_annotation_off() {
    let store = store();
    vmi(&store, "vm", "n1", "n1");
    vmi_with(&store, "external", "n2", "n2", "External", "Running");
    let controller = VirtController::default();
    controller.reconcile(&store).unwrap();
    assert!(in_progress(&store, "vm") && in_progress(&store, "external"));
    // `evacuate/cancel` of the External VMI's mark.
    let cancel = Patch::Merge(json!({"status": {"evacuationNodeName": null}}));
    store.patch(&vmis(), "default", "external", &cancel, false).unwrap();
    controller.reconcile(&store).unwrap();
    assert!(!in_progress(&store, "external"));
    assert!(in_progress(&store, "vm"));
}

fn failed_vmi(store: &Store, name: &str, run_strategy: Option<&str>) {
    final_vmi(store, name, run_strategy, "Failed");
}

/// A VMI in a final `phase`, controlled by a VirtualMachine with `run_strategy` when one is given.
fn final_vmi(store: &Store, name: &str, run_strategy: Option<&str>, phase: &str) {
    let mut vmi = json!({"metadata": {"name": name},
                         "status": {"nodeName": "n1", "phase": phase, "reason": "PodDeleted"}});
    if let Some(strategy) = run_strategy {
        let vm = json!({"metadata": {"name": name}, "spec": {"runStrategy": strategy}});
        let vm = store.create(&crate::kinds::vms(), "default", vm, false).unwrap();
        vmi["metadata"]["ownerReferences"] = json!([{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "name": name, "uid": vm["metadata"]["uid"], "controller": true}]);
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
    failed_vmi(&store, "once", Some("Once"));
    final_vmi(&store, "rerun-shut-down", Some("RerunOnFailure"), "Succeeded");
    let controller = VirtController::default();
    controller.reconcile(&store).unwrap();
    for name in ["plain", "manual", "once", "rerun-shut-down"] {
        let vmi = get_vmi(&store, name);
        assert!(matches!(text(&vmi, "/status/phase"), "Failed" | "Succeeded"), "{name}");
        assert_eq!(annotation(&vmi, RESTARTS_ANNOTATION), "", "{name}");
    }
    assert!(store.list(&pods(), None, None, None).0.is_empty());
}

/// `RerunOnFailure` restarts a VMI that failed (`vm.go` `syncRunStrategy`), not one that shut down.
#[test]
fn rerun_on_failure_restarts_only_a_failed_vm() {
    let store = store();
    failed_vmi(&store, "rerun-failed", Some("RerunOnFailure"));
    VirtController::default().reconcile(&store).unwrap();
    let vmi = get_vmi(&store, "rerun-failed");
    assert_eq!(text(&vmi, "/status/phase"), "Scheduling");
    assert_eq!(annotation(&vmi, RESTARTS_ANNOTATION), "1");
    assert_eq!(store.list(&pods(), None, None, None).0.len(), 1);
}

#[test]
fn vmis_not_on_the_marked_node_or_final_are_not_evacuated() {
    let store = store();
    vmi(&store, "unmarked", "n1", "");
    vmi(&store, "moved", "n3", "n1");
    vmi_with(&store, "stopped", "n1", "n1", "LiveMigrate", "Succeeded");
    VirtController::default().reconcile(&store).unwrap();
    assert!(all_migrations(&store).is_empty());
    // Not running yet but not final either: KubeVirt creates the migration, and its migration
    // controller waits for the VMI to run.
    vmi_with(&store, "scheduled", "n1", "n1", "LiveMigrate", "Scheduled");
    vmi(&store, "marked", "n1", "n1");
    VirtController::default().reconcile(&store).unwrap();
    assert_eq!(active_vmis(&store), set(&["marked", "scheduled"]));
}
