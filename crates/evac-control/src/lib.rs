//! `evac control`: the controller that runs evac's modules on cluster changes and carries out
//! their effects.
//!
//! It watches pods, nodes, VMIs and migrations through a [`ChangeFeed`] (the simulator's store,
//! or kube-rs watch caches), and evaluates:
//!
//! - **disruption-cause** on every launcher pod that starts terminating or gets a
//!   `DisruptionTarget` condition (as the pod UPDATE it is), and on every node change (node
//!   pressure, ahead of the kubelet);
//! - **evacuation** on every node where something relevant changed: its VMIs, its pods, its
//!   migrations, the node itself; and again on every node with evacuations pending when a
//!   migration ends (the parallel limits freed a slot) and at each resync (back-offs).
//!
//! The controller decides nothing itself: it routes changes to modules and applies what they
//! return. Every effect is idempotent against the state it was decided on, and every decision is
//! made from the cluster's current state, so a restarted controller picks up where the cluster
//! is: no duplicate migration, no lost mark.
//!
//! The crate runs wherever the pipeline does: `evac control` against a real cluster (the binary
//! adds leadership), the embedded simulator, and the browser playground.
//!
//! It depends on `evac-evaluator` and `evac-cluster`, and must not depend on an HTTP server, a
//! Kubernetes client (the back end is the host's choice) or the simulator.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod disruptions;
pub mod hold;
mod routing;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use web_time::Instant;

use evac_cluster::ChangeFeed;
use evac_core::kubevirt::{MIGRATION_KIND, NODE_KIND, POD_KIND, VMI_KIND};
use evac_core::model::{NODE_METRICS_API_VERSION, NODE_METRICS_KIND};
use evac_core::node_pressure::NodePressure;
use evac_core::ReadError;
use evac_core::{disruption, evacuation, PolicyId};
use evac_evaluator::metrics::{CauseLabels, EvacuationLabels};
use evac_evaluator::{EffectOutcome, Pipeline, PolicySet, Registry, ServedPolicy};
use serde_json::value::RawValue;

use self::disruptions::Tally;
use self::routing::{Routing, Work};

/// The policy id `policies.yml` must give the controller's disruption-cause module.
pub const DISRUPTION_CAUSE: &str = PolicyId::DisruptionCause.as_str();
/// The policy id `policies.yml` must give the controller's evacuation module.
pub const EVACUATION: &str = PolicyId::Evacuation.as_str();

/// The kinds the controller watches.
pub const WATCHED: [(&str, &str); 5] = [
    POD_KIND,
    NODE_KIND,
    VMI_KIND,
    MIGRATION_KIND,
    // Polled (metrics-server serves no watch): a node's memory in use, for node pressure.
    (NODE_METRICS_API_VERSION, NODE_METRICS_KIND),
];

/// What one reconcile did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pass {
    /// Cluster changes read.
    pub changes: usize,
    /// Requests evaluated through a policy.
    pub evaluations: usize,
    /// Effects carried out.
    pub effects_applied: usize,
    /// Effects that failed (retried by a later decision).
    pub effects_failed: usize,
    /// Effects recorded and not carried out (monitor mode).
    pub effects_monitored: usize,
    /// Nodes with evacuations still to finish: the controller must look again (back-offs).
    pub pending_nodes: usize,
    /// Requests and nodes left for the next pass, its time being up ([`Controller::with_pass_budget`]):
    /// the next pass should come at once.
    pub deferred: usize,
    /// Wall time of the pass.
    pub elapsed: Duration,
}

/// The controller: routes cluster changes to the disruption-cause and evacuation policies through
/// the pipeline, one pass at a time ([`Controller::reconcile`]).
pub struct Controller {
    pipeline: Pipeline,
    state: Mutex<State>,
    budget: Option<Duration>,
}

struct State {
    cursors: [Option<u64>; WATCHED.len()],
    routing: Routing,
    tally: Tally,
}

impl Controller {
    /// A controller over the pipeline's `disruption-cause` and `evacuation` policies.
    pub fn new(pipeline: Pipeline) -> Result<Self, PolicySetError> {
        check_policies(&pipeline.registry().current())?;
        let state =
            State { cursors: [None; WATCHED.len()], routing: Routing::default(), tally: Tally::default() };
        Ok(Self { pipeline, state: Mutex::new(state), budget: None })
    }

    /// Bounds a pass's evaluations by wall time: once it has run this long, what it has not
    /// evaluated waits for the next pass, so that a pass over a whole cluster (the first, which
    /// sees every node as changed) does not keep a newly held pod waiting behind it. Disrupted
    /// pods are evaluated first, then changed nodes, then evacuations. Without a budget (the
    /// simulator, whose runs must not depend on the machine) a pass does everything.
    #[must_use]
    pub fn with_pass_budget(mut self, budget: Duration) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The policies the controller evaluates.
    pub fn registry(&self) -> &Registry {
        self.pipeline.registry()
    }

