//! The kubelet: node-pressure eviction for memory, and the stopping of pods ([`termination`]).
//!
//! When a node's `memory.available` stays under the soft threshold for the soft grace period (or
//! falls under the hard threshold), the kubelet picks a pod as `rankMemoryPressure` ranks them
//! (`pkg/kubelet/eviction/helpers.go`: usage over requests first, then the lowest priority, then
//! the most usage above requests; here every pod uses what it requests, so the lowest priority,
//! ties by name) and stops it with a grace period of `min(evictionMaxPodGracePeriod,
//! terminationGracePeriodSeconds)` (1 s at the hard threshold: `immediateEvictionGracePeriodSeconds`),
//! without deleting it: its `preStop` hooks run first, then SIGTERM; once its containers have
//! exited it stays `Failed` with reason `Evicted`, and only then carries its `DisruptionTarget`
//! condition (reason `TerminationByKubelet`). One pod is evicted at a time per node: the eviction
//! manager waits for the pod to stop (`killPodNow`).
//!
//! A deleted pod is stopped the same way, with its deletion's grace period, and removed once its
//! containers have exited. What becomes of a VM at SIGTERM is virt-handler's business, stock or as
//! the proposals would have it ([`termination`]).
//!
//! A pod uses the memory it requests (a launcher pod requests its VM's memory, as KubeVirt sets
//! the compute container's request); a node's is `status.capacity.memory`. The node gets the
//! `MemoryPressure` condition while under the soft threshold.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::json;

use evac_core::hold::VirtHandler;

use self::termination::{Step, Stopping};
use super::conditions_without;
use super::{quantity, Wake};
use crate::kinds::{nodes, pods};
use crate::objects::{Node, Pod};
use crate::store::{Patch, Store, TERMINATE_AT_ANNOTATION};
use crate::ApiError;

pub mod termination;

/// The `DisruptionTarget` reason the kubelet sets on the pods it evicts: Kubernetes' `TerminationByKubelet`.
pub const REASON: &str = "TerminationByKubelet";
/// Memory a node's system uses besides its pods (a quantity), which no eviction frees: how a
/// scenario puts a node under memory pressure.
pub const SYSTEM_MEMORY_ANNOTATION: &str = "sim.evac.io/memory-used-by-system";
/// When an eviction's grace period ends, in milliseconds of simulated time.
pub(crate) const KILL_AT_ANNOTATION: &str = "sim.evac.io/kill-at-ms";
/// The message of the kubelet's eviction of the pod (`evictionMessage`), written on the pod with
/// its `DisruptionTarget` condition once it has stopped.
pub(crate) const EVICTION_MESSAGE_ANNOTATION: &str = "sim.evac.io/eviction-message";
/// The node annotation `"true"` on a node that is down: its kubelet does nothing any more.
pub const DOWN_ANNOTATION: &str = "sim.evac.io/down";
/// When the node came under memory pressure, in milliseconds of simulated time.
const PRESSURE_SINCE_ANNOTATION: &str = "sim.evac.io/memory-pressure-since-ms";

/// The kubelet settings of node-pressure eviction (`evictionSoft`, `evictionSoftGracePeriod`,
/// `evictionMaxPodGracePeriod`, `evictionHard` for `memory.available`).
#[derive(Debug, Clone)]
pub struct Kubelet {
    /// `evictionSoft` `memory.available`, in bytes: under it the node has `MemoryPressure`, and the
    /// kubelet evicts once it stayed under for `soft_grace`.
    pub soft_threshold: f64,
    /// `evictionSoftGracePeriod`: how long the node stays under the soft threshold before the kubelet evicts.
    pub soft_grace: Duration,
    /// `evictionMaxPodGracePeriod`: the most grace a pod evicted at the soft threshold gets.
    pub max_pod_grace: Duration,
    /// `evictionHard` `memory.available`, in bytes: under it the kubelet kills a pod at once, without grace.
    pub hard_threshold: f64,
    /// What KubeVirt's virt-handler does with a VM whose launcher pod gets SIGTERM.
    pub virt_handler: VirtHandler,
    /// What the kubelets know of the pods.
    pub(crate) cache: std::sync::Arc<std::sync::Mutex<PodCache>>,
}

