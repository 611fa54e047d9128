//! Context files: a `v1 List` of objects (JSON or YAML, as `kubectl get ... -o yaml` prints it)
//! loaded into a [`MemoryStore`], the cluster `evac eval`, `evac serve --context` and the tests run
//! against. An object not in the file is NotFound; effects change its objects as they would change
//! a cluster's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::{Clock, Kind, MemoryStore, SystemClock};

/// Changes a context store keeps for watchers and change feeds.
const HISTORY: usize = 10_000;

/// Why an object cannot be stored as given ([`MemoryStore::insert`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InsertError {
    /// It names no `apiVersion`.
    #[error("the object has no apiVersion")]
    NoApiVersion,
    /// It names no `kind`.
    #[error("the object has no kind")]
    NoKind,
    /// It has no `metadata.name`.
    #[error("the {kind} has no metadata.name")]
    NoName {
        /// Its kind.
        kind: String,
    },
    /// The store refused it (its message, as an API server words it).
    #[error("{}", .0.message)]
    Refused(crate::ApiError),
}

/// Why a context file cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The file cannot be read.
    #[error("cannot read context file {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is read but is not a list of objects.
    #[error("invalid context file {}: {why}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the item (`items[3]: the object has no apiVersion`).
        why: String,
    },
    /// Text or objects that are not a list of Kubernetes objects; says what is wrong, naming the
    /// item (`items[3]: the object has no apiVersion`).
    #[error("{0}")]
    Malformed(String),
}

/// The objects of a `v1 List` in JSON or YAML (`kubectl get -o yaml`), or why the text is not one.
pub fn list_items(text: &str) -> Result<Vec<Value>, ContextError> {
    let malformed = ContextError::Malformed;
    if text.trim().is_empty() {
        return Err(malformed(
            "the file is empty: expected a v1 List of Kubernetes objects (kind: List, items: [...])".into(),
        ));
    }
    let mut list: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| malformed(format!("not valid JSON: {e}")))?
    } else {
        serde_yaml::from_str(text).map_err(|e| malformed(format!("not valid YAML: {e}")))?
    };
    let kind = list.get("kind").and_then(Value::as_str).unwrap_or("<none>").to_owned();
    match list.get_mut("items").map(Value::take) {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(malformed(format!(
            "expected a v1 List of Kubernetes objects (kind: List, items: [...]), got kind {kind}"
        ))),
    }
}

impl MemoryStore {
    /// A store without objects, stamped by the wall clock: every read is NotFound.
    pub fn empty() -> Self {
        Self::new(Arc::new(SystemClock), HISTORY)
    }

