//! The playground's reads: the objects pasted beside the request, read by the policies' own
//! functions (through [`evac_cluster::CoreReader`]), each read recorded for the trace.

use std::cell::RefCell;

use evac_core::cluster::{GetResource, ListResourcesAll};
use evac_core::{ClusterReader, ReadError};

/// A reader that records what was read and whether it was found.
pub struct Recording<'a> {
    inner: &'a dyn ClusterReader,
    reads: RefCell<Vec<String>>,
}

impl<'a> Recording<'a> {
    /// Records the reads made through `inner`.
    pub fn new(inner: &'a dyn ClusterReader) -> Self {
        Self { inner, reads: RefCell::default() }
    }

    /// The reads, in order: `get Pod default/x: found`, `list KubeVirt: 1 item`.
    pub fn into_reads(self) -> Vec<String> {
        self.reads.into_inner()
    }

    fn note(&self, read: String) {
        self.reads.borrow_mut().push(read);
    }
}

impl ClusterReader for Recording<'_> {
    fn get_resource(&self, request: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        let answer = self.inner.get_resource(request);
        let name = match request.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(namespace) => format!("{namespace}/{}", request.name),
            None => request.name.to_string(),
        };
        let outcome = match &answer {
            Ok(_) => "found".to_owned(),
            Err(e) => e.to_string(),
        };
        self.note(format!("get {} {name}: {outcome}", request.kind));
        answer
    }

    fn list_resources_all(&self, request: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        let answer = self.inner.list_resources_all(request);
        let outcome = match &answer {
            Ok(list) => {
                let items = serde_json::from_slice::<serde_json::Value>(list)
                    .ok()
                    .and_then(|list| list.get("items").and_then(|items| items.as_array().map(Vec::len)))
                    .unwrap_or(0);
                format!("{items} item{}", if items == 1 { "" } else { "s" })
            }
            Err(e) => e.to_string(),
        };
        let mut what = format!("list {}", request.kind);
        if let Some(selector) = request.field_selector.as_deref().filter(|s| !s.is_empty()) {
            what.push_str(&format!(" ({selector})"));
        }
        self.note(format!("{what}: {outcome}"));
        answer
    }
}
