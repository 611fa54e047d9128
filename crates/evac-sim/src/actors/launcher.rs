//! A VMI's `virt-launcher` pod as virt-controller renders it (`pkg/virt-controller/services/
//! template.go`, `renderLaunchManifest`), for every launcher pod the simulated KubeVirt creates:
//! a VMI's first, a restarted VM's, a migration's target (`RenderMigrationManifest`, the same
//! manifest). The parts that shape disruptions: the `compute` container requesting the guest's
//! memory (and the CPU the VMI requests, `spec.domain.resources.requests.cpu`), the VMI's
//! tolerations, node selector and affinity, and the grace period, the VMI's
//! `terminationGracePeriodSeconds` plus 30 s (`gracePeriodKillAfter`: virt-launcher's own
//! `--grace-period-seconds` is the VMI's plus 15). No lifecycle hook: a mutating webhook may add
//! one as the pod is created ([`crate::api::pods`]).

use serde_json::{json, Value};

use crate::objects::Vmi;

/// The VMI annotation with the priority its launcher pods get (the simulator has no
/// PriorityClasses: KubeVirt copies the VMI's `priorityClassName`, which the API server resolves).
pub const PRIORITY_ANNOTATION: &str = "sim.evac.io/priority";
/// The VMI annotation `"false"` for a KubeVirt that does not put the descheduler's
/// `request-evict-only` annotation on launcher pods (before KubeVirt 1.3).
pub const NO_REQUEST_EVICT_ONLY_ANNOTATION: &str = "sim.evac.io/no-request-evict-only";
/// The padding KubeVirt adds twice to the VMI's grace period (`gracePeriodPaddingSeconds`).
const GRACE_PADDING_SECONDS: u64 = 15;

/// The launcher pod of `vmi`, unscheduled (`Pending`, no node).
pub fn render(vmi: Vmi<'_>) -> Value {
    let (name, uid) = (vmi.meta().name(), vmi.meta().uid());
    let mut annotations = json!({evac_core::kubevirt::DOMAIN_ANNOTATION: name});
    if vmi.meta().annotation(NO_REQUEST_EVICT_ONLY_ANNOTATION) != Some("true") {
        annotations[evac_core::kubevirt::REQUEST_EVICT_ONLY_ANNOTATION] = json!("");
    }
    let priority: i64 = vmi.meta().annotation(PRIORITY_ANNOTATION).and_then(|p| p.parse().ok()).unwrap_or(0);
    let mut requests = json!({"memory": vmi.memory().map(|m| format!("{}", m as u64))});
    if let Some(cpu) = vmi.0.pointer("/spec/domain/resources/requests/cpu") {
        requests["cpu"] = cpu.clone();
    }
    let mut pod = json!({
        "metadata": {
            "generateName": format!("virt-launcher-{name}-"),
            "labels": {"kubevirt.io": "virt-launcher", evac_core::kubevirt::CREATED_BY_LABEL: uid},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                 "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "priority": priority,
            "terminationGracePeriodSeconds": vmi.grace_period() + 2 * GRACE_PADDING_SECONDS,
            "tolerations": vmi.0.pointer("/spec/tolerations").cloned().unwrap_or(json!([])),
            "containers": [{"name": "compute", "image": "virt-launcher", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Pending"},
    });
    // The VMI's labels, as template.go copies them (all but the node it runs on now).
    if let Some(labels) = vmi.0.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels.iter().filter(|(k, _)| k.as_str() != evac_core::kubevirt::NODE_NAME_LABEL)
        {
            pod["metadata"]["labels"]
                .as_object_mut()
                .expect("rendered with labels")
                .entry(key.clone())
                .or_insert(value.clone());
        }
    }
    for field in ["nodeSelector", "affinity"] {
        if let Some(value) = vmi.0.pointer(&format!("/spec/{field}")) {
            pod["spec"][field] = value.clone();
        }
    }
    pod
}
