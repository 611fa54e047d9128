//! The waPC host: runs Kubewarden policy modules on wasmtime.
//!
//! A [`PolicyEngine`] holds the wasmtime engine (pooling allocator, epoch deadlines) and compiles
//! [`PolicyModule`]s. A [`Policy`] is a module bound to the host capabilities it may call; every
//! [`Policy::call`] runs in a fresh, isolated guest state with a memory limit and a deadline.

mod abi;
mod compile_cache;
mod dirty_pages;
mod engine;
mod error;
mod instance;
mod module;
mod permits;
mod policy;
mod prepare;
mod wasi;

pub use compile_cache::{default_dir as default_cache_dir, usable_default_dir as usable_default_cache_dir};
pub use engine::{EngineOptions, PolicyEngine, WallClock};
pub use error::{CacheDirError, EngineError, EvalError, ModuleError};
pub use module::{InstanceStats, PolicyModule};
pub use policy::Policy;
