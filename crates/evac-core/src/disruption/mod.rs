//! The disruption-cause decision: what is about to disrupt a `virt-launcher` pod, and whether its
//! VM should live-migrate away instead of shutting down.
//!
//! Only API eviction honours a VM's `EvictionStrategy` (the eviction decision answers those).
//! Scheduler preemption and the taint manager delete the pod directly, after setting its
//! `DisruptionTarget` condition (VEP 55); the kubelet kills it under node pressure (design 000).
//! For each of these causes, behind its KubeVirt feature gate, the VMI is marked for evacuation
//! and KubeVirt's evacuation controller migrates it. A plain pod deletion is not a migration
//! request (VEP 55 non-goals), and a VM its user deletes is never kept alive.
//!
//! The verdict is always Allow: the decision may run as an admission policy on pod deletions,
//! and must never block one. Node requests act on memory pressure before the kubelet does
//! (`pressure`).

mod pressure;
mod settings;
mod tolerated;

pub use pressure::{select_covering, Candidate};
pub use settings::{NodePressure, Settings};

use crate::cluster::{self, ClusterReader, ReadError};
use crate::effect::{Effect, EvacuationSource, EventReason, ObjectRef};
use crate::kubevirt::{NODE_KIND, VMI_KIND};
use crate::kubevirt_config::KubeVirtConfig;
use crate::model::{AdmissionRequest, EvictionStrategy, Node, Pod, VirtualMachineInstance};
use crate::trace::Trace;
use crate::Decision;

/// The audit annotation that records the classified [`Cause`] of a launcher pod's disruption.
pub const CAUSE_AUDIT_ANNOTATION: &str = "evac.kubevirt.io/disruption-cause";
/// The audit annotation that records how a launcher pod's disruption was handled ([`Handling`]).
pub const HANDLING_AUDIT_ANNOTATION: &str = "evac.kubevirt.io/disruption-handling";
/// KubeVirt's feature gates, one per cause (VEP 55 and design 000). This one turns a
/// `PreemptionByScheduler` disruption into an evacuation (VEP 55).
pub const PREEMPTION_GATE: &str = "PreemptionEvictionLiveMigration";
/// The feature gate that turns a `DeletionByTaintManager` disruption into an evacuation (VEP 55).
pub const NOEXECUTE_TAINT_GATE: &str = "NoExecuteTaintEvictionLiveMigration";
/// The feature gate that turns node memory pressure (`TerminationByKubelet`, or `MemoryPressure`
/// ahead of it) into an evacuation (design 000).
pub const NODE_PRESSURE_GATE: &str = "NodePressureEvictionLiveMigration";

/// evac's feature gates, each with the disruptions it turns into evacuations: what `evac control`
/// reports at start.
pub const GATES: [(&str, &str); 3] = [
    (PREEMPTION_GATE, "scheduler preemption"),
    (NOEXECUTE_TAINT_GATE, "NoExecute taint evictions"),
    (NODE_PRESSURE_GATE, "node pressure (the kubelet's evictions)"),
];

/// What disrupts a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cause {
    /// `EvictionByEvictionAPI`: the eviction decision has answered it already.
    ApiEviction,
    /// `PreemptionByScheduler`.
    Preemption,
    /// `DeletionByTaintManager`: a `NoExecute` taint the pod does not tolerate.
    TaintManager,
    /// `TerminationByKubelet`: the kubelet's node-pressure eviction.
    KubeletEviction,
    /// No `DisruptionTarget`, but the node reports `MemoryPressure`: the kubelet is at work.
    NodePressure,
    /// `DeletionByPodGC`: the pod's node is gone, or the pod is an orphan.
    PodGc,
    /// The VMI is being deleted: its user wants the VM stopped.
    UserDeletion,
    /// Anything else, such as a plain `kubectl delete pod`.
    Unknown,
}

