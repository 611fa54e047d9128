use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::store::Patch;
use crate::{SimClock, Simulation};

/// Marks a pod as a virt-launcher pod in these tests: KubeVirt's webhook answers for it.
const LAUNCHER: &str = "test.evac.io/launcher";
/// Marks a pod whose disruption budget refuses its eviction.
const PDB: &str = "test.evac.io/pdb";

/// An eviction API with KubeVirt's eviction webhook (DeschedulerSupport on): a launcher pod's
/// eviction is refused with 429 "Eviction triggered evacuation" while its VM would migrate in the
/// background (it never does here: the pod stays); a pod under a budget gets a plain 429; any
/// other pod is evicted (and removed at once). Records every call.
#[derive(Default)]
struct FakeEvictor {
    calls: Mutex<Vec<String>>,
    /// Whether the 429 also annotates the pod `eviction-in-progress`, as virt-controller does.
    annotate: bool,
}

impl FakeEvictor {
    fn annotating() -> Self {
        Self { annotate: true, ..Self::default() }
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Evictor for FakeEvictor {
    fn evict(&self, store: &Store, namespace: &str, pod: &str, requester: &str) -> Result<(), ApiError> {
        assert_eq!(requester, "descheduler");
        self.calls.lock().unwrap().push(format!("{namespace}/{pod}"));
        let object = store.get(&pods(), namespace, pod)?;
        if Pod(&object).meta().annotation(PDB).is_some() {
            return Err(ApiError {
                code: 429,
                reason: "TooManyRequests",
                message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
            });
        }
        if Pod(&object).meta().annotation(REQUEST_EVICT_ONLY).is_some()
            || Pod(&object).meta().annotation(LAUNCHER).is_some()
        {
            if self.annotate {
                let patch = json!({"metadata": {"annotations": {EVICTION_IN_PROGRESS: "kubevirt"}}});
                store.patch(&pods(), namespace, pod, &Patch::Merge(patch), false)?;
            }
            return Err(ApiError {
                code: 429,
                reason: "TooManyRequests",
                message: format!(
                    "admission webhook \"virt-launcher-eviction-interceptor.kubevirt.io\" denied the \
                     request: Eviction triggered evacuation of VMI \"{namespace}/{}\"",
                    pod.trim_start_matches("virt-launcher-")
                ),
            });
        }
        store.delete(&pods(), namespace, pod, false)?;
        Ok(())
    }
}

fn cluster() -> Store {
    Store::new(Arc::new(SimClock::default()), 100_000)
}

/// A node with 10 GiB allocatable.
fn node(store: &Store, name: &str) {
    let node = json!({"metadata": {"name": name},
                      "status": {"capacity": {"memory": "12Gi"}, "allocatable": {"memory": "10Gi"}}});
    store.create(&nodes(), "", node, false).unwrap();
}

#[derive(Clone, Copy, PartialEq)]
enum Pod {
    /// A virt-launcher pod as KubeVirt with DeschedulerSupport makes it: request-evict-only.
    Launcher,
    /// A launcher pod already being evicted: both annotations.
    InProgress,
    /// A launcher pod without the request-evict-only annotation.
    UnannotatedLauncher,
    /// A pod whose budget refuses its eviction.
    Budgeted,
    /// A plain ReplicaSet pod.
    Plain,
}

fn pod(store: &Store, namespace: &str, name: &str, node: &str, gib: u64, kind: Pod) {
    let mut annotations = serde_json::Map::new();
    // KubeVirt sets request-evict-only to "": the annotation counts by its presence.
    if matches!(kind, Pod::Launcher | Pod::InProgress) {
        annotations.insert(REQUEST_EVICT_ONLY.into(), json!(""));
    }
    if matches!(kind, Pod::Launcher | Pod::InProgress | Pod::UnannotatedLauncher) {
        annotations.insert(LAUNCHER.into(), json!("true"));
    }
    if kind == Pod::InProgress {
        annotations.insert(EVICTION_IN_PROGRESS.into(), json!("kubevirt"));
    }
    if kind == Pod::Budgeted {
        annotations.insert(PDB.into(), json!("true"));
    }
    let owner = match kind {
        Pod::Plain | Pod::Budgeted => "ReplicaSet",
        _ => "VirtualMachineInstance",
    };
    let pod = json!({"metadata": {"name": name, "annotations": annotations,
                                  "ownerReferences": [{"kind": owner, "name": "owner", "controller": true}]},
                     "spec": {"nodeName": node, "containers": [container(&format!("{gib}Gi"))]},
                     "status": {"phase": "Running"}});
    store.create(&pods(), namespace, pod, false).unwrap();
}

fn container(memory: &str) -> serde_json::Value {
    json!({"name": "c", "resources": {"requests": {"memory": memory}}})
}

/// `count` launcher pods of 1 GiB on `node`, named `<prefix>-<i>`.
fn launchers(store: &Store, namespace: &str, prefix: &str, node: &str, count: usize) {
    for i in 0..count {
        pod(store, namespace, &format!("{prefix}-{i}"), node, 1, Pod::Launcher);
    }
}

fn new_descheduler(settings: DeschedulerSettings, evictor: &Arc<FakeEvictor>) -> Descheduler {
    Descheduler::new(settings, Arc::clone(evictor) as Arc<dyn Evictor>)
}

fn kep() -> DeschedulerSettings {
    DeschedulerSettings::default()
}

fn naive() -> DeschedulerSettings {
    DeschedulerSettings { evictions_in_background: false, ..DeschedulerSettings::default() }
}

/// Runs the cycle due now; returns the eviction requests it made.
fn cycle(descheduler: &Descheduler, store: &Store, evictor: &FakeEvictor) -> Vec<String> {
    let before = evictor.calls().len();
    descheduler.reconcile(store).unwrap();
    evictor.calls()[before..].to_vec()
}

fn next_cycle(descheduler: &Descheduler, store: &Store, evictor: &FakeEvictor) -> Vec<String> {
    store.clock().advance(descheduler.settings.interval);
    cycle(descheduler, store, evictor)
}

#[test]
fn the_per_node_limit_counts_evictions_in_progress() {
    // 8 GiB used of 10 on "busy" (80 % > 50 %), "idle" empty (0 % < 20 %): 3 GiB must leave busy.
    let store = cluster();
    node(&store, "busy");
    node(&store, "idle");
    pod(&store, "default", "vm-0", "busy", 1, Pod::InProgress);
    for i in 1..8 {
        pod(&store, "default", &format!("vm-{i}"), "busy", 1, Pod::Launcher);
    }
    let evictor = Arc::new(FakeEvictor::default());
    let descheduler = new_descheduler(DeschedulerSettings { max_per_node: Some(2), ..kep() }, &evictor);

    // vm-0 counts as 1 of the 2, and relieves the node by 1 GiB without a request: 1 new request.
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/vm-1"]);
    let stats = descheduler.stats();
    assert_eq!(stats.per_cycle[0].in_progress, 1);
    assert_eq!(stats.per_cycle[0].counted_most_on_a_node, 2);
    assert_eq!((stats.requests, stats.pod_evacuations), (1, 1));

    // Next cycle: vm-0 and vm-1 are in progress, the limit is reached: no request at all.
    assert!(next_cycle(&descheduler, &store, &evictor).is_empty());
    assert_eq!(descheduler.stats().per_cycle[1].in_progress, 2);

    // Without the in-progress pod, the limit would allow 2 requests.
    let store = cluster();
    node(&store, "busy");
    node(&store, "idle");
    launchers(&store, "default", "vm", "busy", 8);
    let evictor = Arc::new(FakeEvictor::default());
    let descheduler = new_descheduler(DeschedulerSettings { max_per_node: Some(2), ..kep() }, &evictor);
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/vm-0", "default/vm-1"]);
}

#[test]
fn the_per_namespace_and_total_limits_count_evictions_in_progress() {
    // Per namespace: a-0 in progress in "a" (limit 2): one more from "a", then "b"'s pods.
    let store = cluster();
    node(&store, "busy");
    node(&store, "idle");
    pod(&store, "a", "vm-0", "busy", 1, Pod::InProgress);
    for i in 1..4 {
        pod(&store, "a", &format!("vm-{i}"), "busy", 1, Pod::Launcher);
    }
    launchers(&store, "b", "vm", "busy", 4);
    let evictor = Arc::new(FakeEvictor::default());
    let descheduler = new_descheduler(DeschedulerSettings { max_per_namespace: Some(2), ..kep() }, &evictor);
    assert_eq!(cycle(&descheduler, &store, &evictor), ["a/vm-1", "b/vm-0"]);
    assert_eq!(descheduler.stats().per_cycle[0].counted_most_in_a_namespace, 2);

    // In total: one in progress on busy-1 (limit 3), two over-utilised nodes of 3 GiB to move each.
    let store = cluster();
    for name in ["busy-1", "busy-2", "idle-1", "idle-2"] {
        node(&store, name);
    }
    pod(&store, "default", "in-progress", "busy-1", 1, Pod::InProgress);
    launchers(&store, "default", "one", "busy-1", 7);
    launchers(&store, "default", "two", "busy-2", 8);
    let evictor = Arc::new(FakeEvictor::default());
    let descheduler = new_descheduler(DeschedulerSettings { max_total: Some(3), ..kep() }, &evictor);
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/one-0", "default/one-1"]);
    let record = &descheduler.stats().per_cycle[0];
    assert_eq!((record.in_progress, record.requests, record.counted_total), (1, 2, 3));
    // The limit holds in the next cycles, with all three in progress.
    assert!(next_cycle(&descheduler, &store, &evictor).is_empty());
    assert_eq!(descheduler.stats().per_cycle[1].counted_total, 3);
}

#[test]
fn evictions_in_progress_are_sorted_first_and_relieve_their_node() {
    // 7 GiB on busy, 2 to move. Largest first would ask for a (2 GiB, first by name); with
    // KEP-1397's sorting, the in-progress c (2 GiB) comes first and is enough: no request.
    let store = cluster();
    node(&store, "busy");
    node(&store, "idle");
    pod(&store, "default", "a", "busy", 2, Pod::Launcher);
    pod(&store, "default", "b", "busy", 2, Pod::Launcher);
    pod(&store, "default", "c", "busy", 2, Pod::InProgress);
    pod(&store, "default", "d", "busy", 1, Pod::Launcher);
    let evictor = Arc::new(FakeEvictor::default());
    let descheduler = new_descheduler(kep(), &evictor);
    assert!(cycle(&descheduler, &store, &evictor).is_empty());
    assert_eq!(descheduler.stats().per_cycle[0].in_progress, 1);

    // The naive descheduler does not know c is leaving, and asks for a, and then for every pod,
    // as each refusal is a failure.
    let evictor = Arc::new(FakeEvictor::default());
    let today = new_descheduler(naive(), &evictor);
    assert_eq!(cycle(&today, &store, &evictor), ["default/a", "default/b", "default/c", "default/d"]);
    assert_eq!(today.stats().per_cycle[0].in_progress, 0);
}

#[test]
fn a_request_is_not_repeated_within_the_ttl_and_is_abandoned_after_it() {
    // KubeVirt answers 429 but never annotates the pod: only the cache knows.
    let store = cluster();
    node(&store, "busy");
    node(&store, "idle");
    pod(&store, "default", "a", "busy", 3, Pod::Launcher);
    pod(&store, "default", "b", "busy", 2, Pod::Launcher);
    pod(&store, "default", "c", "busy", 1, Pod::Launcher);
    pod(&store, "default", "d", "busy", 1, Pod::Launcher);
    let evictor = Arc::new(FakeEvictor::default());
    let ttl = Duration::from_secs(300);
    let descheduler = new_descheduler(DeschedulerSettings { in_progress_ttl: ttl, ..kep() }, &evictor);
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/a"]);
    // Within the TTL (60 .. 240 s), a is in progress: counted, sorted first, not asked for again.
    for _ in 0..4 {
        assert!(next_cycle(&descheduler, &store, &evictor).is_empty());
    }
    let stats = descheduler.stats();
    assert_eq!(stats.per_cycle.iter().map(|c| c.in_progress).collect::<Vec<_>>(), [0, 1, 1, 1, 1]);
    // At 300 s the entry is abandoned: a is asked for again.
    assert_eq!(next_cycle(&descheduler, &store, &evictor), ["default/a"]);
    let stats = descheduler.stats();
    assert_eq!(stats.per_cycle[5].in_progress, 0);
    assert_eq!((stats.requests, stats.pod_evacuations, stats.failures), (2, 2, 0));

    // A pod gone leaves the cache: one recreated under the same name is a new pod.
    store.clock().advance(Duration::from_secs(60));
    store.delete(&pods(), "default", "a", false).unwrap();
    pod(&store, "default", "a", "busy", 3, Pod::Launcher);
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/a"]);
}

#[test]
fn a_restart_rebuilds_the_cache_from_the_eviction_in_progress_annotation() {
    let setup = |evictor: &Arc<FakeEvictor>| {
        let store = cluster();
        node(&store, "busy");
        node(&store, "idle");
        pod(&store, "default", "a", "busy", 3, Pod::Launcher);
        pod(&store, "default", "b", "busy", 3, Pod::Launcher);
        (store, new_descheduler(kep(), evictor))
    };
    // KubeVirt annotates the pod: after a restart the annotation says a is leaving.
    let evictor = Arc::new(FakeEvictor::annotating());
    let (store, descheduler) = setup(&evictor);
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/a"]);
    descheduler.restart();
    assert!(cycle(&descheduler, &store, &evictor).is_empty(), "a restarted descheduler runs at once");
    assert_eq!(descheduler.stats().per_cycle[1].in_progress, 1);
    assert!(next_cycle(&descheduler, &store, &evictor).is_empty());

    // Without the annotation, a restart loses the cache: a is asked for a second time.
    let evictor = Arc::new(FakeEvictor::default());
    let (store, descheduler) = setup(&evictor);
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/a"]);
    assert!(next_cycle(&descheduler, &store, &evictor).is_empty(), "the cache remembers it");
    descheduler.restart();
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/a"]);
    assert_eq!(descheduler.stats().per_cycle[2].in_progress, 0);
}

#[test]
fn a_removed_eviction_in_progress_annotation_ends_the_eviction() {
    // KubeVirt removes the annotation when the migration failed, so that the pod may go again.
    let store = cluster();
    node(&store, "busy");
    node(&store, "idle");
    pod(&store, "default", "a", "busy", 3, Pod::Launcher);
    pod(&store, "default", "b", "busy", 3, Pod::Launcher);
    let evictor = Arc::new(FakeEvictor::annotating());
    let descheduler = new_descheduler(kep(), &evictor);
    assert_eq!(cycle(&descheduler, &store, &evictor), ["default/a"]);
    assert!(next_cycle(&descheduler, &store, &evictor).is_empty());
    let patch = json!({"metadata": {"annotations": {EVICTION_IN_PROGRESS: null}}});
    store.patch(&pods(), "default", "a", &Patch::Merge(patch), false).unwrap();
    assert_eq!(next_cycle(&descheduler, &store, &evictor), ["default/a"]);
}

#[test]
fn only_prefixed_429s_for_request_evict_only_pods_are_evacuations() {
    // 7 GiB on busy, 2 to move; equal sizes, so the order is by name.
    let setup = || {
        let store = cluster();
        node(&store, "busy");
        node(&store, "idle");
        pod(&store, "default", "a-budgeted", "busy", 2, Pod::Budgeted);
        pod(&store, "default", "b-unannotated-launcher", "busy", 2, Pod::UnannotatedLauncher);
        pod(&store, "default", "c-launcher", "busy", 2, Pod::Launcher);
        pod(&store, "default", "d-plain", "busy", 1, Pod::Plain);
        store
    };
    let store = setup();
    let evictor = Arc::new(FakeEvictor::default());
    let descheduler = new_descheduler(kep(), &evictor);
    // The budget's 429 and the 429 for a pod without request-evict-only are failures: the next
    // pod is tried; c's answer is an eviction in background, which relieves the node enough.
    assert_eq!(
        cycle(&descheduler, &store, &evictor),
        ["default/a-budgeted", "default/b-unannotated-launcher", "default/c-launcher"]
    );
    let stats = descheduler.stats();
    assert_eq!((stats.requests, stats.pod_evacuations, stats.failures, stats.pods_evicted), (3, 1, 2, 0));
    let record = &stats.per_cycle[0];
    assert_eq!((record.requests, record.evacuations, record.failures, record.evicted), (3, 1, 2, 0));

    // A webhook message without a known prefix is a failure too; then d is evicted (201).
    let store = setup();
    let evictor = Arc::new(FakeEvictor::default());
    let settings = DeschedulerSettings { message_prefixes: vec!["Eviction deferred".into()], ..kep() };
    let descheduler = new_descheduler(settings, &evictor);
    assert_eq!(cycle(&descheduler, &store, &evictor).len(), 4);
    let stats = descheduler.stats();
    assert_eq!((stats.requests, stats.pod_evacuations, stats.failures, stats.pods_evicted), (4, 0, 3, 1));
    assert!(store.get(&pods(), "default", "d-plain").is_err(), "evicted");
}

#[test]
fn the_naive_descheduler_asks_for_far_more_than_its_limits() {
    // Two nodes of 8 launcher pods (80 %), two idle ones; at most 3 per node and 5 in total.
    let run = |settings: DeschedulerSettings| {
        let store = cluster();
        for name in ["busy-1", "busy-2", "idle-1", "idle-2"] {
            node(&store, name);
        }
        launchers(&store, "default", "one", "busy-1", 8);
        launchers(&store, "default", "two", "busy-2", 8);
        let evictor = Arc::new(FakeEvictor::annotating());
        let settings = DeschedulerSettings { max_per_node: Some(3), max_total: Some(5), ..settings };
        let descheduler = new_descheduler(settings, &evictor);
        cycle(&descheduler, &store, &evictor);
        for _ in 0..2 {
            next_cycle(&descheduler, &store, &evictor);
        }
        (descheduler.stats(), evictor.calls())
    };
    let (kep_stats, kep_calls) = run(kep());
    // KEP-1397: 3 from busy-1, 2 from busy-2 (total 5), then nothing while they migrate.
    assert_eq!(kep_stats.per_cycle.iter().map(|c| c.requests).collect::<Vec<_>>(), [5, 0, 0]);
    assert_eq!(kep_calls.len(), 5);
    assert_eq!(kep_stats.pod_evacuations, 5);
    for record in &kep_stats.per_cycle {
        assert!(record.counted_most_on_a_node <= 3 && record.counted_total <= 5);
    }

    // Naive: each 429 is a failure that counts toward no limit: every pod of both nodes, each cycle.
    let (naive_stats, naive_calls) = run(naive());
    assert_eq!(naive_stats.per_cycle.iter().map(|c| c.requests).collect::<Vec<_>>(), [16, 16, 16]);
    assert_eq!(naive_calls.len(), 48);
    assert_eq!((naive_stats.failures, naive_stats.pod_evacuations, naive_stats.pods_evicted), (48, 0, 0));
    assert!(naive_calls.iter().filter(|c| c.as_str() == "default/one-7").count() == 3, "asked for again");
}

#[test]
fn cycles_run_at_the_interval() {
    let store = cluster();
    node(&store, "busy");
    node(&store, "idle");
    launchers(&store, "default", "vm", "busy", 8);
    let evictor = Arc::new(FakeEvictor::default());
    let settings = DeschedulerSettings { evictions_in_background: false, ..kep() };
    let descheduler = new_descheduler(settings, &evictor);
    // The first cycle runs at the first reconcile.
    let start = store.clock().elapsed();
    assert_eq!(descheduler.reconcile(&store).unwrap(), Some(start + Duration::from_secs(60)));
    assert_eq!(evictor.calls().len(), 8);
    // Between cycles: nothing, even if the cluster changed.
    launchers(&store, "default", "more", "busy", 1);
    for _ in 0..3 {
        store.clock().advance(Duration::from_secs(15));
        assert_eq!(descheduler.reconcile(&store).unwrap(), Some(start + Duration::from_secs(60)));
    }
    assert_eq!((descheduler.stats().cycles, evictor.calls().len()), (1, 8));
    store.clock().advance(Duration::from_secs(15));
    assert_eq!(descheduler.reconcile(&store).unwrap(), Some(start + Duration::from_secs(120)));
    assert_eq!((descheduler.stats().cycles, evictor.calls().len()), (2, 17));

    // Under the driver: cycles at 120, 180, ... 600 s, the clock jumping from one to the next.
    struct Shared(Arc<Descheduler>);
    impl crate::Actor for Shared {
        fn name(&self) -> &'static str {
            self.0.name()
        }
        fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
            crate::Actor::reconcile(&*self.0, store)
        }
    }
    let store = Arc::new(store);
    let descheduler = Arc::new(descheduler);
    let simulation = Simulation::new(Arc::clone(&store), vec![Box::new(Shared(Arc::clone(&descheduler)))]);
    simulation.run_until(start + Duration::from_secs(600)).unwrap();
    let at: Vec<u64> = descheduler.stats().per_cycle.iter().map(|c| c.at_ms / 1000).collect();
    assert_eq!(at, (0..=10).map(|i| i * 60).collect::<Vec<_>>());
    assert_eq!(crate::Actor::name(&*descheduler), "descheduler");

