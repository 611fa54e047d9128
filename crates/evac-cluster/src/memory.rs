//! Objects in memory, with what etcd and the API server's registry do for a cluster's objects:
//! every change gets the next revision (an object's `resourceVersion`), updates are checked
//! against the version they were based on (409 on conflict), and the changes are kept as an
//! ordered history that watches replay from a resource version. It holds a context file's
//! objects and the simulated cluster's alike.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::{json, Value};
#[cfg(feature = "watch")]
use tokio::sync::watch;

use evac_core::kubevirt::{NODE_NAME_LABEL, POD_KIND, VMI_KIND};

use evac_core::ReadError;
use futures::future::BoxFuture;

use crate::{
    list_json, ApiError, Change, ChangeFeed, Clock, ClusterStore, Cursor, FieldSelector, Kind, LabelSelector,
    ListQuery, Patch,
};

/// What happened to an object, as a watch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventType {
    /// The watch event's `type`: `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One change, at one revision.
#[derive(Debug, Clone)]
pub struct Event {
    /// The store's revision after the change.
    pub revision: u64,
    /// The changed object's kind.
    pub kind: Kind,
    /// What happened.
    pub type_: EventType,
    /// The object after the change (its last state for a deletion).
    pub object: Arc<Value>,
    /// The object before a modification: a watch with a selector tells from it whether the
    /// object entered or left what it selects.
    pub previous: Option<Arc<Value>>,
}

/// namespace ("" when cluster-scoped), name.
type Key = (String, String);

struct Inner {
    revision: u64,
    objects: BTreeMap<Kind, BTreeMap<Key, Arc<Value>>>,
    history: VecDeque<Event>,
    /// Names handed out for `generateName`.
    generated: u64,
    /// The revision of the latest change to each kind.
    kind_revisions: BTreeMap<Kind, u64>,
    /// Pods by `spec.nodeName`, as the API server indexes them.
    pods_by_node: std::collections::HashMap<String, std::collections::BTreeSet<Key>>,
    /// VMIs by their `kubevirt.io/nodeName` label, as an informer's index would keep them:
    /// KubeVirt's controllers (and evac's) list a node's VMIs by it.
    vmis_by_node: std::collections::HashMap<String, std::collections::BTreeSet<Key>>,
}

fn is_vmi(kind: &Kind) -> bool {
    kind.is(VMI_KIND.0, VMI_KIND.1)
}

fn vmi_node_of(object: &Value) -> &str {
    object
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(NODE_NAME_LABEL))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn is_pod(kind: &Kind) -> bool {
    kind.is(POD_KIND.0, POD_KIND.1)
}

fn node_of(object: &Value) -> &str {
    object.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default()
}

impl Inner {
    /// Keeps the node indexes in step with an object being stored (`new`) in place of `old`.
    fn index(&mut self, kind: &Kind, key: &Key, old: Option<&Value>, new: Option<&Value>) {
        if is_pod(kind) {
            self.index_pod(key, old, new);
        } else if is_vmi(kind) {
            let (before, after) = (old.map(vmi_node_of), new.map(vmi_node_of));
            if before == after {
                return;
            }
            if let Some(keys) = before.and_then(|node| self.vmis_by_node.get_mut(node)) {
                keys.remove(key);
            }
            if let Some(node) = after {
                self.vmis_by_node.entry(node.to_owned()).or_default().insert(key.clone());
            }
        }
    }

    /// Keeps the pod index in step with a pod being stored (`new`) in place of `old`.
    fn index_pod(&mut self, key: &Key, old: Option<&Value>, new: Option<&Value>) {
        let (before, after) = (old.map(node_of), new.map(node_of));
        if before == after {
            return;
        }
        if let Some(node) = before {
            if let Some(keys) = self.pods_by_node.get_mut(node) {
                keys.remove(key);
            }
        }
        if let Some(node) = after {
            self.pods_by_node.entry(node.to_owned()).or_default().insert(key.clone());
        }
    }
}

/// A validating admission check of creates: the store, who asks (the requester's user name, as
/// an admission request's `userInfo.username`), the namespace and the object; an error refuses the
/// create with it.
pub type CreateCheck = Arc<dyn Fn(&MemoryStore, &str, &str, &Value) -> Result<(), ApiError> + Send + Sync>;

