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

use serde_json::{json, Value};

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

/// A pod's conditions with `DisruptionTarget` set (replacing an earlier one), as the component
/// about to disrupt it sets it: `reason` names the component (`TerminationByKubelet`,
/// `DeletionByTaintManager`, `PreemptionByScheduler`).
pub(crate) fn with_disruption_target(pod: &Value, reason: &str, message: &str, now: &str) -> Vec<Value> {
    let mut conditions = conditions_without(pod, "DisruptionTarget");
    conditions
        .push(json!({"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
                           "lastTransitionTime": now}));
    conditions
}

/// An object's `status.conditions` without those of one type.
pub(crate) fn conditions_without(object: &Value, type_: &str) -> Vec<Value> {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| text(c, "/type") != type_)
        .cloned()
        .collect()
}
