use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{null_as_default, Str};

/// What a Kubewarden policy receives for `validate`: the settings and the AdmissionRequest.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "'de: 'a, S: Deserialize<'de> + Default"))]
pub struct ValidationRequest<'a, S> {
    /// The policy's settings; absent or `null` reads as their default.
    #[serde(default, deserialize_with = "null_as_default")]
    pub settings: S,
    /// The AdmissionRequest to decide.
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
    /// `uid`: identifies the request; the response echoes it.
    #[serde(borrow)]
    pub uid: Str<'a>,
    /// `kind`: the object's group, version and kind (for `pods/eviction`, `policy/v1` `Eviction`).
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub kind: GroupVersionKind<'a>,
    /// `resource`: the group, version and resource the request addresses, e.g. `v1` `pods`.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub resource: GroupVersionResource<'a>,
    /// `subResource`, e.g. `eviction`; empty for the resource itself.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub sub_resource: Str<'a>,
    /// `name`: the object's name (for `pods/eviction`, the pod's); empty for a CREATE that generates it.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub name: Str<'a>,
    /// `namespace`: the object's namespace; empty for cluster-scoped objects.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub namespace: Str<'a>,
    /// `operation`: `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    #[serde(borrow)]
    pub operation: Str<'a>,
    /// `object`: the object as it will be (for `pods/eviction`, the Eviction); absent for a DELETE.
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub object: Option<&'a RawValue>,
    /// `oldObject`: the object as it was, for UPDATE and DELETE.
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub old_object: Option<&'a RawValue>,
    /// `dryRun`: nothing the request asks for is persisted, so a decision's effects must not be either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// `options`: the operation's options (`CreateOptions`, `DeleteOptions`, ...; for evac's own
    /// hold requests, `HoldOptions`).
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub options: Option<&'a RawValue>,
}

impl AdmissionRequest<'_> {
    /// Whether `dryRun` is `true`; absent reads as false.
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

/// An AdmissionRequest's `kind`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct GroupVersionKind<'a> {
    /// `group`: empty for the core group.
    #[serde(borrow)]
    pub group: Str<'a>,
    /// `version`, e.g. `v1`.
    #[serde(borrow)]
    pub version: Str<'a>,
    /// `kind`, e.g. `Pod`.
    #[serde(borrow)]
    pub kind: Str<'a>,
}

/// An AdmissionRequest's `resource`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct GroupVersionResource<'a> {
    /// `group`: empty for the core group.
    #[serde(borrow)]
    pub group: Str<'a>,
    /// `version`, e.g. `v1`.
    #[serde(borrow)]
    pub version: Str<'a>,
    /// `resource`: the plural name in the API's paths, e.g. `pods`.
    #[serde(borrow)]
    pub resource: Str<'a>,
}

/// Who sends a request: an AdmissionRequest's `userInfo`.
#[derive(Debug, Clone, Copy)]
pub struct UserInfo<'a> {
    /// `username`, e.g. `system:admin`.
    pub username: &'a str,
    /// `groups`, e.g. `system:authenticated`.
    pub groups: &'a [&'a str],
}

/// The AdmissionRequest the API server sends a validating webhook for a `pods/eviction` CREATE of
/// `eviction` on `namespace/pod` (`policy/v1` `Eviction` on `v1` `pods`, subresource `eviction`,
/// with `CreateOptions`), as JSON: the one shape the simulated API server sends and the tests
/// post.
pub fn eviction_admission_request(
    uid: &str,
    namespace: &str,
    pod: &str,
    user: UserInfo<'_>,
    eviction: serde_json::Value,
    dry_run: bool,
) -> serde_json::Value {
    serde_json::json!({
        "uid": uid,
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "requestSubResource": "eviction",
        "name": pod,
        "namespace": namespace,
        "operation": "CREATE",
        "userInfo": {"username": user.username, "groups": user.groups},
        "object": eviction,
        "oldObject": null,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    })
}
