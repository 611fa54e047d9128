//! The API-eviction verdict: KubeVirt's `pods/eviction` admitter (as of v1.9, with the descheduler
//! contract of design document 003), as a pure decision that returns effects instead of patching.
//!
//! The checks run in KubeVirt's order, which decides the cases where several apply:
//! the pod's kind and phase; the VMI lookup; the eviction strategy and migratability; an evacuation
//! already in progress; an eviction of the migration target pod; parsing the Eviction (for dry-run
//! and its requester). Objects are read lazily, each only when a check needs it, and decoded in
//! place: the decoded objects borrow their strings from the bytes read.

pub mod messages;
mod settings;

pub use settings::{KubeVirtRef, Settings};

use crate::cluster::{self, ClusterReader, ReadError};
use crate::effect::{Effect, EvacuationSource, ObjectRef, EVICTION_SOURCE_ANNOTATION};
use crate::kubevirt::{POD_KIND, VMI_KIND};
use crate::model::{AdmissionRequest, Eviction, EvictionStrategy, Pod, PodRole, VirtualMachineInstance};
use crate::trace::Trace;
use crate::{Decision, INTERNAL_ERROR};

/// The request is not one this decision handles: a configuration error, not a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAnEviction {
    /// What the request was instead: `<operation> <resource>[/<subresource>][.<group>]`, e.g. `DELETE pods`.
    pub got: String,
}

impl core::fmt::Display for NotAnEviction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "this policy only evaluates pods/eviction CREATE requests, got {}", self.got)
    }
}

impl std::error::Error for NotAnEviction {}

/// Decides a `pods/eviction` CREATE. A read the host refused (the policy not granted the
/// capability or the resource) is a configuration error, answered as one (500, naming what was
/// refused), never with the allow KubeVirt gives a pod it cannot read.
pub fn decide<C>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
) -> Result<Decision, NotAnEviction>
where
    C: ClusterReader + ?Sized,
{
    decide_traced(request, settings, cluster, &mut Trace::off())
}

/// [`decide`], recording its checks in KubeVirt's order in `trace`.
pub fn decide_traced<C>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    trace: &mut Trace,
) -> Result<Decision, NotAnEviction>
where
    C: ClusterReader + ?Sized,
{
    if let Err(e) = check_request(request) {
        trace.note(|| format!("not an eviction ({}) -> rejected", e.got));
        return Err(e);
    }
    trace.note(|| format!("eviction of pod {}/{}", request.namespace, request.name));
    let watch = cluster::RefusalWatch::new(cluster);
    let decision = decide_eviction(request, settings, &watch, trace);
    Ok(match watch.into_refused() {
        Some(refused) => {
            trace.note(|| format!("a read was refused ({refused}): the steps above do not decide -> 500, policy misconfigured"));
            Decision::deny(messages::policy_misconfigured(&refused)).with_code(INTERNAL_ERROR)
        }
        None => decision,
    })
}

/// The decision of a checked request.
fn decide_eviction<C>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    trace: &mut Trace,
) -> Decision
where
    C: ClusterReader + ?Sized,
{
    // KubeVirt lets the API server answer for pods it cannot read (e.g. a pod that is gone).
    let Ok(raw) = cluster::fetch(cluster, POD_KIND.0, POD_KIND.1, &request.namespace, &request.name) else {
        trace.note(|| "pod not readable -> allow (the API server answers)".into());
        return Decision::allow();
    };
    let Ok(pod) = cluster::decode::<Pod<'_>>(&raw, POD_KIND.1) else {
        trace.note(|| "pod does not decode -> allow".into());
        return Decision::allow();
    };
    match pod.role() {
        PodRole::HotplugVolume => {
            trace.note(|| "pod is a hotplug volume pod".into());
            admit_hotplug_pod(&pod, cluster, trace)
        }
        PodRole::Launcher if !pod.is_completed() => {
            trace.note(|| format!("pod is a virt-launcher on node {}", pod.spec.node_name));
            admit_launcher_pod(request, settings, &pod, cluster, trace)
        }
        PodRole::Launcher => {
            trace.note(|| format!("launcher pod has completed ({}) -> allow", pod.status.phase));
            Decision::allow()
        }
        _ => {
            trace.note(|| "pod is neither a virt-launcher nor a hotplug volume pod -> allow".into());
            Decision::allow()
        }
    }
}

fn check_request(request: &AdmissionRequest<'_>) -> Result<(), NotAnEviction> {
    let is_eviction = request.resource.group.is_empty()
        && request.resource.resource == "pods"
        && request.sub_resource == "eviction"
        && request.operation == "CREATE";
    if is_eviction {
        return Ok(());
    }
    let operation = if request.operation.is_empty() { "<no operation>" } else { request.operation.as_str() };
    let resource = if request.resource.resource.is_empty() {
        "<no resource>".to_owned()
    } else if request.resource.group.is_empty() {
        request.resource_path()
    } else {
        format!("{}.{}", request.resource_path(), request.resource.group)
    };
    Err(NotAnEviction { got: format!("{operation} {resource}") })
}

