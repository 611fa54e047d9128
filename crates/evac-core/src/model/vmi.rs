use serde::{Deserialize, Serialize};

use super::{null_as_default, Condition, ObjectMeta, Str};

/// A `kubevirt.io/v1` VirtualMachineInstance.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct VirtualMachineInstance<'a> {
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    #[serde(deserialize_with = "null_as_default")]
    pub spec: VmiSpec,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: VmiStatus<'a>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VmiSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<EvictionStrategy>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VmiStatus<'a> {
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub node_name: Str<'a>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub evacuation_node_name: Str<'a>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub phase: Str<'a>,
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
    None,
    LiveMigrate,
    LiveMigrateIfPossible,
    External,
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
