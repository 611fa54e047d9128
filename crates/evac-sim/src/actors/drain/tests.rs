use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::*;
use crate::actors::Kubelet;
use crate::{SimClock, Simulation};

/// An evictor that refuses a pod's first evictions with a given code, then deletes it gracefully,
/// and records every call (pod, time).
#[derive(Default)]
struct FakeEvictor {
    /// Pod name → (refusals left, code).
    refusals: Mutex<HashMap<String, (u32, u16)>>,
    calls: Mutex<Vec<(String, Duration)>>,
}

impl FakeEvictor {
    fn refusing(pod: &str, times: u32, code: u16) -> Self {
        let evictor = Self::default();
        evictor.refusals.lock().unwrap().insert(pod.to_owned(), (times, code));
        evictor
    }

    fn calls(&self) -> Vec<(String, Duration)> {
        self.calls.lock().unwrap().clone()
    }

    fn calls_for(&self, pod: &str) -> Vec<Duration> {
        self.calls().into_iter().filter(|(p, _)| p == pod).map(|(_, at)| at).collect()
    }
}

impl Evictor for FakeEvictor {
    fn evict(&self, store: &Store, namespace: &str, pod: &str, requester: &str) -> Result<(), ApiError> {
        assert_eq!(requester, REQUESTER);
        self.calls.lock().unwrap().push((pod.to_owned(), store.clock().elapsed()));
        if let Some((left, code)) = self.refusals.lock().unwrap().get_mut(pod) {
            if *left > 0 {
                *left -= 1;
                let (reason, message) = match *code {
                    429 => (
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    ),
                    _ => ("InternalError", "the webhook failed"),
                };
                return Err(ApiError { code: *code, reason, message: message.to_owned() });
            }
        }
        store.delete_gracefully(&pods(), namespace, pod, None, false).map(|_| ())
    }
}

fn cluster() -> Arc<Store> {
    let store = Arc::new(Store::new(Arc::new(SimClock::default()), 10_000));
    for node in ["n1", "n2"] {
        store.create(&nodes(), "", json!({"metadata": {"name": node}}), false).unwrap();
    }
    store
}

fn pod(store: &Store, name: &str, node: &str, extra: Value) {
    let mut pod =
        json!({"metadata": {"name": name}, "spec": {"nodeName": node}, "status": {"phase": "Running"}});
    json_patch::merge(&mut pod, &extra);
    store.create(&pods(), "default", pod, false).unwrap();
}

fn daemon_set_pod(store: &Store, name: &str, node: &str) {
    let owner = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "1", "controller": true}]}});
    pod(store, name, node, owner);
}

fn unschedulable(store: &Store) -> Option<Value> {
    store.get(&nodes(), "", "n1").unwrap().pointer("/spec/unschedulable").cloned()
}

fn exists(store: &Store, name: &str) -> bool {
    store.get(&pods(), "default", name).is_ok()
}

#[test]
fn nothing_happens_before_the_start_then_the_node_is_cordoned() {
    let store = cluster();
    pod(&store, "a", "n1", json!({}));
    let evictor = Arc::new(FakeEvictor::default());
    let start = Duration::from_secs(10);
    let drain = Drain::new("n1", start, evictor.clone());
    assert_eq!(drain.reconcile(&store).unwrap(), Some(start));
    store.clock().advance(Duration::from_millis(9_999));
    assert_eq!(drain.reconcile(&store).unwrap(), Some(start));
    assert_eq!(unschedulable(&store), None, "not cordoned before the start");
    assert!(evictor.calls().is_empty());
    assert!(!drain.state().cordoned);
    assert_eq!(store.get(&pods(), "default", "a").unwrap().pointer("/metadata/deletionTimestamp"), None);

    store.clock().advance(Duration::from_millis(1));
    drain.reconcile(&store).unwrap();
    assert_eq!(unschedulable(&store), Some(json!(true)));
    assert!(drain.state().cordoned);
    assert_eq!(evictor.calls(), [("a".to_owned(), start)]);
    assert_eq!(drain.state().requests, 1);
    assert!(store.get(&pods(), "default", "a").unwrap().pointer("/metadata/deletionTimestamp").is_some());
}

#[test]
fn daemon_set_pods_are_left_alone() {
    let store = cluster();
    daemon_set_pod(&store, "ds-n1", "n1");
    pod(&store, "plain", "n1", json!({"spec": {"terminationGracePeriodSeconds": 0}}));
    pod(&store, "elsewhere", "n2", json!({}));
    let evictor = Arc::new(FakeEvictor::default());
    let drain = Drain::new("n1", Duration::ZERO, evictor.clone());
    drain.reconcile(&store).unwrap();
    assert!(!exists(&store, "plain"), "grace 0: deleted at once");
    drain.reconcile(&store).unwrap();
    assert_eq!(evictor.calls(), [("plain".to_owned(), Duration::ZERO)]);
    assert_eq!(drain.state().finished, Some(Duration::ZERO), "the DaemonSet pod does not hold the drain");
    assert!(exists(&store, "ds-n1"));
    assert!(exists(&store, "elsewhere"));
    assert_eq!(store.get(&pods(), "default", "ds-n1").unwrap().pointer("/metadata/deletionTimestamp"), None);
}

