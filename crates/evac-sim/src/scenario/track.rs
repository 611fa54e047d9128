//! A run as data to draw: each disrupted VM's states over time, the migrations running against
//! KubeVirt's parallel limits, and the eviction requests of each actor. The observer records it
//! from the events it reads anyway, so it costs O(events) however many VMs the cluster runs.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::api::eviction::EvictionRecord;
use crate::objects::{Pod, Vmi};

/// What a VM is doing, from one moment until its next change.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum VmState {
    /// Running on a node, nothing happening to it.
    Running {
        /// Where it runs.
        node: String,
    },
    /// A migration of it is running.
    Migrating {
        /// The node it leaves.
        from: String,
        /// The node it goes to; empty until KubeVirt picks it.
        to: String,
    },
    /// Its launcher pod is being deleted: the VM stops at the deadline unless it leaves first.
    Terminating {
        /// Where it runs.
        node: String,
        /// When the pod's grace period ends, in seconds since the start.
        deadline: Option<f64>,
    },
    /// Stopped: its VMI is gone, failed or succeeded, and not running again.
    ShutDown,
    /// Started again (run strategy `Always`), waiting to run.
    Pending,
}

impl VmState {
    /// The state in the report's words, e.g. `migrating`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Running { .. } => "running",
            Self::Migrating { .. } => "migrating",
            Self::Terminating { .. } => "terminating",
            Self::ShutDown => "shut down",
            Self::Pending => "pending",
        }
    }
}

/// A VM's state from `at` on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Simulated seconds since the start.
    pub at: f64,
    /// Its state from then until the next change.
    pub state: VmState,
}

/// The parallel migration limits of the KubeVirt CR (KubeVirt's defaults where it sets none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// `parallelMigrationsPerCluster`.
    pub per_cluster: usize,
    /// `parallelOutboundMigrationsPerNode`.
    pub per_node: usize,
}

/// A run over time, for pictures ([`super::html`]).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Track {
    /// Per VM (namespace/name) that something happened to: its states in order, the first at 0
    /// (where it ran when the run started).
    pub vms: BTreeMap<String, Vec<Change>>,
    /// Migrations counted against `parallelMigrationsPerCluster`: (seconds, how many) at each change.
    pub migrations_running: Vec<(f64, usize)>,
    /// The most counted against one node's `parallelOutboundMigrationsPerNode`, at each change.
    pub migrations_from_a_node: Vec<(f64, usize)>,
    /// The limits in force, when the cluster has a KubeVirt CR.
    pub limits: Option<Limits>,
    /// Eviction requests (`pods/eviction`) by requester: (seconds, HTTP code: 201 or a refusal).
    pub evictions: BTreeMap<String, Vec<(f64, u16)>>,
    /// When the run ended, in simulated seconds.
    pub end: f64,
}

impl Track {
    /// Eviction requests over the run, every actor's.
    pub fn eviction_requests(&self) -> usize {
        self.evictions.values().map(Vec::len).sum()
    }

    /// Completes the track at the end of a run: the VMs the report counts as disrupted without
    /// a change of state (an eviction refused, a mark called off) get a lane too, on the node
    /// they started on.
    pub fn finish<'a>(&mut self, disrupted: impl IntoIterator<Item = (&'a str, &'a str)>, end: f64) {
        for (vm, node) in disrupted {
            self.vms.entry(vm.to_owned()).or_insert_with(|| {
                vec![Change { at: 0.0, state: VmState::Running { node: node.to_owned() } }]
            });
        }
        self.end = end;
    }
}

/// What the observer knows of one VM, to tell its state.
#[derive(Debug, Clone)]
struct Live {
    /// `status.phase` of its VMI ("" once the VMI is gone).
    phase: String,
    /// Where its VMI runs.
    node: Option<String>,
    /// The VMI is deleted.
    gone: bool,
    /// The VMI stopped (failed, succeeded or deleted) in this pass, whatever it does next.
    stopped: bool,
    /// The running migration: its id, source and target.
    migrating: Option<(String, String, String)>,
    /// The launcher pod being deleted: its key, node and grace deadline.
    terminating: Option<(String, String, Option<f64>)>,
    /// The state last recorded (or, before any, the state it started in).
    state: VmState,
}

