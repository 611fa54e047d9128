//! Kubernetes' taint manager, NoExecute taint eviction (`pkg/controller/tainteviction/
//! taint_eviction.go`, `processPodOnNode`): a pod on a node with a `NoExecute` taint it does not
//! tolerate gets the condition `DisruptionTarget` (reason `DeletionByTaintManager`, message
//! `Taint manager: deleting due to NoExecute taint`) and is deleted with its own grace period, at
//! once. A pod that tolerates every such taint, some for `tolerationSeconds`, is deleted when the
//! shortest of those runs out, counted from when the taint manager first saw it must go
//! (`GetMatchingTolerations`, `getMinTolerationTime`; the taint's `timeAdded` is not read). The
//! timers live in the controller's memory: a taint removed in time cancels them.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;

use super::with_disruption_target;
use crate::kinds::{nodes, pods};
use crate::objects::{Node, Pod, Taint};
use crate::store::{Patch, Store};
use crate::ApiError;

/// The `DisruptionTarget` reason the taint manager sets on the pods it deletes: Kubernetes'
/// `DeletionByTaintManager`.
pub const REASON: &str = "DeletionByTaintManager";

/// The taint manager as an actor: deletes the pods whose toleration of a `NoExecute` taint is absent
/// or ran out.
#[derive(Debug, Default)]
pub struct TaintManager {
    /// Evictions scheduled: pod (namespace, name) -> (when it was first scheduled, when it fires).
    scheduled: Mutex<HashMap<(String, String), (Duration, Duration)>>,
}

/// How long a pod may stay on a node, by its tolerations of the node's NoExecute taints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stay {
    /// A taint it does not tolerate: it goes now.
    Not,
    /// It tolerates every taint, the shortest for this long.
    For(Duration),
    /// It tolerates every taint for ever.
    Forever,
}

/// Kubernetes' `GetMatchingTolerations` and `getMinTolerationTime`: each taint is matched by the
/// first toleration that tolerates it; the pod may stay for the smallest `tolerationSeconds` of
/// those matched (0 or less: not at all), for ever when none sets one.
fn stay(pod: Pod<'_>, taints: &[Taint<'_>]) -> Stay {
    let mut shortest: Option<i64> = None;
    for &taint in taints {
        let Some(toleration) = pod.tolerations().find(|t| t.tolerates(taint)) else { return Stay::Not };
        if let Some(seconds) = toleration.seconds() {
            shortest = Some(shortest.map_or(seconds, |s| s.min(seconds)));
        }
    }
    match shortest {
        None => Stay::Forever,
        Some(seconds) if seconds <= 0 => Stay::Not,
        Some(seconds) => Stay::For(Duration::from_secs(seconds as u64)),
    }
}

impl TaintManager {
    /// Evicts the pods whose time on a NoExecute-tainted node is up; returns when the next one's is.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let now = store.clock().elapsed();
        let (all_nodes, _) = store.list(&nodes(), None, None, None);
        let mut scheduled = self.scheduled.lock().unwrap_or_else(PoisonError::into_inner);
        let mut still_scheduled = BTreeSet::new();
        let mut next: Option<Duration> = None;
        for node in all_nodes.iter().map(|n| Node(n)) {
            let taints: Vec<Taint> = node.taints().filter(|t| t.effect() == "NoExecute").collect();
            if taints.is_empty() {
                continue;
            }
            let on_node = evac_cluster::FieldSelector::parse(&format!("spec.nodeName={}", node.name()))
                .map_err(ApiError::bad_request)?;
            let (on_node, _) = store.list(&pods(), None, None, Some(&on_node));
            for pod in on_node.iter().map(|p| Pod(p)).filter(|p| !p.is_terminating()) {
                let key = (pod.meta().namespace().to_owned(), pod.meta().name().to_owned());
                let fire_at = match stay(pod, &taints) {
                    Stay::Not => now,
                    Stay::Forever => continue,
                    Stay::For(tolerated) => {
                        let since = scheduled.get(&key).map_or(now, |(since, _)| *since);
                        since + tolerated
                    }
                };
                if fire_at <= now {
                    scheduled.remove(&key);
                    evict(store, pod)?;
                    continue;
                }
                let since = scheduled.get(&key).map_or(now, |(since, _)| *since);
                scheduled.insert(key.clone(), (since, fire_at));
                still_scheduled.insert(key);
                next = Some(next.map_or(fire_at, |n: Duration| n.min(fire_at)));
            }
        }
        // A taint removed, a toleration no longer needed, a pod gone: its eviction is cancelled.
        scheduled.retain(|key, _| still_scheduled.contains(key));
        Ok(next)
    }
}

