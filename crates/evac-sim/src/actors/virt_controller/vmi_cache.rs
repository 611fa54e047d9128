//! The VMIs virt-controller's passes act on, kept from the store's changes as an informer keeps
//! its cache: a pass in a cluster of 10,000 running VMIs reads the few that need something, not
//! all of them.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::kinds::vmis;
use crate::objects::Vmi;
use crate::store::{EventType, Store};

/// The VMIs that may need the controllers, and the deletions the VM controller has yet to see.
#[derive(Debug, Default)]
pub(super) struct VmiCache {
    /// The store's revision the cache is at; `None` before the first read.
    revision: Option<u64>,
    /// (namespace, name) -> the VMI as last changed, for those [`needs_controllers`]: in the
    /// store's order, so a pass acts in the order a list would give.
    active: BTreeMap<(String, String), Arc<Value>>,
    /// VMIs deleted since the VM controller last looked, in order.
    deleted: Vec<Arc<Value>>,
}

impl VmiCache {
    /// Brings the cache up to the store. The first read lists every VMI and sees no deletion;
    /// when the store's history no longer reaches back, it lists again and the deletions between
    /// are lost, as a relisting informer loses them.
    pub(super) fn sync(&mut self, store: &Store) {
        let read = self.revision.map(|revision| store.events_since(&vmis(), revision));
        let Some(Ok((events, revision))) = read else {
            let (all, revision) = store.list(&vmis(), None, None, None);
            self.active =
                all.into_iter().filter(|v| needs_controllers(Vmi(v))).map(|v| (key(&v), v)).collect();
            self.revision = Some(revision);
            return;
        };
        self.revision = Some(revision);
        for event in events {
            let key = key(&event.object);
            if event.type_ == EventType::Deleted {
                self.active.remove(&key);
                self.deleted.push(event.object);
            } else if needs_controllers(Vmi(&event.object)) {
                self.active.insert(key, event.object);
            } else {
                self.active.remove(&key);
            }
        }
    }

    /// The VMIs that may need the controllers, in the store's order.
    pub(super) fn active(&self) -> Vec<Arc<Value>> {
        self.active.values().cloned().collect()
    }

    /// The VMIs deleted since the last call.
    pub(super) fn take_deleted(&mut self) -> Vec<Arc<Value>> {
        std::mem::take(&mut self.deleted)
    }
}

fn key(vmi: &Value) -> (String, String) {
    let meta = Vmi(vmi).meta();
    (meta.namespace().to_owned(), meta.name().to_owned())
}

/// Whether a VMI may need one of the controllers: marked for evacuation, being deleted, stopped
/// (a restart), or waiting for its pod (`Scheduling`). A running VMI left alone needs none.
fn needs_controllers(vmi: Vmi<'_>) -> bool {
    vmi.evacuation_node_name().is_some()
        || vmi.meta().deletion_timestamp().is_some()
        || vmi.is_final()
        || vmi.phase() == Some("Scheduling")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::store::Patch;
    use crate::SimClock;

    fn vmi(store: &Store, name: &str, phase: &str) {
        let vmi = json!({"metadata": {"name": name}, "status": {"phase": phase, "nodeName": "node01"}});
        store.create(&vmis(), "default", vmi, false).unwrap();
    }

    fn names(objects: &[Arc<Value>]) -> Vec<&str> {
        objects.iter().map(|v| Vmi(v).meta().name()).collect()
    }

    #[test]
    fn keeps_the_vmis_that_need_the_controllers_and_the_deletions() {
        let store = Store::new(Arc::new(SimClock::default()), 1_000);
        vmi(&store, "running", "Running");
        vmi(&store, "stopped", "Succeeded");
        let mut cache = VmiCache::default();
        cache.sync(&store);
        assert_eq!(names(&cache.active()), ["stopped"]);
        assert!(cache.take_deleted().is_empty(), "the first read sees no deletion");

        vmi(&store, "pending", "Scheduling");
        let marked = Patch::Merge(json!({"status": {"evacuationNodeName": "node01"}}));
        store.patch(&vmis(), "default", "running", &marked, false).unwrap();
        store.delete(&vmis(), "default", "stopped", false).unwrap();
        cache.sync(&store);
        assert_eq!(names(&cache.active()), ["pending", "running"], "in the store's order");
        assert_eq!(names(&cache.take_deleted()), ["stopped"]);
        assert!(cache.take_deleted().is_empty(), "a deletion is seen once");

        let running = Patch::Merge(json!({"status": {"phase": "Running", "evacuationNodeName": null}}));
        store.patch(&vmis(), "default", "running", &running, false).unwrap();
        store.patch(&vmis(), "default", "pending", &running, false).unwrap();
        cache.sync(&store);
        assert!(cache.active().is_empty(), "running VMIs left alone leave the cache");
    }

    #[test]
    fn lists_again_when_the_history_no_longer_reaches_back() {
        let store = Store::new(Arc::new(SimClock::default()), 2);
        vmi(&store, "a", "Failed");
        let mut cache = VmiCache::default();
        cache.sync(&store);
        store.delete(&vmis(), "default", "a", false).unwrap();
        for name in ["b", "c", "d"] {
            vmi(&store, name, "Scheduling");
        }
        cache.sync(&store);
        assert_eq!(names(&cache.active()), ["b", "c", "d"]);
        assert!(cache.take_deleted().is_empty(), "deletions past the history are lost, as on a relist");
    }
}
