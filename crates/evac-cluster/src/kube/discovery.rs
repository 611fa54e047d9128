//! Finding the API server and the resources to watch on it.

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::discovery::{verbs, Scope};
use kube::core::{ApiResource, GroupVersion};
use kube::error::DiscoveryError;
use kube::{Client, Config};

use super::errors::{error_text, kube_error_text};
use crate::Kind;

/// How long resolving one resource may take. kube-rs' own read timeout (295 s, sized for watches)
/// would leave `evac` hanging at startup on an API server that accepts connections but never answers.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(20);

/// The client configuration: from `kubeconfig` if given, else inferred (the in-cluster service
/// account, or `$KUBECONFIG` / `~/.kube/config`).
pub(super) async fn load_config(kubeconfig: Option<&Path>) -> Result<Config> {
    // kube-rs' texts repeat their causes; `error_text` keeps each once.
    match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| anyhow!(error_text(&e)))
                .with_context(|| format!("cannot read kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| anyhow!(error_text(&e)))
                .with_context(|| format!("invalid kubeconfig {}", path.display()))
        }
        None => Config::infer().await.map_err(|e| anyhow!(error_text(&e))).context(
            "no Kubernetes client configuration: not running in a cluster, and no $KUBECONFIG or ~/.kube/config",
        ),
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
pub(super) async fn resolve(client: &Client, server: &str, grant: &Kind) -> Result<Resolved> {
    let Kind { api_version, kind } = grant;
    let context = || format!("cannot watch {api_version} {kind} on the Kubernetes API server {server}");
    // `GroupVersion`'s parser takes `a/b/c` as group `a`, version `b/c`: check the shape first.
    let parts: Vec<&str> = api_version.split('/').collect();
    if parts.len() > 2 || parts.iter().any(|part| part.is_empty()) || kind.is_empty() {
        return Err(anyhow!("invalid apiVersion {api_version:?} or kind {kind:?}")).with_context(context);
    }
    let group_version: GroupVersion = api_version
        .parse()
        .map_err(|_| anyhow!("invalid apiVersion {api_version:?}"))
        .with_context(context)?;
    let gvk = group_version.with_kind(kind);
    let discovered = tokio::time::timeout(DISCOVERY_TIMEOUT, kube::discovery::pinned_kind(client, &gvk))
        .await
        .map_err(|_| anyhow!("no answer to API discovery within {DISCOVERY_TIMEOUT:?}"))
        .with_context(context)?;
    let (resource, capabilities) = match discovered {
        Ok(found) => found,
        Err(kube::Error::Discovery(DiscoveryError::MissingKind(_))) => {
            return Err(anyhow!("the API server does not serve kind {kind} in {api_version}"))
                .with_context(context)
        }
        Err(kube::Error::Api(response)) if response.code == 404 => {
            return Err(anyhow!("the API server does not serve {api_version} (is its CRD installed?)"))
                .with_context(context)
        }
        Err(error) => return Err(anyhow!(kube_error_text(&error))).with_context(context),
    };
    if !capabilities.supports_operation(verbs::LIST) {
        return Err(anyhow!("the resource does not support {}", verbs::LIST)).with_context(context);
    }
    Ok(Resolved {
        resource,
        namespaced: capabilities.scope == Scope::Namespaced,
        // metrics-server's resources are listed, not watched: they are polled instead.
        watchable: capabilities.supports_operation(verbs::WATCH),
    })
}
