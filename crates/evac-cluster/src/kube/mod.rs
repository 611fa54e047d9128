//! The real-cluster back end: reads from kube-rs watch caches, writes through the API server.
//!
//! Each resource a policy may read (its `contextAwareResources`) gets a watch cache, started at
//! connect time, so that reads during admission never wait on the network. A resource outside
//! that set is refused rather than fetched: the host only holds what it was told to watch. Each
//! cache also logs the changes it sees, which `evac control` reads as a [`ChangeFeed`].

mod cache;
mod change_log;
mod contact;
mod discovery;
mod errors;
mod lease;
mod writer;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use kube::Client;
use tokio::task::AbortHandle;

use self::cache::WatchCache;
use self::contact::Contact;
pub use self::contact::PROBE_INTERVAL;
pub use self::lease::{LeaderElector, LeaseSettings, LEASE_ACCESS};
use crate::Kind;
use crate::{Change, ChangeFeed, Cursor, ListQuery, ObjectSource, ReadError};

/// A Kubernetes API server, through watch caches of the resources policies read.
pub struct KubeCluster {
    client: Client,
    /// The API server's URL, for messages.
    server: String,
    /// One per resource; a policy reads a handful, so a scan finds one faster than hashing.
    caches: Vec<Arc<WatchCache>>,
    /// When the API server last answered.
    contact: Arc<Contact>,
    /// The caches' watch tasks and the contact probe, stopped when the cluster is dropped.
    tasks: Vec<AbortHandle>,
}

/// metrics-server's API group: an add-on, so a cluster may not serve it.
const OPTIONAL_GROUP: &str = "metrics.k8s.io";

/// How often a resource the API serves no watch of is listed (metrics-server's NodeMetrics):
/// metrics-server's default `--metric-resolution`, how often its figures change.
pub const POLL_INTERVAL: Duration = Duration::from_secs(15);

impl KubeCluster {
    /// Connects with the `kubeconfig` file if given, else with the inferred configuration
    /// (in-cluster, or `$KUBECONFIG` / `~/.kube/config`), resolves each resource through API
    /// discovery and starts watching it. The caches fill in the background: see
    /// [`wait_synced`](Self::wait_synced). Runs within a Tokio runtime, which runs the watches.
    pub async fn connect(kubeconfig: Option<&Path>, resources: &[Kind]) -> Result<Self> {
        let config = discovery::load_config(kubeconfig).await?;
        let server = config.cluster_url.to_string().trim_end_matches('/').to_owned();
        let client = Client::try_from(config)
            .with_context(|| format!("cannot create a client for the Kubernetes API server {server}"))?;
        let mut resources = resources.to_vec();
        resources.sort();
        resources.dedup();
        let found = futures::future::join_all(
            resources.iter().map(|grant| discovery::resolve(&client, &server, grant)),
        )
        .await;
        let mut resolved = Vec::with_capacity(found.len());
        for (grant, found) in resources.iter().zip(found) {
            match found {
                Ok(found) => resolved.push(found),
                // An add-on's API (metrics-server's) may be missing or down: it is not cached,
                // and reads of it fail, which decisions take as "no figure".
                Err(error) if grant.group() == OPTIONAL_GROUP => {
                    tracing::warn!(resource = %format!("{} {}", grant.api_version, grant.kind), error = %format!("{error:#}"),
                        "not served: reads of it fail (install metrics-server for node pressure figures)");
                }
                Err(error) => return Err(error),
            }
        }
        let mut caches = Vec::with_capacity(resolved.len());
        let mut tasks = Vec::with_capacity(resolved.len() + 1);
        let contact = Arc::new(Contact::new());
        tasks.push(tokio::spawn(Arc::clone(&contact).probe(client.clone(), server.clone())).abort_handle());
        for discovery::Resolved { resource, namespaced, watchable } in resolved {
            let cache = WatchCache::new(resource, namespaced);
            let task = if watchable {
                tokio::spawn(Arc::clone(&cache).run(client.clone()))
            } else {
                tokio::spawn(Arc::clone(&cache).poll(client.clone(), POLL_INTERVAL))
            };
            tasks.push(task.abort_handle());
            caches.push(cache);
        }
        tracing::info!(%server, resources = caches.len(), "watching the Kubernetes API server");
        Ok(Self { client, server, caches, contact, tasks })
    }