impl Cause {
    /// The cause's value in [`CAUSE_AUDIT_ANNOTATION`], e.g. `taint-manager`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApiEviction => "api-eviction",
            Self::Preemption => "preemption",
            Self::TaintManager => "taint-manager",
            Self::KubeletEviction => "kubelet-eviction",
            Self::NodePressure => "node-pressure",
            Self::PodGc => "pod-gc",
            Self::UserDeletion => "user-deletion",
            Self::Unknown => "unknown",
        }
    }

    /// The disruption, in words: "preemption of its pod", ...
    pub fn disruption(self) -> &'static str {
        match self {
            Self::ApiEviction => "API eviction of its pod",
            Self::Preemption => "scheduler's preemption of its pod",
            Self::TaintManager => "NoExecute taint eviction of its pod",
            Self::KubeletEviction | Self::NodePressure => "kubelet's node-pressure eviction of its pod",
            Self::PodGc => "garbage collection of its pod",
            Self::UserDeletion => "deletion of the VM",
            Self::Unknown => "deletion of its pod",
        }
    }

    /// The feature gate that turns this cause into an evacuation, and the mark's source.
    pub fn evacuation(self) -> Option<(&'static str, EvacuationSource)> {
        match self {
            Self::Preemption => Some((PREEMPTION_GATE, EvacuationSource::Preemption)),
            Self::TaintManager => Some((NOEXECUTE_TAINT_GATE, EvacuationSource::NoexecuteTaint)),
            Self::KubeletEviction | Self::NodePressure => {
                Some((NODE_PRESSURE_GATE, EvacuationSource::NodePressure))
            }
            Self::ApiEviction | Self::PodGc | Self::UserDeletion | Self::Unknown => None,
        }
    }
}

/// How a launcher pod's disruption was handled: whether evac moves the VM, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Handling {
    /// The VMI is marked for evacuation (or its evacuation asked for): evac moves the VM.
    Evacuating,
    /// The VMI was evacuating from the node already.
    AlreadyEvacuating,
    /// The cause's feature gate is off: KubeVirt alone handles it.
    GateOff,
    /// The VMI's eviction strategy (or its migratability) calls for no migration.
    NotMigratable,
    /// The VMI is not running on the pod's node (a migration target's pod, a stopped VM).
    NotRunning,
    /// The node is down: nothing migrates away from it.
    NodeDown,
    /// The pod's VMI is gone.
    NoVmi,
    /// The cause calls for no evacuation of evac's (an API eviction, which the eviction decision
    /// answers, a user's deletion, pod GC, a plain deletion).
    NoEvacuation,
}

impl Handling {
    /// The value in [`HANDLING_AUDIT_ANNOTATION`], e.g. `gate-off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Evacuating => "evacuating",
            Self::AlreadyEvacuating => "already-evacuating",
            Self::GateOff => "gate-off",
            Self::NotMigratable => "not-migratable",
            Self::NotRunning => "not-running",
            Self::NodeDown => "node-down",
            Self::NoVmi => "no-vmi",
            Self::NoEvacuation => "no-evacuation",
        }
    }
}

/// Classifies a launcher pod's disruption from the pod's `DisruptionTarget` reason (when the
/// condition is `True`), whether its VMI is being deleted, and whether its node reports
/// `MemoryPressure`. A VMI being deleted wins over everything: its user asked for the shutdown.
pub fn classify(
    disruption_reason: Option<&str>,
    vmi_being_deleted: bool,
    node_memory_pressure: bool,
) -> Cause {
    if vmi_being_deleted {
        return Cause::UserDeletion;
    }
    match disruption_reason {
        Some("PreemptionByScheduler") => Cause::Preemption,
        Some("DeletionByTaintManager") => Cause::TaintManager,
        Some("TerminationByKubelet") => Cause::KubeletEviction,
        Some("EvictionByEvictionAPI") => Cause::ApiEviction,
        Some("DeletionByPodGC") => Cause::PodGc,
        Some(_) => Cause::Unknown,
        None if node_memory_pressure => Cause::NodePressure,
        None => Cause::Unknown,
    }
}

