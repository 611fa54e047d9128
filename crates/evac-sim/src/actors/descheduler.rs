//! The descheduler (sigs.k8s.io/descheduler): every `deschedulingInterval` it runs a cycle that
//! nominates pods to move and asks for their eviction through the eviction API, within
//! `maxNoOfPodsToEvictPerNode` / `PerNamespace` / `Total`. Its one strategy here is a
//! LowNodeUtilization-like balancing on memory: a node's utilisation is the memory of its live
//! pods over its allocatable memory; when some node is at or under `threshold` and others over
//! `target_threshold`, pods leave the over-utilised nodes (largest first) until each would come
//! down to the target, or until the under-utilised nodes would be full up to it.
//!
//! It runs in two modes, to compare how each treats KubeVirt's launcher pods, whose eviction
//! webhook answers an eviction with 429 "Eviction triggered evacuation of VMI ..." and
//! live-migrates the VM in the background (KubeVirt's descheduler-support design):
//!
//! - **Naive** (today's descheduler): every refusal is a failed eviction, so it tries the next
//!   pod, and the limits count only accepted evictions. Each launcher pod it asks for starts a
//!   migration that the descheduler does not see: a node's pods are asked for one after another
//!   until the node looks balanced or a limit is hit, far beyond the limits meant for real moves,
//!   and the same pods are asked for again in the next cycles while they migrate.
//! - **Evictions in background** (descheduler KEP-1397, annotation-based v1alpha1): a 429 whose
//!   message carries one of `message_prefixes` ("evictionMessagePrefixes", "Eviction triggered"
//!   by default) for a pod annotated `descheduler.alpha.kubernetes.io/request-evict-only` is an
//!   eviction in background, counted like an eviction (`pod_evacuations`), and the limits become
//!   limits on evacuation requests. The descheduler keeps a cache of the pods it so asked for,
//!   each entry abandoned after `in_progress_ttl` (the KEP's TTL, for a component that accepted
//!   the request but never annotated the pod); at the start of each cycle it adds any pod
//!   annotated `descheduler.alpha.kubernetes.io/eviction-in-progress` (and request-evict-only),
//!   which is how a restarted descheduler rebuilds the cache. An entry whose pod is gone, or lost
//!   the annotation it had (KubeVirt removes it when the migration failed, so that the pod may be
//!   asked for again), is dropped. Pods in progress (cache or annotation) count toward the limits
//!   from the start of the cycle, are sorted first among the nominated pods and count toward
//!   their node's reduction, but are never asked for again.
//!
//! The descheduler only reads the cluster and asks for evictions (through an [`Evictor`]); it
//! writes nothing itself. Between cycles it does nothing, and a cycle reads the pods once.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::Evictor;
use crate::kinds::{nodes, pods};
use crate::objects::{Node, Pod};
use crate::store::Store;
use crate::ApiError;

/// Marks a pod whose eviction is expected to be taken over by another component (KubeVirt sets it
/// on launcher pods) and only started by the eviction request.
pub const REQUEST_EVICT_ONLY: &str = "descheduler.alpha.kubernetes.io/request-evict-only";
/// Set by that component while the pod's eviction is under way (KubeVirt: while the VM migrates).
pub const EVICTION_IN_PROGRESS: &str = "descheduler.alpha.kubernetes.io/eviction-in-progress";
/// Who the evictions are asked for on behalf of.
pub const REQUESTER: &str = "descheduler";

/// The descheduler's policy, as far as the simulation goes.
#[derive(Debug, Clone)]
pub struct DeschedulerSettings {
    /// `deschedulingInterval`: time between cycles; zero runs a single cycle, as in the descheduler.
    pub interval: Duration,
    /// KEP-1397 on (the `EvictionsInBackground` feature); false is today's descheduler.
    pub evictions_in_background: bool,
    /// `maxNoOfPodsToEvictPerNode`, per cycle (with KEP-1397: evacuation requests, in-progress included).
    pub max_per_node: Option<usize>,
    /// `maxNoOfPodsToEvictPerNamespace`, likewise.
    pub max_per_namespace: Option<usize>,
    /// `maxNoOfPodsToEvictTotal`, likewise.
    pub max_total: Option<usize>,
    /// How long a cached eviction in background counts as in progress without the pod going.
    pub in_progress_ttl: Duration,
    /// LowNodeUtilization `thresholds` (memory, percent): at or below it a node is under-utilised
    /// (`isNodeBelowThreshold`).
    pub threshold: f64,
    /// LowNodeUtilization `targetThresholds` (memory, percent): above it a node is over-utilised.
    pub target_threshold: f64,
    /// `evictionMessagePrefixes`: what a 429's message carries when it started an eviction in background.
    pub message_prefixes: Vec<String>,
}

