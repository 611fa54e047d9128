//! evac in the simulated cluster (feature `evac`), plugged in through the interfaces a real
//! install gives it: its policy server answers the cluster's `pods/eviction` webhook and, when
//! the policies have `launcher-hold`, the mutating webhook on pods `CREATE` (in process, through
//! the same pipeline as `evac serve`); its hold endpoint listens on every node's loopback (the
//! kubelet's `preStop` hooks reach it); and its controller (`evac-control`) runs as one of the
//! cluster's components, on simulated time. Nothing here decides: it only connects evac's
//! pipeline and controller to a simulated cluster. How the policies run is the caller's: `evac
//! simulate` compiles the modules with wasmtime, the browser playground links the policy crates.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use evac_cluster::Executor;
use evac_control::hold::{Holder, Verdict};
use evac_control::{Controller, Pass, PolicySetError, RESYNC, WATCHED};
use evac_core::node_pressure::NodePressure;
use evac_core::{disruption, evacuation, PolicyId};
use evac_evaluator::admission;
use evac_evaluator::{ConfigError, ModuleLoader, Pipeline, PipelineBuilder, PoliciesFile, PolicyRefused};
use futures::future::BoxFuture;
use serde_json::Value;

use crate::api::webhooks::{WebhookError, WebhookService};
use crate::scenario::{ControllerStats, Evac, EvacRun, Scenario, ScenarioError, EVAC_SERVICE};
use crate::store::{HookAnswer, HookCall, NodeEndpoint};
use crate::{Actor, ApiError, Kind, Store};

/// The policy the eviction webhook is served by.
const POD_EVICTION: &str = PolicyId::PodEviction.as_str();
/// The policy of the mutating webhook on pods `CREATE`, when the policies have it.
const LAUNCHER_HOLD: &str = PolicyId::LauncherHold.as_str();
/// evac's mutating webhook configuration (`deploy/`), for `launcher-hold`.
pub const HOLD_WEBHOOK_CONFIGURATION: &str = "evac-launcher-hold";

/// Reads a policies file.
pub type LoadPolicies = dyn Fn() -> Result<PoliciesFile, ConfigError> + Send + Sync;

/// Why a run's module loader could not be made (the policy engine did not start, say).
pub type LoaderError = Box<dyn std::error::Error + Send + Sync>;

/// Makes the module loader of one run from its store (the objects and the clock policies read).
pub type LoaderFor = dyn Fn(&Arc<Store>) -> Result<Box<dyn ModuleLoader>, LoaderError> + Send + Sync;

/// Why evac could not start in a simulated cluster.
#[derive(Debug, thiserror::Error)]
pub enum WithEvacError {
    /// The policies file is refused.
    #[error("{0}")]
    Policies(ConfigError),
    /// The module loader could not be made.
    #[error("{0}")]
    Loader(LoaderError),
    /// A policy of the file is refused.
    #[error("cannot load {name}: {error}")]
    Load {
        /// Where the policies come from.
        name: String,
        /// The policy refused, and why.
        error: PolicyRefused,
    },
    /// The file has no policy to answer the eviction webhook.
    #[error("{name} has no policy `{POD_EVICTION}` to answer evictions")]
    NoPodEviction {
        /// Where the policies come from.
        name: String,
    },
    /// `launcher-hold`'s settings do not read.
    #[error("{LAUNCHER_HOLD}: invalid settings: {0}")]
    HoldSettings(serde_json::Error),
    /// The mutating webhook for `launcher-hold` could not be registered.
    #[error("cannot register evac's mutating webhook: {}", .0.message)]
    HoldWebhook(ApiError),
    /// The controller cannot run these policies.
    #[error("{0}")]
    Controller(PolicySetError),
}

