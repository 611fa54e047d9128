//! Nodes: whether a node is being drained or tainted, and how much memory it has left.

use serde::{Deserialize, Serialize};

use super::{null_as_default, Condition, ObjectMeta, RawMap, Str};

/// A `v1` Node.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Node<'a> {
    /// `metadata`, with the [`MEMORY_AVAILABLE_ANNOTATION`] a node agent publishes.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `spec`: whether the node is cordoned, and its taints.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: NodeSpec<'a>,
    /// `status`: the node's memory and conditions.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: NodeStatus<'a>,
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

/// KubeVirt's drain taint: virt-handler's node is being drained (`kubevirt.io/drain:NoSchedule`).
pub const DRAIN_TAINT_KEY: &str = "kubevirt.io/drain";
/// The node condition the kubelet sets while memory is short.
pub const MEMORY_PRESSURE_CONDITION: &str = "MemoryPressure";
/// Memory left on the node (`memory.available` as the kubelet computes it), as a quantity,
/// published by a node agent (or the simulator's kubelet). The kubelet's summary API has the
/// figure; Node objects do not.
pub const MEMORY_AVAILABLE_ANNOTATION: &str = "evac.kubevirt.io/memory-available";

impl Node<'_> {
    /// Whether the node has a taint with this key and effect, whatever its value.
    pub fn has_taint(&self, key: &str, effect: &str) -> bool {
        self.spec.taints.iter().any(|t| t.key == key && t.effect == effect)
    }

    /// Whether the node carries KubeVirt's drain taint.
    pub fn is_drain_tainted(&self) -> bool {
        self.has_taint(DRAIN_TAINT_KEY, "NoSchedule")
    }

    /// Whether the kubelet reports the `MemoryPressure` condition `True`.
    pub fn has_memory_pressure(&self) -> bool {
        Condition::is_true(&self.status.conditions, MEMORY_PRESSURE_CONDITION)
    }

    /// Memory left on the node, in bytes, when a node agent publishes it.
    pub fn memory_available(&self) -> Option<f64> {
        self.metadata.annotation(MEMORY_AVAILABLE_ANNOTATION).and_then(|q| super::quantity::bytes(&q))
    }

    /// `status.capacity.memory`, in bytes.
    pub fn memory_capacity(&self) -> Option<f64> {
        self.status.capacity.get("memory").and_then(|q| super::quantity::bytes(&q))
    }
}
