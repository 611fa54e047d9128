//! The real-cluster path end to end, on the simulator: `evac sim serve` as the Kubernetes API,
//! `evac serve --kubeconfig` reading it through kube-rs watch caches and carrying out
//! `MarkForEvacuation` as a patch through it.

use std::time::{Duration, Instant};

use evac_e2e::server::{spawn, wait_until_ok as wait_for, Process};
use evac_e2e::*;
use serde_json::{json, Value};

async fn json_of(request: reqwest::RequestBuilder) -> Value {
    let text = request.send().await.unwrap().text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `evac sim serve` on the example cluster, writing its kubeconfig into `dir`; returns the
/// process and the API's URL once it answers.
async fn start_sim(dir: &std::path::Path) -> (Process, String) {
    let kubeconfig = dir.join("kubeconfig");
    let objects = example("context.yaml");
    let args = ["sim", "serve", "--addr", "127.0.0.1:0", "--kubeconfig", kubeconfig.to_str().unwrap()];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--objects", objects.to_str().unwrap()]);
    let (api, listening) = spawn(&args, &dir.join("sim.log"));
    let url = listening.url("api").to_owned();
    wait_for(&format!("{url}/api"), "the simulated API", &dir.join("sim.log")).await;
    (api, url)
}

/// `evac serve` of pod-eviction (reading `kinds`) against the cluster of `dir`'s kubeconfig, with
/// `extra` arguments; returns the process and its addresses once it is ready.
async fn start_server(
    dir: &std::path::Path,
    kinds: &[&str],
    extra: &[&str],
) -> (Process, evac_e2e::server::Listening) {
    let p = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let resources: String = kinds.iter().map(|kind| format!("    - {kind}\n")).collect();
    let policies = format!(
        "pod-eviction:\n  module: {}\n  hostCapabilities: [kubernetes/*]\n  contextAwareResources:\n{resources}",
        policy_path().display()
    );
    std::fs::write(p("policies.yml"), policies).unwrap();
    let (config, kubeconfig) = (p("policies.yml"), p("kubeconfig"));
    let mut args = vec!["serve", "--config", &config, "--kubeconfig", &kubeconfig, "--insecure-http"];
    args.extend(["--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0"]);
    args.extend(extra);
    let (server, listening) = spawn(&args, &dir.join("server.log"));
    wait_for(&format!("{}/readiness", listening.url("probes")), "evac serve", &dir.join("server.log")).await;
    (server, listening)
}

#[tokio::test]
async fn the_policy_server_reads_and_marks_through_the_simulated_api() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, api) = start_sim(dir.path()).await;
    let kinds = [
        "{apiVersion: v1, kind: Pod}",
        "{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}",
        "{apiVersion: kubevirt.io/v1, kind: KubeVirt}",
    ];
    let cache = dir.path().join("cache");
    let (_server, listening) =
        start_server(dir.path(), &kinds, &["--cache-dir", cache.to_str().unwrap()]).await;

    let admission = listening.url("admission").to_owned();
    let client = reqwest::Client::new();
    let evict = |dry_run: bool| {
        let mut review = admission_review(eviction_request(NS, "virt-launcher-web-1-8xk2p"));
        review["request"]["dryRun"] = json!(dry_run);
        let (client, url) = (client.clone(), format!("{admission}/validate/pod-eviction"));
        async move {
            let request = client.post(url).header("content-type", "application/json");
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

/// With the API server gone, the caches stop following the cluster: past the staleness bound the
/// server reports not ready (so a Service sends the webhook's calls elsewhere), and says why.
#[tokio::test]
async fn readiness_fails_while_the_api_server_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (api, _) = start_sim(dir.path()).await;
    let kinds = ["{apiVersion: v1, kind: Pod}"];
    let (_server, listening) =
        start_server(dir.path(), &kinds, &["--max-cache-staleness-seconds", "10"]).await;
    let readiness = format!("{}/readiness", listening.url("probes"));

    drop(api);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = reqwest::get(&readiness).await.unwrap();
        if response.status().as_u16() == 503 {
            let why = response.text().await.unwrap();
            assert!(why.contains("has not answered for"), "{why}");
            // Not ready, but alive: a restart would not bring the API server back.
            let liveness = readiness.replace("/readiness", "/liveness");
            assert_eq!(reqwest::get(&liveness).await.unwrap().status().as_u16(), 200);
            break;
        }
        assert!(Instant::now() < deadline, "still ready 30 s after the API server went away");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `evac sim serve --scenario` starts from the scenario's cluster (its nodes and VMs, running),
/// with the namespaces every cluster has; at `--speed 10` the simulated clock starts in the past,
/// so no timestamp lies ahead of the client's clock.
#[tokio::test]
async fn a_scenario_s_cluster_served_with_its_namespaces_and_no_future_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let scenario = repo_root().join("examples/scenarios/drain.yaml");
    let args = ["sim", "serve", "--addr", "127.0.0.1:0", "--speed", "10", "--kubeconfig"];
    let mut args: Vec<&str> = args.to_vec();
    args.extend([kubeconfig.to_str().unwrap(), "--scenario", scenario.to_str().unwrap()]);
    let (_api, listening) = spawn(&args, &dir.path().join("sim.log"));
    let url = listening.url("api").to_owned();
    wait_for(&format!("{url}/api"), "the simulated API", &dir.path().join("sim.log")).await;
    let http = reqwest::Client::new();
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let namespaces = names(&json_of(http.get(format!("{url}/api/v1/namespaces"))).await);
    for expected in ["default", "kube-system", "kubevirt"] {
        assert!(namespaces.iter().any(|n| n == expected), "{namespaces:?}");
    }
    assert_eq!(names(&json_of(http.get(format!("{url}/api/v1/nodes"))).await).len(), 4);
    let vmis = json_of(http.get(format!("{url}/apis/kubevirt.io/v1/virtualmachineinstances"))).await;
    assert_eq!(names(&vmis).len(), 24, "the scenario's 24 VMs");
    let now = chrono::Utc::now();
    for vmi in vmis["items"].as_array().unwrap() {
        assert_eq!(vmi["status"]["phase"], "Running", "{vmi}");
        let created = vmi["metadata"]["creationTimestamp"].as_str().unwrap();
        let created = chrono::DateTime::parse_from_rfc3339(created).unwrap();
        assert!(created <= now, "{created} is after {now}");
    }
}

/// A scenario file that cannot be read, or names an unknown field, stops `evac sim serve` before
/// it serves anything, with an error naming the file and the field.
#[test]
fn a_bad_scenario_is_refused_with_its_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi, colour: red}]}\n").unwrap();
    let missing = dir.path().join("missing.yaml");
    for (file, expected) in [(&bad, "unknown field `colour`"), (&missing, "cannot read the scenario")] {
        let kubeconfig = dir.path().join("kubeconfig");
        let out = std::process::Command::new(evac_bin())
            .args(["sim", "serve", "--addr", "127.0.0.1:0", "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--scenario")
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(stderr.contains(expected) && stderr.contains(file.to_str().unwrap()), "{stderr}");
        assert!(!kubeconfig.exists(), "nothing served, no kubeconfig written");
    }
}
