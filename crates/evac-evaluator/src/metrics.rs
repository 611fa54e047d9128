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
    /// The policy's id.
    pub policy: String,
    /// The version (`label@sha256:<12 hex digits>`).
    pub version: String,
    /// `accepted`, `rejected` or `error`.
    pub outcome: &'static str,
}

/// `policy`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    /// The policy's id.
    pub policy: String,
}

/// A failed evaluation: `kind` is `timeout`, `memory_limit`, `trap`, `guest_error`, ...
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FaultLabels {
    /// The policy's id.
    pub policy: String,
    /// The version (`label@sha256:<12 hex digits>`).
    pub version: String,
    /// What went wrong (`timeout`, `trap`, ...).
    pub kind: &'static str,
}

/// A policy-set change: `result` is `applied` or `refused`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SwapLabels {
    /// The policy's id.
    pub policy: String,
    /// The result (see the struct's documentation).
    pub result: &'static str,
}

/// The versions being served: `role` is `active` or `shadow`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabels {
    /// The policy's id.
    pub policy: String,
    /// `active` or `shadow`.
    pub role: &'static str,
    /// The version (`label@sha256:<12 hex digits>`).
    pub version: String,
    /// The module's full digest.
    pub digest: String,
}

/// A shadow evaluation compared with the active one: `result` is `agree`, `disagree` or `error`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    /// The policy's id.
    pub policy: String,
    /// The active version.
    pub active: String,
    /// The shadow version.
    pub candidate: String,
    /// The result (see the struct's documentation).
    pub result: &'static str,
}

/// An effect: `result` is `applied`, `unneeded`, `failed`, `monitored` or `skipped`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EffectLabels {
    /// The policy's id.
    pub policy: String,
    /// The effect's type (`MarkForEvacuation`, ...).
    pub effect: &'static str,
    /// The result (see the struct's documentation).
    pub result: &'static str,
}

/// An event recorded on a VMI for a policy: `reason` is `EvacuationGivenUp` or
/// `EvacuationDeferred`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    /// The policy's id.
    pub policy: String,
    /// The event's reason.
    pub reason: &'static str,
}

/// A request refused before any evaluation: `reason` is `unknown_policy`, `bad_request`, ...
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// Why (`unknown_policy`, `bad_request`, ...).
    pub reason: &'static str,
}

/// An evacuation migration that ended: its cause (`evac.kubevirt.io/cause`, `unknown` when it
/// names none) and outcome (`succeeded` or `failed`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvacuationLabels {
    /// The migration's cause, e.g. `drain`, `preemption`.
    pub cause: String,
    /// `succeeded` or `failed`.
    pub outcome: &'static str,
}

/// An evacuation's cause.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CauseLabels {
    /// The migration's cause, e.g. `drain`.
    pub cause: String,
}

/// A leader election's Lease, by name.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LeaderLabels {
    /// The Lease's name.
    pub name: String,
}

/// Every metric of the pipeline and its hosts, in one Prometheus registry (prefix `evac_`).
pub struct Metrics {
    registry: Registry,
    /// Evaluations by policy, version and outcome.
    pub evaluations: Family<EvaluationLabels, Counter>,
    /// Time to evaluate a request, effects included, by policy.
    pub latency: Family<PolicyLabels, Histogram>,
    /// Evaluations without a verdict, by kind.
    pub faults: Family<FaultLabels, Counter>,
    /// Policy version changes, applied or refused.
    pub swaps: Family<SwapLabels, Counter>,
    /// The versions being served.
    pub versions: Family<VersionLabels, Gauge>,
    /// Shadow comparisons, by result.
    pub shadow: Family<ShadowLabels, Counter>,
    /// Effects, by policy, type and result.
    pub effects: Family<EffectLabels, Counter>,
    /// Events recorded on VMIs (each once: a repeated event is not written again), by reason:
    /// evacuations given up or deferred.
    pub events: Family<EventLabels, Counter>,
    /// Evacuation migrations that ended, by cause and outcome (seen by `evac control`).
    pub evacuations: Family<EvacuationLabels, Counter>,
    /// Time from an evacuation migration's creation to its end, by cause.
    pub evacuation_duration: Family<CauseLabels, Histogram>,
    /// Requests refused before evaluation.
    pub refused: Family<RefusalLabels, Counter>,
    /// Certificate reloads, by result.
    pub tls_reloads: Family<RefusalLabels, Counter>,
    /// Evaluations by how their instance came.
    pub instances: Family<InstanceLabels, Gauge>,
    /// `evac control`: the time of one reconcile pass.
    pub controller_reconcile: Histogram,
    /// `evac control`: 1 while this replica holds the Lease (it acts), 0 while it follows;
    /// client-go's `leader_election_master_status`.
    pub leader: Family<LeaderLabels, Gauge>,
}

/// Instances of a version's module: `how` is `created` (instantiated) or `reused` (evaluations
/// that ran on an instance reset to its post-init state).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InstanceLabels {
    /// The policy's id.
    pub policy: String,
    /// The version (`label@sha256:<12 hex digits>`).
    pub version: String,
    /// `created` or `reused`.
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
        let events = Family::default();
        registry.register(
            "evacuation_events",
            "Events recorded on VMIs, by reason: evacuations given up or deferred",
            events.clone(),
        );
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
        let leader = Family::default();
        registry.register(
            "leader_election_master_status",
            "Whether this evac control replica holds the leader election Lease (1) or follows (0)",
            leader.clone(),
        );
        let evacuations = Family::default();
        registry.register(
            "evacuations",
            "Evacuation migrations that ended, by cause and outcome (succeeded, failed)",
            evacuations.clone(),
        );
        let evacuation_duration = Family::<CauseLabels, Histogram>::new_with_constructor(|| {
            // 1 s to about 68 min, doubling: migrations take seconds to the completion timeout.
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 13))
        });
        registry.register(
            "evacuation_duration_seconds",
            "Time from an evacuation migration's creation to its end, by cause",
            evacuation_duration.clone(),
        );
        Self {
            evacuations,
            evacuation_duration,
            leader,
            controller_reconcile,
            registry,
            evaluations,
            latency,
            faults,
            swaps,
            versions,
            shadow,
            effects,
            events,
            refused,
            tls_reloads,
            instances,
        }
    }
}

impl Metrics {
    /// Counts a request refused before evaluation.
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
