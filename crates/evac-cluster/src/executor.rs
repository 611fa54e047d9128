//! The effect executor: what each effect writes, decided once for every back end.
//!
//! Each effect is one write (two for [`Effect::ClearEvacuation`]) that is safe to repeat:
//! marks and annotations are merge patches of fixed values, and a mark is cleared only while it
//! still names the node it was decided for, through a JSON patch whose `test` the API server
//! checks atomically (a newer mark for another node stays).

use std::collections::BTreeMap;
use std::sync::Arc;

use evac_core::effect::{
    EvacuationSource, MigrationCause, MigrationPriority, CAUSE_ANNOTATION, EVACUATION_MIGRATION_ANNOTATION,
    EVACUATION_MIGRATION_PREFIX, EVICTION_SOURCE_ANNOTATION,
};
use evac_core::kubevirt::{MIGRATION_KIND, POD_KIND, VMI_KIND};
use evac_core::Effect;
use serde_json::{json, Value};

use crate::{ApiError, ClusterStore, Kind, Patch};

/// Carries out effects on a [`ClusterStore`].
#[derive(Clone)]
pub struct Executor {
    store: Arc<dyn ClusterStore>,
}

/// What carrying out an effect did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The write was made (or checked, for a dry run).
    Written,
    /// Nothing was left to do; the reason says why (e.g. the mark names another node now).
    Unneeded(&'static str),
}

/// An effect the cluster refused, or that could not reach it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .error.message)]
pub struct EffectError {
    /// The effect's type (`MarkForEvacuation`, ...).
    pub effect: &'static str,
    /// The API server's answer.
    pub error: ApiError,
}

impl Executor {
    /// An executor writing to `store`.
    pub fn new(store: Arc<dyn ClusterStore>) -> Self {
        Self { store }
    }

    /// The store effects are written to (and read from).
    pub fn store(&self) -> &Arc<dyn ClusterStore> {
        &self.store
    }

    /// Carries out one effect. A dry-run effect is carried out as a dry-run write.
    pub async fn apply(&self, effect: &Effect) -> Result<Applied, EffectError> {
        let fail = |error| EffectError { effect: effect.type_name(), error };
        let vmis = Kind::new(VMI_KIND.0, VMI_KIND.1);
        match effect {
            Effect::MarkForEvacuation { vmi, node, dry_run, source } => {
                let patch = Patch::Merge(evacuation_patch(node, *source));
                self.store.patch(&vmis, &vmi.namespace, &vmi.name, &patch, *dry_run).await.map_err(fail)?;
            }
            Effect::CreateMigration { vmi, node, cause, priority } => {
                let migrations = Kind::new(MIGRATION_KIND.0, MIGRATION_KIND.1);
                let migration = evacuation_migration(&vmi.name, node, *cause, *priority);
                self.store.create(&migrations, &vmi.namespace, migration, false).await.map_err(fail)?;
            }
            Effect::AnnotatePod { pod, annotations } => {
                let pods = Kind::new(POD_KIND.0, POD_KIND.1);
                let patch = Patch::Merge(annotations_patch(annotations));
                self.store.patch(&pods, &pod.namespace, &pod.name, &patch, false).await.map_err(fail)?;
            }
            Effect::ClearEvacuation { vmi, node } => {
                let clear = Patch::Json(clear_evacuation_patch(node));
                match self.store.patch(&vmis, &vmi.namespace, &vmi.name, &clear, false).await {
                    Ok(()) => {}
                    // 422: the test failed (no mark, or one for another node): not ours to clear.
                    Err(e) if e.code == 422 => {
                        return Ok(Applied::Unneeded("the mark names no longer this node"))
                    }
                    Err(e) if e.code == 404 => return Ok(Applied::Unneeded("the VMI is gone")),
                    Err(e) => return Err(fail(e)),
                }
                let source =
                    Patch::Merge(json!({"metadata": {"annotations": {EVICTION_SOURCE_ANNOTATION: null}}}));
                self.store.patch(&vmis, &vmi.namespace, &vmi.name, &source, false).await.map_err(fail)?;
            }
        }
        Ok(Applied::Written)
    }
}

/// The JSON merge patch that marks a VMI for evacuation: `status.evacuationNodeName`, plus the
/// eviction-source annotation when the mark has a source (the descheduler, preemption, ...).
/// One patch, so both land or neither does.
pub fn evacuation_patch(node: &str, source: Option<EvacuationSource>) -> Value {
    let mut patch = json!({"status": {"evacuationNodeName": node}});
    if let Some(source) = source {
        patch["metadata"] = json!({"annotations": {EVICTION_SOURCE_ANNOTATION: source.as_str()}});
    }
    patch
}

/// The JSON patch that removes a VMI's mark if, and only if, it still names `node`.
fn clear_evacuation_patch(node: &str) -> json_patch::Patch {
    serde_json::from_value(json!([
        {"op": "test", "path": "/status/evacuationNodeName", "value": node},
        {"op": "remove", "path": "/status/evacuationNodeName"},
    ]))
    .expect("a well-formed JSON patch")
}

/// The JSON merge patch of an [`Effect::AnnotatePod`]: `null` removes an annotation.
fn annotations_patch(annotations: &BTreeMap<String, Option<String>>) -> Value {
    json!({"metadata": {"annotations": annotations}})
}

/// The `VirtualMachineInstanceMigration` of an [`Effect::CreateMigration`], as KubeVirt's
/// evacuation controller writes it (`pkg/virt-controller/watch/drain/evacuation`:
/// generateName `kubevirt-evacuation-`, annotation `kubevirt.io/evacuationMigration` naming the
/// node), plus evac's cause annotation and the priority.
pub fn evacuation_migration(
    vmi: &str,
    node: &str,
    cause: Option<MigrationCause>,
    priority: MigrationPriority,
) -> Value {
    let mut migration = json!({
        "apiVersion": MIGRATION_KIND.0,
        "kind": MIGRATION_KIND.1,
        "metadata": {
            "generateName": EVACUATION_MIGRATION_PREFIX,
            "annotations": {EVACUATION_MIGRATION_ANNOTATION: node},
        },
        "spec": {"vmiName": vmi, "priority": priority.as_str()},
    });
    if let Some(cause) = cause {
        migration["metadata"]["annotations"][CAUSE_ANNOTATION] = json!(cause.as_str());
    }
    migration
}

#[cfg(test)]
mod tests;
