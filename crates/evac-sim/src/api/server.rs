//! The HTTP server of the simulated API (feature `http`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

use super::resources::Resource;
use super::{eviction, openapi, resources, table, watch};

use crate::store::{Patch, Store};
use crate::ApiError;
use evac_cluster::{FieldSelector, LabelSelector};

/// The API's routes over a store.
pub fn router(store: Arc<Store>) -> Router {
    Router::new().fallback(handle).with_state(store)
}

/// What a request path names.
#[derive(Debug, PartialEq)]
enum Target<'a> {
    Document(Value),
    Collection { resource: &'static Resource, namespace: Option<&'a str> },
    Item { resource: &'static Resource, namespace: Option<&'a str>, name: &'a str, sub: Option<&'a str> },
}

fn not_found() -> ApiError {
    ApiError {
        code: 404,
        reason: "NotFound",
        message: "the server could not find the requested resource".into(),
    }
}

fn parse_target(path: &str) -> Result<Target<'_>, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => {
            return Ok(Target::Document(
                json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-evac-sim", "platform": "linux/amd64"}),
            ))
        }
        ["api"] => return Ok(Target::Document(resources::core_versions())),
        ["openapi", "v3"] => return Ok(Target::Document(openapi::index())),
        ["openapi", "v3", rest @ ..] => {
            return openapi::group_version(&rest.join("/")).map(Target::Document).ok_or_else(not_found)
        }
        ["apis"] => return Ok(Target::Document(resources::group_list())),
        ["apis", group] => return resources::group(group).map(Target::Document).ok_or_else(not_found),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(not_found()),
    };
    let resource = |plural: &str| resources::find(group, version, plural).ok_or_else(not_found);
    match rest {
        [] => resources::resource_list(group, version).map(Target::Document).ok_or_else(not_found),
        // `namespaces/<ns>/<resource>...` is inside a namespace; `namespaces/<name>` is a Namespace.
        ["namespaces", namespace, plural, tail @ ..] => {
            let resource = resource(plural)?;
            if !resource.namespaced {
                return Err(not_found());
            }
            item_or_collection(resource, Some(namespace), tail)
        }
        [plural, tail @ ..] => {
            let resource = resource(plural)?;
            let namespace = if resource.namespaced { None } else { Some("") };
            match (resource.namespaced, tail) {
                // A namespaced resource is listed across namespaces at its top level, never named there.
                (true, []) => Ok(Target::Collection { resource, namespace: None }),
                (true, _) => Err(not_found()),
                (false, tail) => item_or_collection(resource, namespace, tail),
            }
        }
    }
}

fn item_or_collection<'a>(
    resource: &'static Resource,
    namespace: Option<&'a str>,
    tail: &[&'a str],
) -> Result<Target<'a>, ApiError> {
    match tail {
        [] => Ok(Target::Collection { resource, namespace }),
        [name] => Ok(Target::Item { resource, namespace, name, sub: None }),
        [name, sub] if resource.subresources.contains(sub) => {
            Ok(Target::Item { resource, namespace, name, sub: Some(sub) })
        }
        _ => Err(not_found()),
    }
}

fn status_response(error: &ApiError) -> Response {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, [(header::CONTENT_TYPE, "application/json")], error.status().to_string()).into_response()
}

fn json_response(code: StatusCode, value: &Value) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}

