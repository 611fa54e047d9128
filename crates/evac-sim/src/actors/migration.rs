//! KubeVirt's migration controller (`pkg/virt-controller/watch/migration/migration.go`), as far
//! as disruptions go:
//!
//! - a new `VirtualMachineInstanceMigration` becomes `Pending`; a second unfinished migration of a
//!   VMI is refused by virt-api's migration-create admitter ([`crate::api::virt_api`]), and one
//!   that slips past it fails at once (`canMigrateVMI`); one whose VMI is gone is deleted;
//! - a `Pending` migration gets its target pod (`handleTargetPodCreation`) in priority order
//!   (VEP 62: `system-critical`, then `user-triggered`, then `system-maintenance`, then the
//!   oldest), once its evacuation back-off is over (`handleMigrationBackoff`), its VMI runs with a
//!   single active pod, and the parallel limits leave room (`parallelMigrationsPerCluster`,
//!   `parallelOutboundMigrationsPerNode`, counting every migration with a target pod);
//! - the target pod is the VMI's launcher pod again (same requests, tolerations, node selector,
//!   priority), with a required anti-affinity to the VMI's own pods (`createTargetPod`): the
//!   scheduler places it, or leaves it pending; an unschedulable target pod is deleted after 5
//!   minutes, any pending one after 15 (`handlePendingPodTimeout`), and the migration fails;
//! - once the target pod runs, the migration runs: it takes the VM's memory over the bandwidth
//!   its dirty rate leaves (`bandwidthPerMigration`), and is aborted when it cannot converge
//!   (`progressTimeout`, 150 s without progress) or takes longer than `completionTimeoutPerGiB`
//!   per decimal GB of memory, rounded up (`getVMIMigrationDataSize`);
//! - on success the VMI runs on the target (`ackMigrationCompletion`: its node, label and
//!   `migrationState`; `evacuationNodeName` and the eviction-source annotation cleared) and the
//!   source pod completes (`Succeeded`, left for whoever evicts it, as virt-launcher exits); on
//!   failure the target pod goes; a VMI that stops, or leaves its node, before the end fails the
//!   migration;
//! - of each VMI's finished migrations the newest five are kept, the rest deleted with the pod
//!   each left behind (`garbageCollectFinalizedMigrations`), so the back-off stops at 320 s.
//!
//! The VM's dirty rate is the annotation [`DIRTY_RATE_ANNOTATION`] (bytes per second, a
//! quantity). The simulator keeps a running migration's end in annotations of the migration
//! object, so the store stays the only state.

use std::collections::HashMap;
use std::time::Duration;

use evac_core::kubevirt::{EVICTION_SOURCE_ANNOTATION, NODE_NAME_LABEL};
use serde_json::{json, Value};

use super::Wake;
use crate::kinds::{migrations, pods, vmis};
use crate::objects::{Migration, Pod, Vmi};
use crate::store::{deleted, Patch, Store};
use crate::ApiError;

mod collect;
mod run;
mod target;
mod world;

use collect::collect_finished;
pub use collect::FINISHED_KEPT_PER_VMI;
use target::Pending;
use world::{unfinished_by_vmi, Unfinished, World};

/// How fast the guest dirties memory, per second (a quantity such as `100Mi`): what a metrics
/// exporter publishes from KubeVirt's `kubevirt_vmi_dirty_rate_bytes_per_second`, and what evac
/// reads to estimate how long a migration takes.
pub use evac_core::kubevirt::DIRTY_RATE_ANNOTATION;
/// When a running migration ends, in milliseconds of simulated time.
const ENDS_AT_ANNOTATION: &str = "sim.evac.io/ends-at-ms";
/// How a running migration ends: `Succeeded` or `Failed`.
const OUTCOME_ANNOTATION: &str = "sim.evac.io/outcome";
/// The name of a migration's target pod, from its creation on (KubeVirt finds it by the
/// [`MIGRATION_JOB_LABEL`]; a name spares a search of every node).
const TARGET_POD_ANNOTATION: &str = "sim.evac.io/target-pod";
/// The label of a migration's target pod with the migration's uid (`virtv1.MigrationJobLabel`).
pub const MIGRATION_JOB_LABEL: &str = "kubevirt.io/migrationJobUID";
/// The annotation of a migration's target pod with the migration's name.
pub const MIGRATION_JOB_ANNOTATION: &str = "kubevirt.io/migrationJobName";
/// The phases in which a migration counts against the parallel limits (`IsRunning`), besides a
/// `Pending` one that has its target pod.
pub const RUNNING_PHASES: [&str; 5] =
    ["Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running"];

