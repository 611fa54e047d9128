//! evac's requests for an evacuation (`evac.kubevirt.io/evacuation-request`), held for KubeVirt's
//! evacuation controller: done with when the VM left the node they name, and turned into the mark
//! itself when that controller is not running.

use super::standing::Standing;
use super::Context;
use crate::effect::{Effect, ObjectRef, EVACUATION_REQUEST_ANNOTATION};

/// What becomes of a VMI's request.
pub(super) enum FollowUp {
    /// It names a node the VMI is no longer on: clear it there.
    Stale(String),
    /// KubeVirt's evacuation controller is off: the request becomes the mark.
    Mark(Effect),
}

/// What becomes of the request of an unmarked VMI of evac's own controller, if it has one that
/// needs anything.
pub(super) fn follow_up(
    standing: &Standing<'_, '_>,
    node: &str,
    marks_for_kubevirt: bool,
    cx: &mut Context<'_>,
) -> Option<FollowUp> {
    if !cx.flavor.is_evac() || standing.marked {
        return None;
    }
    let (namespace, name) = standing.key();
    let request = standing.vmi.metadata.annotation(EVACUATION_REQUEST_ANNOTATION)?;
    if request != node {
        // The VM left the node its request names some other way (a user's migration, the drain
        // taint, an API eviction's mark KubeVirt acted on): the request is done with. The eviction
        // source goes with it, unless a mark for this node (KubeVirt's, for an API eviction)
        // holds it.
        cx.trace
            .note(|| format!("{namespace}/{name}: its request names {request}, a node it left: clear it"));
        return Some(FollowUp::Stale(request.to_string()));
    }
    if marks_for_kubevirt {
        return None;
    }
    // Held for KubeVirt's evacuation controller, which is not running: evac migrates marked VMIs
    // itself, so the request becomes the mark the disruption decision sets in that mode.
    let source = standing.own()?;
    cx.trace.note(|| {
        format!(
            "{namespace}/{name}: requested from {node} ({}) with KubeVirt's evacuation controller off: mark it",
            source.as_str()
        )
    });
    Some(FollowUp::Mark(Effect::MarkForEvacuation {
        vmi: ObjectRef::new(namespace, name),
        node: node.to_owned(),
        dry_run: false,
        source: Some(source),
    }))
}
