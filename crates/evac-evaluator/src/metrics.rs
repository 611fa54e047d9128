//! evac's Prometheus metrics: one registry per process ([`Process`]), holding the pipeline's
//! families and that process's own, served on its probe port (`/metrics`) in the format the
//! scraper asks for ([`Metrics::encode_for`]).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// `policy`, `version` (the version's label and digest), `outcome` (`accepted`, `rejected`, or
/// `error`: no verdict, the evaluation failed) and `code`, the HTTP status of the policy's answer:
/// `200` accepted, `429` KubeVirt's "evacuation under way, retry" (a rejection that is no
/// denial), the rejection's own code otherwise (`403` when it gives none, as the API server
/// answers a webhook's denial without one), `500` for an evaluation that failed.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvaluationLabels {
    /// The policy's id.
    pub policy: String,
    /// The version (`label@sha256:<12 hex digits>`).
    pub version: String,
    /// `accepted`, `rejected` or `error`.
    pub outcome: &'static str,
    /// The answer's HTTP status (see the struct's documentation).
    pub code: u16,
}

impl EvaluationLabels {
    /// The `code` of a rejection that names none.
    pub const DENIED: u16 = 403;
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

/// The versions being served: `role` is `active` or `shadow`. `policy` and `version` are those of
/// the evaluation metrics, so that a query can join them.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VersionLabels {
    /// The policy's id.
    pub policy: String,
    /// `active` or `shadow`.
    pub role: &'static str,
    /// The version (`label@sha256:<12 hex digits>`), as the evaluation metrics name it.
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

/// A Warning event a policy recorded on a VMI: `reason` is `EvacuationGivenUp`,
/// `EvacuationDeferred` or `DisruptionLeftToKubeVirt`.
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

/// What became of something: `result` is `applied` or `refused` (a certificate reload).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `applied` or `refused`.
    pub result: &'static str,
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

/// A launcher pod's disruption, counted once: its cause (`evac.kubevirt.io/disruption-cause`) and
/// how it was handled (`evac.kubevirt.io/disruption-handling`: `evacuating`, `gate-off`, ...).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DisruptionLabels {
    /// The cause, e.g. `preemption`.
    pub cause: String,
    /// How evac handled it, e.g. `gate-off`.
    pub handling: String,
}

/// A hold that ended: `ending` is `released` (the policy ended it: the VM left, or nothing holds
/// it), `window` (its time-bound was reached first) or `dropped` (the kubelet ended the call or
/// the pod: the grace period ended).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HoldEndLabels {
    /// How the hold ended.
    pub ending: &'static str,
}

/// The build: evac's version.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// The version of the binary (and of its modules and image).
    pub version: &'static str,
}

/// The process a registry is for: each exports the pipeline's families and its own, and no other
/// process's (an `evac serve` has no reconcile passes to report, an `evac control` no refused
/// admission requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    /// `evac serve`: admission.
    Serve,
    /// `evac control`: the controller.
    Control,
    /// `evac hold`: the node-local hold endpoint.
    Hold,
    /// The embedded simulator, which runs them all in one process.
    Simulator,
}

impl Process {
    fn serves(self) -> bool {
        matches!(self, Self::Serve | Self::Simulator)
    }

    fn controls(self) -> bool {
        matches!(self, Self::Control | Self::Simulator)
    }

    fn holds(self) -> bool {
        matches!(self, Self::Hold | Self::Simulator)
    }
}

