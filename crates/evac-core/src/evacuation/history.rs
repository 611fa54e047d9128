//! What the migrations say: which VMIs are migrating, how their past evacuations ended, and how
//! many migrations count against the parallel limits.

use std::collections::HashMap;

use crate::model::time::unix_seconds;
use crate::model::Migration;

/// The first wait after a failed evacuation migration; it doubles with each failure in a row.
pub const BACKOFF_START_SECONDS: f64 = 20.0;
/// The longest wait between evacuation attempts: KubeVirt's, which reaches 320 s after five
/// failures in a row and no more, since its migration controller keeps only the last five finished
/// migrations of a VMI (`garbageCollectFinalizedMigrations`) and `handleMigrationBackoff` doubles
/// once per failure it finds.
pub const BACKOFF_MAX_SECONDS: f64 = 320.0;

/// One VMI's migrations.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct History {
    /// A migration of the VMI is not finished.
    pub active: bool,
    /// Failed evacuation migrations since the VMI's last successful migration.
    pub failures: u32,
    /// When the last of those failures ended; `None` when it cannot be dated.
    pub last_failure: Option<f64>,
}

impl History {
    /// When the next evacuation attempt may start: never before `now` when nothing failed, or when
    /// the last failure cannot be dated (waiting on an undatable failure would wait forever).
    pub fn retry_at(&self) -> Option<f64> {
        let last = self.last_failure?;
        (self.failures > 0).then(|| last + backoff_seconds(self.failures))
    }
}

/// KubeVirt's back-off after `failures` failed evacuation migrations in a row: 20 s, doubling,
/// at most 320 s.
pub fn backoff_seconds(failures: u32) -> f64 {
    let doublings = failures.saturating_sub(1).min(16);
    (BACKOFF_START_SECONDS * f64::from(1u32 << doublings)).min(BACKOFF_MAX_SECONDS)
}

/// A VMI: (namespace, name).
pub(super) type VmiKey<'m> = (&'m str, &'m str);

/// The histories of every VMI with migrations.
pub(super) fn histories<'m>(migrations: &'m [Migration<'_>]) -> HashMap<VmiKey<'m>, History> {
    // Finished migrations in the order they ended: "in a row" needs an order, and a success
    // resets the count. Undatable ones sort first, as the oldest.
    let mut finished: HashMap<VmiKey<'_>, Vec<(f64, &str, &Migration<'_>)>> = HashMap::new();
    let mut result: HashMap<VmiKey<'_>, History> = HashMap::new();
    for migration in migrations {
        let key = (migration.metadata.namespace.as_str(), migration.spec.vmi_name.as_str());
        if migration.is_active() {
            result.entry(key).or_default().active = true;
        } else {
            let at = ended_at(migration).unwrap_or(f64::NEG_INFINITY);
            finished.entry(key).or_default().push((at, migration.metadata.name.as_str(), migration));
        }
    }
    for (key, mut ended) in finished {
        ended.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
        let history = result.entry(key).or_default();
        for (_, _, migration) in ended {
            if !migration.is_failed() {
                history.failures = 0;
                history.last_failure = None;
            } else if migration.metadata.deletion_timestamp.is_some() {
                // Deleted (cancelled): KubeVirt fails it on its way out, and its back-off skips it.
            } else if migration.evacuation_node().is_some() {
                // A failed migration someone else asked for neither counts nor resets.
                history.failures += 1;
                history.last_failure = ended_at(migration);
            }
        }
    }
    result
}

/// The unfinished migrations of every VMI that has some.
pub(super) fn unfinished<'m, 'a>(
    migrations: &'m [Migration<'a>],
) -> HashMap<VmiKey<'m>, Vec<&'m Migration<'a>>> {
    let mut result: HashMap<VmiKey<'m>, Vec<&'m Migration<'a>>> = HashMap::new();
    for migration in migrations.iter().filter(|m| m.is_active()) {
        let key = (migration.metadata.namespace.as_str(), migration.spec.vmi_name.as_str());
        result.entry(key).or_default().push(migration);
    }
    result
}