impl Default for Kubelet {
    /// The values of the node-pressure design document's functional tests.
    fn default() -> Self {
        Self {
            soft_threshold: 3500.0 * 1024.0 * 1024.0,
            soft_grace: Duration::from_secs(5),
            max_pod_grace: Duration::from_secs(300),
            hard_threshold: 10.0 * 1024.0 * 1024.0,
            virt_handler: VirtHandler::Stock,
            cache: Default::default(),
        }
    }
}

impl Kubelet {
    /// What the kubelet's `/configz` answers (`pkg/kubelet/server/server.go`, `configz`: the
    /// `KubeletConfiguration` under `kubeletconfig`), for the fields the simulation uses: the
    /// memory eviction thresholds a cluster admin copies into evac's `nodePressure` setting.
    pub fn configz(&self) -> serde_json::Value {
        let mib = |bytes: f64| format!("{}Mi", (bytes / (1024.0 * 1024.0)).round() as i64);
        json!({"kubeletconfig": {
            "kind": "KubeletConfiguration",
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "evictionHard": {"memory.available": mib(self.hard_threshold)},
            "evictionSoft": {"memory.available": mib(self.soft_threshold)},
            "evictionSoftGracePeriod": {"memory.available": format!("{}s", self.soft_grace.as_secs())},
            "evictionMaxPodGracePeriod": self.max_pod_grace.as_secs(),
        }})
    }
}

/// Whether the kubelet marked the pod evicted (its stop is over).
fn evicted(pod: Pod<'_>) -> bool {
    pod.phase() == Some("Failed") && pod.condition("DisruptionTarget").is_some()
}

/// The grace period of an eviction at the hard threshold (`immediateEvictionGracePeriodSeconds`).
const IMMEDIATE_EVICTION_GRACE: Duration = Duration::from_secs(1);

/// What the kubelet knows of a pod, kept from the pods' changes (an informer's cache): reading
/// every pod's JSON at every step would cost more than everything else the simulation does.
#[derive(Debug, Clone)]
struct PodFacts {
    node: String,
    memory: f64,
    /// `spec.priority`, 0 when unset.
    priority: i64,
    finished: bool,
    /// When an eviction the kubelet began kills the pod.
    kill_at: Option<Duration>,
    /// How far the kubelet got in stopping it.
    stopping: Option<Stopping>,
}

impl PodFacts {
    fn of(pod: Pod<'_>) -> Self {
        let millis = |key: &str| {
            pod.meta().annotation(key).map(|at| Duration::from_millis(at.parse().unwrap_or_default()))
        };
        let terminate_at = millis(TERMINATE_AT_ANNOTATION);
        let kill_at = millis(KILL_AT_ANNOTATION);
        // A deletion's grace period began `deletionGracePeriodSeconds` before its end; an
        // eviction records when it began.
        let deletion_grace = pod.meta().deletion_grace_period().map(Duration::from_secs).unwrap_or_default();
        let stopping = match (terminate_at, kill_at) {
            (Some(end), _) => Some(termination::stopping_of(pod, end.saturating_sub(deletion_grace), end)),
            // Until the kubelet has marked it evicted: a launcher pod whose VM migrated away
            // during the hook completed on its own, and its hook still runs.
            (None, Some(end))
                if pod.meta().annotation(EVICTION_MESSAGE_ANNOTATION).is_some() && !evicted(pod) =>
            {
                Some(termination::stopping_of(pod, end, end))
            }
            _ => None,
        };
        Self {
            node: pod.node_name().unwrap_or_default().to_owned(),
            memory: pod.container_memory_requests(),
            priority: pod.priority(),
            finished: pod.is_finished(),
            kill_at,
            stopping,
        }
    }

    fn stopping(&self) -> Option<Stopping> {
        self.stopping
    }
}

