//! The simulated API through real clients: kube-rs, and the `kubectl` on the PATH.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch as KubePatch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::Client;
use serde_json::json;

use super::router;
use crate::{SimClock, Store};

struct TestApi {
    url: String,
    store: Arc<Store>,
    client: Client,
}

async fn serve(history: usize) -> TestApi {
    let store = Arc::new(Store::new(Arc::new(SimClock::default()), history));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(Arc::clone(&store));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let config = kube::Config::new(url.parse().unwrap());
    let client = Client::try_from(config).unwrap();
    TestApi { url, store, client }
}

fn pod(name: &str, node: &str, app: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
    }))
    .unwrap()
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect()
}

#[tokio::test]
async fn kube_rs_reads_and_writes() {
    let api = serve(1000).await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("a", "node01", "web")).await.unwrap();
    pods.create(&PostParams::default(), &pod("b", "node02", "web")).await.unwrap();
    pods.create(&PostParams::default(), &pod("c", "node02", "db")).await.unwrap();

    let got = pods.get("a").await.unwrap();
    assert!(got.metadata.uid.is_some() && got.metadata.resource_version.is_some());
    let web = pods.list(&ListParams::default().labels("app=web")).await.unwrap();
    assert_eq!(names(&web.items), ["a", "b"]);
    let on_node02 = pods.list(&ListParams::default().fields("spec.nodeName=node02")).await.unwrap();
    assert_eq!(names(&on_node02.items), ["b", "c"]);
    let everywhere: Api<Pod> = Api::all(api.client.clone());
    assert_eq!(everywhere.list(&ListParams::default()).await.unwrap().items.len(), 3);

    // Patches: merge and JSON.
    let merged = pods
        .patch(
            "a",
            &PatchParams::default(),
            &KubePatch::Merge(json!({"metadata": {"annotations": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata.annotations.unwrap()["x"], "y");
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec/nodeName", "value": "node03"}]))
            .unwrap();
    let patched = pods.patch("a", &PatchParams::default(), &KubePatch::<()>::Json(ops)).await.unwrap();
    assert_eq!(patched.spec.unwrap().node_name.as_deref(), Some("node03"));

    // A replace based on an old version conflicts; a dry run changes nothing.
    let stale = got;
    let err = pods.replace("a", &PostParams::default(), &stale).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(e) if e.code == 409 && e.reason == "Conflict"), "{err:?}");
    let dry = PostParams { dry_run: true, ..Default::default() };
    pods.create(&dry, &pod("d", "node01", "web")).await.unwrap();
    let err = pods.get("d").await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 404 && e.message == r#"pods "d" not found"#),
        "{err:?}"
    );
    let err = pods.create(&PostParams::default(), &pod("a", "node01", "web")).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(e) if e.code == 409 && e.reason == "AlreadyExists"), "{err:?}");
}

/// A deletion with `preconditions.resourceVersion` deletes only that version (409 otherwise, worded
/// as the API server words it): how evac deletes an evacuation migration that has not started.
#[tokio::test]
async fn deletions_honour_a_resource_version_precondition() {
    let api = serve(1000).await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    let created = pods.create(&PostParams::default(), &pod("a", "", "web")).await.unwrap();
    let version = created.metadata.resource_version.unwrap();
    let at = |version: &str| kube::api::DeleteParams {
        preconditions: Some(kube::api::Preconditions { resource_version: Some(version.into()), uid: None }),
        ..Default::default()
    };
    let err = pods.delete("a", &at("1")).await.unwrap_err();
    let expected = format!(
        "Operation cannot be fulfilled on pods \"a\": Precondition failed: ResourceVersion in precondition: 1, \
         ResourceVersion in object meta: {version}"
    );
    assert!(matches!(&err, kube::Error::Api(e) if e.code == 409 && e.message == expected), "{err:?}");
    assert!(pods.get("a").await.is_ok(), "kept");
    pods.delete("a", &at(&version)).await.unwrap();
    assert!(pods.get("a").await.is_err(), "deleted");
}

