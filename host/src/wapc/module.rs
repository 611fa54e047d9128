use std::sync::{Arc, Mutex};

use anyhow::{anyhow, bail, Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::{ExternType, FuncType, InstancePre, Linker, Module, ModuleExport, ValType};

use super::abi::{self, GuestState};
use super::instance::Instance;
use super::{prepare, PolicyEngine};

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
    pub(crate) idle: Mutex<Vec<Instance>>,
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

impl PolicyModule {
    pub(crate) fn compile(engine: &PolicyEngine, bytes: &[u8]) -> Result<Self> {
        let digest = hex::encode(Sha256::digest(bytes));
        let prepared = prepare::prepare(bytes)?;
        let module = Module::new(engine.engine(), &prepared.bytes).map_err(|e| {
            anyhow!(
                "not a valid WebAssembly module: {}",
                first_line(&format!("{e:#}"))
            )
        })?;
        let exports = resolve_exports(&module)?;
        let mut linker = Linker::new(engine.engine());
        abi::add_to_linker(&mut linker)?;
        let pre = linker.instantiate_pre(&module).map_err(|e| {
            anyhow!(
                "the module needs imports the evac host does not provide: {}",
                first_line(&format!("{e:#}"))
            )
        })?;
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
                digest,
                size: bytes.len(),
            }),
        })
    }

    /// `sha256:<hex>` of the module bytes.
    pub fn digest(&self) -> String {
        format!("sha256:{}", self.inner.digest)
    }

    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// Why evaluations of this module each need a new instance, if they do.
    pub fn reuse_blocker(&self) -> Option<&str> {
        self.inner.reuse_blocker.as_deref()
    }

    pub fn engine(&self) -> &PolicyEngine {
        &self.inner.engine
    }

    pub(crate) fn inner(&self) -> &ModuleInner {
        &self.inner
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_owned()
}

fn resolve_exports(module: &Module) -> Result<Exports> {
    let memory = match module.get_export("memory") {
        Some(ExternType::Memory(_)) => module.get_export_index("memory").expect("export exists"),
        Some(_) => bail!("the module's `memory` export is not a memory"),
        None => bail!("the module exports no `memory`: not a waPC policy"),
    };
    let guest_call = typed_export(
        module,
        "__guest_call",
        &[ValType::I32, ValType::I32],
        &[ValType::I32],
    )?
    .ok_or_else(|| anyhow!("the module does not export `__guest_call`: not a waPC policy"))?;
    let mut init = Vec::new();
    for name in ["_initialize", "_start", "wapc_init"] {
        if let Some(export) = typed_export(module, name, &[], &[])? {
            init.push(export);
        }
    }
    Ok(Exports {
        memory,
        guest_call,
        init,
    })
}

/// An exported function with the given signature; an error if it exists with another one.
fn typed_export(
    module: &Module,
    name: &str,
    params: &[ValType],
    results: &[ValType],
) -> Result<Option<ModuleExport>> {
    let Some(ty) = module.get_export(name) else {
        return Ok(None);
    };
    let ExternType::Func(func) = ty else {
        bail!("the module's `{name}` export is not a function");
    };
    let expected = FuncType::new(
        module.engine(),
        params.iter().cloned(),
        results.iter().cloned(),
    );
    if !FuncType::eq(&func, &expected) {
        bail!("the module's `{name}` has the wrong signature: {func}, expected {expected}");
    }
    module
        .get_export_index(name)
        .map(Some)
        .context("export index")
}
