//! A scenario's cluster with evac: evac's policy server answers the eviction webhook (in
//! process), `evac control` runs as one of the cluster's components, and KubeVirt's own
//! evacuation controller is off. The policies come from a `policies.yml`, as for `evac serve`
//! and `evac control`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::control::sim::ControllerActor;
use crate::control::webhook::{PolicyWebhook, SERVICE};
use crate::control::{Controller, DISRUPTION_CAUSE};
use crate::server::admission::Context;
use crate::server::config::PoliciesFile;
use crate::server::metrics::Metrics;
use crate::server::registry::{Loader, Registry};
use crate::sim::store::Store;
use crate::wapc::{EngineOptions, PolicyEngine, WallClock};

/// How a scenario runs: with KubeVirt alone (the baseline), or with evac.
#[derive(Debug, Clone, Default)]
pub enum Mode {
    #[default]
    KubeVirt,
    /// evac, with the policies of this `policies.yml` (see `examples/control/policies.yml`).
    Evac { policies: PathBuf },
}

/// The policy id the eviction webhook is served by.
pub const POD_EVICTION: &str = "pod-eviction";

/// Starts evac in the simulated cluster: registers its policy server as the webhook's service
/// and returns the controller, to run as an actor. `evictionSoft` is the kubelet's soft threshold
/// (the disruption-cause policy relieves nodes before they reach it).
/// `restarts`: when the controller restarts (forgets all it knew), in simulated time.
pub fn start(
    store: &Arc<Store>,
    policies: &Path,
    eviction_soft: &str,
    restarts: Vec<Duration>,
) -> Result<Arc<ControllerActor>, String> {
    let mut file = PoliciesFile::load(policies).map_err(|e| format!("{e:#}"))?;
    if let Some(entry) = file.policies.get_mut(DISRUPTION_CAUSE) {
        // The threshold is the simulated kubelets' `evictionSoft`: the settings describe the
        // cluster's kubelets, and these are the scenario's.
        let settings = entry.settings.get_or_insert_with(|| serde_json::json!({}));
        if !settings.get("nodePressure").is_some_and(serde_json::Value::is_object) {
            settings["nodePressure"] = serde_json::json!({});
        }
        settings["nodePressure"]["threshold"] = serde_json::json!(eviction_soft);
    }
    // Policies read the simulated clock (back-offs are in simulated time).
    let clock = Arc::clone(store.clock());
    let wall_clock = WallClock(Arc::new(move || {
        (clock.now() - chrono::DateTime::UNIX_EPOCH).to_std().unwrap_or(Duration::ZERO)
    }));
    // Compiled modules are cached where `evac serve` keeps them: runs after the first start fast.
    let cache_dir = Some(std::env::temp_dir().join("evac-cache"));
    let engine = PolicyEngine::new(EngineOptions {
        wall_clock: Some(wall_clock),
        cache_dir,
        ..EngineOptions::default()
    })
    .map_err(|e| format!("cannot start the policy engine: {e:#}"))?;
    let metrics = Arc::new(Metrics::default());
    let loader = Loader { engine, source: Arc::clone(store) as _ };
    let registry = Arc::new(
        Registry::start(&file, loader, Arc::clone(&metrics))
            .map_err(|e| format!("cannot load {}: {e:#}", policies.display()))?,
    );
    if !registry.current().contains_key(POD_EVICTION) {
        return Err(format!("{} has no policy `{POD_EVICTION}` to answer evictions", policies.display()));
    }
    let context = Context { writer: Arc::clone(store) as _, metrics: Arc::clone(&metrics) };
    let webhook = PolicyWebhook { registry: Arc::clone(&registry), policy: POD_EVICTION.into(), context };
    store.register_service(SERVICE.0, SERVICE.1, Arc::new(webhook));
    let controller =
        Controller::new(registry, Arc::clone(store) as _, metrics).map_err(|e| format!("{e:#}"))?;
    Ok(Arc::new(ControllerActor::new(Arc::new(controller)).restarting_at(restarts)))
}
