//! `evac hold`, end to end, each piece a process as in a cluster: `evac sim serve --no-components`
//! is the API server (nothing moves but what the test and evac write), `evac control` runs beside
//! it, and `evac hold` answers the hooks of node01 and node02 on their own loopback ports. The
//! test plays the kubelet: it calls a launcher pod's `preStop` hook as the kubelet does (a GET that
//! lasts as long as the hold) and watches what the endpoint answers and when.
//!
//! node01 is short of memory (`MemoryPressure`): a hook there without a deletion is the kubelet's
//! node-pressure eviction, held while the VM migrates. node02 has room and no pressure.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use evac_e2e::server::{cache_dir, spawn, wait_until_ok, Process};
use evac_e2e::*;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

const GATES: [&str; 3] = [
    "PreemptionEvictionLiveMigration",
    "NoExecuteTaintEvictionLiveMigration",
    "NodePressureEvictionLiveMigration",
];

/// A launcher pod as `launcher-hold` leaves it: the hook on `compute`, the window, the grace.
fn held_launcher(vmi: &str, node: &str) -> Value {
    let pod = launcher_pod(NS, vmi, node);
    let pod = with(pod, "/metadata/annotations/evac.kubevirt.io~1hold-window", json!("300"));
    let pod = with(pod, "/spec/terminationGracePeriodSeconds", json!(360));
    with(
        pod,
        "/spec/containers/0/lifecycle",
        json!({"preStop": {"httpGet": {"host": "127.0.0.1", "port": 9190, "path": format!("/hold/{NS}/{vmi}/compute")}}}),
    )
}

fn node(name: &str, pressure: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "status": {"capacity": {"memory": "64Gi"}, "allocatable": {"memory": "62Gi"},
                      "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"},
                                     {"type": "MemoryPressure", "status": if pressure { "True" } else { "False" }}]}})
}

