use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};
use wasmtime::{ExternType, FuncType, InstancePre, Linker, Module, ModuleExport, ValType};

use super::abi::{self, GuestState};
use super::error::{first_line, ModuleError};
use super::instance::Instance;
use super::{compile_cache, prepare, wasi, PolicyEngine};
pub use crate::policy::InstanceStats;

/// A compiled, checked waPC policy module, ready to instantiate cheaply.
#[derive(Clone)]
pub struct PolicyModule {
    inner: Arc<ModuleInner>,
}

pub(crate) struct ModuleInner {
    pub(crate) engine: PolicyEngine,
    pub(crate) pre: InstancePre<GuestState>,
    pub(crate) exports: Exports,
    /// The mutable globals to restore between calls, when instances may be reused.
    pub(crate) reusable_globals: Option<Vec<String>>,
    /// Why instances may not be reused, when they may not.
    reuse_blocker: Option<String>,
    /// Instances in their post-init state, ready for a call.
    idle: Mutex<Vec<Instance>>,
    pub(crate) created: AtomicU64,
    reused: AtomicU64,
    digest: String,
    size: usize,
}

/// Exports resolved once at load, so each evaluation looks them up by index, not by name.
pub(crate) struct Exports {
    pub(crate) memory: ModuleExport,
    pub(crate) guest_call: ModuleExport,
    /// Run in this order after instantiation: `_initialize`/`_start` (WASI reactors and commands,
    /// e.g. TinyGo policies), then `wapc_init`.
    pub(crate) init: Vec<ModuleExport>,
}

/// The binary format (`\0asm`), or text whose first token opens a form or a comment.
fn looks_like_a_module(bytes: &[u8]) -> bool {
    if bytes.starts_with(b"\0asm") {
        return true;
    }
    let Ok(text) = std::str::from_utf8(bytes) else { return false };
    let text = text.trim_start();
    text.starts_with('(') || text.starts_with(";;")
}

impl PolicyModule {
    pub(crate) fn compile(engine: &PolicyEngine, bytes: &[u8]) -> Result<Self, ModuleError> {
        let digest = hex::encode(Sha256::digest(bytes));
        let invalid = |e: &dyn std::fmt::Display| ModuleError::Invalid(first_line(e));
        // WebAssembly text is accepted too, as wasmtime does; anything that is neither is said
        // to be so, not reported as the text parser's complaint about its first byte.
        if !looks_like_a_module(bytes) {
            return Err(ModuleError::NotWebAssembly);
        }
        let binary = wat::parse_bytes(bytes).map_err(|e| invalid(&e))?;
        let prepared = prepare::prepare(&binary).map_err(|e| invalid(&e))?;
        let limit = engine.options().memory_limit;
        if prepared.initial_memory > limit as u64 {
            return Err(ModuleError::MemoryOverLimit {
                initial_kib: prepared.initial_memory / 1024,
                limit_kib: limit / 1024,
            });
        }
        let module = compile_cache::compile(engine, &prepared.bytes).map_err(|e| invalid(&e))?;
        let exports = resolve_exports(&module)?;
        let pre = link(engine, &module)?;
        let (reusable_globals, reuse_blocker) = match prepared.reuse {
            Ok(globals) => (Some(globals), None),
            Err(why) => (None, Some(why)),
        };
        Ok(Self {
            inner: Arc::new(ModuleInner {
                engine: engine.clone(),
                pre,
                exports,
                reusable_globals,
                reuse_blocker,
                idle: Mutex::new(Vec::new()),
                created: AtomicU64::new(0),
                reused: AtomicU64::new(0),
                digest,
                size: bytes.len(),
            }),
        })
    }

    /// `sha256:<hex>` of the module bytes.
    /// `sha256:<hex>` of the module's bytes.
    pub fn digest(&self) -> String {
        format!("sha256:{}", self.inner.digest)
    }

    /// The module's size in bytes.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// Why evaluations of this module each need a new instance, if they do.
    pub fn reuse_blocker(&self) -> Option<&str> {
        self.inner.reuse_blocker.as_deref()
    }

