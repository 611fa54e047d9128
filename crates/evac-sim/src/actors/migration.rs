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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use evac_core::estimate;
use evac_core::kubevirt::{CREATED_BY_LABEL, EVICTION_SOURCE_ANNOTATION, NODE_NAME_LABEL};
use evac_core::kubevirt_config::KubeVirtConfig;
use evac_core::migration_policy::{
    match_policy, MigrationPolicy, MigrationSettings, MIGRATION_POLICY_API_VERSION, MIGRATION_POLICY_KIND,
};
use evac_core::model::Migration as MigrationModel;
use evac_core::model::Str;
use serde_json::{json, Value};

use super::{quantity, Wake};
use crate::kinds::{migrations, pods, vmis};
use crate::objects::{Migration, Pod, Vmi};
use crate::store::{deleted, Kind, Patch, Store};
use crate::ApiError;

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

/// What one pass reads once: every migration, the VMIs, the launcher pods by VMI.
struct World {
    migrations: Vec<Arc<Value>>,
    vmis: HashMap<String, Arc<Value>>,
    /// (namespace/VMI) -> its pods.
    pods: HashMap<String, Vec<Arc<Value>>>,
}

impl World {
    /// Reads the migrations, and the VMIs and pods of the unfinished ones: those of the VMIs'
    /// nodes, of the migrations' target nodes, and the unscheduled ones (the store indexes pods by
    /// node, so this stays cheap in a large cluster).
    fn read(store: &Store) -> Self {
        let (migrations, _) = store.list(&migrations(), None, None, None);
        let mut vmis = HashMap::new();
        let mut nodes: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        for migration in migrations.iter().map(|m| Migration(m)).filter(|m| !m.is_final()) {
            let key = format!("{}/{}", migration.meta().namespace(), migration.vmi_name());
            if let Ok(vmi) =
                store.get(&crate::kinds::vmis(), migration.meta().namespace(), migration.vmi_name())
            {
                nodes.extend(Vmi(&vmi).node_name().map(str::to_owned));
                vmis.insert(key, vmi);
            }
        }
        let mut pods: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
        for migration in migrations.iter().map(|m| Migration(m)).filter(|m| !m.is_final()) {
            let Some(name) = migration.meta().annotation(TARGET_POD_ANNOTATION) else { continue };
            if let Ok(pod) = store.get(&crate::kinds::pods(), migration.meta().namespace(), name) {
                // Pods of the VMI's node are read below.
                let key = format!("{}/{}", migration.meta().namespace(), migration.vmi_name());
                let on_vmis_node = vmis.get(&key).and_then(|v| Vmi(v).node_name()) == Pod(&pod).node_name();
                if !on_vmis_node {
                    pods.entry(key).or_default().push(pod);
                }
            }
        }
        if !vmis.is_empty() {
            for node in &nodes {
                let Ok(on_node) = evac_cluster::FieldSelector::parse(&format!("spec.nodeName={node}")) else {
                    continue;
                };
                let (found, _) = store.list(&crate::kinds::pods(), None, None, Some(&on_node));
                for pod in found {
                    let Some(vmi) = Pod(&pod).vmi() else { continue };
                    let key = format!("{}/{vmi}", Pod(&pod).meta().namespace());
                    if vmis.contains_key(&key) {
                        pods.entry(key).or_default().push(pod);
                    }
                }
            }
        }
        Self { migrations, vmis, pods }
    }

    fn vmi_of(&self, migration: Migration<'_>) -> Option<&Arc<Value>> {
        self.vmis.get(&format!("{}/{}", migration.meta().namespace(), migration.vmi_name()))
    }

    fn pods_of(&self, migration: Migration<'_>) -> &[Arc<Value>] {
        self.pods
            .get(&format!("{}/{}", migration.meta().namespace(), migration.vmi_name()))
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The migration's target pod, if it has one.
    fn target_pod(&self, migration: Migration<'_>) -> Option<&Arc<Value>> {
        let uid = migration.meta().uid();
        self.pods_of(migration).iter().find(|p| Pod(p).meta().label(MIGRATION_JOB_LABEL) == Some(uid))
    }
}

/// Unfinished migrations per VMI (namespace/name): resource version and name of each.
type Unfinished<'w> = BTreeMap<String, Vec<(u64, &'w str)>>;