    // A zero interval runs a single cycle.
    let evictor = Arc::new(FakeEvictor::default());
    let once = new_descheduler(DeschedulerSettings { interval: Duration::ZERO, ..naive() }, &evictor);
    assert_eq!(once.reconcile(&store).unwrap(), None);
    store.clock().advance(Duration::from_secs(600));
    assert_eq!(once.reconcile(&store).unwrap(), None);
    assert_eq!(once.stats().cycles, 1);
}

#[test]
fn nomination_follows_the_thresholds() {
    // No under-utilised node: nothing moves, however loaded the others.
    let store = cluster();
    node(&store, "busy");
    node(&store, "half");
    launchers(&store, "default", "vm", "busy", 9);
    launchers(&store, "default", "half", "half", 3); // 30 %: neither under 20 % nor over 50 %
    let evictor = Arc::new(FakeEvictor::default());
    let descheduler = new_descheduler(kep(), &evictor);
    assert!(cycle(&descheduler, &store, &evictor).is_empty());

    // DaemonSet pods, pods without an owner and terminating pods are not moved; the latter do not
    // weigh on their node either. busy: 6 GiB of movable pods + 1 + 1 = 8 GiB counted.
    let store = cluster();
    node(&store, "busy");
    node(&store, "idle");
    for i in 0..6 {
        pod(&store, "default", &format!("plain-{i}"), "busy", 1, Pod::Plain);
    }
    let owners = json!([{"kind": "DaemonSet", "name": "ds"}]);
    let daemon = json!({"metadata": {"name": "daemon", "ownerReferences": owners},
                        "spec": {"nodeName": "busy", "containers": [container("1Gi")]},
                        "status": {"phase": "Running"}});
    store.create(&pods(), "default", daemon, false).unwrap();
    let bare = json!({"metadata": {"name": "bare"},
                      "spec": {"nodeName": "busy", "containers": [container("1Gi")]},
                      "status": {"phase": "Running"}});
    store.create(&pods(), "default", bare, false).unwrap();
    pod(&store, "default", "leaving", "busy", 4, Pod::Plain);
    store.delete_gracefully(&pods(), "default", "leaving", None, false).unwrap();
    let evictor = Arc::new(FakeEvictor::default());
    let descheduler = new_descheduler(kep(), &evictor);
    // 8 GiB > 5: three plain pods (201) bring it down to 5.
    assert_eq!(
        cycle(&descheduler, &store, &evictor),
        ["default/plain-0", "default/plain-1", "default/plain-2"]
    );
    assert_eq!(descheduler.stats().pods_evicted, 3);
}
