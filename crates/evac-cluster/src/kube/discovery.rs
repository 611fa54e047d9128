//! Finding the API server and the resources to watch on it.

use std::path::Path;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::discovery::{verbs, Scope};
use kube::core::{ApiResource, GroupVersion};
use kube::error::DiscoveryError;
use kube::{Client, Config};

use super::error::ConnectError;
use super::errors::{error_text, kube_error_text};
use crate::Kind;

/// How long resolving one resource may take. kube-rs' own read timeout (295 s, sized for watches)
/// would leave `evac` hanging at startup on an API server that accepts connections but never answers.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(20);

/// The client configuration: from `kubeconfig` if given, else inferred (the in-cluster service
/// account, or `$KUBECONFIG` / `~/.kube/config`).
pub(super) async fn load_config(kubeconfig: Option<&Path>) -> Result<Config, ConnectError> {
    // kube-rs' texts repeat their causes; `error_text` keeps each once.
    match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| ConnectError::ReadKubeconfig { path: path.to_owned(), why: error_text(&e) })?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| ConnectError::InvalidKubeconfig { path: path.to_owned(), why: error_text(&e) })
        }
        None => Config::infer().await.map_err(|e| ConnectError::NoConfiguration(error_text(&e))),
    }
}

/// A resource to watch: its API resource (for the URLs) and whether it is namespaced.
pub(super) struct Resolved {
    pub resource: ApiResource,
    pub namespaced: bool,
    /// The API serves a watch of it; without one (metrics-server), it is polled.
    pub watchable: bool,
}

/// Resolves a policy's resource through the API server's discovery, so that a typo in the policy's
/// `contextAwareResources` or a missing CRD fails at startup, not on the first read.
pub(super) async fn resolve(client: &Client, server: &str, grant: &Kind) -> Result<Resolved, ConnectError> {
    let Kind { api_version, kind } = grant;
    let refused = |why: String| ConnectError::Resource {
        api_version: api_version.clone(),
        kind: kind.clone(),
        server: server.to_owned(),
        why,
    };
    // `GroupVersion`'s parser takes `a/b/c` as group `a`, version `b/c`: check the shape first.
    let parts: Vec<&str> = api_version.split('/').collect();
    if parts.len() > 2 || parts.iter().any(|part| part.is_empty()) || kind.is_empty() {
        return Err(refused(format!("invalid apiVersion {api_version:?} or kind {kind:?}")));
    }
    let group_version: GroupVersion =
        api_version.parse().map_err(|_| refused(format!("invalid apiVersion {api_version:?}")))?;
    let gvk = group_version.with_kind(kind);
    let discovered = tokio::time::timeout(DISCOVERY_TIMEOUT, kube::discovery::pinned_kind(client, &gvk))
        .await
        .map_err(|_| refused(format!("no answer to API discovery within {DISCOVERY_TIMEOUT:?}")))?;
    let (resource, capabilities) = match discovered {
        Ok(found) => found,
        Err(kube::Error::Discovery(DiscoveryError::MissingKind(_))) => {
            return Err(refused(format!("the API server does not serve kind {kind} in {api_version}")))
        }
        Err(kube::Error::Api(response)) if response.code == 404 => {
            return Err(refused(format!(
                "the API server does not serve {api_version} (is its CRD installed?)"
            )))
        }
        Err(error) => return Err(refused(kube_error_text(&error))),
    };
    if !capabilities.supports_operation(verbs::LIST) {
        return Err(refused(format!("the resource does not support {}", verbs::LIST)));
    }
    Ok(Resolved {
        resource,
        namespaced: capabilities.scope == Scope::Namespaced,
        // metrics-server's resources are listed, not watched: they are polled instead.
        watchable: capabilities.supports_operation(verbs::WATCH),
    })
}
