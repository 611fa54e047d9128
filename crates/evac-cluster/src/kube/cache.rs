//! The watch cache: one resource's objects, kept current by a kube-rs watcher and read
//! synchronously by the host capabilities.
//!
//! Policies read during admission, where a round trip to the API server per read would cost more
//! than the whole evaluation. The cache answers from memory instead: each object is serialized once,
//! when its watch event arrives, so a read is a map lookup and an `Arc` clone.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, TypeMeta};
use kube::runtime::watcher::{self, Event};
use kube::Client;
use serde_json::Value;
use tokio::sync::watch;

use super::change_log::ChangeLog;
use super::contact::Contact;
use super::errors::watch_error_text;
use crate::{list_json, Change, FieldSelector, LabelSelector, ListQuery, ReadError};

/// One watched resource.
pub(super) struct WatchCache {
    resource: ApiResource,
    namespaced: bool,
    /// What of the resource is watched: all of it, or what these selectors select.
    scope: super::Scope,
    state: RwLock<State>,
    /// Flips to `true` once, when the first initial list completes; `wait_synced` waits on it.
    synced: watch::Sender<bool>,
    /// Counts the changes applied, for whoever waits for the next one.
    changed: Arc<watch::Sender<u64>>,
}

#[derive(Default)]
struct State {
    /// `None` until the first initial list completes: an empty map would read as "no objects".
    objects: Option<Namespaces>,
    /// The last error of the watch, for the messages of reads and `wait_synced`.
    last_error: Option<String>,
    /// Since when the watch has been failing: its first error with no event after it.
    failing: Option<Instant>,
    /// The changes since the latest list, for [`WatchCache::changes_since`].
    log: ChangeLog,
}

/// namespace ("" when cluster-scoped) -> name -> object.
type Namespaces = BTreeMap<String, BTreeMap<String, Stored>>;

struct Stored {
    /// The object as JSON, with `apiVersion` and `kind`, without `metadata.managedFields`.
    json: Arc<[u8]>,
    /// A parsed copy of the labels, so that label-selector lists need not parse every object.
    labels: BTreeMap<String, String>,
    /// The fields a field selector can name ([`SELECTABLE_FIELDS`]), so that a list by node
    /// need not parse every pod: on a 10,000-pod cache that parse cost ~100 ms a list.
    fields: Value,
}

