//! `kubectl drain` with evac, end to end, with every piece a separate process as in a cluster:
//! `evac sim serve` is the API server and the cluster's components, `evac serve` answers its
//! `pods/eviction` webhook over HTTPS (the manifest of `deploy/webhook.yaml`, pointed at it), and
//! `evac control` runs as the controller. The drain is the real `kubectl` on the PATH.
//!
//! Beside KubeVirt (a real install): KubeVirt's webhook (`virt-api-validator`) answers beside
//! evac's, KubeVirt's evacuation controller creates the migrations, and evac records their cause.
//! Replacing KubeVirt (`--replace-kubevirt`, policies with `kubevirtEvacuationController: false`):
//! evac's controller creates the migrations, which is what the restart and failover tests test.
//!
//! The cluster's components run 20 times faster than real time: a migration takes under a second,
//! and the drain's 5 s retries of a 429 set the pace.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use base64::Engine as _;
use evac_e2e::repo_root;
use evac_e2e::server::{cache_dir, self_signed, spawn_listening, Listening};
use serde_json::{json, Value};

const SPEED: &str = "20";
/// The controllers' leader election, shorter than kube-controller-manager's 15 s, 10 s, 2 s.
const LEASE_DURATION: f64 = 3.0;
const RENEW_DEADLINE: f64 = 2.0;
const RETRY_PERIOD: f64 = 0.5;
const DRAINED: &str = "node01";
/// The VMs: name, node, eviction strategy. Two migrate from the drained node at a time
/// (KubeVirt's `parallelOutboundMigrationsPerNode`), so they go in three rounds.
const VMS: [(&str, &str, &str); 11] = [
    ("web-1", DRAINED, "LiveMigrate"),
    ("web-2", DRAINED, "LiveMigrate"),
    ("web-3", DRAINED, "LiveMigrate"),
    ("web-4", DRAINED, "LiveMigrate"),
    ("web-5", DRAINED, "LiveMigrate"),
    ("web-6", DRAINED, "LiveMigrate"),
    ("scratch-1", DRAINED, "None"),
    ("scratch-2", DRAINED, "None"),
    ("other-1", "node02", "LiveMigrate"),
    ("other-2", "node03", "LiveMigrate"),
    ("other-3", "node02", "None"),
];