/// Where one run's policies come from and how they run.
pub struct EvacPolicies {
    /// Where the policies come from, for messages (`examples/control/policies.yml`).
    pub name: String,
    /// Reads the policies file, at each start (a file edited between runs is read again).
    pub load: Box<LoadPolicies>,
    /// The modules' loader for one run, reading that run's store (its objects and its clock).
    pub loader: Box<LoaderFor>,
    /// evac replaces KubeVirt's eviction webhook and evacuation controller instead of running
    /// beside them.
    pub replace_kubevirt: bool,
}

impl Evac for EvacPolicies {
    fn start(
        &self,
        store: &Arc<Store>,
        scenario: &Scenario,
        restarts: Vec<Duration>,
    ) -> Result<Box<dyn EvacRun>, ScenarioError> {
        let hold_restarts = scenario.hold_endpoint_restarts().map_err(ScenarioError::Invalid)?;
        let cluster = SimulatedCluster {
            eviction_soft: &scenario.cluster.kubelet.eviction_soft.0,
            kubevirt_evacuation_controller: !self.replace_kubevirt,
            virt_handler: scenario.cluster.kubevirt.virt_handler,
        };
        let evac = |e: WithEvacError| ScenarioError::Evac(e.to_string());
        let file = (self.load)().map_err(|e| evac(WithEvacError::Policies(e)))?;
        let loader = (self.loader)(store).map_err(|e| evac(WithEvacError::Loader(e)))?;
        let running = start(store, file, &self.name, &cluster, restarts, loader).map_err(evac)?;
        if let Some(endpoint) = &running.hold {
            endpoint.restarting_at(hold_restarts);
        }
        Ok(Box::new(running))
    }

    fn replaces_kubevirt(&self) -> bool {
        self.replace_kubevirt
    }
}

/// What the policies' settings say about the cluster, as the simulated one is.
pub struct SimulatedCluster<'a> {
    /// The kubelets' soft eviction threshold (`evictionSoft`).
    pub eviction_soft: &'a str,
    /// KubeVirt's evacuation controller runs.
    pub kubevirt_evacuation_controller: bool,
    /// What its virt-handler does at a launcher pod's SIGTERM.
    pub virt_handler: evac_core::hold::VirtHandler,
}

/// evac running in a simulated cluster.
pub struct Running {
    /// The controller, as the actor the simulation runs.
    pub controller: Arc<ControllerActor>,
    /// The hold endpoint on every node's loopback, when the policies have `launcher-hold`.
    pub hold: Option<Arc<HoldEndpoint>>,
    pipeline: Pipeline,
}

impl EvacRun for Running {
    fn actors(&self) -> Vec<Box<dyn Actor>> {
        vec![Box::new(Arc::clone(&self.controller))]
    }