/// Every metric of the pipeline and its host, in one Prometheus registry (prefix `evac_`). Only
/// the families of its [`Process`] are registered: the others still count (a handle is a handle)
/// but are never exported.
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
    /// Warning events policies recorded on VMIs (each once: a repeated event is not written
    /// again), by reason.
    pub events: Family<EventLabels, Counter>,
    /// Evacuation migrations that ended, by cause and outcome (seen by `evac control`).
    pub evacuations: Family<EvacuationLabels, Counter>,
    /// Time from an evacuation migration's creation to its end, by cause.
    pub evacuation_duration: Family<CauseLabels, Histogram>,
    /// Requests refused before evaluation.
    pub refused: Family<RefusalLabels, Counter>,
    /// Certificate reloads, by result.
    pub tls_reloads: Family<ResultLabels, Counter>,
    /// Evaluations by how their instance came.
    pub instances: Family<InstanceLabels, Counter>,
    /// `evac control`: the time of one reconcile pass.
    pub controller_reconcile: Histogram,
    /// `evac control`: 1 while this replica holds the Lease (it acts), 0 while it follows;
    /// client-go's `leader_election_master_status`.
    pub leader: Family<LeaderLabels, Gauge>,
    /// `evac control`: launcher pods' disruptions, each counted once, by cause and handling.
    pub disruptions: Family<DisruptionLabels, Counter>,
    /// `evac control`: VMIs whose evacuation is asked for or marked, and not finished.
    pub evacuations_pending: Gauge,
    /// `evac control`: evacuation migrations running.
    pub evacuations_running: Gauge,
    /// `evac hold`: launcher pod deletions held now (a `preStop` hook's call kept open).
    pub holds: Gauge,
    /// `evac hold`: holds that have used 80 % or more of their time-bound.
    pub holds_near_bound: Gauge,
    /// `evac hold`: holds that ended, by how.
    pub holds_ended: Family<HoldEndLabels, Counter>,
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
    /// Every family: for what runs every part in one process (the simulator, tests).
    fn default() -> Self {
        Self::new(Process::Simulator)
    }
}