    /// A store with the objects of a context file, stamped by the wall clock.
    pub fn from_file(path: &Path) -> Result<Self, ContextError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ContextError::Read { path: path.to_owned(), source })?;
        Self::from_list(&text)
            .map_err(|e| ContextError::Invalid { path: path.to_owned(), why: e.to_string() })
    }

    /// A store with the objects of a `v1 List` in JSON or YAML, stamped by the wall clock.
    pub fn from_list(text: &str) -> Result<Self, ContextError> {
        Self::from_list_with_clock(text, Arc::new(SystemClock))
    }

    /// A store with the objects of a `v1 List`, stamped by `clock`.
    pub fn from_list_with_clock(text: &str, clock: Arc<dyn Clock>) -> Result<Self, ContextError> {
        Self::from_objects_with_clock(list_items(text)?, clock)
    }

    /// A store with these objects, stamped by the wall clock.
    pub fn from_objects(objects: impl IntoIterator<Item = Value>) -> Result<Self, ContextError> {
        Self::from_objects_with_clock(objects, Arc::new(SystemClock))
    }

    /// A store with these objects (as [`list_items`] reads them), stamped by `clock`.
    pub fn from_objects_with_clock(
        objects: impl IntoIterator<Item = Value>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, ContextError> {
        let store = Self::new(clock, HISTORY);
        for (i, object) in objects.into_iter().enumerate() {
            store.insert(object).map_err(|e| ContextError::Malformed(format!("items[{i}]: {e}")))?;
        }
        Ok(store)
    }

    /// Stores an object as a file or a test gives it, keeping what it says of itself (uid,
    /// timestamps, status) and replacing an object of the same name; it gets the next resource
    /// version, as a restore from a backup would.
    pub fn insert(&self, object: Value) -> Result<(), InsertError> {
        let field = |path: &[&str]| {
            path.iter().try_fold(&object, |v, k| v.get(k)).and_then(Value::as_str).map(str::to_owned)
        };
        let Some(api_version) = field(&["apiVersion"]) else { return Err(InsertError::NoApiVersion) };
        let Some(kind) = field(&["kind"]) else { return Err(InsertError::NoKind) };
        let Some(name) = field(&["metadata", "name"]) else { return Err(InsertError::NoName { kind }) };
        let namespace = field(&["metadata", "namespace"]).unwrap_or_default();
        self.restore(&Kind::new(&api_version, &kind), &namespace, &name, object)
            .map(drop)
            .map_err(InsertError::Refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ListQuery, ObjectSource};
    use evac_core::cluster::List;
    use evac_core::model::Pod;

    const CONTEXT: &str = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: a, namespace: ns1, labels: {app: web}, uid: keep-me}
    spec: {nodeName: node01}
  - apiVersion: v1
    kind: Pod
    metadata: {name: b, namespace: ns2, labels: {app: db}}
    spec: {nodeName: node02}
  - apiVersion: v1
    kind: Node
    metadata: {name: node01}
"#;

    #[test]
    fn serves_objects_and_not_found() {
        let context = MemoryStore::from_list(CONTEXT).unwrap();
        assert_eq!(context.len(), 3);
        let a: Value =
            serde_json::from_slice(&ObjectSource::get(&context, "v1", "Pod", Some("ns1"), "a").unwrap())
                .unwrap();
        assert_eq!(a["metadata"]["uid"], "keep-me", "what the file says of an object is kept");
        assert!(ObjectSource::get(&context, "v1", "Node", None, "node01").is_ok());
        let missing = ObjectSource::get(&context, "v1", "Pod", Some("ns1"), "b").unwrap_err();
        assert_eq!(missing.message, r#"pods "b" not found"#);
        assert!(missing.is_not_found());
    }

    #[test]
    fn lists_with_selectors() {
        let context = MemoryStore::from_list(CONTEXT).unwrap();
        let names = |query: ListQuery<'_>| -> Vec<String> {
            let bytes = ObjectSource::list(&context, "v1", "Pod", &query).unwrap();
            let list: List<Pod<'_>> = serde_json::from_slice(&bytes).unwrap();
            list.items.iter().map(|pod| pod.metadata.name.to_string()).collect()
        };
        assert_eq!(names(ListQuery::default()), ["a", "b"]);
        assert_eq!(names(ListQuery { namespace: Some("ns2"), ..Default::default() }), ["b"]);
        assert_eq!(names(ListQuery { label_selector: Some("app=web"), ..Default::default() }), ["a"]);
        assert_eq!(
            names(ListQuery { field_selector: Some("spec.nodeName=node02"), ..Default::default() }),
            ["b"]
        );
    }

    #[test]
    fn bad_context_files_are_refused_clearly() {
        let err = MemoryStore::from_list("").unwrap_err().to_string();
        assert!(err.contains("the file is empty"), "{err}");
        let err = MemoryStore::from_list(r#"{"kind": "Pod"}"#).unwrap_err().to_string();
        assert!(err.contains("expected a v1 List"), "{err}");
        let err = MemoryStore::from_list(r#"{"kind": "List", "items": [{"kind": "Pod"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("items[0]: the object has no apiVersion"), "{err}");
        let err = MemoryStore::from_list("{ not json").unwrap_err().to_string();
        assert!(err.contains("not valid JSON"), "{err}");
        assert!(MemoryStore::from_list(r#"{"kind": "List", "items": []}"#).unwrap().is_empty());
        let err = MemoryStore::from_file(Path::new("/nonexistent/context.yaml")).unwrap_err().to_string();
        assert!(err.starts_with("cannot read context file /nonexistent/context.yaml"), "{err}");
    }
}
