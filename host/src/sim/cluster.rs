//! The simulator as a back end of the cluster interface: the store answers reads as
//! [`ObjectSource`] and carries out effects as [`ClusterWriter`], as the kube-rs back end does
//! against a real API server.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::store::{EventType, Kind, Patch, Store};
use crate::cluster::{
    annotations_patch, clear_evacuation_patch, evacuation_migration, evacuation_patch, list_json, Change,
    ChangeFeed, ClusterWriter, Cursor, Effect, FieldSelector, LabelSelector, ListQuery, ObjectSource,
    ReadError,
};

impl ObjectSource for Store {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<[u8]>, ReadError> {
        let object = Store::get(self, &Kind::new(api_version, kind), namespace.unwrap_or_default(), name)
            .map_err(|_| ReadError::not_found(api_version, kind, name))?;
        let bytes = serde_json::to_vec(&*object).map_err(|e| ReadError::other(e.to_string()))?;
        Ok(bytes.into())
    }

    fn list(&self, api_version: &str, kind: &str, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError> {
        let labels = query.label_selector.map(LabelSelector::parse).transpose().map_err(ReadError::other)?;
        let fields = query.field_selector.map(FieldSelector::parse).transpose().map_err(ReadError::other)?;
        let (items, _) = Store::list(
            self,
            &Kind::new(api_version, kind),
            query.namespace,
            labels.as_ref(),
            fields.as_ref(),
        );
        let encoded: Vec<Vec<u8>> = items
            .iter()
            .map(|item| serde_json::to_vec(&**item))
            .collect::<Result<_, _>>()
            .map_err(|e| ReadError::other(e.to_string()))?;
        Ok(list_json(encoded.iter().map(Vec::as_slice)))
    }
}

impl ChangeFeed for Store {
    fn changes(
        &self,
        api_version: &str,
        kind: &str,
        cursor: Cursor,
    ) -> Result<(Vec<Change>, u64), ReadError> {
        let kind = Kind::new(api_version, kind);
        let encode = |object: &serde_json::Value, deleted: bool| {
            serde_json::to_vec(object)
                .map(|json| Change { object: json.into(), deleted })
                .map_err(|e| ReadError::other(e.to_string()))
        };
        if let Some(cursor) = cursor {
            // 410 Gone: the history no longer reaches back; resync from a listing below.
            if let Ok((events, revision)) = self.events_since(&kind, cursor) {
                let changes = events
                    .iter()
                    .map(|e| encode(&e.object, e.type_ == EventType::Deleted))
                    .collect::<Result<_, _>>()?;
                return Ok((changes, revision));
            }
        }
        let revision = self.revision();
        let (objects, _) = self.list(&kind, None, None, None);
        let changes = objects.iter().map(|o| encode(o, false)).collect::<Result<_, _>>()?;
        Ok((changes, revision))
    }
}

impl Store {
    /// [`ClusterWriter::apply`] without the future: the store answers at once.
    pub fn apply_now(&self, effect: &Effect) -> Result<(), String> {
        let vmis = Kind::new("kubevirt.io/v1", "VirtualMachineInstance");
        let result = match effect {
            Effect::MarkForEvacuation { vmi, node, dry_run, source } => {
                let patch = Patch::Merge(evacuation_patch(node, *source));
                self.patch(&vmis, &vmi.namespace, &vmi.name, &patch, *dry_run).map(|_| ())
            }
            Effect::CreateMigration { vmi, node, cause, priority } => {
                let migration = evacuation_migration(&vmi.name, node, *cause, *priority);
                let migrations = Kind::new("kubevirt.io/v1", "VirtualMachineInstanceMigration");
                self.create(&migrations, &vmi.namespace, migration, false).map(|_| ())
            }
            Effect::AnnotatePod { pod, annotations } => {
                let patch = Patch::Merge(annotations_patch(annotations));
                self.patch(&Kind::new("v1", "Pod"), &pod.namespace, &pod.name, &patch, false).map(|_| ())
            }
            Effect::ClearEvacuation { vmi, node } => {
                // Only a mark that still names the node: a newer mark for another node stays.
                let current = self.get(&vmis, &vmi.namespace, &vmi.name).map_err(|e| e.message)?;
                if current.pointer("/status/evacuationNodeName").and_then(|n| n.as_str()) != Some(node) {
                    return Ok(());
                }
                self.patch(&vmis, &vmi.namespace, &vmi.name, &Patch::Merge(clear_evacuation_patch()), false)
                    .map(|_| ())
            }
        };
        result.map_err(|e| e.message)
    }
}

impl ClusterWriter for Store {
    fn apply<'a>(&'a self, effect: &'a Effect) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(std::future::ready(self.apply_now(effect)))
    }
}