    /// The engine that compiled the module.
    pub fn engine(&self) -> &PolicyEngine {
        &self.inner.engine
    }

    pub(crate) fn inner(&self) -> &Arc<ModuleInner> {
        &self.inner
    }

    /// How many instances were created, and how many evaluations ran on a reused one.
    pub fn stats(&self) -> InstanceStats {
        InstanceStats {
            created: self.inner.created.load(Ordering::Relaxed),
            reused: self.inner.reused.load(Ordering::Relaxed),
        }
    }

    /// Creates idle instances ahead of the first evaluations, off the request path.
    pub fn prewarm(&self, count: usize) -> Result<(), super::EvalError> {
        for _ in 0..count {
            // Prewarming is an optimisation: when every slot is busy, it is not needed.
            let Some(_permit) = self.inner.engine.permits().acquire(std::time::Duration::ZERO) else {
                break;
            };
            let instance = Instance::new(&self.inner, Arc::new(crate::capabilities::NoCapabilities))?;
            if !instance.is_reusable() {
                break;
            }
            self.inner.make_idle(instance);
        }
        Ok(())
    }
}

impl ModuleInner {
    pub(crate) fn take_idle(&self) -> Option<Instance> {
        let instance = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
        if instance.is_some() {
            self.engine.permits().release_idle(1);
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        instance
    }

    /// Keeps an instance for a later evaluation, if an idle slot is left (otherwise drops it).
    pub(crate) fn make_idle(&self, instance: Instance) {
        if self.engine.permits().reserve_idle() {
            // An instance is in its post-init state or is not here: a panic elsewhere while the
            // lock was held leaves nothing half-done in the list.
            self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(instance);
        }
    }
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        let idle = self.idle.get_mut().map(|idle| idle.len()).unwrap_or(0);
        self.engine.permits().release_idle(idle);
    }
}

/// The module linked to the host's functions (waPC, WASI), ready to instantiate.
fn link(engine: &PolicyEngine, module: &Module) -> Result<InstancePre<GuestState>, ModuleError> {
    let mut linker = Linker::new(engine.engine());
    abi::add_to_linker(&mut linker).map_err(|e| ModuleError::Link(first_line(&e)))?;
    wasi::stub_the_rest(&mut linker, module).map_err(|e| ModuleError::Link(first_line(&e)))?;
    linker.instantiate_pre(module).map_err(|e| ModuleError::Imports(first_line(&e)))
}

fn not_wapc(why: impl Into<String>) -> ModuleError {
    ModuleError::NotWapc(why.into())
}

fn resolve_exports(module: &Module) -> Result<Exports, ModuleError> {
    let memory = match module.get_export("memory") {
        Some(ExternType::Memory(_)) => module.get_export_index("memory").expect("export exists"),
        Some(_) => return Err(not_wapc("the module's `memory` export is not a memory")),
        None => return Err(not_wapc("the module exports no `memory`: not a waPC policy")),
    };
    let guest_call = typed_export(module, "__guest_call", &[ValType::I32, ValType::I32], &[ValType::I32])?
        .ok_or_else(|| not_wapc("the module does not export `__guest_call`: not a waPC policy"))?;
    let mut init = Vec::new();
    for name in ["_initialize", "_start", "wapc_init"] {
        if let Some(export) = typed_export(module, name, &[], &[])? {
            init.push(export);
        }
    }
    Ok(Exports { memory, guest_call, init })
}

/// An exported function with the given signature; an error if it exists with another one.
fn typed_export(
    module: &Module,
    name: &str,
    params: &[ValType],
    results: &[ValType],
) -> Result<Option<ModuleExport>, ModuleError> {
    let Some(ty) = module.get_export(name) else {
        return Ok(None);
    };
    let ExternType::Func(func) = ty else {
        return Err(not_wapc(format!("the module's `{name}` export is not a function")));
    };
    let expected = FuncType::new(module.engine(), params.iter().cloned(), results.iter().cloned());
    if !FuncType::eq(&func, &expected) {
        return Err(not_wapc(format!(
            "the module's `{name}` has the wrong signature: {func}, expected {expected}"
        )));
    }
    Ok(module.get_export_index(name))
}