/// Unfinished migrations per VMI, the oldest first: a later one fails (`canMigrateVMI`).
fn unfinished_by_vmi(world: &World) -> Unfinished<'_> {
    let mut unfinished: Unfinished<'_> = BTreeMap::new();
    for migration in world.migrations.iter().map(|m| Migration(m)).filter(|m| !m.is_final()) {
        let key = format!("{}/{}", migration.meta().namespace(), migration.vmi_name());
        unfinished
            .entry(key)
            .or_default()
            .push((migration.meta().resource_version(), migration.meta().name()));
    }
    unfinished
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

    /// `handleTargetPodCreation`: the waiting migrations get their target pods in queue order,
    /// as far as the parallel limits, their back-off and their VMI's pods allow.
    fn create_target_pods<'w>(
        &self,
        store: &Store,
        world: &'w World,
        pass: &mut Pass<'w>,
    ) -> Result<(), ApiError> {
        // KubeVirt's priority queue (VEP 62): the highest `spec.priority` first, then the oldest.
        // controller-runtime's priority queue (`pkg/controller/priorityqueue`, `less`) orders
        // equal priorities by when they were added; a pending migration that finds no slot is
        // added back in the order it was taken, so the order stays the order of creation. Within
        // one second of `creationTimestamp`, the store's uids count up with creation.
        let mut waiting = std::mem::take(&mut pass.waiting);
        waiting.sort_by_key(|m| {
            (std::cmp::Reverse(queue_priority(*m)), m.meta().creation_timestamp(), m.meta().uid())
        });
        for migration in waiting {
            if pass.running_total >= self.parallel_per_cluster {
                break;
            }
            if let Some(until) = backoff_until(store, migration, &world.migrations) {
                // Held Pending after failed evacuations (`handleMigrationBackoff`).
                pass.wake.at(until);
                continue;
            }
            let Some(vmi) = world.vmi_of(migration).map(|v| Vmi(v)) else { continue };
            let Some(source) = vmi.node_name().filter(|_| vmi.is_running()) else { continue };
            if pass.outbound.get(source).copied().unwrap_or(0) >= self.parallel_outbound_per_node {
                continue;
            }
            // One active pod: a second one means a migration before this one is not over.
            let active: Vec<Pod> =
                world.pods_of(migration).iter().map(|p| Pod(p)).filter(|p| !p.is_finished()).collect();
            let [source_pod] = active.as_slice() else { continue };
            self.create_target_pod(store, migration, vmi, *source_pod)?;
            self.set_phase(store, migration, "Scheduling", json!({}))?;
            pass.count(source);
        }
        Ok(())
    }

    /// Deletes a target pod pending too long, and fails its migration (`handlePendingPodTimeout`).
    fn target_pod_timeout(
        &self,
        store: &Store,
        migration: Migration<'_>,
        target: Pod<'_>,
        world: &World,
        now: Duration,
    ) -> Result<Pending, ApiError> {
        if target.phase() != Some("Pending") || target.is_terminating() {
            return Ok(Pending::No);
        }
        let created = target.meta().creation_timestamp().and_then(|t| since_start(store, t)).unwrap_or(now);
        let unschedulable = target
            .condition("PodScheduled")
            .is_some_and(|c| c.status() == "False" && c.reason() == Some("Unschedulable"));
        let (limit, why) = if unschedulable {
            (self.unschedulable_timeout, "unschedulable pod {} timeout period exceeded")
        } else {
            (self.pending_timeout, "pending pod {} timeout period exceeded")
        };
        if now < created + limit {
            return Ok(Pending::Waits(created + limit));
        }
        tracing::info!(pod = %target.meta().key(), "{}", why.replace("{}", &target.meta().key()));
        store.delete(&pods(), target.meta().namespace(), target.meta().name(), false)?;
        self.fail(store, migration, world, "Migration target pod was removed during active migration.")?;
        Ok(Pending::TimedOut)
    }

    /// The target pod runs: the migration runs from now, and ends after its duration.
    fn start(
        &self,
        store: &Store,
        migration: Migration<'_>,
        vmi: Vmi<'_>,
        target: Pod<'_>,
        world: &World,
        now: Duration,
    ) -> Result<Duration, ApiError> {
        let (duration, outcome) = self.duration(store, vmi);
        let ends = now + duration;
        let source_pod = world
            .pods_of(migration)
            .iter()
            .map(|p| Pod(p))
            .find(|p| p.node_name() == vmi.node_name() && !p.is_finished())
            .map(|p| p.meta().name())
            .unwrap_or_default();
        let patch = Patch::Merge(json!({
            "metadata": {"annotations": {
                ENDS_AT_ANNOTATION: ends.as_millis().to_string(),
                OUTCOME_ANNOTATION: outcome,
            }},
            "status": {"phase": "Running", "phaseTransitionTimestamps": transitions(store, migration, "Running"), "migrationState": {
                "migrationUid": migration.meta().uid(),
                "sourceNode": vmi.node_name(), "targetNode": target.node_name(),
                "sourcePod": source_pod, "targetPod": target.meta().name(),
                "startTimestamp": store.clock().timestamp(),
            }},
        }));
        store.patch(&migrations(), migration.meta().namespace(), migration.meta().name(), &patch, false)?;
        Ok(ends)
    }

    /// How long a VM's migration takes, and whether it converges: its memory over the bandwidth
    /// the dirty rate leaves. One that cannot progress is aborted at the progress timeout; one
    /// that would take longer than the completion timeout (per decimal GB, rounded up, as
    /// `getVMIMigrationDataSize` sizes it) is aborted then, unless its settings let KubeVirt help
    /// it complete (post-copy, or the guest paused). The settings are the cluster's under the
    /// MigrationPolicy that matches the VMI (`migrationpolicy.go` `matchPolicy`,
    /// `applyMigrationPolicySpec`).
    fn duration(&self, store: &Store, vmi: Vmi<'_>) -> (Duration, &'static str) {
        let memory = vmi.memory().unwrap_or(1024.0 * 1024.0 * 1024.0);
        let dirty_rate =
            vmi.meta().annotation(DIRTY_RATE_ANNOTATION).and_then(quantity::bytes).unwrap_or(0.0);
        let cluster = KubeVirtConfig {
            bandwidth_per_migration: Some(self.bandwidth as u64),
            completion_timeout_per_gib: self.completion_timeout_per_gib.as_secs(),
            progress_timeout: self.progress_timeout.as_secs(),
            ..KubeVirtConfig::default()
        };
        let (policies, _) =
            store.list(&Kind::new(MIGRATION_POLICY_API_VERSION, MIGRATION_POLICY_KIND), None, None, None);
        let texts: Vec<String> = policies.iter().map(|p| p.to_string()).collect();
        let policies: Vec<MigrationPolicy<'_>> =
            texts.iter().filter_map(|t| serde_json::from_str(t).ok()).collect();
        let labels = |object: Option<&Value>| -> std::collections::BTreeMap<Str<'static>, Str<'static>> {
            object
                .and_then(|o| o.pointer("/metadata/labels"))
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((Str(k.clone().into()), Str(v.as_str()?.to_owned().into()))))
                .collect()
        };
        let namespace = store.get(&Kind::new("v1", "Namespace"), "", vmi.meta().namespace()).ok();
        let policy = match_policy(&policies, &labels(Some(vmi.0)), &labels(namespace.as_deref()));
        let settings = MigrationSettings::of(&cluster, policy);
        let estimate = estimate::estimate(&settings.inputs(memory, dirty_rate, self.bandwidth));
        let outcome = if estimate.completes() { "Succeeded" } else { "Failed" };
        (Duration::from_secs_f64(estimate.seconds()), outcome)
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

    /// The target pod: the VMI's launcher pod again (`RenderMigrationManifest`, the same
    /// manifest, created through the pod's admission), away from its own pods.
    fn create_target_pod(
        &self,
        store: &Store,
        migration: Migration<'_>,
        vmi: Vmi<'_>,
        source: Pod<'_>,
    ) -> Result<(), ApiError> {
        let uid = vmi.meta().uid();
        let mut pod = super::launcher::render(vmi);
        pod["metadata"]["annotations"][MIGRATION_JOB_ANNOTATION] = json!(migration.meta().name());
        pod["metadata"]["labels"][MIGRATION_JOB_LABEL] = json!(migration.meta().uid());
        if let Some(selector) = source.node_selector() {
            pod["spec"]["nodeSelector"] = json!(selector);
        }
        // Beside the VMI's own affinity, which the template carries.
        pod["spec"]["affinity"]["podAntiAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {CREATED_BY_LABEL: uid}},
            "topologyKey": "kubernetes.io/hostname",
        }]});
        let created = store.create_pod(migration.meta().namespace(), pod)?;
        let named =
            json!({"metadata": {"annotations": {TARGET_POD_ANNOTATION: Pod(&created).meta().name()}}});
        store.patch(
            &migrations(),
            migration.meta().namespace(),
            migration.meta().name(),
            &Patch::Merge(named),
            false,
        )?;
        Ok(())
    }
}

