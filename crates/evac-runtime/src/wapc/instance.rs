//! One instance of a policy module, and how it is put back into its post-init state.

// The instance reset unmaps zero pages of the instance's own memory.
#![allow(unsafe_code)]

use std::sync::Arc;
use std::time::Duration;

use wasmtime::{Global, Memory, Store, TypedFunc, Val};

use super::abi::{CallState, GuestState, MemoryLimiter};
use super::dirty_pages;
use super::error::{classify, describe_trap};
use super::module::ModuleInner;
use super::wasi::WasiState;
use super::{EvalError, PolicyEngine};
use crate::capabilities::HostCapabilities;

/// A live instance, initialised (`wapc_init` has run) and ready for a call.
pub(crate) struct Instance {
    store: Store<GuestState>,
    memory: Memory,
    guest_call: TypedFunc<(i32, i32), i32>,
    /// The post-init state, when this instance may be reused.
    snapshot: Option<Snapshot>,
}

struct Snapshot {
    memory: Vec<u8>,
    globals: Vec<(Global, Val)>,
}

/// WASI for one instance: the clock, which is the engine's when it has one.
fn wasi(module: &ModuleInner) -> WasiState {
    WasiState::new(module.engine.options().wall_clock.clone())
}

fn fresh_state(module: &ModuleInner, capabilities: Arc<dyn HostCapabilities>) -> GuestState {
    GuestState {
        wasi: wasi(module),
        limiter: MemoryLimiter { limit: module.engine.options().memory_limit },
        memory: None,
        capabilities,
        call: CallState::default(),
    }
}

/// A trap with what the guest wrote before it (a Rust policy's panic message).
fn with_output(error: EvalError, wasi: &WasiState) -> EvalError {
    match (error, wasi.summary()) {
        (EvalError::Trap(trap), Some(output)) => {
            EvalError::Trap(format!("{trap}; the policy wrote: {output}"))
        }
        (error, _) => error,
    }
}

impl Instance {
    /// Instantiates and initialises the module; snapshots it when it may be reused.
    pub(crate) fn new(
        module: &ModuleInner,
        capabilities: Arc<dyn HostCapabilities>,
    ) -> Result<Self, EvalError> {
        let engine = &module.engine;
        module.created.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut store = Store::new(engine.engine(), fresh_state(module, capabilities));
        store.limiter(|s| &mut s.limiter);
        let timeout = engine.options().timeout;
        store.set_epoch_deadline(PolicyEngine::deadline_ticks(timeout));

        let instance =
            module.pre.instantiate(&mut store).map_err(|e| EvalError::Instantiate(describe_trap(&e)))?;
        let export = |store: &mut Store<GuestState>, export| instance.get_module_export(store, export);
        let memory = export(&mut store, &module.exports.memory)
            .and_then(|e| e.into_memory())
            .ok_or_else(|| EvalError::Instantiate("the module's memory is missing".into()))?;
        store.data_mut().memory = Some(memory);
        for init in &module.exports.init {
            let func = export(&mut store, init).and_then(|e| e.into_func()).expect("resolved at load");
            func.typed::<(), ()>(&store)
                .and_then(|f| f.call(&mut store, ()))
                .map_err(|e| classify(e, engine.options().memory_limit, timeout))?;
        }
        let guest_call = export(&mut store, &module.exports.guest_call)
            .and_then(|e| e.into_func())
            .expect("resolved at load")
            .typed(&store)
            .map_err(|e| EvalError::Instantiate(describe_trap(&e)))?;

        let snapshot = match &module.reusable_globals {
            Some(names) if engine.options().reuse_instances && dirty_pages::available() => {
                let mut globals = Vec::with_capacity(names.len());
                for name in names {
                    if let Some(global) = instance.get_global(&mut store, name) {
                        globals.push((global, global.get(&mut store)));
                    }
                }
                let data = memory.data(&store);
                let snapshot = data.to_vec();
                // Taking the snapshot mapped the zero page wherever the memory was never written;
                // unmap it again so that the resets' scans walk only pages in use.
                let range = data.as_ptr() as usize..data.as_ptr() as usize + data.len();
                // SAFETY: this instance's memory, which nothing else uses while we hold its store.
                unsafe { dirty_pages::drop_zero_pages(range) };
                Some(Snapshot { memory: snapshot, globals })
            }
            _ => None,
        };
        Ok(Self { store, memory, guest_call, snapshot })
    }

    /// Calls a waPC operation. The instance must not be used again if this fails.
    pub(crate) fn call(
        &mut self,
        module: &ModuleInner,
        capabilities: &Arc<dyn HostCapabilities>,
        operation: &str,
        payload: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, EvalError> {
        let engine = &module.engine;
        let state = self.store.data_mut();
        if !Arc::ptr_eq(&state.capabilities, capabilities) {
            state.capabilities = Arc::clone(capabilities);
        }
        state.call = CallState {
            operation: operation.as_bytes().to_vec(),
            payload: payload.to_vec(),
            ..CallState::default()
        };
        state.wasi.output.clear();
        self.store.set_epoch_deadline(PolicyEngine::deadline_ticks(timeout));

        let args = (operation.len() as i32, payload.len() as i32);
        let status = self.guest_call.call(&mut self.store, args).map_err(|e| {
            with_output(classify(e, engine.options().memory_limit, timeout), &self.store.data().wasi)
        })?;
        let call = &mut self.store.data_mut().call;
        match (status, call.response.take(), call.error.take()) {
            (1, Some(response), _) => Ok(response),
            (1, None, _) => Ok(Vec::new()),
            (_, _, Some(error)) => Err(EvalError::Guest(String::from_utf8_lossy(&error).into_owned())),
            (status, _, None) => {
                Err(EvalError::Guest(format!("__guest_call returned {status} without an error message")))
            }
        }
    }

    pub(crate) fn is_reusable(&self) -> bool {
        self.snapshot.is_some()
    }

    /// Puts the instance back into its post-init state. `false` if it cannot be (it must then be
    /// dropped): not reusable, or its memory grew.
    pub(crate) fn reset(&mut self) -> bool {
        let Some(snapshot) = &self.snapshot else {
            return false;
        };
        let data = self.memory.data_mut(&mut self.store);
        if data.len() != snapshot.memory.len() {
            return false;
        }
        let base = data.as_ptr() as usize;
        let restored = dirty_pages::for_each_dirty_range(base..base + data.len(), &mut |range| {
            let (start, end) = (range.start - base, range.end - base);
            data[start..end].copy_from_slice(&snapshot.memory[start..end]);
        });
        if restored.is_none() {
            return false;
        }
        for (global, value) in &snapshot.globals {
            if global.set(&mut self.store, *value).is_err() {
                return false;
            }
        }
        // WASI keeps no descriptors or other state; only the output goes.
        self.store.data_mut().wasi.output.clear();
        true
    }
}
