use serde::{Deserialize, Serialize};

use super::{null_as_default, EvictionStrategy, ObjectMeta, Str};

/// The `kubevirt.io/v1` KubeVirt custom resource: the cluster-wide KubeVirt configuration.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct KubeVirt<'a> {
    /// `metadata`: the CR's name and namespace.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `spec`: only `spec.configuration` is read.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: KubeVirtSpec<'a>,
}

/// The KubeVirt CR's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct KubeVirtSpec<'a> {
    /// `spec.configuration`: KubeVirt's cluster-wide settings.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub configuration: KubeVirtConfiguration<'a>,
}

/// `spec.configuration`: the settings disruptions depend on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KubeVirtConfiguration<'a> {
    /// `evictionStrategy`: the strategy of VMIs that set none; unset acts as KubeVirt's default, `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<EvictionStrategy>,
    /// `developerConfiguration`: where feature gates are enabled.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub developer_configuration: DeveloperConfiguration<'a>,
    /// `migrations`: the live-migration limits.
    #[serde(deserialize_with = "null_as_default")]
    pub migrations: MigrationConfiguration,
}

/// `spec.configuration.migrations`: the parallel limits evacuations respect.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationConfiguration {
    /// `parallelMigrationsPerCluster`: migrations running at once in the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_migrations_per_cluster: Option<u32>,
    /// `parallelOutboundMigrationsPerNode`: migrations running at once from one node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_outbound_migrations_per_node: Option<u32>,
}

/// KubeVirt's default `parallelMigrationsPerCluster`.
pub const DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER: u32 = 5;
/// KubeVirt's default `parallelOutboundMigrationsPerNode`.
pub const DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE: u32 = 2;

/// `spec.configuration.developerConfiguration`: where feature gates are enabled.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeveloperConfiguration<'a> {
    /// `featureGates`: the feature gates enabled, by name.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<Str<'a>>,
}

impl KubeVirt<'_> {
    /// The cluster-wide `evictionStrategy`, when set.
    pub fn eviction_strategy(&self) -> Option<&EvictionStrategy> {
        self.spec.configuration.eviction_strategy.as_ref()
    }

    /// `parallelMigrationsPerCluster` and `parallelOutboundMigrationsPerNode`, with KubeVirt's defaults.
    pub fn parallel_limits(&self) -> (u32, u32) {
        let migrations = &self.spec.configuration.migrations;
        (
            migrations.parallel_migrations_per_cluster.unwrap_or(DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER),
            migrations
                .parallel_outbound_migrations_per_node
                .unwrap_or(DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE),
        )
    }

    /// Whether `developerConfiguration.featureGates` lists `gate`.
    pub fn feature_gate_enabled(&self, gate: &str) -> bool {
        self.spec.configuration.developer_configuration.feature_gates.iter().any(|g| g.as_str() == gate)
    }
}
