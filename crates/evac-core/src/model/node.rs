//! Nodes: whether a node is being drained or tainted, and how much memory it has left.

use serde::{Deserialize, Serialize};

use super::{null_as_default, Condition, ObjectMeta, RawMap, Str};

/// A `v1` Node.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Node<'a> {
    /// `metadata`.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `spec`: whether the node is cordoned, and its taints.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: NodeSpec<'a>,
    /// `status`: the node's memory and conditions.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: NodeStatus<'a>,
    /// The node's memory working set, from its NodeMetrics (`metrics.k8s.io`), when a decision
    /// read them ([`crate::node_pressure::read_working_set`]): not part of the Node object.
    #[serde(skip)]
    pub working_set: Option<f64>,
}

/// A node's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSpec<'a> {
    /// `unschedulable`: the node is cordoned (`kubectl cordon`, `kubectl drain`).
    #[serde(deserialize_with = "null_as_default")]
    pub unschedulable: bool,
    /// `taints`: pods that do not tolerate them are not scheduled there, or are evicted (`NoExecute`).
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint<'a>>,
}

/// An entry of a node's `spec.taints`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Taint<'a> {
    /// `key`, e.g. `kubevirt.io/drain`.
    #[serde(borrow)]
    pub key: Str<'a>,
    /// `value`; often empty.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub value: Str<'a>,
    /// `effect`: `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(borrow)]
    pub effect: Str<'a>,
}

/// An entry of a pod's (or VMI's) `spec.tolerations`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Toleration<'a> {
    /// `key`; empty with `Exists`: every key.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub key: Str<'a>,
    /// `operator`: `Equal` (empty reads as `Equal`) or `Exists`.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub operator: Str<'a>,
    /// `value`, compared by `Equal`.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub value: Str<'a>,
    /// `effect`; empty: every effect.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub effect: Str<'a>,
    /// `tolerationSeconds`: how long a `NoExecute` taint is tolerated; unset: for ever.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

impl Toleration<'_> {
    /// Kubernetes' `Toleration.ToleratesTaint` (`staging/src/k8s.io/api/core/v1/toleration.go`):
    /// the effect and the key match when the toleration leaves them empty or names the taint's;
    /// `Exists` takes any value, `Equal` the taint's; any other operator tolerates nothing.
    pub fn tolerates(&self, taint: &Taint<'_>) -> bool {
        (self.effect.is_empty() || self.effect == taint.effect)
            && (self.key.is_empty() || self.key == taint.key)
            && match self.operator.as_str() {
                "" | "Equal" => self.value == taint.value,
                "Exists" => true,
                _ => false,
            }
    }
}

/// A node's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeStatus<'a> {
    /// `capacity`: the node's total resources, e.g. `memory`.
    #[serde(borrow, skip_serializing_if = "RawMap::is_empty")]
    pub capacity: RawMap<'a>,
    /// `allocatable`: the part of the capacity pods may use.
    #[serde(borrow, skip_serializing_if = "RawMap::is_empty")]
    pub allocatable: RawMap<'a>,
    /// `conditions`, e.g. `Ready`, `MemoryPressure`.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition<'a>>,
}

/// The taint the scheduler reads a cordoned node as (`v1.TaintNodeUnschedulable`).
pub const UNSCHEDULABLE_TAINT_KEY: &str = "node.kubernetes.io/unschedulable";
/// KubeVirt's drain taint: virt-handler's node is being drained (`kubevirt.io/drain:NoSchedule`).
pub const DRAIN_TAINT_KEY: &str = "kubevirt.io/drain";
/// The node condition the kubelet sets while memory is short.
pub const MEMORY_PRESSURE_CONDITION: &str = "MemoryPressure";
/// The taints the node lifecycle controller puts on a node whose kubelet stopped reporting
/// (`pkg/controller/nodelifecycle`, `UnreachableTaintTemplate`, `NotReadyTaintTemplate`).
pub const NODE_DOWN_TAINT_KEYS: [&str; 2] =
    ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"];

