//! [`TestCluster`]: the one in-memory [`ClusterReader`] of evac's tests.

use std::cell::RefCell;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use evac_core::cluster::{ClusterReader, GetResource, ListResourcesAll, ReadError};
use evac_core::effect::{
    CAUSE_ANNOTATION, EVACUATION_MIGRATION_ANNOTATION, EVACUATION_MIGRATION_PREFIX,
    EVACUATION_REQUEST_ANNOTATION, EVICTION_SOURCE_ANNOTATION,
};
use evac_core::kubevirt::{MIGRATION_KIND, POD_KIND, VMI_KIND};
use evac_core::{Effect, ObjectRef};

/// Reads that fail, with `message` as the error's text (a failure other than NotFound). A field
/// left unset matches every read: [`ReadFailure::kind`] alone fails every read of a kind, gets and
/// lists; [`ReadFailure::name`] alone fails the gets of objects of that name, whatever their kind;
/// neither fails every read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadFailure {
    /// The kind whose reads fail, e.g. `VirtualMachineInstance`; unset: any kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The name of the objects whose gets fail; unset: any object, and lists too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The error's text, as the decision sees it (e.g. `etcdserver: request timed out`).
    pub message: String,
}

impl ReadFailure {
    /// Every read of `kind` fails with `message`.
    pub fn of_kind(kind: &str, message: &str) -> Self {
        Self { kind: Some(kind.into()), name: None, message: message.into() }
    }

    /// Every get of an object named `name` fails with `message`.
    pub fn of_object(name: &str, message: &str) -> Self {
        Self { kind: None, name: Some(name.into()), message: message.into() }
    }

    /// Every read fails with `message`: the API server is unreachable.
    pub fn of_every_read(message: &str) -> Self {
        Self { kind: None, name: None, message: message.into() }
    }

    /// Whether a read of `kind` fails: a get names its object (`Some(name)`), a list does not.
    pub fn matches(&self, kind: &str, name: Option<&str>) -> bool {
        self.kind.as_deref().is_none_or(|k| k == kind) && self.name.as_deref().is_none_or(|n| name == Some(n))
    }
}

/// An in-memory cluster of JSON objects, read as Kubewarden's host capabilities answer: an object
/// (or Kubernetes' NotFound, [`ReadError::not_found`]) for a get, a `v1 List` for a list.
///
/// - Objects match a read by `apiVersion`, `kind`, namespace (none for cluster-scoped objects)
///   and name, as the API server (and evac's `MemoryStore`) serves them.
/// - Lists honour label selectors of `key=value` terms and field selectors of `a.b=value` terms
///   (comma-separated, all must hold; a missing field reads as empty), and are sorted by
///   namespace, then name, as the API server lists them.
/// - Reads fail as [`ReadFailure`]s say.
/// - Every read is logged, failed or not, in one format: `get Pod default/web-0` (`get Node
///   node01` for a cluster-scoped object), `list KubeVirt`, `list VirtualMachineInstance
///   kubevirt.io/nodeName=node01` (the label selector, then the field selector, each when set).
/// - [`TestCluster::apply`] carries out effects as a host would.
#[derive(Debug, Clone, Default)]
pub struct TestCluster {
    objects: Vec<Value>,
    failures: Vec<ReadFailure>,
    reads: RefCell<Vec<String>>,
    created: usize,
}

impl TestCluster {
    /// A cluster of these objects.
    pub fn new(objects: impl IntoIterator<Item = Value>) -> Self {
        Self { objects: objects.into_iter().collect(), ..Self::default() }
    }

    /// The cluster of a table case: its objects, failing the reads it says.
    pub fn for_case(case: &super::Case) -> Self {
        Self { failures: case.failures.clone(), ..Self::new(case.objects.iter().cloned()) }
    }

    /// This cluster with one more object.
    pub fn with(mut self, object: Value) -> Self {
        self.objects.push(object);
        self
    }

    /// This cluster with the reads `failure` names failing.
    pub fn with_failure(mut self, failure: ReadFailure) -> Self {
        self.failures.push(failure);
        self
    }

