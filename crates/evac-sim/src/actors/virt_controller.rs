//! KubeVirt's virt-controller, as far as disruptions go, for clusters that run KubeVirt alone
//! (the baseline evac is compared with):
//!
//! - the **evacuation controller** creates a `VirtualMachineInstanceMigration` (generateName
//!   `kubevirt-evacuation-`, annotation `kubevirt.io/evacuationMigration: <node>`) for each VMI
//!   whose `status.evacuationNodeName` is the node it runs on, within the parallel limits, with
//!   KubeVirt's back-off after failed evacuation migrations (20 s, doubling, at most 5 min);
//! - the **VM controller** starts a stopped VM again when its run strategy is `Always` (a new
//!   launcher pod for the scheduler to place), and the **VMI controller** marks it running once
//!   its pod is bound.
//!
//! A VM's run strategy comes from the VMI annotation [`RUN_STRATEGY_ANNOTATION`] (the simulator has
//! no VirtualMachine objects); [`RESTARTS_ANNOTATION`] counts the restarts.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};

use super::migration::migrations;
use super::{annotation, text};
use crate::store::{Kind, Patch, Store};
use crate::ApiError;

/// The VMI annotation that stands for its VM's `spec.runStrategy` (the simulator has no
/// VirtualMachines): `Always` restarts a stopped VM.
pub const RUN_STRATEGY_ANNOTATION: &str = "sim.evac.io/run-strategy";
/// The VMI annotation that counts how often the VM controller restarted the VM.
pub const RESTARTS_ANNOTATION: &str = "sim.evac.io/restarts";
/// The annotation KubeVirt puts on the migrations its evacuation controller creates.
pub const EVACUATION_MIGRATION_ANNOTATION: &str = "kubevirt.io/evacuationMigration";

const BACKOFF_START: Duration = Duration::from_secs(20);
const BACKOFF_MAX: Duration = Duration::from_secs(300);

fn vmis() -> Kind {
    Kind::new("kubevirt.io/v1", "VirtualMachineInstance")
}

fn pods() -> Kind {
    Kind::new("v1", "Pod")
}

/// KubeVirt's virt-controller as an actor: its evacuation controller, and VM restarts.
#[derive(Debug, Clone)]
pub struct VirtController {
    /// `parallelMigrationsPerCluster`: no evacuation migration is created while this many are active.
    pub parallel_per_cluster: usize,
    /// `parallelOutboundMigrationsPerNode`: no evacuation migration is created from a node while this
    /// many are active from it.
    pub parallel_outbound_per_node: usize,
    /// Whether the evacuation controller runs: off when evac's controller evacuates instead.
    pub evacuation: bool,
}

impl Default for VirtController {
    fn default() -> Self {
        Self { parallel_per_cluster: 5, parallel_outbound_per_node: 2, evacuation: true }
    }
}

/// What the migrations say about one VMI.
#[derive(Default)]
struct MigrationHistory {
    active: bool,
    failures: u32,
    last_failure: Option<Duration>,
}

