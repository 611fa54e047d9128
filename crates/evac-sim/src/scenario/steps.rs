//! The scenario's one-off disruptions (a taint, an uncordon, memory pressure, high-priority
//! pods), as an actor that applies each at its moment. Drains and the descheduler are actors of
//! their own.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use super::spec::Action;
use crate::actors::kubelet::SYSTEM_MEMORY_ANNOTATION;
use crate::store::{Kind, Patch, Store};
use crate::Actor;
use crate::ApiError;

pub struct Steps {
    /// Not yet applied, soonest last.
    pending: Mutex<Vec<(Duration, Action)>>,
}

impl Steps {
    pub fn new(mut steps: Vec<(Duration, Action)>) -> Self {
        steps.sort_by_key(|step| std::cmp::Reverse(step.0));
        Self { pending: Mutex::new(steps) }
    }
}

impl Actor for Steps {
    fn name(&self) -> &'static str {
        "scenario"
    }

    fn watches(&self) -> Option<Vec<crate::store::Kind>> {
        // Only time moves it.
        Some(Vec::new())
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let mut pending = self.pending.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = store.clock().elapsed();
        while pending.last().is_some_and(|(at, _)| *at <= now) {
            let (_, action) = pending.pop().expect("checked above");
            apply(store, &action)?;
        }
        Ok(pending.last().map(|(at, _)| *at))
    }
}

fn apply(store: &Store, action: &Action) -> Result<(), ApiError> {
    let nodes = Kind::new("v1", "Node");
    match action {
        Action::Uncordon { node } => {
            store.patch(&nodes, "", node, &Patch::Merge(json!({"spec": {"unschedulable": null}})), false)?;
        }
        Action::Taint { node, key, value, effect } => {
            let current = store.get(&nodes, "", node)?;
            let mut taints =
                current.pointer("/spec/taints").and_then(|t| t.as_array()).cloned().unwrap_or_default();
            taints.retain(|t| t["key"] != json!(key) || t["effect"] != json!(effect));
            taints.push(
                json!({"key": key, "value": value, "effect": effect, "timeAdded": store.clock().timestamp()}),
            );
            store.patch(&nodes, "", node, &Patch::Merge(json!({"spec": {"taints": taints}})), false)?;
        }
        Action::MemoryPressure { node, used } => {
            let patch = json!({"metadata": {"annotations": {SYSTEM_MEMORY_ANNOTATION: used.0}}});
            store.patch(&nodes, "", node, &Patch::Merge(patch), false)?;
        }
        Action::Preempt { pods, memory, priority, node } => {
            for _ in 0..*pods {
                let mut pod = json!({
                    "metadata": {"generateName": "high-priority-", "labels": {"app": "high-priority"}},
                    "spec": {"priority": priority, "priorityClassName": "high-priority",
                             "containers": [{"name": "app", "image": "app",
                                             "resources": {"requests": {"memory": memory.0}}}]},
                    "status": {"phase": "Pending"},
                });
                if let Some(node) = node {
                    pod["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": node});
                }
                store.create(&Kind::new("v1", "Pod"), "default", pod, false)?;
            }
        }
        // Actors of their own.
        Action::Drain { .. } | Action::Descheduler(_) | Action::RestartEvacControl {} => {}
    }
    Ok(())
}
