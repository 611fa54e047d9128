//! The scenario's one-off disruptions (a taint, an uncordon, memory pressure, high-priority
//! pods, a lone eviction, a pod or a VM deleted, a node down, an evacuation cancelled), as an
//! actor that applies each at its moment. Drains and the descheduler are actors of their own.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::spec::Action;
use crate::actors::kubelet::{DOWN_ANNOTATION, SYSTEM_MEMORY_ANNOTATION};
use crate::actors::Evictor;
use crate::api::virt_api;
use crate::kinds::{nodes, pods, vmis};
use crate::objects::{Pod, Vmi};
use crate::store::{deleted, Kind, Patch, Store};
use crate::Actor;
use crate::ApiError;

/// Who asks for a scenario's lone evictions, in reports.
pub const LONE_EVICTION: &str = "lone-eviction";

/// The scenario's one-off disruptions, applied at their moments.
pub struct Steps {
    /// Not yet applied, soonest last.
    pending: Mutex<Vec<(Duration, Action)>>,
    evictor: Arc<dyn Evictor>,
}

impl Steps {
    /// The steps, in any order; `evictor` sends lone evictions.
    pub fn new(mut steps: Vec<(Duration, Action)>, evictor: Arc<dyn Evictor>) -> Self {
        steps.sort_by_key(|step| std::cmp::Reverse(step.0));
        Self { pending: Mutex::new(steps), evictor }
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
            apply(store, &action, &*self.evictor)?;
        }
        Ok(pending.last().map(|(at, _)| *at))
    }
}

fn apply(store: &Store, action: &Action, evictor: &dyn Evictor) -> Result<(), ApiError> {
    match action {
        Action::Uncordon { node } => {
            store.patch(
                &nodes(),
                "",
                node,
                &Patch::Merge(json!({"spec": {"unschedulable": null}})),
                false,
            )?;
        }
        Action::Taint { node, key, value, effect } => {
            let mut taints = store.node_taints(node)?;
            taints.retain(|t| t["key"] != json!(key) || t["effect"] != json!(effect));
            // As `kubectl taint` adds it: no `timeAdded` (only the node lifecycle controller
            // writes one), which the taint manager does not read anyway.
            taints.push(json!({"key": key, "value": value, "effect": effect}));
            store.set_node_taints(node, &taints)?;
        }
        Action::Untaint { node, key, effect } => {
            let mut taints = store.node_taints(node)?;
            taints.retain(|t| {
                t["key"] != json!(key) || effect.as_ref().is_some_and(|e| t["effect"] != json!(e))
            });
            store.set_node_taints(node, &taints)?;
        }
        Action::MemoryPressure { node, used } => {
            let patch = json!({"metadata": {"annotations": {SYSTEM_MEMORY_ANNOTATION: used.0}}});
            store.patch(&nodes(), "", node, &Patch::Merge(patch), false)?;
        }
        Action::Preempt { pods, memory, priority, node } => {
            for _ in 0..*pods {
                let pod = high_priority_pod(&memory.0, *priority, node.as_deref());
                store.create(&Kind::new("v1", "Pod"), "default", pod, false)?;
            }
        }
        Action::Evict { vm, namespace } => {
            // One request; its answer, whatever it is, is recorded and not retried.
            if let Some(pod) = launcher_pod(store, namespace, vm) {
                let _ = evictor.evict(store, namespace, Pod(&pod).meta().name(), LONE_EVICTION);
            }
        }
        Action::DeletePod { vm, namespace } => {
            if let Some(pod) = launcher_pod(store, namespace, vm) {
                store.delete_gracefully(&pods(), namespace, Pod(&pod).meta().name(), None, false)?;
            }
        }
        Action::NodeDown { node } => node_down(store, node)?,
        Action::DeleteVm { vm, namespace } => {
            deleted(store.delete_gracefully(&vmis(), namespace, vm, None, false))?
        }
        Action::CancelEvacuation { vm, namespace } => {
            if let Err(e) = virt_api::cancel_evacuation(store, namespace, vm) {
                tracing::info!(vm = %vm, "evacuate/cancel refused: {}", e.message);
            }
        }
        // Actors of their own, and evac's own parts (which read their restarts from the scenario).
        Action::Drain { .. }
        | Action::Descheduler(_)
        | Action::RestartEvacControl {}
        | Action::RestartEvacHold { .. } => {}
    }
    Ok(())
}

/// One of the scenario's high-priority pods, pending: it requests `memory`, and is pinned to
/// `node` if one is given.
fn high_priority_pod(memory: &str, priority: i64, node: Option<&str>) -> Value {
    let mut pod = json!({
        "metadata": {"generateName": "high-priority-", "labels": {"app": "high-priority"}},
        "spec": {"priority": priority, "priorityClassName": "high-priority",
                 "containers": [{"name": "app", "image": "app",
                                 "resources": {"requests": {"memory": memory}}}]},
        "status": {"phase": "Pending"},
    });
    if let Some(node) = node {
        pod["spec"]["nodeSelector"] = json!({"kubernetes.io/hostname": node});
    }
    pod
}

/// A VM's unfinished launcher pod.
fn launcher_pod(store: &Store, namespace: &str, vm: &str) -> Option<Arc<Value>> {
    let (all, _) = store.list(&pods(), Some(namespace), None, None);
    all.into_iter().find(|p| Pod(p).vmi() == Some(vm) && !Pod(p).is_finished())
}

/// A node dies: its kubelet stops (it acts no more on the node's pods: [`DOWN_ANNOTATION`]), the
/// VMs on it stop with it, and the node lifecycle controller marks it unreachable
/// (`pkg/controller/nodelifecycle/node_lifecycle_controller.go`: `Ready` `Unknown` after
/// `nodeMonitorGracePeriod`, then the `node.kubernetes.io/unreachable` `NoSchedule` and `NoExecute`
/// taints; here at once). KubeVirt fails a dead node's VMIs only once their pods are gone
/// (`pkg/virt-controller/watch/node/node.go`, `checkVirtLauncherPodsAndUpdateVMIStatus`), which
/// without a kubelet takes a force deletion: the simulator fails them at once (reason
/// `NodeUnresponsive`), so that the report counts them as what they are.
fn node_down(store: &Store, node: &str) -> Result<(), ApiError> {
    let nodes = nodes();
    let current = store.get(&nodes, "", node)?;
    let mut conditions = crate::actors::conditions_without(&current, "Ready");
    conditions.push(json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                           "message": "Kubelet stopped posting node status.",
                           "lastTransitionTime": store.clock().timestamp()}));
    let mut taints = current.pointer("/spec/taints").and_then(|t| t.as_array()).cloned().unwrap_or_default();
    for effect in ["NoSchedule", "NoExecute"] {
        taints.push(json!({"key": "node.kubernetes.io/unreachable", "effect": effect,
                           "timeAdded": store.clock().timestamp()}));
    }
    let patch = json!({"metadata": {"annotations": {DOWN_ANNOTATION: "true"}},
                       "spec": {"taints": taints}, "status": {"conditions": conditions}});
    store.patch(&nodes, "", node, &Patch::Merge(patch), false)?;
    let (all, _) = store.list(&vmis(), None, None, None);
    for vmi in all.iter().map(|v| Vmi(v)).filter(|v| v.node_name() == Some(node) && !v.is_final()) {
        let patch = Patch::Merge(json!({"status": {"phase": "Failed", "reason": "NodeUnresponsive"}}));
        store.patch(&vmis(), vmi.meta().namespace(), vmi.meta().name(), &patch, false)?;
    }
    Ok(())
}
