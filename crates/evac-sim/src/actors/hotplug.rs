//! Hotplug volume attachment pods (`hp-volume-*`), as KubeVirt's VMI controller keeps them
//! (`pkg/virt-controller/watch/vmi/volume-hotplug.go`, `lifecycle.go` `handleHotplugVolumes`):
//! a VM with a hotplugged volume has one beside its launcher pod, on its node, controlled by that
//! pod. Attachment pods of any other pod go (`cleanupAttachmentPods`: after a migration, the
//! source's; the target's is created), and all of them once the VMI is final
//! (`deleteAllAttachmentPods`).
//!
//! KubeVirt's `hotplug-pod-eviction-interceptor.kubevirt.io` webhook refuses their eviction (429)
//! while the launcher pod they belong to runs a VMI (`pod-eviction-admitter.go`,
//! `admitHotplugPod`): a drain waits for the VM to leave.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::kinds::pods;
use crate::objects::{Pod, Vmi};
use crate::store::{deleted, Store};
use crate::ApiError;

/// The VMI annotation that says the VM has a hotplugged volume (`spec.volumes` entries KubeVirt
/// attaches through an attachment pod; the simulator keeps no volumes).
pub const HOTPLUG_ANNOTATION: &str = "sim.evac.io/hotplug-volumes";
/// The `kubevirt.io` label value of attachment pods (`isHotplugPod`).
pub const ATTACHMENT_APP: &str = "hotplug-disk";
/// The attachment pods' name prefix, which KubeVirt's webhook matches on.
pub const ATTACHMENT_PREFIX: &str = "hp-volume-";

/// Whether the VM has a hotplugged volume.
pub fn has_volumes(vmi: Vmi<'_>) -> bool {
    vmi.meta().annotation(HOTPLUG_ANNOTATION) == Some("true")
}

/// Creates the attachment pod of `launcher` (a created pod: it needs its uid), on its node.
pub fn attach(store: &Store, launcher: &Value) -> Result<(), ApiError> {
    let launcher = Pod(launcher);
    let namespace = launcher.meta().namespace();
    let pod = json!({
        "metadata": {
            "generateName": ATTACHMENT_PREFIX,
            "labels": {"kubevirt.io": ATTACHMENT_APP},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": launcher.meta().name(),
                                 "uid": launcher.meta().uid(), "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "nodeName": launcher.node_name(),
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "hotplug-disk", "image": "virt-launcher"}],
        },
        "status": {"phase": "Running"},
    });
    store.create(&pods(), namespace, pod, false).map(drop)
}

/// Deletes the attachment pods in `namespace` controlled by a pod for which `detach` holds (its
/// uid): `cleanupAttachmentPods` and `deleteAllAttachmentPods`.
pub fn detach(store: &Store, namespace: &str, detach: impl Fn(&str) -> bool) -> Result<(), ApiError> {
    let selector = evac_cluster::LabelSelector::parse(&format!("kubevirt.io={ATTACHMENT_APP}")).ok();
    let (attachments, _): (Vec<Arc<Value>>, _) =
        store.list(&pods(), Some(namespace), selector.as_ref(), None);
    for pod in attachments.iter().map(|p| Pod(p)) {
        let owner = pod.meta().controller().filter(|(kind, _, _)| *kind == "Pod").map(|(_, _, uid)| uid);
        if owner.is_some_and(&detach) {
            deleted(store.delete(&pods(), namespace, pod.meta().name(), false))?;
        }
    }
    Ok(())
}
