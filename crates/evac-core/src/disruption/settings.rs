use serde::{Deserialize, Serialize};

use crate::eviction::KubeVirtRef;
use crate::model::quantity;

/// Settings of the disruption-cause decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Where the KubeVirt CR lives. Unset: the first KubeVirt CR in the cluster (there is one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<KubeVirtRef>,
    /// `nodePressure`: when a node counts as short of memory, ahead of the kubelet.
    #[serde(default)]
    pub node_pressure: NodePressure,
}

/// When a node is short of memory, ahead of the kubelet: `memory.available` under
/// `threshold + headroom`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NodePressure {
    /// The kubelet's `evictionSoft` `memory.available`: below it, the kubelet starts evicting.
    pub threshold: String,
    /// How much sooner to act: a live migration needs time to finish before the kubelet kills.
    pub headroom: String,
}

impl Default for NodePressure {
    /// The soft threshold of the node-pressure design's functional tests, and room for a small VM.
    fn default() -> Self {
        Self { threshold: "3500Mi".into(), headroom: "1Gi".into() }
    }
}

impl NodePressure {
    /// `(threshold, headroom)` in bytes.
    pub fn bytes(&self) -> Result<(f64, f64), crate::InvalidSettings> {
        let parse = |field: &str, value: &str| {
            quantity::bytes(value).ok_or_else(|| {
                format!("nodePressure.{field}: {value:?} is not a memory quantity (e.g. 3500Mi)")
            })
        };
        Ok((parse("threshold", &self.threshold)?, parse("headroom", &self.headroom)?))
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
