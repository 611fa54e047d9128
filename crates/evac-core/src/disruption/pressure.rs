//! Node pressure ahead of the kubelet: when a node's `memory.available` nears the kubelet's soft
//! eviction threshold, mark the fewest VMs whose migration frees enough memory, so they leave
//! before the kubelet picks pods to kill (design 000 lets a migration race the kill; this starts
//! it earlier). Only VMs KubeVirt migrates on eviction count (an `External` VM is left to its own
//! controller), and only those that another node can take without falling under the same level
//! ([`crate::placement`]) are marked: moving the pressure from node to node would bounce VMs and
//! end in the kubelet's evictions all the same.

use std::cmp::Ordering;

use super::{strategy_marks, Cause, DecideError, Settings, CAUSE_AUDIT_ANNOTATION, NODE_PRESSURE_GATE};
use crate::cluster::{self, ClusterReader, ListResourcesAll};
use crate::effect::{Effect, EvacuationSource, ObjectRef};
use crate::eviction::VMI_API_VERSION;
use crate::kubevirt_config::KubeVirtConfig;
use crate::model::{AdmissionRequest, Node, VirtualMachineInstance};
use crate::placement::Placement;
use crate::Decision;

/// The label KubeVirt keeps on a VMI with the node it runs on.
const VMI_NODE_LABEL: &str = "kubevirt.io/nodeName";

/// A VMI that may be marked, with its memory in bytes (unknown counts as none).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The VMI that would leave the node.
    pub vmi: ObjectRef,
    /// Its guest memory in bytes ([`VirtualMachineInstance::memory`]); 0 when unknown.
    pub memory: f64,
}

