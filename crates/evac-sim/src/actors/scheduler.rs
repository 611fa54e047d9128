//! Kubernetes' scheduler (kube-scheduler), as far as disruptions go: it binds pending pods to
//! nodes, and preempts lower-priority pods to make room for a pod that fits nowhere.
//!
//! - Pending pods (no `spec.nodeName`, not deleted, not finished) are taken highest
//!   `spec.priority` first, then oldest, as the scheduling queue orders them.
//! - A node fits a pod if its labels meet the pod's `nodeSelector` and the required terms of its
//!   node affinity (`NodeAffinity` filter, `evac_core::model::NodeSelection`), it is not cordoned
//!   (`spec.unschedulable`, unless the pod tolerates the `node.kubernetes.io/unschedulable`
//!   taint), the pod tolerates its `NoSchedule` and `NoExecute` taints, and it has the pod's
//!   memory and CPU free (`NodeResourcesFit`): `status.allocatable` (else `status.capacity`;
//!   neither: unlimited) minus the requests of the unfinished pods on it. Terminating pods count
//!   until their kubelet removes them. The pod is bound to the fitting node
//!   with the most free memory (ties: the first by name), or to its nominated node if that fits.
//! - A pod that fits nowhere, unless its `spec.preemptionPolicy` is `Never`, preempts: on each node
//!   that would fit without its pods of lower priority (not already terminating), the victims are
//!   what is left after reprieving those pods most important first (highest priority, then
//!   smallest), as long as the pod still fits: the fewest, lowest-priority, largest pods needed.
//!   The node chosen is the one whose highest victim priority is lowest, then with the fewest
//!   victims, then the first by name. The victims get `DisruptionTarget` (reason
//!   `PreemptionByScheduler`) and are deleted with their own grace period; the preemptor gets
//!   `status.nominatedNodeName`. While lower-priority pods on its nominated node are terminating,
//!   it waits instead of preempting again; the room it waits for is kept from lower-priority pods.
//!
//! Left out: pod disruption budgets (which the scheduler only prefers not to violate), preferred
//! affinity, CPU in preemption (victims are chosen by memory), other resources, and the later
//! tie-breaks of node choice (sum of priorities, start times).

use std::collections::HashMap;
use std::time::Duration;

use std::borrow::Cow;

use evac_core::model::{NodeSelection, Str};
use serde_json::json;

use super::with_disruption_target;
use crate::kinds::{nodes, pods};
use crate::objects::{Node, Pod, Taint};
use crate::store::{Patch, Store};
use crate::ApiError;
use anti_affinity::{repelled_nodes, LabelIndex};

/// The `DisruptionTarget` reason the scheduler sets on the pods it preempts: Kubernetes'
/// `PreemptionByScheduler`.
pub const REASON: &str = "PreemptionByScheduler";
const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// kube-scheduler as an actor: binds pending pods, and preempts for those that fit nowhere.
#[derive(Debug, Default, Clone)]
pub struct Scheduler;

/// A pod holding memory on a node.
struct Placed<'a> {
    pod: Pod<'a>,
    priority: i64,
    memory: f64,
    terminating: bool,
}

/// A node as this reconcile sees it: `free` (memory) and `cpu` go down as pods are bound or
/// nominated to it.
struct NodeState<'a> {
    node: Node<'a>,
    name: &'a str,
    free: f64,
    cpu: f64,
    pods: Vec<Placed<'a>>,
}

impl Scheduler {
    /// Binds the pending pods that fit, and preempts for those that do not. It only reacts to
    /// changes of the cluster, so it never asks to be woken.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        // It runs at every round of the driver: the unbound pods come from the store's node index
        // (`spec.nodeName=`), and only when one is pending does it read the rest.
        let unbound = evac_cluster::FieldSelector::parse("spec.nodeName=").map_err(ApiError::bad_request)?;
        let (unbound, _) = store.list(&pods(), None, None, Some(&unbound));
        let mut pending: Vec<Pod> = unbound.iter().map(|p| Pod(p)).filter(|p| is_pending(*p)).collect();
        if pending.is_empty() {
            return Ok(None);
        }
        let (all_pods, _) = store.list(&pods(), None, None, None);
        pending.sort_by(|a, b| {
            b.priority()
                .cmp(&a.priority())
                .then_with(|| a.meta().creation_timestamp().cmp(&b.meta().creation_timestamp()))
                .then_with(|| a.meta().name().cmp(b.meta().name()))
        });

