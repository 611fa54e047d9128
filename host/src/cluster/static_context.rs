use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::{bail, Context, Result};
use evac_core::eviction::VMI_API_VERSION;
use futures::future::BoxFuture;
use serde_json::Value;

use evac_core::effect::EVACUATION_MIGRATION_PREFIX;

use super::{
    annotations_patch, clear_evacuation_patch, evacuation_migration, evacuation_patch, list_json,
    ClusterWriter, Effect, FieldSelector, LabelSelector, ListQuery, ObjectSource, ReadError,
};

/// A set of objects held in memory, read from a `v1 List` (JSON or YAML): the cluster `evac eval`,
/// `evac serve --context` and the tests run against. An object not in it is NotFound. Effects
/// change its objects as they would change a cluster's (a dry-run effect only checks).
#[derive(Debug, Default)]
pub struct StaticContext {
    objects: RwLock<Objects>,
    /// Names generated so far (for `generateName`).
    generated: std::sync::atomic::AtomicUsize,
}

/// apiVersion -> kind -> objects; nested so that a lookup borrows its keys.
type Objects = HashMap<String, HashMap<String, Namespaces>>;

#[derive(Debug)]
struct Stored {
    json: Arc<[u8]>,
    value: Value,
}

impl StaticContext {
    pub fn empty() -> Self {
        Self::default()
    }

    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read context file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("invalid context file {}", path.display()))
    }

    /// Parses a `v1 List` in JSON or YAML.
    pub fn parse(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            bail!("the file is empty: expected a v1 List of Kubernetes objects (kind: List, items: [...])");
        }
        let list: Value = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).context("not valid JSON")?
        } else {
            serde_yaml::from_str(text).context("not valid YAML")?
        };
        let kind = list.get("kind").and_then(Value::as_str).unwrap_or("<none>");
        let Some(items) = list.get("items").and_then(Value::as_array) else {
            bail!("expected a v1 List of Kubernetes objects (kind: List, items: [...]), got kind {kind}");
        };
        let mut context = Self::default();
        for (i, item) in items.iter().enumerate() {
            context.insert(item.clone()).with_context(|| format!("items[{i}]"))?;
        }
        Ok(context)
    }

    pub fn from_objects(objects: impl IntoIterator<Item = Value>) -> Result<Self> {
        let mut context = Self::default();
        for object in objects {
            context.insert(object)?;
        }
        Ok(context)
    }

    /// Adds (or replaces) an object.
    pub fn insert(&mut self, object: Value) -> Result<()> {
        insert_into(self.objects.get_mut().unwrap_or_else(PoisonError::into_inner), object)
    }

    pub fn len(&self) -> usize {
        let objects = self.read();
        objects.values().flat_map(HashMap::values).flat_map(BTreeMap::values).map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Objects> {
        self.objects.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies a JSON merge patch (RFC 7396) to an object, unless `dry_run`.
    pub fn merge_patch(
        &self,
        (api_version, kind): (&str, &str),
        namespace: &str,
        name: &str,
        patch: &Value,
        dry_run: bool,
    ) -> Result<(), ReadError> {
        let mut objects = self.objects.write().unwrap_or_else(PoisonError::into_inner);
        let stored = objects
            .get_mut(api_version)
            .and_then(|kinds| kinds.get_mut(kind))
            .and_then(|namespaces| namespaces.get_mut(namespace))
            .and_then(|names| names.get_mut(name))
            .ok_or_else(|| ReadError::not_found(api_version, kind, name))?;
        if dry_run {
            return Ok(());
        }
        json_patch::merge(&mut stored.value, patch);
        stored.json = serde_json::to_vec(&stored.value).map_err(|e| ReadError::other(e.to_string()))?.into();
        Ok(())
    }
}

/// Adds (or replaces) an object in a set.
fn insert_into(objects: &mut Objects, object: Value) -> Result<()> {
    let field = |path: &[&str]| {
        path.iter().try_fold(&object, |v, k| v.get(k)).and_then(Value::as_str).map(str::to_owned)
    };
    let Some(api_version) = field(&["apiVersion"]) else { bail!("the object has no apiVersion") };
    let Some(kind) = field(&["kind"]) else { bail!("the object has no kind") };
    let Some(name) = field(&["metadata", "name"]) else { bail!("the {kind} has no metadata.name") };
    let namespace = field(&["metadata", "namespace"]).unwrap_or_default();
    let json: Arc<[u8]> = serde_json::to_vec(&object)?.into();
    objects
        .entry(api_version)
        .or_default()
        .entry(kind)
        .or_default()
        .entry(namespace)
        .or_default()
        .insert(name, Stored { json, value: object });
    Ok(())
}

fn kind<'a>(objects: &'a Objects, api_version: &str, kind: &str) -> Option<&'a Namespaces> {
    objects.get(api_version)?.get(kind)
}