impl Metrics {
    /// The registry of `process`, with the build info set: every family is kept, and those of
    /// the process's parts are exposed.
    pub fn new(process: Process) -> Self {
        let mut metrics = Self {
            // Unprefixed: the process collector's `process_*` families are Prometheus' own names.
            registry: Registry::default(),
            evaluations: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            faults: Family::default(),
            swaps: Family::default(),
            versions: Family::default(),
            shadow: Family::default(),
            effects: Family::default(),
            events: Family::default(),
            evacuations: Family::default(),
            // 1 s to about 68 min, doubling: migrations take seconds to the completion timeout.
            evacuation_duration: Family::new_with_constructor(|| {
                Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(1.0, 2.0, 13))
            }),
            refused: Family::default(),
            tls_reloads: Family::default(),
            instances: Family::default(),
            controller_reconcile: latency_histogram(),
            leader: Family::default(),
            disruptions: Family::default(),
            evacuations_pending: Gauge::default(),
            evacuations_running: Gauge::default(),
            holds: Gauge::default(),
            holds_near_bound: Gauge::default(),
            holds_ended: Family::default(),
        };
        metrics.register_policies();
        if process.serves() {
            metrics.register_serving();
        }
        if process.controls() {
            metrics.register_control();
        }
        if process.holds() {
            metrics.register_holds();
        }
        metrics
    }

    /// What every process exposes: the build, and what its policies did.
    fn register_policies(&mut self) {
        let r = &mut self.registry;
        let build = Family::<BuildLabels, Gauge>::default();
        build.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION") }).set(1);
        r.register("evac_build_info", "evac's version: 1 for the version this process runs", build);
        r.register(
            "evac_policy_evaluations",
            "Admission requests evaluated, by policy, version, outcome and the answer's HTTP status",
            self.evaluations.clone(),
        );
        r.register(
            "evac_policy_evaluation_duration_seconds",
            "Time to answer an admission request, from its body to the verdict (effects included)",
            self.latency.clone(),
        );
        r.register(
            "evac_policy_faults",
            "Evaluations that produced no verdict: timeouts, traps, memory overruns, bad answers",
            self.faults.clone(),
        );
        r.register("evac_policy_swaps", "Policy version changes, applied or refused", self.swaps.clone());
        r.register(
            "evac_policy_version_info",
            "The policy versions being served: 1 for each, by policy, role, version and digest",
            self.versions.clone(),
        );
        r.register(
            "evac_policy_shadow_comparisons",
            "Shadow evaluations compared with the active version's verdict",
            self.shadow.clone(),
        );
        r.register("evac_policy_effects", "Effects of policies, by result", self.effects.clone());
        r.register(
            "evac_policy_events",
            "Warning events policies recorded on VMIs, by reason (each recorded once)",
            self.events.clone(),
        );
        r.register(
            "evac_policy_instances",
            "Evaluations by how their module instance came: created, or reused after a reset",
            self.instances.clone(),
        );
    }

    /// `evac serve`'s: requests refused before evaluation, certificate reloads.
    fn register_serving(&mut self) {
        self.registry.register(
            "evac_admission_requests_refused",
            "Admission requests refused before any evaluation, by reason",
            self.refused.clone(),
        );
        self.registry.register(
            "evac_tls_reloads",
            "Serving certificate reloads, by result",
            self.tls_reloads.clone(),
        );
    }

    /// `evac control`'s: its passes, its leadership, disruptions and evacuations.
    fn register_control(&mut self) {
        let r = &mut self.registry;
        r.register(
            "evac_controller_reconcile_duration_seconds",
            "Time of one evac control pass: changes read, modules evaluated, effects carried out",
            self.controller_reconcile.clone(),
        );
        r.register(
            "evac_leader_election_master_status",
            "Whether this evac control replica holds the leader election Lease (1) or follows (0)",
            self.leader.clone(),
        );
        r.register(
            "evac_evacuations",
            "Evacuation migrations that ended, by cause and outcome (succeeded, failed, cancelled)",
            self.evacuations.clone(),
        );
        r.register(
            "evac_evacuation_duration_seconds",
            "Time from an evacuation migration's creation to its end, by cause",
            self.evacuation_duration.clone(),
        );
        r.register(
            "evac_disruptions",
            "Launcher pod disruptions, each counted once, by cause and how evac handled it",
            self.disruptions.clone(),
        );
        r.register(
            "evac_evacuations_pending",
            "VMIs whose evacuation is asked for or marked and not finished",
            self.evacuations_pending.clone(),
        );
        r.register(
            "evac_evacuations_running",
            "Evacuation migrations running",
            self.evacuations_running.clone(),
        );
    }

    /// `evac hold`'s: holds now, near their bound, and how they ended.
    fn register_holds(&mut self) {
        // Every ending from the start: an alert on the first one sees it rise from 0.
        for ending in ["released", "window", "dropped"] {
            self.holds_ended.get_or_create(&HoldEndLabels { ending }).inc_by(0);
        }
        let r = &mut self.registry;
        r.register(
            "evac_holds",
            "Launcher pod deletions held now (preStop calls kept open)",
            self.holds.clone(),
        );
        r.register(
            "evac_holds_near_bound",
            "Holds that have used 80% or more of their time-bound: their VMs shut down if it runs out",
            self.holds_near_bound.clone(),
        );
        r.register(
            "evac_holds_ended",
            "Holds that ended, by how: released, window (the time-bound passed), dropped (by the kubelet)",
            self.holds_ended.clone(),
        );
    }

    /// Registers a collector of the host's (the process's CPU and memory).
    pub fn register_collector(&mut self, collector: Box<dyn prometheus_client::collector::Collector>) {
        self.registry.register_collector(collector);
    }

    /// Counts a request refused before evaluation.
    pub fn refuse(&self, reason: &'static str) {
        self.refused.get_or_create(&RefusalLabels { reason }).inc();
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        text
    }

    /// The exposition a scraper sending `accept` asks for, and its content type: OpenMetrics
    /// when it accepts `application/openmetrics-text`, else Prometheus' text format 0.0.4 (what
    /// Prometheus, and `curl`, read without asking).
    pub fn encode_for(&self, accept: Option<&str>) -> (&'static str, String) {
        if accept.is_some_and(super::exposition::accepts_openmetrics) {
            (super::exposition::OPENMETRICS, self.encode())
        } else {
            (super::exposition::PROMETHEUS_TEXT, super::exposition::to_prometheus_text(&self.encode()))
        }
    }
}