#[tokio::test]
async fn watches_resume_from_a_resource_version() {
    let api = serve(1000).await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("a", "node01", "web")).await.unwrap();
    let after_a = api.store.revision().to_string();
    pods.create(&PostParams::default(), &pod("b", "node01", "web")).await.unwrap();
    // At once, as `kubectl delete --grace-period=0` (a bound pod otherwise terminates first).
    pods.delete("a", &kube::api::DeleteParams::default().grace_period(0)).await.unwrap();

    let mut events = pods.watch(&WatchParams::default().timeout(5), &after_a).await.unwrap().boxed();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(p) => seen.push(format!("ADDED {}", p.metadata.name.unwrap())),
            WatchEvent::Deleted(p) => seen.push(format!("DELETED {}", p.metadata.name.unwrap())),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["ADDED b", "DELETED a"]);
    // And then it follows new changes.
    pods.create(&PostParams::default(), &pod("c", "node01", "web")).await.unwrap();
    assert!(
        matches!(events.try_next().await.unwrap().unwrap(), WatchEvent::Added(p) if p.metadata.name.as_deref() == Some("c"))
    );
}

/// A watch with a selector sees an object that stops matching as DELETED and one that starts
/// matching as ADDED, as kube-apiserver's watch cache tells it (`cacheWatcher.convertToWatchEvent`):
/// a cache of one node's pods (virt-handler's, evac hold's) must lose a pod relabelled away.
#[tokio::test]
async fn a_selecting_watch_sees_objects_leave_and_enter() {
    let api = serve(1000).await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("a", "node01", "web")).await.unwrap();
    pods.create(&PostParams::default(), &pod("b", "node01", "db")).await.unwrap();
    let from = api.store.revision().to_string();
    let params = WatchParams::default().labels("app=web").timeout(5);
    let mut events = pods.watch(&params, &from).await.unwrap().boxed();
    let relabel =
        |app: &str| kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {"app": app}}}));
    pods.patch("a", &kube::api::PatchParams::default(), &relabel("db")).await.unwrap();
    pods.patch("b", &kube::api::PatchParams::default(), &relabel("web")).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(p) => seen.push(format!("ADDED {}", p.metadata.name.unwrap())),
            WatchEvent::Deleted(p) => {
                let app = p.metadata.labels.unwrap_or_default().get("app").cloned().unwrap_or_default();
                seen.push(format!("DELETED {} (app={app})", p.metadata.name.unwrap()));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["DELETED a (app=web)", "ADDED b"]);
}

#[tokio::test]
async fn a_watch_from_a_compacted_version_gets_410() {
    let api = serve(2).await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    for name in ["a", "b", "c", "d"] {
        pods.create(&PostParams::default(), &pod(name, "node01", "web")).await.unwrap();
    }
    let mut events = pods.watch(&WatchParams::default().timeout(5), "1").await.unwrap().boxed();
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected a 410 error event, got {other:?}"),
    }
}

