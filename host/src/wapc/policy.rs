use std::sync::Arc;

use wasmtime::{Store, TypedFunc};
use wasmtime_wasi::WasiCtxBuilder;

use super::abi::{CallState, GuestState, MemoryLimiter};
use super::error::{describe_trap, MemoryLimitExceeded};
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
        Self {
            module,
            capabilities,
        }
    }

    pub fn module(&self) -> &PolicyModule {
        &self.module
    }

    /// Calls a waPC operation in a fresh, isolated guest state and returns its answer.
    pub fn call(&self, operation: &str, payload: &[u8]) -> Result<Vec<u8>, EvalError> {
        let module = self.module.inner();
        let engine = &module.engine;
        let state = GuestState {
            wasi: WasiCtxBuilder::new().build_p1(),
            limiter: MemoryLimiter {
                limit: engine.options().memory_limit,
            },
            memory: None,
            capabilities: Arc::clone(&self.capabilities),
            call: CallState {
                operation: operation.as_bytes().to_vec(),
                payload: payload.to_vec(),
                ..CallState::default()
            },
        };
        let mut store = Store::new(engine.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(engine.deadline_ticks());

        let fail = |error: wasmtime::Error| classify(error, engine.options());
        let instance = module
            .pre
            .instantiate(&mut store)
            .map_err(|e| EvalError::Instantiate(describe_trap(&e)))?;
        let memory = instance
            .get_module_export(&mut store, &module.exports.memory)
            .and_then(|e| e.into_memory());
        store.data_mut().memory = memory;
        for init in &module.exports.init {
            let func = instance
                .get_module_export(&mut store, init)
                .and_then(|e| e.into_func())
                .expect("resolved at load");
            func.typed::<(), ()>(&store)
                .and_then(|f| f.call(&mut store, ()))
                .map_err(fail)?;
        }
        let guest_call: TypedFunc<(i32, i32), i32> = instance
            .get_module_export(&mut store, &module.exports.guest_call)
            .and_then(|e| e.into_func())
            .expect("resolved at load")
            .typed(&store)
            .map_err(fail)?;
        let op_len = operation.len() as i32;
        let payload_len = payload.len() as i32;
        let status = guest_call
            .call(&mut store, (op_len, payload_len))
            .map_err(fail)?;

        let call = &mut store.data_mut().call;
        match (status, call.response.take(), call.error.take()) {
            (1, Some(response), _) => Ok(response),
            (1, None, _) => Ok(Vec::new()),
            (_, _, Some(error)) => Err(EvalError::Guest(
                String::from_utf8_lossy(&error).into_owned(),
            )),
            (status, _, None) => Err(EvalError::Guest(format!(
                "__guest_call returned {status} without an error message"
            ))),
        }
    }
}

fn classify(error: wasmtime::Error, options: &super::EngineOptions) -> EvalError {
    if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
        return EvalError::MemoryLimit(options.memory_limit);
    }
    if let Some(wasmtime::Trap::Interrupt) = error.downcast_ref::<wasmtime::Trap>() {
        return EvalError::Timeout(options.timeout);
    }
    EvalError::Trap(describe_trap(&error))
}
