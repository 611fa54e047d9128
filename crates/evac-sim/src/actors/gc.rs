//! Kubernetes' garbage collector (`pkg/controller/garbagecollector`), for the objects the
//! simulator's owners have: a pod whose controller (`ownerReferences` with `controller: true`) is
//! a VirtualMachineInstance that no longer exists is deleted, as a background deletion of a VMI
//! leaves it: gracefully, with the pod's own grace period.

use std::collections::HashSet;
use std::time::Duration;

use crate::kinds::{pods, vmis};
use crate::objects::{Meta, Pod};
use crate::store::Store;
use crate::ApiError;

/// The garbage collector as an actor. It follows the VMIs' changes and looks for orphans when
/// one is deleted (an informer's delete event), so a large cluster costs it nothing meanwhile.
#[derive(Debug, Default)]
pub struct GarbageCollector {
    /// The revision of VMI changes seen so far; `None` before the first pass.
    seen: std::sync::Mutex<Option<u64>>,
}

impl GarbageCollector {
    /// Deletes the pods whose VMI is gone.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let mut seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let deleted = match *seen {
            Some(revision) => match store.events_since(&vmis(), revision) {
                Ok((events, now)) => {
                    *seen = Some(now);
                    events.iter().any(|e| e.type_ == crate::EventType::Deleted)
                }
                // The history no longer reaches back: look at everything.
                Err(_) => {
                    *seen = Some(store.revision());
                    true
                }
            },
            None => {
                *seen = Some(store.revision());
                true
            }
        };
        if !deleted {
            return Ok(None);
        }
        let (all_vmis, _) = store.list(&vmis(), None, None, None);
        let owners: HashSet<&str> = all_vmis.iter().map(|v| Meta(v).uid()).collect();
        let (all_pods, _) = store.list(&pods(), None, None, None);
        for pod in all_pods.iter().map(|p| Pod(p)) {
            let orphan = pod
                .meta()
                .controller()
                .is_some_and(|(kind, _, uid)| kind == "VirtualMachineInstance" && !owners.contains(uid));
            if orphan && !pod.is_terminating() {
                crate::store::deleted(store.delete_gracefully(
                    &pods(),
                    pod.meta().namespace(),
                    pod.meta().name(),
                    None,
                    false,
                ))?;
            }
        }
        Ok(None)
    }
}

impl crate::Actor for GarbageCollector {
    fn name(&self) -> &'static str {
        "garbage-collector"
    }

    fn watches(&self) -> Option<Vec<crate::Kind>> {
        Some(vec![vmis()])
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        GarbageCollector::reconcile(self, store)
    }
}
