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
}

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

    pub fn feature_gate_enabled(&self, gate: &str) -> bool {
        self.spec.configuration.developer_configuration.feature_gates.iter().any(|g| g.as_str() == gate)
    }
}
