//! Which changes call for which evaluation: the controller's bookkeeping, rebuilt from the
//! cluster after a restart. Routing reads a few fields of each changed object (through the core's
//! models) to know where to look; what to do there is the modules' decision.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use evac_core::kubevirt::{MIGRATION_KIND, NODE_KIND, POD_KIND, VMI_KIND};
use evac_core::model::{Migration, Node, NodeMetrics, Pod, VirtualMachineInstance, NODE_METRICS_KIND};
use serde_json::value::RawValue;

use evac_cluster::Change;

/// What a pass must evaluate.
#[derive(Default)]
pub(super) struct Work {
    /// disruption-cause requests of launcher pods newly disrupted (held, deleted, marked as
    /// disruption targets): each a VM whose time may be short, so they come first.
    pub pods: Vec<Box<RawValue>>,
    /// disruption-cause requests of changed nodes (node pressure, taints).
    pub node_changes: Vec<Box<RawValue>>,
    /// Nodes to evaluate evacuation on.
    pub nodes: Vec<String>,
    /// The evacuation request of each of those nodes.
    pub node_requests: BTreeMap<String, Box<RawValue>>,
    /// Evacuation migrations seen to end since the last pass, for the metrics.
    pub ended: Vec<EndedEvacuation>,
}

/// An evacuation migration seen running and then ended.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct EndedEvacuation {
    /// Its `evac.kubevirt.io/cause`; when it names none, the cause its VMI's mark had, else
    /// `unknown`.
    pub cause: String,
    /// `succeeded`, `failed`, or `cancelled` (deleted before it ended).
    pub outcome: &'static str,
    /// From its creation to its end, when both are dated.
    pub seconds: Option<f64>,
}

#[derive(Default)]
pub(super) struct Routing {
    /// Disrupted launcher pods already evaluated (by uid), with what was seen: a pod is evaluated
    /// again only when its disruption changes (it gets a condition, then a deletionTimestamp).
    evaluated: HashMap<String, String>,
    /// Marked VMIs (`namespace/name`) and the node they are marked for.
    marked: HashMap<String, String>,
    /// VMIs evac holds an evacuation request for, and the node: their node is evaluated again
    /// when a slot frees and at every resync, like a marked VMI's, until they are marked.
    requested: HashMap<String, String>,
    /// Nodes with KubeVirt's drain taint: their VMIs are evacuated without being marked.
    drain_tainted: HashSet<String>,
    /// Where each VMI (`namespace/name`) runs.
    vmi_nodes: HashMap<String, String>,
    /// Active evacuation migrations (`namespace/name`) and their source node.
    migrating: HashMap<String, String>,
    /// The latest state of every node.
    nodes: HashMap<String, Arc<[u8]>>,
    /// Each node's memory in use (bytes), as its NodeMetrics said when last acted on.
    usage: HashMap<String, f64>,
    dirty: BTreeSet<String>,
    pods: Vec<Box<RawValue>>,
    node_changes: Vec<Box<RawValue>>,
    /// A migration ended since the last pass: a parallel slot is free.
    slot_freed: bool,
    /// Evacuation migrations seen to end since the last pass.
    ended: Vec<EndedEvacuation>,
    /// The node and eviction source of each VMI's (`namespace/name`) last mark: the cause of a
    /// migration that ended before its cause was recorded on it (KubeVirt removes the source
    /// from the VMI when the migration succeeds).
    sources: HashMap<String, (String, Option<String>)>,
}

/// How far a node's memory working set must move for node pressure to be decided again: metrics
/// change with every scrape (every 15 s), a step matters.
const USAGE_STEP: f64 = 64.0 * 1024.0 * 1024.0;

/// Admission request uids, unique within the process.
// The kinds the controller routes, by the core's names.
const POD: &str = POD_KIND.1;
const NODE: &str = NODE_KIND.1;
const VMI: &str = VMI_KIND.1;
const MIGRATION: &str = MIGRATION_KIND.1;
/// Pods and nodes as an AdmissionRequest names them: (group, version, kind, resource).
const PODS: (&str, &str, &str, &str) = ("", POD_KIND.0, POD_KIND.1, "pods");
const NODES: (&str, &str, &str, &str) = ("", NODE_KIND.0, NODE_KIND.1, "nodes");

static NEXT_UID: AtomicU64 = AtomicU64::new(1);