    /// The pipeline its evaluations go through.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Forgets everything but the cluster: what a restarted controller knows.
    pub fn restart(&self) {
        let mut state = self.lock();
        state.cursors = [None; WATCHED.len()];
        state.routing = Routing::default();
        state.tally = Tally::default();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads what changed, evaluates the modules on it and carries out their effects. With
    /// `resync`, every node with evacuations pending is evaluated again too. Fails when a change
    /// feed cannot be read (the pass evaluates nothing then).
    pub async fn reconcile(&self, feed: &dyn ChangeFeed, resync: bool) -> Result<Pass, ReadError> {
        let started = Instant::now();
        let mut pass = Pass::default();
        // Pods gone: forgotten by the tally once this pass has evaluated what it queued for them.
        let mut deleted = Vec::new();
        let work = {
            let mut state = self.lock();
            let State { cursors, routing, .. } = &mut *state;
            for (i, (api_version, kind)) in WATCHED.iter().enumerate() {
                let (changes, cursor) = match feed.changes(api_version, kind, cursors[i]) {
                    Ok(read) => read,
                    // metrics-server is an add-on: without it, node pressure has no figures.
                    Err(_) if *kind == NODE_METRICS_KIND => continue,
                    Err(error) => return Err(error),
                };
                pass.changes += changes.len();
                for change in &changes {
                    routing.observe(kind, change);
                    if (*api_version, *kind) == POD_KIND && change.deleted {
                        deleted.extend(routing::uid(&change.object));
                    }
                }
                cursors[i] = Some(cursor);
            }
            routing.take_work(resync)
        };
        let metrics = self.pipeline.metrics();
        for ended in &work.ended {
            let labels = EvacuationLabels { cause: ended.cause.clone(), outcome: ended.outcome };
            metrics.evacuations.get_or_create(&labels).inc();
            if let Some(seconds) = ended.seconds {
                let cause = CauseLabels { cause: ended.cause.clone() };
                metrics.evacuation_duration.get_or_create(&cause).observe(seconds);
            }
        }
        let set = self.registry().current();
        self.carry_out(&set, work, &mut pass).await;
        {
            let mut state = self.lock();
            for uid in &deleted {
                state.tally.forget(uid);
            }
        }
        {
            let state = self.lock();
            pass.pending_nodes = state.routing.pending_nodes();
            let (pending, running) = state.routing.evacuations();
            metrics.evacuations_pending.set(pending as i64);
            metrics.evacuations_running.set(running as i64);
        }
        pass.elapsed = started.elapsed();
        self.pipeline.metrics().controller_reconcile.observe(pass.elapsed.as_secs_f64());
        Ok(pass)
    }

    async fn carry_out(&self, set: &PolicySet, work: Work, pass: &mut Pass) {
        let disruption = &set[DISRUPTION_CAUSE];
        let evacuation = &set[EVACUATION];
        // A pass evaluates at least one request, so that deferred work always moves on.
        let deadline = self.budget.map(|budget| Instant::now() + budget);
        let time_up = |pass: &Pass| pass.evaluations > 0 && deadline.is_some_and(|at| Instant::now() >= at);
        let mut pods = work.pods.into_iter();
        let mut node_changes = work.node_changes.into_iter();
        while !time_up(pass) {
            let Some(request) = pods.next().or_else(|| node_changes.next()) else { break };
            self.evaluate(disruption, &request, pass).await;
        }
        let evacuated: BTreeSet<String> = work.nodes.into_iter().collect();
        let mut nodes = evacuated.into_iter();
        while !time_up(pass) {
            let Some(node) = nodes.next() else { break };
            let Some(request) = work.node_requests.get(&node) else { continue };
            self.evaluate(evacuation, request, pass).await;
        }
        let (pods, node_changes, nodes): (Vec<_>, Vec<_>, Vec<_>) =
            (pods.collect(), node_changes.collect(), nodes.collect());
        pass.deferred = pods.len() + node_changes.len() + nodes.len();
        if pass.deferred > 0 {
            self.lock().routing.defer(pods, node_changes, nodes);
        }
    }

    /// Runs one request through the pipeline (mode, effects, shadow), as `evac serve` runs an
    /// admission request.
    async fn evaluate(&self, served: &Arc<ServedPolicy>, request: &RawValue, pass: &mut Pass) {
        pass.evaluations += 1;
        let request = Arc::new(request.to_owned());
        let uid = routing::request_uid(&request);
        let (evaluation, shadow) = self.pipeline.evaluate(served, Arc::clone(&request), &uid).await;
        if served.id == DISRUPTION_CAUSE {
            let warnings = self.lock().tally.observe(&request, &evaluation, self.pipeline.metrics());
            for warning in warnings {
                tracing::warn!("{warning}");
            }
        }
        if let Ok(response) = &evaluation.outcome {
            if !response.accepted {
                tracing::warn!(policy = %served.id, message = response.message.as_deref().unwrap_or_default(), "the policy refused the request");
            }
        }
        for (_, outcome) in &evaluation.effects {
            match outcome {
                EffectOutcome::Applied | EffectOutcome::Unneeded(_) => pass.effects_applied += 1,
                EffectOutcome::Failed(_) | EffectOutcome::Skipped => pass.effects_failed += 1,
                EffectOutcome::Monitored => pass.effects_monitored += 1,
            }
        }
        // The controller has no answer to send first: the comparison runs now.
        if let Some(shadow) = shadow {
            shadow.run().await;
        }
    }
}

/// Whether a policy set is one the controller can run: both its policies present, with the
/// settings they share alike. Checked at start and on every reload (a reload that fails it is
/// refused whole, and the served set stays).
pub fn check_policies(set: &PolicySet) -> Result<(), PolicySetError> {
    for id in [DISRUPTION_CAUSE, EVACUATION] {
        if !set.contains_key(id) {
            return Err(PolicySetError::Missing(id));
        }
    }
    let settings = |id: &str| &*set[id].active.settings;
    let marking = node_pressure(settings(DISRUPTION_CAUSE), |s: &disruption::Settings| &s.node_pressure);
    let releasing = node_pressure(settings(EVACUATION), |s: &evacuation::Settings| &s.node_pressure);
    if marking != releasing {
        return Err(PolicySetError::NodePressureDiffers {
            disruption_cause: describe(&marking),
            evacuation: describe(&releasing),
        });
    }
    let beside_disruption =
        kubevirt_evacuation_controller(settings(DISRUPTION_CAUSE), |s: &disruption::Settings| {
            s.kubevirt_evacuation_controller
        });
    let beside_evacuation =
        kubevirt_evacuation_controller(settings(EVACUATION), |s: &evacuation::Settings| {
            s.kubevirt_evacuation_controller
        });
    if beside_disruption != beside_evacuation {
        return Err(PolicySetError::EvacuationControllerDiffers {
            disruption_cause: beside_disruption,
            evacuation: beside_evacuation,
        });
    }
    Ok(())
}

/// Why a policy set is not one the controller can run ([`check_policies`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicySetError {
    /// One of the controller's policies is missing.
    #[error("policies.yml has no policy `{0}`: evac control needs `{DISRUPTION_CAUSE}` and `{EVACUATION}`", DISRUPTION_CAUSE = DISRUPTION_CAUSE, EVACUATION = EVACUATION)]
    Missing(&'static str),
    /// The two policies read node pressure differently.
    #[error(
        "the nodePressure settings of `{DISRUPTION_CAUSE}` ({disruption_cause}) and `{EVACUATION}` ({evacuation}) differ: \
         one marks VMs by them and the other releases and places them, so they must be the same",
        DISRUPTION_CAUSE = DISRUPTION_CAUSE, EVACUATION = EVACUATION
    )]
    NodePressureDiffers {
        /// `disruption-cause`'s, described.
        disruption_cause: String,
        /// `evacuation`'s, described.
        evacuation: String,
    },
    /// The two policies disagree on whether KubeVirt's evacuation controller runs.
    #[error(
        "the kubevirtEvacuationController settings of `{DISRUPTION_CAUSE}` ({disruption_cause}) and `{EVACUATION}` ({evacuation}) \
         differ: one holds evacuations for the other to start, so they must be the same",
        DISRUPTION_CAUSE = DISRUPTION_CAUSE, EVACUATION = EVACUATION
    )]
    EvacuationControllerDiffers {
        /// `disruption-cause`'s.
        disruption_cause: bool,
        /// `evacuation`'s.
        evacuation: bool,
    },
}

