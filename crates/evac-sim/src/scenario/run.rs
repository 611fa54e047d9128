//! Runs a scenario: builds its cluster, starts the cluster's components and the scenario's
//! disruptions as actors, runs them on simulated time, and reports.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::build;
use super::evac::Mode;
use super::invariants;
use super::observer::{cause_name, Entry, Observer};
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
use crate::api::eviction::ApiEvictor;
use crate::driver::StartingAt;
use crate::kinds::vmis;
use crate::objects::{Meta, Vmi};
use crate::store::{Kind, Store};
use crate::{Actor, SimClock, Simulation};

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
    let cluster_error = |error| ScenarioError::Cluster { what: "cannot build the cluster", error };
    build::install(&store, scenario, with_evac, replacing).map_err(cluster_error)?;
    // evac is installed before the VMs start, so that its admission shapes their pods.
    let evac = match mode {
        Mode::KubeVirt => None,
        Mode::Evac(evac) => {
            let mut restarts = Vec::new();
            for (i, disruption) in scenario.disruptions.iter().enumerate() {
                if let Action::RestartEvacControl {} = disruption.action {
                    restarts.push(disruption.at.duration(&format!("disruptions[{i}].at"))?);
                }
            }
            Some(evac.start(&store, scenario, restarts)?)
        }
    };
    let total_vms = build::create_vms(&store, scenario).map_err(cluster_error)?;
    let placement: HashMap<String, String> = list(&store, &vmis())
        .iter()
        .map(|vmi| (key(vmi), Vmi(vmi).node_name().unwrap_or_default().to_owned()))
        .collect();

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
            break;
        }
    }

    // The report.
    let mut observed = observer.lock();
    let mut vms = VmCounts { total: total_vms, ..VmCounts::default() };
    let mut disrupted_vms = Vec::new();
    let at_end: HashMap<String, Arc<Value>> =
        list(&store, &vmis()).into_iter().map(|v| (key(&v), v)).collect();
    let mut all_vms: Vec<&String> = placement.keys().collect();
    all_vms.sort();
    for key in all_vms {
        let history = observed.vms.get(key).cloned().unwrap_or_default();
        // A VM whose VMI was deleted and not started again is gone.
        let vmi = at_end.get(key);
        let view = vmi.map(|v| Vmi(v));
        let restarted = view.is_some_and(|view| {
            view.meta().annotation(RESTARTS_ANNOTATION).and_then(|r| r.parse::<u64>().ok()).unwrap_or(0) > 0
                && view.is_running()
        });
        let outcome = match (history.stops, history.migrations) {
            _ if vmi.is_none() => Outcome::ShutDown,
            (0, 0) => Outcome::Untouched,
            (0, _) => Outcome::Migrated,
            _ if restarted => Outcome::Restarted,
            _ => Outcome::ShutDown,
        };
        match outcome {
            Outcome::Migrated => vms.migrated += 1,
            Outcome::ShutDown => vms.shut_down += 1,
            Outcome::Restarted => vms.restarted += 1,
            Outcome::Untouched => vms.untouched += 1,
        }
        if outcome != Outcome::Untouched || history.cause.is_some() {
            disrupted_vms.push(VmOutcome {
                node_before: placement.get(key).cloned().unwrap_or_default(),
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
    for violation in invariants::at_the_end(&store, &observed, with_evac) {
        observed.violation(violation);
    }
    let simulated_seconds = store.clock().elapsed().as_secs_f64();
    let mut track = observed.recorder.track(invariants::parallel_limits(&store));
    track.finish(disrupted_vms.iter().map(|vm| (vm.vm.as_str(), vm.node_before.as_str())), simulated_seconds);
    let mut evictions: BTreeMap<String, EvictionCounts> = BTreeMap::new();
    for record in evictor.record() {
        let counts = evictions.entry(record.requester).or_default();
        counts.requested += 1;
        if record.code == 201 {
            counts.accepted += 1;
        } else {
            counts.refused += 1;
            *counts.refused_by_code.entry(record.code).or_default() += 1;
        }
    }
    let mut disruptions: BTreeMap<String, usize> = BTreeMap::new();
    for (reason, count) in &observed.disruption_targets {
        let actor = cause_name(reason);
        let counts = evictions.entry(actor.clone()).or_default();
        counts.requested += count;
        counts.accepted += count;
        *disruptions.entry(actor).or_default() += count;
    }
    Ok(Report {
        scenario: scenario.name.clone(),
        simulated_seconds,
        vms,
        disrupted_vms,
        migrations: MigrationCounts {
            marks: observed.marks,
            marks_cleared: observed.marks_cleared,
            in_progress_annotations: observed.in_progress_annotations,
            created: observed.migrations_created,
            succeeded: observed.migrations_succeeded,
            failed: observed.migrations_failed,
            cancelled: observed.migrations_cancelled,
            max_running_in_cluster: observed.max_running,
            max_running_from_a_node: observed.max_running_on_a_node,
        },
        evictions,
        disruptions,
        drains: drains
            .iter()
            .map(|drain| {
                let state = drain.state();
                let blocked_by = match state.finished {
                    Some(_) => Vec::new(),
                    None => invariants::blocking(&store, &drain.node, &evictor.record()),
                };
                DrainReport {
                    node: drain.node.clone(),
                    started_at: drain.start.as_secs_f64(),
                    finished_at: state.finished.map(|d| d.as_secs_f64()),
                    blocked_by,
                    state,
                }
            })
            .collect(),
        virt_handler: scenario.cluster.kubevirt.virt_handler.as_str(),
        migration_timeline: observed.migration_tracks.clone(),
        preemptors: observed
            .preemptors
            .iter()
            .map(|(pod, track)| PreemptorWait {
                pod: pod.clone(),
                node: track.node.clone(),
                created_at: track.created_at,
                bound_at: track.bound_at,
                waited_seconds: track.bound_at.unwrap_or(simulated_seconds) - track.created_at,
            })
            .collect(),
        holds: invariants::holds(&store, &observed.holds),
        events: invariants::events(&store),
        invariant_violations: observed.violations.clone(),
        descheduler: descheduler.map(|d| d.stats()),
        controller: evac.as_ref().map(|evac| evac.controller_stats()),
        evac_effects: evac.as_ref().map(|evac| evac.effects()).unwrap_or_default(),
        track,
    })
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
    let cluster_error = |error| ScenarioError::Cluster { what: "cannot build the cluster", error };
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
