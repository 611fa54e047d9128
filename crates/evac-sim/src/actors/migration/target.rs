//! The migration's target pod (`handleTargetPodCreation`, `createTargetPod`,
//! `handlePendingPodTimeout`): the queue and back-off that decide when a waiting migration gets
//! one, the pod itself, and its pending timeout.

use std::sync::Arc;
use std::time::Duration;

use evac_core::kubevirt::CREATED_BY_LABEL;
use evac_core::model::Migration as MigrationModel;
use serde_json::{json, Value};

use super::world::World;
use super::{
    MigrationController, Pass, MIGRATION_JOB_ANNOTATION, MIGRATION_JOB_LABEL, TARGET_POD_ANNOTATION,
};
use crate::kinds::{migrations, pods};
use crate::objects::{Migration, Pod, Vmi};
use crate::store::{Patch, Store};
use crate::ApiError;

impl MigrationController {
    /// `handleTargetPodCreation`: the waiting migrations get their target pods in queue order,
    /// as far as the parallel limits, their back-off and their VMI's pods allow.
    pub(super) fn create_target_pods<'w>(
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
    pub(super) fn target_pod_timeout(
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
        let mut pod = crate::actors::launcher::render(vmi);
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

/// Where a migration's target pod is in its wait to be scheduled.
pub(super) enum Pending {
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
