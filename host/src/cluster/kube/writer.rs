//! Carrying out effects on the API server.

use evac_core::effect::{EvacuationSource, ObjectRef};
use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};

use super::errors::error_text;
use super::KubeCluster;
use crate::cluster::{
    annotations_patch, evacuation_migration, evacuation_patch, ClusterWriter, Effect,
    EVICTION_SOURCE_ANNOTATION,
};

impl ClusterWriter for KubeCluster {
    fn apply<'a>(&'a self, effect: &'a Effect) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            match effect {
                Effect::MarkForEvacuation { vmi, node, dry_run, source } => {
                    self.mark_for_evacuation(vmi, node, *dry_run, *source).await
                }
                Effect::CreateMigration { vmi, node, cause, priority } => {
                    let migration = evacuation_migration(&vmi.name, node, *cause, *priority);
                    let object: DynamicObject =
                        serde_json::from_value(migration).map_err(|e| e.to_string())?;
                    let api = Api::<DynamicObject>::namespaced_with(
                        self.client.clone(),
                        &vmi.namespace,
                        &migration_resource(),
                    );
                    let created =
                        api.create(&PostParams::default(), &object).await.map_err(|e| api_message(&e))?;
                    tracing::info!(%vmi, node, cause = cause.as_str(), migration = created.metadata.name.as_deref().unwrap_or_default(), "created evacuation migration");
                    Ok(())
                }
                Effect::AnnotatePod { pod, annotations } => {
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(self.client.clone(), &pod.namespace, &pod_resource());
                    let patch = Patch::Merge(annotations_patch(annotations));
                    api.patch(&pod.name, &PatchParams::default(), &patch)
                        .await
                        .map_err(|e| api_message(&e))?;
                    Ok(())
                }
                Effect::ClearEvacuation { vmi, node } => {
                    // A JSON patch whose `test` makes the API server refuse it if the mark has
                    // changed since (a newer mark for another node stays).
                    let api: Api<DynamicObject> =
                        Api::namespaced_with(self.client.clone(), &vmi.namespace, &vmi_resource());
                    let test: json_patch::Patch = serde_json::from_value(serde_json::json!([
                        {"op": "test", "path": "/status/evacuationNodeName", "value": node},
                        {"op": "remove", "path": "/status/evacuationNodeName"},
                    ]))
                    .map_err(|e| e.to_string())?;
                    match api.patch(&vmi.name, &PatchParams::default(), &Patch::<()>::Json(test)).await {
                        Ok(_) => {}
                        // 422: the test failed, the mark is not ours to clear.
                        Err(kube::Error::Api(response)) if response.code == 422 => return Ok(()),
                        Err(e) => return Err(api_message(&e)),
                    }
                    let annotations =
                        serde_json::json!({"metadata": {"annotations": {EVICTION_SOURCE_ANNOTATION: null}}});
                    let cleared = api
                        .patch(&vmi.name, &PatchParams::default(), &Patch::Merge(annotations))
                        .await
                        .map_err(|e| api_message(&e))?;
                    self.observe_write("kubevirt.io/v1", "VirtualMachineInstance", cleared);
                    tracing::info!(%vmi, node, "cleared evacuation mark");
                    Ok(())
                }
            }
        })
    }
}

impl KubeCluster {
    /// Shows a write in the watch cache of its kind at once (when that kind is watched).
    fn observe_write(&self, api_version: &str, kind: &str, object: DynamicObject) {
        if let Ok(cache) = self.cache(api_version, kind) {
            cache.observe_write(object);
        }
    }

    /// One merge patch on the VMI, as KubeVirt's eviction admitter does; the watch cache sees the
    /// change through its watch, so nothing is written to the cache here.
    async fn mark_for_evacuation(
        &self,
        vmi: &ObjectRef,
        node: &str,
        dry_run: bool,
        source: Option<EvacuationSource>,
    ) -> Result<(), String> {
        let api = Api::<DynamicObject>::namespaced_with(self.client.clone(), &vmi.namespace, &vmi_resource());
        let params = PatchParams { dry_run, ..PatchParams::default() };
        match api.patch(&vmi.name, &params, &Patch::Merge(evacuation_patch(node, source))).await {
            Ok(marked) => {
                if !dry_run {
                    self.observe_write("kubevirt.io/v1", "VirtualMachineInstance", marked);
                }
                tracing::info!(%vmi, node, dry_run, "marked VMI for evacuation");
                Ok(())
            }
            Err(error) => {
                let message = api_message(&error);
                tracing::warn!(%vmi, node, dry_run, error = %message, "cannot mark VMI for evacuation");
                Err(message)
            }
        }
    }
}

/// KubeVirt's VMIs; a fixed resource, so writing needs no discovery.
fn vmi_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachineInstance");
    ApiResource::from_gvk_with_plural(&gvk, "virtualmachineinstances")
}

fn migration_resource() -> ApiResource {
    let gvk = GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachineInstanceMigration");
    ApiResource::from_gvk_with_plural(&gvk, "virtualmachineinstancemigrations")
}

fn pod_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods")
}

/// The API server's own message (what KubeVirt would report), or the transport error.
fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(response) if !response.message.is_empty() => response.message.clone(),
        other => error_text(other),
    }
}