/// Why a request could not be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideError {
    /// Not a request this decision evaluates: the policy is registered for the wrong resources.
    UnsupportedRequest(String),
    /// Settings that do not validate (Kubewarden validates them before any request).
    InvalidSettings(crate::InvalidSettings),
    /// A cluster object could not be read.
    Read(ReadError),
    /// A request of the right kind that cannot be decided as it is (a hold request without its pod).
    BadRequest(String),
}

impl DecideError {
    /// The HTTP status of the rejection a policy answers with: 400 for a request it does not
    /// evaluate, 500 for its own failures.
    pub fn code(&self) -> u16 {
        match self {
            Self::UnsupportedRequest(_) | Self::BadRequest(_) => 400,
            Self::InvalidSettings(_) | Self::Read(_) => 500,
        }
    }
}

impl core::fmt::Display for DecideError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::UnsupportedRequest(got) => write!(
                f,
                "disruption-cause evaluates Pod UPDATE/DELETE, Node CREATE/UPDATE and pods/hold CONNECT requests, not {got}"
            ),
            Self::BadRequest(why) => f.write_str(why),
            Self::InvalidSettings(message) => write!(f, "invalid settings: {message}"),
            Self::Read(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DecideError {}

impl From<ReadError> for DecideError {
    fn from(e: ReadError) -> Self {
        Self::Read(e)
    }
}

/// Decides a Pod UPDATE/DELETE (a launcher pod's disruption), a Node CREATE/UPDATE (memory
/// pressure ahead of the kubelet), or a hold (a `CONNECT` of `pods/hold`, [`crate::hold`]) at
/// `now` (seconds since the Unix epoch). The verdict of a disruption is always Allow, and its
/// effects mark VMIs; a hold's is allowed when the hold ends, 429 while it lasts.
pub fn decide<C>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
) -> Result<Decision, DecideError>
where
    C: ClusterReader + ?Sized,
{
    decide_traced(request, settings, cluster, now, &mut Trace::off())
}

/// [`decide`], recording its checks in order in `trace`.
pub fn decide_traced<C>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Result<Decision, DecideError>
where
    C: ClusterReader + ?Sized,
{
    let kind = &request.kind;
    let result = match (kind.group.as_str(), kind.kind.as_str(), request.operation.as_str()) {
        ("", "Pod", "CONNECT") if request.sub_resource == crate::hold::HOLD_SUBRESOURCE => {
            crate::hold::decide(request, settings, cluster, now, trace)
        }
        ("", "Pod", "UPDATE" | "DELETE") => {
            trace.note(|| format!("pod {} of {}/{}", request.operation, request.namespace, request.name));
            decide_pod(request, settings, cluster, trace)
        }
        ("", "Node", "UPDATE" | "CREATE") => {
            trace.note(|| {
                format!(
                    "node {} of {}: its memory pressure, and NoExecute taints tolerated for a while",
                    request.operation, request.name
                )
            });
            let decision = pressure::decide_node(request, settings, cluster);
            if let Ok(decision) = &decision {
                trace.note(|| {
                    let effects: Vec<&str> = decision.effects.iter().map(Effect::type_name).collect();
                    match effects.as_slice() {
                        [] => "-> allow, nothing to move".to_owned(),
                        _ => format!("-> allow, {} to move VMs away first", effects.join(", ")),
                    }
                });
            }
            decision
        }
        _ => Err(DecideError::UnsupportedRequest(describe(request))),
    };
    if let Err(e) = &result {
        trace.note(|| match e {
            DecideError::Read(_) => format!("a read failed ({e}) -> allow, with a warning"),
            _ => format!("{e} -> rejected ({})", e.code()),
        });
    }
    result
}

