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

pub fn stream(
    store: Arc<Store>,
    selection: Selection,
    from: Option<u64>,
    start: Start,
    timeout: Duration,
) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
        let Selection { resource, namespace, labels, fields } = selection;
        let kind = resource.store_kind();
        let selected = |object: &Value| {
            let in_namespace = namespace.as_deref().is_none_or(|ns| {
                object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default() == ns
            });
            in_namespace
                && labels.as_ref().is_none_or(|s| s.matches_object(object))
                && fields.as_ref().is_none_or(|s| s.matches_object(object))
        };
        let line = |type_: &str, object: &Value| {
            Bytes::from(format!("{}\n", json!({"type": type_, "object": object})))
        };
        let mut changes = store.subscribe();
        // The initial events: the current objects as ADDED (a resource version given with them is
        // one the state is not older than), then, where bookmarks are allowed, the bookmark that
        // says they are over. Without them, the watch follows from the version given, or from now.
        let mut seen = match (start.initial_events, from) {
            (false, Some(version)) => version,
            (false, None) => store.revision_of(std::slice::from_ref(&kind)),
            (true, _) => {
                let (items, revision) =
                    store.list(&kind, namespace.as_deref(), labels.as_ref(), fields.as_ref());
                for item in items {
                    if tx.send(line("ADDED", &item)).await.is_err() {
                        return;
                    }
                }
                if start.bookmarks {
                    let bookmark = json!({
                        "kind": resource.kind, "apiVersion": resource.api_version(),
                        "metadata": {"resourceVersion": revision.to_string(),
                                     "annotations": {INITIAL_EVENTS_END: "true"}},
                    });
                    if tx.send(line("BOOKMARK", &bookmark)).await.is_err() {
                        return;
                    }
                }
                revision
            }
        };
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        loop {
            match store.events_since(&kind, seen) {
                Ok((events, revision)) => {
                    for event in &events {
                        // As kube-apiserver's watch cache tells a selecting watcher
                        // (`cacheWatcher.convertToWatchEvent`): an object that stops matching is
                        // DELETED (as it was), one that starts matching is ADDED.
                        let now = selected(&event.object);
                        let before = event.previous.as_deref().is_some_and(selected);
                        let sent = match (event.type_, before, now) {
                            (crate::EventType::Modified, true, false) => {
                                // The object as it was, at the change's resource version (as the
                                // watch cache stamps the previous object), so a client resumes after it.
                                let mut was = (**event.previous.as_ref().expect("matched before")).clone();
                                was["metadata"]["resourceVersion"] =
                                    event.object["metadata"]["resourceVersion"].clone();
                                line("DELETED", &was)
                            }
                            (crate::EventType::Modified, false, true) => line("ADDED", &event.object),
                            (_, _, true) => line(event.type_.as_str(), &event.object),
                            (_, _, false) => continue,
                        };
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
    });
    let body =
        futures::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx)) },
        );
    ([(header::CONTENT_TYPE, "application/json")], Body::from_stream(body)).into_response()
}
