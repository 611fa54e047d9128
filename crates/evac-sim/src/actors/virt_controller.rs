//! KubeVirt's virt-controller, as far as disruptions go, for clusters that run KubeVirt alone
//! (the baseline evac is compared with):
//!
//! - the **evacuation controller** (`pkg/virt-controller/watch/drain/evacuation/evacuation.go`,
//!   `EvacuationController.sync`) is evac's core decision in KubeVirt's flavour
//!   ([`evacuation::Flavor::KubeVirt`]): a `VirtualMachineInstanceMigration` (generateName
//!   `kubevirt-evacuation-`, annotation `kubevirt.io/evacuationMigration: <node>`, priority
//!   `system-critical`, or `system-maintenance` for the descheduler) for every VMI marked for the
//!   node it runs on or on a node with the `kubevirt.io/drain` taint, at once: the migration
//!   controller applies the parallel limits and the back-off; and the descheduler's
//!   `eviction-in-progress` annotation on the launcher pod of a marked VMI, as the VMI controller
//!   keeps it;
//! - the **VM controller** starts a stopped VM again when its run strategy is `Always` (a new
//!   launcher pod for the scheduler to place), and creates a new VMI for one whose VMI was
//!   deleted (`pkg/virt-controller/watch/vm/vm.go`, `syncRunStrategy`: `Always` starts a VMI
//!   whenever none exists); the **VMI controller** marks it running once its pod is bound.
//!
//! A VM's run strategy is its VirtualMachine's `spec.runStrategy` (the VMI's controlling owner;
//! a VMI without one stays stopped), as `vm.go` `syncRunStrategy` reads it: `Always` restarts a
//! final VMI and recreates a deleted one; `RerunOnFailure` restarts only a `Failed` VMI (one that
//! shut down is `Succeeded` and stays down, as does a deleted one); `Once`, `Manual` and `Halted`
//! never restart. [`RESTARTS_ANNOTATION`] counts the restarts.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use evac_cluster::{CoreReader, Executor};
use evac_core::evacuation::{self, Flavor};
use evac_core::kubevirt::{DRAIN_TAINT_KEY, EVICTION_SOURCE_ANNOTATION, LAUNCHER_SELECTOR};
use evac_core::model::Node as NodeModel;
use evac_core::trace::Trace;
use serde_json::{json, Value};

use crate::api::virt_api;
use crate::kinds::{nodes, pods, vmis, vms};
use crate::objects::{Node, Pod, Vmi};
use crate::store::{Patch, Store};
use crate::ApiError;
use vmi_cache::VmiCache;

/// The VMI annotation that counts how often the VM controller restarted the VM.
pub const RESTARTS_ANNOTATION: &str = "sim.evac.io/restarts";

/// KubeVirt's virt-controller as an actor: its evacuation controller, and VM restarts.
/// KubeVirt's virt-controller.
#[derive(Debug, Clone)]
pub struct VirtController {
    /// Whether the evacuation controller runs: off where another controller evacuates instead.
    pub evacuation: bool,
    /// Nodes the evacuation controller looked at last time: it looks once more after their marks
    /// are gone, to take the `eviction-in-progress` annotations off (as a VMI update would
    /// enqueue them).
    visited: Arc<Mutex<BTreeSet<String>>>,
    /// The VMIs the controllers may act on, and the deletions since the last pass.
    vmis: Arc<Mutex<VmiCache>>,
}

impl Default for VirtController {
    fn default() -> Self {
        Self { evacuation: true, visited: Arc::default(), vmis: Arc::default() }
    }
}

impl VirtController {
    /// With the evacuation controller on or off.
    pub fn new(evacuation: bool) -> Self {
        Self { evacuation, ..Self::default() }
    }

