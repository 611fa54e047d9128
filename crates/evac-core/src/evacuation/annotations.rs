//! The descheduler's annotations on launcher pods (design document 003): which pods it may only
//! evict through the eviction API, and which ones are already being evicted in the background.

use std::collections::BTreeMap;

use crate::effect::{Effect, ObjectRef, EVICTION_IN_PROGRESS_ANNOTATION, REQUEST_EVICT_ONLY_ANNOTATION};
use crate::model::Pod;

/// The one patch that brings a launcher pod's annotations where they belong, or `None` when they
/// already are: annotating only on change keeps repeated decisions from writing.
///
/// `in_progress`: the pod is the source pod of a VMI marked for evacuation from its node.
pub(super) fn annotate(pod: &Pod<'_>, in_progress: bool) -> Option<Effect> {
    let mut annotations = BTreeMap::new();
    if pod.metadata.annotation(REQUEST_EVICT_ONLY_ANNOTATION).is_none() {
        annotations.insert(REQUEST_EVICT_ONLY_ANNOTATION.to_owned(), Some(String::new()));
    }
    let current = pod.metadata.annotation(EVICTION_IN_PROGRESS_ANNOTATION);
    if in_progress && current.as_deref() != Some("true") {
        annotations.insert(EVICTION_IN_PROGRESS_ANNOTATION.to_owned(), Some("true".to_owned()));
    } else if !in_progress && current.is_some() {
        // The evacuation failed, was called off, or this is a migration target: the descheduler
        // may evict the pod again.
        annotations.insert(EVICTION_IN_PROGRESS_ANNOTATION.to_owned(), None);
    }
    (!annotations.is_empty()).then(|| Effect::AnnotatePod {
        pod: ObjectRef::new(pod.metadata.namespace.as_str(), pod.metadata.name.as_str()),
        annotations,
    })
}