/// When a migration ended ([`Migration::ended_at`]), else its creation.
fn ended_at(migration: &Migration<'_>) -> Option<f64> {
    migration.ended_at().or_else(|| migration.metadata.creation_timestamp.as_deref().and_then(unix_seconds))
}

/// Active migrations counted against the parallel limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Load {
    /// In the whole cluster.
    pub cluster: u32,
    /// Away from the node decided.
    pub outbound: u32,
}

/// Counts the active migrations, cluster-wide and outbound from `node`: an evacuation migration
/// names its source node in its annotation before its state does.
pub(super) fn load(migrations: &[Migration<'_>], node: &str) -> Load {
    let mut load = Load::default();
    for migration in migrations.iter().filter(|m| m.is_active()) {
        load.cluster += 1;
        let outbound = migration.evacuation_node().is_some_and(|n| n == node)
            || migration.status.migration_state.source_node == node;
        load.outbound += u32::from(outbound);
    }
    load
}

/// Until when KubeVirt's migration controller holds an evacuation migration Pending after earlier
/// ones failed (`handleMigrationBackoff`, `pkg/virt-controller/watch/migration/migration.go`):
/// only the newest evacuation migration of its VMI is held; each failed evacuation migration
/// since the last success doubles the wait, from 20 s, counted from the end of the previous one.
/// `of_vmi`: every migration of the same VMI. `Some(until)`: the migration waits until then
/// (seconds since the Unix epoch; a time past means it may go); `None`: it never waits. KubeVirt
/// keeps the last five finished migrations of a VMI, so the longest wait it reaches is 320 s.
pub fn kubevirt_backoff_until(migration: &Migration<'_>, of_vmi: &[Migration<'_>]) -> Option<f64> {
    migration.evacuation_node()?;
    let mut eligible: Vec<&Migration<'_>> = of_vmi.iter().filter(|m| m.evacuation_node().is_some()).collect();
    if eligible.len() < 2 {
        return None;
    }
    // Newest first, by creation.
    let created = |m: &Migration<'_>| m.metadata.creation_timestamp.as_deref().and_then(unix_seconds);
    eligible.sort_by(|a, b| {
        created(b).unwrap_or(f64::NEG_INFINITY).total_cmp(&created(a).unwrap_or(f64::NEG_INFINITY))
    });
    if eligible[0].metadata.name != migration.metadata.name {
        return None;
    }
    let mut backoff = 0.0;
    for earlier in &eligible[1..] {
        match earlier.status.phase.as_str() {
            "Succeeded" => break,
            _ if earlier.metadata.deletion_timestamp.is_some() => continue,
            "Failed" => backoff = if backoff == 0.0 { BACKOFF_START_SECONDS } else { backoff * 2.0 },
            _ => {}
        }
    }
    let until = ended_at(eligible[1])? + backoff;
    (backoff > 0.0).then_some(until)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (failures in a row, when the last one ended, when the next attempt may start): KubeVirt's
    /// back-off from the last failure; no wait when nothing failed or the failure has no date.
    #[test]
    fn retry_after_the_last_failure() {
        let rows = [
            (0, None, None),
            (0, Some(1_000.0), None),
            (1, None, None),
            (1, Some(1_000.0), Some(1_020.0)),
            (2, Some(1_000.0), Some(1_040.0)),
            (4, Some(1_000.0), Some(1_160.0)),
            (5, Some(1_000.0), Some(1_320.0)),
            (9, Some(1_000.0), Some(1_320.0)),
        ];
        for (failures, last_failure, retry_at) in rows {
            let history = History { active: false, failures, last_failure };
            assert_eq!(history.retry_at(), retry_at, "{failures} failures, last {last_failure:?}");
        }
    }
}
