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
#[cfg(test)]
mod tests;

pub use settings::{KubeVirtRef, Settings};

use crate::cluster::{self, ClusterReader, ReadError};
use crate::effect::{Effect, EvacuationSource, ObjectRef, EVICTION_SOURCE_ANNOTATION};
use crate::model::{AdmissionRequest, Eviction, EvictionStrategy, Pod, PodRole, VirtualMachineInstance};
use crate::{Decision, INTERNAL_ERROR};

/// The `apiVersion` of pods: the core group's `v1`.
pub const POD_API_VERSION: &str = "v1";
/// The `apiVersion` of KubeVirt's VirtualMachineInstances.
pub const VMI_API_VERSION: &str = "kubevirt.io/v1";

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
    check_request(request)?;
    let watch = cluster::RefusalWatch::new(cluster);
    let decision = decide_eviction(request, settings, &watch);
    Ok(match watch.into_refused() {
        Some(refused) => Decision::deny(messages::policy_misconfigured(&refused)).with_code(INTERNAL_ERROR),
        None => decision,
    })
}

/// The decision of a checked request.
fn decide_eviction<C>(request: &AdmissionRequest<'_>, settings: &Settings, cluster: &C) -> Decision
where
    C: ClusterReader + ?Sized,
{
    // KubeVirt lets the API server answer for pods it cannot read (e.g. a pod that is gone).
    let Ok(raw) = cluster::fetch(cluster, POD_API_VERSION, "Pod", &request.namespace, &request.name) else {
        return Decision::allow();
    };
    let Ok(pod) = cluster::decode::<Pod<'_>>(&raw, "Pod") else {
        return Decision::allow();
    };
    match pod.role() {
        PodRole::HotplugVolume => admit_hotplug_pod(&pod, cluster),
        PodRole::Launcher if !pod.is_completed() => admit_launcher_pod(request, settings, &pod, cluster),
        _ => Decision::allow(),
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
    cluster::fetch_if_exists(cluster, VMI_API_VERSION, "VirtualMachineInstance", namespace, name)
}

/// A hotplug volume pod is protected while its launcher pod's VMI exists: evicting it would pull a
/// disk out from under a running VM.
fn admit_hotplug_pod<C: ClusterReader + ?Sized>(pod: &Pod<'_>, cluster: &C) -> Decision {
    let namespace = pod.metadata.namespace.as_str();
    let owners = pod.metadata.owner_references.get();
    let owner_name = &owners[0].name;
    let raw = match cluster::fetch(cluster, POD_API_VERSION, "Pod", namespace, owner_name) {
        Ok(raw) => raw,
        Err(e) if e.is_not_found() => return Decision::allow(),
        Err(e) => return Decision::deny(messages::failed_getting_hotplug_owner(&e)),
    };
    let owner = match cluster::decode::<Pod<'_>>(&raw, "Pod") {
        Ok(owner) => owner,
        Err(e) => return Decision::deny(messages::failed_getting_hotplug_owner(&e)),
    };
    if !owner.is_virt_launcher() || owner.is_completed() {
        return Decision::allow();
    }
    let Some(vmi_name) = owner.domain() else {
        return Decision::allow();
    };
    match fetch_vmi(cluster, namespace, &vmi_name) {
        Ok(Some(_)) => {
            Decision::deny(messages::hotplug_pod_protected(&pod.metadata.name, &vmi_name, namespace))
        }
        Ok(None) => Decision::allow(),
        Err(e) => Decision::deny(messages::failed_getting_vmi(&e)),
    }
}

fn admit_launcher_pod<C: ClusterReader + ?Sized>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    pod: &Pod<'_>,
    cluster: &C,
) -> Decision {
    let Some(vmi_name) = pod.domain() else {
        return Decision::allow();
    };
    let vmi_read =
        cluster::fetch(cluster, VMI_API_VERSION, "VirtualMachineInstance", &request.namespace, &vmi_name);
    let raw = match vmi_read {
        Ok(raw) => raw,
        Err(e) => return Decision::deny(messages::failed_getting_vmi(&e)),
    };
    let vmi = match cluster::decode::<VirtualMachineInstance<'_>>(&raw, "VirtualMachineInstance") {
        Ok(vmi) => vmi,
        Err(e) => return Decision::deny(messages::failed_getting_vmi(&e)),
    };

    let cluster_wide = if vmi.spec.eviction_strategy.is_some() {
        None
    } else {
        match cluster_eviction_strategy(settings, cluster) {
            Ok(strategy) => strategy,
            Err(e) => return Decision::deny(messages::failed_getting_cluster_config(&e)),
        }
    };
    let Some(strategy) = vmi.eviction_strategy(cluster_wide.as_ref()) else {
        // KubeVirt does not act on VMIs without an eviction strategy.
        return Decision::allow();
    };
    let mark = match strategy {
        EvictionStrategy::LiveMigrate if !vmi.is_migratable() => {
            return Decision::deny(messages::not_live_migratable(&vmi.metadata.name));
        }
        EvictionStrategy::LiveMigrate | EvictionStrategy::External => true,
        EvictionStrategy::LiveMigrateIfPossible => vmi.is_migratable(),
        EvictionStrategy::None | EvictionStrategy::Unknown(_) => false,
    };
    if !mark {
        return Decision::allow();
    }

    let vmi_namespace =
        if vmi.metadata.namespace.is_empty() { &request.namespace } else { &vmi.metadata.namespace };
    let vmi_ref = ObjectRef::new(vmi_namespace.as_str(), vmi.metadata.name.as_str());
    if vmi.is_marked_for_evacuation() {
        let in_progress = Decision::deny(messages::evacuation_in_progress(&vmi_ref));
        // A mark of evac's own ends when its cause does; an eviction asking for the same
        // evacuation makes it the eviction's, which lasts until the VM has left.
        let own = vmi
            .metadata
            .annotation(EVICTION_SOURCE_ANNOTATION)
            .and_then(|s| EvacuationSource::parse(&s))
            .is_some_and(EvacuationSource::ends_by_itself);
        if !own || vmi.status.evacuation_node_name != pod.spec.node_name {
            return in_progress;
        }
        let Ok(eviction) = serde_json::from_str::<Eviction<'_>>(request.object_json()) else {
            return in_progress;
        };
        return in_progress.with_effect(Effect::MarkForEvacuation {
            vmi: vmi_ref,
            node: pod.spec.node_name.to_string(),
            dry_run: request.is_dry_run() || eviction.is_dry_run(),
            source: eviction.requested_by_descheduler().then_some(EvacuationSource::Descheduler),
        });
    }
    if vmi.status.node_name != pod.spec.node_name {
        return Decision::deny(messages::TARGET_POD);
    }
    let eviction: Eviction<'_> = match serde_json::from_str(request.object_json()) {
        Ok(eviction) => eviction,
        Err(e) => return Decision::deny(messages::failed_parsing_eviction(&crate::json_error_text(&e))),
    };
    let dry_run = request.is_dry_run() || eviction.is_dry_run();
    let source = eviction.requested_by_descheduler().then_some(EvacuationSource::Descheduler);
    Decision::deny(messages::evacuation_triggered(&vmi_ref)).with_effect(Effect::MarkForEvacuation {
        vmi: vmi_ref,
        node: pod.spec.node_name.to_string(),
        dry_run,
        source,
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