impl Live {
    fn new(node: Option<&String>) -> Self {
        Self {
            phase: "Running".to_owned(),
            node: node.cloned(),
            gone: false,
            stopped: false,
            migrating: None,
            terminating: None,
            state: VmState::Running { node: node.cloned().unwrap_or_default() },
        }
    }

    /// Its state now. A running migration shows over a terminating pod: the VM may leave before
    /// the deadline (which the lane keeps from the terminating state before).
    fn state(&self) -> VmState {
        if self.gone || matches!(self.phase.as_str(), "Failed" | "Succeeded") {
            return VmState::ShutDown;
        }
        if self.phase != "Running" {
            return VmState::Pending;
        }
        let node = self.node.clone().unwrap_or_default();
        if let Some((_, from, to)) = &self.migrating {
            return VmState::Migrating { from: from.clone(), to: to.clone() };
        }
        match &self.terminating {
            Some((_, on, deadline)) if *on == node => VmState::Terminating { node, deadline: *deadline },
            _ => VmState::Running { node },
        }
    }
}

/// Records a [`Track`] from the observer's events. Events of one observer pass all happen at the
/// same simulated moment, so states are settled once per pass ([`Recorder::settle`]): the order
/// the kinds are read in (pods before VMIs) does not show as changes of no duration.
#[derive(Debug, Default)]
pub struct Recorder {
    track: Track,
    /// Where each VM ran when the run started.
    placement: HashMap<String, String>,
    /// The VMs events were seen for.
    live: HashMap<String, Live>,
    /// VMs touched by the events of this pass.
    touched: HashSet<String>,
    busiest: Busiest,
}

/// The most migrations running from one node, kept as each node's count goes up or down by
/// one: no pass over the nodes at every change, in clusters of hundreds.
#[derive(Debug, Default)]
struct Busiest {
    /// How many nodes run each number of migrations (index 0 unused).
    nodes_running: Vec<usize>,
    most: usize,
}

impl Busiest {
    fn change(&mut self, before: usize, now: usize) {
        if before > 0 {
            self.nodes_running[before] -= 1;
        }
        if now > 0 {
            if self.nodes_running.len() <= now {
                self.nodes_running.resize(now + 1, 0);
            }
            self.nodes_running[now] += 1;
        }
        self.most = self.most.max(now);
        // A count moves by one, so the most drops by one at a time, to 0 at worst.
        while self.most > 0 && self.nodes_running[self.most] == 0 {
            self.most -= 1;
        }
    }
}

impl Recorder {
    /// A recorder for a cluster whose VMs (namespace/name) started on these nodes.
    pub fn new(placement: HashMap<String, String>) -> Self {
        Self { placement, ..Self::default() }
    }

    fn live(&mut self, vm: &str) -> &mut Live {
        self.touched.insert(vm.to_owned());
        let placement = &self.placement;
        self.live.entry(vm.to_owned()).or_insert_with(|| Live::new(placement.get(vm)))
    }

    /// A VMI changed or was deleted.
    pub fn vmi(&mut self, vm: &str, vmi: Vmi<'_>, deleted: bool) {
        let live = self.live(vm);
        live.gone = deleted;
        if !deleted {
            live.phase = vmi.phase().unwrap_or("Pending").to_owned();
            live.node = vmi.node_name().map(str::to_owned);
        }
        live.stopped |= deleted || vmi.is_final();
    }

    /// A launcher pod changed or was deleted. `at` and `now` are the same moment, as seconds
    /// since the start and as the clock the pod's `deletionTimestamp` is written in.
    pub fn pod(&mut self, pod: Pod<'_>, deleted: bool, at: f64, now: DateTime<Utc>) {
        let Some(vmi) = pod.vmi() else { return };
        let vm = format!("{}/{}", pod.meta().namespace(), vmi);
        let key = pod.meta().key();
        let leaving = !deleted && pod.is_terminating() && !pod.is_finished();
        let known = self.live.get(&vm).and_then(|l| l.terminating.as_ref()).is_some_and(|t| t.0 == key);
        if leaving && !known {
            let node = pod.node_name().unwrap_or_default().to_owned();
            let deadline = grace_deadline(pod, at, now);
            self.live(&vm).terminating = Some((key, node, deadline));
        } else if !leaving && known {
            self.live(&vm).terminating = None;
        }
    }

