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
    /// The host refused the read: the policy was not granted the host capability
    /// (`hostCapabilities`) or the resource (`contextAwareResources`). A configuration error, which
    /// decisions report rather than treat as a failed read.
    Refused,
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

/// What a refused read asks of the cluster admin, for the messages that report one.
pub const REFUSAL_HINT: &str =
    "grant it in policies.yml: hostCapabilities kubernetes/*, and the resource in contextAwareResources";

/// The most characters of a host's error text that reach a message.
pub const MAX_HOST_ERROR_CHARS: usize = 300;

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

    /// Classifies an error text that crossed the waPC boundary, where only the text survives,
    /// as either host words it:
    /// - a missing object: Kubernetes' NotFound message (`pods "x" not found`, evac) or
    ///   Kubewarden's (`Cannot find v1/Pod named 'x' inside of namespace 'Some("ns")'`,
    ///   policy-evaluator `callback_handler/kubernetes/client.rs` `Client::get_resource`);
    /// - a refusal: `Policy has not been granted access to ...` (both hosts' words, Kubewarden's
    ///   `runtimes/callback.rs` `host_callback`).
    ///
    /// Only the first line is kept, without Kubewarden's `Callback evaluation failure: ` prefix
    /// and at most [`MAX_HOST_ERROR_CHARS`] characters: a host may format its errors with their
    /// causes and a backtrace, which do not belong in a verdict's message.
    pub fn from_message(message: String) -> Self {
        let text = message.lines().next().unwrap_or_default();
        let text = text.strip_prefix("Callback evaluation failure: ").unwrap_or(text);
        // Classified whole, then cut: a long name must not cut off the words that classify it.
        let kind = if text.ends_with(" not found")
            || (text.starts_with("Cannot find ")
                && text.contains(" named '")
                && text.contains("' inside of namespace '"))
        {
            ReadErrorKind::NotFound
        } else if text.starts_with("Policy has not been granted access to ") {
            ReadErrorKind::Refused
        } else {
            ReadErrorKind::Other
        };
        let message = match text.char_indices().nth(MAX_HOST_ERROR_CHARS) {
            Some((end, _)) => format!("{}...", &text[..end]),
            None => text.to_owned(),
        };
        Self { kind, message }
    }

    /// Whether the object does not exist, as opposed to a failed read.
    pub fn is_not_found(&self) -> bool {
        self.kind == ReadErrorKind::NotFound
    }

    /// Whether the host refused the read (a policy not granted what it reads).
    pub fn is_refused(&self) -> bool {
        self.kind == ReadErrorKind::Refused
    }
}

/// A reader that remembers the first read its host refused, so that a decision which answers a
/// failed read in KubeVirt's way (an allow, for a pod it cannot read) can tell a misconfigured
/// policy from an API server error and say so instead.
pub struct RefusalWatch<'c, C: ?Sized> {
    inner: &'c C,
    refused: core::cell::RefCell<Option<ReadError>>,
}

impl<'c, C: ClusterReader + ?Sized> RefusalWatch<'c, C> {
    /// Watches the reads made through `inner`.
    pub fn new(inner: &'c C) -> Self {
        Self { inner, refused: core::cell::RefCell::new(None) }
    }

    /// The first refused read, if any.
    pub fn into_refused(self) -> Option<ReadError> {
        self.refused.into_inner()
    }

    fn note(&self, result: Result<Vec<u8>, ReadError>) -> Result<Vec<u8>, ReadError> {
        if let Err(error) = &result {
            if error.is_refused() {
                self.refused.borrow_mut().get_or_insert_with(|| error.clone());
            }
        }
        result
    }
}

