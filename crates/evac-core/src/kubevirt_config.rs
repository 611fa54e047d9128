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
    /// `parallelMigrationsPerCluster`: migrations running at once in the cluster (KubeVirt's default: 5).
    pub parallel_migrations_per_cluster: u32,
    /// `parallelOutboundMigrationsPerNode`: migrations running at once from one node (KubeVirt's default: 2).
    pub parallel_outbound_migrations_per_node: u32,
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
            parallel_migrations_per_cluster: per_cluster,
            parallel_outbound_migrations_per_node: per_node,
        }
    }
}

impl KubeVirtConfig {
    /// Reads the KubeVirt CR the settings name, or the first one in the cluster. A missing CR
    /// reads as [`KubeVirtConfig::default`].
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
                Ok(kubevirts.first().map(Self::from).unwrap_or_default())
            }
        }
    }

    /// Whether `featureGates` lists `gate`.
    pub fn feature_gate_enabled(&self, gate: &str) -> bool {
        self.feature_gates.iter().any(|g| g == gate)
    }
}
