//! The built disruption-cause module, run in-process by evac's wasmtime host against static
//! clusters, with only the reads its metadata grants.
//!
//! Every row of the decision's table ([`evac_testkit::disruption_cases`]: each cause of a
//! launcher pod's disruption under each feature gate, user deletions, node pressure, what it
//! cannot decide, failed reads) runs through the module; the other tests here are of what only
//! the module and its host do: grants, settings validation, the protocol, the embedded metadata.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use evac_cluster::MemoryStore;
use evac_core::PolicyId;
use evac_e2e::*;
use evac_runtime::capabilities::{KubernetesCapabilities, ResourceGrant};
use evac_runtime::kubewarden;
use evac_runtime::kubewarden::metadata::{self, Metadata};
use evac_runtime::wapc::{Policy, PolicyModule};
use evac_testkit::{check_cases, disruption_cases};
use serde_json::{json, Value};

fn module_path() -> PathBuf {
    built_policy(PolicyId::DisruptionCause)
}

fn module() -> PolicyModule {
    built_module(PolicyId::DisruptionCause)
}

/// The metadata embedded in the built module.
fn embedded_metadata() -> Metadata {
    let bytes = std::fs::read(module_path()).expect("the built module");
    metadata::read(&bytes)
        .expect("readable metadata")
        .expect("the built module has no metadata: run `make build`")
}

/// The grants of the module's metadata, and nothing more.
fn grants() -> Vec<ResourceGrant> {
    static GRANTS: OnceLock<BTreeSet<ResourceGrant>> = OnceLock::new();
    GRANTS.get_or_init(|| embedded_metadata().context_aware_resources).iter().cloned().collect()
}

/// Every row of the table, through the built module with the grants of its metadata.
#[test]
fn every_row_of_the_disruption_table() {
    let (module, grants) = (module(), grants());
    check_cases("disruption", &disruption_cases(), |case| validate_case(&module, &grants, case));
}

/// A read the metadata does not grant is a failed read: the deletion is not blocked for it.
#[test]
fn reads_it_was_not_granted_are_warnings() {
    let pod = with(
        launcher_pod(NS, "vm", NODE),
        "/status/conditions",
        json!([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]),
    );
    let request = json!({
        "uid": "e2e-Pod-DELETE",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "name": pod["metadata"]["name"],
        "namespace": NS,
        "operation": "DELETE",
        "object": null,
        "oldObject": pod,
        "dryRun": false,
    });
    let capabilities =
        KubernetesCapabilities::new(Arc::new(MemoryStore::empty())).granting([grant("v1", "Node")]);
    let policy = Policy::new(module(), Arc::new(capabilities));
    let response = validate(&policy, &request).expect("validate");
    assert_eq!((response.accepted, response.code), (true, None), "{response:?}");
    assert!(response.warnings.unwrap()[0].contains("contextAwareResources"));
    assert!(response.effects.is_empty());
}

#[test]
fn settings_are_validated_by_the_module() {
    let policy = Policy::new(module(), Arc::new(KubernetesCapabilities::new(Arc::new(MemoryStore::empty()))));
    let answer =
        |settings: Value| kubewarden::validate_settings(&policy, &raw(&settings)).expect("an answer");
    assert!(answer(json!({"nodePressure": {"threshold": "2Gi", "headroom": "0"}})).valid);
    let bad = answer(json!({"nodePressure": {"threshold": "plenty"}}));
    assert_eq!(
        (bad.valid, bad.message.as_deref()),
        (false, Some(r#"nodePressure.threshold: "plenty" is not a memory quantity (e.g. 3500Mi)"#))
    );
    assert_eq!(kubewarden::protocol_version(&policy).unwrap(), "v1");
}

#[test]
fn the_built_module_carries_its_metadata() {
    let embedded = embedded_metadata();
    let yml = std::fs::read_to_string(repo_root().join("policies/disruption-cause/metadata.yml")).unwrap();
    let mut expected = Metadata::from_yaml(&yml).unwrap();
    expected.protocol_version = Some("v1".into());
    assert_eq!(embedded, expected, "dist/policies/disruption-cause.wasm is stale: run `make build`");
    assert!(!embedded.mutating);
    let grants: BTreeSet<ResourceGrant> = [
        grant("v1", "Node"),
        grant("v1", "Pod"),
        grant("metrics.k8s.io/v1beta1", "NodeMetrics"),
        grant("kubevirt.io/v1", "VirtualMachineInstance"),
        grant("kubevirt.io/v1", "KubeVirt"),
    ]
    .into();
    assert_eq!(embedded.context_aware_resources, grants);
}