/// Reads a VMI: `Ok(None)` when it does not exist.
fn fetch_vmi<C: ClusterReader + ?Sized>(
    cluster: &C,
    namespace: &str,
    name: &str,
) -> Result<Option<Vec<u8>>, ReadError> {
    cluster::fetch_if_exists(cluster, VMI_KIND.0, VMI_KIND.1, namespace, name)
}

/// A hotplug volume pod is protected while its launcher pod's VMI exists: evicting it would pull a
/// disk out from under a running VM.
fn admit_hotplug_pod<C: ClusterReader + ?Sized>(pod: &Pod<'_>, cluster: &C, trace: &mut Trace) -> Decision {
    let namespace = pod.metadata.namespace.as_str();
    let owners = pod.metadata.owner_references.get();
    let owner_name = &owners[0].name;
    let raw = match cluster::fetch(cluster, POD_KIND.0, POD_KIND.1, namespace, owner_name) {
        Ok(raw) => raw,
        Err(e) if e.is_not_found() => {
            trace.note(|| format!("its owner pod {namespace}/{owner_name} is gone -> allow"));
            return Decision::allow();
        }
        Err(e) => {
            trace.note(|| format!("its owner pod {namespace}/{owner_name} not read ({e}) -> denied"));
            return Decision::deny(messages::failed_getting_hotplug_owner(&e));
        }
    };
    let owner = match cluster::decode::<Pod<'_>>(&raw, POD_KIND.1) {
        Ok(owner) => owner,
        Err(e) => {
            trace.note(|| format!("its owner pod does not decode ({e}) -> denied"));
            return Decision::deny(messages::failed_getting_hotplug_owner(&e));
        }
    };
    if !owner.is_virt_launcher() || owner.is_completed() {
        trace.note(|| "its owner is not a running virt-launcher -> allow".into());
        return Decision::allow();
    }
    let Some(vmi_name) = owner.domain() else {
        trace.note(|| "its launcher names no VMI -> allow".into());
        return Decision::allow();
    };
    match fetch_vmi(cluster, namespace, &vmi_name) {
        Ok(Some(_)) => {
            trace.note(|| format!("its VMI {namespace}/{vmi_name} exists -> denied, hotplug pod protected"));
            Decision::deny(messages::hotplug_pod_protected(&pod.metadata.name, &vmi_name, namespace))
        }
        Ok(None) => {
            trace.note(|| format!("its VMI {namespace}/{vmi_name} is gone -> allow"));
            Decision::allow()
        }
        Err(e) => {
            trace.note(|| format!("its VMI {namespace}/{vmi_name} not read ({e}) -> denied"));
            Decision::deny(messages::failed_getting_vmi(&e))
        }
    }
}

/// The verdict on evicting a virt-launcher pod, as KubeVirt's `PodEvictionAdmitter` gives it:
/// its VMI read, the eviction strategy that applies, and the mark for evacuation (with a 429) when
/// the strategy migrates it.
fn admit_launcher_pod<C: ClusterReader + ?Sized>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    pod: &Pod<'_>,
    cluster: &C,
    trace: &mut Trace,
) -> Decision {
    let Some(vmi_name) = pod.domain() else {
        trace.note(|| "launcher pod names no VMI (kubevirt.io/domain) -> allow".into());
        return Decision::allow();
    };
    let namespace = request.namespace.as_str();
    let vmi_read = cluster::fetch(cluster, VMI_KIND.0, VMI_KIND.1, namespace, &vmi_name);
    let raw = match vmi_read {
        Ok(raw) => raw,
        Err(e) => {
            trace.note(|| format!("VMI {namespace}/{vmi_name} not read ({e}) -> denied"));
            return Decision::deny(messages::failed_getting_vmi(&e));
        }
    };
    let vmi = match cluster::decode::<VirtualMachineInstance<'_>>(&raw, VMI_KIND.1) {
        Ok(vmi) => vmi,
        Err(e) => {
            trace.note(|| format!("VMI {namespace}/{vmi_name} does not decode ({e}) -> denied"));
            return Decision::deny(messages::failed_getting_vmi(&e));
        }
    };
    trace.note(|| format!("VMI {namespace}/{vmi_name} found, on node {}", vmi.status.node_name));
    match evacuates(&vmi, settings, cluster, trace) {
        Ok(true) => {}
        Ok(false) => return Decision::allow(),
        Err(denied) => return denied,
    }
    let vmi_namespace =
        if vmi.metadata.namespace.is_empty() { namespace } else { vmi.metadata.namespace.as_str() };
    let vmi_ref = ObjectRef::new(vmi_namespace, vmi.metadata.name.as_str());
    if vmi.is_marked_for_evacuation() {
        return already_marked(request, pod, &vmi, vmi_ref, trace);
    }
    if vmi.status.node_name != pod.spec.node_name {
        trace.note(|| "the VMI runs on another node: this is a migration's target pod -> 429".into());
        return Decision::deny(messages::TARGET_POD);
    }
    let eviction: Eviction<'_> = match serde_json::from_str(request.object_json()) {
        Ok(eviction) => eviction,
        Err(e) => {
            trace.note(|| "the Eviction does not decode -> denied".into());
            return Decision::deny(messages::failed_parsing_eviction(&crate::json_error_text(&e)));
        }
    };
    trace.note(|| format!("not yet marked -> 429, mark for evacuation from {}", pod.spec.node_name));
    let dry_run = request.is_dry_run() || eviction.is_dry_run();
    let source = eviction.requested_by_descheduler().then_some(EvacuationSource::Descheduler);
    Decision::deny(messages::evacuation_triggered(&vmi_ref)).with_effect(Effect::MarkForEvacuation {
        vmi: vmi_ref,
        node: pod.spec.node_name.to_string(),
        dry_run,
        source,
    })
}