impl Routing {
    pub(super) fn observe(&mut self, kind: &str, change: &Change) {
        let Ok(text) = std::str::from_utf8(&change.object) else { return };
        match kind {
            POD => self.observe_pod(text, change),
            NODE => self.observe_node(text, change),
            VMI => self.observe_vmi(text, change),
            MIGRATION => self.observe_migration(text, change),
            NODE_METRICS_KIND => self.observe_node_metrics(text),
            _ => {}
        }
    }

    fn observe_pod(&mut self, text: &str, change: &Change) {
        let Ok(pod) = serde_json::from_str::<Pod<'_>>(text) else { return };
        if !pod.is_virt_launcher() {
            return;
        }
        if !pod.spec.node_name.is_empty() {
            self.dirty.insert(pod.spec.node_name.to_string());
        }
        let uid = pod.metadata.uid.to_string();
        if change.deleted {
            self.evaluated.remove(&uid);
            return;
        }
        let reason = pod.disruption_reason();
        // A hold the kubelet's hook began on a pod not being deleted: the kubelet is stopping it
        // for node pressure, before anything else says so.
        let held = pod.metadata.annotation(evac_core::hold::HELD_SINCE_ANNOTATION).is_some();
        if !pod.is_terminating() && reason.is_none() && !held {
            return;
        }
        let seen = format!("{}|{}|{held}", pod.is_terminating(), reason.unwrap_or_default());
        if self.evaluated.get(&uid) != Some(&seen) {
            self.evaluated.insert(uid, seen);
            let (namespace, name) = (pod.metadata.namespace.as_str(), pod.metadata.name.as_str());
            self.pods.push(request(PODS, namespace, name, text));
        }
    }

    fn observe_node(&mut self, text: &str, change: &Change) {
        let Ok(node) = serde_json::from_str::<Node<'_>>(text) else { return };
        let name = node.metadata.name.to_string();
        if change.deleted {
            self.nodes.remove(&name);
            self.drain_tainted.remove(&name);
            return;
        }
        if node.is_drain_tainted() {
            self.drain_tainted.insert(name.clone());
        } else {
            self.drain_tainted.remove(&name);
        }
        // Node pressure is decided on every node change: the module knows the thresholds.
        self.node_changes.push(request(NODES, "", &name, text));
        self.nodes.insert(name.clone(), Arc::clone(&change.object));
        self.dirty.insert(name);
    }

    /// A node's memory in use changed: node pressure is decided again on the node (its latest
    /// state), and its evacuations (a node-pressure mark ends with the pressure). Polled metrics
    /// come again with every poll: only a changed figure counts.
    fn observe_node_metrics(&mut self, text: &str) {
        let Ok(metrics) = serde_json::from_str::<NodeMetrics<'_>>(text) else { return };
        let name = metrics.metadata.name.to_string();
        let Some(usage) = metrics.memory_working_set() else { return };
        // A working set moves a little with every scrape: only a move of a step counts.
        if self.usage.get(&name).is_some_and(|seen| (seen - usage).abs() < USAGE_STEP) {
            return;
        }
        self.usage.insert(name.clone(), usage);
        let Some(node) = self.nodes.get(&name) else { return };
        let Ok(node_text) = std::str::from_utf8(node) else { return };
        self.node_changes.push(request(NODES, "", &name, node_text));
        self.dirty.insert(name);
    }