    /// Reads of `kind` fail with `message` ([`ReadFailure::of_kind`]).
    pub fn failing(self, kind: &str, message: &str) -> Self {
        self.with_failure(ReadFailure::of_kind(kind, message))
    }

    /// Gets of the objects named `name` fail with `message` ([`ReadFailure::of_object`]).
    pub fn failing_object(self, name: &str, message: &str) -> Self {
        self.with_failure(ReadFailure::of_object(name, message))
    }

    /// Every read fails with `message` ([`ReadFailure::of_every_read`]).
    pub fn failing_every_read(self, message: &str) -> Self {
        self.with_failure(ReadFailure::of_every_read(message))
    }

    /// The objects, in the order they were given.
    pub fn objects(&self) -> &[Value] {
        &self.objects
    }

    /// The objects, to change in place.
    pub fn objects_mut(&mut self) -> &mut Vec<Value> {
        &mut self.objects
    }

    /// The object `kind` `namespace/name` (namespace empty for a cluster-scoped object), any
    /// `apiVersion`.
    pub fn object(&self, kind: &str, namespace: &str, name: &str) -> Option<&Value> {
        self.objects.iter().find(|o| is(o, None, kind, namespace, name))
    }

    /// The reads made so far, in order, in the format of the type's documentation.
    pub fn reads(&self) -> Vec<String> {
        self.reads.borrow().clone()
    }

    /// The reads made so far, forgetting them: the next call returns only later reads.
    pub fn take_reads(&self) -> Vec<String> {
        self.reads.take()
    }

