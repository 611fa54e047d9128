//! KubeVirt's `MigrationPolicy` (`migrations.kubevirt.io/v1alpha1`): per-VMI migration settings
//! that override the cluster's, as KubeVirt's migration controller matches and applies them
//! (`pkg/virt-controller/watch/migration/migrationpolicy.go`, `matchPolicy` and
//! `applyMigrationPolicySpec`). evac's estimates of a migration use the settings KubeVirt will
//! run it with.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::estimate::MigrationInputs;
use crate::kubevirt_config::KubeVirtConfig;
use crate::model::{null_as_default, quantity, ObjectMeta, Str};

/// The policies' API version.
pub const MIGRATION_POLICY_API_VERSION: &str = "migrations.kubevirt.io/v1alpha1";
/// The policies' kind.
pub const MIGRATION_POLICY_KIND: &str = "MigrationPolicy";

/// A `MigrationPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct MigrationPolicy<'a> {
    /// `metadata`: its name breaks ties.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `spec`.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: MigrationPolicySpec<'a>,
}

/// A policy's `spec`: which VMIs it applies to, and the settings it overrides (unset: the
/// cluster's).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationPolicySpec<'a> {
    /// `selectors`: a policy without them matches nothing.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub selectors: Option<Selectors<'a>>,
    /// `bandwidthPerMigration`, a quantity of bytes per second.
    #[serde(borrow)]
    pub bandwidth_per_migration: Option<Str<'a>>,
    /// `completionTimeoutPerGiB`, seconds.
    #[serde(rename = "completionTimeoutPerGiB")]
    pub completion_timeout_per_gib: Option<u64>,
    /// `allowPostCopy`.
    pub allow_post_copy: Option<bool>,
    /// `allowWorkloadDisruption`: unset, it follows `allowPostCopy`.
    pub allow_workload_disruption: Option<bool>,
    /// `allowAutoConverge`: QEMU throttles the guest's vCPUs while it dirties memory too fast
    /// ([`crate::estimate::throttled`]).
    pub allow_auto_converge: Option<bool>,
}

/// A policy's `selectors`: label maps every one of whose pairs must match.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Selectors<'a> {
    /// `namespaceSelector`: labels of the VMI's namespace.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub namespace_selector: Option<BTreeMap<Str<'a>, Str<'a>>>,
    /// `virtualMachineInstanceSelector`: labels of the VMI.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub virtual_machine_instance_selector: Option<BTreeMap<Str<'a>, Str<'a>>>,
}

impl Selectors<'_> {
    /// (matching VMI labels, matching namespace labels), or `None` when a pair does not match
    /// (`countMatchingLabels`). As upstream, the namespace selector counts only for a VMI with
    /// labels.
    fn score(
        &self,
        vmi_labels: &BTreeMap<Str<'_>, Str<'_>>,
        namespace_labels: &BTreeMap<Str<'_>, Str<'_>>,
    ) -> Option<(usize, usize)> {
        let count = |selector: &BTreeMap<Str<'_>, Str<'_>>, labels: &BTreeMap<Str<'_>, Str<'_>>| {
            selector
                .iter()
                .all(|(k, v)| labels.get(k.as_str()).is_some_and(|l| l.as_str() == v.as_str()))
                .then_some(selector.len())
        };
        let vmi = match &self.virtual_machine_instance_selector {
            Some(selector) if !vmi_labels.is_empty() => count(selector, vmi_labels)?,
            _ => 0,
        };
        let namespace = match &self.namespace_selector {
            Some(selector) if !vmi_labels.is_empty() => count(selector, namespace_labels)?,
            _ => 0,
        };
        Some((vmi, namespace))
    }
}

/// The policy KubeVirt applies to a VMI (`matchPolicy`): of the matching ones, the one with the
/// most matching labels (VMI and namespace labels together; on a tie, more VMI labels), then the
/// first by name.
pub fn match_policy<'p, 'a>(
    policies: &'p [MigrationPolicy<'a>],
    vmi_labels: &BTreeMap<Str<'_>, Str<'_>>,
    namespace_labels: &BTreeMap<Str<'_>, Str<'_>>,
) -> Option<&'p MigrationPolicy<'a>> {
    policies
        .iter()
        .filter_map(|p| Some((p.spec.selectors.as_ref()?.score(vmi_labels, namespace_labels)?, p)))
        .max_by(|((av, an), a), ((bv, bn), b)| {
            (av + an).cmp(&(bv + bn)).then(av.cmp(bv)).then(b.metadata.name.cmp(&a.metadata.name))
        })
        .map(|(_, p)| p)
}

/// The settings a migration runs with: the cluster's, with the policy's set fields over them
/// (`applyMigrationPolicySpec`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MigrationSettings {
    /// Bytes per second; `None`: unlimited.
    pub bandwidth: Option<f64>,
    /// `completionTimeoutPerGiB`.
    pub completion_timeout_per_gib: u64,
    /// `progressTimeout`.
    pub progress_timeout: u64,
    /// At its completion timeout, the migration is helped to complete (post-copy, or the guest
    /// paused: `allowWorkloadDisruption`) instead of aborted.
    pub assisted: bool,
    /// `allowAutoConverge`.
    pub auto_converge: bool,
}

