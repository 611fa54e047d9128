//! The cluster interface: how the host reads Kubernetes objects and carries out effects.
//!
//! Policies never see this; they read through host capabilities, which answer from an
//! [`ObjectSource`], and return effects, which the host applies through a [`ClusterWriter`].
//! Back ends: [`StaticContext`] (a `v1 List` file, for `evac eval`, `evac serve --context` and
//! tests; effects change its objects in memory), a real API server through kube-rs watch caches,
//! and the embedded simulator.

mod changes;
pub mod kube;
mod selector;
mod static_context;

use std::sync::Arc;

pub use self::kube::KubeCluster;
pub use changes::{Change, ChangeFeed, Cursor};
pub use evac_core::effect::Effect;
pub use evac_core::ReadError;
use futures::future::BoxFuture;
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

/// Carries out the effects policies return.
pub trait ClusterWriter: Send + Sync {
    /// Applies one effect (a dry-run effect as a dry run: checked, not persisted). The error text
    /// is what the admission answer reports, e.g. `kubevirt failed marking the vmi for eviction: <err>`.
    fn apply<'a>(&'a self, effect: &'a Effect) -> BoxFuture<'a, Result<(), String>>;
}

pub use evac_core::effect::EVICTION_SOURCE_ANNOTATION;

/// The JSON merge patch that marks a VMI for evacuation: `status.evacuationNodeName`, plus the
/// eviction-source annotation when the mark has a source (the descheduler, preemption, ...).
/// One patch, so both land or neither does.
pub fn evacuation_patch(
    node: &str,
    source: Option<evac_core::effect::EvacuationSource>,
) -> serde_json::Value {
    let mut patch = serde_json::json!({"status": {"evacuationNodeName": node}});
    if let Some(source) = source {
        patch["metadata"] = serde_json::json!({"annotations": {EVICTION_SOURCE_ANNOTATION: source.as_str()}});
    }
    patch
}

/// The JSON merge patch that clears a VMI's evacuation mark and its source.
pub fn clear_evacuation_patch() -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": {EVICTION_SOURCE_ANNOTATION: null}},
                       "status": {"evacuationNodeName": null}})
}

/// The JSON merge patch of an [`Effect::AnnotatePod`]: `null` removes an annotation.
pub fn annotations_patch(
    annotations: &std::collections::BTreeMap<String, Option<String>>,
) -> serde_json::Value {
    serde_json::json!({"metadata": {"annotations": annotations}})
}

/// The `VirtualMachineInstanceMigration` of an [`Effect::CreateMigration`], as KubeVirt's
/// evacuation controller writes it, plus its cause and priority.
pub fn evacuation_migration(
    vmi: &str,
    node: &str,
    cause: evac_core::effect::MigrationCause,
    priority: evac_core::effect::MigrationPriority,
) -> serde_json::Value {
    use evac_core::effect::{CAUSE_ANNOTATION, EVACUATION_MIGRATION_ANNOTATION, EVACUATION_MIGRATION_PREFIX};
    serde_json::json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {
            "generateName": EVACUATION_MIGRATION_PREFIX,
            "annotations": {EVACUATION_MIGRATION_ANNOTATION: node, CAUSE_ANNOTATION: cause.as_str()},
        },
        "spec": {"vmiName": vmi, "priority": priority.as_str()},
    })
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
