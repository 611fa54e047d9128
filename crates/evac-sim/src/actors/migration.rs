//! KubeVirt's migration controller, as far as disruptions go: a `VirtualMachineInstanceMigration`
//! waits within the parallel limits (`parallelMigrationsPerCluster` 5,
//! `parallelOutboundMigrationsPerNode` 2), gets a target node, and takes a time that grows with
//! the VM's memory and the rate at which it dirties pages. When the dirty rate leaves too little
//! bandwidth, it fails at KubeVirt's completion timeout (150 s per GiB). On success the VMI runs on
//! the target, in a new launcher pod, and its `evacuationNodeName` is cleared.
//!
//! The VM's dirty rate comes from the annotation [`DIRTY_RATE_ANNOTATION`] (bytes per second, as
//! a quantity); the simulator keeps its own bookkeeping of a running migration in annotations of
//! the migration object, so the store stays the only state.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use evac_core::model::Migration as MigrationModel;
use serde_json::{json, Value};

use super::quantity;
use crate::kinds::{migrations, nodes, pods, vmis};
use crate::objects::{Migration, Node, Pod, Vmi};
use crate::store::{Patch, Store};
use crate::ApiError;

/// How fast the VM writes memory, e.g. `100Mi` (per second).
pub const DIRTY_RATE_ANNOTATION: &str = "sim.evac.io/dirty-rate";
/// When a running migration ends, in milliseconds of simulated time.
const ENDS_AT_ANNOTATION: &str = "sim.evac.io/ends-at-ms";
/// How a running migration ends: `Succeeded` or `Failed`.
const OUTCOME_ANNOTATION: &str = "sim.evac.io/outcome";

/// KubeVirt's migration settings that shape disruptions.
#[derive(Debug, Clone)]
pub struct MigrationController {
    /// `parallelMigrationsPerCluster`: migrations running at once in the cluster (KubeVirt's default: 5).
    pub parallel_per_cluster: usize,
    /// `parallelOutboundMigrationsPerNode`: migrations running at once from one node (KubeVirt's default: 2).
    pub parallel_outbound_per_node: usize,
    /// `bandwidthPerMigration`, bytes per second.
    pub bandwidth: f64,
    /// `completionTimeoutPerGiB`.
    pub completion_timeout_per_gib: Duration,
}

impl Default for MigrationController {
    fn default() -> Self {
        Self {
            parallel_per_cluster: 5,
            parallel_outbound_per_node: 2,
            bandwidth: 64.0 * 1024.0 * 1024.0,
            completion_timeout_per_gib: Duration::from_secs(150),
        }
    }
}

