//! Runs a scenario: builds its cluster, starts the cluster's components and the scenario's
//! disruptions as actors, runs them on simulated time, and reports.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::build;
use super::evac::{EvacRun, Mode};
use super::invariants;
use super::observer::{cause_name, Entry, Observed, Observer, VmHistory};
use super::report::{
    DrainReport, EvictionCounts, MigrationCounts, Outcome, PreemptorWait, Report, VmCounts, VmOutcome,
};
use super::spec::{Action, Scenario};
use super::steps::Steps;
use super::ScenarioError;
use crate::actors::descheduler::DeschedulerSettings;
use crate::actors::virt_controller::RESTARTS_ANNOTATION;
use crate::actors::{
    Descheduler, Drain, GarbageCollector, Kubelet, MigrationController, Scheduler, TaintManager,
    VirtController,
};
use crate::api::eviction::{ApiEvictor, EvictionRecord};
use crate::driver::StartingAt;
use crate::kinds::vmis;
use crate::objects::{Meta, Vmi};
use crate::store::{Kind, Store};
use crate::{Actor, ApiError, SimClock, Simulation};

/// Changes kept for watches: the observer reads them after every round.
const HISTORY: usize = 200_000;

/// What a run reports as it goes.
pub trait Progress {
    /// A timeline entry, as it happens.
    fn entry(&mut self, entry: &Entry);
    /// Simulated time reached, out of the scenario's duration.
    fn time(&mut self, reached: Duration, of: Duration);
}

/// Runs a scenario to its end (its duration, or earlier when nothing is left to happen).
/// Must be called outside an async runtime: webhooks are called from the simulation's thread.
pub fn run(scenario: &Scenario, mode: &Mode, progress: &mut dyn Progress) -> Result<Report, ScenarioError> {
    let duration = scenario.duration.duration("duration")?;
    let store = Arc::new(Store::new(Arc::new(SimClock::default()), HISTORY));
    let with_evac = matches!(mode, Mode::Evac(_));
    let replacing = matches!(mode, Mode::Evac(evac) if evac.replaces_kubevirt());
    build::install(&store, scenario, with_evac, replacing).map_err(cluster_error)?;
    // evac is installed before the VMs start, so that its admission shapes their pods.
    let evac = start_evac(&store, scenario, mode)?;
    let total_vms = build::create_vms(&store, scenario).map_err(cluster_error)?;
    let placement = placement(&store);

    let evictor = Arc::new(
        ApiEvictor::new()
            .map_err(|e| ScenarioError::Evac(format!("cannot start the eviction client: {e}")))?,
    );
    let observer = Arc::new(Observer::new(store.revision(), Arc::clone(&evictor), placement.clone()));
    let (actors, drains, descheduler) = actors(scenario, &evictor, !replacing)?;
    let mut all: Vec<Box<dyn Actor>> = actors;
    if let Some(running) = &evac {
        all.extend(running.actors());
    }
    all.push(Box::new(Arc::clone(&observer)));
    let simulation = Simulation::new(Arc::clone(&store), all);
    simulate(&simulation, &store, &observer, duration, progress)?;

    Ok(Ended {
        scenario,
        store: &store,
        observer: &observer,
        evictor: &evictor,
        placement: &placement,
        total_vms,
        with_evac,
        drains: &drains,
        descheduler: descheduler.as_deref(),
        evac: evac.as_deref(),
    }
    .report())
}

fn cluster_error(error: ApiError) -> ScenarioError {
    ScenarioError::Cluster { what: "cannot build the cluster", error }
}

/// Starts evac in the cluster, with its controller's restarts from the scenario's disruptions.
fn start_evac(
    store: &Arc<Store>,
    scenario: &Scenario,
    mode: &Mode,
) -> Result<Option<Box<dyn EvacRun>>, ScenarioError> {
    let Mode::Evac(evac) = mode else { return Ok(None) };
    let mut restarts = Vec::new();
    for (i, disruption) in scenario.disruptions.iter().enumerate() {
        if let Action::RestartEvacControl {} = disruption.action {
            restarts.push(disruption.at.duration(&format!("disruptions[{i}].at"))?);
        }
    }
    Ok(Some(evac.start(store, scenario, restarts)?))
}

/// The node each VM (namespace/name) runs on.
fn placement(store: &Store) -> HashMap<String, String> {
    list(store, &vmis())
        .iter()
        .map(|vmi| (key(vmi), Vmi(vmi).node_name().unwrap_or_default().to_owned()))
        .collect()
}

