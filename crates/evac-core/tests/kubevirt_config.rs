//! KubeVirt's configuration as the decisions read it (`evac_core::kubevirt_config`): which CR is
//! in effect, its feature gates and limits, read from a [`TestCluster`].

use serde_json::{json, Value};

use evac_core::eviction::KubeVirtRef;
use evac_core::kubevirt_config::*;
use evac_core::model::{EvictionStrategy, KubeVirt};
use evac_core::ReadError;
use evac_testkit::TestCluster;

fn kubevirt(name: &str, configuration: Value) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": name, "namespace": "kubevirt"},
        "spec": {"configuration": configuration},
    })
}

fn at(name: &str) -> KubeVirtRef {
    KubeVirtRef { namespace: "kubevirt".into(), name: name.into() }
}

/// What a CR with every field decisions read becomes.
fn configured() -> KubeVirtConfig {
    KubeVirtConfig {
        eviction_strategy: Some(EvictionStrategy::LiveMigrate),
        feature_gates: vec!["LiveMigration".into(), "PreemptionEvictionLiveMigration".into()],
        disabled_feature_gates: vec![],
        parallel_migrations_per_cluster: 10,
        parallel_outbound_migrations_per_node: 3,
        bandwidth_per_migration: Some(128 * 1024 * 1024),
        completion_timeout_per_gib: 300,
        progress_timeout: 60,
        allow_post_copy: true,
        allow_workload_disruption: true,
        allow_auto_converge: true,
    }
}

/// The CRs `spare` and `kubevirt` (listed first, by name), the latter with every field
/// decisions read; reads of KubeVirt CRs fail with `failure`.
fn cluster(failure: Option<&str>) -> TestCluster {
    let full = kubevirt(
        "kubevirt",
        json!({
            "evictionStrategy": "LiveMigrate",
            "developerConfiguration": {"featureGates": ["LiveMigration", "PreemptionEvictionLiveMigration"]},
            "migrations": {
                "parallelMigrationsPerCluster": 10, "parallelOutboundMigrationsPerNode": 3,
                "bandwidthPerMigration": "128Mi", "completionTimeoutPerGiB": 300, "progressTimeout": 60,
                "allowPostCopy": true, "allowAutoConverge": true,
            },
        }),
    );
    let cluster = TestCluster::new([kubevirt("spare", json!({})), full]);
    match failure {
        Some(message) => cluster.failing("KubeVirt", message),
        None => cluster,
    }
}

#[test]
fn a_cluster_without_a_cr_has_kubevirts_defaults() {
    let expected = KubeVirtConfig {
        eviction_strategy: None,
        feature_gates: vec![],
        disabled_feature_gates: vec![],
        parallel_migrations_per_cluster: 5,
        parallel_outbound_migrations_per_node: 2,
        bandwidth_per_migration: None,
        completion_timeout_per_gib: 150,
        progress_timeout: 150,
        allow_post_copy: false,
        allow_workload_disruption: false,
        allow_auto_converge: false,
    };
    assert_eq!(KubeVirtConfig::default(), expected);
    let empty = TestCluster::default();
    assert_eq!(KubeVirtConfig::read(None, &empty), Ok(expected.clone()));
    assert_eq!(KubeVirtConfig::read(Some(&at("kubevirt")), &empty), Ok(expected));
    assert_eq!(empty.reads(), ["list KubeVirt", "get KubeVirt kubevirt/kubevirt"]);
}

/// Of several CRs: the one virt-operator took on, not being deleted; of equals, the first by
/// namespace and name, whatever order the host lists them in.
#[test]
fn the_cr_in_effect() {
    let cr = |namespace: &str, name: &str, phase: Option<&str>, deleted: bool| {
        let mut value = kubevirt(name, json!({}));
        value["metadata"]["namespace"] = json!(namespace);
        if let Some(phase) = phase {
            value["status"] = json!({"phase": phase});
        }
        if deleted {
            value["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        value.to_string()
    };
    let rows: [(&str, Vec<String>, Option<&str>); 5] = [
        ("none", vec![], None),
        (
            "undeployed: the first by name",
            vec![cr("kubevirt", "b", None, false), cr("kubevirt", "a", None, false)],
            Some("a"),
        ),
        (
            "deployed before undeployed",
            vec![cr("kubevirt", "a", None, false), cr("kubevirt", "z", Some("Deployed"), false)],
            Some("z"),
        ),
        (
            "being deleted: never",
            vec![cr("kubevirt", "a", Some("Deployed"), true), cr("kubevirt", "b", None, false)],
            Some("b"),
        ),
        (
            "by namespace first",
            vec![cr("x", "a", Some("Deployed"), false), cr("kubevirt", "b", Some("Deployed"), false)],
            Some("b"),
        ),
    ];
    for (row, texts, expected) in rows {
        let mut kubevirts: Vec<KubeVirt<'_>> =
            texts.iter().map(|t| serde_json::from_str(t).unwrap()).collect();
        for _ in 0..2 {
            let chosen = in_effect(&kubevirts).map(|kv| kv.metadata.name.to_string());
            assert_eq!(chosen.as_deref(), expected, "{row}");
            kubevirts.reverse();
        }
    }
}

/// The CR the settings name (read as `kubevirt.io/v1` `KubeVirt`), else the one in effect
/// (of equals, the first by namespace and name). A named CR that does not exist
/// reads as no CR; a read that fails is an error, never taken for a missing CR (whose
/// defaults would turn every gate off).
#[test]
fn the_named_cr_or_the_first() {
    let timeout = "etcdserver: request timed out";
    let failed = Err(ReadError::other(timeout));
    let rows = [
        ("named", Some(at("kubevirt")), None, Ok(configured()), "get KubeVirt kubevirt/kubevirt"),
        (
            "named, another",
            Some(at("spare")),
            None,
            Ok(KubeVirtConfig::default()),
            "get KubeVirt kubevirt/spare",
        ),
        (
            "named, missing",
            Some(at("gone")),
            None,
            Ok(KubeVirtConfig::default()),
            "get KubeVirt kubevirt/gone",
        ),
        ("the first listed", None, None, Ok(configured()), "list KubeVirt"),
        (
            "named, read fails",
            Some(at("kubevirt")),
            Some(timeout),
            failed.clone(),
            "get KubeVirt kubevirt/kubevirt",
        ),
        ("listed, read fails", None, Some(timeout), failed, "list KubeVirt"),
    ];
    for (row, at, failure, expected, read) in rows {
        let cluster = cluster(failure);
        assert_eq!(KubeVirtConfig::read(at.as_ref(), &cluster), expected, "{row}");
        assert_eq!(cluster.reads(), [read], "{row}");
    }
}

#[test]
fn an_undecodable_cr_is_an_error() {
    let broken = TestCluster::new([kubevirt("kubevirt", json!({"evictionStrategy": 7}))]);
    for at in [Some(at("kubevirt")), None] {
        let error = KubeVirtConfig::read(at.as_ref(), &broken).unwrap_err();
        assert!(!error.is_not_found(), "{error}");
        assert!(error.message.starts_with("cannot decode the KubeVirt"), "{error}");
    }
}
