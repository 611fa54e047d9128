//! The hold decision: may a held launcher pod's termination go on?
//!
//! The hold endpoint asks it as long as a container's `preStop` hook runs: a `CONNECT` of
//! `pods/hold` whose `object` is the pod as the endpoint sees it and whose `options` say when the
//! hold began ([`HoldOptions`]). The answer is an eviction's: allowed (the hook ends and the
//! kubelet sends SIGTERM), or `429` (not yet: the VM is migrating away). A hold never outlives its
//! reason:
//!
//! - it ends at once for a disruption evac does not turn into an evacuation (a user's delete, a
//!   VMI being deleted, an API eviction KubeVirt allowed, the pod GC of a node that is gone), a
//!   feature gate that is off, a strategy or a VM that does not migrate, a VM that is not running
//!   on the pod's node, and a preemptor of at least `hold.preemptorPriority`;
//! - it ends when the VM has left the node (its migration succeeded), when the evacuation
//!   decision gives the evacuation up ([`HOLD_RELEASE_ANNOTATION`]: it cannot finish in time, the
//!   VM has nowhere to go, its migrations keep failing), when no evacuation began
//!   `hold.takenUpWithinSeconds` after the hold did, and at the latest when the pod's hold window
//!   has passed.
//!
//! A pod held without a `deletionTimestamp` is one the kubelet is stopping on its own: for node
//! pressure (it writes `TerminationByKubelet` only once the containers are stopped, `kubelet.go`
//! `SyncTerminatingPod`), or for a failed liveness probe. It is held as node pressure once the
//! node shows it, for `hold.pressureShownWithinSeconds` at most.
//!
//! While it holds, the decision records the hold on the pod ([`HELD_SINCE_ANNOTATION`],
//! [`HOLD_DEADLINE_ANNOTATION`]), so that `evac control` asks for the evacuation and orders it by
//! that deadline; when the hook of a pod ends (a hold that ends, or one never begun), the deadline
//! becomes that moment: SIGTERM follows, and no migration started after it saves the VM.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::mutation::window_of;
use super::{
    timestamp, DEFAULT_WINDOW_SECONDS, HELD_SINCE_ANNOTATION, HOLD_DEADLINE_ANNOTATION,
    HOLD_RELEASED_AUDIT_ANNOTATION, HOLD_RELEASE_ANNOTATION,
};
use crate::cluster::{self, ClusterReader, ListResourcesAll};
use crate::disruption::{classify, Cause, DecideError, Settings};
use crate::effect::{Effect, ObjectRef};
use crate::kubevirt::{NODE_KIND, POD_KIND, VMI_KIND};
use crate::kubevirt_config::KubeVirtConfig;
use crate::model::time::unix_seconds;
use crate::model::{AdmissionRequest, EvictionStrategy, Node, Pod, VirtualMachineInstance};
use crate::trace::Trace;
use crate::Decision;

/// The hold's own facts, in the request's `options` (`evac.kubevirt.io/v1alpha1` `HoldOptions`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HoldOptions {
    /// When the hold began (RFC 3339): when the kubelet's hook first reached the endpoint.
    pub started_at: String,
    /// The container whose hook asks.
    pub container: String,
}

/// Why a hold ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// The pod is not a virt-launcher pod.
    NotALauncher,
    /// The pod's VMI is not among the VMIs on the pod's node: deleted, or (for an endpoint that
    /// reads only its node) migrated away.
    NoVmi,
    /// The VMI is being deleted: its user wants the VM stopped.
    VmiBeingDeleted,
    /// The pod's node is gone.
    NodeGone,
    /// The pod's node is down (not Ready, or tainted unreachable).
    NodeDown,
    /// The disruption is one evac does not turn into an evacuation.
    NotEvacuated(Cause),
    /// The kubelet stops the pod and the node shows no memory pressure (a failed liveness probe).
    NoPressure,
    /// The VM is not running on the pod's node, and not because it migrated away.
    NotRunning(String),
    /// The VM runs on another node now: its migration succeeded.
    Migrated(String),
    /// The feature gate of the disruption's cause is off.
    GateOff(&'static str),
    /// The VMI's eviction strategy and migratability call for no migration.
    Strategy,
    /// The pod was preempted for a pod of at least `hold.preemptorPriority`.
    CriticalPreemptor {
        /// The preemptor, `namespace/name`.
        pod: String,
        /// Its priority.
        priority: i64,
    },
    /// The evacuation decision ended the hold, for this reason.
    GivenUp(String),
    /// The hold window has passed.
    WindowOver(u64),
    /// No evacuation of the VM began within `hold.takenUpWithinSeconds`.
    NotTakenUp(u64),
}

