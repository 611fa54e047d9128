//! KubeVirt's virt-api, as far as evictions go: the simulated cluster's answer to webhooks whose
//! `clientConfig.service` is `kubevirt/virt-api` (how KubeVirt registers its
//! `virt-launcher-eviction-interceptor.kubevirt.io` webhook). There is no such service on a
//! simulator's loopback, so it answers in process, with the decision KubeVirt's admitter makes
//! (evac's core, which follows it) and the VMI mark virt-api writes. A scenario that runs evac
//! points the webhook at evac's policy server instead.

use serde_json::{json, Value};

use crate::kinds::{migrations, nodes, vmis};
use crate::objects::{Migration, Node, Vmi};
use crate::store::{Patch, Store};
use crate::ApiError;
use evac_cluster::{CoreReader, Executor, MemoryStore};
use evac_core::eviction::{self, messages, Settings};
use evac_core::model::AdmissionRequest;
use evac_core::Verdict;

/// The service KubeVirt's eviction webhook calls: namespace, name.
pub const SERVICE: (&str, &str) = ("kubevirt", "virt-api");

/// Answers an AdmissionReview for `pods/eviction` as virt-api does, marking the VMI when the
/// eviction triggers an evacuation.
pub async fn review(store: &Store, review: &Value) -> Result<Value, super::webhooks::WebhookError> {
    let bytes = serde_json::to_vec(&review["request"]).map_err(|e| e.to_string())?;
    let request: AdmissionRequest<'_> =
        serde_json::from_slice(&bytes).map_err(|e| format!("cannot decode the AdmissionReview: {e}"))?;
    let decision = eviction::decide(&request, &Settings::default(), &CoreReader(&**store.memory()))
        .map_err(|e| e.to_string())?;
    // virt-api's mark: KubeVirt's own, told in no evac event.
    let executor = Executor::untold(std::sync::Arc::clone(store.memory()) as _);
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

/// The name KubeVirt's migration-create webhook has in refusals.
pub const MIGRATION_WEBHOOK: &str = "migration-create-validator.kubevirt.io";

/// The user virt-controller acts as: the service account virt-operator gives it
/// (`pkg/virt-operator/resource/generate/components/serviceaccountnames.go`,
/// `ControllerServiceAccountName`, in KubeVirt's namespace).
pub const VIRT_CONTROLLER_USER: &str = "system:serviceaccount:kubevirt:kubevirt-controller";

/// virt-api's admission of a new migration (`pkg/virt-api/webhooks/validating-webhook/admitters/
/// migration-create-admitter.go`, `Admit`): only virt-controller may set `spec.priority`
/// (`hasRequestOriginatedFromVirtController`; a 422 otherwise); the VMI must exist, not be final,
/// not be explicitly not live-migratable, and have no migration in flight
/// (`ensureNoMigrationConflict`: any migration of the VMI whose phase is not Succeeded or Failed,
/// the unset phase included). Those refusals are 400, as the webhook's denial reaches the client.
pub fn admit_migration(
    store: &MemoryStore,
    user: &str,
    namespace: &str,
    object: &Value,
) -> Result<(), ApiError> {
    let denied = |why: &str| format!("admission webhook \"{MIGRATION_WEBHOOK}\" denied the request: {why}");
    let deny = |why: String| Err(ApiError::bad_request(denied(&why)));
    if object.pointer("/spec/priority").is_some_and(|p| !p.is_null()) && user != VIRT_CONTROLLER_USER {
        // `webhookutils.ToAdmissionResponse`: 422, the cause's message and no reason; the API
        // server keeps both (`webhookerrors.ToStatusErr`).
        return Err(ApiError {
            code: 422,
            reason: "",
            message: denied(
                "Migration priority queue, only virt-controller is allowed to set priority field",
            ),
        });
    }
    let vmi_name = Migration(object).vmi_name();
    let vmi = match store.get(&vmis(), namespace, vmi_name) {
        Ok(vmi) => vmi,
        Err(e) if e.code == 404 => return deny(format!("the VMI \"{namespace}/{vmi_name}\" does not exist")),
        Err(e) => return deny(e.message),
    };
    let view = Vmi(&vmi);
    if view.is_final() {
        return deny("Cannot migrate VMI in finalized state.".to_owned());
    }
    if let Some(condition) = view.condition(evac_core::kubevirt::LIVE_MIGRATABLE_CONDITION) {
        if condition.status() == "False" {
            return deny(format!(
                "Cannot migrate VMI, Reason: {}, Message: {}",
                condition.reason().unwrap_or_default(),
                condition.message().unwrap_or_default()
            ));
        }
    }
    let (all, _) = store.list(&migrations(), Some(namespace), None, None);
    if let Some(in_flight) =
        all.iter().map(|m| Migration(m)).find(|m| m.vmi_name() == vmi_name && !m.is_final())
    {
        return deny(format!(
            "in-flight migration detected. Active migration job ({}) is currently already in progress for VMI {vmi_name}.",
            in_flight.meta().uid()
        ));
    }
    Ok(())
}

/// Registers [`admit_migration`] with the store, as KubeVirt registers its webhook.
pub fn register(store: &Store) {
    store.check_creates(migrations(), std::sync::Arc::new(admit_migration));
}
