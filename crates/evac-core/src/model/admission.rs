use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::null_as_default;

/// What a Kubewarden policy receives for `validate`: the settings and the AdmissionRequest.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "S: Deserialize<'de> + Default"))]
pub struct ValidationRequest<S> {
    #[serde(default, deserialize_with = "null_as_default")]
    pub settings: S,
    pub request: AdmissionRequest,
}

/// An `admission.k8s.io/v1` AdmissionRequest.
///
/// `object` and `oldObject` stay raw JSON: a decision parses them only if it gets that far, which is
/// both KubeVirt's order of checks and the cheap path.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdmissionRequest {
    #[serde(deserialize_with = "null_as_default")]
    pub uid: String,
    #[serde(deserialize_with = "null_as_default")]
    pub kind: GroupVersionKind,
    #[serde(deserialize_with = "null_as_default")]
    pub resource: GroupVersionResource,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub sub_resource: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub namespace: String,
    #[serde(deserialize_with = "null_as_default")]
    pub operation: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_object: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
}

impl AdmissionRequest {
    pub fn is_dry_run(&self) -> bool {
        self.dry_run == Some(true)
    }

    /// `object` as JSON text (`null` when absent).
    pub fn object_json(&self) -> &str {
        self.object.as_deref().map_or("null", RawValue::get)
    }

    /// `resource[/subResource]`, e.g. `pods/eviction`, for messages.
    pub fn resource_path(&self) -> String {
        if self.sub_resource.is_empty() {
            self.resource.resource.clone()
        } else {
            format!("{}/{}", self.resource.resource, self.sub_resource)
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct GroupVersionKind {
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub kind: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct GroupVersionResource {
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub resource: String,
}