impl Release {
    /// A short name for metrics and reports, e.g. `migrated`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::NotALauncher => "not-a-launcher",
            Self::NoVmi => "no-vmi",
            Self::VmiBeingDeleted => "vmi-deleted",
            Self::NodeGone => "node-gone",
            Self::NodeDown => "node-down",
            Self::NotEvacuated(_) => "not-evacuated",
            Self::NoPressure => "no-pressure",
            Self::NotRunning(_) => "not-running",
            Self::Migrated(_) => "migrated",
            Self::GateOff(_) => "gate-off",
            Self::Strategy => "strategy",
            Self::CriticalPreemptor { .. } => "critical-preemptor",
            Self::GivenUp(_) => "given-up",
            Self::WindowOver(_) => "window-over",
            Self::NotTakenUp(_) => "not-taken-up",
        }
    }
}

impl core::fmt::Display for Release {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NotALauncher => f.write_str("not a virt-launcher pod"),
            // The hold endpoint reads only its node's VMIs: one that migrated away is gone from
            // its view as a deleted one is.
            Self::NoVmi => f.write_str("the pod's VMI is not on its node: deleted, or migrated away"),
            Self::VmiBeingDeleted => f.write_str("the VMI is being deleted: its user stops the VM"),
            Self::NodeGone => f.write_str("the pod's node is gone"),
            Self::NodeDown => f.write_str("the pod's node is down: no VM migrates away from it"),
            Self::NotEvacuated(cause) => {
                write!(f, "a disruption evac does not evacuate for ({})", cause.as_str())
            }
            Self::NoPressure => {
                f.write_str("the kubelet stops the pod and the node shows no memory pressure")
            }
            Self::NotRunning(why) => write!(f, "the VM is not running on the pod's node ({why})"),
            Self::Migrated(node) => write!(f, "the VM has migrated away: it runs on {node}"),
            Self::GateOff(gate) => write!(f, "feature gate {gate} is off"),
            Self::Strategy => {
                f.write_str("the VMI's eviction strategy and migratability call for no migration")
            }
            Self::CriticalPreemptor { pod, priority } => {
                write!(
                    f,
                    "the pod was preempted for {pod}, of priority {priority}, which is never kept waiting"
                )
            }
            Self::GivenUp(why) => write!(f, "the evacuation was given up: {why}"),
            Self::WindowOver(window) => write!(f, "the hold window of {window} s has passed"),
            Self::NotTakenUp(within) => write!(f, "no evacuation of the VM began within {within} s"),
        }
    }
}

/// What the decision reads to answer, decoded.
struct Held<'a> {
    pod: Pod<'a>,
    started: f64,
}

