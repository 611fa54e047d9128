use serde::{Deserialize, Serialize};

use super::{null_as_default, EvictionStrategy, ObjectMeta, Str};

/// The `kubevirt.io/v1` KubeVirt custom resource: the cluster-wide KubeVirt configuration.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct KubeVirt<'a> {
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: KubeVirtSpec<'a>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct KubeVirtSpec<'a> {
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub configuration: KubeVirtConfiguration<'a>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KubeVirtConfiguration<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eviction_strategy: Option<EvictionStrategy>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub developer_configuration: DeveloperConfiguration<'a>,
    #[serde(deserialize_with = "null_as_default")]
    pub migrations: MigrationConfiguration,
}

/// `spec.configuration.migrations`: the parallel limits evacuations respect.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationConfiguration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_migrations_per_cluster: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_outbound_migrations_per_node: Option<u32>,
}

/// KubeVirt's defaults for the parallel limits.
pub const DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER: u32 = 5;
pub const DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE: u32 = 2;

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeveloperConfiguration<'a> {
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<Str<'a>>,
}

impl KubeVirt<'_> {
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

    pub fn feature_gate_enabled(&self, gate: &str) -> bool {
        self.spec.configuration.developer_configuration.feature_gates.iter().any(|g| g.as_str() == gate)
    }
}