/// The nodes that are down: no kubelet acts on them.
fn down_nodes(all_nodes: &[std::sync::Arc<serde_json::Value>]) -> HashSet<String> {
    all_nodes
        .iter()
        .map(|n| Node(n))
        .filter(|n| n.meta().annotation(DOWN_ANNOTATION) == Some("true"))
        .map(|n| n.name().to_owned())
        .collect()
}

/// A pod: (namespace, name).
type PodKey = (String, String);

/// The kubelets' cache of the pods, and where it is in the pods' history.
#[derive(Debug, Default)]
pub(crate) struct PodCache {
    seen: Option<u64>,
    pods: HashMap<(String, String), PodFacts>,
}

impl PodCache {
    /// Brings the cache up to the store's current state: the changes since last time, or
    /// everything after a first look or a gap in the history.
    fn refresh(&mut self, store: &Store) {
        if let Some(from) = self.seen {
            if let Ok((events, revision)) = store.events_since(&pods(), from) {
                for event in events {
                    let pod = Pod(&event.object);
                    let key = (pod.meta().namespace().to_owned(), pod.meta().name().to_owned());
                    if event.type_ == crate::EventType::Deleted {
                        self.pods.remove(&key);
                    } else {
                        self.pods.insert(key, PodFacts::of(pod));
                    }
                }
                self.seen = Some(revision);
                return;
            }
        }
        let (all, revision) = store.list(&pods(), None, None, None);
        self.pods = all
            .iter()
            .map(|p| {
                let pod = Pod(p);
                ((pod.meta().namespace().to_owned(), pod.meta().name().to_owned()), PodFacts::of(pod))
            })
            .collect();
        self.seen = Some(revision);
    }
}

impl Kubelet {
    /// Advances the pods being stopped, and checks every node's memory; returns when it next
    /// has to act.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let now = store.clock().elapsed();
        let mut wake = Wake::default();
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.refresh(store);
        let (all_nodes, _) = store.list(&nodes(), None, None, None);
        let down = down_nodes(&all_nodes);
        self.advance_terminations(store, &mut cache, &down, now, &mut wake)?;

