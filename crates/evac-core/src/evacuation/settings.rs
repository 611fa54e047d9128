use serde::{Deserialize, Serialize};

use crate::eviction::KubeVirtRef;
use crate::model::quantity;

/// Failed evacuation migrations in a row after which an evacuation is given up.
pub const DEFAULT_MAX_FAILED_EVACUATIONS: u32 = 5;
/// Memory a node must have available again before a node-pressure evacuation is called off: a
/// margin above the kubelet's usual `memory.available<100Mi` threshold, so that a node hovering at
/// the threshold does not flap between evacuating and not.
pub const DEFAULT_NODE_PRESSURE_RELEASE: &str = "4500Mi";

/// Settings of the evacuation decision.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Where the KubeVirt CR lives. Unset: the first KubeVirt CR in the cluster (there is one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<KubeVirtRef>,
    /// Give an evacuation up (clear the mark) after this many failed migrations in a row.
    #[serde(default = "default_max_failed_evacuations")]
    pub max_failed_evacuations: u32,
    /// A node-pressure evacuation is called off once the node has this much memory available.
    #[serde(default = "default_node_pressure_release")]
    pub node_pressure_release: String,
}

fn default_max_failed_evacuations() -> u32 {
    DEFAULT_MAX_FAILED_EVACUATIONS
}

fn default_node_pressure_release() -> String {
    DEFAULT_NODE_PRESSURE_RELEASE.to_owned()
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            kubevirt: None,
            max_failed_evacuations: DEFAULT_MAX_FAILED_EVACUATIONS,
            node_pressure_release: default_node_pressure_release(),
        }
    }
}

impl Settings {
    /// Checks the settings. The errors: `kubevirt: both namespace and name must be set`,
    /// `maxFailedEvacuations must be greater than 0`, and
    /// `nodePressureRelease: "<value>" is not a quantity (e.g. 4500Mi)`.
    pub fn validate(&self) -> Result<(), crate::InvalidSettings> {
        if let Some(at) = &self.kubevirt {
            if at.namespace.is_empty() || at.name.is_empty() {
                return Err("kubevirt: both namespace and name must be set".into());
            }
        }
        if self.max_failed_evacuations == 0 {
            return Err("maxFailedEvacuations must be greater than 0".into());
        }
        if quantity::bytes(&self.node_pressure_release).is_none() {
            return Err(format!(
                "nodePressureRelease: {:?} is not a quantity (e.g. 4500Mi)",
                self.node_pressure_release
            )
            .into());
        }
        Ok(())
    }

    /// [`Settings::node_pressure_release`] in bytes; the default's when it is not a quantity
    /// (settings are validated before use, so only unvalidated settings get there).
    pub fn node_pressure_release_bytes(&self) -> f64 {
        quantity::bytes(&self.node_pressure_release)
            .or_else(|| quantity::bytes(DEFAULT_NODE_PRESSURE_RELEASE))
            .unwrap_or_default()
    }
}
