//! The simulated cluster's API server: evac's [`MemoryStore`] (resource versions, conflicts,
//! watch history), on the simulated clock, plus what the API server adds to a store: graceful
//! pod deletion and the in-process services webhooks can name.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use evac_cluster::MemoryStore;
pub use evac_cluster::{ApiError, Event, EventType, Kind, Patch};
use serde_json::{json, Value};

use crate::api::webhooks::WebhookService;
use crate::SimClock;

/// When a terminating pod's grace period ends, in milliseconds of simulated time: timestamps
/// only keep whole seconds.
pub const TERMINATE_AT_ANNOTATION: &str = "sim.evac.io/terminate-at-ms";

/// A deletion's result with "already gone" (404) taken as done, as a controller takes it: the
/// object it wanted gone is gone.
pub fn deleted(result: Result<Arc<Value>, ApiError>) -> Result<(), ApiError> {
    match result {
        Ok(_) | Err(ApiError { code: 404, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The simulated API server. It dereferences to its [`MemoryStore`] for reads and writes.
pub struct Store {
    memory: Arc<MemoryStore>,
    clock: Arc<SimClock>,
    /// Services that answer in process (namespace, name): webhooks registered with
    /// `clientConfig.service` reach them.
    services: RwLock<HashMap<(String, String), Arc<dyn WebhookService>>>,
    /// What listens on each node's loopback, by port: hostNetwork servers (evac's hold endpoint)
    /// the kubelet's `httpGet` hooks reach.
    endpoints: RwLock<HashMap<u16, Arc<dyn NodeEndpoint>>>,
    /// Drives webhook calls by URL to their answer, for components that create objects.
    #[cfg(feature = "http")]
    runtime: std::sync::OnceLock<tokio::runtime::Runtime>,
}

/// A hostNetwork server on every node's loopback, as the kubelet's `preStop` `httpGet` reaches it.
pub trait NodeEndpoint: Send + Sync {
    /// A `GET` of `path` on `node`'s `127.0.0.1`, by the hook of `call`: the answer, or not yet.
    fn get(&self, store: &Store, node: &str, path: &str, call: &HookCall) -> HookAnswer;
}

/// Who calls a node endpoint: a container's `preStop` hook, while the kubelet stops its pod.
#[derive(Debug, Clone)]
pub struct HookCall {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's uid: one call per pod stopped.
    pub uid: String,
    /// The container whose hook calls.
    pub container: String,
    /// When the hook began, in simulated time since the start.
    pub since: Duration,
}

/// A node endpoint's answer to a hook.
#[derive(Debug, Clone, PartialEq)]
pub enum HookAnswer {
    /// No answer yet: the kubelet asks again.
    Waiting,
    /// An HTTP answer with this status: the hook is over.
    Answered(u16),
    /// The connection failed (refused, reset): the hook is over too.
    Failed(String),
}

impl Deref for Store {
    type Target = MemoryStore;

    fn deref(&self) -> &MemoryStore {
        &self.memory
    }
}

impl Store {
    /// A store on `clock` that keeps the last `history_limit` changes for watches.
    pub fn new(clock: Arc<SimClock>, history_limit: usize) -> Self {
        let memory = Arc::new(MemoryStore::new(Arc::clone(&clock) as _, history_limit));
        Self {
            memory,
            clock,
            services: RwLock::default(),
            endpoints: RwLock::default(),
            #[cfg(feature = "http")]
            runtime: std::sync::OnceLock::new(),
        }
    }

    /// The objects, as a cluster back end for evac's hosts (reads, writes, change feed).
    pub fn memory(&self) -> &Arc<MemoryStore> {
        &self.memory
    }

    /// The simulated clock.
    pub fn clock(&self) -> &Arc<SimClock> {
        &self.clock
    }

    /// Makes a service answer webhooks in process, as a Service in the cluster would.
    pub fn register_service(&self, namespace: &str, name: &str, service: Arc<dyn WebhookService>) {
        let mut services = self.services.write().unwrap_or_else(PoisonError::into_inner);
        services.insert((namespace.to_owned(), name.to_owned()), service);
    }

    /// The in-process service of that namespace and name, if one is registered.
    pub fn service(&self, namespace: &str, name: &str) -> Option<Arc<dyn WebhookService>> {
        let services = self.services.read().unwrap_or_else(PoisonError::into_inner);
        services.get(&(namespace.to_owned(), name.to_owned())).cloned()
    }

    /// Makes an endpoint listen on every node's loopback at `port` (a hostNetwork DaemonSet).
    pub fn register_node_endpoint(&self, port: u16, endpoint: Arc<dyn NodeEndpoint>) {
        self.endpoints.write().unwrap_or_else(PoisonError::into_inner).insert(port, endpoint);
    }

    /// What listens on the nodes' loopback at `port`, if anything.
    pub fn node_endpoint(&self, port: u16) -> Option<Arc<dyn NodeEndpoint>> {
        self.endpoints.read().unwrap_or_else(PoisonError::into_inner).get(&port).cloned()
    }

    /// Drives a future to its end from a component's (synchronous) reconcile: at once when it
    /// is ready at its first poll (in-process webhooks are); with the `http` feature, on a
    /// runtime of the store's own (a webhook by URL); without it, `None`.
    pub fn complete<T>(&self, future: impl std::future::Future<Output = T>) -> Option<T> {
        let mut future = std::pin::pin!(future);
        let waker = futures::task::noop_waker();
        let mut context = std::task::Context::from_waker(&waker);
        let first = {
            // A webhook's HTTP client needs a runtime around it from its first poll on.
            #[cfg(feature = "http")]
            let _entered = self.runtime().enter();
            future.as_mut().poll(&mut context)
        };
        if let std::task::Poll::Ready(out) = first {
            return Some(out);
        }
        #[cfg(feature = "http")]
        return Some(self.runtime().block_on(future));
        #[cfg(not(feature = "http"))]
        None
    }

    #[cfg(feature = "http")]
    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime starts")
        })
    }

    /// A node's `spec.taints`.
    pub fn node_taints(&self, node: &str) -> Result<Vec<Value>, ApiError> {
        let current = self.get(&Kind::new("v1", "Node"), "", node)?;
        Ok(current.pointer("/spec/taints").and_then(Value::as_array).cloned().unwrap_or_default())
    }

    /// Sets a node's `spec.taints` (a merge patch: the list is replaced whole).
    pub fn set_node_taints(&self, node: &str, taints: &[Value]) -> Result<(), ApiError> {
        let patch = Patch::Merge(json!({"spec": {"taints": taints}}));
        self.patch(&Kind::new("v1", "Node"), "", node, &patch, false).map(drop)
    }

    /// Deletes an object as the API server does for its kind. A pod that a node runs is only
    /// marked (`deletionTimestamp` = now + grace, `deletionGracePeriodSeconds`): its kubelet stops it
    /// and removes it when the grace period ends (see [`TERMINATE_AT_ANNOTATION`]). The grace period
    /// is `grace_seconds` if given, else the pod's `terminationGracePeriodSeconds` (30 by default);
    /// 0, an unbound pod or a finished one, and any other kind, go at once. A second deletion can
    /// only shorten the grace period.
    pub fn delete_gracefully(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        grace_seconds: Option<u64>,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        self.delete_gracefully_if(kind, namespace, name, grace_seconds, None, dry_run)
    }

    /// [`Store::delete_gracefully`], only while the object is at `resource_version` when one is
    /// given (DeleteOptions' `preconditions.resourceVersion`): 409 Conflict otherwise.
    pub fn delete_gracefully_if(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        grace_seconds: Option<u64>,
        resource_version: Option<&str>,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let current = self.get(kind, namespace, name)?;
        let text = |pointer: &str| current.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
        let finished = matches!(text("/status/phase"), "Succeeded" | "Failed");
        if kind.is("kubevirt.io/v1", "VirtualMachineInstance") && !finished && grace_seconds != Some(0) {
            return self.mark_vmi_deleted(kind, namespace, name, &current, resource_version, dry_run);
        }
        let runs_on_a_node = kind.is("v1", "Pod") && !text("/spec/nodeName").is_empty() && !finished;
        let grace = grace_seconds
            .or_else(|| current.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_u64))
            .unwrap_or(30);
        if !runs_on_a_node || grace == 0 {
            return self.delete_if(kind, namespace, name, resource_version, dry_run);
        }
        evac_cluster::check_precondition(kind, name, &current, resource_version)?;
        let deadline = self.clock.elapsed() + Duration::from_secs(grace);
        let earlier = current
            .pointer(&format!("/metadata/annotations/{}", TERMINATE_AT_ANNOTATION.replace('/', "~1")))
            .and_then(Value::as_str)
            .and_then(|ms| ms.parse::<u128>().ok());
        if earlier.is_some_and(|earlier| earlier <= deadline.as_millis()) {
            return Ok(current);
        }
        let timestamp = (self.clock.now() + chrono::Duration::seconds(grace as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let patch = Patch::Merge(json!({"metadata": {
            "deletionTimestamp": timestamp,
            "deletionGracePeriodSeconds": grace,
            "annotations": {TERMINATE_AT_ANNOTATION: deadline.as_millis().to_string()},
        }}));
        self.patch(kind, namespace, name, &patch, dry_run)
    }

    /// A VMI that has not stopped is only marked deleted (`deletionTimestamp`, its
    /// `terminationGracePeriodSeconds`, 30 by default): KubeVirt's finalizer
    /// (`kubevirt.io/foregroundDeleteVirtualMachine`) keeps it while virt-controller deletes its
    /// pods and the guest shuts down, and lets it go once it is final (see
    /// `actors::virt_controller`).
    fn mark_vmi_deleted(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        current: &Value,
        resource_version: Option<&str>,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        evac_cluster::check_precondition(kind, name, current, resource_version)?;
        if current.pointer("/metadata/deletionTimestamp").is_some() {
            return Ok(Arc::new(current.clone()));
        }
        let grace =
            current.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_u64).unwrap_or(30);
        let timestamp = (self.clock.now() + chrono::Duration::seconds(grace as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let patch = Patch::Merge(
            json!({"metadata": {"deletionTimestamp": timestamp, "deletionGracePeriodSeconds": grace}}),
        );
        self.patch(kind, namespace, name, &patch, dry_run)
    }
}

#[cfg(test)]
mod tests;
