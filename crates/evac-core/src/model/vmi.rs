use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{null_as_default, Affinity, Condition, NodeSelection, ObjectMeta, Str, Toleration};

/// A `kubevirt.io/v1` VirtualMachineInstance.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct VirtualMachineInstance<'a> {
    /// `metadata`: a VMI being deleted has a `deletionTimestamp`.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `spec`: the eviction strategy, the VM's size and its tolerations.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: VmiSpec<'a>,
    /// `status`: where the VM runs, its evacuation mark, phase and conditions.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: VmiStatus<'a>,
}

/// A VMI's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VmiSpec<'a> {
    /// `spec.evictionStrategy`: unset falls back to the cluster-wide strategy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<EvictionStrategy>,
    /// `spec.domain`: the VM's size.
    #[serde(deserialize_with = "null_as_default")]
    pub domain: VmiDomain,
    /// `spec.tolerations`: copied to the VM's launcher pods, so they decide where a migration may
    /// take the VM.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration<'a>>,
    /// `spec.nodeSelector`: copied to the launcher pods, as the tolerations are.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<Str<'a>, Str<'a>>,
    /// `spec.affinity`: copied to the launcher pods; its required node affinity bounds where a
    /// migration may take the VM.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity<'a>>,
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

impl<'a> VirtualMachineInstance<'a> {
    /// Its node selector and affinity, which its launcher pods carry (`NodeSelection`).
    pub fn node_selection(&self) -> NodeSelection<'a> {
        NodeSelection { node_selector: self.spec.node_selector.clone(), affinity: self.spec.affinity.clone() }
    }

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

    /// Whether evac holds an evacuation of the VMI from `node` for its turn
    /// ([`crate::effect::EVACUATION_REQUEST_ANNOTATION`] names it).
    pub fn is_requested_from(&self, node: &str) -> bool {
        self.metadata
            .annotation(crate::effect::EVACUATION_REQUEST_ANNOTATION)
            .is_some_and(|requested| &*requested == node)
    }

    /// Whether the VMI is leaving `node`: marked for it, or requested from it.
    pub fn is_evacuating_from(&self, node: &str) -> bool {
        self.status.evacuation_node_name == node || self.is_requested_from(node)
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

impl EvictionStrategy {
    /// The value as written (`LiveMigrate`, ...).
    pub fn as_str(&self) -> &str {
        match self {
            Self::None => "None",
            Self::LiveMigrate => "LiveMigrate",
            Self::LiveMigrateIfPossible => "LiveMigrateIfPossible",
            Self::External => "External",
            Self::Unknown(other) => other,
        }
    }
}

impl From<EvictionStrategy> for String {
    fn from(value: EvictionStrategy) -> Self {
        match value {
            EvictionStrategy::Unknown(other) => other,
            known => known.as_str().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// KubeVirt's four strategies by name, and any other name kept as it was written.
    #[test]
    fn eviction_strategies_by_name() {
        let rows = [
            ("None", EvictionStrategy::None),
            ("LiveMigrate", EvictionStrategy::LiveMigrate),
            ("LiveMigrateIfPossible", EvictionStrategy::LiveMigrateIfPossible),
            ("External", EvictionStrategy::External),
            ("liveMigrate", EvictionStrategy::Unknown("liveMigrate".into())),
            ("", EvictionStrategy::Unknown(String::new())),
        ];
        for (name, strategy) in rows {
            assert_eq!(serde_json::from_value::<EvictionStrategy>(json!(name)).unwrap(), strategy, "{name}");
            assert_eq!(serde_json::to_value(&strategy).unwrap(), json!(name), "{name}");
        }
    }

    /// The guest's memory: `spec.domain.memory.guest`, else `resources.requests.memory`.
    #[test]
    fn guest_memory() {
        let rows = [
            (
                json!({"memory": {"guest": "2Gi"}, "resources": {"requests": {"memory": "1Gi"}}}),
                Some(2_147_483_648.0),
            ),
            (json!({"resources": {"requests": {"memory": "1Gi"}}}), Some(1_073_741_824.0)),
            (json!({"resources": {"limits": {"memory": "1Gi"}}}), None),
            (json!({"memory": {"hugepages": {"pageSize": "2Mi"}}}), None),
            (json!({}), None),
        ];
        for (domain, memory) in rows {
            let text = json!({"spec": {"domain": domain}}).to_string();
            let vmi: VirtualMachineInstance<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(vmi.memory(), memory, "{domain}");
        }
    }

    #[test]
    fn status_and_deletion() {
        let migratable = |status: &str| json!({"conditions": [{"type": "LiveMigratable", "status": status}]});
        // (VMI, migratable, marked for evacuation, being deleted)
        let rows = [
            (json!({}), false, false, false),
            (json!({"status": migratable("True")}), true, false, false),
            (json!({"status": migratable("False")}), false, false, false),
            (json!({"status": {"evacuationNodeName": "node01"}}), false, true, false),
            (json!({"status": {"evacuationNodeName": ""}}), false, false, false),
            (json!({"metadata": {"deletionTimestamp": "2026-11-21T09:40:00Z"}}), false, false, true),
        ];
        for (value, is_migratable, marked, deleted) in rows {
            let text = value.to_string();
            let vmi: VirtualMachineInstance<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(vmi.is_migratable(), is_migratable, "{text}");
            assert_eq!(vmi.is_marked_for_evacuation(), marked, "{text}");
            assert_eq!(vmi.is_being_deleted(), deleted, "{text}");
        }
    }

    /// The VMI's own strategy, else the cluster-wide one.
    #[test]
    fn strategy_fallback() {
        let cluster_wide = EvictionStrategy::LiveMigrate;
        let own: VirtualMachineInstance<'_> =
            serde_json::from_str(r#"{"spec": {"evictionStrategy": "None"}}"#).unwrap();
        let none: VirtualMachineInstance<'_> = serde_json::from_str("{}").unwrap();
        assert_eq!(own.eviction_strategy(Some(&cluster_wide)), Some(&EvictionStrategy::None));
        assert_eq!(none.eviction_strategy(Some(&cluster_wide)), Some(&EvictionStrategy::LiveMigrate));
        assert_eq!(none.eviction_strategy(None), None);
    }
}
