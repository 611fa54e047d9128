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
