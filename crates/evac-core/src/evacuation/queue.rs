//! KubeVirt's migration queue as evac foresees it: when a migration queued now would start, so
//! that a VM whose pod has a deadline is marked early enough beside KubeVirt's evacuation
//! controller, and so that migrations of VMs without one do not take the slots it needs.
//!
//! KubeVirt's migration controller (`pkg/virt-controller/watch/migration/migration.go`,
//! `handleTargetPodCreation`) gives a pending migration its target pod only while fewer than
//! `parallelMigrationsPerCluster` migrations have one, and fewer than
//! `parallelOutboundMigrationsPerNode` from its node; a migration that has one is never
//! pre-empted. Pending migrations wait in controller-runtime's priority queue
//! (`pkg/controller/priorityqueue/priorityqueue.go`, `less`): the highest `spec.priority` first,
//! then the order they were added (`AddedCounter`). One that finds no slot is added back after a
//! delay set by its priority, in the order it was taken, and a freed slot re-adds the waiting ones
//! without changing their counters (`reEnqueueHighestPriorityPendingMigrations`), so among equal
//! priorities the queue keeps the order the migrations were created in.
//!
//! Only virt-controller may set a migration's priority (virt-api's migration admitter refuses it
//! from anyone else), so evac cannot put a migration ahead. What it can do is delete a pending
//! migration of a VM that has no deadline (an API eviction's, a drain's, the descheduler's):
//! the VMI stays marked, and KubeVirt's evacuation controller creates the migration again at once
//! (`sync` creates one for every marked VMI without one), behind those queued meanwhile.

use crate::effect::{MigrationCause, CAUSE_ANNOTATION};
use crate::model::time::unix_seconds;
use crate::model::Migration;

/// Causes whose VMs have no deadline: their pods stay until the VM has left (an eviction
/// answered 429 deletes nothing; KubeVirt's drain taint deletes nothing), so their migrations
/// lose nothing by waiting behind a VM whose pod is being deleted.
const WITHOUT_DEADLINE: [MigrationCause; 3] =
    [MigrationCause::ApiEviction, MigrationCause::Drain, MigrationCause::Descheduler];

/// Whether a migration's recorded cause says its VM has no deadline. A migration without a
/// recorded cause is not one: evac does not know why it runs.
pub(super) fn without_deadline(migration: &Migration<'_>) -> bool {
    migration
        .metadata
        .annotation(CAUSE_ANNOTATION)
        .is_some_and(|cause| WITHOUT_DEADLINE.iter().any(|c| c.as_str() == &*cause))
}

/// The queue position KubeVirt's priority queue gives a migration: its `spec.priority`, higher
/// first, then its creation (oldest first) and its name.
pub(super) fn position<'m>(migration: &'m Migration<'_>) -> (core::cmp::Reverse<u32>, &'m str, &'m str) {
    (
        core::cmp::Reverse(queue_priority(migration.spec.priority.as_deref())),
        migration.metadata.creation_timestamp.as_deref().unwrap_or(""),
        migration.metadata.name.as_str(),
    )
}

/// `migrationsutil.PriorityFromMigration`: `system-critical` 100, `user-triggered` 50,
/// `system-maintenance` 20, none 0.
fn queue_priority(priority: Option<&str>) -> u32 {
    match priority {
        Some("system-critical") => 100,
        Some("user-triggered") => 50,
        Some("system-maintenance") => 20,
        _ => 0,
    }
}

/// The migration slots over time: when each migration holds one, from when to when.
#[derive(Debug, Clone)]
pub(super) struct Forecast {
    per_cluster: usize,
    per_node: usize,
    now: f64,
    /// (start, end, from the node decided).
    held: Vec<(f64, f64, bool)>,
    /// The latest start given out: the queue starts migrations in its order.
    last_start: f64,
}

impl Forecast {
    /// Empty slots at `now`, under KubeVirt's two limits (at least one each).
    pub fn new(per_cluster: u32, per_node: u32, now: f64) -> Self {
        Self {
            per_cluster: per_cluster.max(1) as usize,
            per_node: per_node.max(1) as usize,
            now,
            held: Vec::new(),
            last_start: now,
        }
    }

    /// A migration that has its slot already, until `end`.
    pub fn holding(&mut self, end: f64, from_node: bool) {
        self.held.push((self.now, end.max(self.now), from_node));
    }

    /// Queues a migration of `seconds` behind everything queued so far: when it starts and ends.
    pub fn queue(&mut self, seconds: f64, from_node: bool) -> (f64, f64) {
        let mut times: Vec<f64> = self.held.iter().map(|h| h.1).filter(|t| *t > self.last_start).collect();
        times.push(self.last_start);
        times.sort_by(f64::total_cmp);
        let start = times.into_iter().find(|&t| self.free_at(t, from_node)).unwrap_or(f64::INFINITY);
        let end = start + seconds.max(0.0);
        self.held.push((start, end, from_node));
        self.last_start = start;
        (start, end)
    }

    /// Whether a slot is free at `t`: every migration queued so far started by then.
    fn free_at(&self, t: f64, from_node: bool) -> bool {
        let holding = self.held.iter().filter(|(start, end, _)| *start <= t && t < *end);
        let (cluster, node) = holding.fold((0, 0), |(c, n), h| (c + 1, n + usize::from(h.2)));
        cluster < self.per_cluster && (!from_node || node < self.per_node)
    }
}

/// An unfinished migration, as the forecast needs it.
pub(super) struct Entry<'m, 'a> {
    pub migration: &'m Migration<'a>,
    /// How long it holds its slot: what is left of it once started, all of it before.
    pub seconds: f64,
    /// It moves a VM away from the node decided.
    pub from_node: bool,
    /// When its VM must be gone, for a VMI of the node decided whose pod is being deleted;
    /// infinite otherwise.
    pub deadline: f64,
}