impl MigrationSettings {
    /// The cluster's settings with `policy` applied.
    pub fn of(config: &KubeVirtConfig, policy: Option<&MigrationPolicy<'_>>) -> Self {
        let mut settings = Self {
            bandwidth: config.bandwidth_per_migration.map(|b| b as f64),
            completion_timeout_per_gib: config.completion_timeout_per_gib,
            progress_timeout: config.progress_timeout,
            assisted: config.allow_workload_disruption,
            auto_converge: config.allow_auto_converge,
        };
        if let Some(spec) = policy.map(|p| &p.spec) {
            if let Some(bandwidth) = spec.bandwidth_per_migration.as_deref().and_then(quantity::bytes) {
                settings.bandwidth = (bandwidth > 0.0).then_some(bandwidth);
            }
            if let Some(timeout) = spec.completion_timeout_per_gib {
                settings.completion_timeout_per_gib = timeout;
            }
            if let Some(assisted) = spec.allow_workload_disruption.or(spec.allow_post_copy) {
                settings.assisted = assisted;
            }
            if let Some(auto_converge) = spec.allow_auto_converge {
                settings.auto_converge = auto_converge;
            }
        }
        settings
    }

    /// The estimate's inputs for a VM of `memory` bytes writing `dirty_rate` bytes per second;
    /// `assumed_bandwidth` stands for an unlimited one.
    pub fn inputs(&self, memory: f64, dirty_rate: f64, assumed_bandwidth: f64) -> MigrationInputs {
        MigrationInputs {
            memory,
            dirty_rate,
            bandwidth: self.bandwidth.unwrap_or(assumed_bandwidth),
            completion_timeout_per_gib: self.completion_timeout_per_gib,
            progress_timeout: self.progress_timeout,
            assisted: self.assisted,
            auto_converge: self.auto_converge,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policies(json: serde_json::Value) -> Vec<MigrationPolicy<'static>> {
        let text: &'static str = Box::leak(json.to_string().into_boxed_str());
        serde_json::from_str(text).unwrap()
    }

    fn labels(pairs: &[(&'static str, &'static str)]) -> BTreeMap<Str<'static>, Str<'static>> {
        pairs.iter().map(|(k, v)| (Str((*k).into()), Str((*v).into()))).collect()
    }

    fn matched(
        all: &[MigrationPolicy<'_>],
        vmi: &[(&'static str, &'static str)],
        ns: &[(&'static str, &'static str)],
    ) -> Option<String> {
        match_policy(all, &labels(vmi), &labels(ns)).map(|p| p.metadata.name.to_string())
    }

    /// The most detailed match wins; VMI labels break a tie in totals; then the name.
    #[test]
    fn the_most_detailed_policy_matches() {
        let all = policies(serde_json::json!([
            {"metadata": {"name": "none"}, "spec": {}},
            {"metadata": {"name": "b-any"}, "spec": {"selectors": {}}},
            {"metadata": {"name": "a-any"}, "spec": {"selectors": {}}},
            {"metadata": {"name": "tier"}, "spec": {"selectors": {"virtualMachineInstanceSelector": {"tier": "bulk"}}}},
            {"metadata": {"name": "team"}, "spec": {"selectors": {"namespaceSelector": {"team": "x"}}}},
            {"metadata": {"name": "both"}, "spec": {"selectors": {
                "virtualMachineInstanceSelector": {"tier": "bulk"}, "namespaceSelector": {"team": "x"}}}},
        ]));
        assert_eq!(matched(&all, &[("tier", "bulk")], &[("team", "x")]).as_deref(), Some("both"));
        assert_eq!(matched(&all, &[("tier", "bulk")], &[]).as_deref(), Some("tier"));
        assert_eq!(matched(&all, &[("app", "a")], &[("team", "x")]).as_deref(), Some("team"));
        assert_eq!(matched(&all, &[("app", "a")], &[]).as_deref(), Some("a-any"));
        // A VMI without labels: the namespace selector does not count (as upstream).
        assert_eq!(matched(&all, &[], &[("team", "x")]).as_deref(), Some("a-any"));
        // A tie in totals goes to VMI labels.
        let tie = policies(serde_json::json!([
            {"metadata": {"name": "a"}, "spec": {"selectors": {"namespaceSelector": {"team": "x"}}}},
            {"metadata": {"name": "z"}, "spec": {"selectors": {"virtualMachineInstanceSelector": {"tier": "bulk"}}}},
        ]));
        assert_eq!(matched(&tie, &[("tier", "bulk")], &[("team", "x")]).as_deref(), Some("z"));
        assert_eq!(matched(&[], &[("tier", "bulk")], &[]), None);
    }

    #[test]
    fn a_policy_overrides_only_what_it_sets() {
        let config = KubeVirtConfig { bandwidth_per_migration: Some(64 << 20), ..KubeVirtConfig::default() };
        let all = policies(serde_json::json!([
            {"metadata": {"name": "slow"}, "spec": {"bandwidthPerMigration": "16Mi", "completionTimeoutPerGiB": 300}},
            {"metadata": {"name": "post"}, "spec": {"allowPostCopy": true}},
            {"metadata": {"name": "paused"}, "spec": {"allowPostCopy": true, "allowWorkloadDisruption": false}},
            {"metadata": {"name": "converge"}, "spec": {"allowAutoConverge": true}},
        ]));
        let base = MigrationSettings::of(&config, None);
        assert_eq!(
            base,
            MigrationSettings {
                bandwidth: Some(64.0 * 1048576.0),
                completion_timeout_per_gib: 150,
                progress_timeout: 150,
                assisted: false,
                auto_converge: false
            }
        );
        let slow = MigrationSettings::of(&config, Some(&all[0]));
        assert_eq!(
            (slow.bandwidth, slow.completion_timeout_per_gib, slow.assisted),
            (Some(16.0 * 1048576.0), 300, false)
        );
        assert!(MigrationSettings::of(&config, Some(&all[1])).assisted);
        assert!(!MigrationSettings::of(&config, Some(&all[2])).assisted);
        assert!(MigrationSettings::of(&config, Some(&all[3])).auto_converge);
        assert!(!base.auto_converge);
    }
}
