//! The back end against a fake API server on loopback, which answers discovery, list, watch and
//! patch requests as kube-apiserver does, and records the patches it receives.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::Response;
use axum::Router;
use evac_core::effect::{EvacuationSource, ObjectRef};
use evac_core::ReadErrorKind;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher::Event;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::cache::{Loader, WatchCache};
use super::KubeCluster;
use crate::Kind;
use crate::{Effect, Executor, ListQuery, ObjectSource, ReadError};

/// A patch the fake API server received.
#[derive(Debug, Clone)]
struct RecordedPatch {
    path: String,
    query: String,
    content_type: String,
    body: Value,
}

struct FakeApiServer {
    /// Watch events (JSON lines) of pods, from the start: every watch replays them, which a
    /// cache must tolerate anyway (an `ADDED` of a known object is an update).
    pod_events: watch::Sender<Vec<String>>,
    /// No VMI changes in these tests: a watch that stays open and silent.
    vmi_events: watch::Sender<Vec<String>>,
    patches: Mutex<Vec<RecordedPatch>>,
    /// While set, every new request hangs unanswered, as from an API server that accepts
    /// connections and does no work.
    hung: AtomicBool,
}

impl FakeApiServer {
    fn push_pod_event(&self, kind: &str, object: Value) {
        let line = format!("{}\n", json!({"type": kind, "object": object}));
        self.pod_events.send_modify(|events| events.push(line));
    }

    fn patches(&self) -> Vec<RecordedPatch> {
        self.patches.lock().unwrap().clone()
    }
}

fn managed_fields() -> Value {
    json!([{"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:phase": {}}}}])
}

/// List items of built-in kinds come without apiVersion and kind, as from kube-apiserver.
fn initial_pods() -> Vec<Value> {
    vec![
        json!({
            "metadata": {"name": "virt-launcher-web-1-abcde", "namespace": "default", "resourceVersion": "10",
                         "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": "web-1"},
                         "managedFields": managed_fields()},
            "spec": {"nodeName": "node01"},
            "status": {"phase": "Running"}
        }),
        json!({
            "metadata": {"name": "nginx", "namespace": "other", "resourceVersion": "11",
                         "labels": {"app": "nginx"}, "managedFields": managed_fields()},
            "spec": {"nodeName": "node02"},
            "status": {"phase": "Running"}
        }),
    ]
}

fn vmi(name: &str) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "12"},
        "spec": {"evictionStrategy": "LiveMigrate"},
        "status": {"nodeName": "node01"}
    })
}