#[tokio::test]
async fn discovery_finds_core_and_kubevirt_resources() {
    let api = serve(10).await;
    for (group, version, kind, plural) in [
        ("", "v1", "Pod", "pods"),
        ("", "v1", "Node", "nodes"),
        ("kubevirt.io", "v1", "VirtualMachineInstance", "virtualmachineinstances"),
        ("kubevirt.io", "v1", "KubeVirt", "kubevirts"),
        ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    ] {
        let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
        let (resource, _) = kube::discovery::pinned_kind(&api.client, &gvk).await.unwrap();
        assert_eq!(resource.plural, plural);
    }
    let nodes: Api<Node> = Api::all(api.client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node01"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    assert_eq!(nodes.get("node01").await.unwrap().metadata.name.as_deref(), Some("node01"));
    let _ = api.url;
}

/// The real kubectl, through a kubeconfig: get, and cordon (a strategic merge patch of the node).
#[tokio::test]
async fn kubectl_gets_and_cordons() {
    let Ok(kubectl) = which_kubectl() else {
        eprintln!("skipped: no kubectl on the PATH");
        return;
    };
    let api = serve(1000).await;
    let nodes: Api<Node> = Api::all(api.client.clone());
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node01"}})).unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("web-1", "node01", "web")).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &api.url);
    let run = |args: &[&str]| {
        let kubectl = kubectl.clone();
        let kubeconfig = kubeconfig.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(kubectl)
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(args)
                .output()
                .unwrap()
        })
    };
    let out = run(&["get", "pods", "-o", "name"]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "pod/web-1");
    let out = run(&["cordon", "node01"]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let node = nodes.get("node01").await.unwrap();
    assert_eq!(node.spec.unwrap().unschedulable, Some(true));

    // `kubectl create` with its default validation: it reads the OpenAPI v3 documents, finds
    // `fieldValidation` on the kind's PATCH, and leaves validation to the server.
    let manifest = dir.path().join("pod.yaml");
    std::fs::write(&manifest, "apiVersion: v1\nkind: Pod\nmetadata: {name: web-2, namespace: default}\nspec: {containers: [{name: c, image: x}]}\n").unwrap();
    let out = run(&["create", "-f", manifest.to_str().unwrap()]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "pod/web-2 created");
    assert!(pods.get("web-2").await.is_ok());

    // `kubectl apply` of a v1 List: no v3 document names the kind List, so kubectl validates
    // on the client with the v2 document, which has no schema for the items: they go to the server.
    let list = dir.path().join("list.yaml");
    std::fs::write(&list, "apiVersion: v1\nkind: List\nitems:\n- apiVersion: policy/v1\n  kind: PodDisruptionBudget\n  metadata: {name: web, namespace: default}\n  spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}\n").unwrap();
    let out = run(&["apply", "-f", list.to_str().unwrap()]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "poddisruptionbudget.policy/web created");

    // The server's tables: the columns kube-apiserver's printers and KubeVirt's CRDs give.
    let table = |args: &'static [&'static str]| {
        let out = run(args);
        async move {
            let out = out.await.unwrap();
            assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect::<Vec<_>>()
        }
    };
    let lines = table(&["get", "pods", "-o", "wide"]).await;
    assert_eq!(
        lines[0], "NAME READY STATUS RESTARTS AGE IP NODE NOMINATED NODE READINESS GATES",
        "{lines:?}"
    );
    assert!(lines[1].starts_with("web-1 0/1 Pending 0 "), "{lines:?}");
    assert!(lines[1].ends_with(" <none> node01 <none> <none>"), "{lines:?}");
    let lines = table(&["get", "nodes"]).await;
    assert_eq!(lines[0], "NAME STATUS ROLES AGE VERSION", "{lines:?}");
    assert!(lines[1].starts_with("node01 Unknown,SchedulingDisabled <none> "), "{lines:?}");
    let vmis: Api<kube::core::DynamicObject> = Api::namespaced_with(
        api.client.clone(),
        "default",
        &kube::core::ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
            "kubevirt.io",
            "v1",
            "VirtualMachineInstance",
        )),
    );
    let vmi = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "vm-1"},
        "status": {"phase": "Running", "nodeName": "node01", "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    vmis.create(&PostParams::default(), &vmi).await.unwrap();
    let lines = table(&["get", "vmi"]).await;
    assert_eq!(lines[0], "NAME AGE PHASE IP NODENAME READY", "{lines:?}");
    assert!(lines[1].starts_with("vm-1 ") && lines[1].ends_with(" Running node01 True"), "{lines:?}");
    let out = run(&["get", "vm"]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("No resources found"), "{out:?}");
}

fn which_kubectl() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join("kubectl")).find(|p| p.is_file()))
        .ok_or(())
}

// --- Evictions ---------------------------------------------------------------------------------

use std::sync::atomic::{AtomicUsize, Ordering};

use kube::api::EvictParams;

/// A pod owned by a ReplicaSet (kubectl drain refuses unmanaged pods without --force).
fn managed_pod(name: &str, node: &str) -> Pod {
    let mut pod = pod(name, node, "web");
    pod.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid", "controller": true
    }))
    .unwrap()]);
    pod.status = Some(serde_json::from_value(json!({"phase": "Running"})).unwrap());
    // A short grace period: the kubelet removes an evicted pod when it ends.
    pod.spec.get_or_insert_with(Default::default).termination_grace_period_seconds = Some(1);
    pod
}

