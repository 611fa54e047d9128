use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use serde_json::Value;

use super::*;
use crate::store::Kind;
use crate::SimClock;

/// A node with 8 GiB and VMs of the given sizes (GiB), each in its launcher pod.
fn node_with_vms(sizes: &[u32]) -> Store {
    let store = Store::new(Arc::new(SimClock::default()), 10_000);
    let node = json!({"metadata": {"name": "n1"}, "status": {"capacity": {"memory": "8Gi"}}});
    store.create(&Kind::new("v1", "Node"), "", node, false).unwrap();
    for (i, size) in sizes.iter().enumerate() {
        let vmi = json!({"metadata": {"name": format!("vm-{i}")},
                         "spec": {"domain": {"memory": {"guest": format!("{size}Gi")}}},
                         "status": {"nodeName": "n1", "phase": "Running"}});
        store.create(&vmis(), "default", vmi, false).unwrap();
        let pod = json!({"metadata": {"name": format!("virt-launcher-vm-{i}"), "annotations": {"kubevirt.io/domain": format!("vm-{i}")}},
                         "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 600,
                                  "containers": [{"name": "compute",
                                                  "resources": {"requests": {"memory": format!("{size}Gi")}}}]},
                         "status": {"phase": "Running"}});
        store.create(&pods(), "default", pod, false).unwrap();
    }
    store
}

/// Gives a pod a priority (`spec.priority`, as admission resolves `priorityClassName`).
fn set_priority(store: &Store, name: &str, priority: i64) {
    store
        .patch(&pods(), "default", name, &Patch::Merge(json!({"spec": {"priority": priority}})), false)
        .unwrap();
}

fn pod(store: &Store, name: &str) -> Value {
    (*store.get(&pods(), "default", name).unwrap()).clone()
}

#[test]
fn soft_pressure_evicts_the_lowest_priority_pod_after_the_grace_periods() {
    // 8 GiB - (1 + 3) GiB = 4 GiB available: no pressure under a 3500 MiB threshold.
    let store = node_with_vms(&[1, 3]);
    set_priority(&store, "virt-launcher-vm-1", -10);
    let kubelet = Kubelet::default();
    assert_eq!(kubelet.reconcile(&store).unwrap(), None);
    // A third VM: 8 - 5 = 3 GiB available < 3500 MiB: pressure, and the soft grace period runs.
    let vmi = json!({"metadata": {"name": "vm-2"}, "spec": {"domain": {"memory": {"guest": "1Gi"}}},
                     "status": {"nodeName": "n1", "phase": "Running"}});
    store.create(&vmis(), "default", vmi, false).unwrap();
    let launcher = json!({"metadata": {"name": "virt-launcher-vm-2", "annotations": {"kubevirt.io/domain": "vm-2"}},
                          "spec": {"nodeName": "n1", "containers": [{"name": "compute",
                                   "resources": {"requests": {"memory": "1Gi"}}}]},
                          "status": {"phase": "Running"}});
    store.create(&pods(), "default", launcher, false).unwrap();
    let start = store.clock().elapsed();
    assert_eq!(kubelet.reconcile(&store).unwrap(), Some(start + Duration::from_secs(5)));
    let node = store.get(&Kind::new("v1", "Node"), "", "n1").unwrap();
    assert_eq!(node["status"]["conditions"][0]["type"], "MemoryPressure");
    assert_eq!(node["status"]["conditions"][0]["status"], "True");
    assert!(pod(&store, "virt-launcher-vm-1").pointer("/status/conditions").is_none(), "not yet: soft grace");

    // After the soft grace: the lowest-priority pod is the target, with evictionMaxPodGracePeriod
    // (300 s) instead of its own 600 s.
    store.clock().advance(Duration::from_secs(5));
    let next = kubelet.reconcile(&store).unwrap();
    assert_eq!(next, Some(start + Duration::from_secs(305)));
    let victim = pod(&store, "virt-launcher-vm-1");
    assert_eq!(victim["status"]["conditions"][0]["type"], "DisruptionTarget");
    assert_eq!(victim["status"]["conditions"][0]["reason"], REASON);
    assert_eq!(victim["status"]["phase"], "Running", "the VM runs on during the grace period");
    assert!(
        pod(&store, "virt-launcher-vm-0").pointer("/status/conditions").is_none(),
        "one eviction at a time"
    );

    // At the deadline the pod fails as Evicted and its VM is shut down.
    store.clock().advance(Duration::from_secs(300));
    kubelet.reconcile(&store).unwrap();
    let victim = pod(&store, "virt-launcher-vm-1");
    assert_eq!(
        (victim["status"]["phase"].as_str(), victim["status"]["reason"].as_str()),
        (Some("Failed"), Some("Evicted"))
    );
    assert!(victim["status"]["message"]
        .as_str()
        .unwrap()
        .starts_with("The node was low on resource: memory."));
    assert_eq!(store.get(&vmis(), "default", "vm-1").unwrap()["status"]["phase"], "Failed");
    // 8 - 2 = 6 GiB available again: the pressure is over.
    let node = store.get(&Kind::new("v1", "Node"), "", "n1").unwrap();
    assert_eq!(node["status"]["conditions"][0]["status"], "False");
    assert_eq!(store.get(&vmis(), "default", "vm-0").unwrap()["status"]["phase"], "Running");
}