fn resource_list(group_version: &str, resources: &[(&str, &str)]) -> Value {
    let resources: Vec<Value> = resources
        .iter()
        .map(|(name, kind)| {
            json!({"name": name, "singularName": kind.to_lowercase(), "namespaced": true, "kind": kind,
                   "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

fn list(items: Vec<Value>) -> Value {
    json!({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "100"}, "items": items})
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

fn answer(code: u16, body: &Value) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

/// A watch: the recorded events, then each new one as it is pushed; the connection stays open.
fn watch_stream(events: &watch::Sender<Vec<String>>) -> Response {
    let receiver = events.subscribe();
    let lines = futures::stream::unfold((receiver, 0usize), |(mut receiver, sent)| async move {
        loop {
            let events = receiver.borrow_and_update().clone();
            if events.len() > sent {
                let chunk = events[sent..].concat();
                return Some((Ok::<_, Infallible>(chunk), (receiver, events.len())));
            }
            receiver.changed().await.ok()?;
        }
    });
    Response::builder().header("content-type", "application/json").body(Body::from_stream(lines)).unwrap()
}

async fn handle(State(fake): State<Arc<FakeApiServer>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or_default().to_owned();
    let watching = query.split('&').any(|pair| pair == "watch=true");
    if fake.hung.load(Ordering::SeqCst) {
        return std::future::pending().await;
    }
    match (request.method().clone(), path.as_str()) {
        (Method::GET, "/livez") => Response::builder().body(Body::from("ok")).unwrap(),
        (Method::GET, "/api/v1") => {
            answer(200, &resource_list("v1", &[("pods", "Pod"), ("pods/eviction", "Eviction")]))
        }
        (Method::GET, "/apis/kubevirt.io/v1") => answer(
            200,
            &resource_list(
                "kubevirt.io/v1",
                &[("virtualmachineinstances", "VirtualMachineInstance"), ("kubevirts", "KubeVirt")],
            ),
        ),
        (Method::GET, "/api/v1/pods") if watching => watch_stream(&fake.pod_events),
        (Method::GET, "/api/v1/pods") => answer(200, &list(initial_pods())),
        (Method::GET, "/apis/kubevirt.io/v1/virtualmachineinstances") if watching => {
            watch_stream(&fake.vmi_events)
        }
        (Method::GET, "/apis/kubevirt.io/v1/virtualmachineinstances") => {
            answer(200, &list(vec![vmi("web-1")]))
        }
        (Method::GET, "/apis/kubevirt.io/v1/kubevirts") => {
            answer(500, &status(500, "InternalError", "etcdserver: request timed out"))
        }
        (Method::PATCH, _) if path.starts_with("/apis/kubevirt.io/v1/namespaces/") => {
            let content_type = request
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let body = axum::body::to_bytes(request.into_body(), 1 << 20).await.unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap();
            fake.patches.lock().unwrap().push(RecordedPatch {
                path: path.clone(),
                query,
                content_type,
                body,
            });
            if path == "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/web-1" {
                return answer(200, &vmi("web-1"));
            }
            let name = path.rsplit('/').next().unwrap_or_default();
            let message = format!("virtualmachineinstances.kubevirt.io \"{name}\" not found");
            answer(404, &status(404, "NotFound", &message))
        }
        _ => answer(404, &status(404, "NotFound", "the server could not find the requested resource")),
    }
}

/// Starts the fake API server; returns it and a kubeconfig pointing at it.
async fn start_fake() -> (Arc<FakeApiServer>, tempfile::TempDir) {
    let fake = Arc::new(FakeApiServer {
        pod_events: watch::channel(Vec::new()).0,
        vmi_events: watch::channel(Vec::new()).0,
        patches: Mutex::default(),
        hung: AtomicBool::new(false),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let router = Router::new().fallback(handle).with_state(Arc::clone(&fake));
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (fake, kubeconfig(port))
}

fn kubeconfig(port: u16) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let text = crate::kubeconfig(&format!("http://127.0.0.1:{port}"));
    std::fs::write(dir.path().join("kubeconfig"), text).unwrap();
    dir
}

fn grant(api_version: &str, kind: &str) -> Kind {
    Kind { api_version: api_version.into(), kind: kind.into() }
}

fn pods_and_vmis() -> Vec<Kind> {
    vec![grant("v1", "Pod"), grant("kubevirt.io/v1", "VirtualMachineInstance")]
}

async fn connect(dir: &tempfile::TempDir, resources: &[Kind]) -> anyhow::Result<KubeCluster> {
    let path = dir.path().join("kubeconfig");
    Ok(tokio::time::timeout(Duration::from_secs(10), KubeCluster::connect(Some(&path), resources)).await??)
}

fn parse(json: &[u8]) -> Value {
    serde_json::from_slice(json).unwrap()
}

fn names(list: &[u8]) -> Vec<String> {
    let list = parse(list);
    assert_eq!((list["apiVersion"].as_str(), list["kind"].as_str()), (Some("v1"), Some("List")));
    let items = list["items"].as_array().unwrap();
    items.iter().map(|item| item["metadata"]["name"].as_str().unwrap().to_owned()).collect()
}

fn pod_query<'a>(
    namespace: Option<&'a str>,
    labels: Option<&'a str>,
    fields: Option<&'a str>,
) -> ListQuery<'a> {
    ListQuery { namespace, label_selector: labels, field_selector: fields }
}

/// Polls `check` until it holds, for up to 10 s.
async fn eventually(what: &str, check: impl Fn() -> bool) {
    for _ in 0..200 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn reads_are_answered_from_the_watch_caches() {
    let (fake, dir) = start_fake().await;
    let cluster = connect(&dir, &pods_and_vmis()).await.unwrap();
    cluster.wait_synced(Duration::from_secs(10)).await.unwrap();
    assert!(cluster.is_synced());

    let pod = parse(&cluster.get("v1", "Pod", Some("default"), "virt-launcher-web-1-abcde").unwrap());
    assert_eq!(pod["apiVersion"], "v1");
    assert_eq!(pod["kind"], "Pod");
    assert_eq!(pod["metadata"]["labels"]["kubevirt.io"], "virt-launcher");
    assert_eq!(pod["spec"]["nodeName"], "node01");
    assert!(pod["metadata"].get("managedFields").is_none(), "{pod}");
    let vmi =
        parse(&cluster.get("kubevirt.io/v1", "VirtualMachineInstance", Some("default"), "web-1").unwrap());
    assert_eq!(vmi["kind"], "VirtualMachineInstance");
    assert_eq!(vmi["status"]["nodeName"], "node01");

    let missing = cluster.get("v1", "Pod", Some("default"), "nope").unwrap_err();
    assert_eq!(missing, ReadError::not_found("v1", "Pod", "nope"));
    assert_eq!(missing.message, r#"pods "nope" not found"#);
    let elsewhere = cluster.get("v1", "Pod", Some("other"), "virt-launcher-web-1-abcde").unwrap_err();
    assert_eq!(elsewhere.kind, ReadErrorKind::NotFound);
    let missing_vmi =
        cluster.get("kubevirt.io/v1", "VirtualMachineInstance", Some("default"), "x").unwrap_err();
    assert_eq!(missing_vmi.message, r#"virtualmachineinstances.kubevirt.io "x" not found"#);

    let all = cluster.list("v1", "Pod", &ListQuery::default()).unwrap();
    assert_eq!(names(&all), ["virt-launcher-web-1-abcde", "nginx"]);
    assert!(parse(&all)["items"].as_array().unwrap().iter().all(|item| item["kind"] == "Pod"));
    let launchers =
        cluster.list("v1", "Pod", &pod_query(None, Some("kubevirt.io=virt-launcher"), None)).unwrap();
    assert_eq!(names(&launchers), ["virt-launcher-web-1-abcde"]);
    let in_other = cluster.list("v1", "Pod", &pod_query(Some("other"), None, None)).unwrap();
    assert_eq!(names(&in_other), ["nginx"]);
    let on_node02 = cluster.list("v1", "Pod", &pod_query(None, None, Some("spec.nodeName=node02"))).unwrap();
    assert_eq!(names(&on_node02), ["nginx"]);
    // Selectable fields are matched from what the cache kept of them; others from the object.
    let running_not_node01 =
        pod_query(None, None, Some("status.phase=Running,spec.nodeName!=node01,metadata.namespace=other"));
    assert_eq!(names(&cluster.list("v1", "Pod", &running_not_node01).unwrap()), ["nginx"]);
    let unnominated =
        cluster.list("v1", "Pod", &pod_query(None, None, Some("status.nominatedNodeName="))).unwrap();
    assert_eq!(names(&unnominated), ["virt-launcher-web-1-abcde", "nginx"]);
    let by_other_field =
        cluster.list("v1", "Pod", &pod_query(None, None, Some("metadata.resourceVersion=11"))).unwrap();
    assert_eq!(names(&by_other_field), ["nginx"]);
    let none = cluster.list("v1", "Pod", &pod_query(Some("default"), Some("app=nginx"), None)).unwrap();
    assert!(names(&none).is_empty());
    let invalid = cluster.list("v1", "Pod", &pod_query(None, Some("app in (x"), None)).unwrap_err();
    assert_eq!(invalid.kind, ReadErrorKind::Other);

    let unwatched = cluster.get("v1", "Node", None, "node01").unwrap_err();
    assert_eq!(unwatched.kind, ReadErrorKind::Other);
    assert_eq!(unwatched.message, "v1 Node is not watched: add it to the policy's contextAwareResources");
    assert!(cluster
        .list("v1", "Node", &ListQuery::default())
        .unwrap_err()
        .message
        .contains("is not watched"));

    // Changes arrive through the watch.
    fake.push_pod_event(
        "ADDED",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "late", "namespace": "default", "resourceVersion": "101",
                            "managedFields": managed_fields()},
               "spec": {"nodeName": "node03"}}),
    );
    eventually("the added pod is visible", || cluster.get("v1", "Pod", Some("default"), "late").is_ok())
        .await;
    let late = parse(&cluster.get("v1", "Pod", Some("default"), "late").unwrap());
    assert!(late["metadata"].get("managedFields").is_none(), "{late}");
    fake.push_pod_event(
        "MODIFIED",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "late", "namespace": "default", "resourceVersion": "102"},
               "spec": {"nodeName": "node04"}}),
    );
    let node_of_late =
        || parse(&cluster.get("v1", "Pod", Some("default"), "late").unwrap())["spec"]["nodeName"].clone();
    eventually("the modified pod is visible", || node_of_late() == "node04").await;
    fake.push_pod_event(
        "DELETED",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "nginx", "namespace": "other", "resourceVersion": "103"}}),
    );
    eventually("the deleted pod is gone", || {
        cluster.get("v1", "Pod", Some("other"), "nginx").is_err_and(|e| e.kind == ReadErrorKind::NotFound)
    })
    .await;
    let all = cluster.list("v1", "Pod", &ListQuery::default()).unwrap();
    assert_eq!(names(&all), ["late", "virt-launcher-web-1-abcde"]);
}

