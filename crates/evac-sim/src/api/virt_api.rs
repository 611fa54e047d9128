//! KubeVirt's virt-api, as far as evictions go: the simulated cluster's answer to webhooks whose
//! `clientConfig.service` is `kubevirt/virt-api` (how KubeVirt registers its
//! `virt-launcher-eviction-interceptor.kubevirt.io` webhook). There is no such service on a
//! simulator's loopback, so it answers in process, with the decision KubeVirt's admitter makes
//! (evac's core, which follows it) and the VMI mark virt-api writes. A scenario that runs evac
//! points the webhook at evac's policy server instead.

use serde_json::{json, Value};

use crate::kinds::{nodes, vmis};
use crate::objects::{Node, Vmi};
use crate::store::{Patch, Store};
use crate::ApiError;
use evac_cluster::{CoreReader, Executor};
use evac_core::eviction::{self, messages, Settings};
use evac_core::model::AdmissionRequest;
use evac_core::Verdict;

/// The service KubeVirt's eviction webhook calls: namespace, name.
pub const SERVICE: (&str, &str) = ("kubevirt", "virt-api");

/// Answers an AdmissionReview for `pods/eviction` as virt-api does, marking the VMI when the
/// eviction triggers an evacuation.
pub async fn review(store: &Store, review: &Value) -> Result<Value, super::eviction::WebhookError> {
    let bytes = serde_json::to_vec(&review["request"]).map_err(|e| e.to_string())?;
    let request: AdmissionRequest<'_> =
        serde_json::from_slice(&bytes).map_err(|e| format!("cannot decode the AdmissionReview: {e}"))?;
    let decision = eviction::decide(&request, &Settings::default(), &CoreReader(&**store.memory()))
        .map_err(|e| e.to_string())?;
    let executor = Executor::new(std::sync::Arc::clone(store.memory()) as _);
    for effect in &decision.effects {
        if let Err(e) = executor.apply(effect).await {
            return Ok(answer(&request, false, 429, &messages::failed_marking_vmi(&e)));
        }
    }
    Ok(match decision.verdict {
        Verdict::Allow => answer(&request, true, 200, ""),
        Verdict::Deny { code, message } => answer(&request, false, code, &message),
    })
}

fn answer(request: &AdmissionRequest<'_>, allowed: bool, code: u16, message: &str) -> Value {
    let mut response = json!({"uid": request.uid.as_str(), "allowed": allowed});
    if !allowed {
        response["status"] = json!({"code": code, "message": message});
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// KubeVirt's `evacuate/cancel` of a VMI, as `virtctl evacuate-cancel vmi <name>` calls it
/// (`pkg/virt-api/rest/evacuate_cancel.go`, `EvacuateCancelHandler`): refused (400) while the
/// node carries KubeVirt's drain taint; nothing to do without a mark; otherwise the mark is
/// removed if it still names the VMI's node (the JSON patch's `test`). It does not touch a
/// migration already under way.
pub fn cancel_evacuation(store: &Store, namespace: &str, name: &str) -> Result<(), ApiError> {
    let vmi = store.get(&vmis(), namespace, name)?;
    let view = Vmi(&vmi);
    let Some(node_name) = view.evacuation_node_name().or(view.node_name()) else { return Ok(()) };
    let node = store.get(&nodes(), "", node_name)?;
    let drain = evac_core::kubevirt::DRAIN_TAINT_KEY;
    if Node(&node).taints().any(|t| t.key() == drain && t.effect() == "NoSchedule") {
        return Err(ApiError::bad_request(format!(
            "Node {node_name:?} has NodeDrainTaintKey \"{drain}:NoSchedule\""
        )));
    }
    if view.evacuation_node_name().is_none() {
        return Ok(());
    }
    // virtctl sends the node the VMI runs on.
    let on = view.node_name().unwrap_or_default();
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/status/evacuationNodeName", "value": on},
        {"op": "remove", "path": "/status/evacuationNodeName"},
    ]))
    .map_err(|e| ApiError::bad_request(e.to_string()))?;
    store.patch(&vmis(), namespace, name, &Patch::Json(patch), false).map(drop)
}