impl ClusterWriter for StaticContext {
    fn apply<'a>(&'a self, effect: &'a Effect) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(std::future::ready(self.apply_now(effect)))
    }
}

impl StaticContext {
    /// Carries out an effect on the objects in memory, as the API server would.
    fn apply_now(&self, effect: &Effect) -> Result<(), String> {
        const VMI: (&str, &str) = (VMI_API_VERSION, "VirtualMachineInstance");
        match effect {
            Effect::MarkForEvacuation { vmi, node, dry_run, source } => self
                .merge_patch(VMI, &vmi.namespace, &vmi.name, &evacuation_patch(node, *source), *dry_run)
                .map_err(|e| e.message),
            Effect::CreateMigration { vmi, node, cause, priority } => {
                let mut migration = evacuation_migration(&vmi.name, node, *cause, *priority);
                // The API server's part: a name from generateName, the namespace, a creation time.
                let name = format!("{}{}", EVACUATION_MIGRATION_PREFIX, self.next_suffix());
                migration["metadata"]["name"] = name.into();
                migration["metadata"]["namespace"] = vmi.namespace.clone().into();
                migration["metadata"]["creationTimestamp"] =
                    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true).into();
                insert_into(&mut self.objects.write().unwrap_or_else(PoisonError::into_inner), migration)
                    .map_err(|e| e.to_string())
            }
            Effect::AnnotatePod { pod, annotations } => self
                .merge_patch(("v1", "Pod"), &pod.namespace, &pod.name, &annotations_patch(annotations), false)
                .map_err(|e| e.message),
            Effect::ClearEvacuation { vmi, node } => {
                let marked = self
                    .get(VMI.0, VMI.1, Some(&vmi.namespace), &vmi.name)
                    .ok()
                    .and_then(|raw| serde_json::from_slice::<Value>(&raw).ok())
                    .is_some_and(|v| {
                        v.pointer("/status/evacuationNodeName").and_then(Value::as_str) == Some(node)
                    });
                if !marked {
                    return Ok(());
                }
                self.merge_patch(VMI, &vmi.namespace, &vmi.name, &clear_evacuation_patch(), false)
                    .map_err(|e| e.message)
            }
        }
    }

    /// A five-letter suffix for generated names, unique within this context.
    fn next_suffix(&self) -> String {
        let n = self.generated.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut suffix = String::new();
        let mut rest = n + 26usize.pow(4);
        for _ in 0..5 {
            suffix.insert(0, char::from(b'a' + (rest % 26) as u8));
            rest /= 26;
        }
        suffix
    }
}

/// namespace ("" when cluster-scoped) -> name -> object.
type Namespaces = BTreeMap<String, BTreeMap<String, Stored>>;

