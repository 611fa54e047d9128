use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::actors::text;
use crate::SimClock;

struct Cluster {
    store: Store,
}

impl Cluster {
    fn new(nodes: &[&str]) -> Self {
        let store = Store::new(Arc::new(SimClock::default()), 10_000);
        for node in nodes {
            store.create(&super::nodes(), "", json!({"metadata": {"name": node}}), false).unwrap();
        }
        Self { store }
    }

    /// A running VM with its launcher pod.
    fn vm(&self, name: &str, node: &str, memory: &str, dirty_rate: Option<&str>) {
        let mut annotations = serde_json::Map::new();
        if let Some(rate) = dirty_rate {
            annotations.insert(DIRTY_RATE_ANNOTATION.into(), json!(rate));
        }
        let vmi = json!({"metadata": {"name": name, "annotations": annotations},
                         "spec": {"domain": {"memory": {"guest": memory}}},
                         "status": {"nodeName": node, "phase": "Running", "evacuationNodeName": node}});
        self.store.create(&vmis(), "default", vmi, false).unwrap();
        let pod = json!({"metadata": {"generateName": format!("virt-launcher-{name}-"),
                                      "labels": {"kubevirt.io": "virt-launcher"},
                                      "annotations": {"kubevirt.io/domain": name}},
                         "spec": {"nodeName": node}, "status": {"phase": "Running"}});
        self.store.create(&pods(), "default", pod, false).unwrap();
    }

    fn migrate(&self, vmi: &str) {
        let migration =
            json!({"metadata": {"generateName": format!("evacuation-{vmi}-")}, "spec": {"vmiName": vmi}});
        self.store.create(&migrations(), "default", migration, false).unwrap();
    }

    fn phases(&self) -> Vec<String> {
        let (all, _) = self.store.list(&migrations(), None, None, None);
        all.iter().map(|m| text(m, "/status/phase").to_owned()).collect()
    }

    fn count(&self, phase: &str) -> usize {
        self.phases().iter().filter(|p| *p == phase).count()
    }

    fn vmi_node(&self, name: &str) -> String {
        text(&self.store.get(&vmis(), "default", name).unwrap(), "/status/nodeName").to_owned()
    }
}

#[test]
fn parallel_limits_hold_per_cluster_and_per_source_node() {
    let cluster = Cluster::new(&["n1", "n2", "n3", "n4", "target"]);
    for (i, node) in ["n1", "n1", "n1", "n2", "n2", "n2", "n3", "n4"].iter().enumerate() {
        let name = format!("vm-{i}");
        cluster.vm(&name, node, "1Gi", None);
        cluster.migrate(&name);
    }
    let controller = MigrationController::default();
    controller.reconcile(&cluster.store).unwrap();
    assert_eq!(cluster.count("Running"), 5, "parallelMigrationsPerCluster: {:?}", cluster.phases());
    let (all, _) = cluster.store.list(&migrations(), None, None, None);
    let outbound = |node: &str| {
        all.iter()
            .filter(|m| {
                text(m, "/status/phase") == "Running" && text(m, "/status/migrationState/sourceNode") == node
            })
            .count()
    };
    assert_eq!((outbound("n1"), outbound("n2")), (2, 2), "parallelOutboundMigrationsPerNode");
    assert_eq!(outbound("n3"), 1);
}

#[test]
fn a_migration_takes_memory_over_bandwidth_and_moves_the_vm() {
    let cluster = Cluster::new(&["n1", "n2"]);
    // 2 GiB at 64 MiB/s, dirtying 32 MiB/s: 2048 / 32 = 64 s.
    cluster.vm("vm", "n1", "2Gi", Some("32Mi"));
    cluster.migrate("vm");
    let controller = MigrationController::default();
    let next = controller.reconcile(&cluster.store).unwrap();
    assert_eq!(next, Some(Duration::from_secs(64)));
    assert_eq!(cluster.phases(), ["Running"]);

    cluster.store.clock().advance(Duration::from_secs(63));
    controller.reconcile(&cluster.store).unwrap();
    assert_eq!(cluster.phases(), ["Running"], "not done before its time");
    assert_eq!(cluster.vmi_node("vm"), "n1");

    cluster.store.clock().advance(Duration::from_secs(1));
    assert_eq!(controller.reconcile(&cluster.store).unwrap(), None);
    assert_eq!(cluster.phases(), ["Succeeded"]);
    let vmi = cluster.store.get(&vmis(), "default", "vm").unwrap();
    assert_eq!(text(&vmi, "/status/nodeName"), "n2");
    assert_eq!(vmi.pointer("/status/evacuationNodeName"), None, "the evacuation is over");
    let (launchers, _) = cluster.store.list(&pods(), None, None, None);
    assert_eq!(launchers.len(), 1);
    assert_eq!(text(&launchers[0], "/spec/nodeName"), "n2");
    assert!(text(&launchers[0], "/metadata/name").starts_with("virt-launcher-vm-"));
}