/// KubeVirt's migration settings that shape disruptions.
#[derive(Debug, Clone)]
pub struct MigrationController {
    /// `parallelMigrationsPerCluster`: migrations running at once in the cluster (KubeVirt's default: 5).
    pub parallel_per_cluster: usize,
    /// `parallelOutboundMigrationsPerNode`: migrations running at once from one node (KubeVirt's default: 2).
    pub parallel_outbound_per_node: usize,
    /// `bandwidthPerMigration`, bytes per second.
    pub bandwidth: f64,
    /// `completionTimeoutPerGiB`: the longest a migration may take per GB of memory.
    pub completion_timeout_per_gib: Duration,
    /// `progressTimeout`: a migration that makes no progress for this long is aborted.
    pub progress_timeout: Duration,
    /// A target pod the scheduler cannot place is deleted after this long.
    pub unschedulable_timeout: Duration,
    /// A target pod still pending for any reason is deleted after this long.
    pub pending_timeout: Duration,
}

impl Default for MigrationController {
    fn default() -> Self {
        Self {
            parallel_per_cluster: 5,
            parallel_outbound_per_node: 2,
            bandwidth: 64.0 * 1024.0 * 1024.0,
            completion_timeout_per_gib: Duration::from_secs(150),
            progress_timeout: Duration::from_secs(150),
            unschedulable_timeout: Duration::from_secs(300),
            pending_timeout: Duration::from_secs(900),
        }
    }
}

/// What one pass over the migrations gathers as it goes.
struct Pass<'w> {
    now: Duration,
    /// When the controller next has to act.
    wake: Wake,
    /// Migrations counted against `parallelMigrationsPerCluster`: those with a target pod.
    running_total: usize,
    /// Of those, per source node, against `parallelOutboundMigrationsPerNode`.
    outbound: HashMap<String, usize>,
    /// `Pending` migrations without a target pod, waiting for one.
    waiting: Vec<Migration<'w>>,
}

impl Pass<'_> {
    /// A migration leaving `source` counts against the parallel limits.
    fn count(&mut self, source: &str) {
        self.running_total += 1;
        *self.outbound.entry(source.to_owned()).or_default() += 1;
    }
}