fn mark(name: &str, dry_run: bool, source: Option<EvacuationSource>) -> Effect {
    Effect::MarkForEvacuation { vmi: ObjectRef::new("default", name), node: "node01".into(), dry_run, source }
}

#[tokio::test]
async fn marking_for_evacuation_is_one_merge_patch_on_the_vmi() {
    let (fake, dir) = start_fake().await;
    let cluster = Arc::new(connect(&dir, &[]).await.unwrap());
    let executor = Executor::new(cluster);

    executor.apply(&mark("web-1", false, None)).await.unwrap();
    executor.apply(&mark("web-1", true, Some(EvacuationSource::Descheduler))).await.unwrap();
    let patches = fake.patches();
    assert_eq!(patches.len(), 2, "{patches:?}");
    for patch in &patches {
        assert_eq!(patch.path, "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/web-1");
        assert_eq!(patch.content_type, "application/merge-patch+json");
    }
    // No source: a source left by an earlier mark or request (evac's own cause) is removed, as
    // the mark is now the eviction's; a request is replaced by the mark.
    assert_eq!(
        patches[0].body,
        json!({"status": {"evacuationNodeName": "node01"},
               "metadata": {"annotations": {"kubevirt.io/eviction-source": null,
                                            "evac.kubevirt.io/evacuate-from": null}}})
    );
    assert!(!patches[0].query.contains("dryRun"), "{}", patches[0].query);
    assert_eq!(
        patches[1].body,
        json!({"status": {"evacuationNodeName": "node01"},
               "metadata": {"annotations": {"kubevirt.io/eviction-source": "descheduler",
                                            "evac.kubevirt.io/evacuate-from": null}}})
    );
    assert!(patches[1].query.split('&').any(|pair| pair == "dryRun=All"), "{}", patches[1].query);

    let error = executor.apply(&mark("ghost", false, None)).await.unwrap_err();
    assert_eq!(error.to_string(), r#"virtualmachineinstances.kubevirt.io "ghost" not found"#);
    assert_eq!((error.error.code, error.error.reason), (404, "NotFound"));
}

#[tokio::test]
async fn a_cache_that_cannot_list_says_why() {
    let (_fake, dir) = start_fake().await;
    let cluster = connect(&dir, &[grant("kubevirt.io/v1", "KubeVirt")]).await.unwrap();
    let error = format!("{:#}", cluster.wait_synced(Duration::from_millis(1500)).await.unwrap_err());
    assert!(error.contains("kubevirt.io/v1 KubeVirt"), "{error}");
    assert!(error.contains("etcdserver: request timed out"), "{error}");
    assert!(error.contains("http://127.0.0.1:"), "{error}");
    assert!(!cluster.is_synced());

    let read = cluster.get("kubevirt.io/v1", "KubeVirt", Some("kubevirt"), "kubevirt").unwrap_err();
    assert_eq!(read.kind, ReadErrorKind::Other);
    assert!(read.message.contains("has not completed the initial list"), "{}", read.message);
    assert!(read.message.contains("etcdserver: request timed out"), "{}", read.message);
    let list = cluster.list("kubevirt.io/v1", "KubeVirt", &ListQuery::default()).unwrap_err();
    assert_eq!(list.kind, ReadErrorKind::Other);
}

/// A watch that fails on every retry while the API server answers (its list times out in etcd)
/// counts as failing from its first error: the retries' lists start over, but none is answered.
#[tokio::test]
async fn a_watch_failing_on_every_retry_makes_the_caches_stale() {
    let (_fake, dir) = start_fake().await;
    let cluster = connect(&dir, &[grant("kubevirt.io/v1", "KubeVirt")]).await.unwrap();
    // Longer than the longest wait between retries: counted across them, not from the last one.
    let bound = Duration::from_secs(6);
    eventually("the failing watch counts as stale", || cluster.staleness(bound).is_some()).await;
    let why = cluster.staleness(bound).unwrap();
    assert!(why.contains("the watch of kubevirt.io/v1 KubeVirt has been failing"), "{why}");
    assert!(why.contains("etcdserver: request timed out"), "{why}");
}

#[tokio::test]
async fn resources_the_server_does_not_serve_fail_at_connect() {
    let (_fake, dir) = start_fake().await;
    let error = format!("{:#}", connect(&dir, &[grant("v1", "Secret")]).await.err().unwrap());
    assert!(
        error.contains("cannot watch v1 Secret on the Kubernetes API server http://127.0.0.1:"),
        "{error}"
    );
    assert!(error.contains("does not serve kind Secret in v1"), "{error}");

    let error = format!("{:#}", connect(&dir, &[grant("example.io/v1", "Widget")]).await.err().unwrap());
    assert!(error.contains("cannot watch example.io/v1 Widget"), "{error}");
    assert!(error.contains("does not serve example.io/v1"), "{error}");

    let error = format!("{:#}", connect(&dir, &[grant("a/b/c", "Widget")]).await.err().unwrap());
    assert!(error.contains("invalid apiVersion"), "{error}");

    // metrics-server is an add-on: a cluster without it still connects, and reads of its
    // NodeMetrics fail (decisions take that as no figure).
    let cluster = connect(&dir, &[grant("metrics.k8s.io/v1beta1", "NodeMetrics")]).await.unwrap();
    assert!(cluster.get("metrics.k8s.io/v1beta1", "NodeMetrics", None, "node01").is_err());
}

#[tokio::test]
async fn an_unreachable_server_fails_at_connect() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dir = kubeconfig(port);
    let started = std::time::Instant::now();
    let error = format!("{:#}", connect(&dir, &pods_and_vmis()).await.err().unwrap());
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(error.contains(&format!("Kubernetes API server http://127.0.0.1:{port}")), "{error}");
    assert!(error.contains("v1 Pod") || error.contains("VirtualMachineInstance"), "{error}");
    assert!(error.to_lowercase().contains("connection refused"), "{error}");

    let missing = dir.path().join("missing");
    let error = format!("{:#}", KubeCluster::connect(Some(&missing), &[]).await.err().unwrap());
    assert!(error.contains("cannot read kubeconfig"), "{error}");
}