        let mut by_node: HashMap<&str, Vec<(&PodKey, &PodFacts)>> = HashMap::new();
        for (key, facts) in cache.pods.iter().filter(|(_, f)| !f.finished) {
            by_node.entry(facts.node.as_str()).or_default().push((key, facts));
        }
        for node in all_nodes.iter().map(|n| Node(n)).filter(|n| !down.contains(n.name())) {
            let on_node = by_node.get(node.name()).map(Vec::as_slice).unwrap_or_default();
            if let Some(at) = self.synchronize(store, node, on_node, now)? {
                wake.at(at);
            }
        }
        Ok(wake.next())
    }

    /// Takes each pod being stopped whose next step is due one step further (`SyncTerminatingPod`),
    /// and says when the pods being stopped next need a look.
    fn advance_terminations(
        &self,
        store: &Store,
        cache: &mut PodCache,
        down: &HashSet<String>,
        now: Duration,
        wake: &mut Wake,
    ) -> Result<(), ApiError> {
        // Pods being stopped whose next step is due; each is read again, as it is now.
        let due: Vec<(String, String)> = cache
            .pods
            .iter()
            .filter(|(_, f)| !down.contains(&f.node))
            // A pod that finished on its own (its VM migrated away) is done with at once.
            .filter(|(_, f)| {
                f.stopping().is_some_and(|s| s.sigterm.is_none() || f.finished || s.next() <= now)
            })
            .map(|(key, _)| key.clone())
            .collect();
        for (namespace, name) in &due {
            let Ok(pod) = store.get(&pods(), namespace, name) else { continue };
            let facts = PodFacts::of(Pod(&pod));
            let Some(stopping) = facts.stopping() else { continue };
            // A pod still waiting is woken below, from what it records.
            if let Step::Done = termination::advance(store, Pod(&pod), stopping, self.virt_handler, now)? {
                self.stopped(store, Pod(&pod))?;
            }
        }
        if !due.is_empty() {
            cache.refresh(store);
        }
        for stopping in cache.pods.values().filter(|f| !down.contains(&f.node)).filter_map(PodFacts::stopping)
        {
            // While its hooks run a pod is looked at every HOOK_POLL; then at its next step.
            wake.at(match stopping.sigterm {
                None => (now + HOOK_POLL).min(stopping.grace_end.max(now + Duration::from_millis(1))),
                Some(_) => stopping.next(),
            });
        }
        Ok(())
    }

    /// The eviction manager's `synchronize` on one node: its memory signal and `MemoryPressure`,
    /// then, past the soft grace period or under the hard threshold, one victim by
    /// `rankMemoryPressure`. Returns when it has to look again.
    fn synchronize(
        &self,
        store: &Store,
        node: Node<'_>,
        on_node: &[(&PodKey, &PodFacts)],
        now: Duration,
    ) -> Result<Option<Duration>, ApiError> {
        let name = node.name();
        let Some(capacity) = node.capacity_memory() else { return Ok(None) };
        let terminating = on_node.iter().any(|(_, f)| f.kill_at.is_some());
        let system =
            node.meta().annotation(SYSTEM_MEMORY_ANNOTATION).and_then(quantity::bytes).unwrap_or(0.0);
        let used: f64 = system + on_node.iter().map(|(_, f)| f.memory).sum::<f64>();
        let available = capacity - used;
        publish_metrics(store, name, used)?;

        let pressure_since = pressure_since(node);
        if available >= self.soft_threshold {
            if pressure_since.is_some() {
                set_pressure(store, name, None)?;
            }
            return Ok(None);
        }
        let since = match pressure_since {
            Some(since) => since,
            None => {
                set_pressure(store, name, Some(now))?;
                now
            }
        };
        let hard = available < self.hard_threshold;
        // The eviction manager waits for its victim to stop (`killPodNow`), whatever the threshold.
        if terminating {
            return Ok(None);
        }
        if !hard && now < since + self.soft_grace {
            return Ok(Some(since + self.soft_grace));
        }
        // `rankMemoryPressure`: no pod uses more than it requests, so the lowest priority
        // first (ties: by name).
        let victim = on_node
            .iter()
            .filter(|(_, f)| f.kill_at.is_none())
            .min_by(|(a_key, a), (b_key, b)| a.priority.cmp(&b.priority).then(a_key.cmp(b_key)));
        let Some(((namespace, victim), _)) = victim else { return Ok(None) };
        let pod = store.get(&pods(), namespace, victim)?;
        let grace = if hard { IMMEDIATE_EVICTION_GRACE } else { self.grace_of(Pod(&pod)) };
        self.begin_eviction(store, Pod(&pod), grace, available)?;
        Ok(Some(now))
    }

    /// A soft eviction's grace period: `min(evictionMaxPodGracePeriod, the pod's)`, and never
    /// under a second (`pod_workers.go`, `calculateEffectiveGracePeriod`: "no matter what, we always
    /// supply a grace period of 1"), so the kubelet's default of 0 is 1 s.
    fn grace_of(&self, pod: Pod<'_>) -> Duration {
        let own = pod.termination_grace_period().unwrap_or(30);
        Duration::from_secs(own).min(self.max_pod_grace).max(Duration::from_secs(1))
    }

    /// Begins an eviction: the pod is stopped within `grace` (its hooks, then SIGTERM), and
    /// marked evicted once its containers have exited.
    fn begin_eviction(
        &self,
        store: &Store,
        pod: Pod<'_>,
        grace: Duration,
        available: f64,
    ) -> Result<(), ApiError> {
        let now = store.clock().elapsed();
        let message = format!(
            "The node was low on resource: memory. Threshold quantity: {}Mi, available: {}Mi.",
            (self.soft_threshold / 1048576.0).round(),
            (available / 1048576.0).round()
        );
        let patch = Patch::Merge(json!({"metadata": {"annotations": {
            KILL_AT_ANNOTATION: (now + grace).as_millis().to_string(),
            termination::STOPPING_SINCE_ANNOTATION: now.as_millis().to_string(),
            EVICTION_MESSAGE_ANNOTATION: message,
        }}}));
        store.patch(&pods(), pod.meta().namespace(), pod.meta().name(), &patch, false)?;
        Ok(())
    }

    /// A pod's containers have all exited: an evicted pod stays `Failed` as `Evicted`; a deleted
    /// one is removed.
    fn stopped(&self, store: &Store, pod: Pod<'_>) -> Result<(), ApiError> {
        if pod.meta().annotation(TERMINATE_AT_ANNOTATION).is_some() {
            return match store.delete(&pods(), pod.meta().namespace(), pod.meta().name(), false) {
                Err(e) if e.code == 404 => Ok(()),
                other => other.map(|_| ()),
            };
        }
        let message = pod.meta().annotation(EVICTION_MESSAGE_ANNOTATION).unwrap_or_default();
        termination::evicted(store, pod, message)
    }
}