fn describe(request: &AdmissionRequest<'_>) -> String {
    let kind = &request.kind;
    let version = match (kind.group.is_empty(), kind.version.is_empty()) {
        (true, _) => kind.version.to_string(),
        (false, true) => kind.group.to_string(),
        (false, false) => format!("{}/{}", kind.group, kind.version),
    };
    let name = if kind.kind.is_empty() { "<no kind>" } else { kind.kind.as_str() };
    let operation = if request.operation.is_empty() { "<no operation>" } else { request.operation.as_str() };
    [version.as_str(), name, operation].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Decides a launcher pod's deletion or update: what disrupts it (recorded as the cause), and how
/// evac handles that (recorded as the handling, with the effect that evacuates its VM).
fn decide_pod<C: ClusterReader + ?Sized>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    trace: &mut Trace,
) -> Result<Decision, DecideError> {
    let Some(disrupted) = Disrupted::of(request, trace) else { return Ok(Decision::allow()) };
    let pod = &disrupted.pod;
    let namespace =
        if pod.metadata.namespace.is_empty() { &request.namespace } else { &pod.metadata.namespace };
    let node = pod.spec.node_name.as_str();
    let raw_vmi = match pod.domain() {
        Some(name) => read_vmi(cluster, namespace, &name)?,
        None => None,
    };
    let vmi = match &raw_vmi {
        Some(raw) => Some(cluster::decode::<VirtualMachineInstance<'_>>(raw, "VirtualMachineInstance")?),
        None => None,
    };
    let cause = disrupted.cause(vmi.as_ref(), cluster)?;
    trace.note(|| format!("cause: {}", cause.as_str()));
    let decision = Decision::allow().with_audit_annotation(CAUSE_AUDIT_ANNOTATION, cause.as_str());
    let (handling, effect) = match &vmi {
        None => {
            trace.note(|| "no VMI -> allow, the cause recorded".into());
            (Handling::NoVmi, None)
        }
        Some(vmi) => {
            let vmi_ref = ObjectRef::new(namespace.as_str(), vmi.metadata.name.as_str());
            handle(vmi, vmi_ref, cause, node, request, settings, cluster, trace)?
        }
    };
    let decision = decision.with_audit_annotation(HANDLING_AUDIT_ANNOTATION, handling.as_str());
    Ok(effect.into_iter().fold(decision, Decision::with_effect))
}

/// A launcher pod being disrupted: deleted, terminating, marked a disruption target, or held
/// while the kubelet stops it.
struct Disrupted<'a> {
    pod: Pod<'a>,
    /// A hold on a pod not being deleted: the kubelet is stopping it for node pressure (the hold
    /// decision records a hold only once the node shows it).
    held_by_kubelet: bool,
}

impl<'a> Disrupted<'a> {
    /// The disrupted launcher pod of a request, or `None` when the request is no disruption of
    /// one (allowing is then the only answer that cannot block a deletion).
    fn of(request: &AdmissionRequest<'a>, trace: &mut Trace) -> Option<Self> {
        // A DELETE carries the pod as it was; an UPDATE as it will be.
        let deleting = request.operation == "DELETE";
        let object = if deleting { request.old_object } else { request.object };
        let Some(pod) = object.and_then(|raw| serde_json::from_str::<Pod<'_>>(raw.get()).ok()) else {
            trace.note(|| "no pod in the request -> allow".into());
            return None;
        };
        if !pod.is_virt_launcher() {
            trace.note(|| "not a virt-launcher pod -> allow".into());
            return None;
        }
        let reason = pod.disruption_reason();
        let stopping = deleting || pod.is_terminating() || reason.is_some();
        let held_by_kubelet =
            !stopping && pod.metadata.annotation(crate::hold::HELD_SINCE_ANNOTATION).is_some();
        if !stopping && !held_by_kubelet {
            trace.note(|| {
                "an update that neither terminates the pod nor marks it a disruption target -> allow".into()
            });
            return None;
        }
        trace.note(|| {
            let reason = reason.map_or("none".to_owned(), |r| format!("DisruptionTarget {r}"));
            format!("virt-launcher on node {}, disruption reason: {reason}", pod.spec.node_name)
        });
        Some(Self { pod, held_by_kubelet })
    }

