//! The observer's view of migrations: each one's life, the parallel limits as they were used,
//! and the VMs they moved (or failed to).

use super::{vm_key, MigrationTrack, Observed};
use crate::actors::migration::RUNNING_PHASES;
use crate::objects::{Migration, Vmi};
use crate::store::{Event, EventType, Store};

impl Observed {
    /// A migration added, changed or deleted.
    pub(super) fn migration(&mut self, at: f64, event: &Event, store: &Store) {
        let migration = Migration(&event.object);
        let name = migration.meta().name();
        let key = vm_key(migration.0, migration.vmi_name());
        let id = format!("migration/{}", migration.meta().key());
        // evac records why it migrates, when it creates the migration or, beside KubeVirt's
        // evacuation controller, just after: a VM it moved before anything else touched it (node
        // pressure, ahead of the kubelet) has no other cause.
        if event.type_ != EventType::Deleted {
            if let Some(cause) = migration.meta().annotation(evac_core::effect::CAUSE_ANNOTATION) {
                self.note_cause_at(&key, &migration_cause_name(cause), at);
            }
        }
        if event.type_ == EventType::Added {
            self.migration_added(at, &id, name, &key);
        }
        if event.type_ == EventType::Deleted {
            self.migration_deleted(at, &id, name, &key);
            return;
        }
        let phase = migration.phase().unwrap_or_default().to_owned();
        let before = self.phases.insert(id.clone(), phase.clone()).unwrap_or_default();
        if before == phase {
            return;
        }
        let counted = RUNNING_PHASES.contains(&phase.as_str());
        if counted && !self.running_from.contains_key(&id) {
            let source = migration
                .source_node()
                .or_else(|| migration.meta().annotation(evac_core::effect::EVACUATION_MIGRATION_ANNOTATION))
                .map(str::to_owned)
                .or_else(|| vmi_node(store, migration.meta().namespace(), migration.vmi_name()))
                .unwrap_or_default();
            self.start_running(at, &id, source);
        } else if !counted {
            self.stop_running(at, &id);
        }
        let source = migration.source_node().unwrap_or_default();
        let target = migration.target_node().unwrap_or_default();
        let from = self.running_from.get(&id).map_or(source, String::as_str).to_owned();
        self.recorder.migration(&key, &id, &from, target, counted);
        self.update_track(at, &id, &phase, counted, &from, target);
        match phase.as_str() {
            "Running" => self.log(at, format!("migration {name}: VM {key} {source} -> {target} started")),
            "Succeeded" => {
                self.migration_succeeded(at, name, &key, target);
                let now_on = vmi_node(store, migration.meta().namespace(), migration.vmi_name());
                if target.is_empty() || now_on.as_deref() != Some(target) {
                    self.violation(format!(
                        "migration {name} succeeded, but VM {key} runs on {}, not on its target {target:?}",
                        now_on.as_deref().unwrap_or("no node (its VMI is gone)")
                    ));
                }
            }
            "Failed" => self.migration_failed(at, name, &key, source),
            _ => {}
        }
    }

    /// A new migration: its track, and a violation if its VM now has two unfinished.
    fn migration_added(&mut self, at: f64, id: &str, name: &str, key: &str) {
        self.migration_index.insert(id.to_owned(), self.migration_tracks.len());
        self.migration_tracks.push(MigrationTrack {
            name: name.to_owned(),
            vm: key.to_owned(),
            created_at: at,
            ..MigrationTrack::default()
        });
        self.migrations_created += 1;
        let unfinished = self.unfinished.entry(key.to_owned()).or_default();
        unfinished.insert(name.to_owned());
        if unfinished.len() == 2 {
            let both = unfinished.iter().cloned().collect::<Vec<_>>().join(", ");
            self.violation(format!("VM {key} had two unfinished migrations at once: {both}"));
        }
    }

