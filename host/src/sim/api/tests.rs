//! The simulated API through real clients: kube-rs, and the `kubectl` on the PATH.

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch as KubePatch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::Client;
use serde_json::json;

use super::router;
use crate::sim::{SimClock, Store};

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

#[tokio::test]
async fn watches_resume_from_a_resource_version() {
    let api = serve(1000).await;
    let pods: Api<Pod> = Api::namespaced(api.client.clone(), "default");
    pods.create(&PostParams::default(), &pod("a", "node01", "web")).await.unwrap();
    let after_a = api.store.revision().to_string();
    pods.create(&PostParams::default(), &pod("b", "node01", "web")).await.unwrap();
    pods.delete("a", &Default::default()).await.unwrap();

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
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster: {{server: \"{}\"}}\ncontexts:\n- name: sim\n  context: {{cluster: sim, user: sim}}\ncurrent-context: sim\nusers:\n- name: sim\n  user: {{}}\n",
            api.url
        ),
    )
    .unwrap();
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
}

fn which_kubectl() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join("kubectl")).find(|p| p.is_file()))
        .ok_or(())
}