fn objects() -> Value {
    let cr = with(kubevirt_cr(None), "/spec/configuration/developerConfiguration/featureGates", json!(GATES));
    let mut items = vec![cr, node(NODE, true), node(OTHER_NODE, false), node("node03", false)];
    for (name, on, strategy) in
        [("web-1", NODE, "LiveMigrate"), ("scratch", NODE, "None"), ("web-2", OTHER_NODE, "LiveMigrate")]
    {
        let vmi = with(
            vmi(NS, name, Some(strategy), true, on),
            "/metadata/labels",
            json!({"kubevirt.io/nodeName": on}),
        );
        items.push(with(vmi, "/spec/domain/memory/guest", json!("1Gi")));
        items.push(held_launcher(name, on));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

struct Cluster {
    dir: tempfile::TempDir,
    api: String,
    http: reqwest::Client,
    /// `evac hold` of node01 and of node02: the process and its hook URL.
    holds: Vec<(Option<Process>, String)>,
    _others: Vec<Process>,
}

impl Cluster {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
        std::fs::write(dir.path().join("objects.json"), objects().to_string()).unwrap();
        let (kubeconfig, objects_file) = (path("kubeconfig"), path("objects.json"));
        let sim = ["sim", "serve", "--no-components", "--addr", "127.0.0.1:0"];
        let sim_args: Vec<&str> =
            sim.iter().copied().chain(["--kubeconfig", &kubeconfig, "--objects", &objects_file]).collect();
        let (sim, listening) = spawn(&sim_args, &dir.path().join("sim.log"));
        let api = listening.url("api").to_owned();
        wait_until_ok(&format!("{api}/api"), "evac sim serve", &dir.path().join("sim.log")).await;

        let policies = repo_root().join("examples/control/policies.yml");
        let policies = policies.to_str().unwrap().to_owned();
        let cache = cache_dir().to_str().unwrap().to_owned();
        let common = ["--policies", &policies, "--kubeconfig", &kubeconfig, "--cache-dir", &cache];
        let control_args: Vec<&str> =
            ["control", "--metrics-addr", "127.0.0.1:0"].iter().copied().chain(common).collect();
        let (control, _) = spawn(&control_args, &dir.path().join("control.log"));
        let mut holds = Vec::new();
        for on in [NODE, OTHER_NODE] {
            let log = dir.path().join(format!("hold-{on}.log"));
            let hold_args: Vec<&str> =
                ["hold", "--node", on, "--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0"]
                    .iter()
                    .copied()
                    .chain(common)
                    .collect();
            let (process, listening) = spawn(&hold_args, &log);
            wait_until_ok(&format!("{}/readiness", listening.url("probes")), "evac hold", &log).await;
            holds.push((Some(process), listening.url("hold").to_owned()));
        }
        Self { dir, api, http: reqwest::Client::new(), holds, _others: vec![sim, control] }
    }

    /// The kubelet's call of `vmi`'s hook on the endpoint of node `index` (0: node01): the answer's
    /// status and body, or the error that ended it.
    fn hook(&self, index: usize, vmi: &str) -> JoinHandle<Result<(u16, String), String>> {
        let url = format!("{}/hold/{NS}/{vmi}/compute", self.holds[index].1);
        let http = self.http.clone();
        tokio::spawn(async move {
            let response = http.get(&url).send().await.map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            Ok((status, response.text().await.map_err(|e| e.to_string())?))
        })
    }

    async fn get(&self, path: &str) -> Value {
        let text = self.http.get(format!("{}{path}", self.api)).send().await.unwrap().text().await.unwrap();
        serde_json::from_str(&text).unwrap()
    }

    async fn vmi(&self, name: &str) -> Value {
        self.get(&format!("/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances/{name}")).await
    }

    /// Waits up to `limit` for `check` of the VMI to hold.
    /// Writes VMI `name` (a `PUT` of the whole object or a `PATCH`), as KubeVirt would.
    async fn write_vmi(&self, method: reqwest::Method, name: &str, content_type: &str, body: &Value) {
        let url = format!("{}/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances/{name}", self.api);
        let response = self
            .http
            .request(method, &url)
            .header("content-type", content_type)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.text().await.unwrap());
    }

    async fn wait_vmi(&self, name: &str, limit: Duration, check: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + limit;
        loop {
            let vmi = self.vmi(name).await;
            if check(&vmi) || Instant::now() > deadline {
                return vmi;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn logs(&self) -> String {
        ["sim.log", "control.log", "hold-node01.log", "hold-node02.log"]
            .iter()
            .map(|name| {
                let path: PathBuf = self.dir.path().join(name);
                format!("--- {name}\n{}", std::fs::read_to_string(path).unwrap_or_default())
            })
            .collect()
    }
}

/// Whether the call is still open after `wait`.
async fn still_open<T>(call: &JoinHandle<T>, wait: Duration) -> bool {
    tokio::time::sleep(wait).await;
    !call.is_finished()
}

async fn answer(
    call: JoinHandle<Result<(u16, String), String>>,
    limit: Duration,
) -> Result<(u16, String), String> {
    match tokio::time::timeout(limit, call).await {
        Ok(joined) => joined.unwrap(),
        Err(_) => Err(format!("no answer within {limit:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_holds_while_the_vm_moves_and_answers_at_once_otherwise() {
    let mut cluster = Cluster::start().await;

    // Paths that are not a hook's, and a VMI with no launcher pod on the node: answered at once.
    let bad = cluster.http.get(format!("{}/nothing", cluster.holds[0].1)).send().await.unwrap();
    assert_eq!(bad.status(), 404);
    let unknown = answer(cluster.hook(0, "ghost"), Duration::from_secs(5)).await;
    assert!(matches!(&unknown, Ok((200, body)) if body.contains("no launcher pod")), "{unknown:?}");

    // A VM that does not migrate (strategy None): released at once, with the reason.
    let scratch = answer(cluster.hook(0, "scratch"), Duration::from_secs(5)).await;
    assert!(
        matches!(&scratch, Ok((200, body)) if body.contains("strategy")),
        "{scratch:?}\n{}",
        cluster.logs()
    );

    // The kubelet stops web-1 for node pressure: held, and its evacuation asked for.
    let web1 = cluster.hook(0, "web-1");
    assert!(still_open(&web1, Duration::from_secs(3)).await, "web-1's hook was answered: {:?}", web1.await);
    let vmi = cluster
        .wait_vmi("web-1", Duration::from_secs(20), |v| {
            v["metadata"]["annotations"]["evac.kubevirt.io/evacuate-from"] == NODE
                || v["status"]["evacuationNodeName"] == NODE
        })
        .await;
    assert!(
        vmi["metadata"]["annotations"]["evac.kubevirt.io/evacuate-from"] == NODE
            || vmi["status"]["evacuationNodeName"] == NODE,
        "no evacuation asked for web-1: {vmi}\n{}",
        cluster.logs()
    );
    let pod = cluster.get(&format!("/api/v1/namespaces/{NS}/pods/{}", launcher_name("web-1"))).await;
    assert!(pod["metadata"]["annotations"]["evac.kubevirt.io/held-since"].is_string(), "{pod}");
    let events = cluster.get(&format!("/api/v1/namespaces/{NS}/events")).await;
    let held = events["items"].as_array().unwrap().iter().any(|e| {
        e["reason"] == "TerminationHeld"
            && e["type"] == "Normal"
            && e["involvedObject"]["name"] == launcher_name("web-1")
    });
    assert!(held, "no TerminationHeld event: {events}");

    // The VM arrives on node02 (as KubeVirt's migration would leave it): the hold ends.
    let patch = json!({"status": {"nodeName": OTHER_NODE}, "metadata": {"labels": {"kubevirt.io/nodeName": OTHER_NODE}}});
    cluster.write_vmi(reqwest::Method::PATCH, "web-1", "application/merge-patch+json", &patch).await;
    let released = answer(web1, Duration::from_secs(15)).await;
    assert!(
        matches!(&released, Ok((200, body)) if body.contains("migrated")),
        "{released:?}\n{}",
        cluster.logs()
    );

    // A hook on a node without pressure and without a deletion: no cause evac takes; answered once
    // `pressureShownWithinSeconds` (15 s) passed with nothing written.
    let web2 = cluster.hook(1, "web-2");
    let quiet = answer(web2, Duration::from_secs(30)).await;
    assert!(matches!(&quiet, Ok((200, body)) if body.contains("no-pressure")), "{quiet:?}");
    let pod = cluster.get(&format!("/api/v1/namespaces/{NS}/pods/{}", launcher_name("web-2"))).await;
    assert!(pod["metadata"]["annotations"].get("evac.kubevirt.io/held-since").is_none(), "{pod}");

    // The endpoint restarts mid-hold (here: it stops): the kubelet's call ends, and the pod stops
    // as with KubeVirt alone. It never outlives the process.
    let scratch_vmi = with(cluster.vmi("scratch").await, "/spec/evictionStrategy", json!("LiveMigrate"));
    cluster.write_vmi(reqwest::Method::PUT, "scratch", "application/json", &scratch_vmi).await;
    let held = cluster.hook(0, "scratch");
    assert!(still_open(&held, Duration::from_secs(3)).await, "scratch was not held: {:?}", held.await);
    drop(cluster.holds[0].0.take());
    let ended = answer(held, Duration::from_secs(10)).await;
    assert!(ended.is_err() || matches!(&ended, Ok((200, _))), "{ended:?}");
}

/// Idle sockets on the hook port are closed after 10 s without a request in flight (a hold is one,
/// and stays), and idle sockets on the probe port never keep the kubelet's probes out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sockets_hold_neither_the_hooks_nor_the_probes() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    std::fs::write(dir.path().join("objects.json"), objects().to_string()).unwrap();
    let (kubeconfig, objects_file) = (path("kubeconfig"), path("objects.json"));
    let sim = ["sim", "serve", "--no-components", "--addr", "127.0.0.1:0", "--kubeconfig", &kubeconfig];
    let sim_args: Vec<&str> = sim.iter().copied().chain(["--objects", &objects_file]).collect();
    let (_sim, listening) = spawn(&sim_args, &dir.path().join("sim.log"));
    let api = listening.url("api").to_owned();
    wait_until_ok(&format!("{api}/api"), "evac sim serve", &dir.path().join("sim.log")).await;
    // The example policies, modules by absolute path, in a file this test may change.
    let example = std::fs::read_to_string(repo_root().join("examples/control/policies.yml")).unwrap();
    let dist = format!("{}/", repo_root().join("dist/policies").display());
    std::fs::write(dir.path().join("policies.yml"), example.replace("../../dist/policies/", &dist)).unwrap();
    let policies = path("policies.yml");
    let cache = cache_dir().to_str().unwrap().to_owned();
    let log = dir.path().join("hold.log");
    let args = ["hold", "--node", OTHER_NODE, "--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0"];
    let common = ["--policies", &policies, "--kubeconfig", &kubeconfig, "--cache-dir", &cache];
    let args: Vec<&str> = args.iter().copied().chain(common).collect();
    let (hold, listening) = spawn(&args, &log);
    let readiness = format!("{}/readiness", listening.url("probes"));
    wait_until_ok(&readiness, "evac hold", &log).await;

    let connect = |port: u16| {
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream
    };
    let probes: Vec<_> = (0..200).map(|_| connect(listening.port("probes"))).collect();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let answer = client.get(&readiness).send().await;
    assert!(answer.is_ok_and(|r| r.status() == 200), "readiness beside 200 idle sockets");
    drop(probes);

    // policies.yml changed in place (monitor mode to protect, a ConfigMap update) is taken up
    // without a restart, which would end every hold.
    let changed = std::fs::read_to_string(&policies).unwrap().replacen(
        "disruption-cause:\n",
        "disruption-cause:\n  policyMode: monitor\n",
        1,
    );
    evac_e2e::server::replace(std::path::Path::new(&policies), changed.as_bytes());
    let metrics = format!("{}/metrics", listening.url("probes"));
    let swapped = r#"evac_policy_swaps_total{policy="disruption-cause",result="applied"}"#;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = client.get(&metrics).send().await.unwrap().text().await.unwrap();
        if text.lines().any(|l| l.starts_with(swapped)) {
            break;
        }
        assert!(Instant::now() < deadline, "evac hold did not reload its policies:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // SIGHUP reloads too, through the same reloader, and the endpoint stays up.
    evac_e2e::server::hang_up(hold.0.id());
    evac_e2e::server::wait_for_log(&log, "SIGHUP: reloading").await;
    let answer = client.get(&readiness).send().await;
    assert!(answer.is_ok_and(|r| r.status() == 200), "readiness after SIGHUP");

    let hooks: Vec<_> = (0..50).map(|_| connect(listening.port("hold"))).collect();
    let started = Instant::now();
    for mut stream in hooks {
        let mut byte = [0u8; 1];
        let closed = matches!(stream.read(&mut byte), Ok(0) | Err(_));
        assert!(closed && started.elapsed() < Duration::from_secs(25), "an idle hook socket stayed open");
    }
}
