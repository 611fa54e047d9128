//! When a VM's time runs out: the moment its launcher pod's containers get SIGTERM (stock
//! KubeVirt shuts the guest down a second later), or, under the proposals' virt-handler, the end
//! of the pod's grace period.

use serde::{Deserialize, Serialize};

use super::{mutation::window_of, HOLD_DEADLINE_ANNOTATION};
use crate::model::time::unix_seconds;
use crate::model::Pod;

/// What KubeVirt's virt-handler does when a launcher pod's `compute` container gets SIGTERM.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum VirtHandler {
    /// KubeVirt as shipped (v1.9): the guest is shut down at once (`pkg/virt-handler/vm.go`,
    /// `sync`, the graceful-shutdown trigger), unless a migration of it is already running. A
    /// VM is saved only by a migration that runs before SIGTERM: within a hold.
    #[default]
    Stock,
    /// The proposals' virt-handler (the node-pressure design, VEP 55): a VM being evacuated is
    /// not shut down at SIGTERM, and runs until its pod's grace period ends.
    Proposal,
}

impl VirtHandler {
    /// `stock` or `proposal`, as settings spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stock => "stock",
            Self::Proposal => "proposal",
        }
    }
}

/// When the VM in a launcher pod must be gone, in seconds since the Unix epoch; infinite when
/// nothing is ending the pod. Under a stock virt-handler it is when the pod's SIGTERM comes:
///
/// - a held pod: the hold's deadline ([`HOLD_DEADLINE_ANNOTATION`]: the end of its window, or
///   the moment the hold ended);
/// - a pod being deleted with the hold hook: the deletion's start plus the hold window, within
///   the deletion's grace period (the kubelet bounds the hook by it);
/// - a pod being deleted without it: the deletion's start (SIGTERM follows at once).
///
/// Under the proposals' virt-handler, SIGTERM does not stop the guest: the pod's grace period
/// does (its `deletionTimestamp`), and a hold's deadline when it is later.
pub fn termination_deadline(pod: &Pod<'_>, virt_handler: VirtHandler) -> f64 {
    let held = pod.metadata.annotation(HOLD_DEADLINE_ANNOTATION).and_then(|t| unix_seconds(&t));
    let deletion_end = pod.metadata.deletion_timestamp.as_deref().and_then(unix_seconds);
    match virt_handler {
        VirtHandler::Proposal => match (held, deletion_end) {
            (Some(held), Some(end)) => held.max(end),
            (held, end) => held.or(end).unwrap_or(f64::INFINITY),
        },
        VirtHandler::Stock => {
            if let Some(held) = held {
                return held;
            }
            let Some(started) = pod.deletion_started_at() else { return f64::INFINITY };
            let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0).max(0) as f64;
            let window = window_of(pod).unwrap_or(0) as f64;
            started + window.min(grace)
        }
    }
}