    /// A migration deleted: one deleted before it finished (its VMI gone) failed, its VM did not
    /// move; one deleted before it started (an evacuation called off) tried nothing.
    fn migration_deleted(&mut self, at: f64, id: &str, name: &str, key: &str) {
        let before = self.phases.remove(id).unwrap_or_default();
        if let Some(track) = self.migration_index.remove(id).map(|i| &mut self.migration_tracks[i]) {
            if track.ended_at.is_none() {
                track.ended_at = Some(at);
                let cancelled = matches!(before.as_str(), "" | "Pending");
                track.phase = if cancelled { "Cancelled" } else { "Deleted" }.to_owned();
            }
        }
        self.stop_running(at, id);
        self.recorder.migration(key, id, "", "", false);
        self.finish(key, name);
        if matches!(before.as_str(), "" | "Pending") {
            self.migrations_cancelled += 1;
            self.log(at, format!("migration {name}: deleted before it started, VM {key} stays"));
        } else if !matches!(before.as_str(), "Succeeded" | "Failed") {
            self.migrations_failed += 1;
            self.vms.entry(key.to_owned()).or_default().failed_migrations += 1;
            self.log(at, format!("migration {name}: deleted unfinished, VM {key} did not migrate"));
        }
    }

    /// A migration's track after a change of phase: when it began to count, started and ended,
    /// its phase, and its nodes once known.
    fn update_track(&mut self, at: f64, id: &str, phase: &str, counted: bool, from: &str, target: &str) {
        let Some(track) = self.migration_index.get(id).map(|&i| &mut self.migration_tracks[i]) else {
            return;
        };
        phase.clone_into(&mut track.phase);
        if counted && track.counted_from.is_none() {
            track.counted_from = Some(at);
        }
        if phase == "Running" && track.started_at.is_none() {
            track.started_at = Some(at);
        }
        if matches!(phase, "Succeeded" | "Failed") {
            track.ended_at = Some(at);
        }
        if !from.is_empty() {
            from.clone_into(&mut track.source);
        }
        if !target.is_empty() {
            target.clone_into(&mut track.target);
        }
    }

    /// A migration succeeded: its VM migrated.
    fn migration_succeeded(&mut self, at: f64, name: &str, key: &str, target: &str) {
        self.finish(key, name);
        self.migrations_succeeded += 1;
        let history = self.vms.entry(key.to_owned()).or_default();
        history.migrations += 1;
        history.migrated_at = Some(at);
        self.log(at, format!("migration {name}: VM {key} now runs on {target}"));
    }

    /// A migration failed: its VM stays.
    fn migration_failed(&mut self, at: f64, name: &str, key: &str, source: &str) {
        self.finish(key, name);
        self.migrations_failed += 1;
        self.vms.entry(key.to_owned()).or_default().failed_migrations += 1;
        // One that failed before it ran has no source node in its state.
        let message = if source.is_empty() {
            format!("migration {name}: VM {key} failed before it started, and stays")
        } else {
            format!("migration {name}: VM {key} failed to migrate from {source}")
        };
        self.log(at, message);
    }

    /// A migration counts against the parallel limits, leaving `source`, from now on.
    fn start_running(&mut self, at: f64, id: &str, source: String) {
        self.running += 1;
        let on_node = self.running_by_node.entry(source.clone()).or_default();
        *on_node += 1;
        self.max_running_on_a_node = self.max_running_on_a_node.max(*on_node);
        self.max_running = self.max_running.max(self.running);
        let now_on_node = *on_node;
        self.running_from.insert(id.to_owned(), source);
        self.recorder.running(at, self.running, now_on_node - 1, now_on_node);
    }

    /// A migration no longer counts against the parallel limits.
    fn stop_running(&mut self, at: f64, id: &str) {
        if let Some(source) = self.running_from.remove(id) {
            self.running -= 1;
            if let Some(n) = self.running_by_node.get_mut(&source) {
                *n -= 1;
                let now_on_node = *n;
                self.recorder.running(at, self.running, now_on_node + 1, now_on_node);
            }
        }
    }

    /// A migration of `vm` is finished.
    fn finish(&mut self, vm: &str, migration: &str) {
        if let Some(unfinished) = self.unfinished.get_mut(vm) {
            unfinished.remove(migration);
        }
    }
}

/// The cause evac records on a migration, in the report's words.
fn migration_cause_name(cause: &str) -> String {
    match cause {
        "preemption" => "scheduler preemption".to_owned(),
        "noexecute-taint" => "NoExecute taint".to_owned(),
        "node-pressure" => "node pressure".to_owned(),
        "drain" => "kubectl drain".to_owned(),
        "api-eviction" => "API eviction".to_owned(),
        other => other.to_owned(),
    }
}

/// Where a VMI runs now.
fn vmi_node(store: &Store, namespace: &str, name: &str) -> Option<String> {
    let vmi = store.get(&crate::kinds::vmis(), namespace, name).ok()?;
    Vmi(&vmi).node_name().map(str::to_owned)
}