async fn handle(
    State(store): State<Arc<Store>>,
    method: Method,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // The kubelet's configuration through the API server's node proxy, as `kubectl get --raw
    // /api/v1/nodes/<node>/proxy/configz` reads it: the simulated kubelets run with the defaults.
    if let (&Method::GET, Some(node)) = (&method, configz_node(uri.path())) {
        return match store.get(&crate::kinds::nodes(), "", node) {
            Ok(_) => json_response(StatusCode::OK, &crate::actors::Kubelet::default().configz()),
            Err(error) => status_response(&error),
        };
    }
    // The API server's health checks (kube-apiserver's /livez, /readyz, /healthz): always ok,
    // in plain text as kube-apiserver's healthz handler writes it.
    if method == Method::GET && matches!(uri.path().trim_end_matches('/'), "/livez" | "/readyz" | "/healthz")
    {
        return (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "ok").into_response();
    }
    if method == Method::GET && uri.path() == "/openapi/v2" {
        let protobuf = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("protobuf"));
        let (content_type, body) = openapi::v2(protobuf);
        return (StatusCode::OK, [(header::CONTENT_TYPE, content_type)], body).into_response();
    }
    let target = match parse_target(uri.path()) {
        Ok(target) => target,
        Err(error) => return status_response(&error),
    };
    if let (&Method::POST, Target::Item { namespace, name, sub: Some("eviction"), .. }) = (&method, &target) {
        let dry_run = query.get("dryRun").is_some_and(|v| v == "All");
        let result = match parse_body(&body) {
            Ok(eviction) => {
                eviction::evict(&store, namespace.unwrap_or_default(), name, eviction, dry_run).await
            }
            Err(e) => Err(e),
        };
        return match result {
            Ok(status) => json_response(StatusCode::CREATED, &status),
            Err(error) => status_response(&error),
        };
    }
    match respond(&store, &method, target, &query, &headers, &body) {
        Ok(Reply::Json(code, value)) => json_response(code, &value),
        Ok(Reply::Watch { selection, from, start, timeout }) => {
            watch::stream(store, selection, from, start, timeout)
        }
        Err(error) => status_response(&error),
    }
}

enum Reply {
    Json(StatusCode, Value),
    Watch {
        selection: watch::Selection,
        from: Option<u64>,
        start: watch::Start,
        timeout: std::time::Duration,
    },
}

fn respond(
    store: &Store,
    method: &Method,
    target: Target<'_>,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let dry_run = query.get("dryRun").is_some_and(|v| v == "All");
    if let Target::Collection { resource, .. } | Target::Item { resource, .. } = &target {
        check_served(resource, method, query)?;
    }
    match (method, target) {
        (&Method::GET, Target::Document(document)) => Ok(Reply::Json(StatusCode::OK, document)),
        (&Method::GET, Target::Collection { resource, namespace }) => {
            list_or_watch(store, resource, namespace, query, headers)
        }
        (&Method::POST, Target::Collection { resource, namespace }) => {
            let object = parse_body(body)?;
            check_kind(resource, &object)?;
            let created =
                store.create(&resource.store_kind(), namespace.unwrap_or_default(), object, dry_run)?;
            Ok(Reply::Json(StatusCode::CREATED, (*created).clone()))
        }
        (&Method::GET, Target::Item { resource, namespace, name, .. }) => {
            let object = store.get(&resource.store_kind(), namespace.unwrap_or_default(), name)?;
            if table::wanted(headers) {
                return ok(&table::of(resource, &[&*object], None, store.clock().now()));
            }
            ok(&object)
        }
        (&Method::PUT, Target::Item { resource, namespace, name, .. }) => {
            let object = parse_body(body)?;
            check_kind(resource, &object)?;
            if object.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| n != name) {
                return Err(ApiError::bad_request(
                    "the name of the object does not match the name in the URL",
                ));
            }
            ok(&*store.update(&resource.store_kind(), namespace.unwrap_or_default(), object, dry_run)?)
        }
        (&Method::PATCH, Target::Item { resource, namespace, name, .. }) => {
            let patch = parse_patch(headers, body)?;
            ok(&*store.patch(&resource.store_kind(), namespace.unwrap_or_default(), name, &patch, dry_run)?)
        }
        (&Method::DELETE, Target::Item { resource, namespace, name, sub: None }) => {
            let grace = grace_period(query, body)?;
            let precondition = delete_precondition(body)?;
            let namespace = namespace.unwrap_or_default();
            let kind = resource.store_kind();
            ok(&*store.delete_gracefully_if(
                &kind,
                namespace,
                name,
                grace,
                precondition.as_deref(),
                dry_run,
            )?)
        }
        (method, _) => Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: format!("the server does not allow this method on the requested resource ({method})"),
        }),
    }
}

