use serde::{Deserialize, Serialize};

use super::{null_as_default, Condition, ObjectMeta, Str};

/// A `kubevirt.io/v1` VirtualMachineInstance.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct VirtualMachineInstance<'a> {
    /// `metadata`: a VMI being deleted has a `deletionTimestamp`.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `spec`: the eviction strategy and the VM's size.
    #[serde(deserialize_with = "null_as_default")]
    pub spec: VmiSpec,
    /// `status`: where the VM runs, its evacuation mark, phase and conditions.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: VmiStatus<'a>,
}

/// A VMI's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VmiSpec {
    /// `spec.evictionStrategy`: unset falls back to the cluster-wide strategy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<EvictionStrategy>,
    /// `spec.domain`: the VM's size.
    #[serde(deserialize_with = "null_as_default")]
    pub domain: VmiDomain,
}

/// The parts of `spec.domain` that size the VM: `memory.guest`, else `resources.requests.memory`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct VmiDomain {
    /// `spec.domain.memory`, whose `guest` is the guest's memory.
    #[serde(deserialize_with = "null_as_default")]
    pub memory: serde_json::Map<String, serde_json::Value>,
    /// `spec.domain.resources`, whose `requests.memory` sizes the VM when `memory.guest` is unset.
    #[serde(deserialize_with = "null_as_default")]
    pub resources: serde_json::Map<String, serde_json::Value>,
}

/// A VMI's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VmiStatus<'a> {
    /// `status.nodeName`: the node the VM runs on; a migration changes it to the target node.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub node_name: Str<'a>,
    /// `status.evacuationNodeName`: the node the VMI is to leave, set when it is marked for evacuation
    /// (by KubeVirt's eviction admitter, or by evac).
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub evacuation_node_name: Str<'a>,
    /// `status.phase`: `Pending`, `Scheduling`, `Scheduled`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub phase: Str<'a>,
    /// `status.conditions`, e.g. `LiveMigratable`.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition<'a>>,
}

/// The VMI condition KubeVirt sets when a VMI can be live-migrated.
pub const LIVE_MIGRATABLE_CONDITION: &str = "LiveMigratable";

impl VirtualMachineInstance<'_> {
    /// `vmi.IsMigratable()`: the `LiveMigratable` condition is `True`.
    pub fn is_migratable(&self) -> bool {
        Condition::is_true(&self.status.conditions, LIVE_MIGRATABLE_CONDITION)
    }

    /// The guest's memory in bytes: `spec.domain.memory.guest`, else the memory request.
    pub fn memory(&self) -> Option<f64> {
        let guest = self.spec.domain.memory.get("guest").and_then(|q| q.as_str());
        let requested =
            self.spec.domain.resources.get("requests").and_then(|r| r.get("memory")).and_then(|q| q.as_str());
        guest.or(requested).and_then(super::quantity::bytes)
    }

    /// Whether the VMI is being deleted (it has a `deletionTimestamp`): its user wants the VM stopped.
    pub fn is_being_deleted(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// `vmi.IsMarkedForEviction()`: `status.evacuationNodeName` is set.
    pub fn is_marked_for_evacuation(&self) -> bool {
        !self.status.evacuation_node_name.is_empty()
    }

    /// The VMI's eviction strategy, falling back to the cluster-wide one
    /// (`migrations.VMIEvictionStrategy`).
    pub fn eviction_strategy<'s>(
        &'s self,
        cluster_wide: Option<&'s EvictionStrategy>,
    ) -> Option<&'s EvictionStrategy> {
        self.spec.eviction_strategy.as_ref().or(cluster_wide)
    }
}

/// `spec.evictionStrategy` of a VMI, or the cluster-wide one in the KubeVirt CR.
///
/// A value KubeVirt does not know is kept as [`EvictionStrategy::Unknown`] and, as in KubeVirt,
/// treated like no action.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(from = "String", into = "String")]
pub enum EvictionStrategy {
    /// `None`: the launcher pod is evicted like any pod, and the VM shuts down.
    None,
    /// `LiveMigrate`: the VM migrates away; an eviction is refused while it is not live-migratable.
    LiveMigrate,
    /// `LiveMigrateIfPossible`: the VM migrates away if it is live-migratable, else the pod is evicted.
    LiveMigrateIfPossible,
    /// `External`: the VMI is marked and the eviction refused; an external controller moves the VM.
    External,
    /// A value KubeVirt does not know, as written; it acts like `None`.
    Unknown(String),
}

impl From<String> for EvictionStrategy {
    fn from(value: String) -> Self {
        match value.as_str() {
            "None" => Self::None,
            "LiveMigrate" => Self::LiveMigrate,
            "LiveMigrateIfPossible" => Self::LiveMigrateIfPossible,
            "External" => Self::External,
            _ => Self::Unknown(value),
        }
    }
}

impl From<EvictionStrategy> for String {
    fn from(value: EvictionStrategy) -> Self {
        match value {
            EvictionStrategy::None => "None".into(),
            EvictionStrategy::LiveMigrate => "LiveMigrate".into(),
            EvictionStrategy::LiveMigrateIfPossible => "LiveMigrateIfPossible".into(),
            EvictionStrategy::External => "External".into(),
            EvictionStrategy::Unknown(other) => other,
        }
    }
}
