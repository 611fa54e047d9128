use serde::{Deserialize, Serialize};

use super::{DEFAULT_HOLD_PORT, DEFAULT_WINDOW_SECONDS, SYSTEM_CLUSTER_CRITICAL};

/// Settings of the `launcher-hold` mutation.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LauncherHoldSettings {
    /// `windowSeconds`: how long a hold may keep a launcher pod's SIGTERM back, at most. The pod's
    /// grace period grows by as much, so that the guest keeps its own grace for a clean shutdown
    /// after the hold.
    pub window_seconds: u64,
    /// `port`: the hold endpoint's port on the node's loopback address.
    pub port: u16,
}

impl Default for LauncherHoldSettings {
    fn default() -> Self {
        Self { window_seconds: DEFAULT_WINDOW_SECONDS, port: DEFAULT_HOLD_PORT }
    }
}

/// The longest hold window: a launcher pod's grace period is a 64-bit count of seconds, but a
/// hold of more than a day is a misconfiguration, not a plan.
pub const MAX_WINDOW_SECONDS: u64 = 24 * 3600;

impl LauncherHoldSettings {
    /// Checks the settings: `windowSeconds must be between 1 and 86400`, `port must not be 0`.
    pub fn validate(&self) -> Result<(), crate::InvalidSettings> {
        if !(1..=MAX_WINDOW_SECONDS).contains(&self.window_seconds) {
            return Err(format!(
                "windowSeconds must be between 1 and {MAX_WINDOW_SECONDS}, got {}",
                self.window_seconds
            )
            .into());
        }
        if self.port == 0 {
            return Err("port must not be 0".into());
        }
        Ok(())
    }
}

/// What a hold waits for, in the `disruption-cause` policy's settings (`hold`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HoldSettings {
    /// `preemptorPriority`: a hold ends at once when the pod was preempted for a pod of this
    /// priority or more (default `system-cluster-critical`, 2000000000): the cluster's own
    /// components are never kept waiting.
    pub preemptor_priority: i64,
    /// `takenUpWithinSeconds`: a hold ends when no evacuation of the VM began this long after it
    /// did (`evac control` down, or the VM not to be moved): holding longer would only delay
    /// the pod's end.
    pub taken_up_within_seconds: u64,
    /// `pressureShownWithinSeconds`: the kubelet stops a pod without deleting it for node
    /// pressure, and also for a failed liveness probe. A hold of such a pod waits this long for
    /// the node's memory pressure to show (its `MemoryPressure` condition, or its metrics under
    /// the `nodePressure` level), and ends when it does not.
    pub pressure_shown_within_seconds: u64,
}

impl Default for HoldSettings {
    fn default() -> Self {
        Self {
            preemptor_priority: SYSTEM_CLUSTER_CRITICAL,
            taken_up_within_seconds: 30,
            pressure_shown_within_seconds: 15,
        }
    }
}