impl MigrationController {
    /// One pass over every migration; returns when it next has to act (a migration's end, a
    /// back-off, a pending timeout).
    pub fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let world = World::read(store);
        let mut pass = Pass {
            now: store.clock().elapsed(),
            wake: Wake::default(),
            running_total: 0,
            outbound: HashMap::new(),
            waiting: Vec::new(),
        };
        let unfinished = unfinished_by_vmi(&world);
        for migration in world.migrations.iter().map(|m| Migration(m)).filter(|m| !m.is_final()) {
            self.sync(store, &world, &unfinished, migration, &mut pass)?;
        }
        collect_finished(store, &world.migrations)?;
        self.create_target_pods(store, &world, &mut pass)?;
        Ok(pass.wake.next())
    }

    /// One unfinished migration: deleted with its VMI, failed when another migration of its VMI
    /// came first (`canMigrateVMI`), else moved on by its phase.
    fn sync<'w>(
        &self,
        store: &Store,
        world: &'w World,
        unfinished: &Unfinished<'_>,
        migration: Migration<'w>,
        pass: &mut Pass<'w>,
    ) -> Result<(), ApiError> {
        let Some(vmi) = world.vmi_of(migration) else {
            // "Deleting migration for deleted vmi".
            return deleted(store.delete(
                &migrations(),
                migration.meta().namespace(),
                migration.meta().name(),
                false,
            ));
        };
        let vmi = Vmi(vmi);
        let key = format!("{}/{}", migration.meta().namespace(), migration.vmi_name());
        let first = unfinished.get(&key).and_then(|all| all.iter().min()).map(|(_, name)| *name);
        if migration.phase().is_none() && first != Some(migration.meta().name()) {
            let message = "VMI is not eligible for migration because another migration job is in progress.";
            return self.fail(store, migration, world, message);
        }
        let target = world.target_pod(migration).map(|p| Pod(p));
        match migration.phase() {
            None => {
                self.set_phase(store, migration, "Pending", json!({}))?;
                pass.waiting.push(migration);
            }
            Some("Pending") if target.is_none() => pass.waiting.push(migration),
            Some("Pending" | "Scheduling" | "Scheduled") => {
                let Some(target) = target else {
                    let why = "Migration target pod was removed during active migration.";
                    return self.fail(store, migration, world, why);
                };
                self.sync_scheduling(store, world, migration, vmi, target, pass)?;
            }
            Some("Running" | "PreparingTarget" | "TargetReady") => {
                self.sync_running(store, world, migration, vmi, target, pass)?;
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// A migration with a target pod that does not run yet: the pod's pending timeout, then the
    /// migration starts once the pod runs. It counts against the limits meanwhile.
    fn sync_scheduling(
        &self,
        store: &Store,
        world: &World,
        migration: Migration<'_>,
        vmi: Vmi<'_>,
        target: Pod<'_>,
        pass: &mut Pass<'_>,
    ) -> Result<(), ApiError> {
        match self.target_pod_timeout(store, migration, target, world, pass.now)? {
            Pending::Waits(until) => pass.wake.at(until),
            Pending::TimedOut => return Ok(()),
            Pending::No => {}
        }
        if !vmi.is_running() || vmi.node_name().is_none() {
            return self.fail(store, migration, world, "Migration failed vmi shutdown during migration.");
        }
        pass.count(vmi.node_name().unwrap_or_default());
        if target.phase() == Some("Running") && target.node_name().is_some() {
            let ends = self.start(store, migration, vmi, target, world, pass.now)?;
            pass.wake.at(ends);
        } else if migration.phase() != Some("Scheduling") {
            self.set_phase(store, migration, "Scheduling", json!({}))?;
        }
        Ok(())
    }

    /// A running migration: it fails when its VMI stops or leaves the source node, or its target
    /// pod goes; it finishes when its time is up. It counts against the limits until then.
    fn sync_running(
        &self,
        store: &Store,
        world: &World,
        migration: Migration<'_>,
        vmi: Vmi<'_>,
        target: Option<Pod<'_>>,
        pass: &mut Pass<'_>,
    ) -> Result<(), ApiError> {
        let source = migration.source_node().unwrap_or_default();
        let stopped = !vmi.is_running() || vmi.node_name() != Some(source);
        if stopped || target.is_none_or(|t| t.is_finished() || t.is_terminating()) {
            let why = if stopped {
                "Migration failed vmi shutdown during migration."
            } else {
                "Migration failed because target pod shutdown during migration"
            };
            return self.fail(store, migration, world, why);
        }
        let ends = migration
            .meta()
            .annotation(ENDS_AT_ANNOTATION)
            .and_then(|e| e.parse().ok())
            .map(Duration::from_millis);
        if ends.is_some_and(|ends| ends <= pass.now) {
            return self.finish(store, migration, vmi, world);
        }
        if let Some(ends) = ends {
            pass.wake.at(ends);
        }
        pass.count(source);
        Ok(())
    }

    fn set_phase(
        &self,
        store: &Store,
        migration: Migration<'_>,
        phase: &str,
        state: Value,
    ) -> Result<(), ApiError> {
        let mut status =
            json!({"phase": phase, "phaseTransitionTimestamps": transitions(store, migration, phase)});
        if state.as_object().is_some_and(|s| !s.is_empty()) {
            status["migrationState"] = state;
        }
        let patch = Patch::Merge(json!({"status": status}));
        store.patch(&migrations(), migration.meta().namespace(), migration.meta().name(), &patch, false)?;
        Ok(())
    }

    /// The migration fails: its target pod goes, the VMI stays where it is (still marked, if it
    /// was: the evacuation controller tries again).
    fn fail(
        &self,
        store: &Store,
        migration: Migration<'_>,
        world: &World,
        why: &str,
    ) -> Result<(), ApiError> {
        if let Some(target) = world.target_pod(migration) {
            let target = Pod(target);
            deleted(store.delete(&pods(), target.meta().namespace(), target.meta().name(), false))?;
        }
        tracing::debug!(migration = %migration.meta().key(), "migration failed: {why}");
        // virt-handler ends a migration it ran (migrationState.endTimestamp); one that failed
        // before its VM started moving has only its Failed transition.
        let started = matches!(migration.phase(), Some("Running" | "PreparingTarget" | "TargetReady"));
        let end = if started {
            json!({"endTimestamp": store.clock().timestamp(), "completed": true, "failed": true,
                   "failureReason": why})
        } else {
            json!({})
        };
        self.set_phase(store, migration, "Failed", end)
    }

    /// The migration's time is up: it succeeds (the VM runs on the target) or fails.
    fn finish(
        &self,
        store: &Store,
        migration: Migration<'_>,
        vmi: Vmi<'_>,
        world: &World,
    ) -> Result<(), ApiError> {
        let outcome = migration.meta().annotation(OUTCOME_ANNOTATION).unwrap_or_default();
        if outcome != "Succeeded" {
            return self.fail(
                store,
                migration,
                world,
                "Live migration is not completed and has been aborted",
            );
        }
        let namespace = migration.meta().namespace();
        let source = migration.source_node().unwrap_or_default();
        let target = migration.target_node().unwrap_or_default();
        let end = json!({"endTimestamp": store.clock().timestamp(), "completed": true,
                         "sourceNode": source, "targetNode": target});
        // The target virt-handler's `ackMigrationCompletion`.
        let vmi_patch = Patch::Merge(json!({
            "metadata": {"labels": {NODE_NAME_LABEL: target}, "annotations": {EVICTION_SOURCE_ANNOTATION: null}},
            "status": {"nodeName": target, "evacuationNodeName": null, "migrationState": end},
        }));
        store.patch(&vmis(), namespace, vmi.meta().name(), &vmi_patch, false)?;
        // virt-launcher on the source exits: its pod completes, and stays until evicted or deleted.
        let mut sources = Vec::new();
        for pod in world.pods_of(migration).iter().map(|p| Pod(p)) {
            if pod.node_name() == Some(source) && !pod.is_finished() {
                let done = Patch::Merge(json!({"status": {"phase": "Succeeded"}}));
                store.patch(&pods(), namespace, pod.meta().name(), &done, false)?;
                sources.push(pod.meta().uid().to_owned());
            }
        }
        // Hotplugged volumes follow the VM: the source pod's attachment pods go, the target pod
        // gets its own (`cleanupAttachmentPods`, `handleHotplugVolumes`).
        if super::hotplug::has_volumes(vmi) {
            super::hotplug::detach(store, namespace, |owner| sources.iter().any(|s| s == owner))?;
            if let Some(target) = world.target_pod(migration) {
                super::hotplug::attach(store, target)?;
            }
        }
        self.set_phase(store, migration, "Succeeded", end)
    }
}

/// The migration's `phaseTransitionTimestamps` with `phase` entered now, as KubeVirt records them
/// (a merge patch replaces the list, so it is written whole).
fn transitions(store: &Store, migration: Migration<'_>, phase: &str) -> Value {
    // As stored now: the step's snapshot may predate a transition made earlier in the step.
    let current = store.get(&migrations(), migration.meta().namespace(), migration.meta().name()).ok();
    let mut transitions = current
        .as_deref()
        .and_then(|m| m.pointer("/status/phaseTransitionTimestamps"))
        .cloned()
        .unwrap_or(json!([]));
    // Once per phase (`SetVMIMigrationPhaseTransitionTimestamp`, pkg/controller/controller.go).
    if let Some(list) = transitions.as_array_mut() {
        if !list.iter().any(|t| t["phase"] == phase) {
            list.push(json!({"phase": phase, "phaseTransitionTimestamp": store.clock().timestamp()}));
        }
    }
    transitions
}

#[cfg(test)]
mod tests;
