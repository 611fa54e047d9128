//! The evacuation decision: what KubeVirt's evacuation controller and VMI controller do for the
//! VMIs of one node, as effects instead of writes.
//!
//! For each VMI on the node it decides whether to start an evacuation migration (marked for this
//! node or drain-tainted, migratable, not already migrating, not backing off, within the parallel
//! limits), whether the mark no longer applies, and how the descheduler's annotations on the
//! launcher pods must read. Run again on the state its effects produce, it asks for nothing more.
//!
//! It reads like the controller it follows (`pkg/virt-controller/watch/drain/evacuation/
//! evacuation.go`, `EvacuationController.sync`), in named phases (`plan`): what is read
//! (`inputs`), each VMI's standing (`standing`), requests to follow up (`requests`), marks
//! called off (`call_off`), what KubeVirt or evac would migrate (`candidates`), the room the
//! parallel limits leave (`room`), which candidates start (`start`) and the effects in their
//! order (`effects`). Where KubeVirt's own controller decides otherwise, [`Flavor`] says so, in
//! one place.

mod annotations;
mod blocker;
mod call_off;
mod candidates;
mod effects;
mod flavor;
mod history;
mod inputs;
mod order;
mod outlook;
mod plan;
mod queue;
mod requests;
mod room;
mod settings;
mod standing;
mod start;

pub use flavor::Flavor;
pub use history::{backoff_seconds, kubevirt_backoff_until, BACKOFF_MAX_SECONDS, BACKOFF_START_SECONDS};
pub use plan::evacuate;
pub use settings::{NodePressure, Settings, DEFAULT_ASSUMED_BANDWIDTH, DEFAULT_MAX_FAILED_EVACUATIONS};

use crate::cluster::{ClusterReader, ReadError};
use crate::effect::{EvacuationSource, MigrationCause, MigrationPriority};
use crate::model::{AdmissionRequest, Node};
use crate::trace::Trace;
use crate::Decision;

pub use crate::kubevirt::{LAUNCHER_SELECTOR, NODE_NAME_LABEL};

/// What one decision runs in: whose controller it is, its clock, and where its steps are noted.
pub struct Context<'t> {
    /// evac's evacuation controller, or KubeVirt's as shipped.
    pub flavor: Flavor,
    /// Seconds since the Unix epoch.
    pub now: f64,
    /// The decision's steps, in order ([`Trace::off`] records nothing).
    pub trace: &'t mut Trace,
}

/// Why a request could not be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The request is not one this decision handles: a configuration error, not a verdict.
    BadRequest(String),
    /// Reading the cluster failed.
    Read(ReadError),
}

impl RequestError {
    /// The HTTP status a policy answers with: 400 for a bad request, 500 for a failed read.
    pub fn code(&self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::Read(_) => 500,
        }
    }
}

impl core::fmt::Display for RequestError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::BadRequest(message) => f.write_str(message),
            Self::Read(e) => write!(f, "cannot read the cluster: {e}"),
        }
    }
}

impl std::error::Error for RequestError {}

impl From<ReadError> for RequestError {
    fn from(e: ReadError) -> Self {
        Self::Read(e)
    }
}

/// Decides the node of an admission request on a Node (`request.object`), recording its checks
/// in order in `cx.trace`: the node and what it carries, each VMI's standing, the room the
/// parallel limits leave, each candidate's migration, and the answer last.
pub fn decide_request<C>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    cx: &mut Context<'_>,
) -> Result<Decision, RequestError>
where
    C: ClusterReader + ?Sized,
{
    let node = node_of(request).inspect_err(|error| {
        cx.trace.note(|| format!("-> rejected ({}): {error}", error.code()));
    })?;
    cx.trace.note(|| format!("node {} of {}", request.operation, node.metadata.name));
    // A failed read is noted, as the answer, by the decision itself.
    Ok(evacuate(&node, settings, cluster, cx)?)
}

/// The Node of a request, or why the request is not one this decision handles.
fn node_of<'a>(request: &AdmissionRequest<'a>) -> Result<Node<'a>, RequestError> {
    let kind = &request.kind;
    if kind.kind != "Node" || !kind.group.is_empty() {
        let operation =
            if request.operation.is_empty() { "<no operation>" } else { request.operation.as_str() };
        let got = match (kind.kind.is_empty(), kind.group.is_empty()) {
            (true, _) => "<no kind>".to_owned(),
            (false, true) => format!("{} {}", kind.version, kind.kind),
            (false, false) => format!("{}/{} {}", kind.group, kind.version, kind.kind),
        };
        return Err(RequestError::BadRequest(format!(
            "this policy only evaluates Node requests, got {operation} {got}"
        )));
    }
    let Some(object) = request.object.filter(|o| o.get() != "null") else {
        return Err(RequestError::BadRequest(format!(
            "the {} request of node {:?} carries no Node object",
            request.operation, request.name
        )));
    };
    let node: Node<'_> = serde_json::from_str(object.get()).map_err(|e| {
        RequestError::BadRequest(format!("cannot decode the Node: {}", crate::json_error_text(&e)))
    })?;
    if node.metadata.name.is_empty() {
        return Err(RequestError::BadRequest("the Node has no name".into()));
    }
    Ok(node)
}

/// Why an evacuation migration from `node` runs: the source recorded on its VMI
/// (`kubevirt.io/eviction-source`); without one, a drain when the node is cordoned or
/// drain-tainted, else an API eviction.
pub fn cause(source: Option<EvacuationSource>, node: &Node<'_>) -> MigrationCause {
    match source {
        Some(source) => source.into(),
        None if node.spec.unschedulable || node.is_drain_tainted() => MigrationCause::Drain,
        None => MigrationCause::ApiEviction,
    }
}

/// KubeVirt's priorities (`GenerateNewMigration`): the descheduler's rebalancing can wait for
/// maintenance; everything else is losing its node.
fn priority(source: Option<EvacuationSource>) -> MigrationPriority {
    match source {
        Some(EvacuationSource::Descheduler) => MigrationPriority::SystemMaintenance,
        _ => MigrationPriority::SystemCritical,
    }
}
