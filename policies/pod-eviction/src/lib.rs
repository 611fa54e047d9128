//! pod-eviction: KubeVirt's `pods/eviction` verdict as a Kubewarden policy.
//!
//! The decision lives in `evac-core`; this crate reads the objects it asks for through Kubewarden's
//! `kubernetes` host capabilities and returns Kubewarden's ValidationResponse plus the effects
//! (`MarkForEvacuation`) that the host carries out. The module itself never writes.
//!
//! It depends on `evac-core` and `evac-policy-guest` only, never on a host crate.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use evac_core::eviction;
use evac_core::model::ValidationRequest;
use evac_core::trace::Trace;
use evac_core::ClusterReader;
use evac_policy_guest::Answer;

mod settings;

pub use settings::Settings;

evac_policy_guest::policy! {
    settings: Settings,
    validate: |payload| evaluate(payload, &evac_policy_guest::host_capabilities()),
}

/// Decodes a ValidationRequest, decides it and encodes the response.
pub fn evaluate<C: ClusterReader>(payload: &[u8], cluster: &C) -> Answer {
    evaluate_traced(payload, cluster, &mut Trace::off())
}

/// [`evaluate`], recording the decision's checks in `trace` (the browser playground shows them).
pub fn evaluate_traced<C: ClusterReader>(payload: &[u8], cluster: &C, trace: &mut Trace) -> Answer {
    let validation: ValidationRequest<Settings> = evac_policy_guest::decode_request(payload)?;
    let decision = eviction::decide_traced(&validation.request, &validation.settings, cluster, trace)?;
    evac_policy_guest::encode_decision(decision)
}

#[cfg(test)]
mod tests {
    use evac_core::{Effect, ObjectRef, PolicyResponse};
    use evac_testkit::requests::eviction_request;
    use evac_testkit::TestCluster;
    use serde_json::{json, Value};

    use super::*;

    /// A launcher pod of VMI `vm` on node01, the VMI (no strategy of its own, migratable) and a
    /// KubeVirt CR whose cluster-wide strategy is LiveMigrate.
    fn cluster() -> TestCluster {
        TestCluster::new([
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "virt-launcher-vm-x", "namespace": "default",
                                "labels": {"kubevirt.io": "virt-launcher"},
                                "annotations": {"kubevirt.io/domain": "vm"}},
                   "spec": {"nodeName": "node01"}, "status": {"phase": "Running"}}),
            json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                   "metadata": {"name": "vm", "namespace": "default"},
                   "status": {"nodeName": "node01", "phase": "Running",
                              "conditions": [{"type": "LiveMigratable", "status": "True"}]}}),
            json!({"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
                   "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
                   "spec": {"configuration": {"evictionStrategy": "LiveMigrate"}}}),
        ])
    }

    /// The ValidationRequest Kubewarden passes for an eviction of the launcher pod.
    fn payload(settings: Value, subresource: &str) -> Vec<u8> {
        let mut request = eviction_request("default", "virt-launcher-vm-x");
        request["subResource"] = json!(subresource);
        serde_json::to_vec(&json!({"settings": settings, "request": request})).unwrap()
    }

    fn response(answer: Vec<u8>) -> PolicyResponse {
        serde_json::from_slice(&answer).expect("a PolicyResponse")
    }

    #[test]
    fn an_eviction_that_triggers_an_evacuation() {
        let mark = Effect::MarkForEvacuation {
            vmi: ObjectRef::new("default", "vm"),
            node: "node01".into(),
            dry_run: false,
            source: None,
        };
        // (settings, evacuates): the settings reach the decision (a named CR that is not there
        // leaves no cluster-wide strategy).
        let rows = [
            (json!({}), true),
            (Value::Null, true),
            (json!({"kubevirt": {"namespace": "kubevirt", "name": "kubevirt"}}), true),
            (json!({"kubevirt": {"namespace": "elsewhere", "name": "kubevirt"}}), false),
        ];
        for (settings, evacuates) in rows {
            let response = response(evaluate(&payload(settings.clone(), "eviction"), &cluster()).unwrap());
            if evacuates {
                assert!(!response.accepted, "{settings}");
                assert_eq!(response.code, Some(429), "{settings}");
                assert_eq!(
                    response.message.as_deref(),
                    Some(r#"Eviction triggered evacuation of VMI "default/vm""#),
                    "{settings}"
                );
                assert_eq!(response.effects, std::slice::from_ref(&mark), "{settings}");
            } else {
                assert!(response.accepted, "{settings}");
                assert_eq!((response.code, response.effects), (None, vec![]), "{settings}");
            }
        }
    }

    #[test]
    fn requests_it_cannot_decide_are_errors() {
        let error = evaluate(&payload(json!({}), ""), &cluster()).unwrap_err();
        assert!(matches!(error, evac_policy_guest::GuestError::NotAnEviction(_)), "{error:?}");
        assert_eq!(
            error.to_string(),
            "this policy only evaluates pods/eviction CREATE requests, got CREATE pods"
        );
        let error = evaluate(b"{\"request\": 7}", &cluster()).unwrap_err();
        assert!(matches!(error, evac_policy_guest::GuestError::Request(_)), "{error:?}");
        assert!(error.to_string().starts_with("cannot decode the validation request"), "{error}");
    }
}
