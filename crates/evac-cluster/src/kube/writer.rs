//! Writes through the API server: the back end's part of [`ClusterStore`]. A write to a watched
//! kind shows in its watch cache at once, so that the next decision reads what was just written
//! (a controller pass never decides twice on state it has already changed).

use futures::future::BoxFuture;
use kube::api::{Api, DeleteParams, DynamicObject, PatchParams, PostParams, Preconditions};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::Value;

use super::errors::error_text;
use super::KubeCluster;
use crate::{ApiError, ClusterStore, Kind, Patch};

impl ClusterStore for KubeCluster {
    fn create<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        object: Value,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let object: DynamicObject = serde_json::from_value(object)
                .map_err(|e| ApiError::bad_request(format!("cannot encode the {}: {e}", kind.kind)))?;
            let params = PostParams { dry_run, ..PostParams::default() };
            let created =
                self.api(kind, namespace).create(&params, &object).await.map_err(|e| api_error(&e))?;
            tracing::info!(%kind, namespace, name = created.metadata.name.as_deref().unwrap_or_default(), dry_run, "created");
            if !dry_run {
                self.observe_write(kind, created);
            }
            Ok(())
        })
    }

    fn patch<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        patch: &'a Patch,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let params = PatchParams { dry_run, ..PatchParams::default() };
            let api = self.api(kind, namespace);
            let result = match patch {
                Patch::Merge(merge) => api.patch(name, &params, &kube::api::Patch::Merge(merge)).await,
                Patch::Json(operations) => {
                    api.patch(name, &params, &kube::api::Patch::<()>::Json(operations.clone())).await
                }
            };
            let patched = result.map_err(|e| api_error(&e))?;
            tracing::debug!(%kind, namespace, name, dry_run, "patched");
            if !dry_run {
                self.observe_write(kind, patched);
            }
            Ok(())
        })
    }

    fn delete<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        resource_version: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let params = DeleteParams {
                preconditions: resource_version
                    .map(|v| Preconditions { resource_version: Some(v.to_owned()), uid: None }),
                ..DeleteParams::default()
            };
            self.api(kind, namespace).delete(name, &params).await.map_err(|e| api_error(&e))?;
            // The watch brings the deletion (or the finalizers' last word) to the cache.
            tracing::info!(%kind, namespace, name, "deleted");
            Ok(())
        })
    }
}

impl KubeCluster {
    /// The API of a kind in a namespace (all of them, or cluster-scoped, for `""`); the resource is
    /// derived from the kind, so writing needs no discovery.
    fn api(&self, kind: &Kind, namespace: &str) -> Api<DynamicObject> {
        let (group, version) = kind.api_version.rsplit_once('/').unwrap_or(("", &kind.api_version));
        let gvk = GroupVersionKind::gvk(group, version, &kind.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &kind.plural());
        if namespace.is_empty() {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        }
    }

    /// Shows a write in the watch cache of its kind at once (when that kind is watched whole; a
    /// cache of a part of it sees the write when its watch brings it, if the object is in its part).
    fn observe_write(&self, kind: &Kind, object: DynamicObject) {
        if let Some(cache) = self.caches.iter().find(|c| c.is(&kind.api_version, &kind.kind) && c.is_whole())
        {
            cache.observe_write(object);
        }
    }
}

/// The API server's answer as an [`ApiError`], or the transport failure as a 503.
fn api_error(error: &kube::Error) -> ApiError {
    match error {
        kube::Error::Api(response) => ApiError {
            code: response.code,
            reason: ApiError::known_reason(&response.reason),
            message: if response.message.is_empty() { error_text(error) } else { response.message.clone() },
        },
        other => ApiError { code: 503, reason: "ServiceUnavailable", message: error_text(other) },
    }
}