impl<C: ClusterReader + ?Sized> ClusterReader for RefusalWatch<'_, C> {
    fn get_resource(&self, request: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        self.note(self.inner.get_resource(request))
    }

    fn list_resources_all(&self, request: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        self.note(self.inner.list_resources_all(request))
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
    // metrics-server names its resources after what they measure (`metrics.k8s.io`, `nodes`
    // and `pods`), not after their kinds.
    match kind {
        crate::model::NODE_METRICS_KIND => return "nodes".to_owned(),
        "PodMetrics" => return "pods".to_owned(),
        _ => {}
    }
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
    let request = GetResource {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: (!namespace.is_empty()).then(|| namespace.into()),
        disable_cache: false,
    };
    // A missing object reads as Kubernetes' NotFound whichever words the host used, so that one
    // policy gives one message under every host.
    cluster.get_resource(&request).map_err(|error| match error.kind {
        ReadErrorKind::NotFound => ReadError::not_found(api_version, kind, name),
        _ => error,
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
    serde_json::from_str(text)
        .map_err(|e| ReadError::other(format!("cannot decode the {kind}: {}", crate::json_error_text(&e))))
}

/// Decodes the items of a list read with [`fetch_all`].
pub fn decode_list<'a, T: Deserialize<'a>>(raw: &'a [u8], kind: &str) -> Result<Vec<T>, ReadError> {
    let error = |e: &dyn core::fmt::Display| ReadError::other(format!("cannot decode the {kind} list: {e}"));
    let text = crate::json_text(raw).map_err(|e| error(&e))?;
    let list: List<T> = serde_json::from_str(text).map_err(|e| error(&crate::json_error_text(&e)))?;
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
        assert_eq!(resource_for_kind("NodeMetrics"), "nodes");
    }

    #[test]
    fn host_messages_are_classified() {
        assert!(ReadError::from_message(r#"pods "p" not found"#.into()).is_not_found());
        assert!(!ReadError::from_message("connection refused".into()).is_not_found());
    }

    #[test]
    fn host_error_texts_are_classified_in_either_host_s_words() {
        let classify = |text: &str| ReadError::from_message(text.to_owned());
        assert_eq!(classify(r#"pods "web" not found"#).kind, ReadErrorKind::NotFound);
        let kubewarden = r#"Callback evaluation failure: Cannot find v1/Pod named 'web' inside of namespace 'Some("default")'"#;
        assert_eq!(classify(kubewarden).kind, ReadErrorKind::NotFound);
        assert_eq!(
            classify("Cannot find v1/Node named 'n' inside of namespace 'None'").kind,
            ReadErrorKind::NotFound
        );
        let refused = "Policy has not been granted access to the 'kubernetes/get_resource' host capability. The violation has been reported.";
        assert_eq!(classify(refused), ReadError { kind: ReadErrorKind::Refused, message: refused.into() });
        assert_eq!(classify("Cannot find resource v1/Pod").kind, ReadErrorKind::Other);
        // All three parts of Kubewarden's sentence, not any one of them.
        assert_eq!(classify("Cannot find v1/Pod named 'web' anywhere").kind, ReadErrorKind::Other);
        assert_eq!(classify("Cannot find it' inside of namespace 'None'").kind, ReadErrorKind::Other);
        assert_eq!(classify("etcdserver: request timed out").kind, ReadErrorKind::Other);
    }

    #[test]
    fn only_the_first_line_of_a_host_error_is_kept_and_bounded() {
        let error = ReadError::from_message(
            "Callback evaluation failure: boom\n\nCaused by:\n    x\n\nStack backtrace:\n   0: main".into(),
        );
        assert_eq!(error.message, "boom");
        let long = ReadError::from_message("é".repeat(1000));
        assert_eq!(long.message, format!("{}...", "é".repeat(MAX_HOST_ERROR_CHARS)));
        assert_eq!(ReadError::from_message(String::new()).message, "");
        // Classified before it is cut: a long name does not turn a missing object into a failure.
        let name = "v".repeat(400);
        let kubewarden = format!("Cannot find v1/Pod named '{name}' inside of namespace 'Some(\"ns\")'");
        assert_eq!(ReadError::from_message(kubewarden).kind, ReadErrorKind::NotFound);
    }

    struct Answers(Vec<Result<Vec<u8>, ReadError>>);

    impl ClusterReader for Answers {
        fn get_resource(&self, request: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
            let index: usize = request.name.parse().unwrap();
            self.0[index].clone()
        }
        fn list_resources_all(&self, _: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
            self.0[0].clone()
        }
    }

    #[test]
    fn a_refusal_watch_keeps_the_first_refusal_and_passes_every_answer_on() {
        let refusal = |n: u8| ReadError { kind: ReadErrorKind::Refused, message: format!("refused {n}") };
        let answers = Answers(vec![
            Ok(b"{}".to_vec()),
            Err(ReadError::other("timeout")),
            Err(refusal(1)),
            Err(refusal(2)),
        ]);
        let watch = RefusalWatch::new(&answers);
        assert_eq!(fetch(&watch, "v1", "Pod", "ns", "0"), Ok(b"{}".to_vec()));
        assert_eq!(fetch(&watch, "v1", "Pod", "ns", "1"), Err(ReadError::other("timeout")));
        assert_eq!(fetch(&watch, "v1", "Pod", "ns", "2"), Err(refusal(1)));
        assert_eq!(fetch(&watch, "v1", "Pod", "ns", "3"), Err(refusal(2)));
        assert_eq!(watch.into_refused(), Some(refusal(1)));

        let clean = RefusalWatch::new(&answers);
        let _ = fetch_all(&clean, "v1", "Pod");
        assert_eq!(clean.into_refused(), None);
    }

    #[test]
    fn a_missing_object_reads_in_kubernetes_words_whatever_the_host_said() {
        let kubewarden = ReadError::from_message(
            "Cannot find kubevirt.io/v1/VirtualMachineInstance named '0' inside of namespace 'Some(\"ns\")'"
                .into(),
        );
        let answers = Answers(vec![Err(kubewarden)]);
        let error = fetch(&answers, "kubevirt.io/v1", "VirtualMachineInstance", "ns", "0").unwrap_err();
        assert_eq!(error, ReadError::not_found("kubevirt.io/v1", "VirtualMachineInstance", "0"));
        assert_eq!(error.message, r#"virtualmachineinstances.kubevirt.io "0" not found"#);
    }
}
