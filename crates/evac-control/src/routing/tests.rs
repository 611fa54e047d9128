//! What the controller looks at again, and what it counts, from the changes it reads.

use std::sync::Arc;

use evac_cluster::Change;
use serde_json::{json, Value};

use super::Routing;

fn change(object: Value) -> Change {
    Change { object: Arc::from(serde_json::to_vec(&object).unwrap()), deleted: false }
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {},
           "status": {"capacity": {"memory": "64Gi"}}})
}

fn vmi(name: &str, node: &str, annotations: Value, marked_for: &str) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": name, "namespace": "default", "annotations": annotations},
           "status": {"nodeName": node, "evacuationNodeName": marked_for}})
}

fn metrics(node: &str, working_set: &str) -> Value {
    json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": node},
           "usage": {"cpu": "1", "memory": working_set}})
}

/// A node holding an evacuation request is looked at again at every resync and whenever a slot
/// frees, as a node with marked VMIs is, until the request is marked or withdrawn.
#[test]
fn requested_nodes_are_pending() {
    let mut routing = Routing::default();
    routing.observe("Node", &change(node("node01")));
    let requested =
        json!({"evac.kubevirt.io/evacuate-from": "node01", "kubevirt.io/eviction-source": "preemption"});
    routing.observe("VirtualMachineInstance", &change(vmi("web", "node01", requested, "")));
    routing.take_work(false);
    assert_eq!(routing.pending_nodes(), 1);
    assert_eq!(routing.take_work(false).nodes, Vec::<String>::new(), "nothing changed");
    assert_eq!(routing.take_work(true).nodes, ["node01"], "a resync looks again");
    // Withdrawn: nothing is pending any more.
    routing.observe("VirtualMachineInstance", &change(vmi("web", "node01", json!({}), "")));
    routing.take_work(false);
    assert_eq!(routing.pending_nodes(), 0);
    assert_eq!(routing.take_work(true).nodes, Vec::<String>::new());
}

/// A node's working set moves with every scrape: node pressure is decided again only when it
/// moved by 64 MiB since the figure last acted on.
#[test]
fn node_metrics_count_by_the_step() {
    let mut routing = Routing::default();
    routing.observe("Node", &change(node("node01")));
    routing.take_work(false);
    let decided = |routing: &mut Routing, working_set: &str| {
        routing.observe("NodeMetrics", &change(metrics("node01", working_set)));
        let work = routing.take_work(false);
        assert_eq!(work.pods.len() + work.node_changes.len(), work.nodes.len());
        !work.nodes.is_empty()
    };
    assert!(decided(&mut routing, "1000Mi"), "the first figure");
    assert!(!decided(&mut routing, "1040Mi"), "40 MiB");
    assert!(!decided(&mut routing, "1063Mi"), "63 MiB from the figure acted on");
    assert!(decided(&mut routing, "1064Mi"), "64 MiB");
    assert!(decided(&mut routing, "1000Mi"), "64 MiB down");
}

/// An evacuation migration that ended before its cause was recorded on it counts under the cause
/// of its VMI's mark for that node; one that failed before it started is timed to its Failed
/// transition; one deleted before it ended was cancelled.
#[test]
fn ended_evacuations_keep_their_cause_and_time() {
    let migration = |name: &str, phase: &str, status: Value| {
        let mut m = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
               "metadata": {"name": name, "namespace": "default",
                            "creationTimestamp": "2026-11-23T10:00:00Z",
                            "annotations": {"kubevirt.io/evacuationMigration": "node01"}},
               "spec": {"vmiName": "web"}, "status": status});
        m["status"]["phase"] = json!(phase);
        m
    };
    let start = |routing: &mut Routing, name: &str| {
        routing.observe("Node", &change(node("node01")));
        let source = json!({"kubevirt.io/eviction-source": "node-pressure"});
        routing.observe("VirtualMachineInstance", &change(vmi("web", "node01", source, "node01")));
        routing.observe("VirtualMachineInstanceMigration", &change(migration(name, "Pending", json!({}))));
        routing.take_work(false);
    };

    // Failed before it started: the mark stays; timed to the Failed transition.
    let mut routing = Routing::default();
    start(&mut routing, "a");
    let failed = json!({"phaseTransitionTimestamps": [
        {"phase": "Pending", "phaseTransitionTimestamp": "2026-11-23T10:00:00Z"},
        {"phase": "Failed", "phaseTransitionTimestamp": "2026-11-23T10:05:00Z"}]});
    routing.observe("VirtualMachineInstanceMigration", &change(migration("a", "Failed", failed)));
    let ended = routing.take_work(false).ended;
    assert_eq!(ended.len(), 1);
    assert_eq!(
        (ended[0].cause.as_str(), ended[0].outcome, ended[0].seconds),
        ("node-pressure", "failed", Some(300.0))
    );

    // Succeeded: KubeVirt moves the VMI and clears its mark and source before the migration's end
    // is seen.
    let mut routing = Routing::default();
    start(&mut routing, "b");
    routing.observe("VirtualMachineInstance", &change(vmi("web", "node02", json!({}), "")));
    let done = json!({"migrationState": {"endTimestamp": "2026-11-23T10:01:00Z"}});
    routing.observe("VirtualMachineInstanceMigration", &change(migration("b", "Succeeded", done)));
    let ended = routing.take_work(false).ended;
    assert_eq!(
        (ended[0].cause.as_str(), ended[0].outcome, ended[0].seconds),
        ("node-pressure", "succeeded", Some(60.0))
    );

    // Called off on its node, then the waiting retry deleted: cancelled, and the called-off
    // mark's source is not taken for its cause.
    let mut routing = Routing::default();
    start(&mut routing, "c");
    routing.observe("VirtualMachineInstance", &change(vmi("web", "node01", json!({}), "")));
    let deleted = Change { deleted: true, ..change(migration("c", "Pending", json!({}))) };
    routing.observe("VirtualMachineInstanceMigration", &deleted);
    let ended = routing.take_work(false).ended;
    assert_eq!((ended[0].cause.as_str(), ended[0].outcome), ("unknown", "cancelled"));
}