/// A 200 with the value.
#[allow(clippy::unnecessary_wraps)]
fn ok(value: &Value) -> Result<Reply, ApiError> {
    Ok(Reply::Json(StatusCode::OK, value.clone()))
}

/// Whether the request asks for a watch (`watch=true` or `watch=1`).
fn is_watch(query: &HashMap<String, String>) -> bool {
    query.get("watch").is_some_and(|w| w == "true" || w == "1")
}

/// Whether the resource serves the request's verb: a read-only resource (metrics-server's)
/// refuses the rest, as the API server does for a verb a resource does not serve.
fn check_served(
    resource: &Resource,
    method: &Method,
    query: &HashMap<String, String>,
) -> Result<(), ApiError> {
    let verb = match *method {
        Method::GET if is_watch(query) => "watch",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "",
    };
    let served = resource.verbs.contains(&verb) || (verb == "get" && resource.verbs.contains(&"list"));
    if served {
        Ok(())
    } else {
        Err(ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".into(),
        })
    }
}

/// A collection's list (as a Table when the client asks for one), or a watch of it.
fn list_or_watch(
    store: &Store,
    resource: &'static Resource,
    namespace: Option<&str>,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Reply, ApiError> {
    let labels = selector(query, "labelSelector", LabelSelector::parse)?;
    let fields = selector(query, "fieldSelector", FieldSelector::parse)?;
    if is_watch(query) {
        let selection =
            watch::Selection { resource, namespace: namespace.map(str::to_owned), labels, fields };
        return watch_request(query, selection);
    }
    let (items, revision) = store.list(&resource.store_kind(), namespace, labels.as_ref(), fields.as_ref());
    let items: Vec<&Value> = items.iter().map(|i| &**i).collect();
    if table::wanted(headers) {
        return ok(&table::of(resource, &items, Some(revision.to_string()), store.clock().now()));
    }
    ok(&json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.api_version(),
        "metadata": {"resourceVersion": revision.to_string()},
        "items": items,
    }))
}

/// A watch from the request's resource version (none, or "0": from the current objects), for
/// `timeoutSeconds` (30 minutes by default).
fn watch_request(query: &HashMap<String, String>, selection: watch::Selection) -> Result<Reply, ApiError> {
    let version = query.get("resourceVersion").map(String::as_str).unwrap_or_default();
    let start = watch_start(query, version)?;
    let from = match version {
        "" | "0" => None,
        version => Some(
            version
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {version:?}")))?,
        ),
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map_or(std::time::Duration::from_secs(1800), std::time::Duration::from_secs);
    Ok(Reply::Watch { selection, from, start, timeout })
}

/// A deletion's grace period: `?gracePeriodSeconds=` or the DeleteOptions body's field.
fn grace_period(query: &HashMap<String, String>, body: &[u8]) -> Result<Option<u64>, ApiError> {
    if let Some(seconds) = query.get("gracePeriodSeconds") {
        return seconds
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds {seconds:?}")));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let options = parse_body(body)?;
    match options.get("gracePeriodSeconds") {
        None | Some(Value::Null) => Ok(None),
        Some(seconds) => seconds.as_u64().map(Some).ok_or_else(|| {
            ApiError::bad_request(format!("DeleteOptions.gracePeriodSeconds: invalid value {seconds}"))
        }),
    }
}

/// A deletion's `preconditions.resourceVersion` (DeleteOptions' body), if it names one.
fn delete_precondition(body: &[u8]) -> Result<Option<String>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let options = parse_body(body)?;
    match options.pointer("/preconditions/resourceVersion") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(version)) => Ok(Some(version.clone())),
        Some(other) => Err(ApiError::bad_request(format!(
            "DeleteOptions.preconditions.resourceVersion: invalid value {other}"
        ))),
    }
}

