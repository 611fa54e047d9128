//! The final report of a scenario run: per VM, migrated / shut down / restarted / untouched with
//! the disruption's cause; migrations and the most that ran at once; evictions by actor.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

pub use super::invariants::{Blocker, EventLine};
use super::observer::MigrationTrack;
use super::spec::Section;
use super::track::Track;
use crate::actors::descheduler::DeschedulerStats;
use crate::actors::drain::DrainState;

/// What a scenario run did, as text for a terminal ([`Report::render`]) or as JSON.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The scenario's `name`.
    pub scenario: String,
    /// Simulated time the run covered, in seconds.
    pub simulated_seconds: f64,
    /// Every VM, counted by outcome.
    pub vms: VmCounts,
    /// The VMs something happened to.
    pub disrupted_vms: Vec<VmOutcome>,
    /// Migrations created, succeeded and failed, and the most running at once.
    pub migrations: MigrationCounts,
    /// Every migration's life (created, counted against the limits, started, ended, how, from
    /// and to), in the order they were created.
    pub migration_timeline: Vec<MigrationTrack>,
    /// Eviction requests (through `pods/eviction`) and disruptions (`DisruptionTarget`), by actor.
    pub evictions: BTreeMap<String, EvictionCounts>,
    /// Each `kubectl drain`: its node, when it finished, and its eviction requests.
    pub drains: Vec<DrainReport>,
    /// What the descheduler did, when the scenario ran one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub descheduler: Option<DeschedulerStats>,
    /// What evac's controller did, when the scenario ran with evac.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerStats>,
    /// With evac: every effect its policies returned, by `<policy> <effect> <outcome>`; in
    /// monitor mode (`monitored`), what evac would have done.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub evac_effects: BTreeMap<String, usize>,
    /// What KubeVirt's virt-handler did at a launcher pod's SIGTERM in this run: `stock` (shut
    /// the guest down) or `proposal` (kept it running until the pod's grace period ended).
    pub virt_handler: &'static str,
    /// The pods that preempted others, and how long they waited.
    pub preemptors: Vec<PreemptorWait>,
    /// The launcher pods evac held, and why each hold ended.
    pub holds: Vec<HoldRecord>,
    /// The events evac recorded on VMIs: evacuations given up, migrations not started and why.
    pub events: Vec<EventLine>,
    /// What must never happen and did: two unfinished migrations of a VMI, a migration
    /// succeeded whose VM is not on its target, parallel limits exceeded, pods outliving their
    /// VMI. Empty in every correct run.
    pub invariant_violations: Vec<String>,
    /// The run over time, for pictures ([`super::html`]); not in the JSON report.
    #[serde(skip)]
    pub track: Track,
}

/// `evac control`'s work over a run.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerStats {
    /// Reconcile passes of the controller.
    pub passes: usize,
    /// Policy evaluations, over all passes.
    pub evaluations: usize,
    /// Effects carried out.
    pub effects_applied: usize,
    /// Effects whose write failed.
    pub effects_failed: usize,
    /// Effects recorded and not carried out: its policies run in monitor mode.
    pub effects_monitored: usize,
    /// The median wall time of a pass (reading changes, evaluating, carrying out effects), in ms.
    pub reconcile_ms_p50: f64,
    /// The 99th percentile of a pass's wall time, in ms.
    pub reconcile_ms_p99: f64,
    /// The longest pass's wall time, in ms.
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

/// What became of a VM in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Live-migrated, and never stopped.
    Migrated,
    /// Stopped, and not running at the end.
    ShutDown,
    /// Stopped, then started again by its run strategy `Always` (a new launcher pod).
    Restarted,
    /// Neither migrated nor stopped.
    Untouched,
}

impl Outcome {
    /// The outcome in the report's words, e.g. `shut down`.
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
    /// When something first acted on it (an eviction request, a disruption, a deletion, a
    /// migration with a cause), in simulated seconds.
    pub disrupted_at: Option<f64>,
    /// When its launcher pod's hold ended (SIGTERM came), if evac held it.
    pub held_until: Option<f64>,
    /// When it first stopped.
    pub stopped_at: Option<f64>,
    /// When its last migration succeeded.
    pub migrated_at: Option<f64>,
}

/// A pod that preempted others: how long it waited for room.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreemptorWait {
    /// namespace/name
    pub pod: String,
    /// The node it was pinned to, or bound to.
    pub node: String,
    /// When it was created, in simulated seconds.
    pub created_at: f64,
    /// When it was bound (none: never).
    pub bound_at: Option<f64>,
    /// From its creation to its binding, or to the end of the run.
    pub waited_seconds: f64,
}