impl Default for DeschedulerSettings {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            evictions_in_background: true,
            max_per_node: None,
            max_per_namespace: None,
            max_total: None,
            in_progress_ttl: Duration::from_secs(600),
            threshold: 20.0,
            target_threshold: 50.0,
            message_prefixes: vec!["Eviction triggered".to_owned()],
        }
    }
}

/// What the descheduler did, overall and per cycle.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeschedulerStats {
    /// Cycles run.
    pub cycles: usize,
    /// Eviction requests made (calls of the eviction API).
    pub requests: usize,
    /// Requests answered 201: the pod terminates.
    pub pods_evicted: usize,
    /// Requests answered as evictions in background (KEP-1397's `pod_evacuations` metric).
    pub pod_evacuations: usize,
    /// Other refusals (in naive mode: every refusal).
    pub failures: usize,
    /// Each cycle's figures, in the order they ran.
    pub per_cycle: Vec<CycleStats>,
}

/// One cycle. The `counted_*` figures are the limit counters at the end of the cycle (in-progress
/// pods included with KEP-1397), to check against the limits.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleStats {
    /// When it ran, in milliseconds of simulated time.
    pub at_ms: u64,
    /// Evictions in progress counted at its start (always 0 in naive mode).
    pub in_progress: usize,
    /// Eviction requests made.
    pub requests: usize,
    /// Requests answered 201.
    pub evicted: usize,
    /// Requests answered as evictions in background.
    pub evacuations: usize,
    /// Other refusals.
    pub failures: usize,
    /// The highest per-node counter.
    pub counted_most_on_a_node: usize,
    /// The highest per-namespace counter.
    pub counted_most_in_a_namespace: usize,
    /// The total counter, against `maxNoOfPodsToEvictTotal`.
    pub counted_total: usize,
}

/// A pod asked for with an eviction in background as answer (or found annotated in progress).
struct InProgress {
    since: Duration,
    /// The cycle that last saw the pod: an entry not seen in a cycle's pass is of a pod gone.
    seen: usize,
    /// Whether the pod has been seen annotated `eviction-in-progress`.
    annotated: bool,
}

#[derive(Default)]
struct State {
    /// When the next cycle runs; `None`: at the next reconcile (start, or after a restart).
    next_cycle: Option<Duration>,
    /// A zero interval ran its one cycle.
    finished: bool,
    /// Evictions in background by pod uid (a pod recreated under the same name is a new pod).
    cache: HashMap<String, InProgress>,
    stats: DeschedulerStats,
}

/// The descheduler as an actor: a balancing cycle every `deschedulingInterval`.
pub struct Descheduler {
    /// Its policy, fixed for the run.
    pub settings: DeschedulerSettings,
    evictor: Arc<dyn Evictor>,
    state: Mutex<State>,
}

/// A pod as a cycle sees it.
struct PodView<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
    node: &'a str,
    memory: f64,
    request_evict_only: bool,
    in_progress: bool,
    /// A candidate; the others only weigh on their node.
    evictable: bool,
}

/// The limit counters of a cycle.
#[derive(Default)]
struct Counters<'a> {
    by_node: HashMap<&'a str, usize>,
    by_namespace: HashMap<&'a str, usize>,
    total: usize,
}

impl<'a> Counters<'a> {
    fn add(&mut self, node: &'a str, namespace: &'a str) {
        if !node.is_empty() {
            *self.by_node.entry(node).or_default() += 1;
        }
        *self.by_namespace.entry(namespace).or_default() += 1;
        self.total += 1;
    }
}

/// A node being balanced: its usage and where it should come down to, in bytes.
struct Source<'a> {
    name: &'a str,
    used: f64,
    target: f64,
}

/// What a cycle's pass over the pods found.
#[derive(Default)]
struct Seen<'a> {
    /// The pods that weigh on each node.
    by_node: HashMap<&'a str, Vec<PodView<'a>>>,
    /// The evictions in progress: (node, namespace) of each pod.
    in_progress: Vec<(&'a str, &'a str)>,
}

