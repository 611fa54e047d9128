//! The real-cluster path end to end, on the simulator: `evac sim serve` as the Kubernetes API,
//! `evac serve --kubeconfig` reading it through kube-rs watch caches and carrying out
//! `MarkForEvacuation` as a patch through it.

use std::process::Child;
use std::time::{Duration, Instant};

use evac_e2e::server::spawn_listening;
use evac_e2e::*;
use serde_json::{json, Value};

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a server on port 0; its addresses come from the line it prints.
fn spawn(args: &[&str], log: &std::path::Path) -> (Process, evac_e2e::server::Listening) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (child, listening) = spawn_listening(&args, log);
    (Process(child), listening)
}

async fn wait_for(url: &str, what: &str, log: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if reqwest::get(url).await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not come up:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn json_of(request: reqwest::RequestBuilder) -> Value {
    let text = request.send().await.unwrap().text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[tokio::test]
async fn the_policy_server_reads_and_marks_through_the_simulated_api() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let objects = example("context.yaml");
    let (_api, listening) = spawn(
        &[
            "sim",
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--kubeconfig",
            &p("kubeconfig"),
            "--objects",
            objects.to_str().unwrap(),
        ],
        &dir.path().join("sim.log"),
    );
    let api = listening.url("api").to_owned();
    wait_for(&format!("{api}/api"), "the simulated API", &dir.path().join("sim.log")).await;

    let policies = format!(
        "pod-eviction:\n  module: {}\n  contextAwareResources:\n    - {{apiVersion: v1, kind: Pod}}\n    - {{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}}\n    - {{apiVersion: kubevirt.io/v1, kind: KubeVirt}}\n",
        policy_path().display()
    );
    std::fs::write(p("policies.yml"), policies).unwrap();
    let (_server, listening) = spawn(
        &[
            "serve",
            "--config",
            &p("policies.yml"),
            "--kubeconfig",
            &p("kubeconfig"),
            "--insecure-http",
            "--addr",
            "127.0.0.1:0",
            "--probe-addr",
            "127.0.0.1:0",
            "--cache-dir",
            &p("cache"),
        ],
        &dir.path().join("server.log"),
    );
    wait_for(&format!("{}/readiness", listening.url("probes")), "evac serve", &dir.path().join("server.log"))
        .await;

    let admission = listening.url("admission").to_owned();
    let client = reqwest::Client::new();
    let evict = |dry_run: bool| {
        let mut review = admission_review(eviction_request(NS, "virt-launcher-web-1-8xk2p"));
        review["request"]["dryRun"] = json!(dry_run);
        let (client, url) = (client.clone(), format!("{admission}/validate/pod-eviction"));
        async move {
            let request = client.post(url);
            json_of(request.body(review.to_string())).await["response"].clone()
        }
    };
    let vmi = || {
        let url = format!("{api}/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/web-1");
        json_of(client.get(url))
    };

    // A dry run answers as the real thing would and marks nothing.
    let response = evict(true).await;
    assert_eq!(response["status"]["message"], "Eviction triggered evacuation of VMI \"default/web-1\"");
    assert_eq!(vmi().await["status"].get("evacuationNodeName"), None);

    // The drain: 429, and the VMI is marked through the API.
    let response = evict(false).await;
    assert_eq!(response["status"]["code"], 429);
    assert_eq!(response["status"]["message"], "Eviction triggered evacuation of VMI \"default/web-1\"");
    assert_eq!(vmi().await["status"]["evacuationNodeName"], NODE);

    // The watch cache sees the mark: the next eviction finds the evacuation in progress.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = evict(false).await;
        if response["status"]["message"]
            == "Evacuation in progress: Eviction triggered evacuation of VMI \"default/web-1\""
        {
            break;
        }
        assert!(Instant::now() < deadline, "the mark never reached the cache: {response}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