impl MigrationController {
    /// Ends the migrations whose time has come, then starts waiting ones within the limits.
    /// Returns when the next running migration ends, if one runs.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let now = store.clock().elapsed();
        let mut next: Option<Duration> = None;
        let mut wake = |at: Duration| next = Some(next.map_or(at, |n: Duration| n.min(at)));
        // One read: end the migrations whose time has come, count the others, collect the waiting.
        let (all, _) = store.list(&migrations(), None, None, None);
        let mut running_total = 0;
        let mut outbound: HashMap<String, usize> = Default::default();
        let mut waiting: Vec<&Value> = Vec::new();
        for migration in &all {
            let view = Migration(migration);
            match view.phase() {
                Some("Running") => {
                    let ends = view
                        .meta()
                        .annotation(ENDS_AT_ANNOTATION)
                        .and_then(|e| e.parse().ok())
                        .map(Duration::from_millis);
                    if ends.is_some_and(|ends| ends <= now) {
                        self.finish(store, migration)?;
                        continue;
                    }
                    if let Some(ends) = ends {
                        wake(ends);
                    }
                    running_total += 1;
                    let source = view.source_node().unwrap_or_default().to_owned();
                    *outbound.entry(source).or_default() += 1;
                }
                None | Some("Pending") => waiting.push(migration),
                _ => {}
            }
        }
        // KubeVirt's priority queue (VEP 62): the highest `spec.priority` first, then the oldest.
        waiting.sort_by_key(|m| {
            let meta = Migration(m).meta();
            (std::cmp::Reverse(queue_priority(m)), meta.creation_timestamp(), meta.resource_version())
        });
        // The candidate targets and their load, read once and only when a migration waits.
        let mut targets: Option<Targets> = None;
        for migration in waiting {
            if running_total >= self.parallel_per_cluster {
                break;
            }
            if let Some(until) = backoff_until(store, migration, &all) {
                // Held Pending after failed evacuations (`handleMigrationBackoff`).
                wake(until);
                continue;
            }
            let namespace = Migration(migration).meta().namespace();
            let Ok(vmi) = store.get(&vmis(), namespace, Migration(migration).vmi_name()) else {
                self.set_phase(store, migration, "Failed", json!({"failed": true}))?;
                continue;
            };
            let source = Vmi(&vmi).node_name().unwrap_or_default().to_owned();
            if outbound.get(&source).copied().unwrap_or(0) >= self.parallel_outbound_per_node {
                continue;
            }
            let targets = targets.get_or_insert_with(|| Targets::read(store));
            let Some(target) = targets.pick(&source) else {
                continue; // Stays Pending until a node can take the VM.
            };
            let (duration, outcome) = self.duration(&vmi);
            let ends = now + duration;
            let patch = Patch::Merge(json!({
                "metadata": {"annotations": {
                    ENDS_AT_ANNOTATION: ends.as_millis().to_string(),
                    OUTCOME_ANNOTATION: outcome,
                }},
                "status": {"phase": "Running", "migrationState": {
                    "sourceNode": source, "targetNode": target, "startTimestamp": store.clock().timestamp(),
                }},
            }));
            store.patch(&migrations(), namespace, Migration(migration).meta().name(), &patch, false)?;
            running_total += 1;
            *outbound.entry(source).or_default() += 1;
            wake(ends);
        }
        Ok(next)
    }

    /// How long a VM's migration takes, and whether it converges: memory over the bandwidth the
    /// dirty rate leaves; past the completion timeout it fails (at the timeout).
    fn duration(&self, vmi: &Value) -> (Duration, &'static str) {
        let vmi = Vmi(vmi);
        let memory = vmi.memory().unwrap_or(1024.0 * 1024.0 * 1024.0);
        let dirty = vmi.meta().annotation(DIRTY_RATE_ANNOTATION).and_then(quantity::bytes).unwrap_or(0.0);
        let gib = memory / (1024.0 * 1024.0 * 1024.0);
        let timeout = self.completion_timeout_per_gib.mul_f64(gib.max(1.0 / 1024.0));
        let effective = self.bandwidth - dirty;
        if effective <= 0.0 {
            return (timeout, "Failed");
        }
        let needed = Duration::from_secs_f64(memory / effective);
        if needed > timeout {
            (timeout, "Failed")
        } else {
            (needed, "Succeeded")
        }
    }

    fn set_phase(&self, store: &Store, migration: &Value, phase: &str, state: Value) -> Result<(), ApiError> {
        let patch = Patch::Merge(json!({"status": {"phase": phase, "migrationState": state}}));
        let meta = Migration(migration).meta();
        store.patch(&migrations(), meta.namespace(), meta.name(), &patch, false)?;
        Ok(())
    }

    fn finish(&self, store: &Store, migration: &Value) -> Result<(), ApiError> {
        let view = Migration(migration);
        let namespace = view.meta().namespace();
        let vmi_name = view.vmi_name();
        let source = view.source_node().unwrap_or_default().to_owned();
        let target = view.target_node().unwrap_or_default().to_owned();
        let outcome = view.meta().annotation(OUTCOME_ANNOTATION).unwrap_or_default();
        let end = json!({"endTimestamp": store.clock().timestamp(), "completed": outcome == "Succeeded",
                         "failed": outcome != "Succeeded"});
        if outcome != "Succeeded" {
            return self.set_phase(store, migration, "Failed", end);
        }
        // The VM now runs on the target, in a new launcher pod; the source pod goes.
        let vmi_patch = Patch::Merge(json!({
            "metadata": {"labels": {super::NODE_NAME_LABEL: target},
                         "annotations": {evac_core::kubevirt::EVICTION_SOURCE_ANNOTATION: null}},
            "status": {
            "nodeName": target, "evacuationNodeName": null,
            "migrationState": {"sourceNode": source, "targetNode": target, "completed": true},
        }}));
        store.patch(&vmis(), namespace, vmi_name, &vmi_patch, false)?;
        let on_source = evac_cluster::FieldSelector::parse(&format!("spec.nodeName={source}"))
            .map_err(ApiError::bad_request)?;
        let (launchers, _) = store.list(&pods(), Some(namespace), None, Some(&on_source));
        for pod in launchers.iter().filter(|p| Pod(p).vmi() == Some(vmi_name)) {
            let mut replacement = (**pod).clone();
            if let Some(meta) = replacement["metadata"].as_object_mut() {
                for server_owned in [
                    "name",
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                ] {
                    meta.remove(server_owned);
                }
                // The target pod is new: none of the source pod's disruption carries over.
                if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                    for disruption in [
                        crate::store::TERMINATE_AT_ANNOTATION,
                        super::kubelet::KILL_AT_ANNOTATION,
                        evac_core::effect::EVICTION_IN_PROGRESS_ANNOTATION,
                    ] {
                        annotations.remove(disruption);
                    }
                }
                meta.insert("generateName".into(), json!(format!("virt-launcher-{vmi_name}-")));
            }
            replacement["spec"]["nodeName"] = json!(target);
            replacement["status"] = json!({"phase": "Running"});
            store.create(&pods(), namespace, replacement, false)?;
            store.delete(&pods(), namespace, Pod(pod).meta().name(), false)?;
        }
        self.set_phase(store, migration, "Succeeded", end)
    }
}

