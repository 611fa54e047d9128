//! Watches: a chunked stream of `{"type": ..., "object": ...}` lines, replayed from a resource
//! version and then following the store. A resource version older than the history kept gets
//! Kubernetes' `ERROR` event with a 410 Status, after which clients list again.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::resources::Resource;
use crate::store::Store;
use crate::{Event, EventType};
use evac_cluster::{FieldSelector, LabelSelector};

/// What a watch follows.
pub struct Selection {
    pub resource: &'static Resource,
    pub namespace: Option<String>,
    pub labels: Option<LabelSelector>,
    pub fields: Option<FieldSelector>,
}

/// How a watch starts ([`super::server`] reads it from the list options).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    /// Send the current objects first, as `ADDED` (`sendInitialEvents`).
    pub initial_events: bool,
    /// Bookmarks allowed (`allowWatchBookmarks`): with the initial events, one marks their end.
    pub bookmarks: bool,
}

/// The annotation of the bookmark that ends a watch's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A watch's response: a chunked stream that follows the selection from `from` (or from its
/// initial events), until `timeout`, the client leaving, or a version too old (410).
pub fn stream(
    store: Arc<Store>,
    selection: Selection,
    from: Option<u64>,
    start: Start,
    timeout: Duration,
) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
        let changes = store.subscribe();
        // The initial events: the current objects as ADDED (a resource version given with them is
        // one the state is not older than), then, where bookmarks are allowed, the bookmark that
        // says they are over. Without them, the watch follows from the version given, or from now.
        let seen = match (start.initial_events, from) {
            (false, Some(version)) => version,
            (false, None) => store.revision_of(std::slice::from_ref(&selection.resource.store_kind())),
            (true, _) => match initial_events(&store, &selection, start.bookmarks, &tx).await {
                Some(revision) => revision,
                None => return,
            },
        };
        follow(&store, &selection, seen, changes, timeout, &tx).await;
    });
    let body =
        futures::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx)) },
        );
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(body)).into_response()
}

impl Selection {
    /// Whether the watch follows this object: in its namespace, matching its selectors.
    fn selects(&self, object: &Value) -> bool {
        let in_namespace = self.namespace.as_deref().is_none_or(|ns| {
            object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default() == ns
        });
        in_namespace
            && self.labels.as_ref().is_none_or(|s| s.matches_object(object))
            && self.fields.as_ref().is_none_or(|s| s.matches_object(object))
    }
}

/// One line of the stream.
fn line(type_: &str, object: &Value) -> Bytes {
    Bytes::from(format!("{}\n", json!({"type": type_, "object": object})))
}

/// Sends the current objects as ADDED, then with `bookmarks` the bookmark that ends them; returns
/// the revision they are at, or `None` when the client left.
async fn initial_events(
    store: &Store,
    selection: &Selection,
    bookmarks: bool,
    tx: &mpsc::Sender<Bytes>,
) -> Option<u64> {
    let resource = selection.resource;
    let (items, revision) = store.list(
        &resource.store_kind(),
        selection.namespace.as_deref(),
        selection.labels.as_ref(),
        selection.fields.as_ref(),
    );
    for item in items {
        tx.send(line("ADDED", &item)).await.ok()?;
    }
    if bookmarks {
        let bookmark = json!({
            "kind": resource.kind, "apiVersion": resource.api_version(),
            "metadata": {"resourceVersion": revision.to_string(),
                         "annotations": {INITIAL_EVENTS_END: "true"}},
        });
        tx.send(line("BOOKMARK", &bookmark)).await.ok()?;
    }
    Some(revision)
}

/// Sends the selection's changes after revision `seen` as they come, until the deadline, the
/// client leaving, or a version too old for the history (the `ERROR` event with a 410 Status).
async fn follow(
    store: &Store,
    selection: &Selection,
    mut seen: u64,
    mut changes: tokio::sync::watch::Receiver<u64>,
    timeout: Duration,
    tx: &mpsc::Sender<Bytes>,
) {
    let kind = selection.resource.store_kind();
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        match store.events_since(&kind, seen) {
            Ok((events, revision)) => {
                for sent in events.iter().filter_map(|event| watch_event(selection, event)) {
                    if tx.send(sent).await.is_err() {
                        return;
                    }
                }
                seen = revision;
            }
            Err(gone) => {
                let _ = tx.send(line("ERROR", &gone.status())).await;
                return;
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            () = &mut deadline => return,
            () = tx.closed() => return,
        }
    }
}

/// A change as the selecting watcher is told it, if at all. As kube-apiserver's watch cache tells
/// a selecting watcher (`cacheWatcher.convertToWatchEvent`): an object that stops matching is
/// DELETED (as it was), one that starts matching is ADDED.
fn watch_event(selection: &Selection, event: &Event) -> Option<Bytes> {
    let now = selection.selects(&event.object);
    let before = event.previous.as_deref().is_some_and(|previous| selection.selects(previous));
    match (event.type_, before, now) {
        (EventType::Modified, true, false) => {
            // The object as it was, at the change's resource version (as the
            // watch cache stamps the previous object), so a client resumes after it.
            let mut was = (**event.previous.as_ref().expect("matched before")).clone();
            was["metadata"]["resourceVersion"] = event.object["metadata"]["resourceVersion"].clone();
            Some(line("DELETED", &was))
        }
        (EventType::Modified, false, true) => Some(line("ADDED", &event.object)),
        (_, _, true) => Some(line(event.type_.as_str(), &event.object)),
        (_, _, false) => None,
    }
}
