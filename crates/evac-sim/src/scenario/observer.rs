//! Watches the simulated cluster as a scenario runs, the way an operator would: a timeline of
//! what happened, what became of each VM and why, and how many migrations ran at once.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;

mod migration_events;

use super::track::Recorder;
use crate::api::eviction::{ApiEvictor, EvictionRecord};
use crate::kinds::migrations;
use crate::objects::{Meta, Pod, Vmi};
use crate::store::{Event, EventType, Kind, Store};
use crate::Actor;
use crate::ApiError;

/// One line of the timeline.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Entry {
    /// Simulated seconds since the start.
    pub at: f64,
    /// What happened, e.g. `migration kubevirt-evacuation-x: VM default/vm now runs on node02`.
    pub what: String,
}

/// What happened to one VM (namespace/name).
#[derive(Debug, Clone, Default)]
pub struct VmHistory {
    pub migrations: usize,
    pub failed_migrations: usize,
    pub stops: usize,
    /// What first disrupted it.
    pub cause: Option<String>,
    /// When something first acted on it (simulated seconds).
    pub disrupted_at: Option<f64>,
    /// When its launcher pod's hold ended (its SIGTERM), if its pod was held.
    pub held_until: Option<f64>,
    /// When it first stopped.
    pub stopped_at: Option<f64>,
    /// When its last migration succeeded.
    pub migrated_at: Option<f64>,
}

/// A launcher pod evac held, as seen from outside.
#[derive(Debug, Clone, Default)]
pub struct HoldTrack {
    /// The VM (namespace/name).
    pub vm: String,
    /// When the hold was first seen on the pod.
    pub started_at: f64,
    /// When the pod's containers got SIGTERM: the hold's end.
    pub ended_at: Option<f64>,
}

/// A pod that preempted others, as seen from outside.
#[derive(Debug, Clone, Default)]
pub struct PreemptorTrack {
    /// The node it was pinned to or nominated for.
    pub node: String,
    /// When it was created.
    pub created_at: f64,
    /// When it was bound to a node.
    pub bound_at: Option<f64>,
}

/// One migration's life, as seen from outside: enough to check from the report alone that no
/// VM had two unfinished migrations and that the parallel limits held.
#[derive(Debug, Clone, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrationTrack {
    /// Its name.
    pub name: String,
    /// The VM (namespace/name).
    pub vm: String,
    /// When it was created.
    pub created_at: f64,
    /// When it began to count against the parallel limits (KubeVirt counts a migration from
    /// when its target pod is made, `Scheduling`, until it ends).
    pub counted_from: Option<f64>,
    /// When the VM began to move (`Running`).
    pub started_at: Option<f64>,
    /// When it ended: finished, or deleted unfinished.
    pub ended_at: Option<f64>,
    /// How it ended: `Succeeded`, `Failed`, `Cancelled` (deleted before it started) or
    /// `Deleted` (deleted while under way); the phase it was last seen in if it has not.
    pub phase: String,
    /// The node it leaves (the VM's node when it began to count).
    pub source: String,
    /// The node it goes to, once known.
    pub target: String,
}

