//! The evaluation pipeline, the same wherever a policy runs (`evac serve`'s admission path, `evac
//! control`, the simulator): evaluate the active version, apply the policy mode, carry out the
//! effects through the executor (or only record them), and compare with the shadow version.
//!
//! - **protect**: the verdict stands and the effects are carried out. An effect that fails turns
//!   a denial into KubeVirt's 429 `kubevirt failed marking the vmi for eviction: <err>` (the
//!   client retries; nothing is left half done) and stops there; for an allowed request it becomes
//!   a warning and the next effects still run.
//! - **monitor**: the verdict and the effects are recorded (logged, counted as `monitored`), the
//!   request is allowed and nothing is carried out.
//! - **shadow**: a candidate version is evaluated on the same request after the active one,
//!   compared with it (verdict and effects), counted, and never acted on.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use web_time::Instant;

use evac_cluster::{ApiError, Applied, EffectError, Executor};
use evac_core::kubevirt::FAILED_MARKING;
use evac_core::{Effect, PolicyResponse};
use evac_runtime::kubewarden;
use evac_runtime::EvalError;
use serde_json::value::RawValue;

use crate::config::PolicyMode;
use crate::log_limit::LogLimit;
use crate::metrics::{EffectLabels, EvaluationLabels, EventLabels, FaultLabels, Metrics, ShadowLabels};
use crate::registry::{Registry, ServedPolicy, Version};

/// Evaluations slower than this move off the caller's async thread (see [`Pipeline::evaluate`]).
const INLINE_BUDGET: Duration = Duration::from_millis(5);

/// The pipeline: the policies served, the executor their effects go through, the metrics.
#[derive(Clone)]
pub struct Pipeline {
    registry: Arc<Registry>,
    executor: Executor,
    metrics: Arc<Metrics>,
    /// Effects by `<policy> <effect> <outcome>`, for reports (metrics are for scrapers).
    tally: Arc<Mutex<BTreeMap<String, usize>>>,
    /// Warnings about failures, at most one a second per policy (requests can cause them at will).
    warnings: Arc<LogLimit>,
    /// How long one effect may wait for the API server; `None`: as long as it takes (an
    /// in-memory store, which answers at once, on any executor).
    effect_timeout: Option<Duration>,
}

/// How long an effect may wait for a real API server (`evac serve`, `evac control`): under the
/// 10 s `timeoutSeconds` of evac's webhook (`deploy/webhook.yaml`), so that an admission answers
/// (KubeVirt's 429 when a mark could not be written) before the API server gives up on the webhook.
pub const DEFAULT_EFFECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What became of one effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EffectOutcome {
    /// Carried out.
    Applied,
    /// Nothing was left to do (the reason says why).
    Unneeded(&'static str),
    /// The cluster refused it, or could not be reached.
    Failed(EffectError),
    /// Monitor mode: recorded, not carried out.
    Monitored,
    /// Not attempted: an earlier effect of the same denial failed.
    Skipped,
}

impl EffectOutcome {
    /// The metric label: `applied`, `unneeded`, `failed`, `monitored`, `skipped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Unneeded(_) => "unneeded",
            Self::Failed(_) => "failed",
            Self::Monitored => "monitored",
            Self::Skipped => "skipped",
        }
    }
}

/// An evaluation that produced no verdict: a trap, a timeout, a memory overrun, a bad answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// The metric label of the fault (`timeout`, `trap`, ...).
    pub kind: &'static str,
    /// What happened.
    pub message: String,
}

/// One request through the pipeline.
#[derive(Debug)]
pub struct Evaluation {
    /// The policy's id.
    pub policy: String,
    /// The mode it ran in.
    pub mode: PolicyMode,
    /// The version that answered (`label@sha256:...`) and its full digest.
    pub version: String,
    /// `sha256:<hex>` of the version's module.
    pub digest: String,
    /// The verdict as the policy gave it (before the mode), with its effects' failures folded in
    /// (protect mode), or the fault that left the evaluation without one.
    pub outcome: Result<PolicyResponse, Fault>,
    /// Every effect the policy returned, with what became of it.
    pub effects: Vec<(Effect, EffectOutcome)>,
}

