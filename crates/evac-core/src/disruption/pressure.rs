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
use crate::kubevirt::VMI_KIND;
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

/// Decides a Node's status update: the NoExecute taints it tolerates for a while, and, under
/// memory pressure, the fewest VMs to mark that another node can take.
pub(super) fn decide_node<C: ClusterReader + ?Sized>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
) -> Result<Decision, DecideError> {
    let levels = settings.node_pressure.levels().map_err(DecideError::InvalidSettings)?;
    let Some(node) = node_with_metrics(request, cluster) else { return Ok(Decision::allow()) };
    let name = node.metadata.name.as_str();
    let (available, pressure) = (node.memory_available(), node.has_memory_pressure());
    // NoExecute taints tolerated for a while: a window before the taint manager deletes.
    let tolerated = super::tolerated::requests(&node, settings, cluster, request.is_dry_run())?;
    // The common case, every status update of a healthy node, reads nothing more.
    if !pressure && available.is_none_or(|available| available >= levels.mark_below()) {
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
        api_version: VMI_KIND.0.into(),
        kind: "VirtualMachineInstance".into(),
        label_selector: Some(format!("{VMI_NODE_LABEL}={name}").into()),
        field_selector: None,
    })?;
    let vmis = cluster::decode_list::<VirtualMachineInstance<'_>>(&raw, "VirtualMachineInstance")?;
    let relief = Relief::of(&vmis, name, &config);
    let mut chosen = relief.choose(available, levels.mark_below());
    if !chosen.is_empty() {
        // Above the threshold the kubelet does not act: a move there is early.
        let early = !pressure && available.is_some_and(|available| available >= levels.threshold);
        chosen = relief.placeable(chosen, name, cluster, levels.mark_below(), early)?;
    }
    // A VM asked to leave for a taint already frees its memory here.
    chosen.retain(|candidate| !asked_to_leave(&decision.effects, &candidate.vmi));
    let dry_run = request.is_dry_run();
    Ok(chosen.into_iter().fold(decision, |decision, candidate| {
        let source = EvacuationSource::NodePressure;
        decision.with_effect(super::evacuate(settings, candidate.vmi, name, dry_run, source, false))
    }))
}

/// The Node of the request (named as the request when the object omits it), with the
/// `memory.available` its NodeMetrics give: its capacity less their working set. Without them
/// (metrics-server not installed or down), the kubelet's MemoryPressure condition is all there is
/// to go by.
fn node_with_metrics<'r, C: ClusterReader + ?Sized>(
    request: &'r AdmissionRequest<'_>,
    cluster: &C,
) -> Option<Node<'r>> {
    let mut node = request.object.and_then(|raw| serde_json::from_str::<Node<'_>>(raw.get()).ok())?;
    if node.metadata.name.is_empty() {
        node.metadata.name = request.name.as_str().into();
    }
    crate::placement::read_working_sets(core::slice::from_mut(&mut node), cluster);
    Some(node)
}

/// Whether an effect already asks the VMI to leave.
fn asked_to_leave(effects: &[Effect], candidate: &ObjectRef) -> bool {
    effects.iter().any(|effect| match effect {
        Effect::RequestEvacuation { vmi, .. } | Effect::MarkForEvacuation { vmi, .. } => vmi == candidate,
        _ => false,
    })
}

/// The VMIs on a node under pressure that free memory by leaving: those leaving already, and
/// those that may be marked, largest first.
struct Relief<'v, 'a> {
    /// The node's VMIs (the label may lag behind a migration: the status says where a VM runs).
    on_node: Vec<&'v VirtualMachineInstance<'a>>,
    /// The memory of the marked or requested VMs, leaving already (`None` without any): it is not
    /// to be found again.
    leaving: Option<f64>,
    /// Running VMs not asked to leave yet.
    eligible: Vec<Candidate>,
}

impl<'v, 'a> Relief<'v, 'a> {
    /// Relief counts only VMs that will leave: KubeVirt migrates a VMI on eviction only when
    /// `VMIMigratableOnEviction` (`pkg/util/migrations/migrations.go`) says so, and an `External`
    /// VMI's mark is its own controller's business, freeing nothing until the VM is gone.
    fn of(vmis: &'v [VirtualMachineInstance<'a>], name: &str, config: &KubeVirtConfig) -> Self {
        let on_node: Vec<&VirtualMachineInstance<'_>> =
            vmis.iter().filter(|v| v.status.node_name == name).collect();
        let cluster_wide = config.eviction_strategy.as_ref();
        let moves = |v: &VirtualMachineInstance<'_>| {
            strategy_marks(v, cluster_wide) && !super::is_external(v, cluster_wide)
        };
        let marked: Vec<f64> = on_node
            .iter()
            .filter(|v| v.is_evacuating_from(name) && moves(v))
            .map(|v| v.memory().unwrap_or(0.0))
            .collect();
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
        let leaving = (!marked.is_empty()).then(|| marked.iter().sum());
        Self { on_node, leaving, eligible }
    }

    /// The VMs whose leaving brings `memory.available` back to `wanted`: the fewest that cover the
    /// deficit; when the kubelet says pressure but nobody says how much, one VM at a time, the
    /// largest.
    fn choose(&self, available: Option<f64>, wanted: f64) -> Vec<Candidate> {
        match (available, self.leaving) {
            (Some(available), leaving) => {
                select_covering(self.eligible.clone(), wanted - available - leaving.unwrap_or(0.0))
            }
            (None, None) => self.eligible.iter().take(1).cloned().collect(),
            (None, Some(_)) => Vec::new(),
        }
    }

    /// The chosen VMs another node can take without falling under `wanted`. An `early` move (the
    /// kubelet does not act yet) is made only when it is free of risk wherever the scheduler puts
    /// the VM: otherwise it could bring its target under pressure, where the kubelet would kill
    /// VMs a stable node never lost.
    fn placeable<C: ClusterReader + ?Sized>(
        &self,
        mut chosen: Vec<Candidate>,
        name: &str,
        cluster: &C,
        wanted: f64,
        early: bool,
    ) -> Result<Vec<Candidate>, DecideError> {
        let raw_nodes = cluster.list_resources_all(&ListResourcesAll {
            api_version: "v1".into(),
            kind: "Node".into(),
            label_selector: None,
            field_selector: None,
        })?;
        let mut nodes = cluster::decode_list::<Node<'_>>(&raw_nodes, "Node")?;
        crate::placement::read_working_sets(&mut nodes, cluster);
        let mut placement = Placement::new(&nodes, wanted);
        chosen.retain(|candidate| {
            let vmi = self.on_node.iter().find(|v| {
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
        Ok(chosen)
    }
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