        let (node_list, _) = store.list(&nodes(), None, None, None);
        let mut nodes: Vec<NodeState> = node_list
            .iter()
            .map(|node| {
                let node = Node(node);
                let cpu = node.allocatable_cpu().unwrap_or(f64::INFINITY);
                NodeState { node, name: node.name(), free: allocatable(node), cpu, pods: Vec::new() }
            })
            .collect();
        let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name, i)).collect();
        let mut labels = LabelIndex::for_pending(&pending);
        for pod in all_pods.iter().map(|p| Pod(p)) {
            let Some(on) = pod.node_name() else { continue };
            if pod.is_finished() {
                continue;
            }
            if let Some(&i) = index.get(on) {
                labels.add(i, nodes[i].pods.len(), pod);
                let memory = pod.container_memory_requests();
                nodes[i].free -= memory;
                nodes[i].cpu -= pod.container_cpu_requests();
                nodes[i].pods.push(Placed {
                    pod,
                    priority: pod.priority(),
                    memory,
                    terminating: pod.is_terminating(),
                });
            }
        }

        for pod in pending {
            schedule(store, pod, &mut nodes, &index, &mut labels)?;
        }
        Ok(None)
    }
}

impl crate::Actor for Scheduler {
    fn name(&self) -> &'static str {
        "scheduler"
    }

    fn watches(&self) -> Option<Vec<crate::store::Kind>> {
        // A VMI's memory, which it reads too, does not change while it runs.
        crate::driver::kinds(&[("v1", "Node"), ("v1", "Pod")])
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        Scheduler::reconcile(self, store)
    }
}

/// One scheduling cycle for one pod: bind, else preempt, else wait.
fn schedule<'a>(
    store: &Store,
    pod: Pod<'a>,
    nodes: &mut [NodeState<'a>],
    index: &HashMap<&str, usize>,
    labels: &mut LabelIndex<'a>,
) -> Result<(), ApiError> {
    // NodeResourcesFit: what pods request, not what they use.
    let memory = pod.container_memory_requests();
    let cpu = pod.container_cpu_requests();
    let nominated = pod.nominated_node_name().and_then(|n| index.get(n)).copied();
    // The nominated node first, as the scheduler does: the room made there is this pod's.
    let repelled = repelled_nodes(pod, nodes, labels);
    let admitted = admitting(pod, nodes);
    let fits =
        |i: usize| admitted[i] && !repelled.contains(&i) && nodes[i].free >= memory && nodes[i].cpu >= cpu;
    let target = nominated.filter(|&i| fits(i)).or_else(|| {
        (0..nodes.len())
            .filter(|&i| fits(i))
            .max_by(|&a, &b| nodes[a].free.total_cmp(&nodes[b].free).then(nodes[b].name.cmp(nodes[a].name)))
    });
    if let Some(i) = target {
        let patch = json!({"spec": {"nodeName": nodes[i].name}, "status": {"phase": "Running"}});
        store.patch(&pods(), pod.meta().namespace(), pod.meta().name(), &Patch::Merge(patch), false)?;
        nodes[i].free -= memory;
        nodes[i].cpu -= cpu;
        labels.add(i, nodes[i].pods.len(), pod);
        nodes[i].pods.push(Placed { pod, priority: pod.priority(), memory, terminating: false });
        return Ok(());
    }

    let priority = pod.priority();
    let waiting = nominated
        .is_some_and(|i| admitted[i] && nodes[i].pods.iter().any(|p| p.terminating && p.priority < priority));
    let node = if pod.preemption_policy() == Some("Never") || waiting {
        nominated
    } else {
        let candidate = best_candidate(priority, memory, nodes, &repelled, &admitted);
        if let Some((i, victims)) = &candidate {
            preempt(store, pod, &mut nodes[*i], victims)?;
        }
        let chosen = candidate.map(|(i, _)| i);
        // A pod that preemption cannot help loses its nomination, as in Kubernetes.
        let nominate = chosen.map(|i| nodes[i].name);
        if nominate != pod.nominated_node_name() {
            let patch = Patch::Merge(json!({"status": {"nominatedNodeName": nominate}}));
            store.patch(&pods(), pod.meta().namespace(), pod.meta().name(), &patch, false)?;
        }
        chosen
    };
    // Keep the room from the pods scheduled after this one (of lower or equal priority), as the
    // scheduler counts nominated pods on their nodes.
    if let Some(i) = node {
        nodes[i].free -= memory;
        nodes[i].cpu -= cpu;
    }
    // Unscheduled this cycle: the condition that tells waiters (KubeVirt's migration controller
    // times its target pods out on it) why, set once.
    if pod.condition("PodScheduled").is_none_or(|c| c.reason() != Some("Unschedulable")) {
        let message = format!("0/{} nodes are available", nodes.len());
        let condition = json!({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                               "message": message, "lastTransitionTime": store.clock().timestamp()});
        let mut conditions = super::conditions_without(pod.0, "PodScheduled");
        conditions.push(condition);
        let patch = Patch::Merge(json!({"status": {"conditions": conditions}}));
        store.patch(&pods(), pod.meta().namespace(), pod.meta().name(), &patch, false)?;
    }
    Ok(())
}