    /// Carries out effects as a host would (evac's effect executor):
    ///
    /// - `MarkForEvacuation` sets the VMI's `status.evacuationNodeName` and its
    ///   `kubevirt.io/eviction-source` annotation to the source, or removes it for none, and
    ///   removes an evacuation request; a dry-run mark changes nothing.
    /// - `RequestEvacuation` sets the request and eviction-source annotations.
    /// - `AnnotateMigration` sets the migration's cause annotation.
    /// - `CreateMigration` creates a `VirtualMachineInstanceMigration` as KubeVirt's evacuation
    ///   controller does, named `kubevirt-evacuation-<n>` (n counts the migrations created), with
    ///   the evacuation annotation, the cause annotation when there is a cause, and the priority;
    ///   it has no status yet.
    /// - `AnnotatePod` sets and removes the pod's annotations.
    /// - `CancelMigration` deletes the migration while its `resourceVersion` is the effect's (a
    ///   migration without one matches an empty version).
    /// - `ClearEvacuation` removes the VMI's mark and its request, each only while it names the
    ///   effect's node, and then the eviction source (a missing VMI, or a mark for another node,
    ///   is left alone).
    /// - `RecordEvent` changes nothing the decisions read.
    ///
    /// # Panics
    ///
    /// When a mark or an annotation names an object the cluster does not have (the host's write
    /// would fail with NotFound).
    pub fn apply(&mut self, effects: &[Effect]) {
        for effect in effects {
            match effect {
                Effect::MarkForEvacuation { vmi, node, dry_run, source } => {
                    if *dry_run {
                        continue;
                    }
                    let object = self.find_mut(VMI_KIND, vmi, effect);
                    object["status"] = merged(&object["status"], json!({"evacuationNodeName": node}));
                    let annotations = &object["metadata"]["annotations"];
                    object["metadata"]["annotations"] = merged(
                        annotations,
                        json!({EVICTION_SOURCE_ANNOTATION: source.map(|s| s.as_str()), EVACUATION_REQUEST_ANNOTATION: null}),
                    );
                }
                Effect::RequestEvacuation { vmi, node, source } => {
                    let object = self.find_mut(VMI_KIND, vmi, effect);
                    let annotations = &object["metadata"]["annotations"];
                    object["metadata"]["annotations"] = merged(
                        annotations,
                        json!({EVACUATION_REQUEST_ANNOTATION: node, EVICTION_SOURCE_ANNOTATION: source.as_str()}),
                    );
                }
                Effect::AnnotateMigration { migration, cause } => {
                    let object = self.find_mut(MIGRATION_KIND, migration, effect);
                    let annotations = &object["metadata"]["annotations"];
                    object["metadata"]["annotations"] =
                        merged(annotations, json!({CAUSE_ANNOTATION: cause.as_str()}));
                }
                Effect::CreateMigration { vmi, node, cause, priority } => {
                    self.created += 1;
                    let mut annotations = json!({EVACUATION_MIGRATION_ANNOTATION: node});
                    if let Some(cause) = cause {
                        annotations[CAUSE_ANNOTATION] = json!(cause.as_str());
                    }
                    let mut migration = json!({
                        "apiVersion": MIGRATION_KIND.0, "kind": MIGRATION_KIND.1,
                        "metadata": {
                            "name": format!("{EVACUATION_MIGRATION_PREFIX}{}", self.created),
                            "generateName": EVACUATION_MIGRATION_PREFIX,
                            "namespace": vmi.namespace,
                            "annotations": annotations,
                        },
                        "spec": {"vmiName": vmi.name},
                    });
                    if let Some(priority) = priority {
                        migration["spec"]["priority"] = json!(priority.as_str());
                    }
                    self.objects.push(migration);
                }
                Effect::AnnotatePod { pod, annotations } => {
                    let object = self.find_mut(POD_KIND, pod, effect);
                    let mut map = object["metadata"]["annotations"].as_object().cloned().unwrap_or_default();
                    for (key, value) in annotations {
                        match value {
                            Some(value) => map.insert(key.clone(), json!(value)),
                            None => map.remove(key),
                        };
                    }
                    object["metadata"]["annotations"] = Value::Object(map);
                }
                Effect::ClearEvacuation { vmi, node } => {
                    let Some(object) = self.position(VMI_KIND, vmi).map(|i| &mut self.objects[i]) else {
                        continue;
                    };
                    let marked = object["status"]["evacuationNodeName"] == node.as_str();
                    let requested =
                        object["metadata"]["annotations"][EVACUATION_REQUEST_ANNOTATION] == node.as_str();
                    if marked {
                        if let Some(status) = object["status"].as_object_mut() {
                            status.remove("evacuationNodeName");
                        }
                    }
                    if let Some(annotations) = object["metadata"]["annotations"].as_object_mut() {
                        if requested {
                            annotations.remove(EVACUATION_REQUEST_ANNOTATION);
                        }
                        if marked || requested {
                            annotations.remove(EVICTION_SOURCE_ANNOTATION);
                        }
                    }
                }
                Effect::CancelMigration { migration, resource_version, .. } => {
                    if let Some(i) = self.position(MIGRATION_KIND, migration) {
                        let stored = self.objects[i]["metadata"]["resourceVersion"].as_str().unwrap_or("");
                        if stored == resource_version {
                            self.objects.remove(i);
                        }
                    }
                }
                Effect::RecordEvent { .. } => {}
            }
        }
    }

    fn position(&self, (api_version, kind): (&str, &str), object: &ObjectRef) -> Option<usize> {
        self.objects.iter().position(|o| is(o, Some(api_version), kind, &object.namespace, &object.name))
    }

    fn find_mut(&mut self, kind: (&str, &str), object: &ObjectRef, effect: &Effect) -> &mut Value {
        match self.position(kind, object) {
            Some(i) => &mut self.objects[i],
            None => panic!("cannot apply {effect:?}: there is no {} {object}", kind.1),
        }
    }

    fn log(&self, read: String) {
        self.reads.borrow_mut().push(read);
    }

    fn fail(&self, kind: &str, name: Option<&str>) -> Result<(), ReadError> {
        match self.failures.iter().find(|f| f.matches(kind, name)) {
            // Classified as a host's error text is: a failure may be a refusal or a NotFound.
            Some(failure) => Err(ReadError::from_message(failure.message.clone())),
            None => Ok(()),
        }
    }
}