/// Marks the pod as a disruption target, then deletes it, as the taint manager does.
fn evict(store: &Store, pod: Pod<'_>) -> Result<(), ApiError> {
    let pods = pods();
    let (namespace, name) = (pod.meta().namespace(), pod.meta().name());
    let message = "Taint manager: deleting due to NoExecute taint";
    let conditions = with_disruption_target(pod.0, REASON, message, &store.clock().timestamp());
    store.patch(
        &pods,
        namespace,
        name,
        &Patch::Merge(json!({"status": {"conditions": conditions}})),
        false,
    )?;
    store.delete_gracefully(&pods, namespace, name, None, false)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::Value;

    use super::*;
    use crate::actors::text;
    use crate::store::Kind;
    use crate::SimClock;

    fn cluster() -> Store {
        let store = Store::new(Arc::new(SimClock::default()), 10_000);
        store.create(&Kind::new("v1", "Node"), "", json!({"metadata": {"name": "n1"}}), false).unwrap();
        store
    }

    fn pod(store: &Store, name: &str, tolerations: Value) {
        let pod = json!({"metadata": {"name": name}, "spec": {"nodeName": "n1", "tolerations": tolerations}});
        store.create(&Kind::new("v1", "Pod"), "default", pod, false).unwrap();
    }

    fn taint(store: &Store) {
        let taint = json!({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": store.clock().timestamp()});
        store.set_node_taints("n1", &[taint]).unwrap();
    }

    fn alive(store: &Store) -> Vec<String> {
        let (pods, _) = store.list(&Kind::new("v1", "Pod"), None, None, None);
        pods.iter()
            .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
            .map(|p| text(p, "/metadata/name").to_owned())
            .collect()
    }

    #[test]
    fn untolerated_pods_go_at_once_tolerated_ones_when_their_time_is_up() {
        let store = cluster();
        pod(&store, "plain", json!([]));
        pod(
            &store,
            "five-minutes",
            json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
        );
        pod(&store, "forever", json!([{"operator": "Exists"}]));
        let manager = TaintManager::default();
        assert_eq!(manager.reconcile(&store).unwrap(), None, "no taint, nothing to do");
        taint(&store);
        let next = manager.reconcile(&store).unwrap();
        assert_eq!(alive(&store), ["five-minutes", "forever"]);
        assert_eq!(next, Some(store.clock().elapsed() + Duration::from_secs(300)));

        store.clock().advance(Duration::from_secs(299));
        manager.reconcile(&store).unwrap();
        assert_eq!(alive(&store), ["five-minutes", "forever"]);
        store.clock().advance(Duration::from_secs(1));
        assert_eq!(manager.reconcile(&store).unwrap(), None);
        assert_eq!(alive(&store), ["forever"]);

        // The evicted pods were marked as disruption targets, then deleted with their grace period.
        let (pods, _) = store.list(&Kind::new("v1", "Pod"), None, None, None);
        let terminating: Vec<_> =
            pods.iter().filter(|p| p.pointer("/metadata/deletionTimestamp").is_some()).collect();
        assert_eq!(terminating.len(), 2);
        for pod in terminating {
            assert_eq!(text(pod, "/status/conditions/0/reason"), REASON);
            assert_eq!(pod.pointer("/metadata/deletionGracePeriodSeconds"), Some(&json!(30)));
        }
    }

    /// The shortest toleration counts, from when the taint manager first saw the taint (a taint
    /// added as `kubectl taint` adds it, without `timeAdded`); removing the taint in time cancels.
    #[test]
    fn the_shortest_toleration_counts_from_first_sight_and_a_removed_taint_cancels() {
        let store = cluster();
        let tolerate = |seconds: u64| json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds});
        pod(&store, "two", json!([tolerate(60), tolerate(120)]));
        pod(&store, "kept", json!([tolerate(90)]));
        let manager = TaintManager::default();
        store.clock().advance(Duration::from_secs(10));
        let untimed = json!({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"});
        let set = |taints: serde_json::Value| {
            store.set_node_taints("n1", taints.as_array().expect("a list of taints")).unwrap();
        };
        set(json!([untimed]));
        // The first matching toleration of each taint is used: "two" tolerates it for 60 s.
        assert_eq!(manager.reconcile(&store).unwrap(), Some(Duration::from_secs(70)));
        store.clock().advance(Duration::from_secs(60));
        manager.reconcile(&store).unwrap();
        assert_eq!(alive(&store), ["kept"]);
        // The taint goes before "kept"'s 90 s are up: nothing more is deleted, even once it is back.
        set(json!([]));
        assert_eq!(manager.reconcile(&store).unwrap(), None);
        store.clock().advance(Duration::from_secs(40));
        set(json!([untimed]));
        assert_eq!(
            manager.reconcile(&store).unwrap(),
            Some(Duration::from_secs(200)),
            "the timer starts again"
        );
        assert_eq!(alive(&store), ["kept"]);
    }
}
