//! Reading cluster objects: the requests of Kubewarden's `kubernetes` host capabilities, and the
//! [`ClusterReader`] trait through which decisions make them.

use serde::{Deserialize, Serialize};

use crate::model::Str;

/// `kubewarden/kubernetes/get_resource`: one object by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct GetResource<'a> {
    /// `api_version`: `v1` for the core group, else `<group>/<version>`.
    #[serde(borrow)]
    pub api_version: Str<'a>,
    /// `kind`: the object's kind, e.g. `Pod`.
    #[serde(borrow)]
    pub kind: Str<'a>,
    /// `name`: the name of the object to read.
    #[serde(borrow)]
    pub name: Str<'a>,
    /// Absent or empty for cluster-scoped objects.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Str<'a>>,
    /// `disable_cache`: ask the API server rather than the host's cache of earlier answers.
    #[serde(default)]
    pub disable_cache: bool,
}

/// `kubewarden/kubernetes/list_resources_all`: every object of a kind, in all namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct ListResourcesAll<'a> {
    /// `api_version`: `v1` for the core group, else `<group>/<version>`.
    #[serde(borrow)]
    pub api_version: Str<'a>,
    /// `kind`: the kind to list, e.g. `VirtualMachineInstance`.
    #[serde(borrow)]
    pub kind: Str<'a>,
    /// `label_selector`: only objects whose labels match, e.g. `kubevirt.io/nodeName=node01`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<Str<'a>>,
    /// `field_selector`: only objects whose fields match, e.g. `spec.nodeName=node01`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<Str<'a>>,
}

/// `kubewarden/kubernetes/list_resources_by_namespace`: every object of a kind in one namespace.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct ListResourcesByNamespace<'a> {
    /// `api_version`: `v1` for the core group, else `<group>/<version>`.
    #[serde(borrow)]
    pub api_version: Str<'a>,
    /// `kind`: the kind to list, e.g. `Pod`.
    #[serde(borrow)]
    pub kind: Str<'a>,
    /// `namespace`: the namespace to list; cluster-scoped kinds cannot be listed this way.
    #[serde(borrow)]
    pub namespace: Str<'a>,
    /// `label_selector`: only objects whose labels match, e.g. `kubevirt.io=virt-launcher`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<Str<'a>>,
    /// `field_selector`: only objects whose fields match, e.g. `spec.nodeName=node01`.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub field_selector: Option<Str<'a>>,
}

/// Read access to cluster objects, answering in JSON exactly as Kubewarden's host capabilities do:
/// an object for `get_resource`, a `List` (`{"items": [...]}`) for the list calls.
pub trait ClusterReader {
    /// `get_resource`: one object; a missing one is a [`ReadErrorKind::NotFound`] error.
    fn get_resource(&self, request: &GetResource<'_>) -> Result<Vec<u8>, ReadError>;
    /// `list_resources_all`: every object of a kind that matches the selectors, as a `List`.
    fn list_resources_all(&self, request: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError>;
}

/// What kind of failure a [`ReadError`] is: decisions answer a missing object differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadErrorKind {
    /// The object does not exist (Kubernetes' `NotFound`, HTTP 404).
    NotFound,
    /// Any other failure: the API server or the host did not answer, or the answer did not decode.
    Other,
}

/// Why a read failed. The message is the text the user sees, in Kubernetes' words where the
/// error comes from Kubernetes (e.g. `pods "x" not found`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    /// Whether the object is missing or the read failed.
    pub kind: ReadErrorKind,
    /// The error's text, as the user sees it.
    pub message: String,
}

impl ReadError {
    /// Kubernetes' NotFound error for an object: `<resource>[.<group>] "<name>" not found`.
    pub fn not_found(api_version: &str, kind: &str, name: &str) -> Self {
        let resource = resource_for_kind(kind);
        let message = match api_version.split_once('/') {
            Some((group, _)) => format!("{resource}.{group} \"{name}\" not found"),
            None => format!("{resource} \"{name}\" not found"),
        };
        Self { kind: ReadErrorKind::NotFound, message }
    }

    /// A failure other than NotFound, with `message` as its text.
    pub fn other(message: impl Into<String>) -> Self {
        Self { kind: ReadErrorKind::Other, message: message.into() }
    }