fn pods_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Pod"), "pods")
}

fn pod(name: &str) -> DynamicObject {
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": "1"}}),
    )
    .unwrap()
}

#[test]
fn a_relist_replaces_the_contents_at_once() {
    let cache = WatchCache::new(pods_resource(), true, Default::default(), Default::default());
    let mut loader = Loader::new(Arc::clone(&cache));
    let get = |name: &str| cache.get(Some("default"), name);

    loader.apply(Event::Init);
    loader.apply(Event::InitApply(pod("a")));
    assert!(!cache.is_synced());
    let not_yet = get("a").unwrap_err();
    assert_eq!(not_yet.kind, ReadErrorKind::Other);
    assert!(not_yet.message.contains("v1 Pod cannot be read yet"), "{}", not_yet.message);
    loader.apply(Event::InitDone);
    assert!(cache.is_synced());
    let a = parse(&get("a").unwrap());
    assert_eq!((a["apiVersion"].as_str(), a["kind"].as_str()), (Some("v1"), Some("Pod")));

    // A relist keeps serving the previous contents until it completes.
    loader.apply(Event::Init);
    loader.apply(Event::InitApply(pod("b")));
    assert!(get("a").is_ok());
    assert_eq!(get("b").unwrap_err().kind, ReadErrorKind::NotFound);
    loader.apply(Event::InitDone);
    assert_eq!(get("a").unwrap_err().kind, ReadErrorKind::NotFound);
    assert!(get("b").is_ok());

    loader.apply(Event::Apply(pod("c")));
    loader.apply(Event::Delete(pod("b")));
    assert_eq!(names(&cache.list(&ListQuery::default()).unwrap()), ["c"]);
}

