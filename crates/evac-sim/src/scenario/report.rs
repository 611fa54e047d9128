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
    /// Of those, the pods an actor marked as disruption targets without an eviction request
    /// (scheduler preemption, the taint manager, the kubelet), by actor: counted in `evictions` as
    /// requested and accepted too, and told apart here so that reports can say which is which.
    pub disruptions: BTreeMap<String, usize>,
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

/// What became of one disrupted VM, and why.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VmOutcome {
    /// namespace/name
    pub vm: String,
    /// What became of it.
    pub outcome: Outcome,
    /// What first disrupted it, e.g. `kubectl drain`.
    pub cause: String,
    /// Its migrations that succeeded.
    pub migrations: usize,
    /// Its migrations that failed (or were deleted under way).
    pub failed_migrations: usize,
    /// Where it ran when the run started.
    pub node_before: String,
    /// Its VMI's node at the end: where it runs, or where it stopped ([`VmOutcome::runs_on`]).
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

impl VmOutcome {
    /// The node it runs on at the end, or none when it was shut down: its stopped VMI keeps the
    /// node it stopped on, which is not where the VM runs.
    pub fn runs_on(&self) -> Option<&str> {
        match self.outcome {
            Outcome::ShutDown => None,
            _ => Some(self.node_after.as_str()).filter(|node| !node.is_empty()),
        }
    }

    /// The report's TO column: [`Self::runs_on`], or [`NOWHERE`].
    pub fn to_column(&self) -> &str {
        self.runs_on().unwrap_or(NOWHERE)
    }
}

/// Where a VM shut down runs: the TO of the text report and of the page alike.
pub const NOWHERE: &str = "—";

/// One actor's eviction requests, and the disruptions it made without one: what the text report
/// and the page both show ([`Report::actors`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActorEvictions {
    /// The requester (`kubectl-drain`, `descheduler`) or the cause of a disruption
    /// (`scheduler preemption`, `NoExecute taint`, `node pressure`).
    pub actor: String,
    /// Eviction requests (`pods/eviction` calls), each retry counted.
    pub requested: usize,
    /// Of those, allowed (201).
    pub accepted: usize,
    /// Of those, refused: by HTTP code (429, 500, ...).
    pub refused: BTreeMap<u16, usize>,
    /// Pods it marked as disruption targets without an eviction request.
    pub disruptions: usize,
}

impl ActorEvictions {
    /// Requests refused, whatever the code.
    pub fn refused_total(&self) -> usize {
        self.refused.values().sum()
    }

    /// `kubectl-drain: 822 eviction requests, 12 allowed, 810 refused (810 × 429)`, or
    /// `scheduler preemption: 6 pods disrupted without an eviction request`.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        if self.requested > 0 || self.disruptions == 0 {
            let mut text = format!(
                "{} eviction requests, {} allowed, {} refused",
                self.requested,
                self.accepted,
                self.refused_total()
            );
            if !self.refused.is_empty() {
                let codes: Vec<String> =
                    self.refused.iter().map(|(code, n)| format!("{n} × {code}")).collect();
                let _ = write!(text, " ({})", codes.join(", "));
            }
            parts.push(text);
        }
        if self.disruptions > 0 {
            parts.push(format!("{} pods disrupted without an eviction request", self.disruptions));
        }
        format!("{}: {}", self.actor, parts.join("; "))
    }
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
    /// The refusals by HTTP code (429, 500, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub refused_by_code: BTreeMap<u16, usize>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainReport {
    pub node: String,
    /// When the drain began, in simulated seconds.
    pub started_at: f64,
    /// When the node was empty, in simulated seconds (none: it never was).
    pub finished_at: Option<f64>,
    /// When it did not finish: the pods still on the node, and why each stayed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<Blocker>,
    #[serde(flatten)]
    pub state: DrainState,
}

impl Report {
    /// Each actor's eviction requests and the disruptions it made without one, by actor.
    pub fn actors(&self) -> Vec<ActorEvictions> {
        self.evictions
            .iter()
            .map(|(actor, counts)| {
                let disruptions = self.disruptions.get(actor).copied().unwrap_or(0);
                ActorEvictions {
                    actor: actor.clone(),
                    requested: counts.requested.saturating_sub(disruptions),
                    accepted: counts.accepted.saturating_sub(disruptions),
                    refused: counts.refused_by_code.clone(),
                    disruptions,
                }
            })
            .collect()
    }

    /// Eviction requests (`pods/eviction` calls) over the run, every actor's.
    pub fn eviction_requests(&self) -> usize {
        self.actors().iter().map(|a| a.requested).sum()
    }

    /// The report as text for a terminal.
    pub fn render(&self) -> String {
        self.render_sections(&[Section::Vms, Section::Migrations, Section::Evictions])
    }

    /// The chosen sections of the report as text (the summary line always).
    pub fn render_sections(&self, sections: &[Section]) -> String {
        let mut out = String::new();
        self.write_summary(&mut out);
        if sections.contains(&Section::Vms) && !self.disrupted_vms.is_empty() {
            self.write_vms(&mut out);
        }
        if sections.contains(&Section::Migrations) {
            self.write_migrations(&mut out);
        }
        if sections.contains(&Section::Vms) || sections.contains(&Section::Migrations) {
            write_list(&mut out, "\nWhat it cost in time:", &super::costs::lines(self));
        }
        write_list(&mut out, "INVARIANT VIOLATIONS:", &self.invariant_violations);
        if sections.contains(&Section::Evictions) {
            self.write_evictions(&mut out);
        }
        out
    }

    /// The scenario, and its VMs counted by outcome.
    fn write_summary(&self, out: &mut String) {
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
    }

    /// A table of the VMs something happened to.
    fn write_vms(&self, out: &mut String) {
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
                vm.to_column()
            );
        }
    }

    /// The migrations and evacuation marks, counted.
    fn write_migrations(&self, out: &mut String) {
        let m = &self.migrations;
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

    /// Evictions and disruptions by actor, the drains that did not finish and what blocked them,
    /// evac's events and monitored effects, the descheduler's figures.
    fn write_evictions(&self, out: &mut String) {
        let actors: Vec<String> = self.actors().iter().map(ActorEvictions::line).collect();
        write_list(out, "Eviction requests and disruptions by actor:", &actors);
        for drain in &self.drains {
            if drain.finished_at.is_none() {
                let error = drain.state.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
                let _ = writeln!(out, "Drain of {} did not finish{error}", drain.node);
            }
            for blocker in &drain.blocked_by {
                let vm = blocker.vm.as_deref().map(|vm| format!(" (VM {vm})")).unwrap_or_default();
                let why = blocker.refused.as_deref().unwrap_or("not evicted");
                let _ = writeln!(out, "  blocked by pod {}{vm}: {why}", blocker.pod);
            }
        }
        let events: Vec<String> = self
            .events
            .iter()
            .map(|event| format!("{} {}: {}", event.vm, event.reason, event.message))
            .collect();
        write_list(out, "Events evac recorded:", &events);
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
    }
}

/// A heading and its lines, indented; nothing when there are no lines.
fn write_list(out: &mut String, heading: &str, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(out, "{heading}");
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}