/// A limit on the evictions of a cycle.
enum Limit {
    /// `maxNoOfPodsToEvictTotal`: the cycle stops.
    Total,
    /// `maxNoOfPodsToEvictPerNode`: the node's turn ends.
    Node,
    /// `maxNoOfPodsToEvictPerNamespace`: the pod is passed over.
    Namespace,
}

/// A cycle's eviction pass under way.
struct Pass<'s, 'a> {
    store: &'s Store,
    now: Duration,
    cycle: usize,
    state: &'s mut State,
    record: CycleStats,
    counters: Counters<'a>,
    /// Memory the under-utilised nodes can still take, up to the target.
    room: f64,
}

impl Pass<'_, '_> {
    /// A pod of `source` leaves (or is leaving already).
    fn moved(&mut self, source: &mut Source<'_>, memory: f64) {
        source.used -= memory;
        self.room -= memory;
    }

    /// Records the cycle with its limit counters.
    fn finish(mut self) {
        self.record.counted_most_on_a_node = self.counters.by_node.values().copied().max().unwrap_or(0);
        self.record.counted_most_in_a_namespace =
            self.counters.by_namespace.values().copied().max().unwrap_or(0);
        self.record.counted_total = self.counters.total;
        self.state.stats.per_cycle.push(self.record);
    }
}

/// A node's candidates, in KEP-1397's order: evictions in progress first, so they count before
/// any new one; then the largest.
fn candidates<'p, 'a>(by_node: &'p HashMap<&str, Vec<PodView<'a>>>, node: &str) -> Vec<&'p PodView<'a>> {
    let mut candidates: Vec<&PodView> =
        by_node.get(node).into_iter().flatten().filter(|p| p.evictable).collect();
    candidates.sort_by(|a, b| {
        b.in_progress
            .cmp(&a.in_progress)
            .then(b.memory.total_cmp(&a.memory))
            .then((a.namespace, a.name).cmp(&(b.namespace, b.name)))
    });
    candidates
}

impl Descheduler {
    /// A descheduler that asks for evictions through `evictor`; its first cycle runs at its first reconcile.
    pub fn new(settings: DeschedulerSettings, evictor: Arc<dyn Evictor>) -> Self {
        Self { settings, evictor, state: Mutex::default() }
    }

    /// Forgets what a restarted descheduler process forgets: the cache of evictions in background
    /// (a KEP-1397 descheduler then rebuilds it from the `eviction-in-progress` annotations). A new
    /// process runs its first cycle at once. The stats are the simulation's and are kept.
    pub fn restart(&self) {
        let mut state = self.lock();
        state.cache.clear();
        state.next_cycle = None;
        state.finished = false;
    }

    /// What it did so far.
    pub fn stats(&self) -> DeschedulerStats {
        self.lock().stats.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs a cycle if one is due; returns when the next one is.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let now = store.clock().elapsed();
        let mut state = self.lock();
        if state.finished {
            return Ok(None);
        }
        // Between cycles: nothing to read, the driver is only told when to come back.
        if let Some(next) = state.next_cycle.filter(|&next| now < next) {
            return Ok(Some(next));
        }
        self.cycle(store, now, &mut state);
        if self.settings.interval.is_zero() {
            state.finished = true;
            return Ok(None);
        }
        let next = now + self.settings.interval;
        state.next_cycle = Some(next);
        Ok(Some(next))
    }

    /// One cycle: reads the pods and the nodes, then asks for evictions from the over-utilised
    /// nodes, most loaded first, within the limits.
    fn cycle(&self, store: &Store, now: Duration, state: &mut State) {
        state.stats.cycles += 1;
        let cycle = state.stats.cycles;
        // One pass over the pods: who runs where, and what is in progress.
        let (all_pods, _) = store.list(&pods(), None, None, None);
        let seen = self.read_pods(&all_pods, now, cycle, &mut state.cache);
        // Entries of pods gone, or past the TTL, are dropped.
        state.cache.retain(|_, entry| entry.seen == cycle);
        let (all_nodes, _) = store.list(&nodes(), None, None, None);
        let (mut sources, room) = self.classify_nodes(&all_nodes, &seen.by_node);

        let record = CycleStats {
            at_ms: u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
            in_progress: seen.in_progress.len(),
            ..Default::default()
        };
        let mut pass = Pass { store, now, cycle, state, record, counters: Counters::default(), room };
        // KEP-1397: the counters start with the evictions in progress.
        for &(node, namespace) in &seen.in_progress {
            pass.counters.add(node, namespace);
        }
        for source in &mut sources {
            if self
                .evict_from_source_node(&mut pass, source, candidates(&seen.by_node, source.name))
                .is_break()
            {
                break;
            }
        }
        pass.finish();
    }