/// The queue priority of a migration's `spec.priority`
/// (`pkg/util/migrations/migrations.go`, `PriorityFromMigration`).
fn queue_priority(migration: &Value) -> u32 {
    match Migration(migration).priority() {
        Some("system-critical") => 100,
        Some("user-triggered") => 50,
        Some("system-maintenance") => 20,
        _ => 0,
    }
}

/// Until when (simulated time) KubeVirt holds a waiting evacuation migration after earlier ones of
/// its VMI failed; `None` when it may start now.
fn backoff_until(store: &Store, migration: &Value, all: &[Arc<Value>]) -> Option<Duration> {
    let (namespace, vmi) = (Migration(migration).meta().namespace(), Migration(migration).vmi_name());
    let of_vmi: Vec<&Value> = all
        .iter()
        .map(|m| &**m)
        .filter(|m| Migration(m).meta().namespace() == namespace && Migration(m).vmi_name() == vmi)
        .collect();
    // The core's models read annotations lazily from JSON text, so they decode from text.
    let texts: Vec<String> = of_vmi.iter().map(|m| m.to_string()).collect();
    let decoded: Vec<MigrationModel<'_>> =
        texts.iter().filter_map(|t| serde_json::from_str(t).ok()).collect();
    let this_text = migration.to_string();
    let this: MigrationModel<'_> = serde_json::from_str(&this_text).ok()?;
    let until = evac_core::evacuation::kubevirt_backoff_until(&this, &decoded)?;
    let start = store.clock().now() - chrono::Duration::from_std(store.clock().elapsed()).ok()?;
    let since_start = until - (start - chrono::DateTime::UNIX_EPOCH).as_seconds_f64();
    let until = Duration::from_secs_f64(since_start.max(0.0));
    (until > store.clock().elapsed()).then_some(until)
}

/// The nodes a VM can migrate to, with the number of VMIs each runs.
struct Targets {
    /// (VMIs on it, name) for each schedulable node without a NoSchedule/NoExecute taint.
    load: Vec<(usize, String)>,
}

impl Targets {
    fn read(store: &Store) -> Self {
        let (all_nodes, _) = store.list(&nodes(), None, None, None);
        let (all_vmis, _) = store.list(&vmis(), None, None, None);
        let mut per_node: HashMap<&str, usize> = HashMap::new();
        for vmi in &all_vmis {
            *per_node.entry(Vmi(vmi).node_name().unwrap_or_default()).or_default() += 1;
        }
        let load = all_nodes
            .iter()
            .map(|n| Node(n))
            .filter(|n| !n.unschedulable())
            .filter(|n| !n.taints().any(|t| matches!(t.effect(), "NoSchedule" | "NoExecute")))
            .map(|n| {
                let name = n.name();
                (per_node.get(name).copied().unwrap_or(0), name.to_owned())
            })
            .collect();
        Self { load }
    }

    /// The node, other than the source, running the fewest VMIs (then by name); it counts one
    /// more from now on.
    fn pick(&mut self, source: &str) -> Option<String> {
        let best = self.load.iter_mut().filter(|(_, name)| name != source).min()?;
        best.0 += 1;
        Some(best.1.clone())
    }
}

#[cfg(test)]
mod tests;