/// The node to preempt on and the victims there (indexes into its pods), if preemption helps.
fn best_candidate(
    priority: i64,
    memory: f64,
    nodes: &[NodeState],
    repelled: &std::collections::HashSet<usize>,
    admitted: &[bool],
) -> Option<(usize, Vec<usize>)> {
    nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| !repelled.contains(i) && admitted[*i])
        .filter_map(|(i, node)| Some((i, victims_on(node, priority, memory)?)))
        .min_by(|(a, va), (b, vb)| {
            let highest = |n: usize, v: &[usize]| v.iter().map(|&p| nodes[n].pods[p].priority).max();
            highest(*a, va)
                .cmp(&highest(*b, vb))
                .then(va.len().cmp(&vb.len()))
                .then(nodes[*a].name.cmp(nodes[*b].name))
        })
}

/// The fewest pods of lower priority to remove from the node for the pod to fit, if that can
/// make it fit: all of them are removed, then given back most important first while it still
/// fits (Kubernetes' reprieve), so the victims are the lowest-priority, largest pods.
/// The node must admit the pod ([`admitting`]).
fn victims_on(node: &NodeState, priority: i64, memory: f64) -> Option<Vec<usize>> {
    let mut lower: Vec<usize> = (0..node.pods.len())
        .filter(|&i| !node.pods[i].terminating && node.pods[i].priority < priority)
        .collect();
    let mut free = node.free + lower.iter().map(|&i| node.pods[i].memory).sum::<f64>();
    if lower.is_empty() || free < memory {
        return None;
    }
    lower.sort_by(|&a, &b| {
        let (a, b) = (&node.pods[a], &node.pods[b]);
        b.priority
            .cmp(&a.priority)
            .then(a.memory.total_cmp(&b.memory))
            .then_with(|| a.pod.meta().name().cmp(b.pod.meta().name()))
    });
    let mut victims = Vec::new();
    for i in lower {
        if free - node.pods[i].memory >= memory {
            free -= node.pods[i].memory;
        } else {
            victims.push(i);
        }
    }
    Some(victims)
}

/// Marks each victim as a disruption target and deletes it with its own grace period; it keeps
/// its memory until its kubelet removes it.
fn preempt(
    store: &Store,
    preemptor: Pod<'_>,
    node: &mut NodeState,
    victims: &[usize],
) -> Result<(), ApiError> {
    let scheduler = preemptor.scheduler_name().unwrap_or(DEFAULT_SCHEDULER);
    // The wording of Kubernetes' preemption (pkg/scheduler/framework/preemption).
    let message = format!("{scheduler}: preempting to accommodate a higher priority pod");
    let now = store.clock().timestamp();
    for &i in victims {
        let victim = node.pods[i].pod;
        let (namespace, name) = (victim.meta().namespace(), victim.meta().name());
        let conditions = with_disruption_target(victim.0, REASON, &message, &now);
        store.patch(
            &pods(),
            namespace,
            name,
            &Patch::Merge(json!({"status": {"conditions": conditions}})),
            false,
        )?;
        store.delete_gracefully(&pods(), namespace, name, None, false)?;
        node.pods[i].terminating = true;
    }
    Ok(())
}

fn is_pending(pod: Pod<'_>) -> bool {
    pod.node_name().is_none() && !pod.is_terminating() && !pod.is_finished()
}

/// The memory a node offers pods: allocatable, else capacity, else no limit.
fn allocatable(node: Node<'_>) -> f64 {
    node.allocatable_memory().or_else(|| node.capacity_memory()).unwrap_or(f64::INFINITY)
}

/// For each node, whether it takes the pod, resources aside ([`admits`]); the pod's node
/// selection is read once. A pod whose selection does not decode is taken nowhere.
fn admitting(pod: Pod<'_>, nodes: &[NodeState]) -> Vec<bool> {
    let admitted: Vec<bool> =
        pod.node_selection(|selection| nodes.iter().map(|n| admits(n.node, pod, selection)).collect());
    if admitted.is_empty() {
        vec![false; nodes.len()]
    } else {
        admitted
    }
}

/// Whether the node takes the pod, resources aside: its labels satisfy the pod's `nodeSelector`
/// and required node affinity, it is not cordoned, and it has no taint the pod does not tolerate.
/// (`tolerationSeconds` do not matter for scheduling.)
fn admits(node: Node<'_>, pod: Pod<'_>, selection: &NodeSelection<'_>) -> bool {
    if !selection.admits(node.name(), |key| node.meta().label(key).map(|l| Str(Cow::Borrowed(l)))) {
        return false;
    }
    let cordon = json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"});
    if node.unschedulable() && !pod.tolerates(Taint(&cordon)) {
        return false;
    }
    node.taints()
        .filter(|t| matches!(t.effect(), "NoSchedule" | "NoExecute"))
        .all(|taint| pod.tolerates(taint))
}

mod anti_affinity;
#[cfg(test)]
mod tests;
