//! Carrying out effects on the API server.

use evac_core::effect::{EvacuationSource, ObjectRef};
use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};

use super::errors::error_text;
use super::KubeCluster;
use crate::cluster::{evacuation_patch, ClusterWriter, Effect};

impl ClusterWriter for KubeCluster {
    fn apply<'a>(&'a self, effect: &'a Effect) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            match effect {
                Effect::MarkForEvacuation { vmi, node, dry_run, source } => {
                    self.mark_for_evacuation(vmi, node, *dry_run, *source).await
                }
            }
        })
    }
}

impl KubeCluster {
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
            Ok(_) => {
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

/// The API server's own message (what KubeVirt would report), or the transport error.
fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(response) if !response.message.is_empty() => response.message.clone(),
        other => error_text(other),
    }
}