    fn observe_vmi(&mut self, text: &str, change: &Change) {
        let Ok(vmi) = serde_json::from_str::<VirtualMachineInstance<'_>>(text) else { return };
        let key = format!("{}/{}", vmi.metadata.namespace, vmi.metadata.name);
        let marked_for = vmi.status.evacuation_node_name.as_str();
        if !change.deleted && !marked_for.is_empty() {
            self.dirty.insert(marked_for.to_owned());
            self.marked.insert(key.clone(), marked_for.to_owned());
        } else if let Some(was) = self.marked.remove(&key) {
            self.dirty.insert(was);
        }
        // The source of the mark, while marked (an API eviction's mark has none); kept once the
        // mark goes, as the migration may be seen to end after the VMI's update.
        let source = vmi.metadata.annotation(evac_core::effect::EVICTION_SOURCE_ANNOTATION);
        match (change.deleted, marked_for.is_empty()) {
            (true, _) => {
                self.sources.remove(&key);
            }
            (false, false) => {
                let source = source.map(|s| s.to_string());
                self.sources.insert(key.clone(), (marked_for.to_owned(), source));
            }
            // Unmarked on the node it was marked for: the mark was called off or cancelled, and
            // no migration of it ended.
            (false, true) => {
                if self
                    .sources
                    .get(&key)
                    .is_some_and(|(node, _)| node.as_str() == vmi.status.node_name.as_str())
                {
                    self.sources.remove(&key);
                }
            }
        }
        let requested_from = vmi.metadata.annotation(evac_core::effect::EVACUATION_REQUEST_ANNOTATION);
        match requested_from.filter(|node| !change.deleted && !node.is_empty()) {
            Some(node) => {
                self.dirty.insert(node.to_string());
                self.requested.insert(key.clone(), node.to_string());
            }
            None => {
                if let Some(was) = self.requested.remove(&key) {
                    self.dirty.insert(was);
                }
            }
        }
        if !vmi.status.node_name.is_empty() {
            self.dirty.insert(vmi.status.node_name.to_string());
        }
        if change.deleted || vmi.status.node_name.is_empty() {
            self.vmi_nodes.remove(&key);
        } else {
            self.vmi_nodes.insert(key, vmi.status.node_name.to_string());
        }
    }

    fn observe_migration(&mut self, text: &str, change: &Change) {
        let Ok(migration) = serde_json::from_str::<Migration<'_>>(text) else { return };
        let key = format!("{}/{}", migration.metadata.namespace, migration.metadata.name);
        let source = migration
            .evacuation_node()
            .map(|n| n.to_string())
            .unwrap_or_else(|| migration.status.migration_state.source_node.to_string());
        if !change.deleted && migration.is_active() {
            self.migrating.insert(key, source.clone());
        } else {
            let was_running = self.migrating.remove(&key).is_some();
            if was_running || !change.deleted {
                self.slot_freed = true;
            }
            // Counted once, when seen to end: one that had ended before the controller (re)started
            // is not counted again.
            if was_running {
                let unrecorded = self.unrecorded_cause(&migration);
                self.ended.extend(ended_evacuation(&migration, unrecorded, change.deleted));
            }
        }
        if !source.is_empty() {
            self.dirty.insert(source);
        }
    }

    /// The cause of an evacuation migration that ended without one recorded: from its VMI's
    /// last eviction source and its node, as the evacuation decision records it
    /// ([`evac_core::evacuation::cause`]). The source is used up: a later evacuation of the VMI
    /// brings its own.
    fn unrecorded_cause(&mut self, migration: &Migration<'_>) -> Option<String> {
        let node_name = migration.evacuation_node()?;
        let vmi = format!("{}/{}", migration.metadata.namespace, migration.spec.vmi_name);
        let mark = self.sources.remove(&vmi);
        migration.metadata.annotation(evac_core::effect::CAUSE_ANNOTATION).is_none().then_some(())?;
        // Only a mark for the node the migration leaves says why; without one, `unknown`.
        let (_, source) = mark.filter(|(node, _)| *node == *node_name)?;
        let source = source.and_then(|s| evac_core::effect::EvacuationSource::parse(&s));
        let text = std::str::from_utf8(self.nodes.get(&*node_name)?).ok()?;
        let node = serde_json::from_str::<evac_core::model::Node<'_>>(text).ok()?;
        Some(evac_core::evacuation::cause(source, &node).as_str().to_owned())
    }

    /// Nodes where evacuations are under way or due: marked and requested VMIs, running
    /// migrations, and drain-tainted nodes that still run VMIs. When there are none, the
    /// controller can rest.
    fn pending(&self) -> BTreeSet<&String> {
        let drained = self.vmi_nodes.values().filter(|node| self.drain_tainted.contains(*node));
        self.marked
            .values()
            .chain(self.requested.values())
            .chain(self.migrating.values())
            .chain(drained)
            .collect()
    }

    pub(super) fn pending_nodes(&self) -> usize {
        self.pending().len()
    }

    /// VMIs whose evacuation is asked for or marked and not finished (a marked VMI stays marked
    /// while its migration runs), and the evacuation migrations running.
    pub(super) fn evacuations(&self) -> (usize, usize) {
        let pending: HashSet<&String> = self.marked.keys().chain(self.requested.keys()).collect();
        (pending.len(), self.migrating.len())
    }