/// How a watch starts, from its list options as kube-apiserver reads them: `SetListOptionsDefaults`
/// (a watch from no resource version, or "0", sends the initial events), then
/// `validateWatchOptions` (`apimachinery/pkg/apis/meta/internalversion/validation`), whose
/// violations are a 422. A watch-list (`sendInitialEvents=true`) that allows bookmarks ends its
/// initial events with a bookmark annotated `k8s.io/initial-events-end`, which client-go's
/// reflector and kube-rs's streaming lists wait for.
fn watch_start(query: &HashMap<String, String>, version: &str) -> Result<watch::Start, ApiError> {
    let flag = |name: &str| query.get(name).map(|v| matches!(v.as_str(), "true" | "1" | "True" | "t"));
    let mut initial = flag("sendInitialEvents");
    let mut matching = query.get("resourceVersionMatch").map(String::as_str).unwrap_or_default();
    if initial.is_none() && matching.is_empty() && matches!(version, "" | "0") {
        initial = Some(true);
        matching = "NotOlderThan";
    }
    let mut errors = Vec::new();
    if initial.is_some() && matching != "NotOlderThan" {
        errors.push(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                .to_owned(),
        );
    }
    if !matching.is_empty() {
        if initial.is_none() {
            errors.push(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
                    .to_owned(),
            );
        }
        if matching != "NotOlderThan" {
            errors.push(format!(
                "resourceVersionMatch: Unsupported value: {matching:?}: supported values: \"NotOlderThan\""
            ));
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::invalid("ListOptions.meta.k8s.io", "", &format!("[{}]", errors.join(", "))));
    }
    Ok(watch::Start {
        initial_events: initial == Some(true),
        bookmarks: flag("allowWatchBookmarks") == Some(true),
    })
}

fn selector<T>(
    query: &HashMap<String, String>,
    name: &str,
    parse: impl Fn(&str) -> Result<T, evac_cluster::SelectorError>,
) -> Result<Option<T>, ApiError> {
    query
        .get(name)
        .filter(|text| !text.is_empty())
        .map(|text| parse(text).map_err(|e| ApiError::bad_request(format!("unable to parse {name}: {e}"))))
        .transpose()
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the body of the request was in an unknown format: {e}"))
    })?;
    if !value.is_object() {
        return Err(ApiError::bad_request("the body of the request is not an object"));
    }
    Ok(value)
}

fn check_kind(resource: &Resource, object: &Value) -> Result<(), ApiError> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or(resource.kind);
    let api_version = object.get("apiVersion").and_then(Value::as_str).map(str::to_owned);
    if kind != resource.kind || api_version.is_some_and(|v| v != resource.api_version()) {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({}) does not match the expected API version ({})",
            object.get("apiVersion").and_then(Value::as_str).unwrap_or_default(),
            resource.api_version()
        )));
    }
    Ok(())
}

fn parse_patch(headers: &HeaderMap, body: &[u8]) -> Result<Patch, ApiError> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let invalid = |e: serde_json::Error| ApiError::bad_request(format!("invalid patch: {e}"));
    match media {
        // A strategic merge patch of the objects simulated here merges as a JSON merge patch
        // does: none of their lists is patched by key.
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            Ok(Patch::Merge(serde_json::from_slice(body).map_err(invalid)?))
        }
        "application/json-patch+json" => Ok(Patch::Json(serde_json::from_slice(body).map_err(invalid)?)),
        other => Err(ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message: format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {other:?})"),
        }),
    }
}

/// The node of a `/api/v1/nodes/<node>/proxy/configz` path.
fn configz_node(path: &str) -> Option<&str> {
    let node = path.strip_prefix("/api/v1/nodes/")?.strip_suffix("/proxy/configz")?;
    (!node.is_empty() && !node.contains('/')).then_some(node)
}
