use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::actors::{text, Scheduler};
use crate::kinds::nodes;
use crate::{SimClock, Simulation};

/// Nodes, VMs, migrations; the scheduler and the migration controller to move them.
struct Cluster {
    store: Arc<Store>,
}

impl Cluster {
    /// Nodes of 16 GiB each.
    fn new(names: &[&str]) -> Self {
        let store = Arc::new(Store::new(Arc::new(SimClock::default()), 10_000));
        for node in names {
            let node = json!({"metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
                              "status": {"allocatable": {"memory": "16Gi"}}});
            store.create(&nodes(), "", node, false).unwrap();
        }
        Self { store }
    }

    /// A running VM with its launcher pod (which requests the VM's memory).
    fn vm(&self, name: &str, node: &str, memory: &str, dirty_rate: Option<&str>) {
        let mut annotations = serde_json::Map::new();
        if let Some(rate) = dirty_rate {
            annotations.insert(DIRTY_RATE_ANNOTATION.into(), json!(rate));
        }
        let vmi = json!({"metadata": {"name": name, "annotations": annotations},
                         "spec": {"domain": {"memory": {"guest": memory}}},
                         "status": {"nodeName": node, "phase": "Running", "evacuationNodeName": node}});
        let vmi = self.store.create(&vmis(), "default", vmi, false).unwrap();
        let uid = text(&vmi, "/metadata/uid");
        let pod = json!({"metadata": {"generateName": format!("virt-launcher-{name}-"),
                                      "labels": {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": uid},
                                      "annotations": {"kubevirt.io/domain": name},
                                      "ownerReferences": [{"kind": "VirtualMachineInstance", "name": name,
                                                           "uid": uid, "controller": true}]},
                         "spec": {"nodeName": node, "containers": [{"name": "compute",
                                  "resources": {"requests": {"memory": memory}}}]},
                         "status": {"phase": "Running"}});
        self.store.create(&pods(), "default", pod, false).unwrap();
    }

    fn migrate(&self, vmi: &str) -> String {
        let migration =
            json!({"metadata": {"generateName": format!("evacuation-{vmi}-")}, "spec": {"vmiName": vmi}});
        let created = self.store.create(&migrations(), "default", migration, false).unwrap();
        text(&created, "/metadata/name").to_owned()
    }

    /// An evacuation migration of `vmi` from `node`, with a priority.
    fn evacuate(&self, vmi: &str, node: &str, priority: &str) -> String {
        let migration = json!({"metadata": {"generateName": "kubevirt-evacuation-",
                                            "annotations": {"kubevirt.io/evacuationMigration": node}},
                               "spec": {"vmiName": vmi, "priority": priority}});
        let created = self.store.create(&migrations(), "default", migration, false).unwrap();
        text(&created, "/metadata/name").to_owned()
    }

    fn simulation(&self, controller: MigrationController) -> Simulation {
        Simulation::new(Arc::clone(&self.store), vec![Box::new(Scheduler), Box::new(controller)])
    }

    fn phases(&self) -> Vec<String> {
        let (all, _) = self.store.list(&migrations(), None, None, None);
        all.iter().map(|m| text(m, "/status/phase").to_owned()).collect()
    }

    fn phase_of(&self, name: &str) -> String {
        text(&self.store.get(&migrations(), "default", name).unwrap(), "/status/phase").to_owned()
    }

    fn count(&self, phase: &str) -> usize {
        self.phases().iter().filter(|p| *p == phase).count()
    }

    fn vmi_node(&self, name: &str) -> String {
        text(&self.store.get(&vmis(), "default", name).unwrap(), "/status/nodeName").to_owned()
    }

    fn pods_of(&self, vmi: &str) -> Vec<Arc<Value>> {
        let (all, _) = self.store.list(&pods(), None, None, None);
        all.into_iter().filter(|p| Pod(p).vmi() == Some(vmi)).collect()
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
    cluster.simulation(MigrationController::default()).run_until(Duration::ZERO).unwrap();
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
    let simulation = cluster.simulation(MigrationController::default());
    simulation.run_until(Duration::ZERO).unwrap();
    assert_eq!(cluster.phases(), ["Running"]);
    let target =
        cluster.pods_of("vm").into_iter().find(|p| Pod(p).node_name() == Some("n2")).expect("a target pod");
    assert!(Pod(&target).meta().label(MIGRATION_JOB_LABEL).is_some());

    simulation.run_until(Duration::from_secs(63)).unwrap();
    assert_eq!(cluster.phases(), ["Running"], "not done before its time");
    assert_eq!(cluster.vmi_node("vm"), "n1");

    simulation.run_until(Duration::from_secs(64)).unwrap();
    assert_eq!(cluster.phases(), ["Succeeded"]);
    let vmi = cluster.store.get(&vmis(), "default", "vm").unwrap();
    assert_eq!(text(&vmi, "/status/nodeName"), "n2");
    assert_eq!(text(&vmi, "/status/migrationState/targetNode"), "n2");
    assert_eq!(vmi.pointer("/status/evacuationNodeName"), None, "the evacuation is over");
    // The source pod completes and stays, for whoever evicts it; the target pod runs the VM.
    let mut phases: Vec<(String, String)> = cluster
        .pods_of("vm")
        .iter()
        .map(|p| (text(p, "/spec/nodeName").to_owned(), text(p, "/status/phase").to_owned()))
        .collect();
    phases.sort();
    assert_eq!(phases, [("n1".into(), "Succeeded".into()), ("n2".into(), "Running".into())]);
}

#[test]
fn a_vm_dirtying_faster_than_the_bandwidth_fails_at_the_progress_timeout() {
    let cluster = Cluster::new(&["n1", "n2"]);
    cluster.vm("busy", "n1", "2Gi", Some("100Mi"));
    cluster.migrate("busy");
    let simulation = cluster.simulation(MigrationController::default());
    simulation.run_until(Duration::from_secs(149)).unwrap();
    assert_eq!(cluster.phases(), ["Running"]);
    simulation.run_until(Duration::from_secs(150)).unwrap();
    assert_eq!(cluster.phases(), ["Failed"]);
    assert_eq!(cluster.vmi_node("busy"), "n1");
    let vmi = cluster.store.get(&vmis(), "default", "busy").unwrap();
    assert_eq!(text(&vmi, "/status/evacuationNodeName"), "n1", "still to be evacuated");
    assert_eq!(cluster.pods_of("busy").len(), 1, "the target pod is gone");
}

#[test]
fn a_migration_longer_than_the_completion_timeout_fails_then() {
    // 1 GiB at 2 MiB/s would take 512 s; the timeout is 150 s per GB, 1.07 GB rounded up: 300 s.
    let cluster = Cluster::new(&["n1", "n2"]);
    cluster.vm("slow", "n1", "1Gi", Some("62Mi"));
    cluster.migrate("slow");
    let simulation = cluster.simulation(MigrationController::default());
    simulation.run_until(Duration::from_secs(299)).unwrap();
    assert_eq!(cluster.phases(), ["Running"]);
    simulation.run_until(Duration::from_secs(300)).unwrap();
    assert_eq!(cluster.phases(), ["Failed"]);
}

#[test]
fn an_unschedulable_target_pod_fails_the_migration_after_five_minutes() {
    // The only other node is cordoned: the target pod stays pending, unschedulable.
    let cluster = Cluster::new(&["n1", "n2"]);
    cluster
        .store
        .patch(&nodes(), "", "n2", &Patch::Merge(json!({"spec": {"unschedulable": true}})), false)
        .unwrap();
    cluster.vm("vm", "n1", "1Gi", None);
    cluster.migrate("vm");
    let simulation = cluster.simulation(MigrationController::default());
    simulation.run_until(Duration::from_secs(299)).unwrap();
    assert_eq!(cluster.phases(), ["Scheduling"]);
    let target =
        cluster.pods_of("vm").into_iter().find(|p| Pod(p).node_name().is_none()).expect("a pending target");
    assert_eq!(Pod(&target).condition("PodScheduled").and_then(|c| c.reason()), Some("Unschedulable"));
    simulation.run_until(Duration::from_secs(300)).unwrap();
    assert_eq!(cluster.phases(), ["Failed"]);
    assert_eq!(cluster.pods_of("vm").len(), 1, "the target pod was deleted");
}

#[test]
fn targets_need_room_and_never_share_the_vms_node() {
    // n2 has room for one 10 GiB VM: the second migration waits for room, not on n1 (its own).
    let cluster = Cluster::new(&["n1", "n2"]);
    cluster.vm("a", "n1", "10Gi", None);
    cluster.vm("b", "n1", "10Gi", None);
    cluster.migrate("a");
    cluster.migrate("b");
    cluster.simulation(MigrationController::default()).run_until(Duration::ZERO).unwrap();
    let mut phases = cluster.phases();
    phases.sort();
    assert_eq!(phases, ["Running", "Scheduling"]);
}

#[test]
fn a_vm_that_stops_mid_migration_fails_it() {
    let cluster = Cluster::new(&["n1", "n2"]);
    cluster.vm("vm", "n1", "2Gi", Some("32Mi"));
    cluster.migrate("vm");
    let simulation = cluster.simulation(MigrationController::default());
    simulation.run_until(Duration::from_secs(10)).unwrap();
    assert_eq!(cluster.phases(), ["Running"]);
    let stopped = Patch::Merge(json!({"status": {"phase": "Failed"}}));
    cluster.store.patch(&vmis(), "default", "vm", &stopped, false).unwrap();
    simulation.run_until(Duration::from_secs(11)).unwrap();
    assert_eq!(cluster.phases(), ["Failed"], "a migration whose VM died never succeeds");
    assert_eq!(cluster.vmi_node("vm"), "n1");
}

#[test]
fn a_deleted_vmis_migration_is_deleted() {
    let cluster = Cluster::new(&["n1", "n2"]);
    cluster.vm("vm", "n1", "2Gi", Some("32Mi"));
    cluster.migrate("vm");
    let simulation = cluster.simulation(MigrationController::default());
    simulation.run_until(Duration::from_secs(10)).unwrap();
    cluster.store.delete(&vmis(), "default", "vm", false).unwrap();
    simulation.run_until(Duration::from_secs(11)).unwrap();
    assert!(cluster.phases().is_empty(), "{:?}", cluster.phases());
}

#[test]
fn a_second_migration_of_a_vmi_fails_at_once() {
    let cluster = Cluster::new(&["n1", "n2", "n3"]);
    cluster.vm("vm", "n1", "2Gi", Some("32Mi"));
    let first = cluster.migrate("vm");
    let second = cluster.migrate("vm");
    cluster.simulation(MigrationController::default()).run_until(Duration::ZERO).unwrap();
    assert_eq!(cluster.phase_of(&first), "Running");
    assert_eq!(cluster.phase_of(&second), "Failed");
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
    cluster.simulation(controller).run_until(Duration::ZERO).unwrap();
    assert_eq!(cluster.phase_of(&critical), "Running");
    assert_eq!(cluster.phase_of(&maintenance), "Pending");
}

#[test]
fn a_new_evacuation_waits_out_the_back_off_of_failed_ones() {
    // `handleMigrationBackoff`: 20 s after the first failure, counted from its end.
    let cluster = Cluster::new(&["n1", "target"]);
    cluster.vm("vm", "n1", "1Gi", None);
    let first = cluster.evacuate("vm", "n1", "system-critical");
    let failed = json!({"status": {"phase": "Failed",
                                   "migrationState": {"endTimestamp": cluster.store.clock().timestamp()}}});
    cluster.store.patch(&migrations(), "default", &first, &Patch::Merge(failed), false).unwrap();
    cluster.store.clock().advance(Duration::from_secs(5));
    let second = cluster.evacuate("vm", "n1", "system-critical");
    let simulation = cluster.simulation(MigrationController::default());
    simulation.run_until(Duration::from_secs(19)).unwrap();
    assert_eq!(cluster.phase_of(&second), "Pending", "held");
    simulation.run_until(Duration::from_secs(20)).unwrap();
    assert_eq!(cluster.phase_of(&second), "Running");
}