    /// One pass of the evacuation, VM and VMI controllers.
    /// Each acts on VMIs that need something ([`VmiCache`]): the others are left as they are.
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let deleted = {
            let mut cache = self.vmis.lock().unwrap_or_else(PoisonError::into_inner);
            cache.sync(store);
            cache.take_deleted()
        };
        recreate_deleted(store, &deleted)?;
        let all_vmis = {
            let mut cache = self.vmis.lock().unwrap_or_else(PoisonError::into_inner);
            cache.sync(store);
            cache.active()
        };
        finish_deletions(store, &all_vmis)?;
        if self.evacuation {
            self.evacuate(store, &all_vmis)?;
        }
        self.restart_vms(store, &all_vmis)?;
        Ok(None)
    }

    /// The evacuation controller: evac's core decision, as KubeVirt makes it, on every node with
    /// a VMI marked for it or KubeVirt's drain taint, carried out as KubeVirt's controllers write.
    fn evacuate(&self, store: &Store, all_vmis: &[Arc<Value>]) -> Result<(), ApiError> {
        let mut wanted: BTreeSet<String> = all_vmis
            .iter()
            .map(|v| Vmi(v))
            .filter(|v| v.evacuation_node_name().is_some() && v.evacuation_node_name() == v.node_name())
            .filter_map(|v| v.node_name().map(str::to_owned))
            .collect();
        let (all_nodes, _) = store.list(&nodes(), None, None, None);
        let drained =
            |node: Node<'_>| node.taints().any(|t| t.key() == DRAIN_TAINT_KEY && t.effect() == "NoSchedule");
        wanted.extend(all_nodes.iter().map(|n| Node(n)).filter(|n| drained(*n)).map(|n| n.name().to_owned()));
        let look_at: BTreeSet<String> = {
            let mut visited = self.visited.lock().unwrap_or_else(PoisonError::into_inner);
            let all = visited.union(&wanted).cloned().collect();
            *visited = wanted;
            all
        };
        let now = (store.clock().now() - chrono::DateTime::UNIX_EPOCH).as_seconds_f64();
        let reader = CoreReader(&**store.memory());
        // As its service account: the only requester virt-api lets set a migration's priority.
        let as_controller =
            evac_cluster::AsUser::new(Arc::clone(store.memory()), virt_api::VIRT_CONTROLLER_USER);
        let executor = Executor::untold(Arc::new(as_controller));
        for name in look_at {
            let Ok(node) = store.get(&nodes(), "", &name) else { continue };
            let text = node.to_string();
            let node: NodeModel<'_> = serde_json::from_str(&text)
                .map_err(|e| ApiError::bad_request(format!("node {name}: {e}")))?;
            let mut kubevirt =
                evacuation::Context { flavor: Flavor::KubeVirt, now, trace: &mut Trace::off() };
            let decision =
                evacuation::evacuate(&node, &evacuation::Settings::default(), &reader, &mut kubevirt)
                    .map_err(|e| ApiError::bad_request(format!("evacuating node {name}: {e}")))?;
            for effect in &decision.effects {
                // A refused write is retried at the next pass, as the controller's queue would.
                if let Err(e) = futures::executor::block_on(executor.apply(effect)) {
                    tracing::warn!(node = %name, ?effect, "virt-controller: {e}");
                }
            }
        }
        Ok(())
    }

    /// Starts stopped `Always` VMs again, and marks restarted ones running once their pod is bound.
    fn restart_vms(&self, store: &Store, all_vmis: &[std::sync::Arc<Value>]) -> Result<(), ApiError> {
        for vmi in all_vmis.iter().map(|v| Vmi(v)) {
            let (namespace, name) = (vmi.meta().namespace(), vmi.meta().name());
            let restarts_now = vmi.is_final()
                && vmi.meta().deletion_timestamp().is_none()
                && match run_strategy(store, vmi).as_deref() {
                    Some("Always") => true,
                    Some("RerunOnFailure") => vmi.phase() == Some("Failed"),
                    _ => false,
                };
            if restarts_now {
                let restarts: u64 =
                    vmi.meta().annotation(RESTARTS_ANNOTATION).and_then(|r| r.parse().ok()).unwrap_or(0);
                let patch = Patch::Merge(json!({
                    "metadata": {"annotations": {RESTARTS_ANNOTATION: (restarts + 1).to_string(),
                                                 EVICTION_SOURCE_ANNOTATION: null},
                                 "labels": {super::NODE_NAME_LABEL: null}},
                    "status": {"phase": "Scheduling", "nodeName": null, "evacuationNodeName": null, "reason": null},
                }));
                let restarted = store.patch(&vmis(), namespace, name, &patch, false)?;
                store.create_pod(namespace, super::launcher::render(Vmi(&restarted)))?;
            } else if vmi.phase() == Some("Scheduling") {
                let selector = evac_cluster::LabelSelector::parse(LAUNCHER_SELECTOR).ok();
                let (launchers, _) = store.list(&pods(), Some(namespace), selector.as_ref(), None);
                let bound = launchers.iter().map(|p| Pod(p)).find(|p| {
                    p.vmi() == Some(name) && p.node_name().is_some() && p.phase() == Some("Running")
                });
                if let Some(node) = bound.and_then(|pod| pod.node_name()) {
                    let patch = Patch::Merge(json!({"metadata": {"labels": {super::NODE_NAME_LABEL: node}},
                                                    "status": {"phase": "Running", "nodeName": node}}));
                    store.patch(&vmis(), namespace, name, &patch, false)?;
                }
            }
        }
        Ok(())
    }
}

