//! The admission requests the tests send, built once: a `pods/eviction` CREATE as the API server
//! sends it to the eviction webhook.

use evac_core::model::{eviction_admission_request, UserInfo};
use serde_json::{json, Value};

/// The `policy/v1` Eviction a client posts to evict `namespace/pod`.
pub fn eviction_object(namespace: &str, pod: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}})
}

/// The AdmissionRequest (bare, as Kubewarden passes it to `validate`) of a `pods/eviction` CREATE
/// of `namespace/pod` carrying `eviction`, as `kubectl drain` posts it.
pub fn eviction_request_with(namespace: &str, pod: &str, eviction: Value) -> Value {
    let uid = format!("705ab4f5-6393-11e8-b7cc-{namespace}-{pod}");
    let user =
        UserInfo { username: "system:serviceaccount:kube-system:drain", groups: &["system:authenticated"] };
    eviction_admission_request(&uid, namespace, pod, user, eviction, false)
}

/// [`eviction_request_with`] with a plain Eviction ([`eviction_object`]).
pub fn eviction_request(namespace: &str, pod: &str) -> Value {
    eviction_request_with(namespace, pod, eviction_object(namespace, pod))
}
