use std::sync::Arc;
use std::time::Duration;

use super::instance::Instance;
use super::{EvalError, PolicyModule};
use crate::capabilities::HostCapabilities;

/// A policy module bound to the host capabilities it may call.
#[derive(Clone)]
pub struct Policy {
    module: PolicyModule,
    capabilities: Arc<dyn HostCapabilities>,
    timeout: Duration,
}

impl Policy {
    /// The module's calls get the engine's deadline unless [`Policy::with_timeout`] sets another.
    pub fn new(module: PolicyModule, capabilities: Arc<dyn HostCapabilities>) -> Self {
        let timeout = module.engine().options().timeout;
        Self { module, capabilities, timeout }
    }

    /// Sets the deadline of each call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The deadline of each call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The compiled module.
    pub fn module(&self) -> &PolicyModule {
        &self.module
    }

    /// Calls a waPC operation in a fresh, isolated guest state and returns its answer.
    ///
    /// The guest state is either a new instance, or an idle instance of the same module that was
    /// put back into its exact post-init state after its previous call (see `prepare` for when a
    /// module qualifies). An instance whose call failed is never reused.
    pub fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, EvalError> {
        let module = self.module.inner();
        let Some(_permit) = module.engine.permits().acquire(self.timeout) else {
            return Err(EvalError::Overloaded(module.engine.options().max_concurrent));
        };
        let mut instance = match module.take_idle() {
            Some(instance) => instance,
            None => Instance::new(module, Arc::clone(&self.capabilities))?,
        };
        // A failed call leaves the instance in an unknown state: it is dropped, never reused. A
        // panic in the host's own code during the call (a host capability, say) is the host's
        // fault, not the guest's: it is reported as such, and the instance goes with it.
        let call = std::panic::AssertUnwindSafe(|| {
            instance.call(module, &self.capabilities, operation, payload, self.timeout)
        });
        let answer =
            std::panic::catch_unwind(call).map_err(|panic| EvalError::HostPanic(panic_text(&*panic)))??;
        if instance.reset() {
            module.make_idle(instance);
        }
        Ok(answer)
    }
}

/// The message of a panic payload (a `&str` or a `String`, as `panic!` makes them).
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    text.lines().next().unwrap_or_default().to_owned()
}

impl crate::policy::WapcPolicy for Policy {
    fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, EvalError> {
        Policy::call(self, operation, payload)
    }

    /// One idle instance: the first request should not pay for instantiation.
    fn prewarm(&self) -> Result<(), EvalError> {
        self.module.prewarm(1)
    }

    fn instance_stats(&self) -> Option<crate::policy::InstanceStats> {
        Some(self.module.stats())
    }
}
