use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{null_as_default, Str};

/// String-to-string maps: labels and annotations.
pub type StrMap<'a> = BTreeMap<Str<'a>, Str<'a>>;

/// `metadata` of any Kubernetes object.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta<'a> {
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub name: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "str::is_empty")]
    pub generate_name: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "str::is_empty")]
    pub namespace: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "str::is_empty")]
    pub uid: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "str::is_empty")]
    pub resource_version: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: StrMap<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: StrMap<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference<'a>>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Str<'a>>,
}

impl ObjectMeta<'_> {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(Str::as_str)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(Str::as_str)
    }
}

/// An entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OwnerReference<'a> {
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub api_version: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub kind: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub name: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub uid: Str<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

/// A status condition, as on pods, nodes and VMIs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition<'a> {
    #[serde(rename = "type", borrow, deserialize_with = "null_as_default")]
    pub type_: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "str::is_empty")]
    pub reason: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "str::is_empty")]
    pub message: Str<'a>,
}

impl Condition<'_> {
    /// Whether a condition list has `type` with status `"True"`.
    pub fn is_true(conditions: &[Condition<'_>], type_: &str) -> bool {
        conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
    }
}