    /// The work gathered since the last pass. With `resync`, or when a migration ended, every
    /// node with evacuations pending is evaluated again.
    /// Puts back what a pass left for the next one (its time was up): ahead of what came since,
    /// in the order it had.
    pub(super) fn defer(
        &mut self,
        pods: Vec<Box<RawValue>>,
        node_changes: Vec<Box<RawValue>>,
        nodes: Vec<String>,
    ) {
        self.pods.splice(0..0, pods);
        self.node_changes.splice(0..0, node_changes);
        self.dirty.extend(nodes);
    }

    pub(super) fn take_work(&mut self, resync: bool) -> Work {
        let mut nodes = std::mem::take(&mut self.dirty);
        if resync || std::mem::take(&mut self.slot_freed) {
            nodes.extend(self.pending().into_iter().cloned());
        }
        let node_requests = nodes
            .iter()
            .filter_map(|name| {
                let json = self.nodes.get(name)?;
                let text = std::str::from_utf8(json).ok()?;
                Some((name.clone(), request(NODES, "", name, text)))
            })
            .collect();
        Work {
            pods: std::mem::take(&mut self.pods),
            node_changes: std::mem::take(&mut self.node_changes),
            nodes: nodes.into_iter().collect(),
            node_requests,
            ended: std::mem::take(&mut self.ended),
        }
    }
}

/// An evacuation migration that ended, for the metrics; `None` for another migration, or one that
/// has not ended.
/// `unrecorded`: the cause to count when none is recorded on the migration. A migration deleted
/// before it ended (`deleted`, or being deleted: KubeVirt fails it on its way out) was cancelled.
fn ended_evacuation(
    migration: &Migration<'_>,
    unrecorded: Option<String>,
    deleted: bool,
) -> Option<EndedEvacuation> {
    migration.evacuation_node()?;
    let cancelled = deleted || migration.metadata.deletion_timestamp.is_some();
    let outcome = match migration.status.phase.as_str() {
        "Succeeded" => "succeeded",
        _ if cancelled => "cancelled",
        "Failed" => "failed",
        _ => return None,
    };
    let cause = match migration.metadata.annotation(evac_core::effect::CAUSE_ANNOTATION) {
        Some(cause) => cause.to_string(),
        None => unrecorded.unwrap_or_else(|| "unknown".to_owned()),
    };
    let at = |time: Option<&str>| time.and_then(evac_core::model::time::unix_seconds);
    let created = at(migration.metadata.creation_timestamp.as_deref());
    // A migration that failed before it started has no endTimestamp: its Failed transition says.
    let seconds = created.zip(migration.ended_at()).map(|(created, ended)| (ended - created).max(0.0));
    Some(EndedEvacuation { cause, outcome, seconds })
}

/// A pod's uid, from its JSON.
pub(super) fn uid(object: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Meta {
        uid: String,
    }
    #[derive(serde::Deserialize)]
    struct Object {
        metadata: Meta,
    }
    serde_json::from_slice::<Object>(object).ok().map(|o| o.metadata.uid)
}

/// The uid of an AdmissionRequest the routing made (`evac-control-<n>`), which names it in logs.
pub(super) fn request_uid(request: &RawValue) -> String {
    #[derive(serde::Deserialize)]
    struct Head {
        uid: String,
    }
    serde_json::from_str::<Head>(request.get()).map(|head| head.uid).unwrap_or_default()
}

/// An `UPDATE` AdmissionRequest for an object, as the API server would send for its change.
fn request(
    (group, version, kind, resource): (&str, &str, &str, &str),
    namespace: &str,
    name: &str,
    object: &str,
) -> Box<RawValue> {
    let uid = format!("evac-control-{}", NEXT_UID.fetch_add(1, Ordering::Relaxed));
    let head = serde_json::json!({
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "name": name,
        "namespace": namespace,
        "operation": "UPDATE",
        "userInfo": {"username": "system:serviceaccount:evac:evac-control"},
        "dryRun": false,
    });
    // The object is spliced in as it came, not re-encoded.
    let mut text = head.to_string();
    text.pop();
    text.push_str(r#","object":"#);
    text.push_str(object);
    text.push('}');
    RawValue::from_string(text).expect("an object spliced into a JSON object is JSON")
}

#[cfg(test)]
mod tests;