/// A launcher pod whose termination evac held.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldRecord {
    /// namespace/name of the pod.
    pub pod: String,
    /// namespace/name of its VM.
    pub vm: String,
    /// When the hold began, in simulated seconds.
    pub started_at: f64,
    /// When it ended (the pod's SIGTERM; none: it had not ended).
    pub ended_at: Option<f64>,
    /// Why it ended: the hold decision's reason (`migrated`, `given-up`, ...), the hook's failure
    /// (`hook failed: ...`), or `grace period over`.
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationCounts {
    /// VMIs marked for evacuation (`status.evacuationNodeName` set), by anyone.
    pub marks: usize,
    /// Marks taken off VMIs that had not left their node.
    pub marks_cleared: usize,
    /// Launcher pods annotated `eviction-in-progress`.
    pub in_progress_annotations: usize,
    pub created: usize,
    pub succeeded: usize,
    pub failed: usize,
    /// Deleted before they started (no target pod yet): an evacuation called off, or a VMI gone.
    pub cancelled: usize,
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
    /// When it did not finish: the pods still on the node, and why each stayed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<Blocker>,
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
        let _ = writeln!(
            out,
            "\n== {} ({:.0}s simulated, {} virt-handler)",
            self.scenario, self.simulated_seconds, self.virt_handler
        );
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
        if sections.contains(&Section::Vms) && !self.holds.is_empty() {
            let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
            for hold in &self.holds {
                *reasons.entry(hold.reason.as_str()).or_default() += 1;
            }
            let reasons: Vec<String> = reasons.iter().map(|(why, n)| format!("{n} {why}")).collect();
            let longest =
                self.holds.iter().filter_map(|h| Some(h.ended_at? - h.started_at)).fold(0.0, f64::max);
            let _ = writeln!(
                out,
                "\nHolds: {} launcher pods held, the longest {longest:.0} s; ended: {}",
                self.holds.len(),
                reasons.join(", ")
            );
        }
        if sections.contains(&Section::Vms) && !self.preemptors.is_empty() {
            let waits: Vec<String> = self
                .preemptors
                .iter()
                .map(|p| match p.bound_at {
                    Some(_) => format!("{} {:.0} s", p.pod, p.waited_seconds),
                    None => format!("{} still pending after {:.0} s", p.pod, p.waited_seconds),
                })
                .collect();
            let _ = writeln!(out, "Preemptors waited: {}", waits.join(", "));
        }
        let m = &self.migrations;
        if sections.contains(&Section::Migrations) {
            let _ = writeln!(
            out,
            "\nMigrations: {} created, {} succeeded, {} failed, {} cancelled before they started; at most {} running \
             in the cluster, {} from one node",
                m.created, m.succeeded, m.failed, m.cancelled, m.max_running_in_cluster, m.max_running_from_a_node
            );
            let _ = writeln!(
                out,
                "Evacuations: {} VMIs marked, {} marks called off; {} launcher pods annotated eviction-in-progress",
                m.marks, m.marks_cleared, m.in_progress_annotations
            );
        }
        if !self.invariant_violations.is_empty() {
            let _ = writeln!(out, "INVARIANT VIOLATIONS:");
            for violation in &self.invariant_violations {
                let _ = writeln!(out, "  {violation}");
            }
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
            for blocker in &drain.blocked_by {
                let vm = blocker.vm.as_deref().map(|vm| format!(" (VM {vm})")).unwrap_or_default();
                let why = blocker.refused.as_deref().unwrap_or("not evicted");
                let _ = writeln!(out, "  blocked by pod {}{vm}: {why}", blocker.pod);
            }
        }
        if !self.events.is_empty() {
            let _ = writeln!(out, "Events evac recorded:");
            for event in &self.events {
                let _ = writeln!(out, "  {} {}: {}", event.vm, event.reason, event.message);
            }
        }
        let monitored: Vec<String> = self
            .evac_effects
            .iter()
            .filter_map(|(what, count)| what.strip_suffix(" monitored").map(|what| format!("{count} {what}")))
            .collect();
        if !monitored.is_empty() {
            let _ = writeln!(
                out,
                "evac in monitor mode: nothing carried out; it would have applied: {}",
                monitored.join(", ")
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
