//! KubeVirt's virt-api, as far as evictions go: the simulated cluster's answer to webhooks whose
//! `clientConfig.service` is `kubevirt/virt-api` (how KubeVirt registers its
//! `virt-launcher-eviction-interceptor.kubevirt.io` webhook). There is no such service on a
//! simulator's loopback, so it answers in process, with the decision KubeVirt's admitter makes
//! (evac's core, which follows it) and the VMI mark virt-api writes. A scenario that runs evac
//! points the webhook at evac's policy server instead.

use serde_json::{json, Value};

use crate::store::Store;
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
