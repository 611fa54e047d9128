use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{null_as_default, Str};

/// What a Kubewarden policy receives for `validate`: the settings and the AdmissionRequest.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "'de: 'a, S: Deserialize<'de> + Default"))]
pub struct ValidationRequest<'a, S> {
    #[serde(default, deserialize_with = "null_as_default")]
    pub settings: S,
    #[serde(borrow)]
    pub request: AdmissionRequest<'a>,
}

/// An `admission.k8s.io/v1` AdmissionRequest.
///
/// `object` and `oldObject` stay raw JSON: a decision parses them only if it gets that far, which is
/// both KubeVirt's order of checks and the cheap path.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdmissionRequest<'a> {
    #[serde(borrow)]
    pub uid: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub kind: GroupVersionKind<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub resource: GroupVersionResource<'a>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub sub_resource: Str<'a>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub name: Str<'a>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub namespace: Str<'a>,
    #[serde(borrow)]
    pub operation: Str<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub object: Option<&'a RawValue>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
}

impl AdmissionRequest<'_> {
    pub fn is_dry_run(&self) -> bool {
        self.dry_run == Some(true)
    }

    /// `object` as JSON text (`null` when absent).
    pub fn object_json(&self) -> &str {
        self.object.map_or("null", RawValue::get)
    }

    /// `resource[/subResource]`, e.g. `pods/eviction`, for messages.
    pub fn resource_path(&self) -> String {
        if self.sub_resource.is_empty() {
            self.resource.resource.to_string()
        } else {
            format!("{}/{}", self.resource.resource, self.sub_resource)
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct GroupVersionKind<'a> {
    #[serde(borrow)]
    pub group: Str<'a>,
    #[serde(borrow)]
    pub version: Str<'a>,
    #[serde(borrow)]
    pub kind: Str<'a>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct GroupVersionResource<'a> {
    #[serde(borrow)]
    pub group: Str<'a>,
    #[serde(borrow)]
    pub version: Str<'a>,
    #[serde(borrow)]
    pub resource: Str<'a>,
}
