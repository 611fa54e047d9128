use serde::{Deserialize, Serialize};

use crate::eviction::KubeVirtRef;
pub use crate::hold::HoldSettings;
pub use crate::node_pressure::NodePressure;

/// Settings of the disruption-cause decision.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Where the KubeVirt CR lives. Unset: the one in effect of those in the cluster (there is
    /// one; see [`crate::kubevirt_config::in_effect`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<KubeVirtRef>,
    /// `nodePressure`: when a node counts as short of memory, ahead of the kubelet; the
    /// evacuation decision reads the same setting.
    #[serde(default)]
    pub node_pressure: NodePressure,
    /// `kubevirtEvacuationController`, the same setting as the evacuation decision's: with
    /// KubeVirt's evacuation controller running (the default), a disruption is held as an
    /// evacuation request ([`crate::Effect::RequestEvacuation`]) for the evacuation decision to
    /// mark in its order; without it, the VMI is marked at once.
    #[serde(default = "crate::kubevirt_config::evacuation_controller_default")]
    pub kubevirt_evacuation_controller: bool,
    /// `hold`: what a hold of a launcher pod's termination waits for ([`crate::hold`]).
    #[serde(default)]
    pub hold: HoldSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            kubevirt: None,
            node_pressure: NodePressure::default(),
            kubevirt_evacuation_controller: true,
            hold: HoldSettings::default(),
        }
    }
}

impl Settings {
    /// Checks the settings: a `kubevirt` reference needs both fields (`kubevirt: both namespace and
    /// name must be set`), and `nodePressure`'s values must be memory quantities
    /// (`nodePressure.<field>: "<value>" is not a memory quantity (e.g. 3500Mi)`).
    pub fn validate(&self) -> Result<(), crate::InvalidSettings> {
        if let Some(at) = &self.kubevirt {
            if at.namespace.is_empty() || at.name.is_empty() {
                return Err("kubevirt: both namespace and name must be set".into());
            }
        }
        self.node_pressure.bytes().map(drop)
    }
}