/// The VM controller: a VM whose run strategy is `Always` gets a new VMI (and launcher pod)
/// when its VMI is deleted.
fn recreate_deleted(store: &Store, deleted: &[Arc<Value>]) -> Result<(), ApiError> {
    for object in deleted {
        let deleted = Vmi(object);
        if run_strategy(store, deleted).as_deref() != Some("Always") {
            continue;
        }
        let namespace = deleted.meta().namespace();
        let restarts: u64 =
            deleted.meta().annotation(RESTARTS_ANNOTATION).and_then(|r| r.parse().ok()).unwrap_or(0);
        let mut vmi = (**object).clone();
        let metadata = vmi["metadata"].as_object_mut().expect("a stored object has metadata");
        for field in ["uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "finalizers"] {
            metadata.remove(field);
        }
        vmi["metadata"]["annotations"][RESTARTS_ANNOTATION] = json!((restarts + 1).to_string());
        if let Some(annotations) = vmi["metadata"]["annotations"].as_object_mut() {
            annotations.remove(EVICTION_SOURCE_ANNOTATION);
        }
        if let Some(labels) = vmi["metadata"]["labels"].as_object_mut() {
            labels.remove(super::NODE_NAME_LABEL);
        }
        let conditions = vmi["status"]["conditions"].clone();
        vmi["status"] = json!({"phase": "Scheduling", "conditions": conditions});
        let created = match store.create(&vmis(), namespace, vmi, false) {
            Ok(created) => created,
            // Recreated already, or a VMI of that name exists again.
            Err(e) if e.code == 409 => continue,
            Err(e) => return Err(e),
        };
        store.create_pod(namespace, super::launcher::render(Vmi(&created)))?;
    }
    Ok(())
}

/// The VMI controller's part in a VMI's deletion (`pkg/virt-controller/watch/vmi/lifecycle.go`
/// `sync`): a VMI being deleted has its launcher pods deleted at once (`deleteAllMatchingPods`,
/// each with its own grace period: their kubelet stops them, and a stock virt-handler shuts the
/// guest down), and once none is left running and the VMI is not `Running` (final, or never
/// started), its finalizer goes and so does it.
fn finish_deletions(store: &Store, all_vmis: &[Arc<Value>]) -> Result<(), ApiError> {
    let selector = evac_cluster::LabelSelector::parse(LAUNCHER_SELECTOR).ok();
    for vmi in all_vmis.iter().map(|v| Vmi(v)).filter(|v| v.meta().deletion_timestamp().is_some()) {
        let (namespace, name) = (vmi.meta().namespace(), vmi.meta().name());
        let (launchers, _) = store.list(&pods(), Some(namespace), selector.as_ref(), None);
        let mut running = false;
        for pod in launchers.iter().map(|p| Pod(p)).filter(|p| p.vmi() == Some(name) && !p.is_finished()) {
            running = true;
            if !pod.is_terminating() {
                crate::store::deleted(store.delete_gracefully(
                    &pods(),
                    namespace,
                    pod.meta().name(),
                    None,
                    false,
                ))?;
            }
        }
        // Final, or never started (its pod unbound): nothing runs any more.
        if !running && vmi.phase() != Some("Running") {
            crate::store::deleted(store.delete(&vmis(), namespace, name, false))?;
        }
    }
    Ok(())
}

/// The run strategy of the VM that controls `vmi` (`spec.runStrategy` of its VirtualMachine), or
/// `None` for a VMI without one.
fn run_strategy(store: &Store, vmi: Vmi<'_>) -> Option<String> {
    let (kind, name, _) = vmi.meta().controller()?;
    if kind != "VirtualMachine" {
        return None;
    }
    let vm = store.get(&vms(), vmi.meta().namespace(), name).ok()?;
    vm.pointer("/spec/runStrategy").and_then(Value::as_str).map(str::to_owned)
}

impl crate::Actor for VirtController {
    fn name(&self) -> &'static str {
        "virt-controller"
    }

    fn watches(&self) -> Option<Vec<crate::store::Kind>> {
        // Nodes too: the evacuation controller's node add and update handlers
        // (`evacuation.go`, `addNode`/`updateNode`) start a drain-tainted node's migrations at once.
        crate::driver::kinds(&[
            ("v1", "Node"),
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
mod vmi_cache;