/// Whether `object` is `kind` `namespace/name` (of `api_version`, when given).
fn is(object: &Value, api_version: Option<&str>, kind: &str, namespace: &str, name: &str) -> bool {
    api_version.is_none_or(|v| object["apiVersion"] == v)
        && object["kind"] == kind
        && object["metadata"]["namespace"].as_str().unwrap_or("") == namespace
        && object["metadata"]["name"] == name
}

/// `patch` merged into `value` (an object, or nothing yet).
/// `value` with the top-level fields of `patch` merged in, as a merge patch: `null` removes.
fn merged(value: &Value, patch: Value) -> Value {
    let mut map = value.as_object().cloned().unwrap_or_default();
    if let Value::Object(patch) = patch {
        for (key, new) in patch {
            if new.is_null() {
                map.remove(&key);
            } else {
                map.insert(key, new);
            }
        }
    }
    Value::Object(map)
}

/// The terms of a selector, `key=value` each.
fn terms(selector: &str) -> impl Iterator<Item = (&str, &str)> + '_ {
    selector.split(',').filter(|term| !term.trim().is_empty()).map(|term| match term.split_once('=') {
        Some((key, value)) if !key.ends_with('!') && !value.starts_with('=') => (key.trim(), value.trim()),
        _ => panic!("TestCluster understands `key=value` selector terms only, not {term:?}"),
    })
}

fn selected(object: &Value, labels: Option<&str>, fields: Option<&str>) -> bool {
    let labels_match = labels.is_none_or(|selector| {
        terms(selector).all(|(key, value)| object["metadata"]["labels"][key] == value)
    });
    let fields_match = fields.is_none_or(|selector| {
        terms(selector).all(|(path, value)| {
            let field = match object.pointer(&format!("/{}", path.replace('.', "/"))) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            field == value
        })
    });
    labels_match && fields_match
}

impl ClusterReader for TestCluster {
    fn get_resource(&self, r: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        let namespace = r.namespace.as_deref().unwrap_or("");
        self.log(match namespace {
            "" => format!("get {} {}", r.kind, r.name),
            namespace => format!("get {} {namespace}/{}", r.kind, r.name),
        });
        self.fail(&r.kind, Some(&r.name))?;
        self.objects
            .iter()
            .find(|o| is(o, Some(&r.api_version), &r.kind, namespace, &r.name))
            .map(|o| serde_json::to_vec(o).expect("JSON"))
            .ok_or_else(|| ReadError::not_found(&r.api_version, &r.kind, &r.name))
    }

