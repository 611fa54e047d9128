//! Reading cluster objects as JSON: the interface host capabilities answer from.

use std::sync::Arc;

use evac_core::ReadError;

/// What a list is filtered by.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListQuery<'a> {
    /// Only objects of this namespace; `None`: every namespace.
    pub namespace: Option<&'a str>,
    /// A label selector in Kubernetes' text form (`app=web,tier!=cache`).
    pub label_selector: Option<&'a str>,
    /// A field selector in Kubernetes' text form (`spec.nodeName=node01`).
    pub field_selector: Option<&'a str>,
}

/// Read access to cluster objects, as JSON.
pub trait ObjectSource: Send + Sync {
    /// One object. `namespace` is `None` for cluster-scoped kinds. A missing object is
    /// [`ReadError::not_found`], with Kubernetes' message.
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<[u8]>, ReadError>;

    /// A `v1 List` of the matching objects.
    fn list(&self, api_version: &str, kind: &str, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError>;
}

/// Writes a `v1 List` around already-serialized items.
pub fn list_json<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = br#"{"apiVersion":"v1","kind":"List","metadata":{},"items":["#.to_vec();
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    out
}

/// An [`ObjectSource`] as the decision core's [`evac_core::ClusterReader`]: for hosts that run a
/// decision natively (the simulator's KubeVirt) rather than as a module.
pub struct CoreReader<'a>(pub &'a dyn ObjectSource);

impl evac_core::ClusterReader for CoreReader<'_> {
    fn get_resource(&self, request: &evac_core::cluster::GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        let namespace = request.namespace.as_deref().filter(|n| !n.is_empty());
        self.0.get(&request.api_version, &request.kind, namespace, &request.name).map(|bytes| bytes.to_vec())
    }

    fn list_resources_all(
        &self,
        request: &evac_core::cluster::ListResourcesAll<'_>,
    ) -> Result<Vec<u8>, ReadError> {
        let query = ListQuery {
            namespace: None,
            label_selector: request.label_selector.as_deref(),
            field_selector: request.field_selector.as_deref(),
        };
        self.0.list(&request.api_version, &request.kind, &query)
    }
}