/// The kubelet, on wall-clock time, so that deleted pods go when their grace period ends; stops
/// when the returned guard drops.
fn run_kubelet(store: &Arc<Store>) -> impl Drop {
    use std::sync::atomic::AtomicBool;
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let simulation =
        crate::Simulation::new(Arc::clone(store), vec![Box::new(crate::actors::Kubelet::default())]);
    let flag = Arc::clone(&stop);
    std::thread::spawn(move || simulation.run_realtime(1.0, &flag).unwrap());
    Stop(stop)
}

/// An HTTPS webhook on loopback that denies the first `denials` evictions with 429 and then
/// allows; returns its URL and CA bundle (base64 PEM) and the count of calls.
async fn eviction_webhook(denials: usize) -> (String, String, Arc<AtomicUsize>, tempfile::TempDir) {
    use axum::routing::post;
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let app = axum::Router::new().route(
        "/validate",
        post(move |body: axum::body::Bytes| {
            let counter = Arc::clone(&counter);
            async move {
                let review: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let uid = review["request"]["uid"].clone();
                assert_eq!(review["request"]["subResource"], "eviction");
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let response = if n < denials {
                    json!({"uid": uid, "allowed": false, "status": {"code": 429, "message": "Eviction triggered evacuation of VMI \"default/vm\""}})
                } else {
                    json!({"uid": uid, "allowed": true})
                };
                let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response});
                ([(axum::http::header::CONTENT_TYPE, "application/json")], review.to_string())
            }
        }),
    );
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let (cert, key) = (certified.cert.pem(), certified.signing_key.serialize_pem());
    std::fs::write(dir.path().join("tls.crt"), &cert).unwrap();
    std::fs::write(dir.path().join("tls.key"), key).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}/validate", listener.local_addr().unwrap());
    tokio::spawn(serve_tls(listener, app, certified));
    use base64::Engine as _;
    (url, base64::engine::general_purpose::STANDARD.encode(cert), calls, dir)
}

async fn register_webhook(api: &TestApi, url: &str, ca_bundle: &str) {
    let kind = crate::Kind::new("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration");
    let configuration = json!({"metadata": {"name": "evac-pod-eviction"}, "webhooks": [{
        "name": "pod-eviction.evac.kubevirt.io",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}],
        "matchConditions": [{"name": "kubevirt", "expression": "request.name.startsWith('virt-launcher-')"}],
        "failurePolicy": "Fail", "sideEffects": "NoneOnDryRun", "timeoutSeconds": 10,
    }]});
    api.store.create(&kind, "", configuration, false).unwrap();
}