    fn list_resources_all(&self, r: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        let (labels, fields) = (r.label_selector.as_deref(), r.field_selector.as_deref());
        let selectors = [labels, fields].into_iter().flatten().filter(|s| !s.is_empty());
        self.log(selectors.fold(format!("list {}", r.kind), |read, s| format!("{read} {s}")));
        self.fail(&r.kind, None)?;
        let mut items: Vec<&Value> = self
            .objects
            .iter()
            .filter(|o| o["apiVersion"] == r.api_version.as_str() && o["kind"] == r.kind.as_str())
            .filter(|o| selected(o, labels, fields))
            .collect();
        let key = |o: &Value| {
            let field = |f: &str| o["metadata"][f].as_str().unwrap_or("").to_owned();
            (field("namespace"), field("name"))
        };
        items.sort_by_key(|o| key(o));
        Ok(serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items})).expect("JSON"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use evac_core::effect::{EvacuationSource, MigrationCause, MigrationPriority};

    fn pod(namespace: &str, name: &str, labels: Value, node: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": namespace, "labels": labels},
               "spec": {"nodeName": node}})
    }

    fn get(
        cluster: &TestCluster,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ReadError> {
        evac_core::cluster::fetch(cluster, api_version, kind, namespace, name)
            .map(|raw| serde_json::from_slice(&raw).unwrap())
    }

    fn list(cluster: &TestCluster, kind: &str, labels: Option<&str>, fields: Option<&str>) -> Vec<String> {
        let raw = cluster
            .list_resources_all(&ListResourcesAll {
                api_version: "v1".into(),
                kind: kind.into(),
                label_selector: labels.map(Into::into),
                field_selector: fields.map(Into::into),
            })
            .unwrap();
        let list: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(list["kind"], "List");
        let items = list["items"].as_array().unwrap();
        items
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["metadata"]["namespace"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn gets_match_version_kind_namespace_and_name() {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node01"}});
        let cluster = TestCluster::new([pod("default", "web", json!({}), "node01"), node.clone()]);
        assert_eq!(get(&cluster, "v1", "Node", "", "node01").unwrap(), node);
        assert!(get(&cluster, "v1", "Pod", "default", "web").is_ok());
        let missing =
            [("v1", "Pod", "other", "web"), ("v1", "Pod", "default", "db"), ("v2", "Pod", "default", "web")];
        for (api_version, kind, namespace, name) in missing {
            let error = get(&cluster, api_version, kind, namespace, name).unwrap_err();
            assert_eq!(error, ReadError::not_found(api_version, kind, name));
        }
        assert_eq!(
            cluster.take_reads(),
            [
                "get Node node01",
                "get Pod default/web",
                "get Pod other/web",
                "get Pod default/db",
                "get Pod default/web"
            ]
        );
        assert!(cluster.reads().is_empty());
    }

    #[test]
    fn lists_select_and_sort() {
        let cluster = TestCluster::new([
            pod("b", "x", json!({"app": "web", "tier": "front"}), "node01"),
            pod("a", "y", json!({"app": "web"}), "node02"),
            pod("a", "x", json!({"app": "db"}), "node01"),
        ]);
        assert_eq!(list(&cluster, "Pod", None, None), ["a/x", "a/y", "b/x"]);
        assert_eq!(list(&cluster, "Pod", Some("app=web"), None), ["a/y", "b/x"]);
        assert_eq!(list(&cluster, "Pod", Some("app=web,tier=front"), None), ["b/x"]);
        assert_eq!(list(&cluster, "Pod", None, Some("spec.nodeName=node01")), ["a/x", "b/x"]);
        assert_eq!(
            list(&cluster, "Pod", Some("app=web"), Some("spec.nodeName=node01,metadata.namespace=b")),
            ["b/x"]
        );
        assert_eq!(list(&cluster, "Pod", None, Some("spec.nodeName=")), Vec::<String>::new());
        assert_eq!(list(&cluster, "Node", None, None), Vec::<String>::new());
        assert_eq!(
            cluster.reads(),
            [
                "list Pod",
                "list Pod app=web",
                "list Pod app=web,tier=front",
                "list Pod spec.nodeName=node01",
                "list Pod app=web spec.nodeName=node01,metadata.namespace=b",
                "list Pod spec.nodeName=",
                "list Node",
            ]
        );
    }

    #[test]
    fn reads_fail_by_kind_by_name_or_all() {
        let cluster = || {
            TestCluster::new([pod("default", "web", json!({}), "n"), pod("default", "db", json!({}), "n")])
        };
        let failing = cluster().failing("Pod", "connection refused");
        assert_eq!(get(&failing, "v1", "Pod", "default", "web"), Err(ReadError::other("connection refused")));
        assert!(failing
            .list_resources_all(&ListResourcesAll {
                api_version: "v1".into(),
                kind: "Pod".into(),
                label_selector: None,
                field_selector: None
            })
            .is_err());
        assert_eq!(failing.reads(), ["get Pod default/web", "list Pod"]);

        let failing = cluster().failing_object("web", "timeout");
        assert_eq!(get(&failing, "v1", "Pod", "default", "web"), Err(ReadError::other("timeout")));
        assert!(get(&failing, "v1", "Pod", "default", "db").is_ok());
        assert_eq!(list(&failing, "Pod", None, None).len(), 2);

        let failing = cluster().failing_every_read("unreachable");
        assert_eq!(get(&failing, "v1", "Node", "", "n"), Err(ReadError::other("unreachable")));

        assert!(ReadFailure::of_kind("Pod", "x").matches("Pod", None));
        assert!(!ReadFailure::of_object("web", "x").matches("Pod", None));
        let both = ReadFailure { kind: Some("Pod".into()), name: Some("web".into()), message: "x".into() };
        assert!(both.matches("Pod", Some("web")) && !both.matches("Node", Some("web")));
    }

    #[test]
    fn effects_are_carried_out_as_a_host_would() {
        let vmi = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                         "metadata": {"name": "vm", "namespace": "default"}, "status": {"phase": "Running"}});
        let mut cluster = TestCluster::new([vmi, pod("default", "launcher", json!({}), "n1")]);
        let vm = ObjectRef::new("default", "vm");
        let mark = |dry_run, source| Effect::MarkForEvacuation {
            vmi: vm.clone(),
            node: "n1".into(),
            dry_run,
            source,
        };
        cluster.apply(&[mark(true, Some(EvacuationSource::Descheduler))]);
        assert_eq!(
            cluster.object("VirtualMachineInstance", "default", "vm").unwrap()["status"],
            json!({"phase": "Running"})
        );
        cluster.apply(&[mark(false, Some(EvacuationSource::Descheduler))]);
        let marked = cluster.object("VirtualMachineInstance", "default", "vm").unwrap();
        assert_eq!(marked["status"]["evacuationNodeName"], "n1");
        assert_eq!(marked["metadata"]["annotations"][EVICTION_SOURCE_ANNOTATION], "descheduler");

        // A clear for another node leaves the mark; one for its node removes it and the source.
        cluster.apply(&[Effect::ClearEvacuation { vmi: vm.clone(), node: "n2".into() }]);
        assert_eq!(
            cluster.object("VirtualMachineInstance", "default", "vm").unwrap()["status"]
                ["evacuationNodeName"],
            "n1"
        );
        cluster.apply(&[
            Effect::ClearEvacuation { vmi: vm.clone(), node: "n1".into() },
            Effect::ClearEvacuation { vmi: ObjectRef::new("default", "gone"), node: "n1".into() },
        ]);
        let cleared = cluster.object("VirtualMachineInstance", "default", "vm").unwrap();
        assert_eq!(
            (&cleared["status"], &cleared["metadata"]["annotations"]),
            (&json!({"phase": "Running"}), &json!({}))
        );

        cluster.apply(&[
            Effect::CreateMigration {
                vmi: vm.clone(),
                node: "n1".into(),
                cause: Some(MigrationCause::Drain),
                priority: None,
            },
            Effect::CreateMigration {
                vmi: vm.clone(),
                node: "n1".into(),
                cause: None,
                priority: Some(MigrationPriority::SystemMaintenance),
            },
        ]);
        let first =
            cluster.object("VirtualMachineInstanceMigration", "default", "kubevirt-evacuation-1").unwrap();
        assert_eq!(
            first["metadata"]["annotations"],
            json!({EVACUATION_MIGRATION_ANNOTATION: "n1", CAUSE_ANNOTATION: "drain"})
        );
        assert_eq!(first["spec"], json!({"vmiName": "vm"}));
        let second =
            cluster.object("VirtualMachineInstanceMigration", "default", "kubevirt-evacuation-2").unwrap();
        assert_eq!(second["metadata"]["annotations"], json!({EVACUATION_MIGRATION_ANNOTATION: "n1"}));
        assert_eq!(second["spec"], json!({"vmiName": "vm", "priority": "system-maintenance"}));

        let annotate = |annotations: &[(&str, Option<&str>)]| Effect::AnnotatePod {
            pod: ObjectRef::new("default", "launcher"),
            annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.map(str::to_owned))).collect(),
        };
        cluster.apply(&[annotate(&[("a", Some("1")), ("b", Some(""))]), annotate(&[("a", None)])]);
        assert_eq!(
            cluster.object("Pod", "default", "launcher").unwrap()["metadata"]["annotations"],
            json!({"b": ""})
        );
    }

    #[test]
    #[should_panic(expected = "there is no Pod default/gone")]
    fn annotating_a_missing_pod_panics() {
        let effect =
            Effect::AnnotatePod { pod: ObjectRef::new("default", "gone"), annotations: Default::default() };
        TestCluster::default().apply(&[effect]);
    }
}