impl ObjectSource for StaticContext {
    fn get(
        &self,
        api_version: &str,
        kind_name: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<[u8]>, ReadError> {
        kind(&self.read(), api_version, kind_name)
            .and_then(|namespaces| namespaces.get(namespace.unwrap_or_default()))
            .and_then(|names| names.get(name))
            .map(|stored| Arc::clone(&stored.json))
            .ok_or_else(|| ReadError::not_found(api_version, kind_name, name))
    }

    fn list(&self, api_version: &str, kind_name: &str, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError> {
        let labels = query.label_selector.map(LabelSelector::parse).transpose().map_err(ReadError::other)?;
        let fields = query.field_selector.map(FieldSelector::parse).transpose().map_err(ReadError::other)?;
        let objects = self.read();
        let items = kind(&objects, api_version, kind_name)
            .into_iter()
            .flat_map(BTreeMap::iter)
            .filter(|(namespace, _)| query.namespace.is_none_or(|n| n == namespace.as_str()))
            .flat_map(|(_, names)| names.values())
            .filter(|stored| labels.as_ref().is_none_or(|s| s.matches_object(&stored.value)))
            .filter(|stored| fields.as_ref().is_none_or(|s| s.matches_object(&stored.value)))
            .map(|stored| &*stored.json);
        Ok(list_json(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONTEXT: &str = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: a, namespace: ns1, labels: {app: web}}
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
        let context = StaticContext::parse(CONTEXT).unwrap();
        assert_eq!(context.len(), 3);
        assert!(context.get("v1", "Pod", Some("ns1"), "a").is_ok());
        assert!(context.get("v1", "Node", None, "node01").is_ok());
        let missing = context.get("v1", "Pod", Some("ns1"), "b").unwrap_err();
        assert_eq!(missing.message, r#"pods "b" not found"#);
        assert!(missing.is_not_found());
    }

    #[test]
    fn lists_with_selectors() {
        let context = StaticContext::parse(CONTEXT).unwrap();
        let names = |query: ListQuery<'_>| -> Vec<String> {
            let list: Value = serde_json::from_slice(&context.list("v1", "Pod", &query).unwrap()).unwrap();
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
                .collect()
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
    fn effects_change_the_objects_unless_dry_run() {
        use evac_core::effect::{EvacuationSource, ObjectRef};
        let context = StaticContext::parse(
            "kind: List\nitems: [{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance, \
             metadata: {name: vm, namespace: ns, annotations: {keep: me}}, status: {nodeName: n1}}]",
        )
        .unwrap();
        let mark = |dry_run, name: &str| Effect::MarkForEvacuation {
            vmi: ObjectRef::new("ns", name),
            node: "n1".into(),
            dry_run,
            source: Some(EvacuationSource::Descheduler),
        };
        let vmi = || -> Value {
            serde_json::from_slice(
                &context.get(VMI_API_VERSION, "VirtualMachineInstance", Some("ns"), "vm").unwrap(),
            )
            .unwrap()
        };
        let block = |effect| futures::executor::block_on(context.apply(&effect));
        block(mark(true, "vm")).unwrap();
        assert_eq!(vmi()["status"].get("evacuationNodeName"), None, "a dry run changes nothing");
        block(mark(false, "vm")).unwrap();
        assert_eq!(vmi()["status"]["evacuationNodeName"], "n1");
        assert_eq!(vmi()["status"]["nodeName"], "n1");
        assert_eq!(vmi()["metadata"]["annotations"]["kubevirt.io/eviction-source"], "descheduler");
        assert_eq!(vmi()["metadata"]["annotations"]["keep"], "me");
        let err = block(mark(false, "gone")).unwrap_err();
        assert_eq!(err, r#"virtualmachineinstances.kubevirt.io "gone" not found"#);
    }

    #[test]
    fn bad_context_files_are_refused_clearly() {
        let err = StaticContext::parse("").unwrap_err().to_string();
        assert!(err.contains("the file is empty"), "{err}");
        let err = StaticContext::parse(r#"{"kind": "Pod"}"#).unwrap_err().to_string();
        assert!(err.contains("expected a v1 List"), "{err}");
        let err = format!(
            "{:#}",
            StaticContext::parse(r#"{"kind": "List", "items": [{"kind": "Pod"}]}"#).unwrap_err()
        );
        assert!(err.contains("items[0]: the object has no apiVersion"), "{err}");
        let err = format!("{:#}", StaticContext::parse("{ not json").unwrap_err());
        assert!(err.contains("not valid JSON"), "{err}");
        assert!(StaticContext::parse(r#"{"kind": "List", "items": []}"#).unwrap().is_empty());
    }
}
