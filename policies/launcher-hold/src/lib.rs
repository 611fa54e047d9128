//! launcher-hold: a Kubewarden mutating policy that keeps a KubeVirt VM running while it
//! live-migrates away from a pod disruption.
//!
//! On the creation of a `virt-launcher` pod it adds a `preStop` hook to every container, an
//! `httpGet` to evac's hold endpoint on the node's `127.0.0.1`, and raises the pod's
//! `terminationGracePeriodSeconds` by the hold window (`evac_core::hold::mutation`). The kubelet
//! runs the hook before SIGTERM and waits for its answer, bounded by the grace period: the hold
//! endpoint answers when the VM has left, or when holding can no longer help. Any other pod is
//! accepted unchanged. The module reads nothing and never writes: it returns the mutated pod, and
//! its host answers the API server with the JSON patch.
//!
//! It depends on `evac-core` and `evac-policy-guest` only, never on a host crate.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use evac_core::hold::mutation::{self, Mutation};
use evac_core::model::ValidationRequest;
use evac_core::PolicyResponse;
use evac_policy_guest::Answer;

mod settings;

pub use settings::Settings;

evac_policy_guest::policy! {
    settings: Settings,
    validate: |payload| evaluate(payload),
}

/// Decodes a ValidationRequest and answers it: a launcher pod's creation is accepted with the
/// mutated pod (`mutated_object`), anything else is accepted unchanged. A pod that does not decode
/// is accepted unchanged, with a warning: a mutating webhook must not block a creation it cannot
/// read (the VM then runs without a hold, as with KubeVirt alone). Only a payload that does not
/// decode is a waPC error.
pub fn evaluate(payload: &[u8]) -> Answer {
    let validation: ValidationRequest<Settings> = evac_policy_guest::decode_request(payload)?;
    let response = match mutation::mutate(&validation.request, &validation.settings) {
        Ok(Mutation::Mutated(pod)) => PolicyResponse { mutated_object: Some(pod), ..accepted() },
        Ok(Mutation::Unchanged(_)) => accepted(),
        Err(why) => PolicyResponse {
            warnings: Some(vec![format!("launcher-hold left the pod unchanged: {why}")]),
            ..accepted()
        },
    };
    Ok(serde_json::to_vec(&response)?)
}

fn accepted() -> PolicyResponse {
    PolicyResponse::from(evac_core::Decision::allow())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn answer(request: Value, settings: Value) -> PolicyResponse {
        let payload = json!({"settings": settings, "request": request}).to_string();
        serde_json::from_slice(&evaluate(payload.as_bytes()).expect("an answer")).expect("a response")
    }

    fn create(object: Value) -> Value {
        json!({"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
               "resource": {"group": "", "version": "v1", "resource": "pods"},
               "namespace": "default", "operation": "CREATE", "object": object})
    }

    fn launcher() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"generateName": "virt-launcher-db-", "namespace": "default",
                            "labels": {"kubevirt.io": "virt-launcher"}, "annotations": {"kubevirt.io/domain": "db"}},
               "spec": {"terminationGracePeriodSeconds": 60, "containers": [{"name": "compute"}]}})
    }

    #[test]
    fn a_launcher_pod_is_accepted_mutated() {
        let response = answer(create(launcher()), json!({"windowSeconds": 120}));
        assert!(response.accepted);
        assert!(response.effects.is_empty());
        let pod = response.mutated_object.expect("mutated");
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 180);
        assert_eq!(
            pod["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["path"],
            "/hold/default/db/compute"
        );
    }

    #[test]
    fn other_pods_are_accepted_unchanged() {
        let mut plain = launcher();
        plain["metadata"]["labels"] = json!({"app": "web"});
        let response = answer(create(plain), Value::Null);
        assert!(response.accepted);
        assert_eq!(response.mutated_object, None);
        assert_eq!(response.warnings, None);
    }

    #[test]
    fn an_object_that_is_not_a_pod_is_accepted_unchanged() {
        let response = answer(create(json!("not a pod")), Value::Null);
        assert!(response.accepted);
        assert_eq!((response.mutated_object, response.warnings), (None, None));
    }

    #[test]
    fn a_payload_that_does_not_decode_is_an_error() {
        assert!(evaluate(b"{\"request\": 7}").is_err());
    }
}