impl Node<'_> {
    /// Whether the node has a taint with this key and effect, whatever its value.
    pub fn has_taint(&self, key: &str, effect: &str) -> bool {
        self.spec.taints.iter().any(|t| t.key == key && t.effect == effect)
    }

    /// Whether a pod with these tolerations may be scheduled onto the node, as the scheduler's
    /// `NodeUnschedulable` and `TaintToleration` filters see it: a cordoned node only takes pods
    /// that tolerate `node.kubernetes.io/unschedulable:NoSchedule`, and every `NoSchedule` and
    /// `NoExecute` taint must be tolerated.
    pub fn accepts(&self, tolerations: &[Toleration<'_>]) -> bool {
        let cordon =
            Taint { key: UNSCHEDULABLE_TAINT_KEY.into(), value: Str::default(), effect: "NoSchedule".into() };
        (!self.spec.unschedulable || tolerations.iter().any(|t| t.tolerates(&cordon)))
            && self
                .spec
                .taints
                .iter()
                .filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
                .all(|taint| tolerations.iter().any(|t| t.tolerates(taint)))
    }

    /// Whether the scheduler may place a pod with these tolerations and this node selection
    /// here: [`Node::accepts`], and the node's labels meet the selection.
    pub fn admits(&self, tolerations: &[Toleration<'_>], selection: &super::NodeSelection<'_>) -> bool {
        self.accepts(tolerations) && selection.admits(&self.metadata.name, |key| self.metadata.label(key))
    }

    /// Whether the node carries KubeVirt's drain taint.
    pub fn is_drain_tainted(&self) -> bool {
        self.has_taint(DRAIN_TAINT_KEY, "NoSchedule")
    }

    /// Whether the node is down: its `Ready` condition is not `True`, or the node lifecycle
    /// controller tainted it unreachable or not ready. Nothing runs a hook there, and no VM
    /// migrates away from it (its virt-handler is gone with its kubelet). A node that reports no
    /// conditions at all is not taken for down.
    pub fn is_down(&self) -> bool {
        let ready = self.status.conditions.iter().find(|c| c.type_ == "Ready");
        ready.is_some_and(|c| c.status != "True")
            || self.spec.taints.iter().any(|t| NODE_DOWN_TAINT_KEYS.contains(&t.key.as_str()))
    }

    /// Whether the kubelet reports the `MemoryPressure` condition `True`.
    pub fn has_memory_pressure(&self) -> bool {
        Condition::is_true(&self.status.conditions, MEMORY_PRESSURE_CONDITION)
    }

    /// Memory left on the node, in bytes, as the kubelet's `memory.available` signal has it
    /// (`k8s.io/kubelet/pkg/apis/stats/v1alpha1/types.go`, `MemoryStats.AvailableBytes`: "the
    /// memory limit - workingSetBytes", the node's limit being its capacity):
    /// `status.capacity.memory` less the working set its NodeMetrics report (metrics-server's
    /// `node_memory_working_set_bytes`). Unknown when either is.
    pub fn memory_available(&self) -> Option<f64> {
        Some(self.memory_capacity()? - self.working_set?)
    }

    /// `status.capacity.memory`, in bytes.
    pub fn memory_capacity(&self) -> Option<f64> {
        self.status.capacity.get("memory").and_then(|q| super::quantity::bytes(&q))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(value: serde_json::Value) -> String {
        value.to_string()
    }

    /// `status.capacity.memory`, and the available memory (capacity less the NodeMetrics' working
    /// set), in bytes; each absent or unreadable figure is unknown, whatever the other says.
    #[test]
    fn memory_figures() {
        const GI: f64 = 1024.0 * 1024.0 * 1024.0;
        let rows = [
            (
                json!({"status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}),
                None,
                Some(32.0 * GI),
                None,
            ),
            (json!({"status": {"capacity": {"memory": "16266380Ki"}}}), None, Some(16_656_773_120.0), None),
            (
                json!({"status": {"capacity": {"memory": "32Gi"}}}),
                Some(28.0 * GI),
                Some(32.0 * GI),
                Some(4.0 * GI),
            ),
            // Allocatable is not capacity.
            (json!({"status": {"allocatable": {"memory": "31Gi"}}}), Some(GI), None, None),
            (json!({"status": {"capacity": {"memory": "lots"}}}), Some(GI), None, None),
            (json!({}), None, None, None),
        ];
        for (value, working_set, capacity, available) in rows {
            let text = node(value);
            let mut node: Node<'_> = serde_json::from_str(&text).unwrap();
            node.working_set = working_set;
            assert_eq!(node.memory_capacity(), capacity, "capacity of {text}");
            assert_eq!(node.memory_available(), available, "available of {text} with {working_set:?} in use");
        }
    }

    /// Taints are matched by key and effect both; KubeVirt's drain taint is
    /// `kubevirt.io/drain:NoSchedule`.
    #[test]
    fn taints() {
        let taint = |key: &str, effect: &str| json!({"key": key, "effect": effect});
        // (taints, kubevirt.io/drain:NoSchedule, node.kubernetes.io/unreachable:NoExecute)
        let rows = [
            (json!([]), false, false),
            (json!([taint(DRAIN_TAINT_KEY, "NoSchedule")]), true, false),
            (json!([taint(DRAIN_TAINT_KEY, "NoExecute")]), false, false),
            (json!([taint(DRAIN_TAINT_KEY, "PreferNoSchedule")]), false, false),
            (json!([taint("node.kubernetes.io/unschedulable", "NoSchedule")]), false, false),
            (json!([taint("node.kubernetes.io/unreachable", "NoExecute")]), false, true),
            (
                json!([
                    taint("node.kubernetes.io/unreachable", "NoSchedule"),
                    taint(DRAIN_TAINT_KEY, "NoExecute")
                ]),
                false,
                false,
            ),
            (
                json!([
                    taint("node.kubernetes.io/unreachable", "NoExecute"),
                    taint(DRAIN_TAINT_KEY, "NoSchedule")
                ]),
                true,
                true,
            ),
        ];
        for (taints, drain, unreachable) in rows {
            let text = node(json!({"spec": {"taints": taints}}));
            let node: Node<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(node.is_drain_tainted(), drain, "{taints}");
            assert_eq!(node.has_taint(DRAIN_TAINT_KEY, "NoSchedule"), drain, "{taints}");
            assert_eq!(
                node.has_taint("node.kubernetes.io/unreachable", "NoExecute"),
                unreachable,
                "{taints}"
            );
        }
    }

    #[test]
    fn memory_pressure_is_the_condition_being_true() {
        let condition = |type_: &str, status: &str| json!({"type": type_, "status": status});
        let rows = [
            (json!([]), false),
            (json!([condition("Ready", "True"), condition(MEMORY_PRESSURE_CONDITION, "True")]), true),
            (json!([condition(MEMORY_PRESSURE_CONDITION, "False")]), false),
            (json!([condition(MEMORY_PRESSURE_CONDITION, "Unknown")]), false),
            (json!([condition("DiskPressure", "True")]), false),
        ];
        for (conditions, pressure) in rows {
            let text = node(json!({"status": {"conditions": conditions}}));
            let node: Node<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(node.has_memory_pressure(), pressure, "{conditions}");
        }
    }

    /// Kubernetes' `ToleratesTaint`, row by row from `toleration_test.go`'s cases: effect and key
    /// empty match all, `Exists` any value, `Equal` (or no operator) the same value only.
    #[test]
    fn tolerations_tolerate_taints_as_kubernetes_does() {
        let taint = Taint { key: "dedicated".into(), value: "gpu".into(), effect: "NoSchedule".into() };
        let rows = [
            (json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}), true),
            (json!({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}), true),
            (json!({"key": "dedicated", "value": "cpu", "effect": "NoSchedule"}), false),
            (json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}), true),
            (json!({"key": "dedicated", "operator": "Exists"}), true),
            (json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}), false),
            (json!({"key": "other", "operator": "Exists"}), false),
            (json!({"operator": "Exists"}), true),
            (json!({"operator": "Exists", "effect": "NoExecute"}), false),
            (json!({"key": "dedicated", "operator": "Lt", "value": "gpu"}), false),
            (json!({}), false),
        ];
        for (toleration, tolerates) in rows {
            let text = toleration.to_string();
            let parsed: Toleration<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(parsed.tolerates(&taint), tolerates, "{text}");
        }
    }

    /// The scheduler's `NodeUnschedulable` and `TaintToleration` filters: NoSchedule and NoExecute
    /// taints keep a pod off unless tolerated, PreferNoSchedule does not; a cordoned node takes
    /// only pods tolerating `node.kubernetes.io/unschedulable`.
    #[test]
    fn nodes_accept_pods_that_tolerate_their_taints() {
        let tolerate = |key: &'static str| {
            vec![Toleration { key: key.into(), operator: "Exists".into(), ..Default::default() }]
        };
        let rows = [
            (json!({}), vec![], true),
            (json!({"unschedulable": true}), vec![], false),
            (json!({"unschedulable": true}), tolerate(UNSCHEDULABLE_TAINT_KEY), true),
            (json!({"taints": [{"key": "a", "effect": "PreferNoSchedule"}]}), vec![], true),
            (json!({"taints": [{"key": "a", "effect": "NoSchedule"}]}), vec![], false),
            (json!({"taints": [{"key": "a", "effect": "NoExecute"}]}), vec![], false),
            (json!({"taints": [{"key": "a", "effect": "NoExecute"}]}), tolerate("a"), true),
            (
                json!({"taints": [{"key": "a", "effect": "NoExecute"}, {"key": "b", "effect": "NoSchedule"}]}),
                tolerate("a"),
                false,
            ),
        ];
        for (spec, tolerations, accepts) in rows {
            let text = node(json!({"spec": spec}));
            let parsed: Node<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(parsed.accepts(&tolerations), accepts, "{text} {tolerations:?}");
        }
    }
}