/// How many finished migrations of a VMI KubeVirt keeps
/// (`defaultFinalizedMigrationGarbageCollectionBuffer`).
pub const FINISHED_KEPT_PER_VMI: usize = 5;

/// KubeVirt's `garbageCollectFinalizedMigrations`: of each VMI's finished migrations (not being
/// deleted), oldest first by creation, all but the newest [`FINISHED_KEPT_PER_VMI`] are deleted,
/// with the pod each left behind (a failed one's target pod, a succeeded one's source pod). Since
/// `handleMigrationBackoff` counts only the failures still there, its wait never passes 320 s.
fn collect_finished(store: &Store, all: &[Arc<Value>]) -> Result<(), ApiError> {
    let mut finished: HashMap<(&str, &str), Vec<Migration<'_>>> = HashMap::new();
    for migration in all.iter().map(|m| Migration(m)) {
        if migration.is_final() && migration.meta().deletion_timestamp().is_none() {
            finished.entry((migration.meta().namespace(), migration.vmi_name())).or_default().push(migration);
        }
    }
    for (_, mut of_vmi) in finished.into_iter().filter(|(_, m)| m.len() > FINISHED_KEPT_PER_VMI) {
        of_vmi.sort_by_key(|m| (m.meta().creation_timestamp(), m.meta().resource_version()));
        let surplus = of_vmi.len() - FINISHED_KEPT_PER_VMI;
        for migration in &of_vmi[..surplus] {
            let state = &migration.0["status"]["migrationState"];
            let defunct = if state["failed"] == true {
                state["targetPod"].as_str()
            } else if state["completed"] == true {
                state["sourcePod"].as_str()
            } else {
                None
            };
            let namespace = migration.meta().namespace();
            for (kind, name) in [(pods(), defunct), (migrations(), Some(migration.meta().name()))] {
                let Some(name) = name.filter(|n| !n.is_empty()) else { continue };
                deleted(store.delete(&kind, namespace, name, false))?;
            }
        }
    }
    Ok(())
}

