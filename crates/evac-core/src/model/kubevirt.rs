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
    /// `status`: only `status.phase` is read.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "KubeVirtStatus::is_empty")]
    pub status: KubeVirtStatus<'a>,
}

/// The KubeVirt CR's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct KubeVirtStatus<'a> {
    /// `phase`: set by virt-operator once it has taken the CR on (`Deploying`, `Deployed`,
    /// `Deleting`...); empty on a CR it has not processed.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub phase: Str<'a>,
}

impl KubeVirtStatus<'_> {
    /// Whether nothing in it is set.
    pub fn is_empty(&self) -> bool {
        self.phase.is_empty()
    }
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

/// `spec.configuration.migrations`: the parallel limits evacuations respect, and what a migration's
/// duration depends on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationConfiguration {
    /// `bandwidthPerMigration`: a quantity of bytes per second; unset or `0` is unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth_per_migration: Option<String>,
    /// `completionTimeoutPerGiB`: seconds a migration may take per GiB of memory before KubeVirt
    /// aborts it.
    #[serde(rename = "completionTimeoutPerGiB", skip_serializing_if = "Option::is_none")]
    pub completion_timeout_per_gib: Option<u64>,
    /// `progressTimeout`: seconds without progress after which KubeVirt aborts a migration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress_timeout: Option<u64>,
    /// `parallelMigrationsPerCluster`: migrations running at once in the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_migrations_per_cluster: Option<u32>,
    /// `parallelOutboundMigrationsPerNode`: migrations running at once from one node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_outbound_migrations_per_node: Option<u32>,
    /// `allowPostCopy`: a migration still running at its completion timeout switches to
    /// post-copy instead of being aborted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_post_copy: Option<bool>,
    /// `allowWorkloadDisruption`: a migration still running at its completion timeout pauses the
    /// guest (or switches to post-copy) instead of being aborted; unset, it follows
    /// `allowPostCopy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_workload_disruption: Option<bool>,
    /// `allowAutoConverge`: QEMU throttles a guest that dirties memory too fast to migrate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_auto_converge: Option<bool>,
}

/// KubeVirt's default `parallelMigrationsPerCluster`.
pub const DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER: u32 = 5;
/// KubeVirt's default `parallelOutboundMigrationsPerNode`.
pub const DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE: u32 = 2;
/// KubeVirt's default `completionTimeoutPerGiB` (`MigrationCompletionTimeoutPerGiB`,
/// `pkg/virt-config/virt-config.go`).
pub const DEFAULT_COMPLETION_TIMEOUT_PER_GIB: u64 = 150;
/// KubeVirt's default `progressTimeout` (`MigrationProgressTimeout`, `pkg/virt-config/virt-config.go`).
pub const DEFAULT_PROGRESS_TIMEOUT: u64 = 150;