#[test]
fn refused_evictions_are_retried_every_five_seconds_not_sooner() {
    let store = cluster();
    pod(&store, "a", "n1", json!({}));
    pod(&store, "b", "n1", json!({}));
    let evictor = Arc::new(FakeEvictor::refusing("a", 2, 429));
    let start = Duration::from_secs(3);
    let drain = Drain::new("n1", start, evictor.clone());
    store.clock().advance(start);
    assert_eq!(drain.reconcile(&store).unwrap(), Some(start + RETRY));
    assert_eq!(evictor.calls_for("a"), [start]);
    assert_eq!(evictor.calls_for("b"), [start], "b is asked at once, and only once");

    store.clock().advance(RETRY - Duration::from_millis(1));
    assert_eq!(drain.reconcile(&store).unwrap(), Some(start + RETRY));
    assert_eq!(evictor.calls_for("a"), [start], "not sooner than 5 s");

    store.clock().advance(Duration::from_millis(1));
    assert_eq!(drain.reconcile(&store).unwrap(), Some(start + RETRY * 2));
    assert_eq!(evictor.calls_for("a"), [start, start + RETRY]);
    store.clock().advance(RETRY);
    assert_eq!(drain.reconcile(&store).unwrap(), None, "accepted: nothing to retry");
    assert_eq!(evictor.calls_for("a"), [start, start + RETRY, start + RETRY * 2]);
    assert_eq!(evictor.calls_for("b"), [start]);
    let state = drain.state();
    assert_eq!((state.requests, state.refused), (4, 2));
    assert_eq!(state.error, None);
    assert_eq!(state.finished, None, "the pods are terminating");
}

#[test]
fn retries_in_a_simulation_happen_on_the_five_second_marks() {
    let store = cluster();
    pod(&store, "a", "n1", json!({"spec": {"terminationGracePeriodSeconds": 0}}));
    let evictor = Arc::new(FakeEvictor::refusing("a", 3, 429));
    let drain = Arc::new(Drain::new("n1", Duration::from_secs(1), evictor.clone()));
    let simulation = Simulation::new(Arc::clone(&store), vec![Box::new(Arc::clone(&drain))]);
    simulation.run_until(Duration::from_secs(60)).unwrap();
    let secs = |s: &[u64]| s.iter().map(|&s| Duration::from_secs(s)).collect::<Vec<_>>();
    assert_eq!(evictor.calls_for("a"), secs(&[1, 6, 11, 16]));
    assert_eq!(drain.state().finished, Some(Duration::from_secs(16)));
    assert_eq!(drain.state().refused, 3);
}

#[test]
fn the_drain_finishes_once_terminating_pods_are_gone() {
    let store = cluster();
    pod(&store, "a", "n1", json!({}));
    pod(&store, "b", "n1", json!({"spec": {"terminationGracePeriodSeconds": 60}}));
    pod(&store, "pending", "", json!({"status": {"phase": "Pending"}}));
    daemon_set_pod(&store, "ds-n1", "n1");
    pod(&store, "elsewhere", "n2", json!({}));
    let evictor = Arc::new(FakeEvictor::default());
    let drain = Arc::new(Drain::new("n1", Duration::from_secs(5), evictor.clone()));
    let simulation =
        Simulation::new(Arc::clone(&store), vec![Box::new(Arc::clone(&drain)), Box::new(Kubelet::default())]);

    simulation.run_until(Duration::from_secs(35)).unwrap();
    assert!(!exists(&store, "a"), "removed by the kubelet after its 30 s");
    assert!(exists(&store, "b"));
    assert_eq!(drain.state().finished, None, "b is still terminating");

    simulation.run_until(Duration::from_secs(64)).unwrap();
    assert!(exists(&store, "b"));
    assert_eq!(drain.state().finished, None);

    simulation.run_until(Duration::from_secs(120)).unwrap();
    assert!(!exists(&store, "b"));
    assert_eq!(drain.state().finished, Some(Duration::from_secs(65)));
    assert_eq!(drain.state().error, None);
    let mut asked: Vec<_> = evictor.calls().into_iter().map(|(p, _)| p).collect();
    asked.sort();
    assert_eq!(asked, ["a", "b"], "one request each; nothing off the node, no DaemonSet pod");
    assert!(exists(&store, "ds-n1") && exists(&store, "elsewhere") && exists(&store, "pending"));
}

#[test]
fn another_refusal_stops_the_drain() {
    let store = cluster();
    pod(&store, "a", "n1", json!({"spec": {"terminationGracePeriodSeconds": 0}}));
    pod(&store, "b", "n1", json!({}));
    pod(&store, "c", "n1", json!({}));
    let evictor = Arc::new(FakeEvictor::refusing("b", 1, 500));
    let drain = Drain::new("n1", Duration::ZERO, evictor.clone());
    assert_eq!(drain.reconcile(&store).unwrap(), None);
    let error = drain.state().error.expect("the drain stopped");
    assert!(error.contains(r#"error when evicting pods/"b" -n "default""#), "{error}");
    assert!(error.contains("the webhook failed"), "{error}");
    assert!(!exists(&store, "a"));
    assert!(exists(&store, "c"));

    // Stopped for good: no more requests, and never finished.
    store.clock().advance(Duration::from_secs(60));
    assert_eq!(drain.reconcile(&store).unwrap(), None);
    let asked: Vec<_> = evictor.calls().into_iter().map(|(p, _)| p).collect();
    assert_eq!(asked, ["a", "b"]);
    assert_eq!(drain.state().finished, None);
    assert_eq!(store.get(&pods(), "default", "c").unwrap().pointer("/metadata/deletionTimestamp"), None);
}