#[derive(Debug, Default)]
pub struct Observed {
    /// Every migration, by when it was created.
    pub migration_tracks: Vec<MigrationTrack>,
    /// Its index in `migration_tracks`, per migration id.
    migration_index: HashMap<String, usize>,
    pub timeline: Vec<Entry>,
    pub vms: HashMap<String, VmHistory>,
    pub migrations_created: usize,
    pub migrations_succeeded: usize,
    pub migrations_failed: usize,
    /// Deleted before they started.
    pub migrations_cancelled: usize,
    pub running: usize,
    pub running_by_node: HashMap<String, usize>,
    pub max_running: usize,
    pub max_running_on_a_node: usize,
    /// Pods marked as disruption targets, by the component's reason.
    pub disruption_targets: HashMap<String, usize>,
    /// VMIs marked for evacuation (`status.evacuationNodeName` set).
    pub marks: usize,
    /// Marks taken off a VMI that had not left the node (called off, cancelled, given up).
    pub marks_cleared: usize,
    /// Launcher pods that got the descheduler's `eviction-in-progress` annotation.
    pub in_progress_annotations: usize,
    /// The mark last seen on each VMI.
    marked_for: HashMap<String, String>,
    /// Pods seen with `eviction-in-progress`.
    in_progress_pods: std::collections::HashSet<String>,
    /// Last phase seen, per migration and per VMI.
    phases: HashMap<String, String>,
    /// Revision seen, per kind.
    seen: HashMap<&'static str, u64>,
    /// Eviction records read.
    evictions_seen: usize,
    /// Pods whose eviction was refused once already (later refusals are not logged).
    refused_pods: std::collections::HashSet<String>,
    /// Pods seen with a DisruptionTarget condition.
    marked_pods: std::collections::HashSet<String>,
    /// Migrations counted against the parallel limits, with the node they leave.
    running_from: HashMap<String, String>,
    /// Unfinished migrations, per VM.
    unfinished: HashMap<String, std::collections::BTreeSet<String>>,
    /// Broken invariants, each once.
    pub violations: Vec<String>,
    /// Held launcher pods, by pod (namespace/name).
    pub holds: std::collections::BTreeMap<String, HoldTrack>,
    /// The scenario's high-priority pods, by pod (namespace/name).
    pub preemptors: std::collections::BTreeMap<String, PreemptorTrack>,
    /// The run over time, for pictures.
    pub recorder: Recorder,
}

/// A cause in the report's words, from a `DisruptionTarget` reason or an eviction's requester.
pub fn cause_name(reason: &str) -> String {
    match reason {
        "PreemptionByScheduler" => "scheduler preemption",
        "DeletionByTaintManager" => "NoExecute taint",
        "TerminationByKubelet" => "node pressure",
        "kubectl-drain" => "kubectl drain",
        "descheduler" => "descheduler",
        other => other,
    }
    .to_owned()
}

pub struct Observer {
    state: Mutex<Observed>,
    evictions: std::sync::Arc<ApiEvictor>,
}

impl Observer {
    /// An observer of the changes after `revision`, and of the evictions `evictions` makes, in a
    /// cluster whose VMs (namespace/name) run on these nodes at `revision`.
    pub fn new(
        revision: u64,
        evictions: std::sync::Arc<ApiEvictor>,
        placement: HashMap<String, String>,
    ) -> Self {
        let mut state = Observed { recorder: Recorder::new(placement), ..Observed::default() };
        for key in ["pods", "vmis", "migrations"] {
            state.seen.insert(key, revision);
        }
        Self { state: Mutex::new(state), evictions }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Observed> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Timeline entries from index `from` on.
    pub fn entries_from(&self, from: usize) -> Vec<Entry> {
        self.lock().timeline.get(from..).map(<[Entry]>::to_vec).unwrap_or_default()
    }
}

impl Actor for Observer {
    fn name(&self) -> &'static str {
        "observer"
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let mut state = self.lock();
        let at = store.clock().elapsed().as_secs_f64();
        let now = store.clock().now();
        let seen = state.evictions_seen;
        let new = self.evictions.record_from(seen);
        state.evictions_seen += new.len();
        for record in &new {
            state.eviction(at, record);
            state.recorder.eviction(record);
        }
        for (key, kind) in [
            ("pods", Kind::new("v1", "Pod")),
            ("vmis", Kind::new("kubevirt.io/v1", "VirtualMachineInstance")),
            ("migrations", migrations()),
        ] {
            let from = state.seen.get(key).copied().unwrap_or(0);
            let (events, revision) = store.events_since(&kind, from)?;
            state.seen.insert(key, revision);
            for event in &events {
                match key {
                    "pods" => {
                        state.recorder.pod(Pod(&event.object), event.type_ == EventType::Deleted, at, now);
                        state.pod(at, event);
                    }
                    "vmis" => {
                        let vmi = Vmi(&event.object);
                        state.recorder.vmi(&vmi.meta().key(), vmi, event.type_ == EventType::Deleted);
                        state.vmi(at, event);
                    }
                    _ => state.migration(at, event, store),
                }
            }
        }
        state.recorder.settle(at);
        Ok(None)
    }
}

fn vm_key(object: &Value, name: &str) -> String {
    format!("{}/{}", Meta(object).namespace(), name)
}

