//! The simulator as a back end of the cluster interface: the store answers reads as
//! [`ObjectSource`] and carries out effects as [`ClusterWriter`], as the kube-rs back end does
//! against a real API server.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::store::{Kind, Patch, Store};
use crate::cluster::{
    evacuation_patch, list_json, ClusterWriter, Effect, FieldSelector, LabelSelector, ListQuery,
    ObjectSource, ReadError,
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

impl ClusterWriter for Store {
    fn apply<'a>(&'a self, effect: &'a Effect) -> BoxFuture<'a, Result<(), String>> {
        let result = match effect {
            Effect::MarkForEvacuation { vmi, node, dry_run, source } => {
                let patch = Patch::Merge(evacuation_patch(node, *source));
                let vmis = Kind::new("kubevirt.io/v1", "VirtualMachineInstance");
                self.patch(&vmis, &vmi.namespace, &vmi.name, &patch, *dry_run)
                    .map(|_| ())
                    .map_err(|e| e.message)
            }
        };
        Box::pin(std::future::ready(result))
    }
}