    /// The namespace of the pod in a cluster (in-cluster config), else of the kubeconfig's
    /// context, else `default`.
    pub fn default_namespace(&self) -> &str {
        self.client.default_namespace()
    }

    /// A candidate for the Lease `settings` name, through this cluster's client (a Lease is
    /// read and written directly, never through the caches).
    pub fn leader_elector(&self, settings: LeaseSettings) -> Result<LeaderElector> {
        LeaderElector::new(self.client.clone(), settings)
    }

    /// Whether every cache has completed its initial list.
    pub fn is_synced(&self) -> bool {
        self.caches.iter().all(|cache| cache.is_synced())
    }

    /// Why the caches may be behind the cluster by more than `bound`, if they may be: the API
    /// server has not answered for longer (probed every [`PROBE_INTERVAL`], so `bound` should be
    /// several of those), or a cache's watch has been failing for longer. Reads still answer from
    /// what the caches hold; this is for readiness, so that traffic goes to a replica that sees the
    /// cluster as it is.
    pub fn staleness(&self, bound: Duration) -> Option<String> {
        let silent = self.contact.silent_for();
        if silent > bound {
            return Some(format!(
                "the Kubernetes API server {} has not answered for {}s (the caches may be stale; bound {}s)",
                self.server,
                silent.as_secs(),
                bound.as_secs_f64()
            ));
        }
        self.caches.iter().find_map(|cache| {
            let (failing, error) = cache.failing().filter(|(failing, _)| *failing > bound)?;
            Some(format!(
                "the watch of {} has been failing for {}s (bound {}s): {error}",
                cache.describe(),
                failing.as_secs(),
                bound.as_secs_f64()
            ))
        })
    }

    /// Waits until every cache has completed its initial list. On timeout, the error names the
    /// caches still waiting and their last watch error (e.g. RBAC refusing the list).
    pub async fn wait_synced(&self, timeout: Duration) -> Result<()> {
        let all = futures::future::join_all(self.caches.iter().map(|cache| cache.wait_synced()));
        if tokio::time::timeout(timeout, all).await.is_ok() {
            return Ok(());
        }
        let waiting: Vec<String> = self
            .caches
            .iter()
            .filter(|cache| !cache.is_synced())
            .map(|cache| match cache.last_error() {
                Some(error) => format!("{} (last watch error: {error})", cache.describe()),
                None => format!("{} (no watch error; the list is still in progress)", cache.describe()),
            })
            .collect();
        if waiting.is_empty() {
            return Ok(());
        }
        bail!(
            "the watch caches of {} have not synced with the Kubernetes API server {} within {timeout:?}",
            waiting.join(", "),
            self.server
        )
    }

    fn cache(&self, api_version: &str, kind: &str) -> Result<&WatchCache, ReadError> {
        self.caches.iter().find(|cache| cache.is(api_version, kind)).map(|cache| &**cache).ok_or_else(|| {
            ReadError::other(format!(
                "{api_version} {kind} is not watched: add it to the policy's contextAwareResources"
            ))
        })
    }
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl ObjectSource for KubeCluster {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<[u8]>, ReadError> {
        self.cache(api_version, kind)?.get(namespace, name)
    }

    fn list(&self, api_version: &str, kind: &str, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError> {
        self.cache(api_version, kind)?.list(query)
    }
}

/// Each watched kind's changes come from its cache's change log: see [`WatchCache::changes_since`].
impl ChangeFeed for KubeCluster {
    fn changes(
        &self,
        api_version: &str,
        kind: &str,
        cursor: Cursor,
    ) -> Result<(Vec<Change>, u64), ReadError> {
        let cache = self.caches.iter().find(|cache| cache.is(api_version, kind)).ok_or_else(|| {
            ReadError::other(format!(
                "{api_version} {kind} is not watched: the change feed follows only the resources given at connect"
            ))
        })?;
        cache.changes_since(cursor)
    }
}