    /// A migration of `vm` runs (counted against the limits) from `source` to `target`, or
    /// (`running` false) no longer runs.
    pub fn migration(&mut self, vm: &str, id: &str, source: &str, target: &str, running: bool) {
        let mine = self.live.get(vm).and_then(|l| l.migrating.as_ref()).is_some_and(|m| m.0 == id);
        if running {
            self.live(vm).migrating = Some((id.to_owned(), source.to_owned(), target.to_owned()));
        } else if mine {
            self.live(vm).migrating = None;
        }
    }

    /// Migrations running now in the cluster, after one started or stopped on a node that ran
    /// `node_before` and now runs `node_now`.
    pub fn running(&mut self, at: f64, in_cluster: usize, node_before: usize, node_now: usize) {
        self.busiest.change(node_before, node_now);
        push_step(&mut self.track.migrations_running, at, in_cluster);
        push_step(&mut self.track.migrations_from_a_node, at, self.busiest.most);
    }

    /// An eviction request, at the time the API server answered it.
    pub fn eviction(&mut self, record: &EvictionRecord) {
        let at = record.at_ms as f64 / 1000.0;
        self.track.evictions.entry(record.requester.clone()).or_default().push((at, record.code));
    }

    /// Records the state of each VM the pass's events touched, where it changed. A VM stopped
    /// and started again within the pass (a restart the simulator makes at once) is recorded
    /// shut down first: a stop is what matters most about it.
    pub fn settle(&mut self, at: f64) {
        for vm in std::mem::take(&mut self.touched) {
            let Some(live) = self.live.get_mut(&vm) else { continue };
            let now = live.state();
            let stopped = std::mem::take(&mut live.stopped);
            if now == live.state && !stopped {
                continue;
            }
            let before = std::mem::replace(&mut live.state, now.clone());
            let changes = self.track.vms.entry(vm).or_default();
            if changes.is_empty() {
                changes.push(Change { at: 0.0, state: before.clone() });
            }
            if stopped && before != VmState::ShutDown && now != VmState::ShutDown {
                record(changes, Change { at, state: VmState::ShutDown });
            }
            record(changes, Change { at, state: now });
        }
    }

    /// The track so far, with the limits in force.
    pub fn track(&self, limits: Option<Limits>) -> Track {
        Track { limits, ..self.track.clone() }
    }
}

/// Appends a VM's change of state. Passes of the same moment make one change: a state that
/// lasted no time (a migration before its target is picked) is replaced, not kept, unless it is
/// a stop.
fn record(changes: &mut Vec<Change>, change: Change) {
    let replaced = |last: &Change| last.at == change.at && last.state != VmState::ShutDown;
    if changes.len() > 1 && changes.last().is_some_and(replaced) {
        changes.pop();
        if changes.last().is_some_and(|last| last.state == change.state) {
            return;
        }
    }
    changes.push(change);
}

/// Appends a value of a step series, unless it is the value already.
fn push_step(series: &mut Vec<(f64, usize)>, at: f64, value: usize) {
    if series.last().map(|last| last.1) != Some(value) {
        series.push((at, value));
    }
}

/// When a pod being deleted is stopped: its `deletionTimestamp`, else the deletion's grace
/// period from now (`deletionGracePeriodSeconds`, else `terminationGracePeriodSeconds`).
fn grace_deadline(pod: Pod<'_>, at: f64, now: DateTime<Utc>) -> Option<f64> {
    if let Some(stamp) = pod.meta().deletion_timestamp().and_then(|s| DateTime::parse_from_rfc3339(s).ok()) {
        return Some(at + (stamp.with_timezone(&Utc) - now).as_seconds_f64());
    }
    pod.0
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(serde_json::Value::as_u64)
        .or_else(|| pod.termination_grace_period())
        .map(|grace| at + grace as f64)
}