// --- Change feed -------------------------------------------------------------------------------

use super::change_log::CAPACITY;
use crate::{Change, ChangeFeed};

fn pod_on(name: &str, node: &str) -> DynamicObject {
    serde_json::from_value(
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"nodeName": node}}),
    )
    .unwrap()
}

/// `name[:deleted]@node` of each change, in order.
fn described(changes: &[Change]) -> Vec<String> {
    changes
        .iter()
        .map(|change| {
            let object = parse(&change.object);
            let deleted = if change.deleted { ":deleted" } else { "" };
            format!(
                "{}{deleted}@{}",
                object["metadata"]["name"].as_str().unwrap(),
                object["spec"]["nodeName"]
            )
            .replace('"', "")
        })
        .collect()
}

/// A synced cache of pods `a` and `b`, and the loader that feeds it.
fn synced_pods() -> (Arc<WatchCache>, Loader) {
    let cache = WatchCache::new(pods_resource(), true, Default::default(), Default::default());
    let mut loader = Loader::new(Arc::clone(&cache));
    loader.apply(Event::Init);
    loader.apply(Event::InitApply(pod_on("a", "node01")));
    loader.apply(Event::InitApply(pod_on("b", "node01")));
    loader.apply(Event::InitDone);
    (cache, loader)
}