#[test]
fn a_vm_dirtying_faster_than_the_bandwidth_fails_at_the_timeout() {
    let cluster = Cluster::new(&["n1", "n2"]);
    cluster.vm("busy", "n1", "2Gi", Some("100Mi"));
    cluster.migrate("busy");
    let controller = MigrationController::default();
    // 150 s per GiB.
    assert_eq!(controller.reconcile(&cluster.store).unwrap(), Some(Duration::from_secs(300)));
    cluster.store.clock().advance(Duration::from_secs(300));
    controller.reconcile(&cluster.store).unwrap();
    assert_eq!(cluster.phases(), ["Failed"]);
    assert_eq!(cluster.vmi_node("busy"), "n1");
    let vmi = cluster.store.get(&vmis(), "default", "busy").unwrap();
    assert_eq!(text(&vmi, "/status/evacuationNodeName"), "n1", "still to be evacuated");
}

#[test]
fn a_migration_waits_for_a_node_that_can_take_the_vm() {
    let cluster = Cluster::new(&["n1", "n2"]);
    cluster
        .store
        .patch(&nodes(), "", "n2", &Patch::Merge(json!({"spec": {"unschedulable": true}})), false)
        .unwrap();
    cluster.vm("vm", "n1", "1Gi", None);
    cluster.migrate("vm");
    let controller = MigrationController::default();
    assert_eq!(controller.reconcile(&cluster.store).unwrap(), None);
    assert_eq!(cluster.phases(), [""], "pending: n2 is cordoned");
    cluster.store.create(&nodes(), "", json!({"metadata": {"name": "n3"}}), false).unwrap();
    controller.reconcile(&cluster.store).unwrap();
    assert_eq!(cluster.phases(), ["Running"]);
}

impl Cluster {
    /// An evacuation migration of `vmi` from `node`, with a priority.
    fn evacuate(&self, vmi: &str, node: &str, priority: &str) -> String {
        let migration = json!({"metadata": {"generateName": "kubevirt-evacuation-",
                                            "annotations": {"kubevirt.io/evacuationMigration": node}},
                               "spec": {"vmiName": vmi, "priority": priority}});
        let created = self.store.create(&migrations(), "default", migration, false).unwrap();
        text(&created, "/metadata/name").to_owned()
    }

    fn phase_of(&self, name: &str) -> String {
        text(&self.store.get(&migrations(), "default", name).unwrap(), "/status/phase").to_owned()
    }
}

#[test]
fn system_critical_migrations_go_before_maintenance_ones() {
    // One slot: the descheduler's rebalancing (`system-maintenance`, created first) waits behind a
    // drain's (`system-critical`), as KubeVirt's priority queue orders them (VEP 62).
    let cluster = Cluster::new(&["n1", "n2", "target"]);
    cluster.vm("rebalanced", "n1", "1Gi", None);
    cluster.vm("drained", "n2", "1Gi", None);
    let maintenance = cluster.evacuate("rebalanced", "n1", "system-maintenance");
    let critical = cluster.evacuate("drained", "n2", "system-critical");
    let controller = MigrationController { parallel_per_cluster: 1, ..MigrationController::default() };
    controller.reconcile(&cluster.store).unwrap();
    assert_eq!(cluster.phase_of(&critical), "Running");
    assert_eq!(cluster.phase_of(&maintenance), "");
}

#[test]
fn a_new_evacuation_waits_out_the_back_off_of_failed_ones() {
    // `handleMigrationBackoff`: 20 s after the first failure, counted from its end.
    let cluster = Cluster::new(&["n1", "target"]);
    cluster.vm("vm", "n1", "1Gi", None);
    let first = cluster.evacuate("vm", "n1", "system-critical");
    let status = |phase: &str| json!({"status": {"phase": phase, "migrationState": {"endTimestamp": cluster.store.clock().timestamp()}}});
    cluster.store.patch(&migrations(), "default", &first, &Patch::Merge(status("Failed")), false).unwrap();
    cluster.store.clock().advance(Duration::from_secs(5));
    let second = cluster.evacuate("vm", "n1", "system-critical");
    let controller = MigrationController::default();
    assert_eq!(controller.reconcile(&cluster.store).unwrap(), Some(Duration::from_secs(20)));
    assert_eq!(cluster.phase_of(&second), "", "held Pending");
    cluster.store.clock().advance(Duration::from_secs(15));
    controller.reconcile(&cluster.store).unwrap();
    assert_eq!(cluster.phase_of(&second), "Running");
}