impl VirtController {
    /// Creates the evacuation migrations that are due (when [`VirtController::evacuation`] is on)
    /// and restarts stopped `Always` VMs; returns when the next back-off ends.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let (all_vmis, _) = store.list(&vmis(), None, None, None);
        let mut next = None;
        if self.evacuation {
            next = self.evacuate(store, &all_vmis)?;
        }
        self.restart_vms(store, &all_vmis)?;
        Ok(next)
    }

    fn evacuate(
        &self,
        store: &Store,
        all_vmis: &[std::sync::Arc<Value>],
    ) -> Result<Option<Duration>, ApiError> {
        let marked: Vec<&Value> = all_vmis
            .iter()
            .map(|v| &**v)
            .filter(|v| {
                let node = text(v, "/status/evacuationNodeName");
                !node.is_empty()
                    && node == text(v, "/status/nodeName")
                    && text(v, "/status/phase") == "Running"
            })
            .collect();
        if marked.is_empty() {
            return Ok(None);
        }
        let now = store.clock().elapsed();
        let (all_migrations, _) = store.list(&migrations(), None, None, None);
        let mut history: HashMap<(&str, &str), MigrationHistory> = HashMap::new();
        let mut active_total = 0;
        let mut active_by_node: HashMap<String, usize> = HashMap::new();
        for migration in &all_migrations {
            let key = (text(migration, "/metadata/namespace"), text(migration, "/spec/vmiName"));
            let entry = history.entry(key).or_default();
            match text(migration, "/status/phase") {
                "Succeeded" => {}
                "Failed" => {
                    entry.failures += 1;
                    let ended =
                        migration.pointer("/status/migrationState/endTimestamp").and_then(Value::as_str);
                    let ended = ended.and_then(|t| since_start(store, t)).unwrap_or(now);
                    entry.last_failure = Some(entry.last_failure.map_or(ended, |l: Duration| l.max(ended)));
                }
                _ => {
                    entry.active = true;
                    active_total += 1;
                    let node = annotation(migration, EVACUATION_MIGRATION_ANNOTATION);
                    *active_by_node.entry(node.to_owned()).or_default() += 1;
                }
            }
        }
        let mut next: Option<Duration> = None;
        for vmi in marked {
            if active_total >= self.parallel_per_cluster {
                break;
            }
            let namespace = text(vmi, "/metadata/namespace");
            let node = text(vmi, "/status/nodeName");
            let past = history.get(&(namespace, text(vmi, "/metadata/name")));
            if past.is_some_and(|h| h.active) {
                continue;
            }
            if let Some(MigrationHistory { failures, last_failure: Some(at), .. }) = past {
                let backoff = BACKOFF_START.saturating_mul(1 << (failures - 1).min(10)).min(BACKOFF_MAX);
                if now < *at + backoff {
                    next = Some(next.map_or(*at + backoff, |n: Duration| n.min(*at + backoff)));
                    continue;
                }
            }
            if active_by_node.get(node).copied().unwrap_or(0) >= self.parallel_outbound_per_node {
                continue;
            }
            let migration = json!({
                "metadata": {"generateName": "kubevirt-evacuation-",
                             "annotations": {EVACUATION_MIGRATION_ANNOTATION: node}},
                "spec": {"vmiName": text(vmi, "/metadata/name")},
            });
            store.create(&migrations(), namespace, migration, false)?;
            active_total += 1;
            *active_by_node.entry(node.to_owned()).or_default() += 1;
        }
        Ok(next)
    }

    /// Starts stopped `Always` VMs again, and marks restarted ones running once their pod is bound.
    fn restart_vms(&self, store: &Store, all_vmis: &[std::sync::Arc<Value>]) -> Result<(), ApiError> {
        for vmi in all_vmis {
            let phase = text(vmi, "/status/phase");
            let namespace = text(vmi, "/metadata/namespace");
            let name = text(vmi, "/metadata/name");
            if matches!(phase, "Failed" | "Succeeded") && annotation(vmi, RUN_STRATEGY_ANNOTATION) == "Always"
            {
                let restarts: u64 = annotation(vmi, RESTARTS_ANNOTATION).parse().unwrap_or(0);
                let patch = Patch::Merge(json!({
                    "metadata": {"annotations": {RESTARTS_ANNOTATION: (restarts + 1).to_string(),
                                                 evac_core::kubevirt::EVICTION_SOURCE_ANNOTATION: null},
                                 "labels": {super::NODE_NAME_LABEL: null}},
                    "status": {"phase": "Scheduling", "nodeName": null, "evacuationNodeName": null, "reason": null},
                }));
                store.patch(&vmis(), namespace, name, &patch, false)?;
                let pod = json!({
                    "metadata": {"generateName": format!("virt-launcher-{name}-"),
                                 "labels": {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": text(vmi, "/metadata/uid")},
                                 "annotations": {"kubevirt.io/domain": name},
                                 "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                                      "name": name, "uid": text(vmi, "/metadata/uid"), "controller": true}]},
                    "spec": {"containers": [{"name": "compute", "image": "virt-launcher"}],
                             "terminationGracePeriodSeconds": 30},
                    "status": {"phase": "Pending"},
                });
                store.create(&pods(), namespace, pod, false)?;
            } else if phase == "Scheduling" {
                let selector = evac_cluster::LabelSelector::parse("kubevirt.io=virt-launcher").ok();
                let (launchers, _) = store.list(&pods(), Some(namespace), selector.as_ref(), None);
                let bound = launchers.iter().find(|p| {
                    annotation(p, "kubevirt.io/domain") == name
                        && !text(p, "/spec/nodeName").is_empty()
                        && text(p, "/status/phase") == "Running"
                });
                if let Some(pod) = bound {
                    let node = text(pod, "/spec/nodeName");
                    let patch = Patch::Merge(json!({"metadata": {"labels": {super::NODE_NAME_LABEL: node}},
                                                    "status": {"phase": "Running", "nodeName": node}}));
                    store.patch(&vmis(), namespace, name, &patch, false)?;
                }
            }
        }
        Ok(())
    }
}

/// A timestamp as simulated time since the start.
fn since_start(store: &Store, timestamp: &str) -> Option<Duration> {
    let at = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?.with_timezone(&chrono::Utc);
    let start = store.clock().now() - chrono::Duration::from_std(store.clock().elapsed()).ok()?;
    (at - start).to_std().ok()
}

impl crate::Actor for VirtController {
    fn name(&self) -> &'static str {
        "virt-controller"
    }

    fn watches(&self) -> Option<Vec<crate::store::Kind>> {
        crate::driver::kinds(&[
            ("v1", "Pod"),
            ("kubevirt.io/v1", "VirtualMachineInstance"),
            ("kubevirt.io/v1", "VirtualMachineInstanceMigration"),
        ])
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        VirtController::reconcile(self, store)
    }
}

#[cfg(test)]
mod tests;