/// Example scenarios run once per test binary, shared by the tests of the track and its pictures.
#[cfg(test)]
pub(super) mod testing {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};

    use crate::scenario::{run, Entry, Mode, Progress, Report, Scenario};

    struct Quiet;

    impl Progress for Quiet {
        fn entry(&mut self, _: &Entry) {}
        fn time(&mut self, _: std::time::Duration, _: std::time::Duration) {}
    }

    /// `examples/scenarios/<name>.yaml`, parsed.
    pub fn scenario(name: &str) -> Scenario {
        let file = format!("{}/../../examples/scenarios/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&file).expect("an example scenario");
        Scenario::parse(&text, &file).expect("a valid scenario")
    }

    /// The report of an example scenario run with KubeVirt alone.
    pub fn kubevirt_alone(name: &str) -> &'static Report {
        static RUNS: OnceLock<Mutex<HashMap<String, &'static Report>>> = OnceLock::new();
        let mut runs = RUNS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        runs.entry(name.to_owned()).or_insert_with(|| {
            let report = run(&scenario(name), &Mode::KubeVirt, &mut Quiet).expect("the scenario runs");
            Box::leak(Box::new(report))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{kubevirt_alone, scenario};
    use super::*;
    use crate::scenario::report::Outcome;

    #[test]
    fn each_disrupted_vm_ends_in_the_state_its_outcome_says() {
        let report = kubevirt_alone("drain");
        assert!(
            report.vms.migrated > 0 && report.vms.shut_down > 0,
            "the drain migrates some VMs and stops others"
        );
        assert_eq!(report.track.vms.len(), report.disrupted_vms.len());
        for vm in &report.disrupted_vms {
            let changes = &report.track.vms[&vm.vm];
            let first = &changes[0];
            assert_eq!(
                (first.at, &first.state),
                (0.0, &VmState::Running { node: vm.node_before.clone() }),
                "{}",
                vm.vm
            );
            assert!(
                changes.windows(2).all(|w| w[0].at <= w[1].at && w[0].state != w[1].state),
                "{changes:?}"
            );
            let last = &changes.last().unwrap().state;
            match vm.outcome {
                Outcome::Migrated => {
                    assert_eq!(last, &VmState::Running { node: vm.node_after.clone() }, "{}", vm.vm);
                    assert!(
                        changes.iter().any(|c| matches!(&c.state,
                            VmState::Migrating { from, to } if *from == vm.node_before && *to == vm.node_after)),
                        "{}: {changes:?}",
                        vm.vm
                    );
                    // Its eviction was refused: its pod was never deleted while it ran there.
                    assert!(
                        !changes.iter().any(|c| matches!(c.state, VmState::Terminating { .. })),
                        "{changes:?}"
                    );
                }
                Outcome::ShutDown => assert_eq!(last, &VmState::ShutDown, "{}", vm.vm),
                other => panic!("{}: {other:?} in a drain with KubeVirt alone", vm.vm),
            }
        }
    }

    #[test]
    fn a_preempted_vm_is_shut_down_seconds_after_its_pod_is_deleted() {
        let report = kubevirt_alone("preemption");
        let shut_down: Vec<_> =
            report.disrupted_vms.iter().filter(|vm| vm.outcome == Outcome::ShutDown).collect();
        assert!(!shut_down.is_empty(), "KubeVirt alone does not migrate on preemption");
        for vm in shut_down {
            let changes = &report.track.vms[&vm.vm];
            let (i, terminating) = changes
                .iter()
                .enumerate()
                .find(|(_, c)| matches!(c.state, VmState::Terminating { .. }))
                .unwrap_or_else(|| panic!("{}: {changes:?}", vm.vm));
            let VmState::Terminating { node, deadline: Some(deadline) } = &terminating.state else {
                panic!("{}: no deadline: {terminating:?}", vm.vm)
            };
            assert_eq!(node, &vm.node_before);
            // The pod's grace period: the VMI's terminationGracePeriodSeconds (195 in the
            // scenario) and KubeVirt's 30 s, to the second of its timestamp.
            assert!((deadline - terminating.at - 225.0).abs() <= 1.0, "{}: {terminating:?}", vm.vm);
            // A stock virt-handler shuts the guest down at SIGTERM: it is off seconds later.
            let stopped = &changes[i + 1];
            assert_eq!(stopped.state, VmState::ShutDown);
            assert!(
                stopped.at - terminating.at <= 10.0,
                "stopped at {}, terminating at {}",
                stopped.at,
                terminating.at
            );
        }
    }

    #[test]
    fn migrations_running_and_evictions_agree_with_the_report() {
        let report = kubevirt_alone("drain");
        let track = &report.track;
        let most = track.migrations_running.iter().map(|(_, n)| *n).max();
        assert_eq!(most, Some(report.migrations.max_running_in_cluster));
        assert_eq!(track.migrations_running.last().map(|(_, n)| *n), Some(0), "none runs at the end");
        let most = track.migrations_from_a_node.iter().map(|(_, n)| *n).max();
        assert_eq!(most, Some(report.migrations.max_running_from_a_node));
        assert!(track.migrations_running.windows(2).all(|w| w[0].0 <= w[1].0));
        let kubevirt = scenario("drain").cluster.kubevirt;
        assert_eq!(
            track.limits,
            Some(Limits {
                per_cluster: kubevirt.parallel_migrations_per_cluster,
                per_node: kubevirt.parallel_outbound_migrations_per_node
            })
        );
        let drain = &track.evictions["kubectl-drain"];
        let counts = &report.evictions["kubectl-drain"];
        assert_eq!(drain.len(), counts.requested);
        assert_eq!(drain.iter().filter(|(_, code)| *code != 201).count(), counts.refused);
        assert!(drain.iter().all(|(at, _)| *at >= 30.0), "the drain starts at 30 s");
        assert_eq!(track.end, report.simulated_seconds);
    }

    #[test]
    fn a_restarted_vm_is_shut_down_then_running_elsewhere() {
        let report = kubevirt_alone("noexecute-taint");
        let restarted: Vec<_> =
            report.disrupted_vms.iter().filter(|vm| vm.outcome == Outcome::Restarted).collect();
        assert!(!restarted.is_empty(), "runStrategy Always VMs start again elsewhere");
        for vm in restarted {
            let states: Vec<&VmState> = report.track.vms[&vm.vm].iter().map(|c| &c.state).collect();
            let after = VmState::Running { node: vm.node_after.clone() };
            assert_ne!(vm.node_after, vm.node_before);
            assert!(
                matches!(states[1], VmState::Terminating { deadline: Some(_), .. }),
                "{}: {states:?}",
                vm.vm
            );
            // The simulator restarts it at once: no time pending.
            assert_eq!(states[2..], [&VmState::ShutDown, &after], "{}", vm.vm);
        }
    }

    #[test]
    fn changes_of_one_moment_make_one() {
        let running = |node: &str| VmState::Running { node: node.to_owned() };
        let migrating = |to: &str| VmState::Migrating { from: "n1".to_owned(), to: to.to_owned() };
        let mut changes = vec![Change { at: 0.0, state: running("n1") }];
        record(&mut changes, Change { at: 30.0, state: migrating("") });
        record(&mut changes, Change { at: 30.0, state: migrating("n2") });
        record(&mut changes, Change { at: 90.0, state: running("n2") });
        assert_eq!(
            changes,
            [
                Change { at: 0.0, state: running("n1") },
                Change { at: 30.0, state: migrating("n2") },
                Change { at: 90.0, state: running("n2") },
            ]
        );
        // Back where it was in the same moment: no change at all.
        record(&mut changes, Change { at: 120.0, state: migrating("n3") });
        record(&mut changes, Change { at: 120.0, state: running("n2") });
        assert_eq!(changes.len(), 3);
        assert_eq!(changes[2], Change { at: 90.0, state: running("n2") });
        // A stop stays, however short.
        record(&mut changes, Change { at: 150.0, state: VmState::ShutDown });
        record(&mut changes, Change { at: 150.0, state: running("n3") });
        assert_eq!(
            changes[3..],
            [Change { at: 150.0, state: VmState::ShutDown }, Change { at: 150.0, state: running("n3") }]
        );
    }

    #[test]
    fn the_busiest_node_is_followed_as_counts_change() {
        let mut busiest = Busiest::default();
        let mut most = Vec::new();
        // Node a: 0→1→2, node b: 0→1, a: 2→1→0, b: 1→0.
        for (before, now) in [(0, 1), (1, 2), (0, 1), (2, 1), (1, 0), (1, 0)] {
            busiest.change(before, now);
            most.push(busiest.most);
        }
        assert_eq!(most, [1, 2, 2, 1, 1, 0]);
    }

    #[test]
    fn the_track_is_not_in_the_json_report() {
        let json = serde_json::to_value(kubevirt_alone("drain")).unwrap();
        assert!(json.get("track").is_none());
        assert!(json.get("disruptedVms").is_some());
    }
}