/// Decides a hold request at `now` (seconds since the Unix epoch): allowed ends the hold, a 429
/// keeps it. Effects record the hold on the pod.
pub fn decide<C: ClusterReader + ?Sized>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Result<Decision, DecideError> {
    let held = read_request(request, now)?;
    let pod = &held.pod;
    trace.note(|| {
        format!(
            "hold of {}/{} on node {}, begun {:.0} s ago",
            pod.metadata.namespace,
            pod.metadata.name,
            pod.spec.node_name,
            (now - held.started).max(0.0)
        )
    });
    let answer = answer(&held, settings, cluster, now, trace)?;
    Ok(match answer {
        Answer::Hold { deadline, state, record } => {
            let message = format!(
                "holding the termination of {}/{} while its VM migrates away: {state}; at the latest until {}",
                pod.metadata.namespace,
                pod.metadata.name,
                timestamp(deadline)
            );
            trace.note(|| format!("-> hold (429): {state}"));
            let mut decision = Decision::deny(message);
            let mut annotations = BTreeMap::new();
            let since = timestamp(held.started);
            if pod.metadata.annotation(HELD_SINCE_ANNOTATION).as_deref() != Some(since.as_str()) {
                annotations.insert(HELD_SINCE_ANNOTATION.to_owned(), Some(since));
            }
            let until = timestamp(deadline);
            if pod.metadata.annotation(HOLD_DEADLINE_ANNOTATION).as_deref() != Some(until.as_str()) {
                annotations.insert(HOLD_DEADLINE_ANNOTATION.to_owned(), Some(until));
            }
            if record && !annotations.is_empty() {
                decision.effects.push(Effect::AnnotatePod { pod: pod_ref(request, pod), annotations });
            }
            decision
        }
        Answer::Release(why) => {
            trace.note(|| format!("-> release (allow): {why}"));
            let mut decision = Decision::allow()
                .with_audit_annotation(HOLD_RELEASED_AUDIT_ANNOTATION, format!("{}: {why}", why.as_str()));
            // A pod with the hook (held, or released at once): its SIGTERM comes now, which is the
            // VM's deadline from here on.
            if pod.metadata.annotation(HELD_SINCE_ANNOTATION).is_some() || window_of(pod).is_some() {
                let ended = timestamp(now);
                if pod.metadata.annotation(HOLD_DEADLINE_ANNOTATION).as_deref() != Some(ended.as_str()) {
                    let annotations = BTreeMap::from([(HOLD_DEADLINE_ANNOTATION.to_owned(), Some(ended))]);
                    decision.effects.push(Effect::AnnotatePod { pod: pod_ref(request, pod), annotations });
                }
            }
            decision
        }
    })
}

/// The answer before it becomes a decision.
enum Answer {
    /// Hold until `deadline` at the latest; `record`: say so on the pod (not while the cause is
    /// still unknown, which `evac control` would take for node pressure).
    Hold {
        deadline: f64,
        state: String,
        record: bool,
    },
    Release(Release),
}

fn pod_ref(request: &AdmissionRequest<'_>, pod: &Pod<'_>) -> ObjectRef {
    let namespace =
        if pod.metadata.namespace.is_empty() { &request.namespace } else { &pod.metadata.namespace };
    ObjectRef::new(namespace.as_str(), pod.metadata.name.as_str())
}

fn read_request<'a>(request: &AdmissionRequest<'a>, now: f64) -> Result<Held<'a>, DecideError> {
    let Some(object) = request.object.filter(|o| o.get() != "null") else {
        return Err(DecideError::BadRequest("a hold request without the pod".into()));
    };
    let pod: Pod<'a> = serde_json::from_str(object.get()).map_err(|e| {
        DecideError::BadRequest(format!(
            "a hold request whose pod does not decode: {}",
            crate::json_error_text(&e)
        ))
    })?;
    let options: HoldOptions = request
        .options
        .map(|raw| serde_json::from_str(raw.get()))
        .transpose()
        .map_err(|e| {
            DecideError::BadRequest(format!(
                "hold options that do not decode: {}",
                crate::json_error_text(&e)
            ))
        })?
        .unwrap_or_default();
    // A hold whose start is not said began now: the window is counted from the first answer.
    let started = unix_seconds(&options.started_at).filter(|s| *s <= now).unwrap_or(now);
    Ok(Held { pod, started })
}

/// A step of the answer: what it found, or the answer itself when it settles the hold.
type Step<T> = Result<Result<T, Answer>, DecideError>;

/// The value of a [`Step`], or returns the answer it settled on.
macro_rules! settled {
    ($step:expr) => {
        match $step? {
            Ok(value) => value,
            Err(answer) => return Ok(answer),
        }
    };
}