/// Runs the simulation in steps of a 200th of `duration`, reporting the timeline and the time
/// reached after each, until the duration or until nothing is left to happen.
fn simulate(
    simulation: &Simulation,
    store: &Store,
    observer: &Observer,
    duration: Duration,
    progress: &mut dyn Progress,
) -> Result<(), ScenarioError> {
    let chunk = (duration / 200).max(Duration::from_secs(1));
    let mut printed = 0;
    let mut until = Duration::ZERO;
    loop {
        until = (until + chunk).min(duration);
        let busy = simulation
            .run_until_idle(until)
            .map_err(|error| ScenarioError::Cluster { what: "the simulation stopped", error })?;
        let entries = observer.entries_from(printed);
        printed += entries.len();
        entries.iter().for_each(|entry| progress.entry(entry));
        progress.time(store.clock().elapsed(), duration);
        if !busy || until >= duration {
            return Ok(());
        }
    }
}

/// A run that has ended: what its report is made of.
struct Ended<'a> {
    scenario: &'a Scenario,
    store: &'a Store,
    observer: &'a Observer,
    evictor: &'a ApiEvictor,
    /// The node each VM ran on at the start.
    placement: &'a HashMap<String, String>,
    total_vms: usize,
    with_evac: bool,
    drains: &'a [Arc<Drain>],
    descheduler: Option<&'a Descheduler>,
    evac: Option<&'a dyn EvacRun>,
}

impl Ended<'_> {
    /// The run's report.
    fn report(&self) -> Report {
        let store = self.store;
        let mut observed = self.observer.lock();
        let (vms, disrupted_vms) = self.vm_outcomes(&observed);
        for violation in invariants::at_the_end(store, &observed, self.with_evac) {
            observed.violation(violation);
        }
        let simulated_seconds = store.clock().elapsed().as_secs_f64();
        let mut track = observed.recorder.track(invariants::parallel_limits(store));
        track.finish(
            disrupted_vms.iter().map(|vm| (vm.vm.as_str(), vm.node_before.as_str())),
            simulated_seconds,
        );
        let (evictions, disruptions) =
            evictions_by_actor(&self.evictor.record(), &observed.disruption_targets);
        Report {
            scenario: self.scenario.name.clone(),
            simulated_seconds,
            vms,
            disrupted_vms,
            migrations: migration_counts(&observed),
            evictions,
            disruptions,
            drains: self.drain_reports(),
            virt_handler: self.scenario.cluster.kubevirt.virt_handler.as_str(),
            migration_timeline: observed.migration_tracks.clone(),
            preemptors: preemptor_waits(&observed, simulated_seconds),
            holds: invariants::holds(store, &observed.holds),
            events: invariants::events(store),
            invariant_violations: observed.violations.clone(),
            descheduler: self.descheduler.map(Descheduler::stats),
            controller: self.evac.map(|evac| evac.controller_stats()),
            evac_effects: self.evac.map(|evac| evac.effects()).unwrap_or_default(),
            track,
        }
    }

    /// Every VM counted by outcome, and the VMs something happened to, by name.
    fn vm_outcomes(&self, observed: &Observed) -> (VmCounts, Vec<VmOutcome>) {
        let mut vms = VmCounts { total: self.total_vms, ..VmCounts::default() };
        let mut disrupted_vms = Vec::new();
        let at_end: HashMap<String, Arc<Value>> =
            list(self.store, &vmis()).into_iter().map(|v| (key(&v), v)).collect();
        let mut all_vms: Vec<&String> = self.placement.keys().collect();
        all_vms.sort();
        for key in all_vms {
            let history = observed.vms.get(key).cloned().unwrap_or_default();
            // A VM whose VMI was deleted and not started again is gone.
            let view = at_end.get(key).map(|v| Vmi(v));
            let outcome = outcome(&history, view);
            match outcome {
                Outcome::Migrated => vms.migrated += 1,
                Outcome::ShutDown => vms.shut_down += 1,
                Outcome::Restarted => vms.restarted += 1,
                Outcome::Untouched => vms.untouched += 1,
            }
            if outcome != Outcome::Untouched || history.cause.is_some() {
                disrupted_vms.push(VmOutcome {
                    node_before: self.placement.get(key).cloned().unwrap_or_default(),
                    node_after: view.and_then(|v| v.node_name()).unwrap_or_default().to_owned(),
                    vm: key.clone(),
                    outcome,
                    cause: history.cause.unwrap_or_else(|| "evacuation".to_owned()),
                    migrations: history.migrations,
                    failed_migrations: history.failed_migrations,
                    disrupted_at: history.disrupted_at,
                    held_until: history.held_until,
                    stopped_at: history.stopped_at,
                    migrated_at: history.migrated_at,
                });
            }
        }
        (vms, disrupted_vms)
    }

    /// Each `kubectl drain`: when it started and finished, and what blocks it if it has not.
    fn drain_reports(&self) -> Vec<DrainReport> {
        self.drains
            .iter()
            .map(|drain| {
                let state = drain.state();
                let blocked_by = match state.finished {
                    Some(_) => Vec::new(),
                    None => invariants::blocking(self.store, &drain.node, &self.evictor.record()),
                };
                DrainReport {
                    node: drain.node.clone(),
                    started_at: drain.start.as_secs_f64(),
                    finished_at: state.finished.map(|d| d.as_secs_f64()),
                    blocked_by,
                    state,
                }
            })
            .collect()
    }
}

