//! Creating a pod as the API server does (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/
//! create.go`, the mutating admission plugin's `Dispatch`): the mutating webhooks registered for
//! pods `CREATE` are called in turn, each seeing the pod as the ones before changed it, and each
//! one's JSON patch is applied; a denial refuses the creation. Every launcher pod KubeVirt's
//! controllers create (a VMI's, a migration's target, a restarted VM's) goes this way, so a
//! mutating policy (evac's `launcher-hold`) shapes them all, as in a cluster.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{json, Value};

use super::webhooks::{self, Admission, Request};
use crate::kinds::pods;
use crate::store::Store;
use crate::ApiError;

/// How long a pod stays on a node that is not ready or unreachable, unless it says otherwise
/// (`plugin/pkg/admission/defaulttolerationseconds`, `--default-not-ready-toleration-seconds`).
const DEFAULT_TOLERATION_SECONDS: u64 = 300;

/// The `DefaultTolerationSeconds` admission plugin: a pod that does not tolerate the
/// `node.kubernetes.io/not-ready` and `unreachable` `NoExecute` taints tolerates them for 300 s.
fn default_tolerations(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = tolerations.as_array_mut() else { return };
    for key in evac_core::model::NODE_DOWN_TAINT_KEYS {
        let tolerated = list.iter().any(|t| {
            let (k, effect) = (t.get("key").and_then(Value::as_str), t.get("effect").and_then(Value::as_str));
            (k == Some(key) || k.is_none()) && (effect == Some("NoExecute") || effect.is_none())
        });
        if !tolerated {
            list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": DEFAULT_TOLERATION_SECONDS}));
        }
    }
}

/// Creates `pod` in `namespace` after its admission: `DefaultTolerationSeconds`, then the
/// mutating webhooks (the API server's plugin order runs its built-in mutating plugins before
/// `MutatingAdmissionWebhook`).
pub async fn create(
    store: &Store,
    namespace: &str,
    mut pod: Value,
    dry_run: bool,
) -> Result<Arc<Value>, ApiError> {
    default_tolerations(&mut pod);
    let name = pod.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let request = Request { group: "", resource: "pods", operation: "CREATE", name: &name };
    for webhook in webhooks::matching(store, Admission::Mutating, &request) {
        let review = webhooks::review(json!({
            "uid": webhooks::uid(),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kubevirt:kubevirt-controller"},
            "object": pod,
            "oldObject": null,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }));
        let Some(response) = webhooks::call(store, &webhook, &review).await? else { continue };
        if let Some(denied) = webhooks::denial(&webhook, &response) {
            return Err(denied);
        }
        if let Some(patch) = response.get("patch").and_then(Value::as_str) {
            pod = patched(&webhook.name, pod, patch)?;
        }
    }
    store.create(&pods(), namespace, pod, dry_run)
}

/// The pod with a webhook's patch (base64 of an RFC 6902 JSON patch) applied; a patch that does
/// not decode or apply is the API server's 500.
fn patched(webhook: &str, mut pod: Value, patch: &str) -> Result<Value, ApiError> {
    let internal = |why: String| ApiError {
        code: 500,
        reason: "InternalError",
        message: format!(
            "Internal error occurred: admission webhook \"{webhook}\" returned a bad patch: {why}"
        ),
    };
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(patch).map_err(|e| internal(e.to_string()))?;
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| internal(e.to_string()))?;
    json_patch::patch(&mut pod, &patch).map_err(|e| internal(e.to_string()))?;
    Ok(pod)
}

impl Store {
    /// Creates a pod through its admission ([`create`]), for the cluster's components. In-process
    /// webhooks answer at once; with the `http` feature a webhook by URL is waited for.
    pub fn create_pod(&self, namespace: &str, pod: Value) -> Result<Arc<Value>, ApiError> {
        self.complete(create(self, namespace, pod, false)).unwrap_or_else(|| {
            Err(ApiError {
                code: 500,
                reason: "InternalError",
                message: "a pod creation waited on a webhook the simulator cannot call".into(),
            })
        })
    }
}
