use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::actors::Kubelet;
use crate::{SimClock, Simulation};

fn cluster() -> Arc<Store> {
    Arc::new(Store::new(Arc::new(SimClock::default()), 10_000))
}

/// A node offering `allocatable` to pods; its capacity is 4 GiB more (the system's share), so the
/// kubelet never sees memory pressure below its 3500 MiB threshold.
fn node(store: &Store, name: &str, allocatable: u32, spec: Value) {
    let node = json!({"metadata": {"name": name}, "spec": spec,
                      "status": {"allocatable": {"memory": format!("{allocatable}Gi")},
                                 "capacity": {"memory": format!("{}Gi", allocatable + 4)}}});
    store.create(&nodes(), "", node, false).unwrap();
}

/// A pod requesting `memory` GiB, bound to `node` ("" for a pending one), with a 20 s grace period.
fn pod(store: &Store, name: &str, node: &str, memory: u32, priority: i64) {
    pod_with(store, name, node, memory, json!({"priority": priority}));
}

fn pod_with(store: &Store, name: &str, node: &str, memory: u32, mut spec: Value) {
    spec["nodeName"] = json!(node);
    spec["terminationGracePeriodSeconds"] = json!(20);
    spec["containers"] = json!([{"name": "c", "resources": {"requests": {"memory": format!("{memory}Gi")}}}]);
    let phase = if node.is_empty() { "Pending" } else { "Running" };
    let pod = json!({"metadata": {"name": name}, "spec": spec, "status": {"phase": phase}});
    store.create(&pods(), "default", pod, false).unwrap();
}

fn get(store: &Store, name: &str) -> Arc<Value> {
    store.get(&pods(), "default", name).unwrap()
}

fn node_of(store: &Store, name: &str) -> String {
    Pod(&get(store, name)).node_name().unwrap_or_default().to_owned()
}

/// The pods being deleted, by name.
fn terminating(store: &Store) -> Vec<String> {
    let (pods, _) = store.list(&pods(), None, None, None);
    pods.iter().map(|p| Pod(p)).filter(|p| p.is_terminating()).map(|p| p.meta().name().to_owned()).collect()
}

