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
mod error;
mod errors;
mod lease;
mod writer;

#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::task::AbortHandle;

use self::cache::WatchCache;
use self::contact::Contact;
pub use self::contact::PROBE_INTERVAL;
pub use self::error::{ConnectError, LeaseError};
pub use self::lease::{LeaderElector, LeaseSettings, LEASE_ACCESS};
use crate::Kind;
use crate::{Change, ChangeFeed, Cursor, ListQuery, ObjectSource, ReadError};

/// What part of a resource a watch cache holds: all of it, or what the selectors select (a node's
/// own pods, as a node-local host reads them).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Scope {
    /// A label selector, e.g. `kubevirt.io/nodeName=node01`.
    pub label_selector: Option<String>,
    /// A field selector, e.g. `spec.nodeName=node01`.
    pub field_selector: Option<String>,
}

/// A resource to watch, and the part of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Watch {
    /// The resource.
    pub kind: Kind,
    /// The part of it.
    pub scope: Scope,
}

impl Watch {
    /// The whole resource.
    pub fn all(kind: Kind) -> Self {
        Self { kind, scope: Scope::default() }
    }

    /// What `field_selector` selects of the resource.
    pub fn fields(kind: Kind, field_selector: impl Into<String>) -> Self {
        Self { kind, scope: Scope { label_selector: None, field_selector: Some(field_selector.into()) } }
    }

    /// What `label_selector` selects of the resource.
    pub fn labels(kind: Kind, label_selector: impl Into<String>) -> Self {
        Self { kind, scope: Scope { label_selector: Some(label_selector.into()), field_selector: None } }
    }
}

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
    /// Counts every change any cache applied.
    changed: Arc<tokio::sync::watch::Sender<u64>>,
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
    pub async fn connect(kubeconfig: Option<&Path>, resources: &[Kind]) -> Result<Self, ConnectError> {
        let watches: Vec<Watch> = resources.iter().cloned().map(Watch::all).collect();
        Self::connect_watches(kubeconfig, &watches).await
    }

    /// [`connect`](Self::connect), watching parts of resources: a resource watched in several
    /// parts answers a list from the part that covers its selectors, and a get from the first part
    /// that holds the object.
    pub async fn connect_watches(kubeconfig: Option<&Path>, watches: &[Watch]) -> Result<Self, ConnectError> {
        let config = discovery::load_config(kubeconfig).await?;
        let server = config.cluster_url.to_string().trim_end_matches('/').to_owned();
        let client = Client::try_from(config)
            .map_err(|e| ConnectError::Client { server: server.clone(), why: errors::error_text(&e) })?;
        let mut watches = watches.to_vec();
        watches.sort();
        watches.dedup();
        let found = futures::future::join_all(
            watches.iter().map(|watch| discovery::resolve(&client, &server, &watch.kind)),
        )
        .await;
        let mut resolved = Vec::with_capacity(found.len());
        for (watch, found) in watches.iter().zip(found) {
            let grant = &watch.kind;
            match found {
                Ok(found) => resolved.push((found, watch.scope.clone())),
                // An add-on's API (metrics-server's) may be missing or down: it is not cached,
                // and reads of it fail, which decisions take as "no figure".
                Err(error) if grant.group() == OPTIONAL_GROUP => {
                    tracing::warn!(resource = %format!("{} {}", grant.api_version, grant.kind), %error,
                        "not served: reads of it fail (install metrics-server for node pressure figures)");
                }
                Err(error) => return Err(error),
            }
        }
        let mut caches = Vec::with_capacity(resolved.len());
        let mut tasks = Vec::with_capacity(resolved.len() + 1);
        let contact = Arc::new(Contact::new());
        let changed = Arc::new(tokio::sync::watch::channel(0).0);
        tasks.push(tokio::spawn(Arc::clone(&contact).probe(client.clone(), server.clone())).abort_handle());
        for (discovery::Resolved { resource, namespaced, watchable }, scope) in resolved {
            let cache = WatchCache::new(resource, namespaced, scope, Arc::clone(&changed));
            let task = if watchable {
                tokio::spawn(Arc::clone(&cache).run(client.clone(), Arc::clone(&contact)))
            } else {
                tokio::spawn(Arc::clone(&cache).poll(client.clone(), POLL_INTERVAL))
            };
            tasks.push(task.abort_handle());
            caches.push(cache);
        }
        tracing::info!(%server, resources = caches.len(), "watching the Kubernetes API server");
        Ok(Self { client, server, caches, contact, tasks, changed })
    }

    /// A receiver that sees a new value whenever a cache changes: a host waiting for the cluster
    /// to move awaits its `changed()`.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The namespace of the pod in a cluster (in-cluster config), else of the kubeconfig's
    /// context, else `default`.
    pub fn default_namespace(&self) -> &str {
        self.client.default_namespace()
    }

    /// A candidate for the Lease `settings` name, through this cluster's client (a Lease is
    /// read and written directly, never through the caches).
    pub fn leader_elector(&self, settings: LeaseSettings) -> Result<LeaderElector, LeaseError> {
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
    pub async fn wait_synced(&self, timeout: Duration) -> Result<(), ConnectError> {
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
        Err(ConnectError::NotSynced { waiting: waiting.join(", "), server: self.server.clone(), timeout })
    }

    /// The cache of a kind that covers `query` (a list's selectors; `None` for a get).
    fn cache(
        &self,
        api_version: &str,
        kind: &str,
        query: Option<&ListQuery<'_>>,
    ) -> Result<&WatchCache, ReadError> {
        let mut of_kind = self.caches.iter().filter(|cache| cache.is(api_version, kind)).peekable();
        if of_kind.peek().is_none() {
            return Err(ReadError::other(format!(
                "{api_version} {kind} is not watched: add it to the policy's contextAwareResources"
            )));
        }
        of_kind.find(|cache| cache.covers(query)).map(|cache| &**cache).ok_or_else(|| {
            ReadError::other(format!(
                "{api_version} {kind} is watched only in part, and no part covers this list's selectors"
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
        // A resource watched in parts: the first part that holds the object.
        let mut answer = self.cache(api_version, kind, None)?.get(namespace, name);
        for cache in self.caches.iter().filter(|cache| cache.is(api_version, kind)).skip(1) {
            match &answer {
                Err(e) if e.is_not_found() => answer = cache.get(namespace, name),
                _ => break,
            }
        }
        answer
    }

    fn list(&self, api_version: &str, kind: &str, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError> {
        self.cache(api_version, kind, Some(query))?.list(query)
    }
}

/// Each watched kind's changes come from its cache's change log: see `WatchCache::changes_since`.
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