/// How often a running controller looks again at nodes with evacuations pending.
pub const RESYNC: Duration = Duration::from_secs(10);

/// A policy's `nodePressure` setting: that of its settings (`S`, the core's settings of its
/// decision), or the default's when they are missing or unreadable (the policy refuses unreadable
/// settings itself).
fn node_pressure<S>(settings: &RawValue, of: impl Fn(&S) -> &NodePressure) -> NodePressure
where
    S: serde::de::DeserializeOwned + Default,
{
    decision_settings::<S>(settings).map(|s| of(&s).clone()).unwrap_or_default()
}

/// A policy's `kubevirtEvacuationController` setting: that of its settings, or the default's when
/// they are missing or unreadable.
fn kubevirt_evacuation_controller<S>(settings: &RawValue, of: impl Fn(&S) -> bool) -> bool
where
    S: serde::de::DeserializeOwned + Default,
{
    decision_settings::<S>(settings)
        .map_or_else(evac_core::kubevirt_config::evacuation_controller_default, |s| of(&s))
}

/// A policy's settings as its decision reads them (`null`: the defaults); `None` when they do not
/// decode.
fn decision_settings<S: serde::de::DeserializeOwned + Default>(settings: &RawValue) -> Option<S> {
    serde_json::from_str::<Option<S>>(settings.get()).ok().map(Option::unwrap_or_default)
}

fn describe(pressure: &NodePressure) -> String {
    format!("threshold {}, headroom {}", pressure.threshold, pressure.headroom)
}
