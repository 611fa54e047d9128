//! Kubernetes' taint manager (NoExecute taint eviction): a pod on a node with a `NoExecute` taint
//! it does not tolerate gets the condition `DisruptionTarget` (reason `DeletionByTaintManager`)
//! and is deleted; a pod that tolerates the taint for `tolerationSeconds` is deleted when they run
//! out (counted from when the taint was added, its `timeAdded`).

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
#[derive(Debug, Default, Clone)]
pub struct TaintManager;

impl TaintManager {
    /// Evicts the pods whose time on a NoExecute-tainted node is up; returns when the next one's is.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let now = store.clock().now();
        let elapsed = store.clock().elapsed();
        let (all_nodes, _) = store.list(&nodes(), None, None, None);
        let (all_pods, _) = store.list(&pods(), None, None, None);
        // Pods by node, leaving out those already terminating.
        let mut by_node: std::collections::HashMap<&str, Vec<Pod>> = Default::default();
        for pod in all_pods.iter().map(|p| Pod(p)).filter(|p| !p.is_terminating()) {
            if let Some(node) = pod.node_name() {
                by_node.entry(node).or_default().push(pod);
            }
        }
        let mut next: Option<Duration> = None;
        for node in all_nodes.iter().map(|n| Node(n)) {
            let taints: Vec<Taint> = node.taints().filter(|t| t.effect() == "NoExecute").collect();
            if taints.is_empty() {
                continue;
            }
            for &pod in by_node.get(node.name()).into_iter().flatten() {
                // The earliest moment a taint requires the pod gone: now for an untolerated taint.
                let mut due: Option<Duration> = None;
                for &taint in &taints {
                    let after = match toleration_seconds(pod, taint) {
                        Toleration::None => Some(Duration::ZERO),
                        Toleration::Forever => None,
                        Toleration::For(seconds) => {
                            let added = taint.time_added().unwrap_or_default();
                            let added_at = chrono::DateTime::parse_from_rfc3339(added)
                                .map(|t| t.with_timezone(&chrono::Utc))
                                .unwrap_or(now);
                            let deadline = added_at + chrono::Duration::seconds(seconds);
                            Some((deadline - now).to_std().unwrap_or(Duration::ZERO))
                        }
                    };
                    due = match (due, after) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                match due {
                    Some(Duration::ZERO) => evict(store, pod)?,
                    Some(wait) => next = Some(next.map_or(elapsed + wait, |n| n.min(elapsed + wait))),
                    None => {}
                }
            }
        }
        Ok(next)
    }
}

enum Toleration {
    None,
    Forever,
    For(i64),
}

/// How long a pod tolerates a taint (Kubernetes' toleration matching: key and effect, with
/// operator Exists or Equal).
fn toleration_seconds(pod: Pod<'_>, taint: Taint<'_>) -> Toleration {
    let mut best = Toleration::None;
    for toleration in pod.tolerations().filter(|t| t.tolerates(taint)) {
        match toleration.seconds() {
            None => return Toleration::Forever,
            Some(seconds) => {
                best = match best {
                    Toleration::For(current) if current >= seconds => Toleration::For(current),
                    _ => Toleration::For(seconds),
                }
            }
        }
    }
    best
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
        store
            .patch(
                &Kind::new("v1", "Node"),
                "",
                "n1",
                &Patch::Merge(json!({"spec": {"taints": [taint]}})),
                false,
            )
            .unwrap();
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
        let manager = TaintManager;
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
}