impl Observed {
    fn log(&mut self, at: f64, what: String) {
        self.timeline.push(Entry { at, what });
    }

    fn eviction(&mut self, at: f64, record: &EvictionRecord) {
        let pod = format!("{}/{}", record.namespace, record.pod);
        if !record.vmi.is_empty() {
            let vm = format!("{}/{}", record.namespace, record.vmi);
            self.note_cause_at(&vm, &cause_name(&record.requester), record.at_ms as f64 / 1000.0);
        }
        if record.code == 201 {
            self.log(at, format!("{}: evicted pod {pod}", record.requester));
        } else if self.refused_pods.insert(pod.clone()) {
            self.log(
                at,
                format!(
                    "{}: eviction of pod {pod} refused ({}): {}",
                    record.requester, record.code, record.message
                ),
            );
        }
    }

    fn pod(&mut self, at: f64, event: &Event) {
        let pod = Pod(&event.object);
        let key = pod.meta().key();
        if event.type_ == EventType::Deleted {
            self.marked_pods.remove(&key);
            self.in_progress_pods.remove(&key);
            return;
        }
        if pod.meta().label("app") == Some("high-priority") {
            self.preemptor(at, &key, pod);
        }
        // A running VM's launcher pod (not a migration's target) that something began to stop.
        if let Some(vm) =
            pod.vmi().filter(|_| pod.meta().label(crate::actors::migration::MIGRATION_JOB_LABEL).is_none())
        {
            self.launcher_pod(at, &key, &vm_key(pod.0, vm), pod);
        }
        let in_progress =
            pod.meta().annotation(evac_core::kubevirt::EVICTION_IN_PROGRESS_ANNOTATION) == Some("true");
        if in_progress && self.in_progress_pods.insert(key.clone()) {
            self.in_progress_annotations += 1;
        } else if !in_progress {
            self.in_progress_pods.remove(&key);
        }
        self.disruption_target(at, key, pod);
    }

    /// One of the scenario's high-priority pods: its node, and when it was bound.
    fn preemptor(&mut self, at: f64, key: &str, pod: Pod<'_>) {
        let track = self.preemptors.entry(key.to_owned()).or_insert_with(|| PreemptorTrack {
            node: String::new(),
            created_at: at,
            bound_at: None,
        });
        if let Some(node) = pod.node_name().or(pod.nominated_node_name()) {
            track.node = node.to_owned();
        }
        if track.bound_at.is_none() && pod.node_name().is_some() {
            track.bound_at = Some(at);
        }
    }

    /// A running VM's launcher pod: its hold and the hold's end (SIGTERM), and what began to stop
    /// it without marking it a disruption target (a delete, the kubelet).
    fn launcher_pod(&mut self, at: f64, key: &str, vm: &str, pod: Pod<'_>) {
        let annotation = |key: &str| pod.meta().annotation(key);
        if annotation(evac_core::hold::HELD_SINCE_ANNOTATION).is_some() && !self.holds.contains_key(key) {
            self.holds
                .insert(key.to_owned(), HoldTrack { vm: vm.to_owned(), started_at: at, ended_at: None });
        }
        let sigterm = annotation(crate::actors::kubelet::termination::SIGTERM_AT_ANNOTATION)
            .and_then(|ms| ms.parse::<f64>().ok())
            .map(|ms| ms / 1000.0);
        if let (Some(hold), Some(sigterm)) = (self.holds.get_mut(key), sigterm) {
            if hold.ended_at.is_none() {
                hold.ended_at = Some(sigterm);
                self.vms.entry(vm.to_owned()).or_default().held_until = Some(sigterm);
            }
        }
        let stopping = annotation(crate::actors::kubelet::termination::STOPPING_SINCE_ANNOTATION).is_some();
        if pod.is_terminating() && pod.condition("DisruptionTarget").is_none() {
            self.note_cause_at(vm, "pod deleted", at);
        } else if stopping && !pod.is_terminating() && pod.condition("DisruptionTarget").is_none() {
            self.note_cause_at(vm, &cause_name("TerminationByKubelet"), at);
        }
    }