/// Whether the pod stays held, in the order virt-handler and the kubelet would see it: the pod
/// and its VMI, the node, what stops the pod, whether its VM can be evacuated for that, a
/// critical preemptor, and the hold's own time limits.
fn answer<C: ClusterReader + ?Sized>(
    held: &Held<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Result<Answer, DecideError> {
    let node_name = held.pod.spec.node_name.as_str();
    let raw_vmi = settled!(read_vmi(&held.pod, cluster));
    let vmi = cluster::decode::<VirtualMachineInstance<'_>>(&raw_vmi, VMI_KIND.1)?;
    if vmi.is_being_deleted() {
        return Ok(Answer::Release(Release::VmiBeingDeleted));
    }
    let raw_node = settled!(read_node(node_name, cluster));
    let mut node = cluster::decode::<Node<'_>>(&raw_node, NODE_KIND.1)?;
    if node.is_down() {
        return Ok(Answer::Release(Release::NodeDown));
    }
    let cause = settled!(cause_of(held, &mut node, settings, cluster, now, trace));
    trace.note(|| format!("cause: {}", cause.as_str()));
    settled!(evacuable(cause, &vmi, node_name, settings, cluster));
    if cause == Cause::Preemption {
        settled!(critical_preemptor(node_name, settings, cluster, trace));
    }
    Ok(within_limits(held, &vmi, cause, settings, now))
}

/// The launcher pod's VMI, as read; none ends the hold.
fn read_vmi<C: ClusterReader + ?Sized>(pod: &Pod<'_>, cluster: &C) -> Step<Vec<u8>> {
    if !pod.is_virt_launcher() {
        return Ok(Err(Answer::Release(Release::NotALauncher)));
    }
    let Some(vmi_name) = pod.domain() else { return Ok(Err(Answer::Release(Release::NoVmi))) };
    let namespace = pod.metadata.namespace.as_str();
    let read = cluster::fetch_if_exists(cluster, VMI_KIND.0, VMI_KIND.1, namespace, &vmi_name)?;
    Ok(read.ok_or(Answer::Release(Release::NoVmi)))
}

/// The pod's node, as read; a node gone ends the hold.
fn read_node<C: ClusterReader + ?Sized>(node_name: &str, cluster: &C) -> Step<Vec<u8>> {
    match cluster::fetch(cluster, NODE_KIND.0, NODE_KIND.1, "", node_name) {
        Ok(raw) => Ok(Ok(raw)),
        Err(e) if e.is_not_found() => Ok(Err(Answer::Release(Release::NodeGone))),
        Err(e) => Err(e.into()),
    }
}

/// What stops the pod: its deletion's reason, or, for a stop without a deletion, the kubelet's
/// eviction under node pressure once the node shows it (held a while for it to show).
fn cause_of<C: ClusterReader + ?Sized>(
    held: &Held<'_>,
    node: &mut Node<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Step<Cause> {
    if held.pod.is_terminating() {
        return Ok(Ok(classify(held.pod.disruption_reason(), false, false)));
    }
    crate::placement::read_working_sets(core::slice::from_mut(node), cluster);
    let levels = settings.node_pressure.levels().map_err(DecideError::InvalidSettings)?;
    let pressed =
        node.has_memory_pressure() || node.memory_available().is_some_and(|free| free < levels.mark_below());
    let shown_within = settings.hold.pressure_shown_within_seconds as f64;
    Ok(match (pressed, now < held.started + shown_within) {
        (true, _) => Ok(Cause::KubeletEviction),
        (false, true) => {
            trace.note(|| {
                "stopped by the kubelet without a deletion: waiting for node pressure to show".into()
            });
            Err(Answer::Hold {
                deadline: held.started + shown_within,
                state: "waiting for the node's memory pressure to show".into(),
                record: false,
            })
        }
        (false, false) => Err(Answer::Release(Release::NoPressure)),
    })
}

/// Whether the VM can be evacuated for this cause: a cause evac evacuates for, behind a gate that
/// is on, a VMI still running on the node, under a strategy that migrates it (or leaves it to an
/// external controller).
fn evacuable<C: ClusterReader + ?Sized>(
    cause: Cause,
    vmi: &VirtualMachineInstance<'_>,
    node_name: &str,
    settings: &Settings,
    cluster: &C,
) -> Step<()> {
    let release = |why| Ok(Err(Answer::Release(why)));
    let Some((gate, _)) = cause.evacuation() else { return release(Release::NotEvacuated(cause)) };
    let not_running = || Release::NotRunning(format!("phase {}", or_none(&vmi.status.phase)));
    if vmi.status.node_name != node_name {
        let moved = vmi.status.phase == "Running" && !vmi.status.node_name.is_empty();
        return release(if moved {
            Release::Migrated(vmi.status.node_name.to_string())
        } else {
            not_running()
        });
    }
    if vmi.status.phase != "Running" {
        return release(not_running());
    }
    let config = KubeVirtConfig::read(settings.kubevirt.as_ref(), cluster)?;
    if !config.feature_gate_enabled(gate) {
        return release(Release::GateOff(gate));
    }
    let migrates = match vmi.eviction_strategy(config.eviction_strategy.as_ref()) {
        Some(EvictionStrategy::LiveMigrate | EvictionStrategy::LiveMigrateIfPossible) => vmi.is_migratable(),
        Some(EvictionStrategy::External) => true,
        _ => false,
    };
    if !migrates {
        return release(Release::Strategy);
    }
    Ok(Ok(()))
}

/// A preemption for a pod of at least the critical priority is not held up.
fn critical_preemptor<C: ClusterReader + ?Sized>(
    node_name: &str,
    settings: &Settings,
    cluster: &C,
    trace: &mut Trace,
) -> Step<()> {
    if let Some((preemptor, priority)) = highest_preemptor(cluster, node_name)? {
        trace.note(|| format!("preemptor {preemptor}, priority {priority}"));
        if priority >= settings.hold.preemptor_priority {
            return Ok(Err(Answer::Release(Release::CriticalPreemptor { pod: preemptor, priority })));
        }
    }
    Ok(Ok(()))
}

/// The hold within its limits: not given up, within its window, and its evacuation asked for in
/// time; its state says how far the evacuation is.
fn within_limits(
    held: &Held<'_>,
    vmi: &VirtualMachineInstance<'_>,
    cause: Cause,
    settings: &Settings,
    now: f64,
) -> Answer {
    let pod = &held.pod;
    let node_name = pod.spec.node_name.as_str();
    if let Some(why) = pod.metadata.annotation(HOLD_RELEASE_ANNOTATION) {
        return Answer::Release(Release::GivenUp(why.to_string()));
    }
    let window = window_of(pod).unwrap_or(DEFAULT_WINDOW_SECONDS);
    let deadline = held.started + window as f64;
    if now >= deadline {
        return Answer::Release(Release::WindowOver(window));
    }
    let marked = vmi.status.evacuation_node_name == node_name;
    let requested = vmi.is_requested_from(node_name);
    let taken_up_within = settings.hold.taken_up_within_seconds;
    if !marked && !requested && now >= held.started + taken_up_within as f64 {
        return Answer::Release(Release::NotTakenUp(taken_up_within));
    }
    let state = match (marked, requested) {
        (true, _) => format!("marked for evacuation from {node_name} ({})", cause.as_str()),
        (false, true) => format!("its evacuation from {node_name} is requested ({})", cause.as_str()),
        (false, false) => format!("waiting for its evacuation to be asked for ({})", cause.as_str()),
    };
    Answer::Hold { deadline, state, record: true }
}

fn or_none(text: &str) -> &str {
    if text.is_empty() {
        "none"
    } else {
        text
    }
}

/// The highest-priority pod nominated to the node (the scheduler's preemptors waiting for it):
/// `namespace/name` and its priority.
fn highest_preemptor<C: ClusterReader + ?Sized>(
    cluster: &C,
    node: &str,
) -> Result<Option<(String, i64)>, DecideError> {
    let raw = cluster.list_resources_all(&ListResourcesAll {
        api_version: POD_KIND.0.into(),
        kind: POD_KIND.1.into(),
        label_selector: None,
        field_selector: Some(format!("status.nominatedNodeName={node}").into()),
    })?;
    let pods = cluster::decode_list::<Pod<'_>>(&raw, POD_KIND.1)?;
    Ok(pods
        .iter()
        .filter(|p| p.status.nominated_node_name == node && p.spec.node_name.is_empty())
        .map(|p| (format!("{}/{}", p.metadata.namespace, p.metadata.name), p.spec.priority.unwrap_or(0)))
        .max_by_key(|(_, priority)| *priority))
}