    fn controller_stats(&self) -> ControllerStats {
        let passes = self.controller.passes();
        let mut ms: Vec<f64> = passes.iter().map(|p| p.elapsed.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        let at = |q: f64| ms.get(((ms.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
        ControllerStats {
            reconcile_ms_p50: at(0.5),
            reconcile_ms_p99: at(0.99),
            reconcile_ms_max: ms.last().copied().unwrap_or(0.0),
            passes: passes.len(),
            evaluations: passes.iter().map(|p| p.evaluations).sum(),
            effects_applied: passes.iter().map(|p| p.effects_applied).sum(),
            effects_failed: passes.iter().map(|p| p.effects_failed).sum(),
            effects_monitored: passes.iter().map(|p| p.effects_monitored).sum(),
        }
    }

    fn effects(&self) -> BTreeMap<String, usize> {
        self.pipeline.effect_counts()
    }
}

/// Starts evac in the simulated cluster: registers its policy server as the webhook's service
/// and returns the controller, to run as an actor. `file`: the policies (`name` says where they
/// come from, for messages); `cluster`: what the settings of the disruption-cause and evacuation
/// policies say about the cluster, which are the simulated cluster's (the kubelets' soft
/// threshold, which the disruption-cause policy relieves nodes before; whether KubeVirt's
/// evacuation controller runs); `restarts`: when the controller restarts (forgets all it knew),
/// in simulated time; `loader`: how the modules run (wasmtime for `evac simulate`, the policy
/// crates linked in for the browser playground), reading `store`'s objects and clock.
pub fn start(
    store: &Arc<Store>,
    mut file: PoliciesFile,
    name: &str,
    cluster: &SimulatedCluster<'_>,
    restarts: Vec<Duration>,
    loader: impl ModuleLoader + 'static,
) -> Result<Running, WithEvacError> {
    describe_cluster(&mut file, cluster);
    let pipeline = PipelineBuilder::new(loader, Executor::new(Arc::clone(store.memory()) as _))
        .build(&file)
        .map_err(|error| WithEvacError::Load { name: name.to_owned(), error })?;
    let served = pipeline.registry().current();
    if !served.contains_key(POD_EVICTION) {
        return Err(WithEvacError::NoPodEviction { name: name.to_owned() });
    }
    let hold_settings = served.get(LAUNCHER_HOLD).map(|_| launcher_hold_settings(&file));
    let webhook = PolicyWebhook { pipeline: pipeline.clone() };
    store.register_service(EVAC_SERVICE.0, EVAC_SERVICE.1, Arc::new(webhook));
    let hold = match hold_settings {
        Some(settings) => Some(start_hold_endpoint(store, &pipeline, settings?)?),
        None => None,
    };
    let controller = Controller::new(pipeline.clone()).map_err(WithEvacError::Controller)?;
    let controller = Arc::new(ControllerActor::new(Arc::new(controller)).restarting_at(restarts));
    Ok(Running { controller, hold, pipeline })
}

/// Writes what the disruption-cause and evacuation policies' settings say about the cluster as
/// the simulated cluster is: the settings describe its kubelets and KubeVirt, and these are the
/// scenario's. Both policies read the same settings.
fn describe_cluster(file: &mut PoliciesFile, cluster: &SimulatedCluster<'_>) {
    let simulated = |pressure: &mut NodePressure, beside: &mut bool| {
        pressure.threshold = cluster.eviction_soft.to_owned();
        *beside = cluster.kubevirt_evacuation_controller;
    };
    if let Some(entry) = file.policies.get_mut(PolicyId::DisruptionCause.as_str()) {
        edit_settings(&mut entry.settings, |s: &mut disruption::Settings| {
            simulated(&mut s.node_pressure, &mut s.kubevirt_evacuation_controller);
        });
    }
    if let Some(entry) = file.policies.get_mut(PolicyId::Evacuation.as_str()) {
        edit_settings(&mut entry.settings, |s: &mut evacuation::Settings| {
            simulated(&mut s.node_pressure, &mut s.kubevirt_evacuation_controller);
            s.virt_handler = cluster.virt_handler;
        });
    }
}

/// evac's hold endpoint on every node's loopback at `settings.port`, behind its mutating webhook.
fn start_hold_endpoint(
    store: &Arc<Store>,
    pipeline: &Pipeline,
    settings: evac_core::hold::LauncherHoldSettings,
) -> Result<Arc<HoldEndpoint>, WithEvacError> {
    register_hold_webhook(store).map_err(WithEvacError::HoldWebhook)?;
    let endpoint = Arc::new(HoldEndpoint::new(Holder::new(pipeline.clone())));
    store.register_node_endpoint(settings.port, Arc::clone(&endpoint) as _);
    Ok(endpoint)
}

/// Edits a policy's settings as its decision's settings (`S`; missing or `null`: the defaults).
/// Settings that do not decode are left as they are: the policy's module refuses them at load,
/// with its reason.
fn edit_settings<S>(settings: &mut Option<Value>, edit: impl FnOnce(&mut S))
where
    S: serde::Serialize + serde::de::DeserializeOwned + Default,
{
    let current = settings.clone().unwrap_or(Value::Null);
    let Ok(decoded) = serde_json::from_value::<Option<S>>(current) else { return };
    let mut decoded = decoded.unwrap_or_default();
    edit(&mut decoded);
    if let Ok(edited) = serde_json::to_value(&decoded) {
        *settings = Some(edited);
    }
}

/// `launcher-hold`'s settings, as its module validated them at load.
fn launcher_hold_settings(
    file: &PoliciesFile,
) -> Result<evac_core::hold::LauncherHoldSettings, WithEvacError> {
    let settings = file.policies.get(LAUNCHER_HOLD).and_then(|e| e.settings.clone()).unwrap_or(Value::Null);
    serde_json::from_value::<Option<evac_core::hold::LauncherHoldSettings>>(settings)
        .map(Option::unwrap_or_default)
        .map_err(WithEvacError::HoldSettings)
}

/// evac's `MutatingWebhookConfiguration` for `launcher-hold`, as `deploy/` installs it: pods
/// `CREATE`, launcher pods only, `failurePolicy: Ignore` (a pod is never kept from starting
/// because evac is down: it runs unheld, as with KubeVirt alone).
fn register_hold_webhook(store: &Store) -> Result<(), ApiError> {
    let configuration = serde_json::json!({
        "metadata": {"name": HOLD_WEBHOOK_CONFIGURATION},
        "webhooks": [{
            "name": "launcher-hold.evac.kubevirt.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "IfNeeded",
            "clientConfig": {"service": {"namespace": EVAC_SERVICE.0, "name": EVAC_SERVICE.1,
                                         "path": format!("/validate/{LAUNCHER_HOLD}")}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "matchConditions": [{"name": "virt-launcher",
                                 "expression": "has(object.metadata.labels) && object.metadata.labels[?'kubevirt.io'].orValue('') == 'virt-launcher'"}],
        }],
    });
    let kind = Kind::new("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration");
    match store.create(&kind, "", configuration, false) {
        Ok(_) | Err(ApiError { code: 409, .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// evac's hold endpoint on every node's loopback, as `evac hold` serves it: a hook's call is a
/// hold, asked about ([`Holder::ask`]) each time the kubelet looks, and answered once it ends. A
/// restart of a node's endpoint resets the connections open on it: their hooks end, and those
/// VMs fare as with KubeVirt alone.
pub struct HoldEndpoint {
    holder: Holder,
    /// When each node's endpoint restarts, in simulated time.
    restarts: Mutex<Vec<(String, Duration)>>,
}

impl HoldEndpoint {
    fn new(holder: Holder) -> Self {
        Self { holder, restarts: Mutex::default() }
    }

    /// Restarts the endpoint of these nodes at these times.
    pub fn restarting_at(&self, restarts: Vec<(String, Duration)>) {
        *self.restarts.lock().unwrap_or_else(PoisonError::into_inner) = restarts;
    }
}

impl NodeEndpoint for HoldEndpoint {
    fn get(&self, store: &Store, node: &str, path: &str, call: &HookCall) -> HookAnswer {
        let now = store.clock().elapsed();
        let reset = self
            .restarts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(restarted, at)| restarted == node && call.since < *at && *at <= now);
        if reset {
            return HookAnswer::Failed("connection reset by peer: the hold endpoint restarted".into());
        }
        if evac_core::hold::parse_hook_path(path).is_none() {
            return HookAnswer::Answered(404);
        }
        let Ok(pod) = store.get(&crate::kinds::pods(), &call.namespace, &call.pod) else {
            return HookAnswer::Answered(200);
        };
        let started =
            store.clock().since_epoch().as_secs_f64() - (now.saturating_sub(call.since)).as_secs_f64();
        let text = pod.to_string();
        match store.complete(self.holder.ask(&text, started, &call.container)) {
            Some(Verdict::Hold(_)) => HookAnswer::Waiting,
            Some(Verdict::Release(_)) => HookAnswer::Answered(200),
            None => HookAnswer::Failed("the hold endpoint could not answer".into()),
        }
    }
}

/// Answers webhooks with the policy their path names, as `evac serve` answers `/validate/<id>`:
/// the same envelope checks and pipeline, without the HTTPS in between.
pub struct PolicyWebhook {
    pipeline: Pipeline,
}

impl WebhookService for PolicyWebhook {
    fn review<'a>(
        &'a self,
        _store: &'a Store,
        path: &'a str,
        review: &'a Value,
    ) -> BoxFuture<'a, Result<Value, WebhookError>> {
        Box::pin(async move {
            let policy = path.strip_prefix("/validate/").unwrap_or(POD_EVICTION);
            let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
            let parsed = admission::parse_review(&body).map_err(|e| e.0)?;
            let served = self
                .pipeline
                .registry()
                .current()
                .get(policy)
                .cloned()
                .ok_or_else(|| format!("no policy {policy} is served"))?;
            let (answer, shadow) = admission::answer(&self.pipeline, &served, parsed).await;
            if let Some(shadow) = shadow {
                shadow.run().await;
            }
            Ok(serde_json::to_value(&answer).map_err(|e| e.to_string())?)
        })
    }
}

/// The controller as an actor of the simulator: it runs at every round of a simulation, on the
/// simulated clock, against the store as its cluster.
pub struct ControllerActor {
    /// The controller.
    pub controller: Arc<Controller>,
    /// When the last resync ran, in simulated time.
    last_resync: Mutex<Option<Duration>>,
    /// Every pass, for reports and tests.
    passes: Mutex<Vec<Pass>>,
    /// When to restart, in simulated time, soonest last.
    restarts: Mutex<Vec<Duration>>,
}

impl ControllerActor {
    /// The controller as an actor.
    pub fn new(controller: Arc<Controller>) -> Self {
        Self {
            controller,
            last_resync: Mutex::default(),
            passes: Mutex::default(),
            restarts: Mutex::default(),
        }
    }

    /// Restarts the controller at these times (as a crash and a new pod would).
    pub fn restarting_at(self, mut at: Vec<Duration>) -> Self {
        at.sort_by(|a, b| b.cmp(a));
        *self.restarts.lock().unwrap_or_else(PoisonError::into_inner) = at;
        self
    }

    /// The next restart still to come.
    fn next_restart(&self) -> Option<Duration> {
        self.restarts.lock().unwrap_or_else(PoisonError::into_inner).last().copied()
    }

    /// Every pass so far.
    pub fn passes(&self) -> Vec<Pass> {
        self.passes.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Actor for ControllerActor {
    fn name(&self) -> &'static str {
        "evac-control"
    }

    fn watches(&self) -> Option<Vec<Kind>> {
        Some(WATCHED.iter().map(|(api_version, kind)| Kind::new(api_version, kind)).collect())
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let now = store.clock().elapsed();
        if self.next_restart().is_some_and(|at| at <= now) {
            self.restarts.lock().unwrap_or_else(PoisonError::into_inner).pop();
            self.controller.restart();
            *self.last_resync.lock().unwrap_or_else(PoisonError::into_inner) = None;
            tracing::info!(at = ?now, "evac control restarted");
        }
        let resync = {
            let mut last = self.last_resync.lock().unwrap_or_else(PoisonError::into_inner);
            let due = last.is_none_or(|at| now >= at + RESYNC);
            if due {
                *last = Some(now);
            }
            due
        };
        // The store answers every effect at once: the future is ready when polled.
        let pass =
            futures::executor::block_on(self.controller.reconcile(&**store.memory(), resync)).map_err(
                |e| ApiError { code: 500, reason: "InternalError", message: format!("evac control: {e}") },
            )?;
        let next = (pass.pending_nodes > 0).then(|| {
            let last = self.last_resync.lock().unwrap_or_else(PoisonError::into_inner).unwrap_or(now);
            last + RESYNC
        });
        let next = match (next, self.next_restart()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.passes.lock().unwrap_or_else(PoisonError::into_inner).push(pass);
        Ok(next)
    }
}
