use serde::{Deserialize, Serialize};

use super::{Lazy, RawMap, Str};

/// `metadata` of any Kubernetes object: the fields decisions read. Maps and lists are kept raw
/// and decoded on demand.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta<'a> {
    /// `name`: unique among the kind's objects in the namespace.
    #[serde(borrow)]
    pub name: Str<'a>,
    /// `namespace`: empty for cluster-scoped objects.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub namespace: Str<'a>,
    /// `labels`: what selectors match, e.g. `kubevirt.io: virt-launcher`.
    #[serde(borrow, skip_serializing_if = "RawMap::is_empty")]
    pub labels: RawMap<'a>,
    /// `annotations`: data for tools and controllers, e.g. `kubevirt.io/domain`.
    #[serde(borrow, skip_serializing_if = "RawMap::is_empty")]
    pub annotations: RawMap<'a>,
    /// `ownerReferences`: the objects this one belongs to.
    #[serde(borrow, skip_serializing_if = "Lazy::is_absent")]
    pub owner_references: Lazy<'a, Vec<OwnerReference<'a>>>,
    /// `deletionTimestamp`: set once the object is being deleted (for a pod, when its grace period
    /// ends).
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Str<'a>>,
    /// `deletionGracePeriodSeconds`: the grace period the deletion was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// `creationTimestamp`: when the API server created the object (RFC 3339).
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Str<'a>>,
    /// `uid`: tells apart objects that had the same name at different times.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub uid: Str<'a>,
    /// `resourceVersion`: the version read, a precondition for a write that must not land on a
    /// newer one.
    #[serde(borrow, rename = "resourceVersion", skip_serializing_if = "str::is_empty")]
    pub resource_version: Str<'a>,
}

impl<'a> ObjectMeta<'a> {
    /// The value of the label `key`, if set.
    pub fn label(&self, key: &str) -> Option<Str<'a>> {
        self.labels.get(key)
    }

    /// The value of the annotation `key`, if set.
    pub fn annotation(&self, key: &str) -> Option<Str<'a>> {
        self.annotations.get(key)
    }
}

/// An entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OwnerReference<'a> {
    /// `apiVersion` of the owner, e.g. `kubevirt.io/v1`.
    #[serde(borrow)]
    pub api_version: Str<'a>,
    /// `kind` of the owner, e.g. `VirtualMachineInstance`.
    #[serde(borrow)]
    pub kind: Str<'a>,
    /// `name` of the owner, in the dependent's namespace unless the owner is cluster-scoped.
    #[serde(borrow)]
    pub name: Str<'a>,
    /// `uid` of the owner: an object recreated under the same name is not the owner.
    #[serde(borrow)]
    pub uid: Str<'a>,
    /// `controller`: `true` for the owner that manages the object (a launcher pod's VMI).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
}

/// A status condition, as on pods, nodes and VMIs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Condition<'a> {
    /// `type`, e.g. `Ready`, `LiveMigratable`, `DisruptionTarget`.
    #[serde(rename = "type", borrow)]
    pub type_: Str<'a>,
    /// `status`: `True`, `False` or `Unknown`.
    #[serde(borrow)]
    pub status: Str<'a>,
    /// `reason`: why the condition last changed, in one CamelCase word, e.g. `TerminationByKubelet`.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub reason: Str<'a>,
    /// `message`: the last change in words.
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
