use serde::{Deserialize, Serialize};

use super::{Lazy, RawMap, Str};

/// `metadata` of any Kubernetes object: the fields decisions read. Maps and lists are kept raw
/// and decoded on demand.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta<'a> {
    #[serde(borrow)]
    pub name: Str<'a>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub namespace: Str<'a>,
    #[serde(borrow, skip_serializing_if = "RawMap::is_empty")]
    pub labels: RawMap<'a>,
    #[serde(borrow, skip_serializing_if = "RawMap::is_empty")]
    pub annotations: RawMap<'a>,
    #[serde(borrow, skip_serializing_if = "Lazy::is_absent")]
    pub owner_references: Lazy<'a, Vec<OwnerReference<'a>>>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Str<'a>>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Str<'a>>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub uid: Str<'a>,
}

impl<'a> ObjectMeta<'a> {
    pub fn label(&self, key: &str) -> Option<Str<'a>> {
        self.labels.get(key)
    }

    pub fn annotation(&self, key: &str) -> Option<Str<'a>> {
        self.annotations.get(key)
    }
}

/// An entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OwnerReference<'a> {
    #[serde(borrow)]
    pub api_version: Str<'a>,
    #[serde(borrow)]
    pub kind: Str<'a>,
    #[serde(borrow)]
    pub name: Str<'a>,
    #[serde(borrow)]
    pub uid: Str<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

/// A status condition, as on pods, nodes and VMIs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition<'a> {
    #[serde(rename = "type", borrow)]
    pub type_: Str<'a>,
    #[serde(borrow)]
    pub status: Str<'a>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub reason: Str<'a>,
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub message: Str<'a>,
}

impl<'a> Condition<'a> {
    /// Whether a condition list has `type` with status `"True"`.
    pub fn is_true(conditions: &[Condition<'_>], type_: &str) -> bool {
        conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
    }

    /// The condition of a type, when it is `True`.
    pub fn find_true<'c>(conditions: &'c [Condition<'a>], type_: &str) -> Option<&'c Condition<'a>> {
        conditions.iter().find(|c| c.type_ == type_ && c.status == "True")
    }
}
