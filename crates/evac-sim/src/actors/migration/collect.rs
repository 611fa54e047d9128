//! KubeVirt's garbage collection of finished migrations.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::kinds::{migrations, pods};
use crate::objects::Migration;
use crate::store::{deleted, Store};
use crate::ApiError;

/// How many finished migrations of a VMI KubeVirt keeps
/// (`defaultFinalizedMigrationGarbageCollectionBuffer`).
pub const FINISHED_KEPT_PER_VMI: usize = 5;

/// KubeVirt's `garbageCollectFinalizedMigrations`: of each VMI's finished migrations (not being
/// deleted), oldest first by creation, all but the newest [`FINISHED_KEPT_PER_VMI`] are deleted,
/// with the pod each left behind (a failed one's target pod, a succeeded one's source pod). Since
/// `handleMigrationBackoff` counts only the failures still there, its wait never passes 320 s.
pub(super) fn collect_finished(store: &Store, all: &[Arc<Value>]) -> Result<(), ApiError> {
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