/// What became of a VM, from its history and its VMI at the end (none: deleted and not started
/// again).
fn outcome(history: &VmHistory, vmi: Option<Vmi<'_>>) -> Outcome {
    let restarted = vmi.is_some_and(|view| {
        view.meta().annotation(RESTARTS_ANNOTATION).and_then(|r| r.parse::<u64>().ok()).unwrap_or(0) > 0
            && view.is_running()
    });
    match (history.stops, history.migrations) {
        _ if vmi.is_none() => Outcome::ShutDown,
        (0, 0) => Outcome::Untouched,
        (0, _) => Outcome::Migrated,
        _ if restarted => Outcome::Restarted,
        _ => Outcome::ShutDown,
    }
}

/// Eviction requests by requester, with the disruptions components made without one (counted as
/// requested and accepted); and those disruptions alone, by actor.
fn evictions_by_actor(
    records: &[EvictionRecord],
    disruption_targets: &HashMap<String, usize>,
) -> (BTreeMap<String, EvictionCounts>, BTreeMap<String, usize>) {
    let mut evictions: BTreeMap<String, EvictionCounts> = BTreeMap::new();
    for record in records {
        let counts = evictions.entry(record.requester.clone()).or_default();
        counts.requested += 1;
        if record.code == 201 {
            counts.accepted += 1;
        } else {
            counts.refused += 1;
            *counts.refused_by_code.entry(record.code).or_default() += 1;
        }
    }
    let mut disruptions: BTreeMap<String, usize> = BTreeMap::new();
    for (reason, count) in disruption_targets {
        let actor = cause_name(reason);
        let counts = evictions.entry(actor.clone()).or_default();
        counts.requested += count;
        counts.accepted += count;
        *disruptions.entry(actor).or_default() += count;
    }
    (evictions, disruptions)
}

/// The migrations the observer counted.
fn migration_counts(observed: &Observed) -> MigrationCounts {
    MigrationCounts {
        marks: observed.marks,
        marks_cleared: observed.marks_cleared,
        in_progress_annotations: observed.in_progress_annotations,
        created: observed.migrations_created,
        succeeded: observed.migrations_succeeded,
        failed: observed.migrations_failed,
        cancelled: observed.migrations_cancelled,
        max_running_in_cluster: observed.max_running,
        max_running_from_a_node: observed.max_running_on_a_node,
    }
}

/// The pods that preempted others and how long each waited (until the end if it never bound).
fn preemptor_waits(observed: &Observed, simulated_seconds: f64) -> Vec<PreemptorWait> {
    observed
        .preemptors
        .iter()
        .map(|(pod, track)| PreemptorWait {
            pod: pod.clone(),
            node: track.node.clone(),
            created_at: track.created_at,
            bound_at: track.bound_at,
            waited_seconds: track.bound_at.unwrap_or(simulated_seconds) - track.created_at,
        })
        .collect()
}

type Actors = (Vec<Box<dyn Actor>>, Vec<Arc<Drain>>, Option<Arc<Descheduler>>);

