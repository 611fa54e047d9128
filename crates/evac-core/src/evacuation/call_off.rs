//! When an evacuation of evac's own no longer applies. KubeVirt keeps a mark until the VMI has
//! migrated, and so does evac for a mark an API eviction set (`kubectl drain`, the descheduler,
//! cluster-autoscaler): its requester was told the VM is leaving, and asks again until it has.
//! evac's own marks follow a cause that can go away by itself: moving the VM after it did would
//! be for nothing. A mark given up after repeated failures is called off too, and the unstarted
//! migrations of evacuations called off are deleted.

use std::collections::BTreeMap;

use super::history::VmiKey;
use super::inputs::Inputs;
use super::standing::Standing;
use super::Context;
use crate::effect::{EvacuationSource, EventReason, MigrationCause, CAUSE_ANNOTATION};
use crate::model::{Migration, Node, Pod};
use crate::node_pressure::PressureLevels;
use crate::{Effect, ObjectRef};

/// Why a mark of evac's own is called off.
pub(super) enum CallOff {
    /// Its migrations failed too often in a row: the holds of its pods end and the VMI gets an
    /// event.
    GivenUp { releases: Vec<Effect>, event: Effect },
    /// What caused it is gone.
    CauseGone,
}

/// Whether the evacuation of a VMI of evac's own is called off, and why. Only one asked for and
/// not under way is: a migration under way is left to finish (KubeVirt clears the mark when it
/// succeeds; KubeVirt never calls a mark off itself). On a drain-tainted node KubeVirt migrates
/// every VMI, marked or not: nothing to call off.
pub(super) fn call_off(
    standing: &Standing<'_, '_>,
    inputs: &Inputs<'_, '_>,
    cx: &mut Context<'_>,
) -> Option<CallOff> {
    let node = inputs.node;
    let own = standing.own()?;
    if !cx.flavor.is_evac() || !standing.evacuating() || standing.under_way || node.is_drain_tainted() {
        return None;
    }
    let (namespace, name) = standing.key();
    let failures = standing.history.failures;
    if failures >= inputs.settings.max_failed_evacuations {
        cx.trace.note(|| {
            format!("{namespace}/{name}: {failures} failed migrations in a row: give up, call the mark off")
        });
        let why = || format!("{failures} failed migrations in a row");
        let releases = standing.pods.iter().filter(|p| holds(p)).map(|p| release(p, why())).collect();
        let node = node.metadata.name.as_str();
        let event = Effect::RecordEvent {
            vmi: ObjectRef::new(namespace, name),
            node: node.to_owned(),
            reason: EventReason::EvacuationGivenUp,
            message: format!(
                "evac gave up evacuating the VMI from node {node} ({}) after {failures} failed migrations in a \
                 row: it stays on the node",
                own.as_str()
            ),
        };
        return Some(CallOff::GivenUp { releases, event });
    }
    if cause_gone(own, node, standing.terminating, inputs.settings.pressure_levels()) {
        cx.trace
            .note(|| format!("{namespace}/{name}: its cause ({}) is gone: call the mark off", own.as_str()));
        return Some(CallOff::CauseGone);
    }
    None
}

/// Whether what caused a mark of evac's own is gone. `source_terminating`: the VMI's pod is
/// being deleted, in which case the VM must leave whatever caused it.
fn cause_gone(
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

/// The evacuation migrations from the node that have not started, of evac's own evacuations that
/// were called off: the VMI is neither marked for the node nor requested from it, the node is not
/// drain-tainted, and the migration names one of evac's own causes, or none yet (KubeVirt retried
/// just as the mark went, before evac recorded the cause). Deleted, as `virtctl migrate-cancel`
/// deletes a migration, they move nothing; KubeVirt deletes a target pod it may have created
/// already (`handlePreHandoffMigrationCancel`). An API eviction's migration is never one: its mark
/// is never called off, and a user's `evacuate-cancel` leaves it to run, as KubeVirt does.
pub(super) fn orphans<'i, 'a>(inputs: &Inputs<'i, 'a>) -> Vec<(VmiKey<'i>, &'i Migration<'a>)> {
    let node = inputs.node;
    let own = [MigrationCause::Preemption, MigrationCause::NoexecuteTaint, MigrationCause::NodePressure];
    inputs
        .migrations
        .iter()
        .filter(|m| m.is_unstarted() && m.metadata.deletion_timestamp.is_none())
        .filter(|m| m.evacuation_node().is_some_and(|n| n == node.metadata.name))
        .filter(|m| {
            m.metadata.annotation(CAUSE_ANNOTATION).is_none_or(|c| own.iter().any(|o| o.as_str() == &*c))
        })
        .filter_map(|m| {
            let vmi = inputs.vmi_of(m)?;
            let wanted = kubevirt_evacuates(vmi, node) || vmi.is_requested_from(&node.metadata.name);
            (!wanted).then_some(((vmi.metadata.namespace.as_str(), vmi.metadata.name.as_str()), m))
        })
        .collect()
}

/// Whether KubeVirt's evacuation controller still wants the VMI to leave the node: marked for
/// it, or on a drain-tainted node (`vmisToMigrate`).
pub(super) fn kubevirt_evacuates(vmi: &crate::model::VirtualMachineInstance<'_>, node: &Node<'_>) -> bool {
    vmi.status.evacuation_node_name == node.metadata.name || node.is_drain_tainted()
}

/// Whether a launcher pod's termination is held now: a hold began, and nothing ended it yet.
pub(super) fn holds(pod: &Pod<'_>) -> bool {
    pod.metadata.annotation(crate::hold::HELD_SINCE_ANNOTATION).is_some()
        && pod.metadata.annotation(crate::hold::HOLD_RELEASE_ANNOTATION).is_none()
}

/// Ends the hold of a launcher pod, saying why: the hold endpoint answers the kubelet then.
fn release(pod: &Pod<'_>, why: String) -> Effect {
    release_ref(&ObjectRef::new(pod.metadata.namespace.as_str(), pod.metadata.name.as_str()), why)
}

/// [`release`], of a pod known by reference.
pub(super) fn release_ref(pod: &ObjectRef, why: String) -> Effect {
    Effect::AnnotatePod {
        pod: pod.clone(),
        annotations: BTreeMap::from([(crate::hold::HOLD_RELEASE_ANNOTATION.to_owned(), Some(why))]),
    }
}