    /// A pod newly marked `DisruptionTarget`: counted by the component's reason, and its VM's
    /// cause.
    fn disruption_target(&mut self, at: f64, key: String, pod: Pod<'_>) {
        let Some(target) = pod.condition("DisruptionTarget") else { return };
        let reason = target.reason().unwrap_or_default();
        if !self.marked_pods.insert(key) {
            return;
        }
        *self.disruption_targets.entry(reason.to_owned()).or_default() += 1;
        let node = pod.node_name().unwrap_or_default();
        self.log(at, format!("{reason}: pod {} on {node} is a disruption target", pod.meta().name()));
        if let Some(vm) = pod.vmi() {
            self.note_cause_at(&vm_key(pod.0, vm), &cause_name(reason), at);
        }
    }

    /// Records what first disrupted a VM.
    pub fn note_cause(&mut self, vm: &str, cause: &str) {
        let history = self.vms.entry(vm.to_owned()).or_default();
        if history.cause.is_none() {
            history.cause = Some(cause.to_owned());
        }
    }

    /// Records what first disrupted a VM, and when.
    fn note_cause_at(&mut self, vm: &str, cause: &str, at: f64) {
        self.note_cause(vm, cause);
        let history = self.vms.entry(vm.to_owned()).or_default();
        history.disrupted_at.get_or_insert(at);
    }

    fn vmi(&mut self, at: f64, event: &Event) {
        let vmi = Vmi(&event.object);
        let key = vmi.meta().key();
        self.mark(at, &key, vmi, event.type_ == EventType::Deleted);
        if event.type_ == EventType::Deleted {
            let before = self.phases.remove(&format!("vmi/{key}")).unwrap_or_default();
            // A VMI deleted while it ran stops its VM (one that had stopped already is counted).
            if !matches!(before.as_str(), "Failed" | "Succeeded") {
                let history = self.vms.entry(key.clone()).or_default();
                history.stops += 1;
                history.stopped_at.get_or_insert(at);
            }
            self.note_cause_at(&key, "VM deleted", at);
            self.log(at, format!("VM {key} deleted (its VMI)"));
            return;
        }
        let phase = vmi.phase().unwrap_or_default().to_owned();
        let before = self.phases.insert(format!("vmi/{key}"), phase.clone()).unwrap_or_default();
        if before == phase {
            return;
        }
        match (before.as_str(), phase.as_str()) {
            // Failed (killed), or Succeeded: its guest powered off when asked.
            (_, "Failed" | "Succeeded") => {
                let history = self.vms.entry(key.clone()).or_default();
                history.stops += 1;
                history.stopped_at.get_or_insert(at);
                let reason = vmi.reason().unwrap_or_default();
                let node = vmi.node_name().unwrap_or_default();
                let how = if phase == "Failed" { "killed" } else { "shut down" };
                self.log(at, format!("VM {key} {how} on {node} ({reason})"));
            }
            (_, "Scheduling") => self.log(at, format!("VM {key} restarting (its run strategy)")),
            ("Scheduling", "Running") => {
                self.log(at, format!("VM {key} running again on {}", vmi.node_name().unwrap_or_default()))
            }
            _ => {}
        }
    }

    /// Notes a VMI's mark being set or taken off.
    fn mark(&mut self, at: f64, key: &str, vmi: Vmi<'_>, deleted: bool) {
        let now = if deleted { "" } else { vmi.evacuation_node_name().unwrap_or_default() };
        let before = self.marked_for.get(key).cloned().unwrap_or_default();
        if now == before {
            return;
        }
        if now.is_empty() {
            self.marked_for.remove(key);
        } else {
            self.marked_for.insert(key.to_owned(), now.to_owned());
        }
        if !now.is_empty() {
            self.marks += 1;
            self.log(at, format!("VM {key} marked for evacuation from {now}"));
        } else if !deleted && vmi.node_name() == Some(before.as_str()) {
            self.marks_cleared += 1;
            self.log(at, format!("VM {key}: its evacuation from {before} was called off"));
        }
    }

    /// Records a broken invariant, once.
    pub fn violation(&mut self, what: String) {
        if !self.violations.contains(&what) {
            self.violations.push(what);
        }
    }
}
