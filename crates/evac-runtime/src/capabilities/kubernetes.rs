use std::collections::BTreeSet;
use std::sync::Arc;

use evac_core::cluster::{GetResource, ListResourcesAll, ListResourcesByNamespace};
use serde::Deserialize;

use super::{CapabilityError, CapabilityPatterns, HostCapabilities};
use evac_cluster::{ListQuery, ObjectSource};

/// A resource a policy may read: Kubewarden's `contextAwareResources` entry (`{apiVersion, kind}`).
pub type ResourceGrant = evac_cluster::Kind;

/// Kubewarden's `kubernetes` capabilities over an object source.
pub struct KubernetesCapabilities {
    source: Arc<dyn ObjectSource>,
    /// `None`: every resource may be read.
    grants: Option<BTreeSet<ResourceGrant>>,
    /// The capabilities the policy may call (`hostCapabilities`).
    allowed: CapabilityPatterns,
}

impl KubernetesCapabilities {
    /// Capabilities that read from `source`, every resource and capability allowed (as
    /// `kwctl run` does by default).
    pub fn new(source: Arc<dyn ObjectSource>) -> Self {
        Self { source, grants: None, allowed: CapabilityPatterns::AllowAll }
    }

    /// Limits the capabilities the policy may call, as Kubewarden does with `hostCapabilities`.
    pub fn allowing(mut self, allowed: CapabilityPatterns) -> Self {
        self.allowed = allowed;
        self
    }

    /// Limits reads to these resources, as Kubewarden does with `contextAwareResources`.
    pub fn granting(mut self, grants: impl IntoIterator<Item = ResourceGrant>) -> Self {
        self.grants = Some(grants.into_iter().collect());
        self
    }

    fn check_grant(&self, api_version: &str, kind: &str) -> Result<(), CapabilityError> {
        let Some(grants) = &self.grants else {
            return Ok(());
        };
        let wanted = ResourceGrant { api_version: api_version.to_owned(), kind: kind.to_owned() };
        if grants.contains(&wanted) {
            Ok(())
        } else {
            tracing::debug!(%api_version, %kind, "a policy read a resource its contextAwareResources do not grant");
            Err(CapabilityError::ResourceNotGranted {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })
        }
    }
}

fn decode<'a, T: Deserialize<'a>>(operation: &str, payload: &'a [u8]) -> Result<T, CapabilityError> {
    let invalid = |e: &dyn std::fmt::Display| CapabilityError::InvalidRequest {
        operation: operation.to_owned(),
        reason: e.to_string(),
    };
    serde_json::from_str(evac_core::json_text(payload).map_err(|e| invalid(&e))?).map_err(|e| invalid(&e))
}

impl HostCapabilities for KubernetesCapabilities {
    fn call(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, CapabilityError> {
        if binding != "kubewarden" {
            return Err(CapabilityError::UnknownBinding(binding.to_owned()));
        }
        let capability = format!("{namespace}/{operation}");
        // Kubewarden never gates `tracing` (and no pattern but `*` could allow it).
        if namespace != "tracing" && !self.allowed.allows(&capability) {
            tracing::debug!(%capability, "a policy called a host capability its hostCapabilities do not allow");
            return Err(CapabilityError::CapabilityNotGranted { capability });
        }
        if namespace != "kubernetes" {
            return Err(CapabilityError::UnknownCapability(format!("{binding}/{namespace}/{operation}")));
        }
        match operation {
            "get_resource" => {
                let r: GetResource<'_> = decode(operation, payload)?;
                self.check_grant(&r.api_version, &r.kind)?;
                let namespace = r.namespace.as_ref().map(|n| n.as_str()).filter(|n| !n.is_empty());
                self.source
                    .get(&r.api_version, &r.kind, namespace, &r.name)
                    .map(|object| object.to_vec())
                    .map_err(CapabilityError::Read)
            }
            "list_resources_all" => {
                let r: ListResourcesAll<'_> = decode(operation, payload)?;
                self.check_grant(&r.api_version, &r.kind)?;
                let query = ListQuery {
                    namespace: None,
                    label_selector: r.label_selector.as_ref().map(|s| s.as_str()),
                    field_selector: r.field_selector.as_ref().map(|s| s.as_str()),
                };
                self.source.list(&r.api_version, &r.kind, &query).map_err(CapabilityError::Read)
            }
            "list_resources_by_namespace" => {
                let r: ListResourcesByNamespace<'_> = decode(operation, payload)?;
                self.check_grant(&r.api_version, &r.kind)?;
                let query = ListQuery {
                    namespace: Some(&r.namespace),
                    label_selector: r.label_selector.as_ref().map(|s| s.as_str()),
                    field_selector: r.field_selector.as_ref().map(|s| s.as_str()),
                };
                self.source.list(&r.api_version, &r.kind, &query).map_err(CapabilityError::Read)
            }
            other => Err(CapabilityError::UnknownCapability(format!("kubewarden/kubernetes/{other}"))),
        }
    }
}
