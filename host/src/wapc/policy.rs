use std::sync::Arc;

use super::instance::Instance;
use super::{EvalError, PolicyModule};
use crate::capabilities::HostCapabilities;

/// A policy module bound to the host capabilities it may call.
#[derive(Clone)]
pub struct Policy {
    module: PolicyModule,
    capabilities: Arc<dyn HostCapabilities>,
}

impl Policy {
    pub fn new(module: PolicyModule, capabilities: Arc<dyn HostCapabilities>) -> Self {
        Self { module, capabilities }
    }

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
        let mut instance = match module.idle.lock().expect("idle instances").pop() {
            Some(instance) => instance,
            None => Instance::new(module, Arc::clone(&self.capabilities))?,
        };
        let t = std::time::Instant::now();
        let answer = instance.call(module, &self.capabilities, operation, payload)?;
        CALL_NS.fetch_add(t.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        let t = std::time::Instant::now();
        let ok = instance.reset();
        RESET_NS.fetch_add(t.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
        if ok {
            let mut idle = module.idle.lock().expect("idle instances");
            if idle.len() < module.engine.options().max_concurrent as usize {
                idle.push(instance);
            }
        }
        Ok(answer)
    }
}
pub static RESET_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
pub static CALL_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
pub static DIRTY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
pub static MEMLEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