/// `spec.configuration.developerConfiguration`: where feature gates are enabled.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeveloperConfiguration<'a> {
    /// `featureGates`: the feature gates enabled, by name.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<Str<'a>>,
    /// `disabledFeatureGates` (KubeVirt 1.9): gates switched off, by name.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub disabled_feature_gates: Vec<Str<'a>>,
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

    /// `bandwidthPerMigration` in bytes per second; `None` when unset, `0` (unlimited) or not a
    /// quantity.
    pub fn bandwidth_per_migration(&self) -> Option<f64> {
        let bandwidth = self.spec.configuration.migrations.bandwidth_per_migration.as_deref()?;
        super::quantity::bytes(bandwidth).filter(|b| *b > 0.0)
    }

    /// `completionTimeoutPerGiB` and `progressTimeout` in seconds, with KubeVirt's defaults.
    pub fn migration_timeouts(&self) -> (u64, u64) {
        let migrations = &self.spec.configuration.migrations;
        (
            migrations.completion_timeout_per_gib.unwrap_or(DEFAULT_COMPLETION_TIMEOUT_PER_GIB),
            migrations.progress_timeout.unwrap_or(DEFAULT_PROGRESS_TIMEOUT),
        )
    }

    /// Whether `gate` is on: `developerConfiguration.featureGates` lists it and
    /// `disabledFeatureGates` does not ([`crate::kubevirt_config::gate_enabled`]).
    pub fn feature_gate_enabled(&self, gate: &str) -> bool {
        let developer = &self.spec.configuration.developer_configuration;
        crate::kubevirt_config::gate_enabled(
            gate,
            developer.feature_gates.iter().map(Str::as_str),
            developer.disabled_feature_gates.iter().map(Str::as_str),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A KubeVirt CR with these feature gates and this `migrations` configuration.
    fn kubevirt(gates: &[&str], migrations: serde_json::Value) -> String {
        serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
            "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
            "spec": {"configuration": {
                "developerConfiguration": {"featureGates": gates},
                "migrations": migrations,
            }},
        })
        .to_string()
    }

    /// A CR virt-operator has not processed is written back without a `status` (an empty one
    /// would be a change); one it has keeps its phase.
    #[test]
    fn an_empty_status_is_not_written() {
        let text = kubevirt(&[], serde_json::json!({}));
        let unprocessed: KubeVirt<'_> = serde_json::from_str(&text).unwrap();
        assert!(serde_json::to_value(&unprocessed).unwrap().get("status").is_none());
        let deployed = KubeVirt { status: KubeVirtStatus { phase: "Deployed".into() }, ..unprocessed };
        assert_eq!(
            serde_json::to_value(&deployed).unwrap()["status"],
            serde_json::json!({"phase": "Deployed"})
        );
    }

    /// `bandwidthPerMigration: 0` is KubeVirt's "unlimited": no figure to estimate with.
    #[test]
    fn a_zero_bandwidth_is_no_bandwidth() {
        let read = |migrations: serde_json::Value| {
            let text = kubevirt(&[], migrations);
            let cr: KubeVirt<'_> = serde_json::from_str(&text).unwrap();
            cr.bandwidth_per_migration()
        };
        assert_eq!(read(serde_json::json!({"bandwidthPerMigration": "0"})), None);
        assert_eq!(read(serde_json::json!({"bandwidthPerMigration": "64Mi"})), Some(64.0 * 1024.0 * 1024.0));
        assert_eq!(read(serde_json::json!({})), None);
    }

    /// Feature gates are names matched exactly, as KubeVirt's `featureGates` list is read: a gate
    /// is on when listed, whatever else is listed, and only then.
    #[test]
    fn feature_gates_are_listed_names() {
        // (gates in the CR, gate asked for, enabled)
        let rows: &[(&[&str], &str, bool)] = &[
            (&[], "PreemptionEvictionLiveMigration", false),
            (&["PreemptionEvictionLiveMigration"], "PreemptionEvictionLiveMigration", true),
            (
                &["LiveMigration", "NodePressureEvictionLiveMigration"],
                "NodePressureEvictionLiveMigration",
                true,
            ),
            (&["LiveMigration", "NodePressureEvictionLiveMigration"], "LiveMigration", true),
            (&["LiveMigration"], "NoExecuteTaintEvictionLiveMigration", false),
            // Gate names are case-sensitive and whole.
            (&["preemptionevictionlivemigration"], "PreemptionEvictionLiveMigration", false),
            (&["PreemptionEviction"], "PreemptionEvictionLiveMigration", false),
            (&["PreemptionEvictionLiveMigration"], "PreemptionEviction", false),
        ];
        for (gates, gate, enabled) in rows {
            let text = kubevirt(gates, serde_json::Value::Null);
            let cr: KubeVirt<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(cr.feature_gate_enabled(gate), *enabled, "{gate} in {gates:?}");
            let config = crate::kubevirt_config::KubeVirtConfig::from(&cr);
            assert_eq!(config.feature_gate_enabled(gate), *enabled, "config: {gate} in {gates:?}");
        }
        // A CR without a developer configuration (or with `null` gates) has no gate on.
        for text in [
            r#"{"spec": {"configuration": {}}}"#,
            r#"{"spec": {"configuration": {"developerConfiguration": {"featureGates": null}}}}"#,
        ] {
            let cr: KubeVirt<'_> = serde_json::from_str(text).unwrap();
            assert!(!cr.feature_gate_enabled("LiveMigration"), "{text}");
        }
    }

    /// KubeVirt 1.9's `disabledFeatureGates`: a gate listed there is off, even beside the same
    /// name in `featureGates` (a CR KubeVirt's own admission refuses); other gates are untouched.
    #[test]
    fn disabled_feature_gates_switch_a_gate_off() {
        // (featureGates, disabledFeatureGates, gate asked for, enabled)
        let rows: &[(&[&str], &[&str], &str, bool)] = &[
            (&["PreemptionEvictionLiveMigration"], &[], "PreemptionEvictionLiveMigration", true),
            (&[], &["PreemptionEvictionLiveMigration"], "PreemptionEvictionLiveMigration", false),
            (
                &["PreemptionEvictionLiveMigration"],
                &["PreemptionEvictionLiveMigration"],
                "PreemptionEvictionLiveMigration",
                false,
            ),
            (
                &["PreemptionEvictionLiveMigration", "NodePressureEvictionLiveMigration"],
                &["NodePressureEvictionLiveMigration"],
                "PreemptionEvictionLiveMigration",
                true,
            ),
            (&["LiveMigration"], &["livemigration"], "LiveMigration", true),
        ];
        for (enabled_gates, disabled, gate, on) in rows {
            let text = serde_json::json!({
                "spec": {"configuration": {"developerConfiguration": {
                    "featureGates": enabled_gates, "disabledFeatureGates": disabled,
                }}},
            })
            .to_string();
            let cr: KubeVirt<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(cr.feature_gate_enabled(gate), *on, "{gate}: on {enabled_gates:?}, off {disabled:?}");
            let config = crate::kubevirt_config::KubeVirtConfig::from(&cr);
            assert_eq!(config.feature_gate_enabled(gate), *on, "config: {gate}");
        }
        let text = r#"{"spec": {"configuration": {"developerConfiguration": {"featureGates": ["LiveMigration"], "disabledFeatureGates": null}}}}"#;
        assert!(serde_json::from_str::<KubeVirt<'_>>(text).unwrap().feature_gate_enabled("LiveMigration"));
    }

    /// `parallelMigrationsPerCluster` and `parallelOutboundMigrationsPerNode`, each with KubeVirt's
    /// default (5 and 2) when unset.
    #[test]
    fn parallel_limits_default_to_kubevirts() {
        let rows = [
            (serde_json::Value::Null, (5, 2)),
            (serde_json::json!({}), (5, 2)),
            (serde_json::json!({"parallelMigrationsPerCluster": 10}), (10, 2)),
            (serde_json::json!({"parallelOutboundMigrationsPerNode": 1}), (5, 1)),
            (
                serde_json::json!({"parallelMigrationsPerCluster": 20, "parallelOutboundMigrationsPerNode": 4}),
                (20, 4),
            ),
        ];
        for (migrations, limits) in rows {
            let text = kubevirt(&[], migrations.clone());
            let cr: KubeVirt<'_> = serde_json::from_str(&text).unwrap();
            assert_eq!(cr.parallel_limits(), limits, "{migrations}");
        }
    }

    #[test]
    fn the_cluster_wide_eviction_strategy() {
        let rows = [
            (r#"{"spec": {"configuration": {}}}"#, None),
            (
                r#"{"spec": {"configuration": {"evictionStrategy": "LiveMigrate"}}}"#,
                Some(EvictionStrategy::LiveMigrate),
            ),
            (r#"{"spec": {"configuration": {"evictionStrategy": "None"}}}"#, Some(EvictionStrategy::None)),
        ];
        for (text, strategy) in rows {
            let cr: KubeVirt<'_> = serde_json::from_str(text).unwrap();
            assert_eq!(cr.eviction_strategy(), strategy.as_ref(), "{text}");
        }
    }
}
