//! evac in the embedded simulator (`evac simulate --evac`, `evac demo`): the simulator's
//! [`evac_sim::with_evac`] wiring, with the policies of a `policies.yml` compiled by wasmtime, as
//! `evac serve` and `evac control` run them. Policies read the simulated clock through WASI, so
//! their back-offs are in simulated time.

use std::path::Path;
use std::sync::Arc;

use evac_evaluator::{Loader, ModuleLoader, PoliciesFile};
use evac_runtime::wapc::{EngineOptions, PolicyEngine, WallClock};
use evac_sim::with_evac::{EvacPolicies, LoaderError};
use evac_sim::Store;

/// evac with the policies of the `policies.yml` at `policies` (see
/// `examples/control/policies.yml`); with `replace_kubevirt`, evac replaces KubeVirt's eviction
/// webhook and evacuation controller instead of running beside them.
pub fn evac_policies(policies: &Path, replace_kubevirt: bool) -> EvacPolicies {
    let path = policies.to_owned();
    EvacPolicies {
        name: policies.display().to_string(),
        load: Box::new(move || PoliciesFile::load(&path)),
        loader: Box::new(wasmtime_loader),
        replace_kubevirt,
    }
}

/// A wasmtime loader whose modules read `store`'s objects and its clock.
fn wasmtime_loader(store: &Arc<Store>) -> Result<Box<dyn ModuleLoader>, LoaderError> {
    let clock = Arc::clone(store.clock());
    let wall_clock = WallClock(Arc::new(move || clock.since_epoch()));
    // Compiled modules are cached where `evac serve` keeps them by default: runs after the first
    // start fast.
    let cache_dir = evac_runtime::wapc::usable_default_cache_dir();
    let engine = PolicyEngine::new(EngineOptions {
        wall_clock: Some(wall_clock),
        cache_dir,
        ..EngineOptions::default()
    })
    .map_err(|e| format!("cannot start the policy engine: {e}"))?;
    Ok(Box::new(Loader { engine, source: Arc::clone(store.memory()) as _ }))
}