#[tokio::test]
async fn webhook_denials_and_disruption_budgets_refuse_evictions() {
    let api = serve(1000).await;
    let (url, ca_bundle, calls, _dir) = eviction_webhook(1).await;
    register_webhook(&api, &url, &ca_bundle).await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &managed_pod("virt-launcher-vm-abcde", "node01")).await.unwrap();
    pods.create(&PostParams::default(), &managed_pod("web-1", "node01")).await.unwrap();

    // The webhook's 429 reaches the client with the API server's wording.
    let err = pods.evict("virt-launcher-vm-abcde", &EvictParams::default()).await.unwrap_err();
    match &err {
        kube::Error::Api(e) => {
            assert_eq!(e.code, 429);
            assert_eq!(
                e.message,
                "admission webhook \"pod-eviction.evac.kubevirt.io\" denied the request: Eviction triggered evacuation of VMI \"default/vm\""
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(pods.get("virt-launcher-vm-abcde").await.is_ok(), "a denied eviction deletes nothing");
    // The match condition keeps other pods off the webhook; their evictions succeed.
    pods.evict("web-1", &EvictParams::default()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // Evicted: deleted with its grace period, so terminating until its kubelet removes it.
    let evicted = pods.get("web-1").await.unwrap();
    assert!(evicted.metadata.deletion_timestamp.is_some());
    assert_eq!(evicted.metadata.deletion_grace_period_seconds, Some(1));
    // Now the webhook allows.
    pods.evict("virt-launcher-vm-abcde", &EvictParams::default()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // A budget of one healthy pod over two: one eviction, then 429 with Kubernetes' message.
    let budgets = crate::Kind::new("policy/v1", "PodDisruptionBudget");
    let pdb = json!({"metadata": {"name": "web"},
                     "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 1}});
    api.store.create(&budgets, "default", pdb, false).unwrap();
    pods.create(&PostParams::default(), &managed_pod("web-2", "node01")).await.unwrap();
    pods.create(&PostParams::default(), &managed_pod("web-3", "node01")).await.unwrap();
    pods.evict("web-2", &EvictParams::default()).await.unwrap();
    let err = pods.evict("web-3", &EvictParams::default()).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 429 && e.message == "Cannot evict pod as it would violate the pod's disruption budget."),
        "{err:?}"
    );
    let err = pods.evict("nope", &EvictParams::default()).await.unwrap_err();
    assert!(matches!(&err, kube::Error::Api(e) if e.code == 404), "{err:?}");
}

/// `kubectl drain` against the simulated API: it cordons, evicts through the eviction
/// subresource, retries a webhook's 429 every 5 s, and completes when the pods are gone.
#[tokio::test]
async fn kubectl_drain_retries_a_429_and_completes() {
    let Ok(kubectl) = which_kubectl() else {
        eprintln!("skipped: no kubectl on the PATH");
        return;
    };
    let api = serve(1000).await;
    let (url, ca_bundle, calls, _dir) = eviction_webhook(1).await;
    register_webhook(&api, &url, &ca_bundle).await;
    let nodes: Api<Node> = Api::all(api.client.clone());
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "node01"}})).unwrap(),
        )
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &managed_pod("virt-launcher-vm-abcde", "node01")).await.unwrap();
    pods.create(&PostParams::default(), &managed_pod("web-1", "node01")).await.unwrap();
    // virt-handler, a DaemonSet's pod: `--ignore-daemonsets` looks the DaemonSet up and leaves
    // the pod.
    let daemon_sets: Api<k8s_openapi::api::apps::v1::DaemonSet> =
        Api::namespaced(api.client.clone(), "kubevirt");
    let daemon_set = serde_json::from_value(json!({"metadata": {"name": "virt-handler", "namespace": "kubevirt"},
                                                   "spec": {"selector": {"matchLabels": {"kubevirt.io": "virt-handler"}},
                                                            "template": {"spec": {"containers": []}}}}))
    .unwrap();
    let daemon_set = daemon_sets.create(&PostParams::default(), &daemon_set).await.unwrap();
    let mut handler = pod("virt-handler-x7k2p", "node01", "virt-handler");
    handler.metadata.namespace = Some("kubevirt".into());
    handler.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "virt-handler",
        "uid": daemon_set.metadata.uid, "controller": true
    }))
    .unwrap()]);
    let handlers: Api<Pod> = Api::namespaced(api.client.clone(), "kubevirt");
    handlers.create(&PostParams::default(), &handler).await.unwrap();
    let _kubelet = run_kubelet(&api.store);

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = write_kubeconfig(dir.path(), &api.url);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["drain", "node01", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "drain failed:\n{stderr}\n{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        stderr.contains("admission webhook \"pod-eviction.evac.kubevirt.io\" denied the request: Eviction triggered evacuation"),
        "drain reports the webhook's 429 and retries:\n{stderr}"
    );
    assert!(
        stderr.contains("Warning: ignoring DaemonSet-managed Pods: kubevirt/virt-handler-x7k2p"),
        "{stderr}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(pods.list(&ListParams::default()).await.unwrap().items.is_empty());
    assert!(handlers.get("virt-handler-x7k2p").await.is_ok(), "the DaemonSet's pod stays");
    assert_eq!(nodes.get("node01").await.unwrap().spec.unwrap().unschedulable, Some(true));
}

fn write_kubeconfig(dir: &std::path::Path, url: &str) -> std::path::PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(&path, crate::kubeconfig(url)).unwrap();
    path
}