#[test]
fn binds_to_the_fitting_node_with_the_most_free_memory() {
    let store = cluster();
    // Each node the pod must not use would otherwise be the roomiest.
    node(&store, "cordoned", 64, json!({"unschedulable": true}));
    node(
        &store,
        "no-schedule",
        48,
        json!({"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}),
    );
    node(
        &store,
        "no-execute",
        40,
        json!({"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]}),
    );
    node(&store, "full", 32, json!({}));
    pod(&store, "resident", "full", 31, 0);
    node(&store, "small", 4, json!({}));
    node(&store, "medium", 8, json!({}));
    pod(&store, "neighbour", "medium", 2, 0);
    pod(&store, "plain", "", 2, 0);
    let tolerations =
        json!([{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]);
    pod_with(&store, "tolerant", "", 2, json!({"tolerations": tolerations}));

    assert_eq!(Scheduler.reconcile(&store).unwrap(), None);
    // medium has 6 GiB free, small 4 GiB, full 1 GiB.
    assert_eq!(node_of(&store, "plain"), "medium");
    assert_eq!(get(&store, "plain")["status"]["phase"], "Running");
    assert_eq!(node_of(&store, "tolerant"), "no-schedule");
    let revision = store.revision();
    Scheduler.reconcile(&store).unwrap();
    assert_eq!(store.revision(), revision, "nothing pending: no writes");
}

#[test]
fn pods_bound_in_one_reconcile_do_not_overcommit_a_node() {
    let store = cluster();
    node(&store, "a", 4, json!({}));
    node(&store, "b", 3, json!({}));
    for name in ["p1", "p2", "p3", "p4"] {
        pod(&store, name, "", 2, 0);
    }
    Scheduler.reconcile(&store).unwrap();
    // p1 takes a (4 free), p2 b (3 free), p3 what is left of a; p4 fits nowhere any more.
    assert_eq!(node_of(&store, "p1"), "a");
    assert_eq!(node_of(&store, "p2"), "b");
    assert_eq!(node_of(&store, "p3"), "a");
    assert_eq!(node_of(&store, "p4"), "");
    assert!(terminating(&store).is_empty(), "equal priorities do not preempt");
}

#[test]
fn higher_priority_pods_are_bound_first() {
    let store = cluster();
    node(&store, "n1", 2, json!({}));
    pod(&store, "older-low", "", 2, 0);
    store.clock().advance(Duration::from_secs(1));
    pod(&store, "newer-high", "", 2, 100);
    Scheduler.reconcile(&store).unwrap();
    assert_eq!(node_of(&store, "newer-high"), "n1");
    assert_eq!(node_of(&store, "older-low"), "");
}

#[test]
fn preempts_just_enough_lower_priority_pods_on_the_best_node_then_binds() {
    let store = cluster();
    // n1: freeing 4 GiB takes one priority-0 pod; n0: two of them; n2: one priority-50 pod.
    node(&store, "n0", 4, json!({}));
    pod(&store, "n0-a", "n0", 2, 0);
    pod(&store, "n0-b", "n0", 2, 0);
    node(&store, "n1", 8, json!({}));
    pod(&store, "small", "n1", 2, 0);
    pod(&store, "big", "n1", 4, 0);
    pod(&store, "peer", "n1", 2, 100);
    node(&store, "n2", 8, json!({}));
    pod(&store, "mid", "n2", 8, 50);
    pod(&store, "preemptor", "", 4, 100);

    Scheduler.reconcile(&store).unwrap();
    assert_eq!(
        terminating(&store),
        ["big"],
        "one victim, the lowest-priority, largest pod that frees enough"
    );
    let victim = get(&store, "big");
    let condition = &victim["status"]["conditions"][0];
    assert_eq!(condition["type"], "DisruptionTarget");
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], REASON);
    assert_eq!(condition["message"], "default-scheduler: preempting to accommodate a higher priority pod");
    assert!(victim.pointer("/metadata/deletionTimestamp").is_some());
    assert_eq!(victim["metadata"]["deletionGracePeriodSeconds"], 20);
    let preemptor = get(&store, "preemptor");
    assert_eq!(preemptor["status"]["nominatedNodeName"], "n1");
    assert_eq!(Pod(&preemptor).node_name(), None, "it waits for its victim");

    // Its victim still holds the room: the preemptor waits, and preempts no one else.
    let revision = store.revision();
    Scheduler.reconcile(&store).unwrap();
    assert_eq!(store.revision(), revision);
    let simulation =
        Simulation::new(Arc::clone(&store), vec![Box::new(Scheduler), Box::new(Kubelet::default())]);
    let start = store.clock().elapsed();
    simulation.run_until(start + Duration::from_secs(10)).unwrap();
    assert_eq!(terminating(&store), ["big"]);
    assert_eq!(node_of(&store, "preemptor"), "");

    // Its grace period over, the victim is gone and the preemptor runs in its place.
    simulation.run_until(start + Duration::from_secs(21)).unwrap();
    assert!(store.get(&pods(), "default", "big").is_err());
    assert_eq!(node_of(&store, "preemptor"), "n1");
    assert_eq!(get(&store, "preemptor")["status"]["phase"], "Running");
    assert!(terminating(&store).is_empty());
    for survivor in ["n0-a", "n0-b", "small", "peer", "mid"] {
        assert!(get(&store, survivor).pointer("/status/conditions").is_none(), "{survivor} untouched");
    }
}

#[test]
fn the_message_names_the_preemptors_scheduler() {
    let store = cluster();
    node(&store, "n1", 4, json!({}));
    pod(&store, "low", "n1", 4, 0);
    pod_with(&store, "preemptor", "", 4, json!({"priority": 100, "schedulerName": "my-scheduler"}));
    Scheduler.reconcile(&store).unwrap();
    let condition = &get(&store, "low")["status"]["conditions"][0];
    assert_eq!(condition["message"], "my-scheduler: preempting to accommodate a higher priority pod");
}

#[test]
fn two_preemptors_share_no_victim_and_both_end_up_bound() {
    let store = cluster();
    node(&store, "n1", 8, json!({}));
    pod(&store, "low-1", "n1", 4, 0);
    pod(&store, "low-2", "n1", 4, 0);
    pod(&store, "first", "", 4, 100);
    pod(&store, "second", "", 4, 100);
    Scheduler.reconcile(&store).unwrap();
    // The second waits: the first's victim still holds its memory, and the rest is the first's.
    assert_eq!(terminating(&store).len(), 1);
    assert_eq!(get(&store, "first")["status"]["nominatedNodeName"], "n1");
    assert!(get(&store, "second").pointer("/status/nominatedNodeName").is_none());

    let simulation =
        Simulation::new(Arc::clone(&store), vec![Box::new(Scheduler), Box::new(Kubelet::default())]);
    simulation.run_until(store.clock().elapsed() + Duration::from_secs(41)).unwrap();
    assert_eq!(node_of(&store, "first"), "n1");
    assert_eq!(node_of(&store, "second"), "n1");
    assert!(store.get(&pods(), "default", "low-1").is_err());
    assert!(store.get(&pods(), "default", "low-2").is_err());
}

#[test]
fn a_nominated_pods_room_is_kept_from_lower_priority_pods() {
    let store = cluster();
    node(&store, "n1", 4, json!({}));
    pod(&store, "low", "n1", 2, 0);
    pod(&store, "preemptor", "", 4, 100);
    pod(&store, "latecomer", "", 2, 0);
    Scheduler.reconcile(&store).unwrap();
    assert_eq!(terminating(&store), ["low"]);
    assert_eq!(node_of(&store, "latecomer"), "", "the 2 GiB left are the preemptor's");
}

#[test]
fn equal_or_higher_priority_pods_are_never_victims() {
    let store = cluster();
    node(&store, "n1", 8, json!({}));
    pod(&store, "equal", "n1", 4, 100);
    pod(&store, "higher", "n1", 4, 200);
    pod(&store, "preemptor", "", 2, 100);
    Scheduler.reconcile(&store).unwrap();
    assert!(terminating(&store).is_empty());
    assert!(get(&store, "preemptor").pointer("/status/nominatedNodeName").is_none());
}

#[test]
fn a_pod_that_never_preempts_does_not() {
    let store = cluster();
    node(&store, "n1", 4, json!({}));
    pod(&store, "low", "n1", 4, 0);
    pod_with(&store, "polite", "", 2, json!({"priority": 100, "preemptionPolicy": "Never"}));
    Scheduler.reconcile(&store).unwrap();
    assert!(terminating(&store).is_empty());
    assert_eq!(node_of(&store, "polite"), "");
}

#[test]
fn nothing_is_preempted_when_it_would_not_make_room() {
    let store = cluster();
    // n1: all of its lower-priority pods free 2 GiB of the 4 needed; n2 is cordoned.
    node(&store, "n1", 8, json!({}));
    pod(&store, "low", "n1", 2, 0);
    pod(&store, "high", "n1", 6, 200);
    node(&store, "n2", 8, json!({"unschedulable": true}));
    pod(&store, "cordoned-low", "n2", 8, 0);
    pod(&store, "preemptor", "", 4, 100);
    Scheduler.reconcile(&store).unwrap();
    assert!(terminating(&store).is_empty());
    assert!(get(&store, "preemptor").pointer("/status/nominatedNodeName").is_none());
}

#[test]
fn pods_fit_by_their_requests() {
    // NodeResourcesFit counts requests: a launcher pod requests its VM's memory (KubeVirt sets the
    // compute container's request), whatever the pod uses.
    let store = cluster();
    let launcher = |name: &str, node: &str, request: &str| {
        let pod = json!({"metadata": {"name": format!("virt-launcher-{name}"), "annotations": {"kubevirt.io/domain": name}},
                         "spec": {"nodeName": node, "containers": [{"name": "compute", "resources": {"requests": {"memory": request}}}]}});
        store.create(&pods(), "default", pod, false).unwrap();
    };
    // n1 has 10 GiB, 8 of them requested by the running VM's pod; n2 has 5 GiB.
    node(&store, "n1", 10, json!({}));
    node(&store, "n2", 5, json!({}));
    launcher("vm-1", "n1", "8Gi");
    pod(&store, "web", "", 3, 0);
    Scheduler.reconcile(&store).unwrap();
    assert_eq!(node_of(&store, "web"), "n2");
    // A pending launcher requesting 6 GiB fits on no node.
    launcher("vm-2", "", "6Gi");
    Scheduler.reconcile(&store).unwrap();
    assert_eq!(node_of(&store, "virt-launcher-vm-2"), "");
    let pending = get(&store, "virt-launcher-vm-2");
    assert_eq!(Pod(&pending).condition("PodScheduled").and_then(|c| c.reason()), Some("Unschedulable"));
}

/// A 1 GiB pod labelled `app: web` whose required anti-affinity (hostname topology) selects
/// `match_labels`, bound to `node` ("" for a pending one).
fn apart_pod(store: &Store, name: &str, node: &str, match_labels: Value) {
    let term =
        json!({"labelSelector": {"matchLabels": match_labels}, "topologyKey": "kubernetes.io/hostname"});
    pod_with(
        store,
        name,
        node,
        1,
        json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}),
    );
    let labelled = Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}}));
    store.patch(&pods(), "default", name, &labelled, false).unwrap();
}

#[test]
fn required_anti_affinity_keeps_pods_apart_within_one_cycle() {
    let store = cluster();
    node(&store, "big", 64, json!({}));
    node(&store, "middle", 32, json!({}));
    node(&store, "small", 16, json!({}));
    apart_pod(&store, "running", "big", json!({"app": "web"}));
    // Both pending in the same cycle: the second keeps away from where the first was just bound.
    apart_pod(&store, "first", "", json!({"app": "web"}));
    apart_pod(&store, "second", "", json!({"app": "web"}));
    Scheduler.reconcile(&store).unwrap();
    assert_eq!(
        [node_of(&store, "first"), node_of(&store, "second")],
        ["middle".to_owned(), "small".to_owned()]
    );
}

#[test]
fn an_anti_affinity_term_without_labels_keeps_away_from_every_pod() {
    let store = cluster();
    node(&store, "big", 64, json!({}));
    node(&store, "empty", 16, json!({}));
    pod(&store, "other", "big", 1, 0);
    apart_pod(&store, "alone", "", json!({}));
    Scheduler.reconcile(&store).unwrap();
    assert_eq!(node_of(&store, "alone"), "empty");
}
