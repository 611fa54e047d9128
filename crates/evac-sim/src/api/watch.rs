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

pub fn stream(
    store: Arc<Store>,
    resource: &'static Resource,
    namespace: Option<String>,
    from: Option<u64>,
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
    timeout: Duration,
) -> Response {
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    tokio::spawn(async move {
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
        // Without a resource version, a watch starts with the current objects, as ADDED events.
        let mut seen = match from {
            Some(version) => version,
            None => {
                let (items, revision) =
                    store.list(&kind, namespace.as_deref(), labels.as_ref(), fields.as_ref());
                for item in items {
                    if tx.send(line("ADDED", &item)).await.is_err() {
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
