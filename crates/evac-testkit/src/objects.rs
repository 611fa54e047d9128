//! Builders of the cluster objects and requests the tables are made of (the launcher pod and VMI
//! builders are the end-to-end tests' too).

use serde_json::{json, Value};

/// The namespace of the tables' pods and VMIs.
pub(crate) const NS: &str = "default";
/// The node they run on.
pub(crate) const NODE: &str = "node01";
/// Another node.
pub(crate) const OTHER_NODE: &str = "node02";

/// A VMI's own `spec.evictionStrategy` in the tables: unset, each of KubeVirt's, and one it does
/// not know (which acts as `None`).
pub(crate) const OWN_STRATEGIES: [Option<&str>; 6] = [
    None,
    Some("None"),
    Some("LiveMigrate"),
    Some("LiveMigrateIfPossible"),
    Some("External"),
    Some("Sideways"),
];

/// A JSON pointer's reference token, unescaped (`~1` is `/`, `~0` is `~`).
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// `value` with the field at JSON pointer `pointer` set to `new` (objects on the way are created).
pub(crate) fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let mut target = &mut value;
    for token in pointer.split('/').skip(1).map(unescape) {
        if !target.is_object() {
            *target = json!({});
        }
        target = target.as_object_mut().expect("an object").entry(token).or_insert(Value::Null);
    }
    *target = new;
    value
}

/// `value` without the field at `pointer`, which must be there.
pub(crate) fn without(mut value: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a JSON pointer");
    let removed = match value.pointer_mut(parent) {
        Some(Value::Object(object)) => object.remove(&unescape(key)),
        _ => None,
    };
    assert!(removed.is_some(), "{pointer} is not in {value}");
    value
}

/// The name of VMI `vmi`'s launcher pod.
pub fn launcher_name(vmi: &str) -> String {
    format!("virt-launcher-{vmi}-abcde")
}

/// A running `virt-launcher` pod of VMI `vmi` on `node`.
pub fn launcher_pod(namespace: &str, vmi: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": launcher_name(vmi), "namespace": namespace,
            "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": vmi},
            "annotations": {"kubevirt.io/domain": vmi},
            "ownerReferences": [{
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                "name": vmi, "uid": format!("uid-{vmi}"), "controller": true,
            }],
        },
        "spec": {"nodeName": node, "containers": [{"name": "compute", "image": "virt-launcher"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    })
}

/// A running VMI on `node` (labelled with it, as KubeVirt does), with `spec.evictionStrategy`
/// when given and the `LiveMigratable` condition set to `migratable`.
pub fn vmi(namespace: &str, name: &str, strategy: Option<&str>, migratable: bool, node: &str) -> Value {
    let mut vmi = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {
            "name": name, "namespace": namespace, "uid": format!("uid-{name}"),
            "labels": {"kubevirt.io/nodeName": node},
        },
        "spec": {"domain": {"devices": {}, "memory": {"guest": "1Gi"}}},
        "status": {
            "nodeName": node, "phase": "Running",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "LiveMigratable", "status": if migratable { "True" } else { "False" }},
            ],
        },
    });
    if let Some(strategy) = strategy {
        vmi["spec"]["evictionStrategy"] = json!(strategy);
    }
    vmi
}

/// The KubeVirt CR `kubevirt/<name>`, with the cluster-wide strategy when given and these
/// feature gates.
pub(crate) fn kubevirt_cr(name: &str, strategy: Option<&str>, gates: &[&str]) -> Value {
    let mut cr = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": name, "namespace": "kubevirt"},
        "spec": {"configuration": {"developerConfiguration": {"featureGates": gates}}},
        "status": {"phase": "Deployed"},
    });
    if let Some(strategy) = strategy {
        cr["spec"]["configuration"]["evictionStrategy"] = json!(strategy);
    }
    cr
}

/// Node `name`, with `MemoryPressure` when `pressure`, and `available` memory when given: its
/// capacity, of which its NodeMetrics ([`idle_node_metrics`], which the tables serve for every
/// node with a capacity) say none is in use.
pub(crate) fn node(name: &str, pressure: bool, available: Option<&str>) -> Value {
    let mut node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name},
        "status": {"conditions": [
            {"type": "MemoryPressure", "status": if pressure { "True" } else { "False" }},
            {"type": "Ready", "status": "True"},
        ]},
    });
    if let Some(available) = available {
        node["status"]["capacity"] = json!({"memory": available});
    }
    node
}

/// metrics-server's NodeMetrics of `node`, with no memory in use.
pub(crate) fn idle_node_metrics(node: &str) -> Value {
    json!({
        "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
        "metadata": {"name": node},
        "timestamp": "2026-11-21T09:39:50Z", "window": "10s",
        "usage": {"cpu": "0", "memory": "0"},
    })
}

/// A pod that is not KubeVirt's.
pub(crate) fn plain_pod(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "nginx"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "nginx", "image": "nginx"}]},
        "status": {"phase": "Running"},
    })
}