    /// What disrupts the pod. The node is read only when nothing else names the cause.
    fn cause<C: ClusterReader + ?Sized>(
        &self,
        vmi: Option<&VirtualMachineInstance<'_>>,
        cluster: &C,
    ) -> Result<Cause, DecideError> {
        let vmi_being_deleted = vmi.is_some_and(VirtualMachineInstance::is_being_deleted);
        if self.held_by_kubelet {
            return Ok(classify(Some("TerminationByKubelet"), vmi_being_deleted, false));
        }
        // Its `DisruptionTarget` condition's reason.
        let reason = self.pod.disruption_reason();
        let node_pressure = reason.is_none()
            && !vmi_being_deleted
            && node_has_memory_pressure(cluster, &self.pod.spec.node_name)?;
        Ok(classify(reason, vmi_being_deleted, node_pressure))
    }
}

/// How evac handles the disruption of a VMI's pod on `node`, and the effect that evacuates it.
#[allow(clippy::too_many_arguments)]
fn handle<C: ClusterReader + ?Sized>(
    vmi: &VirtualMachineInstance<'_>,
    vmi_ref: ObjectRef,
    cause: Cause,
    node: &str,
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    trace: &mut Trace,
) -> Result<(Handling, Option<Effect>), DecideError> {
    let Some((gate, source)) = cause.evacuation() else {
        trace.note(|| "this cause calls for no evacuation -> allow, the cause recorded".into());
        return Ok((Handling::NoEvacuation, None));
    };
    if let Some(handling) = not_to_move(vmi, node, cluster, trace)? {
        return Ok((handling, None));
    }
    let config = KubeVirtConfig::read(settings.kubevirt.as_ref(), cluster)?;
    if !strategy_marks(vmi, config.eviction_strategy.as_ref()) {
        trace.note(|| "the VMI's eviction strategy and migratability call for no evacuation -> allow".into());
        return Ok((Handling::NotMigratable, None));
    }
    if !config.feature_gate_enabled(gate) && request.is_dry_run() {
        trace.note(|| format!("feature gate {gate} is off -> allow, left to KubeVirt (a dry run: no event)"));
        return Ok((Handling::GateOff, None));
    }
    if !config.feature_gate_enabled(gate) {
        // A VM evac would have moved: the admin hears of it (a Warning event on the VMI, recorded
        // once) rather than finding the VM shut down with nothing said.
        trace.note(|| {
            format!(
                "feature gate {gate} is off -> allow, left to KubeVirt (RecordEvent: a Warning on the VMI)"
            )
        });
        let message = gate_off_message(cause, gate);
        let reason = EventReason::DisruptionLeftToKubeVirt;
        return Ok((
            Handling::GateOff,
            Some(Effect::RecordEvent { vmi: vmi_ref, node: node.to_owned(), reason, message }),
        ));
    }
    let external = is_external(vmi, config.eviction_strategy.as_ref());
    let effect = evacuate(settings, vmi_ref, node, request.is_dry_run(), source, external);
    trace.note(|| format!("feature gate {gate} on -> allow, {} from {node}", effect.type_name()));
    Ok((Handling::Evacuating, Some(effect)))
}

/// Why a VMI is not moved whatever evac's settings: not from the pod the VM runs in (a migration
/// target's), a VM that has stopped or is not running yet, one already evacuating (not twice), or
/// one on a node that is down (no VM migrates away from it).
fn not_to_move<C: ClusterReader + ?Sized>(
    vmi: &VirtualMachineInstance<'_>,
    node: &str,
    cluster: &C,
    trace: &mut Trace,
) -> Result<Option<Handling>, DecideError> {
    if vmi.status.node_name != node || vmi.status.phase != "Running" {
        trace.note(|| {
            format!(
                "the VMI (phase {}, on {}) is not running here -> allow",
                vmi.status.phase, vmi.status.node_name
            )
        });
        return Ok(Some(Handling::NotRunning));
    }
    if vmi.is_evacuating_from(node) {
        trace.note(|| format!("the VMI is already evacuating from {node} -> allow"));
        return Ok(Some(Handling::AlreadyEvacuating));
    }
    if node_is_down(cluster, node)? {
        trace.note(|| {
            format!("node {node} is down: no VM migrates away from it -> allow, the cause recorded")
        });
        return Ok(Some(Handling::NodeDown));
    }
    Ok(None)
}

