//! `kubectl drain <node> --ignore-daemonsets --delete-emptydir-data`, as an actor: it cordons
//! the node, asks for the eviction of every pod on it (DaemonSet pods aside) at once, retries an
//! eviction refused with 429 every 5 s (kubectl's "will retry after 5s"), and is done when no pod
//! is left on the node. A refusal with another code stops the drain, as kubectl exits on it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;

use super::{Evictor, Wake};
use crate::kinds::{nodes, pods};
use crate::objects::Pod;
use crate::store::{Patch, Store};
use crate::ApiError;

/// kubectl's wait before asking again after a 429.
pub const RETRY: Duration = Duration::from_secs(5);

/// The requester name drains record their evictions under.
pub const REQUESTER: &str = "kubectl-drain";

/// One `kubectl drain` of a node, from a given moment.
pub struct Drain {
    /// The node to drain.
    pub node: String,
    /// When the drain starts, in simulated time since the start.
    pub start: Duration,
    evictor: Arc<dyn Evictor>,
    state: Mutex<DrainState>,
}

/// How a drain went.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct DrainState {
    /// Whether the node has been cordoned (`spec.unschedulable: true`).
    pub cordoned: bool,
    /// Eviction requests made.
    pub requests: u64,
    /// Of those, the ones refused with 429 (each retried after [`RETRY`]).
    pub refused: u64,
    /// When the node was empty, in simulated time since the start.
    #[serde(skip)]
    pub finished: Option<Duration>,
    /// Why the drain stopped early, as kubectl reports it.
    pub error: Option<String>,
    /// When each pod may be asked again (namespace/name).
    #[serde(skip)]
    retry_at: HashMap<String, Duration>,
}

impl Drain {
    /// A drain of `node` from simulated time `start`, asking for evictions through `evictor`.
    pub fn new(node: impl Into<String>, start: Duration, evictor: Arc<dyn Evictor>) -> Self {
        Self { node: node.into(), start, evictor, state: Mutex::default() }
    }

    /// How the drain went so far.
    pub fn state(&self) -> DrainState {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DrainState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cordons the node, then asks for the eviction of each pod on it that is not already leaving
    /// or waiting to be retried; returns when the drain starts or a refused eviction is next retried.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let now = store.clock().elapsed();
        if now < self.start {
            return Ok(Some(self.start));
        }
        let mut state = self.lock();
        if state.finished.is_some() || state.error.is_some() {
            return Ok(None);
        }
        if !state.cordoned {
            let patch = Patch::Merge(json!({"spec": {"unschedulable": true}}));
            store.patch(&nodes(), "", &self.node, &patch, false)?;
            state.cordoned = true;
        }
        let selector = evac_cluster::FieldSelector::parse(&format!("spec.nodeName={}", self.node))
            .map_err(ApiError::bad_request)?;
        let (pods, _) = store.list(&pods(), None, None, Some(&selector));
        let mut wake = Wake::default();
        let mut left = 0;
        for pod in pods.iter().map(|p| Pod(p)).filter(|p| !owned_by_daemon_set(*p)) {
            // kubectl waits for deleted pods to go; finished ones it deletes like any other.
            left += 1;
            if pod.is_terminating() {
                continue;
            }
            let (namespace, name) = (pod.meta().namespace(), pod.meta().name());
            let key = format!("{namespace}/{name}");
            if let Some(&at) = state.retry_at.get(&key) {
                if at > now {
                    wake.at(at);
                    continue;
                }
            }
            state.requests += 1;
            match self.evictor.evict(store, namespace, name, REQUESTER) {
                Ok(()) | Err(ApiError { code: 404, .. }) => {
                    state.retry_at.remove(&key);
                }
                Err(e) if e.code == 429 => {
                    state.refused += 1;
                    state.retry_at.insert(key, now + RETRY);
                    wake.at(now + RETRY);
                }
                Err(e) => {
                    state.error = Some(format!(
                        "error when evicting pods/\"{name}\" -n \"{namespace}\": {}",
                        e.message
                    ));
                    return Ok(None);
                }
            }
        }
        if left == 0 {
            state.finished = Some(now);
        }
        Ok(wake.next())
    }
}

fn owned_by_daemon_set(pod: Pod<'_>) -> bool {
    pod.meta().controller().is_some_and(|(kind, _, _)| kind == "DaemonSet")
}

impl crate::Actor for Drain {
    fn name(&self) -> &'static str {
        "kubectl-drain"
    }

    fn watches(&self) -> Option<Vec<crate::store::Kind>> {
        crate::driver::kinds(&[("v1", "Pod")])
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        Drain::reconcile(self, store)
    }
}

#[cfg(test)]
mod tests;