/// The tests take turns: each starts three processes, and the second reuses the modules the
/// first compiled.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Both webhooks registered and both controllers running: KubeVirt creates each migration (evac
/// creates none; a second would be refused by virt-api), evac records every cause.
#[tokio::test]
async fn kubectl_drain_beside_kubevirt_migrates_each_vm_once() {
    let _turn = TURN.lock().await;
    let started = Instant::now();
    let mut cluster = Cluster::start(Mode::Beside).await;
    let drain = cluster.drain();
    let output = drain.await.unwrap();
    cluster.check_drained(&output).await;
    let metrics = cluster.control_metrics().await;
    assert_eq!(cluster.created_migrations().await, 0, "{metrics}");
    let migrations = cluster.migrations().await;
    for migration in &migrations {
        let name = migration["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("kubevirt-evacuation-"), "{migration}");
    }
    let annotated = effect_count(&metrics, "AnnotateMigration");
    assert_eq!(annotated, live_migrated().count(), "{metrics}");
    // What a dashboard shows: evacuations by cause and outcome, and how long they took.
    let metric =
        |line: &str| metrics.lines().find_map(|l| l.strip_prefix(line)).map(|n| n.parse::<f64>().unwrap());
    let count = live_migrated().count() as f64;
    assert_eq!(
        metric(r#"evac_evacuations_total{cause="drain",outcome="succeeded"} "#),
        Some(count),
        "{metrics}"
    );
    assert_eq!(metric(r#"evac_evacuation_duration_seconds_count{cause="drain"} "#), Some(count), "{metrics}");
    eprintln!("drained in {:?} (with the start: {:?})", cluster.drain_time(), started.elapsed());
}

#[tokio::test]
async fn kubectl_drain_migrates_each_vm_once_through_evac() {
    let _turn = TURN.lock().await;
    let started = Instant::now();
    let mut cluster = Cluster::start(Mode::Replacing).await;
    let drain = cluster.drain();
    let output = drain.await.unwrap();
    cluster.check_drained(&output).await;
    let migrations = live_migrated().count();
    assert_eq!(cluster.created_migrations().await, migrations, "{}", cluster.control_metrics().await);
    eprintln!("drained in {:?} (with the start: {:?})", cluster.drain_time(), started.elapsed());
}

/// How evac runs in the test's cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Beside KubeVirt's webhook and evacuation controller, as in a real cluster.
    Beside,
    /// In their place.
    Replacing,
}

/// The count of `effect`s the evacuation policy's effects applied, from a /metrics text.
fn effect_count(metrics: &str, effect: &str) -> usize {
    let line =
        format!(r#"evac_policy_effects_total{{policy="evacuation",effect="{effect}",result="applied"}} "#);
    metrics.lines().find_map(|l| l.strip_prefix(line.as_str())).map_or(0, |n| n.parse().unwrap())
}

/// A controller killed mid-drain and started again picks up where the cluster is: the migrations
/// under way are not created again, the VMIs still waiting get theirs.
#[tokio::test]
async fn a_controller_restarted_mid_drain_migrates_each_vm_once() {
    let _turn = TURN.lock().await;
    let mut cluster = Cluster::start(Mode::Replacing).await;
    let drain = cluster.drain();
    let before = cluster.wait_for_migrations().await;
    cluster.restart_control().await;
    assert!(before < live_migrated().count(), "the restart came after every migration was created");
    let output = drain.await.unwrap();
    cluster.check_drained(&output).await;
    assert!(cluster.created_migrations().await > 0, "the restarted controller created no migration");
}

/// Two replicas of `evac control` on one Lease: one leads, the other follows. The leader is
/// killed mid-drain; the follower leads within the lease duration (client-go's rule: a full
/// duration from when it last saw the Lease renewed, plus its tries) and finishes the drain:
/// every VM migrates exactly once, and the new leader created migrations the old one had not.
#[tokio::test]
async fn a_follower_takes_over_from_a_leader_killed_mid_drain() {
    let _turn = TURN.lock().await;
    let (mut cluster, leader, holder) = Cluster::with_two_controllers().await;
    let drain = cluster.drain();
    cluster.wait_for_migrations().await;
    let killed = Instant::now();
    cluster.kill_control(leader);
    // Counted once the leader is gone: none of its writes can land after this.
    let before = cluster.migrations().await.len();
    let mut new_holder = cluster.lease_holder().await;
    while new_holder == holder {
        assert!(killed.elapsed() < Duration::from_secs(30), "nobody took the lease from {holder}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        new_holder = cluster.lease_holder().await;
    }
    let took_over = killed.elapsed();
    // The lease duration, two tries with their jitter, and a second for a busy machine.
    let bound = Duration::from_secs_f64(LEASE_DURATION + 2.0 * 1.2 * RETRY_PERIOD + 1.0);
    assert!(took_over <= bound, "the follower took {took_over:?} to lead (at most {bound:?})");
    let follower = cluster.leader().await;
    assert_ne!(follower, leader);
    let output = drain.await.unwrap();
    cluster.check_drained(&output).await;
    assert!(before < live_migrated().count(), "the leader was killed after every migration was created");
    // One migration per VMI (check_drained), and the follower created those the leader had not.
    let created = cluster.created_migrations_by(follower).await;
    assert_eq!(created, live_migrated().count() - before, "{}", cluster.metrics_of(follower).await);
    eprintln!("the follower led {took_over:?} after the leader was killed");
}

/// SIGHUP reloads `evac control`'s policies (through the reloader `evac serve` and `evac hold`
/// use) without a restart: the controller goes on leading.
#[tokio::test]
async fn a_sighup_reloads_the_controller_in_place() {
    let _turn = TURN.lock().await;
    let mut cluster = Cluster::start(Mode::Replacing).await;
    let control = cluster.controls.len() - 1;
    let process = &cluster.processes[cluster.controls[control].0];
    let (pid, log) = (process.child.id(), process.log.clone());
    evac_e2e::server::hang_up(pid);
    evac_e2e::server::wait_for_log(&log, "SIGHUP: reloading").await;
    assert!(cluster.processes[cluster.controls[control].0].child.try_wait().unwrap().is_none(), "exited");
    assert_eq!(cluster.leader().await, control, "the controller stopped leading after SIGHUP");
}

/// The metric line of the replica that leads.
const LEADING: &str = r#"evac_leader_election_master_status{name="evac-control"} 1"#;

/// A leader told to stop (SIGTERM, as when its pod is deleted) releases the Lease: the follower
/// leads at its next try, well before a lease duration.
#[tokio::test]
async fn a_leader_told_to_stop_hands_over_at_once() {
    let _turn = TURN.lock().await;
    let (mut cluster, leader, holder) = Cluster::with_two_controllers().await;
    let pid = cluster.processes[cluster.controls[leader].0].child.id();
    let stopped = Instant::now();
    let status = Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    assert!(status.success());
    let exited = cluster.processes[cluster.controls[leader].0].child.wait().unwrap();
    assert!(exited.success(), "evac control exited with {exited} on SIGTERM");
    // Released (no holder), or already taken by the follower at its next try.
    let lease = cluster.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/evac-control").await;
    let now_held_by = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    assert_ne!(now_held_by, holder, "not released: {lease}");
    let follower = cluster.leader().await;
    assert_ne!(follower, leader);
    assert_ne!(cluster.lease_holder().await, holder);
    // Its next try (1.2 retry periods at most) and a second for a busy machine; a lease that
    // expired instead would take at least a lease duration less a retry period.
    let took_over = stopped.elapsed();
    let bound = Duration::from_secs_f64(1.2 * RETRY_PERIOD + 1.0);
    assert!(took_over < bound, "the follower took {took_over:?} to lead after a release (at most {bound:?})");
}

/// A follower told to stop while it waits for the Lease (SIGTERM during acquisition) exits at
/// once and cleanly, and touches nothing: the leader keeps the Lease.
#[tokio::test]
async fn a_follower_told_to_stop_exits_at_once() {
    let _turn = TURN.lock().await;
    let (mut cluster, leader, holder) = Cluster::with_two_controllers().await;
    let follower = 1 - leader;
    let process = &mut cluster.processes[cluster.controls[follower].0];
    let stopped = Instant::now();
    let status = Command::new("kill").args(["-TERM", &process.child.id().to_string()]).status().unwrap();
    assert!(status.success());
    // Never holding the Lease, it would wait for ever if the signal were not heard while it waits.
    let exited = loop {
        if let Some(exited) = process.child.try_wait().unwrap() {
            break exited;
        }
        assert!(stopped.elapsed() < Duration::from_secs(10), "a follower did not stop on SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(exited.success(), "evac control exited with {exited} on SIGTERM while following");
    assert_eq!(cluster.lease_holder().await, holder, "the leader keeps the Lease");
}

fn live_migrated() -> impl Iterator<Item = &'static str> {
    VMS.iter().filter(|(_, node, strategy)| *node == DRAINED && *strategy == "LiveMigrate").map(|vm| vm.0)
}

/// One `evac` process, killed when dropped; its standard error goes to a log file.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts a server on port 0 and returns it with the addresses it reported.
    fn start(args: &[String], log: PathBuf) -> (Self, Listening) {
        let (child, listening) = spawn_listening(args, &log);
        (Self { child, log }, listening)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Cluster {
    dir: tempfile::TempDir,
    api: String,
    http: reqwest::Client,
    /// `evac sim serve`, `evac serve`, then each `evac control` started.
    processes: Vec<Process>,
    /// Each `evac control` started: its index in `processes` and its metrics port.
    controls: Vec<(usize, u16)>,
    drain_started: Instant,
    mode: Mode,
}

impl Cluster {
    async fn start(mode: Mode) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let objects = json!({"apiVersion": "v1", "kind": "List", "items": objects(mode)});
        std::fs::write(dir.path().join("objects.json"), objects.to_string()).unwrap();
        let mut cluster = Self {
            api: String::new(),
            http: reqwest::Client::new(),
            processes: Vec::new(),
            controls: Vec::new(),
            drain_started: Instant::now(),
            mode,
            dir,
        };
        let mut sim = vec!["sim", "serve", "--speed", SPEED, "--addr", "127.0.0.1:0"];
        if mode == Mode::Replacing {
            sim.push("--replace-kubevirt");
        }
        let sim = args(
            &sim,
            &[("--kubeconfig", cluster.path("kubeconfig")), ("--objects", cluster.path("objects.json"))],
        );
        cluster.api = cluster.spawn(&sim, "sim.log").url("api").to_owned();
        let api = format!("{}/api", cluster.api);
        cluster.wait_for(&api, "evac sim serve").await;

        let (cert, key) = self_signed();
        std::fs::write(cluster.path("tls.crt"), &cert).unwrap();
        std::fs::write(cluster.path("tls.key"), key).unwrap();
        let serve = ["serve", "--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0"];
        let serve = args(
            &serve,
            &[
                ("--config", repo_root().join("examples/serve/policies.yml")),
                ("--kubeconfig", cluster.path("kubeconfig")),
                ("--cert-file", cluster.path("tls.crt")),
                ("--key-file", cluster.path("tls.key")),
                ("--cache-dir", cache_dir()),
            ],
        );
        let server = cluster.spawn(&serve, "serve.log");
        cluster.wait_for(&format!("{}/readiness", server.url("probes")), "evac serve").await;
        cluster.register_webhook(&format!("{}/validate/pod-eviction", server.url("admission")), &cert).await;

        cluster.start_control().await;
        cluster
    }

    /// A cluster with a second `evac control` replica: which one leads, and its name in the Lease.
    async fn with_two_controllers() -> (Self, usize, String) {
        let mut cluster = Self::start(Mode::Replacing).await;
        cluster.start_control().await;
        let leader = cluster.leader().await;
        let holder = cluster.lease_holder().await;
        (cluster, leader, holder)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The controller's policies: the example's, with `kubevirtEvacuationController: false` when
    /// replacing KubeVirt (module paths made absolute, as the copy lives elsewhere).
    fn control_policies(&self) -> PathBuf {
        let example = repo_root().join("examples/control/policies.yml");
        if self.mode == Mode::Beside {
            return example;
        }
        let mut policies: Value = serde_yaml::from_str(&std::fs::read_to_string(&example).unwrap()).unwrap();
        for (id, policy) in policies.as_object_mut().unwrap() {
            let module = example.parent().unwrap().join(policy["module"].as_str().unwrap());
            policy["module"] = json!(path_text(&module));
            if id == "disruption-cause" || id == "evacuation" {
                policy["settings"]["kubevirtEvacuationController"] = json!(false);
            }
        }
        let path = self.path("control-policies.yml");
        std::fs::write(&path, serde_yaml::to_string(&policies).unwrap()).unwrap();
        path
    }

    fn spawn(&mut self, args: &[String], log: &str) -> Listening {
        let (process, listening) = Process::start(args, self.path(log));
        self.processes.push(process);
        listening
    }

    async fn start_control(&mut self) {
        let control = ["control", "--metrics-addr", "127.0.0.1:0"];
        let (lease, renew, retry) =
            (LEASE_DURATION.to_string(), RENEW_DEADLINE.to_string(), RETRY_PERIOD.to_string());
        let mut control = args(
            &control,
            &[
                ("--policies", self.control_policies()),
                ("--kubeconfig", self.path("kubeconfig")),
                ("--cache-dir", cache_dir()),
            ],
        );
        control.extend(
            [
                ["--leader-elect-lease-duration", lease.as_str()],
                ["--leader-elect-renew-deadline", &renew],
                ["--leader-elect-retry-period", &retry],
            ]
            .concat()
            .iter()
            .map(|a| a.to_string()),
        );
        let log = format!("control-{}.log", self.controls.len() + 1);
        let port = self.spawn(&control, &log).port("metrics");
        self.controls.push((self.processes.len() - 1, port));
        // /metrics is served once the watch caches have synced and the modules are loaded.
        let metrics = format!("http://127.0.0.1:{port}/metrics");
        self.wait_for(&metrics, "evac control").await;
    }

    /// Kills `evac control` and starts another, which knows only what the cluster says.
    async fn restart_control(&mut self) {
        self.kill_control(self.controls.len() - 1);
        self.start_control().await;
    }

    /// Kills the `control`th `evac control` started.
    fn kill_control(&mut self, control: usize) {
        self.processes[self.controls[control].0].kill();
    }

    /// Waits (up to 30 s) until exactly one running `evac control` says it leads; returns which.
    async fn leader(&mut self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut leading = Vec::new();
            for control in 0..self.controls.len() {
                let running =
                    self.processes[self.controls[control].0].child.try_wait().ok().flatten().is_none();
                if running && self.metrics_of(control).await.contains(LEADING) {
                    leading.push(control);
                }
            }
            assert!(leading.len() <= 1, "two replicas lead at once: {leading:?}");
            if let [leader] = leading[..] {
                return leader;
            }
            assert!(Instant::now() < deadline, "no evac control leads within 30 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The Lease's holder.
    async fn lease_holder(&self) -> String {
        let lease = self.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/evac-control").await;
        lease["spec"]["holderIdentity"].as_str().unwrap_or_default().to_owned()
    }

    /// `deploy/webhook.yaml`, with the test server's URL and certificate for its service.
    async fn register_webhook(&self, url: &str, cert: &str) {
        let path = repo_root().join("deploy/webhook.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        // The file's ValidatingWebhookConfiguration (the other is launcher-hold's mutating one).
        let mut webhook: Value = serde_yaml::Deserializer::from_str(&text)
            .map(|doc| <Value as serde::Deserialize>::deserialize(doc).unwrap())
            .find(|doc| doc["kind"] == "ValidatingWebhookConfiguration")
            .expect("deploy/webhook.yaml has the pods/eviction webhook");
        webhook["metadata"].as_object_mut().unwrap().remove("annotations");
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(cert);
        webhook["webhooks"][0]["clientConfig"] = json!({"url": url, "caBundle": ca_bundle});
        let created = self
            .http
            .post(format!(
                "{}/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                self.api
            ))
            .header("content-type", "application/json")
            .body(webhook.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(created.status().as_u16(), 201, "{}", created.text().await.unwrap());
    }

    /// Polls `url` until the process started last answers 200 there (the first start compiles
    /// the modules: up to a minute).
    async fn wait_for(&mut self, url: &str, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !reqwest::get(url).await.is_ok_and(|r| r.status().is_success()) {
            let exited = self.processes.last_mut().and_then(|p| p.child.try_wait().ok().flatten());
            assert!(exited.is_none(), "{what} exited with {exited:?}");
            assert!(Instant::now() < deadline, "{what} did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `kubectl drain` of the drained node, in the background.
    fn drain(&mut self) -> tokio::task::JoinHandle<Output> {
        self.drain_started = Instant::now();
        let mut kubectl = Command::new("kubectl");
        kubectl
            .arg("--kubeconfig")
            .arg(self.path("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.path("kube-cache"));
        kubectl.args(["drain", DRAINED, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=90s"]);
        tokio::task::spawn_blocking(move || kubectl.output().expect("kubectl is needed on the PATH"))
    }

    fn drain_time(&self) -> Duration {
        self.drain_started.elapsed()
    }

    async fn get(&self, path: &str) -> Value {
        let text = self.http.get(format!("{}{path}", self.api)).send().await.unwrap().text().await.unwrap();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {text}"))
    }

    async fn items(&self, path: &str) -> Vec<Value> {
        self.get(path).await["items"].as_array().cloned().unwrap_or_default()
    }

    async fn migrations(&self) -> Vec<Value> {
        self.items("/apis/kubevirt.io/v1/virtualmachineinstancemigrations").await
    }

    /// Waits until the first migrations exist; returns how many.
    async fn wait_for_migrations(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let count = self.migrations().await.len();
            if count > 0 {
                return count;
            }
            assert!(Instant::now() < deadline, "no migration within 30 s of the drain");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The /metrics of the `control`th `evac control` started.
    async fn metrics_of(&self, control: usize) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.controls[control].1);
        match reqwest::get(url).await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The latest `evac control`'s /metrics.
    async fn control_metrics(&self) -> String {
        self.metrics_of(self.controls.len() - 1).await
    }

    /// The migrations the latest `evac control` created, from its /metrics.
    async fn created_migrations(&self) -> usize {
        self.created_migrations_by(self.controls.len() - 1).await
    }

    /// The migrations the `control`th `evac control` created, from its /metrics.
    async fn created_migrations_by(&self, control: usize) -> usize {
        let metrics = self.metrics_of(control).await;
        let line =
            r#"evac_policy_effects_total{policy="evacuation",effect="CreateMigration",result="applied"} "#;
        metrics.lines().find_map(|l| l.strip_prefix(line)).map_or(0, |n| n.parse().unwrap())
    }

    /// The drain completed; each LiveMigrate VM of the node migrated exactly once, through an
    /// evacuation migration of evac's; the others were shut down; nothing else moved.
    async fn check_drained(&self, drain: &Output) {
        let (stdout, stderr) =
            (String::from_utf8_lossy(&drain.stdout), String::from_utf8_lossy(&drain.stderr));
        assert!(drain.status.success(), "kubectl drain failed:\n{stderr}\n{stdout}");
        assert!(stdout.contains(&format!("node/{DRAINED} drained")), "{stdout}");
        let on_node = self.items(&format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{DRAINED}")).await;
        assert!(on_node.is_empty(), "pods left on {DRAINED}: {on_node:?}");

        let migrations = self.migrations().await;
        let mut migrated: Vec<&str> =
            migrations.iter().map(|m| m["spec"]["vmiName"].as_str().unwrap()).collect();
        migrated.sort();
        assert_eq!(
            migrated,
            live_migrated().collect::<Vec<_>>(),
            "one migration per VMI: {migrations:#?}\nkubectl drain:\n{stderr}\n{stdout}"
        );
        for migration in &migrations {
            let annotations = &migration["metadata"]["annotations"];
            assert_eq!(annotations["kubevirt.io/evacuationMigration"], DRAINED, "{migration}");
            // Evictions of a cordoned node's pods: a drain.
            assert_eq!(annotations["evac.kubevirt.io/cause"], "drain", "{migration}");
            assert_eq!(migration["status"]["phase"], "Succeeded", "{migration}");
        }
        for (name, node, strategy) in VMS {
            let vmi = self
                .get(&format!("/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/{name}"))
                .await;
            let (now_on, phase) = (vmi["status"]["nodeName"].as_str().unwrap(), &vmi["status"]["phase"]);
            match (node == DRAINED, strategy) {
                (true, "LiveMigrate") => {
                    assert!(now_on != DRAINED && phase == "Running", "{name} did not migrate: {vmi}");
                    assert_eq!(vmi["status"].get("evacuationNodeName"), None, "{vmi}");
                }
                // Stock virt-handler: the guest is shut down at SIGTERM and powers off cleanly.
                (true, _) => assert_eq!(phase, "Succeeded", "{name} was not shut down: {vmi}"),
                (false, _) => assert!(now_on == node && phase == "Running", "{name} was disturbed: {vmi}"),
            }
        }
    }
}

/// On a failure, every process's log, for the reason.
impl Drop for Cluster {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for process in &self.processes {
            let log = std::fs::read_to_string(&process.log).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(200)..].join("\n");
            eprintln!("--- {} (last 200 lines) ---\n{tail}", process.log.display());
        }
    }
}

/// Command-line arguments: flags with values, then flags with paths.
fn args(plain: &[&str], paths: &[(&str, PathBuf)]) -> Vec<String> {
    let mut args: Vec<String> = plain.iter().map(|a| a.to_string()).collect();
    for (flag, path) in paths {
        args.push(flag.to_string());
        args.push(path_text(path));
    }
    args
}

fn path_text(path: &Path) -> String {
    path.to_str().expect("a UTF-8 path").to_owned()
}

/// Three nodes, the KubeVirt CR, and each VM's VMI and launcher pod, shaped as KubeVirt makes
/// them (`kubevirt.io/nodeName` on the VMI, `kubevirt.io/domain` on the pod).
fn objects(mode: Mode) -> Vec<Value> {
    let mut items: Vec<Value> = ["node01", "node02", "node03"]
        .iter()
        .map(|name| {
            json!({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                   "status": {"capacity": {"memory": "64Gi"}, "allocatable": {"memory": "60Gi"},
                              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}})
        })
        .collect();
    items.push(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {"configuration": {"migrations": {"parallelMigrationsPerCluster": 5, "parallelOutboundMigrationsPerNode": 2}}},
        "status": {"phase": "Deployed"},
    }));
    if mode == Mode::Beside {
        // KubeVirt's own webhook, served by the simulator's virt-api, beside evac's.
        items.push(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "virt-api-validator"},
            "webhooks": [{
                "name": "virt-launcher-eviction-interceptor.kubevirt.io",
                "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun", "failurePolicy": "Fail",
                "clientConfig": {"service": {"namespace": "kubevirt", "name": "virt-api",
                                             "path": "/launcher-eviction-validate"}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods/eviction"]}],
            }],
        }));
    }
    for (name, node, strategy) in VMS {
        items.push(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            // The uid the launcher pod's ownerReference names: the garbage collector deletes pods
            // whose owner is gone.
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                         "labels": {"kubevirt.io/nodeName": node}},
            "spec": {"evictionStrategy": strategy, "domain": {"memory": {"guest": "1Gi"}}},
            "status": {"phase": "Running", "nodeName": node,
                       "conditions": [{"type": "Ready", "status": "True"}, {"type": "LiveMigratable", "status": "True"}]},
        }));
        items.push(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("virt-launcher-{name}-abcde"), "namespace": "default",
                "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": name},
                "annotations": {"kubevirt.io/domain": name},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": name,
                                     "uid": format!("uid-{name}"), "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                     "containers": [{"name": "compute", "image": "virt-launcher",
                                     "resources": {"requests": {"memory": "1Gi"}}}]},
            "status": {"phase": "Running"},
        }));
    }
    items
}