/// The user of requests that name none: an API server's name for unauthenticated requests, which
/// is what clients of the store (and of a simulated API without authentication) are.
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// The store. Reads take a shared lock; every write is one short exclusive section.
pub struct MemoryStore {
    inner: RwLock<Inner>,
    clock: Arc<dyn Clock>,
    history_limit: usize,
    /// Validating admission of creates, by kind (as an API server's webhooks): run before the
    /// write, outside its lock, so a check reads the store as a webhook would (and races as one).
    create_checks: RwLock<BTreeMap<Kind, Vec<CreateCheck>>>,
    /// The latest revision, for watchers waiting on changes.
    #[cfg(feature = "watch")]
    revision: watch::Sender<u64>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore")
            .field("revision", &self.revision())
            .field("objects", &self.len())
            .finish()
    }
}

impl MemoryStore {
    /// A store that keeps the last `history_limit` changes for watches.
    pub fn new(clock: Arc<dyn Clock>, history_limit: usize) -> Self {
        let inner = Inner {
            revision: 1,
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            generated: 0,
            kind_revisions: BTreeMap::new(),
            pods_by_node: Default::default(),
            vmis_by_node: Default::default(),
        };
        Self {
            inner: RwLock::new(inner),
            clock,
            history_limit: history_limit.max(1),
            create_checks: RwLock::default(),
            #[cfg(feature = "watch")]
            revision: watch::channel(1).0,
        }
    }

    /// Registers a validating admission check of the creates of `kind`.
    pub fn check_creates(&self, kind: Kind, check: CreateCheck) {
        self.create_checks
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(kind)
            .or_default()
            .push(check);
    }

    /// The clock the store's timestamps come from.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The revision of the latest change.
    pub fn revision(&self) -> u64 {
        self.read().revision
    }

    /// The revision of the latest change to any of `kinds` (0 if none changed yet).
    pub fn revision_of(&self, kinds: &[Kind]) -> u64 {
        let inner = self.read();
        kinds.iter().filter_map(|kind| inner.kind_revisions.get(kind)).copied().max().unwrap_or(0)
    }

