//! When an evacuation no longer applies: KubeVirt keeps a mark until the VMI has migrated, which
//! for causes that go away by themselves (a taint removed, memory freed) would move VMs for
//! nothing, and for VMs that cannot migrate would retry forever.

use crate::effect::EvacuationSource;
use crate::model::Node;

use super::Settings;

/// Whether what caused a mark is gone. `source` is the mark's recorded source (`None`: an API
/// eviction such as `kubectl drain`'s); `source_terminating` whether the VMI's pod is being
/// deleted, in which case the VM must leave whatever caused it.
pub(super) fn cause_gone(
    source: Option<EvacuationSource>,
    node: &Node<'_>,
    source_terminating: bool,
    settings: &Settings,
) -> bool {
    if source_terminating {
        return false;
    }
    match source {
        // A drain cordons or taints the node until it is done; a node that is neither is no
        // longer being drained.
        None | Some(EvacuationSource::NoexecuteTaint) => node_accepts_pods(node),
        Some(EvacuationSource::NodePressure) => {
            !node.has_memory_pressure()
                && node.memory_available().is_none_or(|free| free >= settings.node_pressure_release_bytes())
        }
        // The preempting pod took the pod's place by deleting it; a pod not being deleted means
        // the scheduler found room elsewhere.
        Some(EvacuationSource::Preemption) => true,
        // The descheduler asked for a rebalance: there is no state to see it withdrawn.
        Some(EvacuationSource::Descheduler) => false,
    }
}

/// Schedulable and without a taint that keeps pods off or drives them away.
fn node_accepts_pods(node: &Node<'_>) -> bool {
    !node.spec.unschedulable
        && !node.spec.taints.iter().any(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"))
}
