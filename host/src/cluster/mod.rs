//! The cluster interface: how the host reads (and, later, writes) Kubernetes objects.
//!
//! Policies never see this; they read through host capabilities, which answer from an
//! [`ObjectSource`]. Back ends: [`StaticContext`] (a `v1 List` file, for `evac eval` and tests);
//! the embedded simulator and a real API server (through kube-rs watch caches) implement the same
//! trait.

mod selector;
mod static_context;

use std::sync::Arc;

pub use evac_core::ReadError;
pub use selector::{FieldSelector, LabelSelector};
pub use static_context::StaticContext;

/// What a list is filtered by.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListQuery<'a> {
    pub namespace: Option<&'a str>,
    pub label_selector: Option<&'a str>,
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
