//! The server's Prometheus metrics, served as text on the probe port (`/metrics`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// `policy`, `version` (the version's label and digest) and `outcome`: `accepted`, `rejected`,
/// or `error` (no verdict: the evaluation failed).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvaluationLabels {
    pub policy: String,
    pub version: String,
    pub outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    pub policy: String,
}

/// A failed evaluation: `kind` is `timeout`, `memory_limit`, `trap`, `guest_error`, ...
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FaultLabels {
    pub policy: String,
    pub version: String,
    pub kind: &'static str,
}

/// A policy-set change: `result` is `applied` or `refused`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SwapLabels {
    pub policy: String,
    pub result: &'static str,
}

/// The versions being served: `role` is `active` or `shadow`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabels {
    pub policy: String,
    pub role: &'static str,
    pub version: String,
    pub digest: String,
}

/// A shadow evaluation compared with the active one: `result` is `agree`, `disagree` or `error`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    pub policy: String,
    pub active: String,
    pub candidate: String,
    pub result: &'static str,
}

/// An effect carried out: `result` is `applied` or `failed`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EffectLabels {
    pub policy: String,
    pub effect: &'static str,
    pub result: &'static str,
}

/// A request refused before any evaluation: `reason` is `unknown_policy`, `bad_request`, ...
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    pub reason: &'static str,
}

pub struct Metrics {
    registry: Registry,
    pub evaluations: Family<EvaluationLabels, Counter>,
    pub latency: Family<PolicyLabels, Histogram>,
    pub faults: Family<FaultLabels, Counter>,
    pub swaps: Family<SwapLabels, Counter>,
    pub versions: Family<VersionLabels, Gauge>,
    pub shadow: Family<ShadowLabels, Counter>,
    pub effects: Family<EffectLabels, Counter>,
    pub refused: Family<RefusalLabels, Counter>,
    pub tls_reloads: Family<RefusalLabels, Counter>,
    pub instances: Family<InstanceLabels, Gauge>,
    /// `evac control`: the time of one reconcile pass.
    pub controller_reconcile: Histogram,
}

/// Instances of a version's module: `how` is `created` (instantiated) or `reused` (evaluations
/// that ran on an instance reset to its post-init state).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InstanceLabels {
    pub policy: String,
    pub version: String,
    pub how: &'static str,
}

/// Latency buckets from 10 us to about 5 s: evaluations take tens of microseconds, deadlines are
/// up to seconds.
fn latency_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(1e-5, 2.5, 15))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("evac");
        let evaluations = Family::default();
        registry.register(
            "policy_evaluations",
            "Admission requests evaluated, by policy, version and outcome",
            evaluations.clone(),
        );
        let latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register(
            "policy_evaluation_duration_seconds",
            "Time to answer an admission request, from its body to the verdict (effects included)",
            latency.clone(),
        );
        let faults = Family::default();
        registry.register(
            "policy_faults",
            "Evaluations that produced no verdict: timeouts, traps, memory overruns, bad answers",
            faults.clone(),
        );
        let swaps = Family::default();
        registry.register("policy_swaps", "Policy version changes, applied or refused", swaps.clone());
        let versions = Family::default();
        registry.register("policy_version_info", "The policy versions being served", versions.clone());
        let shadow = Family::default();
        registry.register(
            "policy_shadow_comparisons",
            "Shadow evaluations compared with the active version's verdict",
            shadow.clone(),
        );
        let effects = Family::default();
        registry.register("policy_effects", "Effects carried out for policies", effects.clone());
        let refused = Family::default();
        registry.register(
            "admission_requests_refused",
            "Requests refused before evaluation",
            refused.clone(),
        );
        let tls_reloads = Family::default();
        registry.register("tls_reloads", "Certificate reloads, by result", tls_reloads.clone());
        let instances = Family::default();
        registry.register(
            "policy_instances",
            "Evaluations by how their instance came: created, or reused after a reset",
            instances.clone(),
        );
        let controller_reconcile = latency_histogram();
        registry.register(
            "controller_reconcile_duration_seconds",
            "Time of one evac control pass: changes read, modules evaluated, effects carried out",
            controller_reconcile.clone(),
        );
        Self {
            controller_reconcile,
            registry,
            evaluations,
            latency,
            faults,
            swaps,
            versions,
            shadow,
            effects,
            refused,
            tls_reloads,
            instances,
        }
    }
}

impl Metrics {
    pub fn refuse(&self, reason: &'static str) {
        self.refused.get_or_create(&RefusalLabels { reason }).inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        text
    }
}