/// Bad requests get Kubernetes `Status` objects with the right code and a clear message.
#[tokio::test]
async fn bad_requests_get_kubernetes_status_errors() {
    let api = serve(100).await;
    let client = reqwest::Client::new();
    let status = |response: reqwest::Response| async move {
        let code = response.status().as_u16();
        let body: serde_json::Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
        assert_eq!(body["kind"], "Status", "{body}");
        assert_eq!(body["code"], code);
        (code, body["message"].as_str().unwrap().to_owned())
    };
    let pods = format!("{}/api/v1/namespaces/default/pods", api.url);

    let (code, message) = status(client.post(&pods).body("{not json").send().await.unwrap()).await;
    assert_eq!(code, 400);
    assert!(message.starts_with("the body of the request was in an unknown format"), "{message}");
    let wrong_kind = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}});
    let (code, message) = status(client.post(&pods).body(wrong_kind.to_string()).send().await.unwrap()).await;
    assert_eq!(code, 400, "{message}");
    let (code, _) =
        status(client.get(format!("{}/apis/example.io/v1/widgets", api.url)).send().await.unwrap()).await;
    assert_eq!(code, 404);
    let (code, message) = status(client.delete(&pods).send().await.unwrap()).await;
    assert_eq!((code, message.contains("does not allow this method")), (405, true));
    let (code, message) =
        status(client.get(format!("{pods}?labelSelector=a%20in%20(")).send().await.unwrap()).await;
    assert_eq!(code, 400);
    assert!(message.starts_with("unable to parse labelSelector"), "{message}");
    let (code, _) =
        status(client.get(format!("{pods}?watch=true&resourceVersion=abc")).send().await.unwrap()).await;
    assert_eq!(code, 400);

    api.store
        .create(&crate::Kind::new("v1", "Pod"), "default", json!({"metadata": {"name": "a"}}), false)
        .unwrap();
    let patch = |content_type: &'static str, body: serde_json::Value| {
        client.patch(format!("{pods}/a")).header("content-type", content_type).body(body.to_string()).send()
    };
    let (code, message) = status(patch("application/apply-patch+yaml", json!({})).await.unwrap()).await;
    assert_eq!(code, 415, "{message}");
    let failing = json!([{"op": "test", "path": "/metadata/name", "value": "b"}]);
    let (code, message) = status(patch("application/json-patch+json", failing).await.unwrap()).await;
    assert_eq!(code, 422);
    assert!(message.starts_with(r#"pods "a" is invalid: the JSON patch does not apply"#), "{message}");
    // A deletion precondition that is not a version string: 400, and the pod stays.
    let bad = json!({"preconditions": {"resourceVersion": 5}}).to_string();
    let (code, message) = status(client.delete(format!("{pods}/a")).body(bad).send().await.unwrap()).await;
    assert_eq!(code, 400);
    assert_eq!(message, "DeleteOptions.preconditions.resourceVersion: invalid value 5");
    assert_eq!(client.get(format!("{pods}/a")).send().await.unwrap().status().as_u16(), 200, "kept");
}

/// Serves a router over TLS with a self-signed certificate: a webhook as the API server calls it.
async fn serve_tls(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    certified: rcgen::CertifiedKey<rcgen::KeyPair>,
) {
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let chain = vec![CertificateDer::from(certified.cert.der().to_vec())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    loop {
        let Ok((tcp, _)) = listener.accept().await else { return };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else { return };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let builder = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
            let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(tls), service).await;
        });
    }
}

/// virt-api's migration admitter: only virt-controller's service account may set a migration's
/// priority (a client gets KubeVirt's 422), and a VMI has one unfinished migration at a time.
#[tokio::test]
async fn migrations_admitted_as_virt_api_admits_them() {
    use kube::api::{ApiResource, DynamicObject};
    use kube::core::GroupVersionKind;

    let api = serve(100).await;
    super::virt_api::register(&api.store);
    let vmis = crate::kinds::vmis();
    let vmi = json!({"metadata": {"name": "vm"}, "status": {"phase": "Running", "nodeName": "n1"}});
    api.store.create(&vmis, "ns", vmi, false).unwrap();
    let gvk = GroupVersionKind::gvk("kubevirt.io", "v1", "VirtualMachineInstanceMigration");
    let migrations: Api<DynamicObject> =
        Api::namespaced_with(api.client.clone(), "ns", &ApiResource::from_gvk(&gvk));
    let migration = |priority: Option<&str>| {
        let mut object = json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"generateName": "kubevirt-evacuation-"},
            "spec": {"vmiName": "vm"},
        });
        if let Some(priority) = priority {
            object["spec"]["priority"] = json!(priority);
        }
        serde_json::from_value::<DynamicObject>(object).unwrap()
    };

    let refused = migrations.create(&PostParams::default(), &migration(Some("system-critical"))).await;
    let Err(kube::Error::Api(status)) = refused else { panic!("a client set a priority: {refused:?}") };
    assert_eq!(status.code, 422);
    assert_eq!(
        status.message,
        "admission webhook \"migration-create-validator.kubevirt.io\" denied the request: \
         Migration priority queue, only virt-controller is allowed to set priority field"
    );

    // virt-controller may; then the VMI has a migration in flight, and a second one is refused.
    let as_controller =
        evac_cluster::AsUser::new(Arc::clone(api.store.memory()), super::virt_api::VIRT_CONTROLLER_USER);
    let kind = crate::kinds::migrations();
    let object = serde_json::to_value(migration(Some("system-critical"))).unwrap();
    evac_cluster::ClusterStore::create(&as_controller, &kind, "ns", object, false).await.unwrap();
    let refused = migrations.create(&PostParams::default(), &migration(None)).await;
    let Err(kube::Error::Api(status)) = refused else { panic!("a second migration in flight: {refused:?}") };
    assert_eq!(status.code, 400);
    assert!(status.message.contains("in-flight migration detected"), "{}", status.message);
}

