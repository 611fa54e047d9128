//! A migration's run: it starts once its target pod runs, and lasts as long as the VM's memory
//! takes over the bandwidth its dirty rate leaves.

use std::collections::BTreeMap;
use std::time::Duration;

use evac_core::estimate;
use evac_core::kubevirt_config::KubeVirtConfig;
use evac_core::migration_policy::{
    match_policy, MigrationPolicy, MigrationSettings, MIGRATION_POLICY_API_VERSION, MIGRATION_POLICY_KIND,
};
use evac_core::model::Str;
use serde_json::{json, Value};

use super::world::World;
use super::{
    transitions, MigrationController, DIRTY_RATE_ANNOTATION, ENDS_AT_ANNOTATION, OUTCOME_ANNOTATION,
};
use crate::actors::quantity;
use crate::kinds::migrations;
use crate::objects::{Migration, Pod, Vmi};
use crate::store::{Kind, Patch, Store};
use crate::ApiError;

impl MigrationController {
    /// The target pod runs: the migration runs from now, and ends after its duration.
    pub(super) fn start(
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
        let labels = |object: Option<&Value>| -> BTreeMap<Str<'static>, Str<'static>> {
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
}