    /// The pods a cycle weighs, by node, and the evictions in progress; keeps the cache of
    /// evictions in background up to date.
    fn read_pods<'a>(
        &self,
        all_pods: &'a [Arc<Value>],
        now: Duration,
        cycle: usize,
        cache: &mut HashMap<String, InProgress>,
    ) -> Seen<'a> {
        let mut seen = Seen::default();
        for pod in all_pods.iter().map(|p| Pod(p)) {
            if pod.is_finished() {
                continue;
            }
            let uid = pod.meta().uid();
            let node = pod.node_name().unwrap_or_default();
            let namespace = pod.meta().namespace();
            // KEP-1397's annotations count by their presence (KubeVirt sets `request-evict-only` to "").
            let request_evict_only = pod.meta().annotation(REQUEST_EVICT_ONLY).is_some();
            let annotated = request_evict_only && pod.meta().annotation(EVICTION_IN_PROGRESS).is_some();
            let in_progress =
                self.settings.evictions_in_background && self.in_progress(cache, uid, annotated, now, cycle);
            if in_progress {
                seen.in_progress.push((node, namespace));
            }
            // A terminating pod is leaving already: neither counted in its node's usage nor movable.
            if node.is_empty() || pod.is_terminating() {
                continue;
            }
            let evictable = pod.phase() == Some("Running") && owned_but_not_by_a_daemon_set(pod);
            seen.by_node.entry(node).or_default().push(PodView {
                namespace,
                name: pod.meta().name(),
                uid,
                node,
                // LowNodeUtilization counts requests.
                memory: pod.container_memory_requests(),
                request_evict_only,
                in_progress,
                evictable,
            });
        }
        seen
    }

    /// KEP-1397: whether a pod's eviction is in progress, by the cache and the pod's annotations
    /// (`annotated`: both of them); the cache entry is refreshed, or made for an annotated pod.
    fn in_progress(
        &self,
        cache: &mut HashMap<String, InProgress>,
        uid: &str,
        annotated: bool,
        now: Duration,
        cycle: usize,
    ) -> bool {
        if let Some(entry) = cache.get_mut(uid) {
            // Kept while fresh, unless the annotation it had is gone: KubeVirt removes it
            // when the migration failed, so that the pod may be asked for again. Past the
            // TTL it is abandoned: whoever took the request never annotated the pod.
            let ended = entry.annotated && !annotated;
            if !ended && now.saturating_sub(entry.since) < self.settings.in_progress_ttl {
                entry.seen = cycle;
                entry.annotated |= annotated;
                return true;
            }
        }
        // KEP-1397: a pod with both annotations is being evicted, whoever asked for it; this
        // also rebuilds the cache after a restart, so the pod is not asked for twice.
        if annotated {
            cache.insert(uid.to_owned(), InProgress { since: now, seen: cycle, annotated });
            return true;
        }
        false
    }

    /// LowNodeUtilization's `classifyNodes`: the over-utilised nodes, the most loaded first, and
    /// the room the under-utilised ones have up to the target (no sources when no node is under).
    fn classify_nodes<'a>(
        &self,
        all_nodes: &'a [Arc<Value>],
        by_node: &HashMap<&str, Vec<PodView<'_>>>,
    ) -> (Vec<Source<'a>>, f64) {
        let mut sources: Vec<Source> = Vec::new();
        let mut room = 0.0;
        let mut any_under = false;
        for node in all_nodes.iter().map(|n| Node(n)) {
            let allocatable =
                node.allocatable_memory().or_else(|| node.capacity_memory()).filter(|&bytes| bytes > 0.0);
            let Some(allocatable) = allocatable else { continue };
            let name = node.name();
            let used: f64 = by_node.get(name).into_iter().flatten().map(|p| p.memory).sum();
            let percent = used / allocatable * 100.0;
            let target = allocatable * self.settings.target_threshold / 100.0;
            // An unschedulable node takes no pods: it is no destination.
            let schedulable = !node.unschedulable();
            // `isNodeBelowThreshold` (`nodeutilization.go`): at the threshold is under it; above
            // the target threshold (`isNodeAboveThreshold`) strictly.
            if percent <= self.settings.threshold && schedulable {
                any_under = true;
                room += target - used;
            } else if percent > self.settings.target_threshold {
                sources.push(Source { name, used, target });
            }
        }
        if !any_under {
            sources.clear();
        }
        // The most loaded nodes first, as LowNodeUtilization does.
        sources.sort_by(|a, b| (b.used / b.target).total_cmp(&(a.used / a.target)).then(a.name.cmp(b.name)));
        (sources, room)
    }

    /// `evictPodsFromSourceNodes`, for one node: asks for the eviction of its candidates, in
    /// order, until the node would come down to its target or the under-utilised nodes would be
    /// full; breaks when the total limit is met.
    fn evict_from_source_node<'a>(
        &self,
        pass: &mut Pass<'_, 'a>,
        source: &mut Source<'_>,
        candidates: Vec<&PodView<'a>>,
    ) -> ControlFlow<()> {
        for pod in candidates {
            if source.used <= source.target || pass.room <= 0.0 {
                break;
            }
            if pod.in_progress {
                // Already leaving (and counted): it relieves the node without a second request.
                pass.moved(source, pod.memory);
                continue;
            }
            match self.limit_met(&pass.counters, pod) {
                Some(Limit::Total) => return ControlFlow::Break(()),
                Some(Limit::Node) => break,
                Some(Limit::Namespace) => continue,
                None => {}
            }
            if self.request(pass, pod) {
                pass.counters.add(pod.node, pod.namespace);
                pass.moved(source, pod.memory);
            }
        }
        ControlFlow::Continue(())
    }

    /// The first of `maxNoOfPodsToEvictTotal`, `PerNode` and `PerNamespace` that asking for `pod`
    /// would exceed.
    fn limit_met(&self, counters: &Counters<'_>, pod: &PodView<'_>) -> Option<Limit> {
        let settings = &self.settings;
        if settings.max_total.is_some_and(|max| counters.total >= max) {
            Some(Limit::Total)
        } else if settings
            .max_per_node
            .is_some_and(|max| counters.by_node.get(pod.node).copied().unwrap_or(0) >= max)
        {
            Some(Limit::Node)
        } else if settings
            .max_per_namespace
            .is_some_and(|max| counters.by_namespace.get(pod.namespace).copied().unwrap_or(0) >= max)
        {
            Some(Limit::Namespace)
        } else {
            None
        }
    }

    /// Asks for a pod's eviction; whether it leaves (evicted, or evicted in background).
    fn request(&self, pass: &mut Pass<'_, '_>, pod: &PodView<'_>) -> bool {
        pass.record.requests += 1;
        pass.state.stats.requests += 1;
        match self.evictor.evict(pass.store, pod.namespace, pod.name, REQUESTER) {
            Ok(()) => {
                pass.record.evicted += 1;
                pass.state.stats.pods_evicted += 1;
                true
            }
            Err(e)
                if self.settings.evictions_in_background
                    && pod.request_evict_only
                    && self.in_background(&e) =>
            {
                let entry = InProgress { since: pass.now, seen: pass.cycle, annotated: false };
                pass.state.cache.insert(pod.uid.to_owned(), entry);
                pass.record.evacuations += 1;
                pass.state.stats.pod_evacuations += 1;
                true
            }
            // A refusal (a budget, a webhook): the pod stays; the next one is tried.
            Err(_) => {
                pass.record.failures += 1;
                pass.state.stats.failures += 1;
                false
            }
        }
    }

    /// Whether a refusal is KEP-1397's answer for an eviction started in background: 429 with a
    /// known message prefix (the webhook's message comes after "admission webhook ... denied the
    /// request: ", hence a search rather than a prefix match).
    fn in_background(&self, error: &ApiError) -> bool {
        error.code == 429 && self.settings.message_prefixes.iter().any(|p| error.message.contains(p.as_str()))
    }
}

/// Whether a controller would recreate the pod elsewhere: it has a controller, and that is not a
/// DaemonSet (whose pods belong on their node).
fn owned_but_not_by_a_daemon_set(pod: Pod<'_>) -> bool {
    pod.meta().controller().is_some_and(|(kind, _, _)| kind != "DaemonSet")
}

impl crate::Actor for Descheduler {
    fn name(&self) -> &'static str {
        "descheduler"
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        Descheduler::reconcile(self, store)
    }
}

#[cfg(test)]
mod tests;