    /// Classifies an error text that crossed the waPC boundary, where only the text survives.
    /// Kubernetes' NotFound message always ends in `not found`.
    pub fn from_message(message: String) -> Self {
        let kind =
            if message.ends_with(" not found") { ReadErrorKind::NotFound } else { ReadErrorKind::Other };
        Self { kind, message }
    }

    /// Whether the object does not exist, as opposed to a failed read.
    pub fn is_not_found(&self) -> bool {
        self.kind == ReadErrorKind::NotFound
    }
}

impl core::fmt::Display for ReadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ReadError {}

/// The plural resource name Kubernetes derives from a kind (`meta.UnsafeGuessKindToResource`).
pub fn resource_for_kind(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// A `List` answer of the list capabilities.
#[derive(Debug, Deserialize)]
#[serde(bound(deserialize = "T: Deserialize<'de>"))]
pub struct List<T> {
    /// `items`: the listed objects; absent reads as none.
    #[serde(default = "Vec::new")]
    pub items: Vec<T>,
}

/// Reads one object as JSON. Decode it with [`decode`]: decoded objects borrow from these bytes.
pub fn fetch<C>(
    cluster: &C,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<Vec<u8>, ReadError>
where
    C: ClusterReader + ?Sized,
{
    cluster.get_resource(&GetResource {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: (!namespace.is_empty()).then(|| namespace.into()),
        disable_cache: false,
    })
}

/// Reads one object as JSON, `Ok(None)` when it does not exist: for decisions where a missing
/// object is an answer, not an error.
pub fn fetch_if_exists<C>(
    cluster: &C,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
) -> Result<Option<Vec<u8>>, ReadError>
where
    C: ClusterReader + ?Sized,
{
    match fetch(cluster, api_version, kind, namespace, name) {
        Ok(raw) => Ok(Some(raw)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Lists every object of a kind as a JSON `List`; decode it with [`decode_list`].
pub fn fetch_all<C>(cluster: &C, api_version: &str, kind: &str) -> Result<Vec<u8>, ReadError>
where
    C: ClusterReader + ?Sized,
{
    cluster.list_resources_all(&ListResourcesAll {
        api_version: api_version.into(),
        kind: kind.into(),
        label_selector: None,
        field_selector: None,
    })
}

/// Decodes an object read with [`fetch`].
pub fn decode<'a, T: Deserialize<'a>>(raw: &'a [u8], kind: &str) -> Result<T, ReadError> {
    let text =
        crate::json_text(raw).map_err(|e| ReadError::other(format!("cannot decode the {kind}: {e}")))?;
    serde_json::from_str(text).map_err(|e| ReadError::other(format!("cannot decode the {kind}: {e}")))
}

/// Decodes the items of a list read with [`fetch_all`].
pub fn decode_list<'a, T: Deserialize<'a>>(raw: &'a [u8], kind: &str) -> Result<Vec<T>, ReadError> {
    let error = |e: &dyn core::fmt::Display| ReadError::other(format!("cannot decode the {kind} list: {e}"));
    let list: List<T> =
        serde_json::from_str(crate::json_text(raw).map_err(|e| error(&e))?).map_err(|e| error(&e))?;
    Ok(list.items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_messages_match_kubernetes() {
        assert_eq!(
            ReadError::not_found("kubevirt.io/v1", "VirtualMachineInstance", "x").message,
            r#"virtualmachineinstances.kubevirt.io "x" not found"#
        );
        assert_eq!(ReadError::not_found("v1", "Pod", "p").message, r#"pods "p" not found"#);
        assert_eq!(
            ReadError::not_found("policy/v1", "PodDisruptionBudget", "b").message,
            r#"poddisruptionbudgets.policy "b" not found"#
        );
        assert_eq!(resource_for_kind("NetworkPolicy"), "networkpolicies");
        assert_eq!(resource_for_kind("Ingress"), "ingresses");
    }

    #[test]
    fn host_messages_are_classified() {
        assert!(ReadError::from_message(r#"pods "p" not found"#.into()).is_not_found());
        assert!(!ReadError::from_message("connection refused".into()).is_not_found());
    }
}