    /// Notified with the latest revision after every change.
    #[cfg(feature = "watch")]
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// One object; 404 NotFound with Kubernetes' message when it does not exist.
    pub fn get(&self, kind: &Kind, namespace: &str, name: &str) -> Result<Arc<Value>, ApiError> {
        self.read()
            .objects
            .get(kind)
            .and_then(|objects| objects.get(&(namespace.to_owned(), name.to_owned())))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.resource(), name))
    }

    /// The objects of a kind (in one namespace, or all), filtered by selectors, and the revision
    /// the list is consistent with.
    pub fn list(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        labels: Option<&LabelSelector>,
        fields: Option<&FieldSelector>,
    ) -> (Vec<Arc<Value>>, u64) {
        let inner = self.read();
        // The pods of one node (`spec.nodeName=<node>`) and the VMIs of one node (label
        // `kubevirt.io/nodeName=<node>`) come from their indexes.
        let indexed = if is_pod(kind) {
            fields.and_then(FieldSelector::node_name).map(|node| (&inner.pods_by_node, node))
        } else if is_vmi(kind) {
            labels.and_then(|s| s.required_value(NODE_NAME_LABEL)).map(|node| (&inner.vmis_by_node, node))
        } else {
            None
        };
        if let Some((index, node)) = indexed {
            let objects = inner.objects.get(kind);
            let items = index
                .get(node)
                .into_iter()
                .flatten()
                .filter(|(ns, _)| namespace.is_none_or(|wanted| wanted == ns))
                .filter_map(|key| objects.and_then(|o| o.get(key)))
                .filter(|object| labels.is_none_or(|s| s.matches_object(object)))
                .filter(|object| fields.is_none_or(|s| s.matches_object(object)))
                .cloned()
                .collect();
            return (items, inner.revision);
        }
        let items = inner
            .objects
            .get(kind)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .filter(|((ns, _), _)| namespace.is_none_or(|wanted| wanted == ns))
            .map(|(_, object)| object)
            .filter(|object| labels.is_none_or(|s| s.matches_object(object)))
            .filter(|object| fields.is_none_or(|s| s.matches_object(object)))
            .cloned()
            .collect();
        (items, inner.revision)
    }

    /// Creates an object: names it (`generateName`), gives it a uid, a creation timestamp and a
    /// resource version. A dry run checks and answers without storing. The requester is
    /// [`ANONYMOUS_USER`].
    pub fn create(
        &self,
        kind: &Kind,
        namespace: &str,
        object: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        self.create_as(ANONYMOUS_USER, kind, namespace, object, dry_run)
    }

    /// [`create`](Self::create) on behalf of `user`, whom the create checks see.
    pub fn create_as(
        &self,
        user: &str,
        kind: &Kind,
        namespace: &str,
        mut object: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request("the object is not a JSON object"));
        }
        let checks = self
            .create_checks
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(kind)
            .cloned()
            .unwrap_or_default();
        for check in checks {
            check(self, user, namespace, &object)?;
        }
        let mut inner = self.write();
        let meta = metadata(&mut object);
        let name = match meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            Some(name) => name.to_owned(),
            None => match meta.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty()) {
                Some(prefix) => {
                    inner.generated += 1;
                    format!("{prefix}{}", name_suffix(inner.generated))
                }
                None => {
                    return Err(ApiError::invalid(
                        &kind.resource(),
                        "",
                        "metadata.name: Required value: name or generateName is required",
                    ))
                }
            },
        };
        let key = (namespace.to_owned(), name.clone());
        if inner.objects.get(kind).is_some_and(|objects| objects.contains_key(&key)) {
            return Err(ApiError::already_exists(&kind.resource(), &name));
        }
        let revision = inner.revision + 1;
        meta.insert("uid".into(), json!(uid(revision)));
        meta.insert("creationTimestamp".into(), json!(self.clock.timestamp()));
        self.commit(&mut inner, kind, key, object, EventType::Added, dry_run)
    }

    /// Stores an object as given, replacing one of the same name: no uid, timestamp or version
    /// check, only the next resource version. For objects that come from a file, not a client.
    pub fn restore(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        object: Value,
    ) -> Result<Arc<Value>, ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request("the object is not a JSON object"));
        }
        let mut inner = self.write();
        let key = (namespace.to_owned(), name.to_owned());
        let exists = inner.objects.get(kind).is_some_and(|objects| objects.contains_key(&key));
        let type_ = if exists { EventType::Modified } else { EventType::Added };
        let mut object = object;
        metadata(&mut object).remove("resourceVersion");
        self.commit(&mut inner, kind, key, object, type_, false)
    }

    /// How many objects the store holds.
    pub fn len(&self) -> usize {
        self.read().objects.values().map(BTreeMap::len).sum()
    }

    /// Whether the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Replaces an object. If the new one carries a `resourceVersion`, it must be the stored one.
    pub fn update(
        &self,
        kind: &Kind,
        namespace: &str,
        object: Value,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
        self.modify(kind, namespace, &name, dry_run, |_| Ok(object))
    }

    /// Applies a patch. A `resourceVersion` in the patched object is a precondition, as in
    /// Kubernetes.
    pub fn patch(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        patch: &Patch,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        self.modify(kind, namespace, name, dry_run, |current| {
            let mut patched = current.clone();
            match patch {
                Patch::Merge(merge) => json_patch::merge(&mut patched, merge),
                Patch::Json(operations) => json_patch::patch(&mut patched, operations).map_err(|e| {
                    ApiError::invalid(&kind.resource(), name, &format!("the JSON patch does not apply: {e}"))
                })?,
            }
            // A patch that does not name a version applies to the current one.
            if patched.pointer("/metadata/resourceVersion") == current.pointer("/metadata/resourceVersion") {
                metadata(&mut patched).remove("resourceVersion");
            }
            Ok(patched)
        })
    }

    /// Replaces an object with what `change` makes of it, keeping what the server owns (uid,
    /// creation timestamp) and checking the resource version.
    fn modify(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        dry_run: bool,
        change: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Value>, ApiError> {
        let resource = kind.resource();
        let mut inner = self.write();
        let key = (namespace.to_owned(), name.to_owned());
        let current = inner
            .objects
            .get(kind)
            .and_then(|objects| objects.get(&key))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&resource, name))?;
        let mut object = change(&current)?;
        if !object.is_object() {
            return Err(ApiError::bad_request("the object is not a JSON object"));
        }
        let stored_version = current.pointer("/metadata/resourceVersion").cloned();
        let meta = metadata(&mut object);
        match meta.get("resourceVersion") {
            None => {}
            Some(version) if Some(version) == stored_version.as_ref() => {}
            Some(_) => return Err(ApiError::conflict(&resource, name)),
        }
        if meta.get("name").and_then(Value::as_str).is_some_and(|n| n != name) {
            return Err(ApiError::invalid(
                &resource,
                name,
                "metadata.name: Invalid value: the name cannot change",
            ));
        }
        for owned in ["uid", "creationTimestamp"] {
            if let Some(value) = current.pointer(&format!("/metadata/{owned}")) {
                meta.insert(owned.into(), value.clone());
            }
        }
        self.commit(&mut inner, kind, key, object, EventType::Modified, dry_run)
    }

    /// Stamps an object with its identity and next resource version, and stores it (unless
    /// `dry_run`) with its change recorded.
    fn commit(
        &self,
        inner: &mut Inner,
        kind: &Kind,
        key: Key,
        mut object: Value,
        type_: EventType,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let revision = inner.revision + 1;
        let meta = metadata(&mut object);
        meta.insert("name".into(), json!(key.1));
        if !key.0.is_empty() {
            meta.insert("namespace".into(), json!(key.0));
        }
        meta.insert("resourceVersion".into(), json!(revision.to_string()));
        if let Some(map) = object.as_object_mut() {
            map.insert("apiVersion".into(), json!(kind.api_version));
            map.insert("kind".into(), json!(kind.kind));
        }
        let object = Arc::new(object);
        if !dry_run {
            let old = inner.objects.entry(kind.clone()).or_default().insert(key.clone(), Arc::clone(&object));
            inner.index(kind, &key, old.as_deref(), Some(&object));
            self.record(inner, kind, type_, &object, old);
        }
        Ok(object)
    }

    /// Removes an object; the answer is the object as it was last stored.
    pub fn delete(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        self.delete_if(kind, namespace, name, None, dry_run)
    }

    /// [`MemoryStore::delete`], only while the object is at `resource_version` if one is given
    /// (DeleteOptions' `preconditions.resourceVersion`); 409 otherwise.
    pub fn delete_if(
        &self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
        dry_run: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let mut inner = self.write();
        let key = (namespace.to_owned(), name.to_owned());
        let objects = inner.objects.get_mut(kind);
        let object = objects
            .as_ref()
            .and_then(|objects| objects.get(&key))
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.resource(), name))?;
        check_precondition(kind, name, &object, resource_version)?;
        if dry_run {
            return Ok(object);
        }
        if let Some(objects) = objects {
            objects.remove(&key);
        }
        inner.index(kind, &key, Some(&object), None);
        // The deletion event carries the object at the revision of its deletion.
        let mut deleted = (*object).clone();
        metadata(&mut deleted).insert("resourceVersion".into(), json!((inner.revision + 1).to_string()));
        let deleted = Arc::new(deleted);
        self.record(&mut inner, kind, EventType::Deleted, &deleted, None);
        Ok(object)
    }

    /// The changes to objects of `kind` after `revision`, in order, and the revision they bring
    /// a watcher up to. 410 Gone when the history no longer reaches back that far (the client
    /// must list again).
    pub fn events_since(&self, kind: &Kind, revision: u64) -> Result<(Vec<Event>, u64), ApiError> {
        let inner = self.read();
        if let Some(oldest) = inner.history.front() {
            if revision + 1 < oldest.revision {
                return Err(ApiError::gone(revision, oldest.revision));
            }
        }
        let events = inner
            .history
            .iter()
            .rev()
            .take_while(|e| e.revision > revision)
            .filter(|e| &e.kind == kind)
            .cloned()
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Ok((events, inner.revision.max(revision)))
    }

    fn record(
        &self,
        inner: &mut Inner,
        kind: &Kind,
        type_: EventType,
        object: &Arc<Value>,
        previous: Option<Arc<Value>>,
    ) {
        inner.revision += 1;
        let revision = inner.revision;
        match inner.kind_revisions.get_mut(kind) {
            Some(at) => *at = revision,
            None => {
                inner.kind_revisions.insert(kind.clone(), revision);
            }
        }
        inner.history.push_back(Event {
            revision: inner.revision,
            kind: kind.clone(),
            type_,
            object: Arc::clone(object),
            previous,
        });
        while inner.history.len() > self.history_limit {
            inner.history.pop_front();
        }
        #[cfg(feature = "watch")]
        self.revision.send_replace(inner.revision);
    }
}