#[test]
fn a_vm_that_migrated_away_in_time_is_not_shut_down() {
    let store = node_with_vms(&[2, 3]);
    set_priority(&store, "virt-launcher-vm-1", -1);
    let kubelet = Kubelet { soft_threshold: 4.0 * 1024.0 * 1024.0 * 1024.0, ..Kubelet::default() };
    kubelet.reconcile(&store).unwrap();
    store.clock().advance(Duration::from_secs(5));
    kubelet.reconcile(&store).unwrap();
    assert_eq!(pod(&store, "virt-launcher-vm-1")["status"]["conditions"][0]["reason"], REASON);
    // The VM moves to another node before the deadline (as a migration would do).
    store
        .patch(&vmis(), "default", "vm-1", &Patch::Merge(json!({"status": {"nodeName": "n2"}})), false)
        .unwrap();
    store.clock().advance(Duration::from_secs(300));
    kubelet.reconcile(&store).unwrap();
    assert_eq!(pod(&store, "virt-launcher-vm-1")["status"]["phase"], "Failed");
    assert_eq!(
        store.get(&vmis(), "default", "vm-1").unwrap()["status"]["phase"],
        "Running",
        "saved by the migration"
    );
}

#[test]
fn the_hard_threshold_kills_at_once() {
    let store = node_with_vms(&[4, 4]); // 0 available
    let kubelet = Kubelet::default();
    kubelet.reconcile(&store).unwrap();
    kubelet.reconcile(&store).unwrap();
    let failed = ["virt-launcher-vm-0", "virt-launcher-vm-1"]
        .iter()
        .filter(|name| pod(&store, name)["status"]["phase"] == "Failed")
        .count();
    assert_eq!(failed, 1, "one pod at once, without waiting for the soft grace period");
}

#[test]
fn a_deleted_launcher_pod_runs_until_its_grace_period_ends() {
    // 3 GiB of 8 used: no memory pressure, only deletions.
    let store = node_with_vms(&[1, 1, 1]);
    let kubelet = Kubelet::default();
    // vm-0's pod was preempted, vm-1's plainly deleted, vm-2's VM migrates away in time.
    let preempted = with_disruption_target(
        &pod(&store, "virt-launcher-vm-0"),
        "PreemptionByScheduler",
        "Preempted",
        &store.clock().timestamp(),
    );
    store
        .patch(
            &pods(),
            "default",
            "virt-launcher-vm-0",
            &Patch::Merge(json!({"status": {"conditions": preempted}})),
            false,
        )
        .unwrap();
    for i in 0..3 {
        let name = format!("virt-launcher-vm-{i}");
        store.delete_gracefully(&pods(), "default", &name, Some(60), false).unwrap();
    }
    let deadline = store.clock().elapsed() + Duration::from_secs(60);
    assert_eq!(kubelet.reconcile(&store).unwrap(), Some(deadline));

    store.clock().advance(Duration::from_secs(59));
    assert_eq!(kubelet.reconcile(&store).unwrap(), Some(deadline));
    for i in 0..3 {
        assert_eq!(pod(&store, &format!("virt-launcher-vm-{i}"))["status"]["phase"], "Running");
        assert_eq!(store.get(&vmis(), "default", &format!("vm-{i}")).unwrap()["status"]["phase"], "Running");
    }
    store
        .patch(&vmis(), "default", "vm-2", &Patch::Merge(json!({"status": {"nodeName": "n2"}})), false)
        .unwrap();

    store.clock().advance(Duration::from_secs(1));
    assert_eq!(kubelet.reconcile(&store).unwrap(), None);
    assert!(store.list(&pods(), None, None, None).0.is_empty(), "the kubelet removed the pods");
    let vmi = |name: &str| store.get(&vmis(), "default", name).unwrap();
    assert_eq!(vmi("vm-0")["status"]["phase"], "Failed");
    assert_eq!(vmi("vm-0")["status"]["reason"], "PreemptionByScheduler");
    assert_eq!(vmi("vm-1")["status"]["phase"], "Failed");
    assert_eq!(vmi("vm-1")["status"]["reason"], "PodDeleted");
    assert_eq!(vmi("vm-2")["status"]["phase"], "Running", "it migrated away before the deadline");
    assert_eq!(vmi("vm-2")["status"]["nodeName"], "n2");
}