pub(super) fn decide_node<C: ClusterReader + ?Sized>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
) -> Result<Decision, DecideError> {
    let levels = settings.node_pressure.levels().map_err(DecideError::InvalidSettings)?;
    let Some(mut node) = request.object.and_then(|raw| serde_json::from_str::<Node<'_>>(raw.get()).ok())
    else {
        return Ok(Decision::allow());
    };
    if node.metadata.name.is_empty() {
        node.metadata.name = request.name.as_str().into();
    }
    // The node's memory.available: its capacity less the working set its NodeMetrics report. Without
    // them (metrics-server not installed or down), the kubelet's MemoryPressure condition is all
    // there is to go by.
    crate::placement::read_working_sets(core::slice::from_mut(&mut node), cluster);
    let name = node.metadata.name.as_str();
    let wanted = levels.mark_below();
    let available = node.memory_available();
    let pressure = node.has_memory_pressure();
    // NoExecute taints tolerated for a while: a window before the taint manager deletes.
    let tolerated = super::tolerated::requests(&node, settings, cluster, request.is_dry_run())?;
    // The common case, every status update of a healthy node, reads nothing more.
    if !pressure && available.is_none_or(|available| available >= wanted) {
        return Ok(match tolerated.as_slice() {
            [] => Decision::allow(),
            _ => Decision {
                effects: tolerated,
                ..Decision::allow()
                    .with_audit_annotation(CAUSE_AUDIT_ANNOTATION, Cause::TaintManager.as_str())
            },
        });
    }
    let mut decision =
        Decision::allow().with_audit_annotation(CAUSE_AUDIT_ANNOTATION, Cause::NodePressure.as_str());
    decision.effects = tolerated;
    let config = KubeVirtConfig::read(settings.kubevirt.as_ref(), cluster)?;
    if !config.feature_gate_enabled(NODE_PRESSURE_GATE) {
        return Ok(decision);
    }

    let raw = cluster.list_resources_all(&ListResourcesAll {
        api_version: VMI_API_VERSION.into(),
        kind: "VirtualMachineInstance".into(),
        label_selector: Some(format!("{VMI_NODE_LABEL}={name}").into()),
        field_selector: None,
    })?;
    let vmis = cluster::decode_list::<VirtualMachineInstance<'_>>(&raw, "VirtualMachineInstance")?;
    // The label may lag behind a migration: the status says where the VM runs.
    let on_node: Vec<&VirtualMachineInstance<'_>> =
        vmis.iter().filter(|v| v.status.node_name == name).collect();
    let cluster_wide = config.eviction_strategy.as_ref();
    // Relief counts only VMs that will leave: KubeVirt migrates a VMI on eviction only when
    // `VMIMigratableOnEviction` (`pkg/util/migrations/migrations.go`) says so, and an `External`
    // VMI's mark is its own controller's business, freeing nothing until the VM is gone.
    let moves = |v: &VirtualMachineInstance<'_>| {
        strategy_marks(v, cluster_wide) && !super::is_external(v, cluster_wide)
    };
    let marked: Vec<&VirtualMachineInstance<'_>> =
        on_node.iter().copied().filter(|v| v.is_evacuating_from(name) && moves(v)).collect();
    let mut eligible: Vec<Candidate> = on_node
        .iter()
        .filter(|v| {
            v.status.phase == "Running"
                && !v.is_being_deleted()
                && !v.is_marked_for_evacuation()
                && !v.is_requested_from(name)
                && moves(v)
        })
        .map(|v| Candidate {
            vmi: ObjectRef::new(v.metadata.namespace.as_str(), v.metadata.name.as_str()),
            memory: v.memory().unwrap_or(0.0),
        })
        .collect();
    eligible.sort_by(largest_first);

    let mut chosen = match available {
        Some(available) => {
            // Marked (or requested) VMs are leaving already: the memory they free is not to be
            // found again.
            let leaving: f64 = marked.iter().map(|v| v.memory().unwrap_or(0.0)).sum();
            select_covering(eligible, wanted - available - leaving)
        }
        // The kubelet says pressure but nobody says how much: one VM at a time, the largest.
        None if marked.is_empty() => eligible.into_iter().take(1).collect(),
        None => Vec::new(),
    };
    if !chosen.is_empty() {
        let raw_nodes = cluster.list_resources_all(&ListResourcesAll {
            api_version: "v1".into(),
            kind: "Node".into(),
            label_selector: None,
            field_selector: None,
        })?;
        let mut nodes = cluster::decode_list::<Node<'_>>(&raw_nodes, "Node")?;
        crate::placement::read_working_sets(&mut nodes, cluster);
        let mut placement = Placement::new(&nodes, wanted);
        // Above the threshold the kubelet does not act: a move there is early, and is made only
        // when it is free of risk wherever the scheduler puts the VM. Otherwise it could bring
        // its target under pressure, where the kubelet would kill VMs a stable node never lost.
        let early = !pressure && available.is_some_and(|available| available >= levels.threshold);
        chosen.retain(|candidate| {
            let vmi = on_node.iter().find(|v| {
                v.metadata.name.as_str() == candidate.vmi.name
                    && v.metadata.namespace.as_str() == candidate.vmi.namespace
            });
            let tolerations = vmi.map_or(&[][..], |v| &v.spec.tolerations[..]);
            let selection = vmi.map(|v| v.node_selection()).unwrap_or_default();
            if early && !placement.clear_everywhere(name, candidate.memory, tolerations, &selection) {
                return false;
            }
            placement.reserve(name, candidate.memory, tolerations, &selection).is_ok()
        });
    }
    // A VM asked to leave for a taint already frees its memory here.
    chosen.retain(|candidate| {
        !decision.effects.iter().any(|effect| match effect {
            Effect::RequestEvacuation { vmi, .. } | Effect::MarkForEvacuation { vmi, .. } => {
                *vmi == candidate.vmi
            }
            _ => false,
        })
    });
    let dry_run = request.is_dry_run();
    Ok(chosen.into_iter().fold(decision, |decision, candidate| {
        let source = EvacuationSource::NodePressure;
        decision.with_effect(super::evacuate(settings, candidate.vmi, name, dry_run, source, false))
    }))
}

/// Largest memory first; ties by namespace, then name, for a stable choice.
fn largest_first(a: &Candidate, b: &Candidate) -> Ordering {
    b.memory
        .total_cmp(&a.memory)
        .then_with(|| a.vmi.namespace.cmp(&b.vmi.namespace))
        .then_with(|| a.vmi.name.cmp(&b.vmi.name))
}

/// The fewest candidates whose memory covers `deficit` bytes, in the order they were taken; all
/// of them when even all do not cover it (best effort), none when there is no deficit.
///
/// Taking the largest first gives the fewest; the last one taken is instead the smallest that
/// covers what is left alone, which keeps the count and moves less memory (a smaller VM also
/// migrates sooner, and time is what the kubelet does not give).
pub fn select_covering(mut candidates: Vec<Candidate>, deficit: f64) -> Vec<Candidate> {
    candidates.sort_by(largest_first);
    let mut chosen = Vec::new();
    let mut remaining = deficit;
    while remaining > 0.0 && !candidates.is_empty() {
        let last_fitting = candidates.iter().rposition(|c| c.memory >= remaining);
        if let Some(last) = last_fitting {
            // The first of the smallest fitting size, for the namespace/name tie-break.
            let size = candidates[last].memory;
            let first = candidates.iter().position(|c| c.memory == size).unwrap_or(last);
            chosen.push(candidates.remove(first));
            break;
        }
        let largest = candidates.remove(0);
        remaining -= largest.memory;
        chosen.push(largest);
    }
    chosen
}