#[test]
fn the_change_log_gives_the_changes_after_a_cursor() {
    let cache = WatchCache::new(pods_resource(), true, Default::default(), Default::default());
    let not_yet = cache.changes_since(None).unwrap_err();
    assert!(not_yet.message.contains("has not completed the initial list"), "{}", not_yet.message);

    let (cache, mut loader) = synced_pods();
    // No cursor: every object, as a change.
    let (changes, start) = cache.changes_since(None).unwrap();
    assert_eq!(described(&changes), ["a@node01", "b@node01"]);
    let (changes, same) = cache.changes_since(Some(start)).unwrap();
    assert!(changes.is_empty());
    assert_eq!(same, start);

    // Updates, an addition and a deletion (with the object's last state), in order.
    loader.apply(Event::Apply(pod_on("a", "node02")));
    loader.apply(Event::Apply(pod_on("c", "node03")));
    loader.apply(Event::Delete(pod_on("b", "node01")));
    let (changes, after) = cache.changes_since(Some(start)).unwrap();
    assert_eq!(described(&changes), ["a@node02", "c@node03", "b:deleted@node01"]);
    assert!(after > start);
    // The changes are the stored objects, typed as policies read them.
    let c = parse(&changes[1].object);
    assert_eq!((c["apiVersion"].as_str(), c["kind"].as_str()), (Some("v1"), Some("Pod")));

    // A consumer resumes where it left off, from any cursor the log still covers.
    loader.apply(Event::Apply(pod_on("c", "node04")));
    let (changes, latest) = cache.changes_since(Some(after)).unwrap();
    assert_eq!(described(&changes), ["c@node04"]);
    let (changes, again) = cache.changes_since(Some(start)).unwrap();
    assert_eq!(described(&changes), ["a@node02", "c@node03", "b:deleted@node01", "c@node04"]);
    assert_eq!(again, latest);
    // A cursor the log never gave (from another cache, or a restarted process) resyncs.
    let (changes, _) = cache.changes_since(Some(latest + 1)).unwrap();
    assert_eq!(described(&changes), ["a@node02", "c@node04"]);
}