impl Entry<'_, '_> {
    /// A migration of a VM without a deadline: one that may wait behind any VM with one.
    fn may_wait(&self) -> bool {
        self.deadline.is_infinite() && without_deadline(self.migration)
    }
}

/// What the queue holds for the node decided.
pub(super) struct Outlook<'m, 'a> {
    /// The slots after every migration that stays ahead of a migration queued now.
    pub forecast: Forecast,
    /// Pending migrations of VMs without a deadline, ahead of a pending one of this node's VMs
    /// whose pod has one: deleted, KubeVirt creates them again behind it.
    pub requeue: Vec<&'m Migration<'a>>,
}

/// The queue as it stands: started migrations hold their slots; pending ones wait in KubeVirt's
/// order, and those of VMs without a deadline go behind the VMs with one (the next pass requeues
/// any still ahead of such a VM's migration: `requeue`).
pub(super) fn outlook<'m, 'a>(
    mut entries: Vec<Entry<'m, 'a>>,
    per_cluster: u32,
    per_node: u32,
    now: f64,
) -> Outlook<'m, 'a> {
    let mut forecast = Forecast::new(per_cluster, per_node, now);
    entries.sort_by(|a, b| position(a.migration).cmp(&position(b.migration)));
    let last_with_deadline =
        entries.iter().rposition(|e| e.migration.is_unstarted() && e.from_node && e.deadline.is_finite());
    for entry in entries.iter().filter(|e| !e.migration.is_unstarted()) {
        forecast.holding(now + entry.seconds, entry.from_node);
    }
    // Requeued: those ahead of the last such migration and created before it. Creation times are
    // whole seconds and the queue's order within one second is not known: a migration created in
    // the same second keeps its place, so that one created again is never requeued again.
    let created = |m: &Migration<'_>| m.metadata.creation_timestamp.as_deref().and_then(unix_seconds);
    let behind = last_with_deadline.and_then(|last| Some((last, created(entries[last].migration)?)));
    let mut requeue = Vec::new();
    for (i, entry) in entries.iter().enumerate().filter(|(_, e)| e.migration.is_unstarted()) {
        if entry.may_wait() {
            let ahead =
                behind.is_some_and(|(last, at)| i < last && created(entry.migration).is_some_and(|c| c < at));
            if ahead && entry.migration.metadata.deletion_timestamp.is_none() {
                requeue.push(entry.migration);
            }
        } else {
            forecast.queue(entry.seconds, entry.from_node);
        }
    }
    Outlook { forecast, requeue }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One slot busy until 138 s: the next migrations follow each other in queue order.
    #[test]
    fn migrations_follow_each_other_through_one_slot() {
        let mut forecast = Forecast::new(1, 2, 12.0);
        forecast.holding(138.0, false);
        assert_eq!(forecast.queue(64.0, true), (138.0, 202.0));
        assert_eq!(forecast.queue(64.0, true), (202.0, 266.0));
        assert_eq!(forecast.queue(256.0, true), (266.0, 522.0));
    }

    /// Five slots in the cluster, two from the node: the node's third waits for one of its own.
    #[test]
    fn the_per_node_limit_holds_back_the_nodes_third() {
        let mut forecast = Forecast::new(5, 2, 0.0);
        assert_eq!(forecast.queue(100.0, true), (0.0, 100.0));
        assert_eq!(forecast.queue(50.0, true), (0.0, 50.0));
        assert_eq!(forecast.queue(10.0, true), (50.0, 60.0));
        // Another node's migration queued after it starts no earlier than it did.
        assert_eq!(forecast.queue(10.0, false), (50.0, 60.0));
    }

    /// KubeVirt's queue order: priority, then age, then name.
    #[test]
    fn queue_positions_follow_priority_then_age() {
        let migration = |name: &str, created: &str, priority: Option<&str>| {
            let mut value = serde_json::json!({"metadata": {"name": name, "creationTimestamp": created}});
            if let Some(p) = priority {
                value["spec"] = serde_json::json!({"priority": p});
            }
            serde_json::to_string(&value).unwrap()
        };
        let texts = [
            migration("old-maintenance", "2026-01-01T00:00:00Z", Some("system-maintenance")),
            migration("new-critical", "2026-01-01T00:00:09Z", Some("system-critical")),
            migration("old-critical", "2026-01-01T00:00:01Z", Some("system-critical")),
            migration("none", "2026-01-01T00:00:00Z", None),
        ];
        let mut migrations: Vec<Migration<'_>> =
            texts.iter().map(|t| serde_json::from_str(t).unwrap()).collect();
        migrations.sort_by(|a, b| position(a).cmp(&position(b)));
        let names: Vec<&str> = migrations.iter().map(|m| m.metadata.name.as_str()).collect();
        assert_eq!(names, ["old-critical", "new-critical", "old-maintenance", "none"]);
    }

    #[test]
    fn only_causes_without_a_deadline_may_wait() {
        for (cause, waits) in [
            (Some("api-eviction"), true),
            (Some("drain"), true),
            (Some("descheduler"), true),
            (Some("noexecute-taint"), false),
            (Some("preemption"), false),
            (Some("node-pressure"), false),
            (None, false),
        ] {
            let mut value = serde_json::json!({"metadata": {"name": "m"}});
            if let Some(cause) = cause {
                value["metadata"]["annotations"] = serde_json::json!({CAUSE_ANNOTATION: cause});
            }
            let text = serde_json::to_string(&value).unwrap();
            let migration: Migration<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(without_deadline(&migration), waits, "{cause:?}");
        }
    }
}