/// Where a migration's target pod is in its wait to be scheduled.
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

enum Pending {
    /// Not pending (running, or terminating).
    No,
    /// Pending, until it times out at this moment.
    Waits(Duration),
    /// It timed out: deleted, and the migration failed.
    TimedOut,
}

/// The queue priority of a migration's `spec.priority`
/// (`pkg/util/migrations/migrations.go`, `PriorityFromMigration`).
fn queue_priority(migration: Migration<'_>) -> u32 {
    match migration.priority() {
        Some("system-critical") => 100,
        Some("user-triggered") => 50,
        Some("system-maintenance") => 20,
        _ => 0,
    }
}

/// A timestamp as simulated time since the start.
fn since_start(store: &Store, timestamp: &str) -> Option<Duration> {
    let at = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?.with_timezone(&chrono::Utc);
    let start = store.clock().now() - chrono::Duration::from_std(store.clock().elapsed()).ok()?;
    (at - start).to_std().ok()
}

/// Until when (simulated time) KubeVirt holds a waiting evacuation migration after earlier ones of
/// its VMI failed; `None` when it may start now.
fn backoff_until(store: &Store, migration: Migration<'_>, all: &[Arc<Value>]) -> Option<Duration> {
    let (namespace, vmi) = (migration.meta().namespace(), migration.vmi_name());
    let of_vmi: Vec<&Value> = all
        .iter()
        .map(|m| &**m)
        .filter(|m| Migration(m).meta().namespace() == namespace && Migration(m).vmi_name() == vmi)
        .collect();
    // The core's models read annotations lazily from JSON text, so they decode from text.
    let texts: Vec<String> = of_vmi.iter().map(|m| m.to_string()).collect();
    let decoded: Vec<MigrationModel<'_>> =
        texts.iter().filter_map(|t| serde_json::from_str(t).ok()).collect();
    let this_text = migration.0.to_string();
    let this: MigrationModel<'_> = serde_json::from_str(&this_text).ok()?;
    let until = evac_core::evacuation::kubevirt_backoff_until(&this, &decoded)?;
    let start = store.clock().now() - chrono::Duration::from_std(store.clock().elapsed()).ok()?;
    let since_start = until - (start - chrono::DateTime::UNIX_EPOCH).as_seconds_f64();
    let until = Duration::from_secs_f64(since_start.max(0.0));
    (until > store.clock().elapsed()).then_some(until)
}

#[cfg(test)]
mod tests;