impl Evaluation {
    /// Whether the request is allowed, once the mode is applied: a monitored policy allows
    /// everything; a fault denies in protect mode.
    pub fn allowed(&self) -> bool {
        self.mode == PolicyMode::Monitor || self.outcome.as_ref().is_ok_and(|r| r.accepted)
    }
}

/// A shadow evaluation still to run: off the answer's path, it never delays or changes it.
pub struct ShadowRun {
    pipeline: Pipeline,
    served: Arc<ServedPolicy>,
    shadow: Arc<Version>,
    request: Arc<Box<RawValue>>,
    uid: String,
    active: Option<Comparable>,
}

/// The parts of an answer two versions must agree on.
#[derive(Debug, PartialEq)]
struct Comparable {
    accepted: bool,
    code: Option<u16>,
    message: Option<String>,
    effects: Vec<Effect>,
}

impl Comparable {
    fn of(response: &PolicyResponse, effects: Vec<Effect>) -> Self {
        Self { accepted: response.accepted, code: response.code, message: response.message.clone(), effects }
    }
}

impl Pipeline {
    /// A pipeline over a registry's policies, carrying out effects through `executor`.
    pub fn new(registry: Arc<Registry>, executor: Executor, metrics: Arc<Metrics>) -> Self {
        Self {
            registry,
            executor,
            metrics,
            tally: Arc::default(),
            warnings: Arc::new(LogLimit::new(Duration::from_secs(1))),
            effect_timeout: None,
        }
    }

    /// The same pipeline with a deadline for each effect: an effect the API server has not
    /// answered by then fails (504), as a failed write does. Needs a Tokio runtime with timers.
    pub fn with_effect_timeout(mut self, timeout: Duration) -> Self {
        self.effect_timeout = Some(timeout);
        self
    }