fn metadata(object: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !object.get("metadata").is_some_and(Value::is_object) {
        object["metadata"] = json!({});
    }
    object["metadata"].as_object_mut().expect("made an object above")
}

/// Five characters from Kubernetes' alphabet for generated names (no vowels, no look-alikes).
fn name_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    // Spread consecutive numbers over the name space, as random suffixes would be.
    let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// A uid in UUID form, unique within the store.
fn uid(revision: u64) -> String {
    format!("00000000-0000-4000-8000-{revision:012x}")
}

#[cfg(test)]
mod tests;

impl crate::ObjectSource for MemoryStore {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<[u8]>, ReadError> {
        let object =
            MemoryStore::get(self, &Kind::new(api_version, kind), namespace.unwrap_or_default(), name)
                .map_err(|_| ReadError::not_found(api_version, kind, name))?;
        let bytes = serde_json::to_vec(&*object).map_err(|e| ReadError::other(e.to_string()))?;
        Ok(bytes.into())
    }

    fn list(&self, api_version: &str, kind: &str, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError> {
        let labels = query.label_selector.map(LabelSelector::parse).transpose().map_err(ReadError::other)?;
        let fields = query.field_selector.map(FieldSelector::parse).transpose().map_err(ReadError::other)?;
        let (items, _) = MemoryStore::list(
            self,
            &Kind::new(api_version, kind),
            query.namespace,
            labels.as_ref(),
            fields.as_ref(),
        );
        let encoded: Vec<Vec<u8>> = items
            .iter()
            .map(|item| serde_json::to_vec(&**item))
            .collect::<Result<_, _>>()
            .map_err(|e| ReadError::other(e.to_string()))?;
        Ok(list_json(encoded.iter().map(Vec::as_slice)))
    }
}

/// The store's history is its change feed; a cursor older than the history gets a resync.
impl ChangeFeed for MemoryStore {
    fn changes(
        &self,
        api_version: &str,
        kind: &str,
        cursor: Cursor,
    ) -> Result<(Vec<Change>, u64), ReadError> {
        let kind = Kind::new(api_version, kind);
        let encode = |object: &Value, deleted: bool| {
            serde_json::to_vec(object)
                .map(|json| Change { object: json.into(), deleted })
                .map_err(|e| ReadError::other(e.to_string()))
        };
        if let Some(cursor) = cursor {
            // 410 Gone: the history no longer reaches back; resync from a listing below.
            if let Ok((events, revision)) = self.events_since(&kind, cursor) {
                let changes = events
                    .iter()
                    .map(|e| encode(&e.object, e.type_ == EventType::Deleted))
                    .collect::<Result<_, _>>()?;
                return Ok((changes, revision));
            }
        }
        let revision = self.revision();
        let (objects, _) = self.list(&kind, None, None, None);
        let changes = objects.iter().map(|o| encode(o, false)).collect::<Result<_, _>>()?;
        Ok((changes, revision))
    }
}

/// A deletion's `preconditions.resourceVersion` against the stored `object`: 409 Conflict when it
/// names another version; nothing to check without one.
pub fn check_precondition(
    kind: &Kind,
    name: &str,
    object: &Value,
    resource_version: Option<&str>,
) -> Result<(), ApiError> {
    let Some(expected) = resource_version else { return Ok(()) };
    let stored = object.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
    if stored != expected {
        return Err(ApiError::precondition_failed(&kind.resource(), name, expected, stored));
    }
    Ok(())
}

/// The store answers at once: the futures are ready when polled.
impl ClusterStore for MemoryStore {
    fn timestamp(&self) -> String {
        self.clock.timestamp()
    }