/// Whether the eviction strategy that applies (the VMI's, else the cluster-wide one) has the VMI
/// evacuated; the denial when it cannot be known, or when `LiveMigrate` meets a VMI that cannot
/// migrate. KubeVirt does not act on VMIs without an eviction strategy.
fn evacuates<C: ClusterReader + ?Sized>(
    vmi: &VirtualMachineInstance<'_>,
    settings: &Settings,
    cluster: &C,
    trace: &mut Trace,
) -> Result<bool, Decision> {
    let cluster_wide = match vmi.spec.eviction_strategy {
        Some(_) => None,
        None => cluster_eviction_strategy(settings, cluster).map_err(|e| {
            trace.note(|| format!("KubeVirt configuration not read ({e}) -> denied"));
            Decision::deny(messages::failed_getting_cluster_config(&e))
        })?,
    };
    let Some(strategy) = vmi.eviction_strategy(cluster_wide.as_ref()) else {
        trace.note(|| "no eviction strategy (the VMI's or the cluster-wide one) -> allow".into());
        return Ok(false);
    };
    trace.note(|| {
        let whose = if vmi.spec.eviction_strategy.is_some() { "the VMI's" } else { "cluster-wide" };
        format!("strategy {} ({whose})", strategy.as_str())
    });
    trace.note(|| format!("live-migratable: {}", if vmi.is_migratable() { "yes" } else { "no" }));
    let mark = match strategy {
        EvictionStrategy::LiveMigrate if !vmi.is_migratable() => {
            trace.note(|| "LiveMigrate but not migratable -> denied".into());
            return Err(Decision::deny(messages::not_live_migratable(&vmi.metadata.name)));
        }
        EvictionStrategy::LiveMigrate | EvictionStrategy::External => true,
        EvictionStrategy::LiveMigrateIfPossible => vmi.is_migratable(),
        EvictionStrategy::None | EvictionStrategy::Unknown(_) => false,
    };
    if !mark {
        trace.note(|| "the strategy does not evacuate this VMI -> allow".into());
    }
    Ok(mark)
}

/// The verdict on evicting the pod of a VMI already marked: 429, evacuation in progress. A mark of
/// evac's own ends when its cause does; an eviction asking for the same evacuation makes it the
/// eviction's, which lasts until the VM has left.
fn already_marked(
    request: &AdmissionRequest<'_>,
    pod: &Pod<'_>,
    vmi: &VirtualMachineInstance<'_>,
    vmi_ref: ObjectRef,
    trace: &mut Trace,
) -> Decision {
    let in_progress = Decision::deny(messages::evacuation_in_progress(&vmi_ref));
    let own = vmi
        .metadata
        .annotation(EVICTION_SOURCE_ANNOTATION)
        .and_then(|s| EvacuationSource::parse(&s))
        .is_some_and(EvacuationSource::ends_by_itself);
    trace.note(|| format!("already marked for evacuation from {}", vmi.status.evacuation_node_name));
    let eviction = serde_json::from_str::<Eviction<'_>>(request.object_json());
    let Some(eviction) =
        eviction.ok().filter(|_| own && vmi.status.evacuation_node_name == pod.spec.node_name)
    else {
        trace.note(|| "-> 429, evacuation in progress".into());
        return in_progress;
    };
    trace.note(|| {
        "the mark is evac's own, which ends with its cause -> 429, the eviction makes it its own".into()
    });
    in_progress.with_effect(Effect::MarkForEvacuation {
        vmi: vmi_ref,
        node: pod.spec.node_name.to_string(),
        dry_run: request.is_dry_run() || eviction.is_dry_run(),
        source: eviction.requested_by_descheduler().then_some(EvacuationSource::Descheduler),
    })
}

/// The cluster-wide eviction strategy from the KubeVirt CR: the one the settings name, or the
/// first one in the cluster. No KubeVirt CR means no cluster-wide strategy.
fn cluster_eviction_strategy<C: ClusterReader + ?Sized>(
    settings: &Settings,
    cluster: &C,
) -> Result<Option<EvictionStrategy>, ReadError> {
    Ok(crate::kubevirt_config::KubeVirtConfig::read(settings.kubevirt.as_ref(), cluster)?.eviction_strategy)
}