/// The Warning event's message when a gate leaves a disruption to KubeVirt: which gate, where it
/// goes, and what happens without it.
pub fn gate_off_message(cause: Cause, gate: &str) -> String {
    format!(
        "feature gate {gate} is off (KubeVirt CR, spec.configuration.developerConfiguration.featureGates): \
         evac leaves the {} to KubeVirt, and the VM shuts down with its pod",
        cause.disruption()
    )
}

/// Whether the VMI's evacuation is an external controller's (`External`): its mark is the
/// request itself, which KubeVirt's evacuation controller leaves alone.
pub(crate) fn is_external(vmi: &VirtualMachineInstance<'_>, cluster_wide: Option<&EvictionStrategy>) -> bool {
    matches!(vmi.eviction_strategy(cluster_wide), Some(EvictionStrategy::External))
}

/// The effect that evacuates a VMI for one of evac's causes: beside KubeVirt's evacuation
/// controller a request, which the evacuation decision marks in its order (a marked VMI would be
/// migrated at once); without it, the mark. An `External` VMI is marked at once either way: the
/// mark is what its external controller acts on, and KubeVirt's evacuation controller skips it
/// (`filterRunningNonMigratingVMIs`, `VMIMigratableOnEviction`). A dry run is answered with the
/// dry-run mark, which changes nothing either way.
pub(crate) fn evacuate(
    settings: &Settings,
    vmi: ObjectRef,
    node: &str,
    dry_run: bool,
    source: EvacuationSource,
    external: bool,
) -> Effect {
    if settings.kubevirt_evacuation_controller && !dry_run && !external {
        Effect::RequestEvacuation { vmi, node: node.to_owned(), source }
    } else {
        Effect::MarkForEvacuation { vmi, node: node.to_owned(), dry_run, source: Some(source) }
    }
}

/// Whether the VMI's eviction strategy asks for a migration, as KubeVirt's node-pressure design
/// reads it: LiveMigrate and LiveMigrateIfPossible when the VMI can migrate, External always
/// (the external controller decides), None and unknown strategies never.
fn strategy_marks(vmi: &VirtualMachineInstance<'_>, cluster_wide: Option<&EvictionStrategy>) -> bool {
    match vmi.eviction_strategy(cluster_wide) {
        Some(EvictionStrategy::LiveMigrate | EvictionStrategy::LiveMigrateIfPossible) => vmi.is_migratable(),
        Some(EvictionStrategy::External) => true,
        Some(EvictionStrategy::None | EvictionStrategy::Unknown(_)) | None => false,
    }
}

/// Reads a VMI: `Ok(None)` when it does not exist.
fn read_vmi<C: ClusterReader + ?Sized>(
    cluster: &C,
    namespace: &str,
    name: &str,
) -> Result<Option<Vec<u8>>, ReadError> {
    cluster::fetch_if_exists(cluster, VMI_KIND.0, VMI_KIND.1, namespace, name)
}

/// Whether the node is down ([`Node::is_down`]); a node that is gone (or unnamed) is not read as
/// down (its pods are the pod GC's).
fn node_is_down<C: ClusterReader + ?Sized>(cluster: &C, node: &str) -> Result<bool, ReadError> {
    if node.is_empty() {
        return Ok(false);
    }
    match cluster::fetch(cluster, NODE_KIND.0, NODE_KIND.1, "", node) {
        Ok(raw) => Ok(cluster::decode::<Node<'_>>(&raw, NODE_KIND.1)?.is_down()),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether the node reports `MemoryPressure`; a node that is gone (or unnamed) does not.
fn node_has_memory_pressure<C: ClusterReader + ?Sized>(cluster: &C, node: &str) -> Result<bool, ReadError> {
    if node.is_empty() {
        return Ok(false);
    }
    match cluster::fetch(cluster, NODE_KIND.0, NODE_KIND.1, "", node) {
        Ok(raw) => Ok(cluster::decode::<Node<'_>>(&raw, NODE_KIND.1)?.has_memory_pressure()),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}
