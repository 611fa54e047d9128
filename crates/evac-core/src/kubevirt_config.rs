//! The cluster-wide KubeVirt configuration every decision reads from the `KubeVirt` CR: the
//! eviction strategy, the feature gates and the migration limits.

use crate::cluster::{self, ClusterReader, ReadError};
use crate::eviction::KubeVirtRef;
use crate::kubevirt::KUBEVIRT_KIND;
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
                match cluster::fetch(cluster, KUBEVIRT_KIND.0, KUBEVIRT_KIND.1, &at.namespace, &at.name) {
                    Ok(raw) => Ok(Self::from(&cluster::decode::<KubeVirt<'_>>(&raw, "KubeVirt")?)),
                    Err(e) if e.is_not_found() => Ok(Self::default()),
                    Err(e) => Err(e),
                }
            }
            None => {
                let raw = cluster::fetch_all(cluster, KUBEVIRT_KIND.0, KUBEVIRT_KIND.1)?;
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
