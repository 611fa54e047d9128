//! The policy crates linked into the page, loaded the way a Kubewarden host loads modules: a
//! [`ModuleLoader`] for evac's evaluation pipeline, so that a scenario with evac runs the same
//! registry, pipeline and controller as `evac simulate --evac`, with the policies' own functions
//! in place of their wasm modules.
//!
//! A module path names the crate by its file stem (`.../pod-eviction.wasm` is the `pod-eviction`
//! crate). Reads go through the same [`HostCapabilities`] the wasm host gives a module (the
//! grants of `contextAwareResources`, the `hostCapabilities` patterns, Kubewarden's refusal
//! words), with the requests and error handling of the crate's guest code inside a module
//! (`evac_policy_guest::KubernetesCalls`); the evacuation plan reads the simulated clock, as a
//! module reads it through WASI. A linked policy has no instances and no deadline: it runs to its
//! answer on the page's thread.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use evac_cluster::ObjectSource;
use evac_evaluator::{ModuleLoader, PolicyError};
use evac_policy_guest::KubernetesCalls;
use evac_runtime::capabilities::HostCapabilities;
use evac_runtime::{EvalError, WapcPolicy};
use evac_sim::SimClock;

use evac_core::trace::Trace;
use evac_core::PolicyId;

/// Loads the linked policy crates, reading `source` on `clock`'s time.
pub struct LinkedPolicies {
    source: Arc<dyn ObjectSource>,
    clock: Arc<SimClock>,
}

impl LinkedPolicies {
    /// Policies reading `source`, at `clock`'s time.
    pub fn new(source: Arc<dyn ObjectSource>, clock: Arc<SimClock>) -> Self {
        Self { source, clock }
    }
}

/// What stands for a linked module's bytes: its crate and version, so that its digest names them.
fn identity(policy: PolicyId) -> String {
    format!("{} {} (linked)", policy.as_str(), env!("CARGO_PKG_VERSION"))
}

impl ModuleLoader for LinkedPolicies {
    fn read(&self, path: &Path) -> Result<Vec<u8>, PolicyError> {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let policy = crate::decide::policy(stem).map_err(|e| {
            PolicyError::Bind(
                format!("module {}: the page links no such policy ({e})", path.display()).into(),
            )
        })?;
        Ok(identity(policy).into_bytes())
    }

    fn source(&self) -> Arc<dyn ObjectSource> {
        Arc::clone(&self.source)
    }

    fn bind(
        &self,
        bytes: &[u8],
        path: &Path,
        capabilities: Arc<dyn HostCapabilities>,
        _timeout: Option<Duration>,
    ) -> Result<Arc<dyn WapcPolicy>, PolicyError> {
        let policy =
            PolicyId::ALL.into_iter().find(|p| identity(*p).as_bytes() == bytes).ok_or_else(|| {
                PolicyError::Bind(format!("module {} is not a policy the page links", path.display()).into())
            })?;
        Ok(Arc::new(LinkedPolicy { policy, capabilities, clock: Arc::clone(&self.clock) }))
    }
}

/// One linked policy bound to its capabilities.
struct LinkedPolicy {
    policy: PolicyId,
    capabilities: Arc<dyn HostCapabilities>,
    clock: Arc<SimClock>,
}

impl WapcPolicy for LinkedPolicy {
    /// A panic in the crate is what a trap is in its module: an evaluation without a verdict,
    /// which the pipeline handles as a fault. (In the page's wasm, built with `panic = abort`,
    /// there is no unwinding: a panic stops the page's module, as it stops the run.)
    fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, EvalError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.answer(operation, payload)))
            .unwrap_or_else(|_| Err(EvalError::Trap(format!("the policy panicked in {operation}"))))
    }
}

impl LinkedPolicy {
    fn answer(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, EvalError> {
        let answer = match operation {
            "validate" => {
                // What the crate's guest code calls through waPC in a module, called directly.
                let reader = KubernetesCalls(|operation: &str, payload: &[u8]| {
                    // What crosses the waPC boundary in a module: the error's text.
                    self.capabilities
                        .call("kubewarden", "kubernetes", operation, payload)
                        .map_err(|e| e.to_string())
                });
                let now = self.clock.since_epoch().as_secs_f64();
                match self.policy {
                    PolicyId::PodEviction => pod_eviction::evaluate(payload, &reader),
                    PolicyId::DisruptionCause => {
                        disruption_cause::evaluate_at(payload, &reader, now, &mut Trace::off())
                    }
                    PolicyId::Evacuation => evacuation::evaluate_at(payload, &reader, now, &mut Trace::off()),
                    PolicyId::LauncherHold => launcher_hold::evaluate(payload),
                }
            }
            "validate_settings" => match self.policy {
                PolicyId::PodEviction => pod_eviction::settings_answer(payload),
                PolicyId::DisruptionCause => disruption_cause::settings_answer(payload),
                PolicyId::Evacuation => evacuation::settings_answer(payload),
                PolicyId::LauncherHold => launcher_hold::settings_answer(payload),
            },
            "protocol_version" => Ok(br#""v1""#.to_vec()),
            // wapc-guest's words for a function the module does not register.
            other => return Err(EvalError::Guest(format!("No handler registered for function {other}"))),
        };
        // A crate's error is what its module returns as a waPC error: its text.
        answer.map_err(|e| EvalError::Guest(e.to_string()))
    }
}