#[test]
fn a_relist_makes_consumers_resync() {
    let (cache, mut loader) = synced_pods();
    let (_, cursor) = cache.changes_since(None).unwrap();
    loader.apply(Event::Apply(pod_on("a", "node02")));

    // The watch failed and relisted: `b` went while it was down, with no event to tell it.
    loader.apply(Event::Init);
    loader.apply(Event::InitApply(pod_on("a", "node02")));
    loader.apply(Event::InitApply(pod_on("d", "node01")));
    // Until the relist completes, the log still answers from the previous contents.
    let (changes, _) = cache.changes_since(Some(cursor)).unwrap();
    assert_eq!(described(&changes), ["a@node02"]);
    loader.apply(Event::InitDone);

    // Every cursor from before the relist resyncs: the current objects.
    let (changes, relisted) = cache.changes_since(Some(cursor)).unwrap();
    assert_eq!(described(&changes), ["a@node02", "d@node01"]);
    assert!(relisted > cursor);
    // After it, changes again.
    loader.apply(Event::Delete(pod_on("d", "node01")));
    let (changes, _) = cache.changes_since(Some(relisted)).unwrap();
    assert_eq!(described(&changes), ["d:deleted@node01"]);
}

#[test]
fn a_cursor_older_than_the_log_resyncs() {
    let (cache, mut loader) = synced_pods();
    let (_, start) = cache.changes_since(None).unwrap();
    loader.apply(Event::Apply(pod_on("a", "node02")));
    let (_, covered) = cache.changes_since(Some(start)).unwrap();
    // Fill the log past its capacity: the change after `start` falls out, the one after `covered`
    // is the oldest kept.
    for i in 0..CAPACITY {
        loader.apply(Event::Apply(pod_on("b", &format!("node{i}"))));
    }
    let (changes, latest) = cache.changes_since(Some(covered)).unwrap();
    assert_eq!(changes.len(), CAPACITY);
    assert_eq!(described(&changes[..1]), ["b@node0"]);
    let (changes, resynced) = cache.changes_since(Some(start)).unwrap();
    assert_eq!(described(&changes), ["a@node02".to_owned(), format!("b@node{}", CAPACITY - 1)]);
    assert_eq!(resynced, latest);
}

/// Through the API: the cluster's change feed follows its watches, and refuses a kind it does
/// not watch.
#[tokio::test]
async fn the_change_feed_follows_the_watches() {
    let (fake, dir) = start_fake().await;
    let cluster = connect(&dir, &pods_and_vmis()).await.unwrap();
    cluster.wait_synced(Duration::from_secs(10)).await.unwrap();
    let (changes, cursor) = cluster.changes("v1", "Pod", None).unwrap();
    assert_eq!(changes.len(), 2);
    let (vmis, _) = cluster.changes("kubevirt.io/v1", "VirtualMachineInstance", None).unwrap();
    assert_eq!(vmis.len(), 1);

    fake.push_pod_event(
        "MODIFIED",
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "nginx", "namespace": "other", "resourceVersion": "104"},
               "spec": {"nodeName": "node05"}}),
    );
    eventually("the change reaches the feed", || {
        cluster
            .changes("v1", "Pod", Some(cursor))
            .is_ok_and(|(changes, _)| described(&changes) == ["nginx@node05"])
    })
    .await;

    let unwatched = cluster.changes("v1", "Node", None).unwrap_err();
    assert_eq!(unwatched.kind, ReadErrorKind::Other);
    assert_eq!(
        unwatched.message,
        "v1 Node is not watched: the change feed follows only the resources given at connect"
    );
}