/// metrics-server's NodeMetrics, as it serves them: discovered under `metrics.k8s.io/v1beta1`
/// as `nodes` with the verbs get and list, read by kube-rs, and neither watched nor written.
#[tokio::test]
async fn node_metrics_are_read_only_and_unwatched() {
    use kube::api::{ApiResource, DynamicObject};
    use kube::core::GroupVersionKind;

    let api = serve(100).await;
    let metrics = json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics",
                         "metadata": {"name": "node01"}, "timestamp": "2026-11-23T10:00:00Z",
                         "window": "10s", "usage": {"cpu": "1", "memory": "28Gi"}});
    api.store.create(&crate::kinds::node_metrics(), "", metrics, false).unwrap();
    let gvk = GroupVersionKind::gvk("metrics.k8s.io", "v1beta1", "NodeMetrics");
    let (resource, capabilities) = kube::discovery::pinned_kind(&api.client, &gvk).await.unwrap();
    assert_eq!(resource.plural, "nodes");
    assert!(capabilities.supports_operation("list") && !capabilities.supports_operation("watch"));
    let nodes: Api<DynamicObject> = Api::all_with(api.client.clone(), &ApiResource::from_gvk(&gvk));
    let read = nodes.get("node01").await.unwrap();
    assert_eq!(read.data["usage"]["memory"], "28Gi");
    assert_eq!(nodes.list(&ListParams::default()).await.unwrap().items.len(), 1);
    // A watch is refused when it starts, or in its first event, as the client reports it.
    let refused = match nodes.watch(&WatchParams::default(), "0").await {
        Err(e) => Some(e.to_string()),
        Ok(stream) => stream.boxed().try_next().await.err().map(|e| e.to_string()),
    };
    assert!(refused.as_deref().is_some_and(|e| e.contains("405") || e.contains("not allow")), "{refused:?}");
    let refused = nodes.delete("node01", &Default::default()).await.map(drop);
    assert!(matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 405), "{refused:?}");
}

/// The kubelet's configuration through the node proxy, as an admin reads the eviction thresholds.
#[tokio::test]
async fn the_node_proxy_serves_the_kubelets_configz() {
    let api = serve(100).await;
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node01"}});
    api.store.create(&crate::kinds::nodes(), "", node, false).unwrap();
    let request = |path: &str| axum::http::Request::get(path).body(Vec::new()).unwrap();
    let text = api.client.request_text(request("/api/v1/nodes/node01/proxy/configz")).await.unwrap();
    let configz: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(configz["kubeletconfig"]["evictionSoft"]["memory.available"], "3500Mi");
    assert_eq!(configz["kubeletconfig"]["evictionHard"]["memory.available"], "10Mi");
    let missing = api.client.request_text(request("/api/v1/nodes/gone/proxy/configz")).await;
    assert!(matches!(missing, Err(kube::Error::Api(ref s)) if s.code == 404), "{missing:?}");
}

