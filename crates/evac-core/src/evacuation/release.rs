//! When an evacuation of evac's own no longer applies. KubeVirt keeps a mark until the VMI has
//! migrated, and so does evac for a mark an API eviction set (`kubectl drain`, the descheduler,
//! cluster-autoscaler): its requester was told the VM is leaving, and asks again until it has.
//! evac's own marks follow a cause that can go away by itself: moving the VM after it did would
//! be for nothing.

use crate::effect::EvacuationSource;
use crate::model::Node;
use crate::node_pressure::PressureLevels;

/// Whether what caused a mark of evac's own is gone. `source_terminating`: the VMI's pod is
/// being deleted, in which case the VM must leave whatever caused it.
pub(super) fn cause_gone(
    source: EvacuationSource,
    node: &Node<'_>,
    source_terminating: bool,
    levels: PressureLevels,
) -> bool {
    if source_terminating {
        return false;
    }
    match source {
        // The taint was removed before the taint manager deleted the pod.
        EvacuationSource::NoexecuteTaint => !node.spec.taints.iter().any(|t| t.effect == "NoExecute"),
        // Memory came back, with a headroom of hysteresis over the marking level.
        EvacuationSource::NodePressure => {
            !node.has_memory_pressure()
                // An unknown figure (metrics-server restarted, a scrape failed) is not relief.
                && node.memory_available().is_some_and(|free| free >= levels.release_from())
        }
        // The preempting pod took the pod's place by deleting it; a pod not being deleted means
        // the scheduler found room elsewhere.
        EvacuationSource::Preemption => true,
        // An API eviction's: never by itself.
        EvacuationSource::Descheduler => false,
    }
}
