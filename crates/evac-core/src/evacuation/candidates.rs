//! What would migrate: the VMIs evac would start a migration for (its candidates), and those
//! KubeVirt's own evacuation controller is about to migrate beside it.

use super::blocker::{migration_blocker, Blocker};
use super::call_off::holds;
use super::inputs::Inputs;
use super::order::Candidate;
use super::standing::Standing;
use super::Context;
use crate::ObjectRef;

/// What the evacuation controllers would do with one VMI.
pub(super) struct Consideration<'i, 'a> {
    /// KubeVirt's evacuation controller is about to migrate it: it takes room already.
    pub kubevirt_starts: bool,
    /// The migration evac would start, room permitting.
    pub candidate: Option<Candidate<'i, 'a>>,
}

/// What becomes of a VMI whose evacuation was not called off: evac's candidate when it is asked
/// to leave (beside KubeVirt's evacuation controller: requested; otherwise marked or on a
/// drain-tainted node) and nothing blocks it.
pub(super) fn consider<'i, 'a>(
    standing: &Standing<'i, 'a>,
    inputs: &Inputs<'i, 'a>,
    cx: &mut Context<'_>,
) -> Consideration<'i, 'a> {
    let drained = inputs.node.is_drain_tainted();
    let beside = cx.flavor.marks_for_kubevirt(inputs.settings);
    let wanted = if beside { standing.requested } else { standing.marked || drained };
    // Beside evac, KubeVirt's evacuation controller migrates what it evacuates itself.
    let kubevirt_moves = beside && (standing.marked || drained);
    let blocker = migration_blocker(standing, inputs.config, cx);
    let migrates = (wanted || kubevirt_moves) && blocker.is_none();
    note(standing, inputs, blocker.as_ref(), wanted, kubevirt_moves, cx);
    Consideration {
        kubevirt_starts: kubevirt_moves && migrates,
        candidate: (wanted && migrates).then(|| candidate(standing, inputs)),
    }
}

/// The standing of a VMI and what becomes of it, in the trace.
fn note(
    standing: &Standing<'_, '_>,
    inputs: &Inputs<'_, '_>,
    blocker: Option<&Blocker<'_>>,
    wanted: bool,
    kubevirt_moves: bool,
    cx: &mut Context<'_>,
) {
    let node_name = inputs.node.metadata.name.as_str();
    cx.trace.note(|| {
        let (namespace, name) = standing.key();
        let position = if standing.marked {
            format!("marked for {node_name}")
        } else if standing.requested {
            format!("requested from {node_name}")
        } else if inputs.node.is_drain_tainted() {
            "on a drain-tainted node".to_owned()
        } else {
            "not marked".to_owned()
        };
        let what = match (blocker, wanted, kubevirt_moves) {
            (_, false, false) => "stays".to_owned(),
            (Some(why), _, _) => format!("does not migrate now: {why}"),
            (None, false, true) => "KubeVirt's evacuation controller migrates it".to_owned(),
            (None, true, _) => "a candidate".to_owned(),
        };
        format!("{namespace}/{name}: {position}; {what}")
    });
}

/// The candidate for a VMI's migration: its deadline from its first launcher pod, and its
/// estimate under the settings KubeVirt would migrate it with.
fn candidate<'i, 'a>(standing: &Standing<'i, 'a>, inputs: &Inputs<'i, 'a>) -> Candidate<'i, 'a> {
    let vmi = standing.vmi;
    let pod = standing.pods.first().copied();
    let memory = vmi.memory().unwrap_or(0.0);
    let migration = inputs.migration_settings(vmi);
    Candidate {
        deadline: inputs.pod_deadline(pod),
        held: pod
            .filter(|p| holds(p))
            .map(|p| ObjectRef::new(p.metadata.namespace.as_str(), p.metadata.name.as_str())),
        marked: standing.evacuating(),
        namespace: standing.namespace,
        name: standing.name,
        source: standing.source,
        memory,
        tolerations: &vmi.spec.tolerations,
        selection: vmi.node_selection(),
        estimate: inputs.estimate_under(vmi, memory, &migration),
        bandwidth_known: migration.bandwidth.is_some(),
    }
}
