//! The final report of a scenario run: per VM, migrated / shut down / restarted / untouched with
//! the disruption's cause; migrations and the most that ran at once; evictions by actor.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::spec::Section;
use crate::sim::actors::descheduler::DeschedulerStats;
use crate::sim::actors::drain::DrainState;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub scenario: String,
    /// Simulated time the run covered, in seconds.
    pub simulated_seconds: f64,
    pub vms: VmCounts,
    /// The VMs something happened to.
    pub disrupted_vms: Vec<VmOutcome>,
    pub migrations: MigrationCounts,
    /// Eviction requests (through `pods/eviction`) and disruptions (`DisruptionTarget`), by actor.
    pub evictions: BTreeMap<String, EvictionCounts>,
    pub drains: Vec<DrainReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub descheduler: Option<DeschedulerStats>,
    /// What evac's controller did, when the scenario ran with evac.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerStats>,
}

/// `evac control`'s work over a run.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerStats {
    pub passes: usize,
    pub evaluations: usize,
    pub effects_applied: usize,
    pub effects_failed: usize,
    /// Wall time of one pass (reading changes, evaluating, carrying out effects), in ms.
    pub reconcile_ms_p50: f64,
    pub reconcile_ms_p99: f64,
    pub reconcile_ms_max: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VmCounts {
    pub total: usize,
    pub migrated: usize,
    pub shut_down: usize,
    pub restarted: usize,
    pub untouched: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Migrated,
    ShutDown,
    Restarted,
    Untouched,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Migrated => "migrated",
            Self::ShutDown => "shut down",
            Self::Restarted => "restarted",
            Self::Untouched => "untouched",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VmOutcome {
    /// namespace/name
    pub vm: String,
    pub outcome: Outcome,
    pub cause: String,
    pub migrations: usize,
    pub failed_migrations: usize,
    pub node_before: String,
    pub node_after: String,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationCounts {
    pub created: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub max_running_in_cluster: usize,
    pub max_running_from_a_node: usize,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionCounts {
    pub requested: usize,
    pub accepted: usize,
    pub refused: usize,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainReport {
    pub node: String,
    /// When the node was empty, in simulated seconds (none: it never was).
    pub finished_at: Option<f64>,
    #[serde(flatten)]
    pub state: DrainState,
}

impl Report {
    /// The report as text for a terminal.
    pub fn render(&self) -> String {
        self.render_sections(&[Section::Vms, Section::Migrations, Section::Evictions])
    }

    /// The chosen sections of the report as text (the summary line always).
    pub fn render_sections(&self, sections: &[Section]) -> String {
        let mut out = String::new();
        let v = &self.vms;
        let _ = writeln!(out, "\n== {} ({:.0}s simulated)", self.scenario, self.simulated_seconds);
        let _ = writeln!(
            out,
            "VMs: {} total: {} migrated, {} shut down, {} restarted, {} untouched",
            v.total, v.migrated, v.shut_down, v.restarted, v.untouched
        );
        if sections.contains(&Section::Vms) && !self.disrupted_vms.is_empty() {
            let _ = writeln!(
                out,
                "\n{:<32} {:<10} {:<22} {:>4} {:<12} {:<12}",
                "VM", "OUTCOME", "CAUSE", "MIG", "FROM", "TO"
            );
            for vm in &self.disrupted_vms {
                let migrations = if vm.failed_migrations > 0 {
                    format!("{}+{}f", vm.migrations, vm.failed_migrations)
                } else {
                    vm.migrations.to_string()
                };
                let _ = writeln!(
                    out,
                    "{:<32} {:<10} {:<22} {:>4} {:<12} {:<12}",
                    vm.vm,
                    vm.outcome.as_str(),
                    vm.cause,
                    migrations,
                    vm.node_before,
                    vm.node_after
                );
            }
        }
        let m = &self.migrations;
        if sections.contains(&Section::Migrations) {
            let _ = writeln!(
            out,
            "\nMigrations: {} created, {} succeeded, {} failed; at most {} running in the cluster, {} from one node",
                m.created, m.succeeded, m.failed, m.max_running_in_cluster, m.max_running_from_a_node
            );
        }
        if !sections.contains(&Section::Evictions) {
            return out;
        }
        if !self.evictions.is_empty() {
            let _ = writeln!(out, "Evictions by actor:");
            for (actor, counts) in &self.evictions {
                let _ = writeln!(
                    out,
                    "  {actor:<22} {} requested, {} accepted, {} refused",
                    counts.requested, counts.accepted, counts.refused
                );
            }
        }
        for drain in &self.drains {
            let finished =
                drain.finished_at.map_or("not finished".to_owned(), |at| format!("finished at {at:.0}s"));
            let error = drain.state.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "Drain of {}: {finished}, {} eviction requests, {} refused with 429{error}",
                drain.node, drain.state.requests, drain.state.refused
            );
        }
        if let Some(d) = &self.descheduler {
            let most = d.per_cycle.iter().map(|c| c.requests).max().unwrap_or(0);
            let _ = writeln!(
                out,
                "Descheduler: {} cycles, {} eviction requests (at most {most} in a cycle), {} evicted, {} evacuations in background, {} failed",
                d.cycles, d.requests, d.pods_evicted, d.pod_evacuations, d.failures
            );
        }
        out
    }
}