/// The cluster's components with the scenario's settings, and its disruptions.
/// `kubevirt_evacuation`: whether KubeVirt's own evacuation controller runs (not with evac).
fn actors(
    scenario: &Scenario,
    evictor: &Arc<ApiEvictor>,
    kubevirt_evacuation: bool,
) -> Result<Actors, String> {
    let mut actors: Vec<Box<dyn Actor>> = Vec::new();
    let mut steps = Vec::new();
    let mut drains = Vec::new();
    let mut descheduler = None;
    for (i, disruption) in scenario.disruptions.iter().enumerate() {
        let at = disruption.at.duration(&format!("disruptions[{i}].at"))?;
        match &disruption.action {
            Action::Drain { node } => {
                let drain = Arc::new(Drain::new(node.clone(), at, Arc::clone(evictor) as _));
                drains.push(Arc::clone(&drain));
                actors.push(Box::new(drain));
            }
            Action::Descheduler(spec) => {
                if descheduler.is_some() {
                    return Err(format!("disruptions[{i}]: a scenario runs one descheduler"));
                }
                let settings = DeschedulerSettings {
                    interval: spec.interval.duration("interval")?,
                    evictions_in_background: spec.evictions_in_background,
                    max_per_node: spec.max_per_node,
                    max_per_namespace: spec.max_per_namespace,
                    max_total: spec.max_total,
                    in_progress_ttl: spec.in_progress_ttl.duration("inProgressTtl")?,
                    threshold: spec.threshold,
                    target_threshold: spec.target_threshold,
                    ..DeschedulerSettings::default()
                };
                let actor = Arc::new(Descheduler::new(settings, Arc::clone(evictor) as _));
                descheduler = Some(Arc::clone(&actor));
                actors.push(Box::new(StartingAt { start: at, actor }));
            }
            action => steps.push((at, action.clone())),
        }
    }
    actors.insert(0, Box::new(Steps::new(steps, Arc::clone(evictor) as _)));
    actors.extend(components(scenario, kubevirt_evacuation)?);
    Ok((actors, drains, descheduler))
}

/// The scenario's cluster without its disruptions, built in `store`: its nodes, KubeVirt (the CR,
/// its webhooks), the VMs and their launcher pods; returns the components that run it, with the
/// scenario's settings (`evac sim serve --scenario`).
pub fn cluster(
    store: &Store,
    scenario: &Scenario,
    kubevirt_evacuation: bool,
) -> Result<Vec<Box<dyn Actor>>, ScenarioError> {
    build::install(store, scenario, false, false).map_err(cluster_error)?;
    build::create_vms(store, scenario).map_err(cluster_error)?;
    Ok(components(scenario, kubevirt_evacuation)?)
}

/// The cluster's components (scheduler, KubeVirt's controllers, kubelets, taint manager, garbage
/// collector) with the scenario's KubeVirt and kubelet settings: what runs whatever the
/// disruptions. `kubevirt_evacuation`: whether KubeVirt's own evacuation controller runs.
pub fn components(scenario: &Scenario, kubevirt_evacuation: bool) -> Result<Vec<Box<dyn Actor>>, String> {
    let kubevirt = &scenario.cluster.kubevirt;
    let kubelet = &scenario.cluster.kubelet;
    let migrations = MigrationController {
        parallel_per_cluster: kubevirt.parallel_migrations_per_cluster,
        parallel_outbound_per_node: kubevirt.parallel_outbound_migrations_per_node,
        bandwidth: kubevirt.bandwidth_per_migration.bytes("bandwidthPerMigration")?,
        completion_timeout_per_gib: kubevirt
            .completion_timeout_per_gib
            .duration("completionTimeoutPerGiB")?,
        ..MigrationController::default()
    };
    let kubelets = Kubelet {
        soft_threshold: kubelet.eviction_soft.bytes("evictionSoft")?,
        soft_grace: kubelet.eviction_soft_grace_period.duration("evictionSoftGracePeriod")?,
        max_pod_grace: kubelet.eviction_max_pod_grace_period.duration("evictionMaxPodGracePeriod")?,
        hard_threshold: kubelet.eviction_hard.bytes("evictionHard")?,
        virt_handler: kubevirt.virt_handler,
        ..Kubelet::default()
    };
    Ok(vec![
        Box::new(Scheduler),
        Box::new(VirtController::new(kubevirt_evacuation)),
        Box::new(migrations),
        Box::new(kubelets),
        Box::new(TaintManager::default()),
        Box::new(GarbageCollector::default()),
    ])
}

fn list(store: &Store, kind: &Kind) -> Vec<Arc<Value>> {
    store.list(kind, None, None, None).0
}

fn key(object: &Value) -> String {
    Meta(object).key()
}
