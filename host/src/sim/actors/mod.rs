//! Actors: the simulated cluster's components, which change it the way Kubernetes and KubeVirt
//! components do. Each reconciles against the store at the simulated clock's time and says when
//! it next has something to do, so a driver can jump the clock straight there.

pub mod kubelet;
pub mod migration;
mod quantity;
pub mod taint_manager;

pub use kubelet::Kubelet;
pub use migration::MigrationController;
pub use taint_manager::TaintManager;

use serde_json::Value;

/// A string field of an object ("" when absent), by JSON pointer.
pub(crate) fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// An annotation's value ("" when absent).
pub(crate) fn annotation<'a>(object: &'a Value, key: &str) -> &'a str {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}