#[tokio::test]
async fn a_hung_api_server_makes_the_caches_stale_until_it_answers_again() {
    let (fake, dir) = start_fake().await;
    let cluster = connect(&dir, &pods_and_vmis()).await.unwrap();
    cluster.wait_synced(Duration::from_secs(10)).await.unwrap();
    let bound = super::PROBE_INTERVAL * 3;
    assert_eq!(cluster.staleness(bound), None);

    // Hung, not down: the open watches stay silent and report no error.
    fake.hung.store(true, Ordering::SeqCst);
    eventually("the caches count as stale", || cluster.staleness(bound).is_some()).await;
    let why = cluster.staleness(bound).unwrap();
    assert!(why.contains("has not answered for"), "{why}");
    assert!(why.contains("http://127.0.0.1:"), "{why}");
    assert!(
        cluster.get("v1", "Pod", Some("default"), "virt-launcher-web-1-abcde").is_ok(),
        "reads still answer"
    );

    fake.hung.store(false, Ordering::SeqCst);
    eventually("the API server counts as answering again", || cluster.staleness(bound).is_none()).await;
}

#[test]
fn a_failing_watch_counts_from_its_first_error_until_the_next_event() {
    let cache = WatchCache::new(pods_resource(), true, Default::default(), Default::default());
    let mut loader = Loader::new(Arc::clone(&cache));
    loader.apply(Event::Init);
    loader.apply(Event::InitDone);
    assert_eq!(cache.failing(), None);

    cache.record_error(&kube::runtime::watcher::Error::NoResourceVersion);
    let (first, error) = cache.failing().unwrap();
    assert!(!error.is_empty());
    std::thread::sleep(Duration::from_millis(20));
    cache.record_error(&kube::runtime::watcher::Error::NoResourceVersion);
    let (later, _) = cache.failing().unwrap();
    assert!(later >= first + Duration::from_millis(20), "counted from the first error: {first:?} {later:?}");

    // A retry's `Init` comes before its list is asked for: the run goes on until the list answers.
    loader.apply(Event::Init);
    assert!(cache.failing().is_some(), "Init is not an answer");
    loader.apply(Event::InitDone);
    assert_eq!(cache.failing(), None, "the list's end ends the run of errors");

    cache.record_error(&kube::runtime::watcher::Error::NoResourceVersion);
    loader.apply(Event::Apply(pod("a")));
    assert_eq!(cache.failing(), None, "an event ends the run of errors");
}

/// A resource without watch (metrics-server's NodeMetrics) is listed again and again; while its
/// API is down it reads as empty (no figure), not as never synced, nor as the figures of before.
#[tokio::test]
async fn a_polled_resource_reads_empty_while_its_api_is_down() {
    let down = Arc::new(AtomicBool::new(false));
    let serve = {
        let down = Arc::clone(&down);
        move || {
            let down = Arc::clone(&down);
            async move {
                if down.load(Ordering::SeqCst) {
                    return answer(
                        503,
                        &status(
                            503,
                            "ServiceUnavailable",
                            "the server is currently unable to handle the request",
                        ),
                    );
                }
                let node = json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
                                  "metadata": {"name": "node01", "resourceVersion": "1"},
                                  "usage": {"cpu": "1", "memory": "1Gi"}});
                answer(200, &list(vec![node]))
            }
        }
    };
    let router = Router::new().route("/apis/metrics.k8s.io/v1beta1/nodes", axum::routing::get(serve));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, router).await });
    let dir = kubeconfig(port);
    let config = super::discovery::load_config(Some(&dir.path().join("kubeconfig"))).await.unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("metrics.k8s.io", "v1beta1", "NodeMetrics"),
        "nodes",
    );
    let cache = WatchCache::new(resource, false, Default::default(), Default::default());
    let task = tokio::spawn(Arc::clone(&cache).poll(client, Duration::from_millis(50)));
    let count = |cache: &WatchCache| cache.list(&ListQuery::default()).map(|l| names(&l).len());
    eventually("the first list", || count(&cache) == Ok(1)).await;
    down.store(true, Ordering::SeqCst);
    // Empty, and synced: an add-on that is down does not make the host unready.
    eventually("empty while down", || count(&cache) == Ok(0)).await;
    assert!(cache.is_synced());
    down.store(false, Ordering::SeqCst);
    eventually("figures again", || count(&cache) == Ok(1)).await;
    task.abort();
}
