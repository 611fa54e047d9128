//! The cluster-wide KubeVirt configuration every decision reads from the `KubeVirt` CR: the
//! eviction strategy, the feature gates and the migration limits.

use crate::cluster::{self, ClusterReader, ReadError};
use crate::eviction::KubeVirtRef;
use crate::model::{EvictionStrategy, KubeVirt};

pub use crate::kubevirt::KUBEVIRT_API_VERSION;

/// The parts of the KubeVirt CR that decisions use, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeVirtConfig {
    /// `spec.configuration.evictionStrategy`: the strategy of VMIs that set none; unset acts as
    /// KubeVirt's default, `None`.
    pub eviction_strategy: Option<EvictionStrategy>,
    /// `spec.configuration.developerConfiguration.featureGates`: the feature gates enabled.
    pub feature_gates: Vec<String>,
    /// `spec.configuration.developerConfiguration.disabledFeatureGates`: gates switched off.
    pub disabled_feature_gates: Vec<String>,
    /// `parallelMigrationsPerCluster`: migrations running at once in the cluster (KubeVirt's default: 5).
    pub parallel_migrations_per_cluster: u32,
    /// `parallelOutboundMigrationsPerNode`: migrations running at once from one node (KubeVirt's default: 2).
    pub parallel_outbound_migrations_per_node: u32,
    /// `bandwidthPerMigration` in bytes per second; `None` when unlimited (KubeVirt's default).
    pub bandwidth_per_migration: Option<u64>,
    /// `completionTimeoutPerGiB` in seconds (KubeVirt's default: 150).
    pub completion_timeout_per_gib: u64,
    /// `progressTimeout` in seconds (KubeVirt's default: 150).
    pub progress_timeout: u64,
    /// `allowPostCopy` (default off).
    pub allow_post_copy: bool,
    /// `allowWorkloadDisruption`, which follows `allowPostCopy` when unset.
    pub allow_workload_disruption: bool,
    /// `allowAutoConverge` (default off).
    pub allow_auto_converge: bool,
}

impl Default for KubeVirtConfig {
    /// A cluster without a KubeVirt CR: no cluster-wide strategy, no gates, KubeVirt's limits.
    fn default() -> Self {
        Self::from(&KubeVirt::default())
    }
}

impl From<&KubeVirt<'_>> for KubeVirtConfig {
    fn from(kubevirt: &KubeVirt<'_>) -> Self {
        let (per_cluster, per_node) = kubevirt.parallel_limits();
        let (completion_timeout_per_gib, progress_timeout) = kubevirt.migration_timeouts();
        Self {
            eviction_strategy: kubevirt.eviction_strategy().cloned(),
            feature_gates: kubevirt
                .spec
                .configuration
                .developer_configuration
                .feature_gates
                .iter()
                .map(|g| g.to_string())
                .collect(),
            disabled_feature_gates: kubevirt
                .spec
                .configuration
                .developer_configuration
                .disabled_feature_gates
                .iter()
                .map(|g| g.to_string())
                .collect(),
            parallel_migrations_per_cluster: per_cluster,
            parallel_outbound_migrations_per_node: per_node,
            // Whole bytes: a fraction of a byte per second changes no estimate.
            bandwidth_per_migration: kubevirt.bandwidth_per_migration().map(|b| b as u64),
            completion_timeout_per_gib,
            progress_timeout,
            allow_post_copy: kubevirt.spec.configuration.migrations.allow_post_copy.unwrap_or(false),
            allow_workload_disruption: kubevirt
                .spec
                .configuration
                .migrations
                .allow_workload_disruption
                .or(kubevirt.spec.configuration.migrations.allow_post_copy)
                .unwrap_or(false),
            allow_auto_converge: kubevirt.spec.configuration.migrations.allow_auto_converge.unwrap_or(false),
        }
    }
}

impl KubeVirtConfig {
    /// Reads the KubeVirt CR the settings name, or else the one [`in_effect`] of those in the
    /// cluster. A missing CR reads as [`KubeVirtConfig::default`].
    pub fn read<C: ClusterReader + ?Sized>(at: Option<&KubeVirtRef>, cluster: &C) -> Result<Self, ReadError> {
        match at {
            Some(at) => {
                match cluster::fetch(cluster, KUBEVIRT_API_VERSION, "KubeVirt", &at.namespace, &at.name) {
                    Ok(raw) => Ok(Self::from(&cluster::decode::<KubeVirt<'_>>(&raw, "KubeVirt")?)),
                    Err(e) if e.is_not_found() => Ok(Self::default()),
                    Err(e) => Err(e),
                }
            }
            None => {
                let raw = cluster::fetch_all(cluster, KUBEVIRT_API_VERSION, "KubeVirt")?;
                let kubevirts = cluster::decode_list::<KubeVirt<'_>>(&raw, "KubeVirt")?;
                Ok(in_effect(&kubevirts).map(Self::from).unwrap_or_default())
            }
        }
    }

    /// Whether `gate` is on ([`gate_enabled`]).
    pub fn feature_gate_enabled(&self, gate: &str) -> bool {
        gate_enabled(
            gate,
            self.feature_gates.iter().map(String::as_str),
            self.disabled_feature_gates.iter().map(String::as_str),
        )
    }
}

/// Whether one of evac's feature gates is on, given the CR's `featureGates` and
/// `disabledFeatureGates`. evac's gates are off unless enabled, as KubeVirt's alpha gates are
/// (`featuregate.IsEnabled`, pkg/virt-config/featuregate/feature-gates.go). A gate in
/// `disabledFeatureGates` is off even when `featureGates` lists it too: KubeVirt's own admission
/// refuses a CR naming a gate in both (`validateFeatureGates`,
/// pkg/virt-operator/webhooks/kubevirt-update-admitter.go), so such a CR got past a check, and
/// of the two readings the one that keeps evac out of the way is the admin's explicit "off".
pub fn gate_enabled<'g>(
    gate: &str,
    mut enabled: impl Iterator<Item = &'g str>,
    mut disabled: impl Iterator<Item = &'g str>,
) -> bool {
    enabled.any(|g| g == gate) && !disabled.any(|g| g == gate)
}

/// Of the KubeVirt CRs listed, the one whose configuration is in effect. KubeVirt's components
/// read the CR virt-operator has taken on (a `status.phase`) that is not being deleted
/// (`ClusterConfig.GetConfigFromKubeVirtCR`, pkg/virt-config/configuration.go); a cluster runs
/// one. evac prefers that one too, and else reads a CR virt-operator has not processed yet (a
/// cluster being installed). Of equals, the first by namespace and name: hosts list in different
/// orders (the API server by key, Kubewarden's reflector cache as it hashes), and one cluster
/// must read the same under every host.
pub fn in_effect<'k, 'a>(kubevirts: &'k [KubeVirt<'a>]) -> Option<&'k KubeVirt<'a>> {
    fn key<'k>(kv: &'k KubeVirt<'_>) -> (bool, &'k str, &'k str) {
        (kv.status.phase.is_empty(), &kv.metadata.namespace, &kv.metadata.name)
    }
    kubevirts.iter().filter(|kv| kv.metadata.deletion_timestamp.is_none()).min_by(|a, b| key(a).cmp(&key(b)))
}

/// The default of the policies' `kubevirtEvacuationController` setting: KubeVirt's evacuation
/// controller runs, as virt-controller ships it (`pkg/virt-controller/watch/drain/evacuation`;
/// virt-operator offers no way to turn it off).
pub fn evacuation_controller_default() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::testing::TestCluster;

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
}
