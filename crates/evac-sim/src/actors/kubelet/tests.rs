use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::kinds::{migrations, vmis};
use crate::store::{HookAnswer, HookCall, Kind, NodeEndpoint};
use crate::SimClock;

/// A node with 8 GiB and VMs of the given sizes (GiB), each in its launcher pod (a 600 s grace).
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

fn pod(store: &Store, name: &str) -> Option<Value> {
    store.get(&pods(), "default", name).ok().map(|p| (*p).clone())
}

fn vmi(store: &Store, name: &str) -> Value {
    (*store.get(&vmis(), "default", name).unwrap()).clone()
}

/// Runs the kubelet alone until `until` (simulated time since the start), jumping from one wake-up
/// to the next, as the driver would.
fn run_until(kubelet: &Kubelet, store: &Store, until: Duration) {
    for _ in 0..10_000 {
        let next = kubelet.reconcile(store).unwrap();
        let now = store.clock().elapsed();
        match next {
            Some(at) if at <= until => store.clock().advance(at.saturating_sub(now)),
            _ => {
                if until > now {
                    store.clock().advance(until - now);
                    kubelet.reconcile(store).unwrap();
                }
                return;
            }
        }
    }
    panic!("the kubelet kept asking to act at {:?}", store.clock().elapsed());
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn soft_pressure_stops_the_lowest_priority_pod_and_writes_its_disruption_once_stopped() {
    // 8 GiB - (1 + 3) GiB = 4 GiB available: no pressure under a 3500 MiB threshold.
    let store = node_with_vms(&[1, 3, 1]);
    set_priority(&store, "virt-launcher-vm-1", -10);
    let kubelet = Kubelet::default();
    // 8 - 5 = 3 GiB available < 3500 MiB: pressure, and the soft grace period (5 s) runs.
    assert_eq!(kubelet.reconcile(&store).unwrap(), Some(secs(5)));
    let node = store.get(&Kind::new("v1", "Node"), "", "n1").unwrap();
    assert_eq!(node["status"]["conditions"][0]["type"], "MemoryPressure");
    assert_eq!(node["status"]["conditions"][0]["status"], "True");

    // After the soft grace the lowest-priority pod is stopped, with evictionMaxPodGracePeriod
    // (300 s) instead of its own 600 s; nothing in the API says so yet.
    run_until(&kubelet, &store, secs(5));
    let victim = pod(&store, "virt-launcher-vm-1").unwrap();
    assert!(victim.pointer("/status/conditions").is_none(), "no DisruptionTarget while it stops");
    assert_eq!(victim["status"]["phase"], "Running");
    // Stock virt-handler: no hook, SIGTERM at once, the guest asked to shut down a second later and
    // off 5 s after that.
    run_until(&kubelet, &store, secs(10));
    assert_eq!(vmi(&store, "vm-1")["status"]["phase"], "Running");
    run_until(&kubelet, &store, secs(11));
    assert_eq!(vmi(&store, "vm-1")["status"]["phase"], "Succeeded", "it shut down");
    assert_eq!(vmi(&store, "vm-1")["status"]["reason"], REASON);
    let victim = pod(&store, "virt-launcher-vm-1").unwrap();
    assert_eq!(
        (victim["status"]["phase"].as_str(), victim["status"]["reason"].as_str()),
        (Some("Failed"), Some("Evicted"))
    );
    assert_eq!(victim["status"]["conditions"][0]["reason"], REASON, "the DisruptionTarget, once stopped");
    assert!(victim["status"]["message"]
        .as_str()
        .unwrap()
        .starts_with("The node was low on resource: memory."));
    // 8 - 2 = 6 GiB available again: the pressure is over, the others run on.
    let node = store.get(&Kind::new("v1", "Node"), "", "n1").unwrap();
    assert_eq!(node["status"]["conditions"][0]["status"], "False");
    assert_eq!(vmi(&store, "vm-0")["status"]["phase"], "Running");
}

#[test]
fn under_the_proposals_virt_handler_the_vm_runs_until_the_grace_period_ends() {
    let store = node_with_vms(&[1, 3, 1]);
    set_priority(&store, "virt-launcher-vm-1", -10);
    let kubelet = Kubelet { virt_handler: VirtHandler::Proposal, ..Kubelet::default() };
    run_until(&kubelet, &store, secs(304));
    assert_eq!(vmi(&store, "vm-1")["status"]["phase"], "Running");
    run_until(&kubelet, &store, secs(305));
    assert_eq!(vmi(&store, "vm-1")["status"]["phase"], "Failed", "killed at SIGKILL");
    assert_eq!(pod(&store, "virt-launcher-vm-1").unwrap()["status"]["reason"], "Evicted");
}

#[test]
fn a_vm_that_migrated_away_before_its_shutdown_is_not_stopped() {
    let store = node_with_vms(&[2, 3]);
    set_priority(&store, "virt-launcher-vm-1", -1);
    let kubelet = Kubelet { soft_threshold: 4.0 * 1024.0 * 1024.0 * 1024.0, ..Kubelet::default() };
    run_until(&kubelet, &store, secs(5));
    // The VM is on another node by the time virt-handler would shut it down.
    store
        .patch(&vmis(), "default", "vm-1", &Patch::Merge(json!({"status": {"nodeName": "n2"}})), false)
        .unwrap();
    run_until(&kubelet, &store, secs(400));
    assert_eq!(pod(&store, "virt-launcher-vm-1").unwrap()["status"]["phase"], "Failed");
    assert_eq!(vmi(&store, "vm-1")["status"]["phase"], "Running", "saved by the migration");
}

#[test]
fn the_hard_threshold_stops_one_pod_with_a_second_of_grace() {
    let store = node_with_vms(&[4, 4]); // 0 available
    let kubelet = Kubelet::default();
    run_until(&kubelet, &store, secs(3));
    let evicted = ["virt-launcher-vm-0", "virt-launcher-vm-1"]
        .iter()
        .filter(|name| pod(&store, name).unwrap()["status"]["phase"] == "Failed")
        .count();
    assert_eq!(evicted, 1, "one pod at once, without waiting for the soft grace period");
    // Its guest was still shutting down at SIGKILL (1 s of grace, 2 s at least after SIGTERM).
    let killed = (0..2).filter(|i| vmi(&store, &format!("vm-{i}"))["status"]["phase"] == "Failed").count();
    assert_eq!(killed, 1);
}

#[test]
fn a_deleted_launcher_pod_s_vm_shuts_down_at_sigterm_unless_its_migration_runs() {
    // 3 GiB of 8 used: no memory pressure, only deletions.
    let store = node_with_vms(&[1, 1, 1]);
    let kubelet = Kubelet::default();
    // vm-2's migration is running when its pod is deleted: virt-handler leaves it alone.
    let migration = json!({"metadata": {"name": "m2"}, "spec": {"vmiName": "vm-2"},
                           "status": {"phase": "Running", "migrationState": {"sourceNode": "n1"}}});
    store.create(&migrations(), "default", migration, false).unwrap();
    for i in 0..3 {
        store
            .delete_gracefully(&pods(), "default", &format!("virt-launcher-vm-{i}"), Some(60), false)
            .unwrap();
    }
    run_until(&kubelet, &store, secs(5));
    assert_eq!(vmi(&store, "vm-0")["status"]["phase"], "Running");
    run_until(&kubelet, &store, secs(6));
    assert_eq!(vmi(&store, "vm-0")["status"]["phase"], "Succeeded");
    assert_eq!(vmi(&store, "vm-0")["status"]["reason"], "PodDeleted");
    assert!(pod(&store, "virt-launcher-vm-0").is_none(), "removed once its containers exited");
    assert_eq!(vmi(&store, "vm-2")["status"]["phase"], "Running", "its migration runs");
    // virt-launcher kills the guest at the VMI's grace period (30 s) plus 15 s after SIGTERM.
    run_until(&kubelet, &store, secs(44));
    assert_eq!(vmi(&store, "vm-2")["status"]["phase"], "Running");
    run_until(&kubelet, &store, secs(45));
    assert_eq!(vmi(&store, "vm-2")["status"]["phase"], "Failed", "the migration did not finish in time");
}

/// A node endpoint that holds every hook until told otherwise, and records its calls.
#[derive(Default)]
struct Endpoint {
    answer: Mutex<Option<HookAnswer>>,
    calls: Mutex<Vec<(String, String, HookCall)>>,
}

impl NodeEndpoint for Endpoint {
    fn get(&self, _store: &Store, node: &str, path: &str, call: &HookCall) -> HookAnswer {
        self.calls.lock().unwrap().push((node.to_owned(), path.to_owned(), call.clone()));
        self.answer.lock().unwrap().clone().unwrap_or(HookAnswer::Waiting)
    }
}

fn hooked(store: &Store, name: &str) {
    let hook = json!({"preStop": {"httpGet": {"host": "127.0.0.1", "port": 9190, "path": "/hold/default/vm/compute"}}});
    let patch = json!({"spec": {"containers": [{"name": "compute", "lifecycle": hook,
                                                 "resources": {"requests": {"memory": "1Gi"}}}]}});
    store.patch(&pods(), "default", name, &Patch::Merge(patch), false).unwrap();
}

#[test]
fn pre_stop_hooks_run_before_sigterm_until_answered() {
    let store = node_with_vms(&[1, 1, 1]);
    let endpoint = Arc::new(Endpoint::default());
    store.register_node_endpoint(9190, Arc::clone(&endpoint) as _);
    for i in 0..3 {
        hooked(&store, &format!("virt-launcher-vm-{i}"));
    }
    let kubelet = Kubelet::default();
    for i in 0..3 {
        store
            .delete_gracefully(&pods(), "default", &format!("virt-launcher-vm-{i}"), Some(60), false)
            .unwrap();
    }
    // Held: the VMs run on while the hooks wait.
    run_until(&kubelet, &store, secs(30));
    for i in 0..3 {
        assert_eq!(vmi(&store, &format!("vm-{i}"))["status"]["phase"], "Running");
    }
    let calls = endpoint.calls.lock().unwrap().clone();
    let (node, path, call) = &calls[0];
    assert_eq!(
        (node.as_str(), path.as_str(), call.container.as_str()),
        ("n1", "/hold/default/vm/compute", "compute")
    );
    assert_eq!(call.since, Duration::ZERO, "the hook began with the deletion");
    // The endpoint answers: SIGTERM, and the guests shut down 6 s later.
    *endpoint.answer.lock().unwrap() = Some(HookAnswer::Answered(200));
    run_until(&kubelet, &store, secs(37));
    for i in 0..3 {
        assert_eq!(vmi(&store, &format!("vm-{i}"))["status"]["phase"], "Succeeded");
    }
}

#[test]
fn a_failed_hook_ends_at_once_with_the_kubelet_s_event_and_no_hook_outlasts_the_grace_period() {
    let store = node_with_vms(&[1, 1]);
    let endpoint = Arc::new(Endpoint::default());
    store.register_node_endpoint(9190, Arc::clone(&endpoint) as _);
    hooked(&store, "virt-launcher-vm-0");
    hooked(&store, "virt-launcher-vm-1");
    let kubelet = Kubelet::default();
    store.delete_gracefully(&pods(), "default", "virt-launcher-vm-0", Some(60), false).unwrap();
    run_until(&kubelet, &store, secs(59));
    assert_eq!(vmi(&store, "vm-0")["status"]["phase"], "Running");
    // The grace period's end ends the hook: SIGTERM, then SIGKILL 2 s later, before the guest
    // (asked after 1 s, 5 s to power off) is done.
    run_until(&kubelet, &store, secs(62));
    assert_eq!(vmi(&store, "vm-0")["status"]["phase"], "Failed");
    assert!(pod(&store, "virt-launcher-vm-0").is_none());

    *endpoint.answer.lock().unwrap() = Some(HookAnswer::Failed("connection refused".into()));
    store.delete_gracefully(&pods(), "default", "virt-launcher-vm-1", Some(60), false).unwrap();
    run_until(&kubelet, &store, secs(70));
    assert_eq!(vmi(&store, "vm-1")["status"]["phase"], "Succeeded", "shut down at once, as without a hook");
    let (events, _) = store.list(&Kind::new("v1", "Event"), None, None, None);
    let failed: Vec<&str> = events
        .iter()
        .filter(|e| e["reason"] == "FailedPreStopHook")
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].starts_with("HTTP lifecycle hook (/hold/default/vm/compute) for Container \"compute\""),
        "{}",
        failed[0]
    );
    assert!(failed[0].ends_with("failed - error: connection refused"), "{}", failed[0]);
}

#[test]
fn a_node_that_is_down_has_no_kubelet() {
    let store = node_with_vms(&[4, 4]); // 0 available: the hard threshold
    let patch = json!({"metadata": {"annotations": {DOWN_ANNOTATION: "true"}}});
    store.patch(&Kind::new("v1", "Node"), "", "n1", &Patch::Merge(patch), false).unwrap();
    store.delete_gracefully(&pods(), "default", "virt-launcher-vm-0", Some(60), false).unwrap();
    let kubelet = Kubelet::default();
    run_until(&kubelet, &store, secs(600));
    assert!(pod(&store, "virt-launcher-vm-0").is_some(), "stuck terminating");
    assert_eq!(pod(&store, "virt-launcher-vm-1").unwrap()["status"]["phase"], "Running", "nobody evicts");
}