/// Informers with streaming lists (client-go's and kube-rs's watch-list) start: the initial events
/// end with the `k8s.io/initial-events-end` bookmark, on the resources the simulator has objects of
/// and on those common controllers inform on that it serves read-only and empty (the descheduler's
/// PVCs and priority classes, owners' replica sets and stateful sets, ...); then they follow.
#[tokio::test]
async fn informers_with_streaming_lists_start_and_follow() {
    use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Service};
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    use kube::runtime::watcher;

    /// Its initial objects, once the watcher says they are all there.
    async fn initial<K>(api: Api<K>) -> Vec<String>
    where
        K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
    {
        let config = watcher::Config::default().streaming_lists();
        let mut events = watcher(api, config).boxed();
        let mut names = Vec::new();
        let read = async {
            loop {
                match events.try_next().await.unwrap().unwrap() {
                    watcher::Event::Init => {}
                    watcher::Event::InitApply(object) => names.push(object.meta().name.clone().unwrap()),
                    watcher::Event::InitDone => return,
                    other => panic!("before the initial events ended: {other:?}"),
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), read)
            .await
            .expect("the initial events end with a bookmark");
        names
    }

    let api = serve(1000).await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("a", "node01", "web")).await.unwrap();
    pods.create(&PostParams::default(), &pod("b", "node02", "web")).await.unwrap();
    let all = |client: &Client| Api::<Pod>::all(client.clone());
    assert_eq!(initial(all(&api.client)).await, ["a", "b"]);
    assert!(initial(Api::<PersistentVolumeClaim>::all(api.client.clone())).await.is_empty());
    assert!(initial(Api::<PersistentVolume>::all(api.client.clone())).await.is_empty());
    assert!(initial(Api::<Service>::all(api.client.clone())).await.is_empty());
    assert!(initial(Api::<ReplicaSet>::all(api.client.clone())).await.is_empty());
    assert!(initial(Api::<StatefulSet>::all(api.client.clone())).await.is_empty());
    assert!(initial(Api::<PriorityClass>::all(api.client.clone())).await.is_empty());

    // After the bookmark, the stream follows the store.
    let mut events = watcher(all(&api.client), watcher::Config::default().streaming_lists()).boxed();
    while !matches!(events.try_next().await.unwrap(), Some(watcher::Event::InitDone)) {}
    pods.create(&PostParams::default(), &pod("c", "node01", "db")).await.unwrap();
    match events.try_next().await.unwrap().unwrap() {
        watcher::Event::Apply(p) => assert_eq!(p.metadata.name.as_deref(), Some("c")),
        other => panic!("expected c applied, got {other:?}"),
    }

    // The read-only resources refuse writes, as the API server refuses a verb it does not serve.
    let claim = serde_json::from_value::<PersistentVolumeClaim>(json!({"metadata": {"name": "x"}})).unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(api.client.clone(), "default");
    let refused = claims.create(&PostParams::default(), &claim).await.unwrap_err();
    assert!(matches!(&refused, kube::Error::Api(e) if e.code == 405), "{refused:?}");

    // The list options of a watch, checked as kube-apiserver's validateWatchOptions does.
    let http = reqwest::Client::new();
    let cases = [
        (
            "watch=true&resourceVersion=5&resourceVersionMatch=NotOlderThan",
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ),
        (
            "watch=true&sendInitialEvents=true",
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ),
        ("watch=true&sendInitialEvents=true&resourceVersionMatch=Exact", "Unsupported value: \"Exact\""),
    ];
    for (query, message) in cases {
        let response = http.get(format!("{}/api/v1/pods?{query}", api.url)).send().await.unwrap();
        assert_eq!(response.status(), 422, "{query}");
        let status: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(status["reason"], "Invalid", "{query}: {status}");
        assert!(status["message"].as_str().unwrap().contains(message), "{query}: {status}");
    }
}

/// The health checks answer as kube-apiserver's do: `ok`, in plain text (`kubectl get --raw
/// /healthz` prints it as it is).
#[tokio::test]
async fn health_checks_answer_ok_in_plain_text() {
    let api = serve(10).await;
    for check in ["livez", "readyz", "healthz"] {
        let response = reqwest::get(format!("{}/{check}", api.url)).await.unwrap();
        assert_eq!(response.status(), 200, "{check}");
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"), "{check}");
        assert_eq!(response.text().await.unwrap(), "ok", "{check}");
    }
}
