//! Actors: the simulated cluster's components, which change it the way Kubernetes and KubeVirt
//! components do. Each reconciles against the store at the simulated clock's time and says when
//! it next has something to do, so a driver can jump the clock straight there.

pub mod descheduler;
pub mod drain;
pub mod gc;
pub mod hotplug;
pub mod kubelet;
pub mod launcher;
pub mod migration;
pub(crate) use evac_core::model::quantity;
pub mod scheduler;
pub mod taint_manager;
pub mod virt_controller;

pub use descheduler::Descheduler;
pub use drain::Drain;
pub use gc::GarbageCollector;
pub use kubelet::Kubelet;
pub use migration::MigrationController;
pub use scheduler::Scheduler;
pub use taint_manager::TaintManager;
pub use virt_controller::VirtController;

use std::time::Duration;

use serde_json::{json, Value};

use crate::objects::Condition;
use crate::store::Store;
use crate::ApiError;

/// When an actor next has to act: the earliest of the times it was given.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Wake(Option<Duration>);

impl Wake {
    /// The actor has to act again at `at`, if not earlier.
    pub(crate) fn at(&mut self, at: Duration) {
        self.0 = Some(self.0.map_or(at, |n| n.min(at)));
    }

    /// The earliest time given, if any.
    pub(crate) fn next(self) -> Option<Duration> {
        self.0
    }
}

/// KubeVirt's label of a VMI with the node it runs on (kept up to date by virt-controller).
pub const NODE_NAME_LABEL: &str = "kubevirt.io/nodeName";

/// How actors ask for an eviction: `POST pods/<name>/eviction`, with the API server's webhooks
/// and disruption budgets (see [`crate::api::eviction`]), and a record of who asked.
pub trait Evictor: Send + Sync {
    /// Asks for the pod's eviction on behalf of `requester` (an actor's name). `Ok` is the 201 of
    /// an accepted eviction (the pod is then terminating); `Err` is the API's refusal, e.g. a 429
    /// from a webhook or a budget.
    fn evict(&self, store: &Store, namespace: &str, pod: &str, requester: &str) -> Result<(), ApiError>;
}

/// A string field of an object ("" when absent), by JSON pointer: for tests' assertions; the
/// components read through [`crate::objects`].
#[cfg(test)]
pub(crate) fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    field(object, pointer).and_then(Value::as_str).unwrap_or_default()
}

#[cfg(test)]
/// `Value::pointer` without its allocations for plain paths (no `~` escapes): actors read
/// fields of every object at every reconcile.
pub(crate) fn field<'a>(object: &'a Value, pointer: &str) -> Option<&'a Value> {
    pointer.strip_prefix('/')?.split('/').try_fold(object, |value, token| match value {
        Value::Object(map) if token.contains('~') => map.get(&token.replace("~1", "/").replace("~0", "~")),
        Value::Object(map) => map.get(token),
        Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// An annotation's value ("" when absent), for tests' assertions.
#[cfg(test)]
pub(crate) fn annotation<'a>(object: &'a Value, key: &str) -> &'a str {
    field(object, "/metadata/annotations")
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
        .filter(|c| Condition(c).type_() != type_)
        .cloned()
        .collect()
}