/// The fields the API server lets a field selector name, beside `metadata.name` and
/// `metadata.namespace` (pods: `pkg/registry/core/pod/strategy.go`, `ToSelectableFields`). A
/// selector on any other path is matched against the whole object.
const SELECTABLE_FIELDS: [&str; 10] = [
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

/// The object's [`SELECTABLE_FIELDS`], at their paths.
fn selectable_fields(object: &Value) -> Value {
    let mut fields = Value::Object(serde_json::Map::new());
    for path in SELECTABLE_FIELDS {
        let Some(value) = path.split('.').try_fold(object, |v, key| v.get(key)) else { continue };
        let (parent, key) = path.split_once('.').expect("a selectable field has two parts");
        fields[parent][key] = value.clone();
    }
    fields
}

impl WatchCache {
    pub(super) fn new(
        resource: ApiResource,
        namespaced: bool,
        scope: super::Scope,
        changed: Arc<watch::Sender<u64>>,
    ) -> Arc<Self> {
        let (synced, _) = watch::channel(false);
        Arc::new(Self { resource, namespaced, scope, state: RwLock::default(), synced, changed })
    }

    /// Whether this cache watches the whole resource or a part that covers `query`: its field
    /// selector is one of the query's terms (a list of the pods `status.nominatedNodeName=n`
    /// goes to the cache that watches exactly those).
    pub(super) fn covers(&self, query: Option<&ListQuery<'_>>) -> bool {
        let within = |scope: Option<&str>, asked: Option<&str>| {
            scope.is_none_or(|scope| {
                asked.is_some_and(|asked| asked.split(',').any(|term| term.trim() == scope))
            })
        };
        match query {
            Some(query) => {
                within(self.scope.field_selector.as_deref(), query.field_selector)
                    && within(self.scope.label_selector.as_deref(), query.label_selector)
            }
            None => true,
        }
    }

    /// Whether the cache holds the whole resource.
    pub(super) fn is_whole(&self) -> bool {
        self.scope == super::Scope::default()
    }

    /// The watcher's configuration: the scope's selectors.
    fn watcher_config(&self) -> watcher::Config {
        let mut config = watcher::Config::default();
        if let Some(labels) = &self.scope.label_selector {
            config = config.labels(labels);
        }
        if let Some(fields) = &self.scope.field_selector {
            config = config.fields(fields);
        }
        config
    }

    /// Watches the resource until the task is aborted; never returns on its own.
    ///
    /// After an error the watch starts over with a list, as client-go's reflector does
    /// (`ListAndWatch` again): a watch kube-rs resumes from its resourceVersion brings no event
    /// of its own, so in a quiet cluster nothing would show it is flowing again, while a list
    /// answers at once (its objects, or its end, end the run of errors). Retries back off from
    /// 0.5 s to 5 s, and start at once when the API server answers again after not answering
    /// (`contact`), so the caches follow it within about a probe interval of its return; a watch
    /// open through such a silence starts over then too.
    pub(super) async fn run(self: Arc<Self>, client: Client, contact: Arc<Contact>) {
        let api = Api::<DynamicObject>::all_with(client, &self.resource);
        let config = self.watcher_config();
        let mut loader = Loader::new(self);
        let mut failures: u32 = 0;
        loop {
            let events = kube::runtime::watcher(api.clone(), config.clone());
            let mut events = std::pin::pin!(events);
            // Whether the watch itself (not only its list) has worked since the start.
            let mut watched = false;
            let listed = loop {
                tokio::select! {
                    event = events.next() => match event {
                        Some(Ok(event)) => {
                            watched |= matches!(event, Event::Apply(_) | Event::Delete(_));
                            loader.apply(event);
                        }
                        Some(Err(error)) => {
                            loader.cache.record_error(&error);
                            break false;
                        }
                        None => break true,
                    },
                    // A watch that lived through a silence of the API server may be on a
                    // connection that died without a word (a partition, a load balancer's
                    // failover), which would wait out the client's read timeout: start over.
                    () = contact.back() => break true,
                }
            };
            if listed {
                continue;
            }
            // The back-off starts again only once the watch, not just a list, has worked: a
            // watch refused after every successful list must not relist in a tight loop.
            failures = if watched { 1 } else { failures.saturating_add(1) };
            tokio::select! {
                () = tokio::time::sleep(retry_delay(failures)) => {}
                () = contact.back() => {}
            }
        }
    }

    /// Lists the resource every `every` until the task is aborted, for an API that serves no
    /// watch (metrics-server's `metrics.k8s.io`, whose NodeMetrics change with every scrape):
    /// each list replaces the cache's contents as a relist does, so a change feed reader sees
    /// every object again after each poll; a list that fails empties it.
    pub(super) async fn poll(self: Arc<Self>, client: Client, every: Duration) {
        let api = Api::<DynamicObject>::all_with(client, &self.resource);
        let mut loader = Loader::new(Arc::clone(&self));
        loop {
            let mut params = kube::api::ListParams::default();
            if let Some(labels) = &self.scope.label_selector {
                params = params.labels(labels);
            }
            if let Some(fields) = &self.scope.field_selector {
                params = params.fields(fields);
            }
            match api.list(&params).await {
                Ok(list) => {
                    loader.apply(Event::Init);
                    for item in list.items {
                        loader.apply(Event::InitApply(item));
                    }
                    loader.apply(Event::InitDone);
                }
                Err(error) => {
                    self.record_error(&watcher::Error::InitialListFailed(error));
                    // Not served (an aggregated API that is down): read as empty, not as never
                    // synced (the host starts) nor as the last figures (they age with every
                    // scrape missed): decisions take a missing figure as unknown.
                    loader.apply(Event::Init);
                    loader.apply(Event::InitDone);
                }
            }
            tokio::time::sleep(every).await;
        }
    }

    pub(super) fn is(&self, api_version: &str, kind: &str) -> bool {
        self.resource.api_version == api_version && self.resource.kind == kind
    }

    /// `apiVersion kind` and its scope, for messages.
    pub(super) fn describe(&self) -> String {
        let mut text = format!("{} {}", self.resource.api_version, self.resource.kind);
        for selector in [&self.scope.label_selector, &self.scope.field_selector].into_iter().flatten() {
            text.push_str(&format!(" ({selector})"));
        }
        text
    }

    pub(super) fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    pub(super) async fn wait_synced(&self) {
        let mut synced = self.synced.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    pub(super) fn last_error(&self) -> Option<String> {
        self.read().last_error.clone()
    }

    /// How long the watch has been failing, with its last error, while it still is: from its
    /// first error to the next event that shows the API server answered (each retry starts with
    /// a list, whose objects or end are one).
    pub(super) fn failing(&self) -> Option<(Duration, String)> {
        let state = self.read();
        let since = state.failing?;
        Some((since.elapsed(), state.last_error.clone().unwrap_or_default()))
    }

    pub(super) fn get(&self, namespace: Option<&str>, name: &str) -> Result<Arc<[u8]>, ReadError> {
        // A cluster-scoped object is found whatever namespace the policy passed, as through the API.
        let namespace = if self.namespaced { namespace.unwrap_or_default() } else { "" };
        let state = self.read();
        let objects = self.synced_objects(&state)?;
        objects
            .get(namespace)
            .and_then(|names| names.get(name))
            .map(|stored| Arc::clone(&stored.json))
            .ok_or_else(|| ReadError::not_found(&self.resource.api_version, &self.resource.kind, name))
    }

    pub(super) fn list(&self, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError> {
        let labels = query.label_selector.map(LabelSelector::parse).transpose().map_err(ReadError::other)?;
        let fields = query.field_selector.map(FieldSelector::parse).transpose().map_err(ReadError::other)?;
        if query.namespace.is_some() && !self.namespaced {
            return Err(ReadError::other(format!(
                "{} is cluster-scoped: it cannot be listed by namespace",
                self.describe()
            )));
        }
        let on_selectable =
            fields.as_ref().is_some_and(|f| f.paths().all(|p| SELECTABLE_FIELDS.contains(&p)));
        // Each candidate, with whether its fields matched when that is known without parsing it.
        let selected: Vec<(Arc<[u8]>, Option<bool>)> = {
            let state = self.read();
            let objects = self.synced_objects(&state)?;
            let namespaces: Vec<&BTreeMap<String, Stored>> = match query.namespace {
                Some(namespace) => objects.get(namespace).into_iter().collect(),
                None => objects.values().collect(),
            };
            namespaces
                .into_iter()
                .flat_map(BTreeMap::values)
                .filter(|stored| labels.as_ref().is_none_or(|s| s.matches(&stored.labels)))
                .filter_map(|stored| {
                    let known = match &fields {
                        None => Some(true),
                        Some(selector) if on_selectable => Some(selector.matches_object(&stored.fields)),
                        Some(_) => None,
                    };
                    (known != Some(false)).then(|| (Arc::clone(&stored.json), known))
                })
                .collect()
        };
        // A selector on other fields than the selectable ones parses the candidates, outside the lock.
        let matches_fields = |(json, known): &(Arc<[u8]>, Option<bool>)| {
            known.unwrap_or_else(|| {
                fields.as_ref().is_none_or(|selector| {
                    serde_json::from_slice::<Value>(json).is_ok_and(|object| selector.matches_object(&object))
                })
            })
        };
        Ok(list_json(selected.iter().filter(|candidate| matches_fields(candidate)).map(|(json, _)| &**json)))
    }

    /// The changes after `cursor` and the cursor to resume from. Without a cursor, or with one the
    /// change log cannot resume from (see [`ChangeLog`]), every current object as a change.
    pub(super) fn changes_since(&self, cursor: Option<u64>) -> Result<(Vec<Change>, u64), ReadError> {
        let state = self.read();
        let objects = self.synced_objects(&state)?;
        let position = state.log.position();
        if let Some(changes) = cursor.and_then(|cursor| state.log.since(cursor)) {
            return Ok((changes, position));
        }
        let everything = objects
            .values()
            .flat_map(BTreeMap::values)
            .map(|stored| Change { object: Arc::clone(&stored.json), deleted: false })
            .collect();
        Ok((everything, position))
    }

    /// Records an object the host itself just wrote, as the API server returned it, so that reads
    /// see the write before the watch brings it: a controller deciding from this cache would
    /// otherwise decide again on the state before its write (and create a second migration). A
    /// copy the watch already brought that is newer is kept.
    pub(super) fn observe_write(&self, object: DynamicObject) {
        let Some((namespace, name, stored)) = self.encode(object) else { return };
        let version = |json: &[u8]| {
            let object: Value = serde_json::from_slice(json).ok()?;
            object.pointer("/metadata/resourceVersion")?.as_str()?.parse::<u64>().ok()
        };
        self.edit(|state| {
            let Some(objects) = state.objects.as_mut() else { return };
            let names = objects.entry(namespace).or_default();
            let known = names.get(&name).and_then(|known| version(&known.json));
            if known.zip(version(&stored.json)).is_some_and(|(known, new)| known >= new) {
                return;
            }
            state.log.record(Arc::clone(&stored.json), false);
            names.insert(name, stored);
        });
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        // The state is replaced or edited in single assignments: a panicking writer leaves it whole.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn synced_objects<'s>(&self, state: &'s State) -> Result<&'s Namespaces, ReadError> {
        state.objects.as_ref().ok_or_else(|| {
            let cause = match &state.last_error {
                Some(error) => format!("; last watch error: {error}"),
                None => String::new(),
            };
            ReadError::other(format!(
                "{} cannot be read yet: its watch cache has not completed the initial list{cause}",
                self.describe()
            ))
        })
    }

    fn edit(&self, edit: impl FnOnce(&mut State)) {
        edit(&mut self.state.write().unwrap_or_else(PoisonError::into_inner));
        self.changed.send_modify(|count| *count = count.wrapping_add(1));
    }

    pub(super) fn record_error(&self, error: &watcher::Error) {
        let text = watch_error_text(error);
        tracing::warn!(resource = %self.describe(), error = %text, "watch failed; retrying");
        let now = Instant::now();
        self.edit(|state| {
            state.last_error = Some(text);
            state.failing = Some(state.failing.unwrap_or(now));
        });
    }

    /// The stored form of an object, with its namespace and name.
    fn encode(&self, mut object: DynamicObject) -> Option<(String, String, Stored)> {
        object.metadata.managed_fields = None;
        if object.types.as_ref().is_none_or(|t| t.api_version.is_empty() || t.kind.is_empty()) {
            // List items of built-in kinds come without their type; policies expect it.
            object.types = Some(TypeMeta {
                api_version: self.resource.api_version.clone(),
                kind: self.resource.kind.clone(),
            });
        }
        let Some(name) = object.metadata.name.clone() else {
            tracing::warn!(resource = %self.describe(), "ignoring a watched object without metadata.name");
            return None;
        };
        let namespace = object.metadata.namespace.clone().unwrap_or_default();
        let labels = object.metadata.labels.clone().unwrap_or_default();
        match serde_json::to_value(&object).and_then(|value| Ok((serde_json::to_vec(&value)?, value))) {
            Ok((json, value)) => Some((
                namespace,
                name,
                Stored { json: json.into(), labels, fields: selectable_fields(&value) },
            )),
            Err(error) => {
                tracing::warn!(resource = %self.describe(), %namespace, %name, %error, "cannot serialize a watched object");
                None
            }
        }
    }
}

/// The wait before the `failures`th retry of a watch: 0.5 s doubling up to 5 s, each between
/// half and all of that (jitter, so that the watches of many replicas do not retry in step).
fn retry_delay(failures: u32) -> Duration {
    const FIRST: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(5);
    let full = FIRST.saturating_mul(1 << failures.saturating_sub(1).min(8)).min(MAX);
    full.mul_f64(0.5 + fastrand::f64() / 2.0)
}

/// Applies watch events to a cache. The objects of an initial list (`Init`, `InitApply`...,
/// `InitDone`) are buffered here and replace the cache's contents at `InitDone`, in one step: until
/// then, a relist after a watch error keeps serving the previous contents rather than a partial list.
pub(super) struct Loader {
    pub(super) cache: Arc<WatchCache>,
    pending: Option<Namespaces>,
}

impl Loader {
    pub(super) fn new(cache: Arc<WatchCache>) -> Self {
        Self { cache, pending: None }
    }

    pub(super) fn apply(&mut self, event: Event<DynamicObject>) {
        // Any event but `Init` means the API server answered: kube-rs' watcher emits `Init`
        // before it asks for the list, and the list's objects (or its end) after it answered.
        if !matches!(event, Event::Init) && self.cache.read().failing.is_some() {
            self.cache.edit(|state| state.failing = None);
        }
        match event {
            Event::Init => self.pending = Some(Namespaces::new()),
            Event::InitApply(object) => {
                if let Some((namespace, name, stored)) = self.cache.encode(object) {
                    self.pending.get_or_insert_default().entry(namespace).or_default().insert(name, stored);
                }
            }
            Event::InitDone => {
                let objects = self.pending.take().unwrap_or_default();
                let count: usize = objects.values().map(BTreeMap::len).sum();
                self.cache.edit(|state| {
                    state.objects = Some(objects);
                    state.last_error = None;
                    state.log.relisted();
                });
                self.cache.synced.send_replace(true);
                tracing::debug!(resource = %self.cache.describe(), objects = count, "watch cache synced");
            }
            Event::Apply(object) => {
                if let Some((namespace, name, stored)) = self.cache.encode(object) {
                    self.cache.edit(|state| {
                        // Changes only follow an initial list, so the objects are always there.
                        if let Some(objects) = state.objects.as_mut() {
                            state.log.record(Arc::clone(&stored.json), false);
                            objects.entry(namespace).or_default().insert(name, stored);
                        }
                    });
                }
            }
            Event::Delete(object) => {
                // Logged as the event gives it: the object's last state.
                let Some((namespace, name, last)) = self.cache.encode(object) else { return };
                self.cache.edit(|state| {
                    let Some(objects) = state.objects.as_mut() else { return };
                    state.log.record(last.json, true);
                    if let Some(names) = objects.get_mut(&namespace) {
                        names.remove(&name);
                        if names.is_empty() {
                            objects.remove(&namespace);
                        }
                    }
                });
            }
        }
    }
}
