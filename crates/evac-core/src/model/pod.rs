use serde::{Deserialize, Serialize};

use super::{null_as_default, Condition, ObjectMeta};

/// A `v1` Pod.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Pod {
    #[serde(deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "null_as_default")]
    pub spec: PodSpec,
    #[serde(deserialize_with = "null_as_default")]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec {
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub node_name: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatus {
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub phase: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
}

/// The label KubeVirt puts on the pods it creates (`virtv1.AppLabel`).
pub const APP_LABEL: &str = "kubevirt.io";
/// The pod annotation that names the VMI a launcher pod runs (`virtv1.DomainAnnotation`).
pub const DOMAIN_ANNOTATION: &str = "kubevirt.io/domain";

impl Pod {
    /// A `virt-launcher` pod: the pod a VMI runs in.
    pub fn is_virt_launcher(&self) -> bool {
        self.metadata.label(APP_LABEL) == Some("virt-launcher")
    }

    /// A hotplug volume pod, owned by exactly one launcher pod.
    pub fn is_hotplug_volume_pod(&self) -> bool {
        self.metadata.label(APP_LABEL) == Some("hotplug-disk")
            && self.metadata.owner_references.len() == 1
    }

    /// A pod that has finished: phase `Succeeded` or `Failed`.
    pub fn is_completed(&self) -> bool {
        matches!(self.status.phase.as_str(), "Succeeded" | "Failed")
    }

    /// The VMI a launcher pod runs, from its `kubevirt.io/domain` annotation.
    pub fn domain(&self) -> Option<&str> {
        self.metadata.annotation(DOMAIN_ANNOTATION)
    }
}