    fn create<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        object: Value,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(std::future::ready(MemoryStore::create(self, kind, namespace, object, dry_run).map(drop)))
    }

    fn patch<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        patch: &'a Patch,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(std::future::ready(
            MemoryStore::patch(self, kind, namespace, name, patch, dry_run).map(drop),
        ))
    }

    fn delete<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        resource_version: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(std::future::ready(
            MemoryStore::delete_if(self, kind, namespace, name, resource_version, false).map(drop),
        ))
    }
}

/// A [`MemoryStore`] whose creates are made on behalf of a user, for the create checks that
/// tell requesters apart (KubeVirt's migration admitter lets only virt-controller set a
/// migration's priority). Reads, patches and deletions are the store's.
#[derive(Clone)]
pub struct AsUser {
    store: Arc<MemoryStore>,
    user: &'static str,
}

impl AsUser {
    /// `store`, creating on behalf of `user`.
    pub fn new(store: Arc<MemoryStore>, user: &'static str) -> Self {
        Self { store, user }
    }
}

impl crate::ObjectSource for AsUser {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<[u8]>, ReadError> {
        crate::ObjectSource::get(&*self.store, api_version, kind, namespace, name)
    }

    fn list(&self, api_version: &str, kind: &str, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError> {
        crate::ObjectSource::list(&*self.store, api_version, kind, query)
    }
}

impl ClusterStore for AsUser {
    fn timestamp(&self) -> String {
        self.store.clock.timestamp()
    }

    fn create<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        object: Value,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        let created = self.store.create_as(self.user, kind, namespace, object, dry_run);
        Box::pin(std::future::ready(created.map(drop)))
    }

    fn patch<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        patch: &'a Patch,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        ClusterStore::patch(&*self.store, kind, namespace, name, patch, dry_run)
    }

    fn delete<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        resource_version: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        ClusterStore::delete(&*self.store, kind, namespace, name, resource_version)
    }
}