/// How often the kubelet looks at a pod whose `preStop` hook runs: its hold endpoint answers as
/// soon as it knows (the simulator asks it again at this pace, and on every change of pods).
const HOOK_POLL: Duration = Duration::from_secs(1);

/// Publishes the node's memory working set as metrics-server does: its NodeMetrics
/// (`metrics.k8s.io/v1beta1`, `usage.memory` from the kubelet's `node_memory_working_set_bytes`,
/// metrics-server `pkg/scraper/client/resource/decode.go`), when it changed by a MiB or more.
/// metrics-server scrapes every 15 s (`--metric-resolution`); the simulator publishes at once, so
/// evac reads the figure the kubelet acts on.
fn publish_metrics(store: &Store, node: &str, working_set: f64) -> Result<(), ApiError> {
    let kind = crate::kinds::node_metrics();
    let value = format!("{}Ki", (working_set / 1024.0).ceil().max(0.0) as i64);
    let metrics = json!({
        "apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
        "metadata": {"name": node},
        "timestamp": store.clock().timestamp(), "window": "10s",
        "usage": {"cpu": "0", "memory": value},
    });
    match store.get(&kind, "", node) {
        Ok(published) => {
            let before = published
                .pointer("/usage/memory")
                .and_then(serde_json::Value::as_str)
                .and_then(quantity::bytes);
            if before.is_some_and(|b| (b - working_set).abs() < 1024.0 * 1024.0) {
                return Ok(());
            }
            let patch = Patch::Merge(json!({"timestamp": metrics["timestamp"], "usage": metrics["usage"]}));
            store.patch(&kind, "", node, &patch, false)?;
        }
        Err(e) if e.code == 404 => {
            store.create(&kind, "", metrics, false)?;
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// When the node came under memory pressure, in simulated time.
fn pressure_since(node: Node<'_>) -> Option<Duration> {
    node.meta().annotation(PRESSURE_SINCE_ANNOTATION)?.parse().ok().map(Duration::from_millis)
}

fn set_pressure(store: &Store, node_name: &str, since: Option<Duration>) -> Result<(), ApiError> {
    let nodes = nodes();
    let node = store.get(&nodes, "", node_name)?;
    let mut conditions = conditions_without(&node, "MemoryPressure");
    let (status, reason, message) = match since {
        Some(_) => ("True", "KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        None => ("False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    };
    conditions.push(json!({"type": "MemoryPressure", "status": status, "reason": reason, "message": message,
                           "lastTransitionTime": store.clock().timestamp()}));
    let since = since.map(|since| since.as_millis().to_string());
    let patch = json!({"metadata": {"annotations": {PRESSURE_SINCE_ANNOTATION: since}},
                       "status": {"conditions": conditions}});
    store.patch(&nodes, "", node_name, &Patch::Merge(patch), false)?;
    Ok(())
}

#[cfg(test)]
mod tests;
