//! A `NoExecute` taint that a VM's launcher pod tolerates for a while (`tolerationSeconds`): the
//! taint manager deletes the pod when the shortest toleration runs out (`pkg/controller/
//! tainteviction/taint_eviction.go`, `processPodOnNode`, `getMinTolerationTime`). That is a window
//! before any deletion: the evacuation is asked for as soon as the taint is on the node, so that
//! the VM has the toleration's seconds, and the hold after them, to leave. A pod that tolerates
//! every such taint for ever is not going anywhere; one that tolerates none is deleted at once
//! (the pod's own disruption, decided on its deletion); a node that is down moves nothing.

use super::{strategy_marks, DecideError, Settings, NOEXECUTE_TAINT_GATE};
use crate::cluster::{self, ClusterReader, ListResourcesAll};
use crate::effect::{Effect, EvacuationSource, ObjectRef};
use crate::kubevirt::NODE_NAME_LABEL;
use crate::kubevirt::VMI_KIND;
use crate::kubevirt_config::KubeVirtConfig;
use crate::model::{Node, Taint, VirtualMachineInstance, NODE_DOWN_TAINT_KEYS};

/// The evacuations to ask for now on `node` for its `NoExecute` taints: one per VMI whose
/// tolerations run out (`tolerationSeconds`), that is running there, not leaving already, and
/// whose strategy migrates.
pub(super) fn requests<C: ClusterReader + ?Sized>(
    node: &Node<'_>,
    settings: &Settings,
    cluster: &C,
    dry_run: bool,
) -> Result<Vec<Effect>, DecideError> {
    let taints: Vec<&Taint<'_>> = node
        .spec
        .taints
        .iter()
        .filter(|t| t.effect == "NoExecute" && !NODE_DOWN_TAINT_KEYS.contains(&t.key.as_str()))
        .collect();
    if taints.is_empty() || node.is_down() {
        return Ok(Vec::new());
    }
    let config = KubeVirtConfig::read(settings.kubevirt.as_ref(), cluster)?;
    if !config.feature_gate_enabled(NOEXECUTE_TAINT_GATE) {
        return Ok(Vec::new());
    }
    let name = node.metadata.name.as_str();
    let raw = cluster.list_resources_all(&ListResourcesAll {
        api_version: VMI_KIND.0.into(),
        kind: "VirtualMachineInstance".into(),
        label_selector: Some(format!("{NODE_NAME_LABEL}={name}").into()),
        field_selector: None,
    })?;
    let vmis = cluster::decode_list::<VirtualMachineInstance<'_>>(&raw, "VirtualMachineInstance")?;
    let cluster_wide = config.eviction_strategy.as_ref();
    Ok(vmis
        .iter()
        .filter(|v| {
            v.status.node_name == name
                && v.status.phase == "Running"
                && !v.is_being_deleted()
                && !v.is_evacuating_from(name)
                && strategy_marks(v, cluster_wide)
        })
        .filter(|v| deleted_after_a_while(v, &taints))
        .map(|v| {
            let vmi = ObjectRef::new(v.metadata.namespace.as_str(), v.metadata.name.as_str());
            let external = super::is_external(v, cluster_wide);
            super::evacuate(settings, vmi, name, dry_run, EvacuationSource::NoexecuteTaint, external)
        })
        .collect())
}

/// Whether the VMI's launcher pod (which carries the VMI's tolerations) tolerates every one of
/// `taints`, and some of them only for a while.
fn deleted_after_a_while(vmi: &VirtualMachineInstance<'_>, taints: &[&Taint<'_>]) -> bool {
    let mut bounded = false;
    for taint in taints {
        let matching: Vec<_> = vmi.spec.tolerations.iter().filter(|t| t.tolerates(taint)).collect();
        if matching.is_empty() {
            return false;
        }
        // `getMatchingTolerations`, then the shortest: a toleration without seconds is for ever.
        if matching.iter().all(|t| t.toleration_seconds.is_some()) {
            bounded = true;
        }
    }
    bounded
}