    /// Every effect so far, by `<policy> <effect> <outcome>` (e.g. `evacuation CreateMigration
    /// monitored`): in monitor mode, what the policies would have done.
    pub fn effect_counts(&self) -> BTreeMap<String, usize> {
        self.tally.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The policies served.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The metrics every stage records to.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The executor effects go through.
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// Runs a request through a policy: the active version, the mode, the effects. `uid` names
    /// the request in logs. The shadow evaluation, when the policy has a shadow, is returned for
    /// the caller to run when it suits it ([`ShadowRun::run`]): after answering, for a server.
    pub async fn evaluate(
        &self,
        served: &Arc<ServedPolicy>,
        request: Arc<Box<RawValue>>,
        uid: &str,
    ) -> (Evaluation, Option<ShadowRun>) {
        let started = Instant::now();
        let active = Arc::clone(&served.active);
        let result = run(&active, &request).await;
        let shadow_of =
            result.as_ref().ok().map(|response| Comparable::of(response, response.effects.clone()));
        let (outcome, effects) = match result {
            Ok(response) => {
                let (response, effects) = self.act_on(served, &active, response, uid).await;
                (Ok(response), effects)
            }
            Err(error) => (Err(self.fault(served, &active, &error, uid)), Vec::new()),
        };
        served.latency.observe(started.elapsed().as_secs_f64());
        let evaluation = Evaluation {
            policy: served.id.clone(),
            mode: served.mode,
            version: active.name.clone(),
            digest: active.digest.clone(),
            outcome,
            effects,
        };
        let shadow = served.shadow.as_ref().map(|shadow| ShadowRun {
            pipeline: self.clone(),
            served: Arc::clone(served),
            shadow: Arc::clone(shadow),
            request,
            uid: uid.to_owned(),
            active: shadow_of,
        });
        (evaluation, shadow)
    }

    /// A verdict: counted, its effects carried out (or recorded), their failures folded in.
    async fn act_on(
        &self,
        served: &ServedPolicy,
        active: &Version,
        mut response: PolicyResponse,
        uid: &str,
    ) -> (PolicyResponse, Vec<(Effect, EffectOutcome)>) {
        self.count_verdict(served, active, &response);
        let effects = std::mem::take(&mut response.effects);
        let effects = self.carry_out(served, &mut response, effects, uid).await;
        if !response.accepted && served.mode == PolicyMode::Monitor {
            tracing::info!(
                policy = %served.id, uid, message = response.message.as_deref().unwrap_or_default(),
                "monitor mode: the request would have been rejected"
            );
        }
        (response, effects)
    }

    /// Counts a verdict under its outcome and code.
    fn count_verdict(&self, served: &ServedPolicy, active: &Version, response: &PolicyResponse) {
        match (response.accepted, response.code) {
            (true, _) => served.outcomes.accepted.inc(),
            (false, Some(429)) => served.outcomes.evacuating.inc(),
            (false, code) => {
                let code = code.unwrap_or(EvaluationLabels::DENIED);
                served.outcomes.other_codes.lock().unwrap_or_else(PoisonError::into_inner).insert(code);
                let labels = EvaluationLabels {
                    policy: served.id.clone(),
                    version: active.name.clone(),
                    outcome: "rejected",
                    code,
                };
                self.metrics.evaluations.get_or_create(&labels).inc()
            }
        };
    }

    /// An evaluation without a verdict: counted, logged (at most once a second per policy).
    fn fault(&self, served: &ServedPolicy, active: &Version, error: &EvalError, uid: &str) -> Fault {
        served.outcomes.error.inc();
        let labels =
            FaultLabels { policy: served.id.clone(), version: active.name.clone(), kind: error.label() };
        self.metrics.faults.get_or_create(&labels).inc();
        if let Some(held_back) = self.warnings.allow(&format!("{} evaluation", served.id)) {
            tracing::warn!(
                policy = %served.id, version = %active.name, uid, held_back,
                "evaluation failed: {error}"
            );
        }
        Fault { kind: error.label(), message: error.to_string() }
    }

    /// Carries out (protect) or records (monitor) the effects of a verdict, folding failures into
    /// it: see the module's documentation.
    async fn carry_out(
        &self,
        served: &ServedPolicy,
        response: &mut PolicyResponse,
        effects: Vec<Effect>,
        uid: &str,
    ) -> Vec<(Effect, EffectOutcome)> {
        let mut done = Vec::with_capacity(effects.len());
        let mut failed = false;
        for effect in effects {
            let outcome = if served.mode == PolicyMode::Monitor {
                tracing::info!(policy = %served.id, uid, ?effect, "monitor mode: the effect would have been carried out");
                EffectOutcome::Monitored
            } else if failed {
                EffectOutcome::Skipped
            } else {
                match self.apply(&effect).await {
                    Ok(Applied::Written) => {
                        tracing::debug!(policy = %served.id, uid, ?effect, "applied");
                        EffectOutcome::Applied
                    }
                    Ok(Applied::Unneeded(why)) => EffectOutcome::Unneeded(why),
                    Err(e) => {
                        failed = self.fold_failure(served, response, &effect, &e, uid);
                        EffectOutcome::Failed(e)
                    }
                }
            };
            self.record(served, &effect, &outcome);
            done.push((effect, outcome));
        }
        done
    }

    /// Carries out one effect, within the effect deadline when there is one.
    async fn apply(&self, effect: &Effect) -> Result<Applied, EffectError> {
        let Some(timeout) = self.effect_timeout else {
            return self.executor.apply(effect).await;
        };
        tokio::time::timeout(timeout, self.executor.apply(effect)).await.unwrap_or_else(|_| {
            Err(EffectError {
                effect: effect.type_name(),
                error: ApiError {
                    code: 504,
                    reason: "Timeout",
                    message: format!("the API server did not answer within {} ms", timeout.as_millis()),
                },
            })
        })
    }

    /// Folds a failed effect into the verdict: a warning for an allowed request, KubeVirt's 429
    /// for a denial. Returns whether the denial's remaining effects are to be skipped.
    fn fold_failure(
        &self,
        served: &ServedPolicy,
        response: &mut PolicyResponse,
        effect: &Effect,
        error: &EffectError,
        uid: &str,
    ) -> bool {
        if let Some(held_back) = self.warnings.allow(&format!("{} effect", served.id)) {
            tracing::warn!(policy = %served.id, uid, ?effect, held_back, "effect failed: {error}");
        }
        if response.accepted {
            // An allowed request (a pod deletion seen by disruption-cause, a controller's
            // evaluation) is never blocked by its side effect.
            let warning = format!("{} failed: {error}", effect.type_name());
            response.warnings.get_or_insert_with(Vec::new).push(warning);
            false
        } else {
            response.code = Some(evac_core::response::TOO_MANY_REQUESTS);
            response.message = Some(format!("{FAILED_MARKING}: {error}"));
            true
        }
    }

    /// Counts what became of an effect (metrics, and the tally reports read).
    fn record(&self, served: &ServedPolicy, effect: &Effect, outcome: &EffectOutcome) {
        let labels =
            EffectLabels { policy: served.id.clone(), effect: effect.type_name(), result: outcome.as_str() };
        self.metrics.effects.get_or_create(&labels).inc();
        if let (Effect::RecordEvent { reason, .. }, EffectOutcome::Applied) = (effect, outcome) {
            let labels = EventLabels { policy: served.id.clone(), reason: reason.as_str() };
            self.metrics.events.get_or_create(&labels).inc();
        }
        let key = format!("{} {} {}", served.id, effect.type_name(), outcome.as_str());
        *self.tally.lock().unwrap_or_else(PoisonError::into_inner).entry(key).or_default() += 1;
    }
}

impl ShadowRun {
    /// Evaluates the shadow version and compares it with the active one; the result is counted
    /// and a disagreement logged with the request's uid. Effects are never carried out.
    pub async fn run(self) {
        let candidate = run(&self.shadow, &self.request).await;
        let served = &self.served;
        let result = match (&self.active, &candidate) {
            (Some(a), Ok(c)) if *a == Comparable::of(c, c.effects.clone()) => "agree",
            (Some(a), Ok(c)) => {
                tracing::warn!(
                    policy = %served.id, uid = %self.uid, active = %served.active.name, candidate = %self.shadow.name,
                    active_allowed = a.accepted, candidate_allowed = c.accepted,
                    active_message = a.message.as_deref().unwrap_or_default(),
                    candidate_message = c.message.as_deref().unwrap_or_default(),
                    active_effects = a.effects.len(), candidate_effects = c.effects.len(),
                    "shadow version disagrees"
                );
                "disagree"
            }
            (_, Err(e)) => {
                tracing::warn!(policy = %served.id, uid = %self.uid, candidate = %self.shadow.name, "shadow version failed: {e}");
                "error"
            }
            (None, Ok(_)) => "disagree",
        };
        let labels = ShadowLabels {
            policy: served.id.clone(),
            active: served.active.name.clone(),
            candidate: self.shadow.name.clone(),
            result,
        };
        self.pipeline.metrics.shadow.get_or_create(&labels).inc();
    }
}

/// Runs a version's module on a request. Evaluations take tens of microseconds, less than
/// handing them to another thread costs, so they run on the caller's thread; within a Tokio
/// runtime, a version that once ran past [`INLINE_BUDGET`] (a slow or looping module) runs on the
/// blocking pool from then on, so that it cannot hold the runtime's threads up to its deadline
/// again and again.
async fn run(version: &Arc<Version>, request: &Arc<Box<RawValue>>) -> Result<PolicyResponse, EvalError> {
    let runtime = tokio::runtime::Handle::try_current().ok();
    if runtime.is_none() || !version.offloaded.load(Ordering::Relaxed) {
        let started = Instant::now();
        let result = kubewarden::validate(&*version.policy, request, &version.settings);
        if runtime.is_some() && started.elapsed() > INLINE_BUDGET {
            tracing::info!(version = %version.name, "slow evaluations: moving this version to the blocking pool");
            version.offloaded.store(true, Ordering::Relaxed);
        }
        return result;
    }
    let (version, request) = (Arc::clone(version), Arc::clone(request));
    tokio::task::spawn_blocking(move || kubewarden::validate(&*version.policy, &request, &version.settings))
        .await
        .unwrap_or_else(|e| Err(EvalError::HostPanic(format!("the evaluation thread failed: {e}"))))
}
