use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::null_as_default;

/// `metadata` of any Kubernetes object.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub generate_name: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub namespace: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub uid: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub resource_version: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owner_references: Vec<OwnerReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
}

impl ObjectMeta {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }
}

/// An entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OwnerReference {
    #[serde(deserialize_with = "null_as_default")]
    pub api_version: String,
    #[serde(deserialize_with = "null_as_default")]
    pub kind: String,
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    #[serde(deserialize_with = "null_as_default")]
    pub uid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

/// A status condition, as on pods, nodes and VMIs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition {
    #[serde(rename = "type", deserialize_with = "null_as_default")]
    pub type_: String,
    #[serde(deserialize_with = "null_as_default")]
    pub status: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub reason: String,
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub message: String,
}

impl Condition {
    /// Whether a condition list has `type` with status `"True"`.
    pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
        conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    }
}
