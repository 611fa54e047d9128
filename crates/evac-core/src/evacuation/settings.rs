use serde::{Deserialize, Serialize};

use crate::eviction::KubeVirtRef;
use crate::model::quantity;
pub use crate::node_pressure::NodePressure;

/// Failed evacuation migrations in a row after which evac gives up an evacuation of its own
/// (preemption, a `NoExecute` taint, node pressure).
pub const DEFAULT_MAX_FAILED_EVACUATIONS: u32 = 5;
/// The bandwidth a migration is assumed to get when KubeVirt's `bandwidthPerMigration` is
/// unlimited (its default), for estimating which migrations can finish before their deadline.
pub const DEFAULT_ASSUMED_BANDWIDTH: &str = "64Mi";

/// Settings of the evacuation decision.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Where the KubeVirt CR lives. Unset: the one in effect of those in the cluster (there is
    /// one; see [`crate::kubevirt_config::in_effect`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<KubeVirtRef>,
    /// Give an evacuation of evac's own up (clear the mark, record an event) after this many
    /// failed migrations in a row. An API eviction's mark is never given up: it retries with
    /// KubeVirt's back-off until the VM has left or the evacuation is cancelled.
    #[serde(default = "default_max_failed_evacuations")]
    pub max_failed_evacuations: u32,
    /// `nodePressure`, the same setting as the disruption-cause decision's: a node-pressure mark is
    /// called off from `threshold + 2 × headroom` available, and no VM is migrated onto a node it
    /// would leave with less than `threshold + headroom`.
    #[serde(default)]
    pub node_pressure: NodePressure,
    /// Bytes per second a migration is assumed to get when KubeVirt's `bandwidthPerMigration` is
    /// unlimited.
    #[serde(default = "default_assumed_bandwidth")]
    pub assumed_bandwidth: String,
    /// `kubevirtEvacuationController`: KubeVirt's evacuation controller runs in the cluster, as
    /// virt-controller ships it (the default). It creates a migration for every marked VMI at
    /// once, so evac creates none: it holds its own evacuations as requests and marks each when
    /// its order and the parallel limits let it start, and records the cause on the migration
    /// KubeVirt creates. `false`: evac creates the migrations itself, for a cluster whose
    /// evacuation controller is off (the simulator's `--replace-kubevirt`).
    #[serde(default = "crate::kubevirt_config::evacuation_controller_default")]
    pub kubevirt_evacuation_controller: bool,
    /// `virtHandler`: what KubeVirt's virt-handler does at a launcher pod's SIGTERM, which says
    /// when a disrupted VM's time runs out. `stock` (KubeVirt as shipped, the default): the guest
    /// is shut down at once, so a VM must have left by its pod's SIGTERM (a held pod's is the end
    /// of its hold). `proposal` (the node-pressure design and VEP 55): it runs until its pod's
    /// grace period ends.
    #[serde(default)]
    pub virt_handler: crate::hold::VirtHandler,
}

fn default_max_failed_evacuations() -> u32 {
    DEFAULT_MAX_FAILED_EVACUATIONS
}

fn default_assumed_bandwidth() -> String {
    DEFAULT_ASSUMED_BANDWIDTH.to_owned()
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            kubevirt: None,
            max_failed_evacuations: DEFAULT_MAX_FAILED_EVACUATIONS,
            node_pressure: NodePressure::default(),
            assumed_bandwidth: default_assumed_bandwidth(),
            kubevirt_evacuation_controller: true,
            virt_handler: crate::hold::VirtHandler::Stock,
        }
    }
}

impl Settings {
    /// Checks the settings. The errors: `kubevirt: both namespace and name must be set`,
    /// `maxFailedEvacuations must be greater than 0`,
    /// `nodePressure.<field>: "<value>" is not a memory quantity (e.g. 3500Mi)`, and
    /// `assumedBandwidth: "<value>" is not a positive quantity (e.g. 64Mi)`.
    pub fn validate(&self) -> Result<(), crate::InvalidSettings> {
        if let Some(at) = &self.kubevirt {
            if at.namespace.is_empty() || at.name.is_empty() {
                return Err("kubevirt: both namespace and name must be set".into());
            }
        }
        if self.max_failed_evacuations == 0 {
            return Err("maxFailedEvacuations must be greater than 0".into());
        }
        self.node_pressure.levels()?;
        if quantity::bytes(&self.assumed_bandwidth).is_none_or(|b| b <= 0.0) {
            return Err(format!(
                "assumedBandwidth: {:?} is not a positive quantity (e.g. 64Mi)",
                self.assumed_bandwidth
            )
            .into());
        }
        Ok(())
    }

    /// [`Settings::assumed_bandwidth`] in bytes per second; the default's when it is not a
    /// positive quantity (settings are validated before use, so only unvalidated ones get there).
    pub fn assumed_bandwidth_bytes(&self) -> f64 {
        quantity::bytes(&self.assumed_bandwidth)
            .filter(|b| *b > 0.0)
            .or_else(|| quantity::bytes(DEFAULT_ASSUMED_BANDWIDTH))
            .unwrap_or(1.0)
    }

    /// The node-pressure levels; the default's when they are not quantities.
    pub fn pressure_levels(&self) -> crate::node_pressure::PressureLevels {
        self.node_pressure
            .levels()
            .unwrap_or_else(|_| NodePressure::default().levels().expect("the default levels are quantities"))
    }
}
