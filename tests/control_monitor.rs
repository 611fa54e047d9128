//! `evac control` on the kube-rs back end, in monitor mode: against the simulated API server
//! (kube-rs watch caches, writes through the API), the controller evaluates `evacuation` on a
//! marked VMI, records the migration it would create, and creates nothing; in protect mode the
//! same pass creates it. With no node to go to, it defers the migration with one event. And an
//! API server that restarts under it (every connection, watches included, dropped) costs it
//! nothing: its caches resync and it migrates what changed meanwhile, without duplicates.

use std::sync::Arc;
use std::time::Duration;

use evac::control::Controller;
use evac_cluster::kube::KubeCluster;
use evac_cluster::{Executor, Kind};
use evac_e2e::*;
use evac_evaluator::{Loader, Metrics, Pipeline, PoliciesFile, Registry};
use evac_runtime::wapc::{EngineOptions, PolicyEngine};
use evac_sim::{SimClock, Store};
use serde_json::json;

fn evacuation_policies(mode: &str) -> PoliciesFile {
    policies_with(mode, &repo_root().join("dist/policies/evacuation.wasm"))
}

/// The controller's policies in `mode`, with `module` as the evacuation policy, creating the
/// migrations themselves (KubeVirt's evacuation controller is not part of these clusters).
fn policies_with(mode: &str, module: &std::path::Path) -> PoliciesFile {
    PoliciesFile::parse(&policies_text(mode, module), "/".into()).unwrap()
}

/// The text of [`policies_with`]'s file.
fn policies_text(mode: &str, module: &std::path::Path) -> String {
    let disruption = repo_root().join("dist/policies/disruption-cause.wasm");
    let text = format!(
        "evacuation:\n  module: {}\n  policyMode: {mode}\n  settings: {{kubevirtEvacuationController: false}}\n  hostCapabilities: [kubernetes/*]\n  contextAwareResources:\n    - {{apiVersion: v1, kind: Node}}\n    - {{apiVersion: metrics.k8s.io/v1beta1, kind: NodeMetrics}}\n    - {{apiVersion: v1, kind: Pod}}\n    - {{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}}\n    - {{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstanceMigration}}\n    - {{apiVersion: kubevirt.io/v1, kind: KubeVirt}}\ndisruption-cause:\n  module: {}\n  policyMode: {mode}\n  settings: {{kubevirtEvacuationController: false}}\n  hostCapabilities: [kubernetes/*]\n  contextAwareResources:\n    - {{apiVersion: v1, kind: Node}}\n    - {{apiVersion: metrics.k8s.io/v1beta1, kind: NodeMetrics}}\n    - {{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}}\n    - {{apiVersion: kubevirt.io/v1, kind: KubeVirt}}\n",
        module.display(),
        disruption.display()
    );
    text
}

/// The simulated API server on a port the system chose, with a cordoned node, a VMI marked for
/// evacuation from it (a drain under way), and another node with room for it when `room`.
async fn simulated_api(room: bool) -> (Arc<Store>, tempfile::TempDir) {
    let store = Arc::new(Store::new(Arc::new(SimClock::default()), 10_000));
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}, "spec": {"unschedulable": true}});
    let vmi =
        with(vmi(NS, "web", Some("LiveMigrate"), true, NODE), "/status/evacuationNodeName", json!(NODE));
    let vmi = with(vmi, "/metadata/labels", json!({"kubevirt.io/nodeName": NODE}));
    let other = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": OTHER_NODE}, "spec": {}});
    let mut objects = vec![kubevirt_cr(None), node, vmi, launcher_pod(NS, "web", NODE)];
    if room {
        objects.push(other);
    }
    for object in objects {
        store.insert(object).unwrap();
    }
    let dir = evac_e2e::control::serve_simulated_api(&store).await;
    (store, dir)
}

/// One controller pass over the simulated API with the policies in `mode`: the migrations then in
/// the cluster, and the pipeline's effect counts.
async fn one_pass(mode: &str) -> (usize, std::collections::BTreeMap<String, usize>, evac::control::Pass) {
    let (store, _, pipeline, pass) = passes(mode, true, 1).await;
    let (migrations, _) = store.list(&evac_sim::kinds::migrations(), None, None, None);
    (migrations.len(), pipeline.effect_counts(), pass)
}

/// `evac control`'s parts on the kube-rs back end, against the API of the kubeconfig in `dir`,
/// with the policies in `mode`: its watch caches (synced), its pipeline and its controller.
async fn controller_on(dir: &tempfile::TempDir, mode: &str) -> (Arc<KubeCluster>, Pipeline, Controller) {
    controller_with(dir, evacuation_policies(mode)).await
}

/// `evac control`'s parts with these policies.
async fn controller_with(
    dir: &tempfile::TempDir,
    file: PoliciesFile,
) -> (Arc<KubeCluster>, Pipeline, Controller) {
    evac_e2e::control::controller_parts(&dir.path().join("kubeconfig"), file, Arc::new(Metrics::default()))
        .await
}

/// `count` controller passes over the simulated API (with room for the VM or not) with the
/// policies in `mode`: the store, its API's directory, the pipeline and the last pass.
async fn passes(
    mode: &str,
    room: bool,
    count: usize,
) -> (Arc<Store>, tempfile::TempDir, Pipeline, evac::control::Pass) {
    let (store, dir) = simulated_api(room).await;
    let (cluster, pipeline, controller) = controller_on(&dir, mode).await;
    let mut pass = controller.reconcile(&*cluster, true).await.unwrap();
    for _ in 1..count {
        pass = controller.reconcile(&*cluster, true).await.unwrap();
    }
    (store, dir, pipeline, pass)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_mode_creates_nothing_through_the_api_and_records_what_it_would_have() {
    let (created, effects, pass) = one_pass("monitor").await;
    assert_eq!(created, 0, "monitor mode created a migration: {effects:?}");
    assert_eq!(effects.get("evacuation CreateMigration monitored"), Some(&1), "{effects:?}");
    assert!(effects.keys().all(|k| k.ends_with(" monitored")), "{effects:?}");
    assert_eq!((pass.effects_applied, pass.effects_failed), (0, 0), "{pass:?}");
    assert!(pass.effects_monitored >= 1, "{pass:?}");

    // The same pass in protect mode creates it.
    let (created, effects, _) = one_pass("protect").await;
    assert_eq!(created, 1, "{effects:?}");
    assert_eq!(effects.get("evacuation CreateMigration applied"), Some(&1), "{effects:?}");
}

/// With no node to go to, the controller defers the migration: one event on the VMI (recorded
/// once however many passes see it), counted by reason in the metrics, and no migration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_evacuation_is_one_event_and_a_metric() {
    let (store, _dir, pipeline, _) = passes("protect", false, 3).await;
    let (migrations, _) = store.list(&evac_sim::kinds::migrations(), None, None, None);
    assert_eq!(migrations.len(), 0);
    let (events, _) = store.list(&Kind::new("v1", "Event"), None, None, None);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["reason"], "EvacuationDeferred", "{}", events[0]);
    assert_eq!(events[0]["involvedObject"]["name"], "web", "{}", events[0]);
    let metrics = pipeline.metrics().encode();
    assert!(
        metrics.contains(r#"evac_policy_events_total{policy="evacuation",reason="EvacuationDeferred"} 1"#),
        "{metrics}"
    );
}

/// The simulated API served by a runtime of its own on a thread of its own: stopping it drops
/// every connection, watches included, as an API server restart does.
struct ApiServer {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl ApiServer {
    fn start(store: Arc<Store>, addr: std::net::SocketAddr) -> (Self, std::net::SocketAddr) {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (bound, bound_at) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
                bound.send(listener.local_addr().unwrap()).unwrap();
                tokio::spawn(async move { axum::serve(listener, evac_sim::api::router(store)).await });
                let _ = tokio::task::spawn_blocking(move || stopped.recv()).await;
            });
            // The runtime drops here, and with it every connection task.
        });
        let addr = bound_at.recv().unwrap();
        (Self { stop, thread }, addr)
    }

    fn stop(self) {
        self.stop.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

fn marked_vm(name: &str) -> [serde_json::Value; 2] {
    let vmi = with(vmi(NS, name, Some("LiveMigrate"), true, NODE), "/status/evacuationNodeName", json!(NODE));
    [with(vmi, "/metadata/labels", json!({"kubevirt.io/nodeName": NODE})), launcher_pod(NS, name, NODE)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_restart_loses_nothing_and_duplicates_nothing() {
    let store = Arc::new(Store::new(Arc::new(SimClock::default()), 10_000));
    let cordoned = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}, "spec": {"unschedulable": true}});
    let other = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": OTHER_NODE}, "spec": {}});
    for object in [kubevirt_cr(None), cordoned, other].into_iter().chain(marked_vm("web")) {
        store.insert(object).unwrap();
    }
    let (api, addr) = ApiServer::start(Arc::clone(&store), "127.0.0.1:0".parse().unwrap());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kubeconfig"), evac_sim::kubeconfig(&format!("http://{addr}"))).unwrap();

    let (cluster, _, controller) = controller_on(&dir, "protect").await;
    controller.reconcile(&*cluster, true).await.unwrap();
    let migrated = || {
        let (migrations, _) = store.list(&evac_sim::kinds::migrations(), None, None, None);
        let mut names: Vec<String> =
            migrations.iter().map(|m| m["spec"]["vmiName"].as_str().unwrap().to_owned()).collect();
        names.sort();
        names
    };
    assert_eq!(migrated(), ["web"]);

    // The API server goes away; while it is down a drain marks another VM; it comes back on the
    // same address with the same storage.
    api.stop();
    for object in marked_vm("db") {
        store.insert(object).unwrap();
    }
    let (api, _) = ApiServer::start(Arc::clone(&store), addr);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while migrated().len() < 2 && std::time::Instant::now() < deadline {
        // A pass may fail while the caches reconnect; the next one runs on what they hold.
        let _ = controller.reconcile(&*cluster, true).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = controller.reconcile(&*cluster, true).await;
    assert_eq!(migrated(), ["db", "web"], "one migration each, none twice");
    api.stop();
}

/// An evacuation policy that panics (writing its message through WASI, as a Rust policy does),
/// evaluated on the controller's runtime: the evaluation fails and is counted, nothing is written,
/// and the controller goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_policy_fails_its_evaluation_not_the_controller() {
    let (store, dir) = simulated_api(true).await;
    let file = policies_with("protect", &test_data("wat/panics.wat"));
    let (cluster, pipeline, controller) = controller_with(&dir, file).await;
    for _ in 0..2 {
        controller.reconcile(&*cluster, true).await.unwrap();
    }
    let (migrations, _) = store.list(&evac_sim::kinds::migrations(), None, None, None);
    assert!(migrations.is_empty());
    let metrics = pipeline.metrics().encode();
    assert!(
        metrics.lines().any(|l| l.starts_with("evac_policy_faults_total{policy=\"evacuation\"")
            && l.contains("kind=\"trap\"")),
        "{metrics}"
    );
}

/// The two policies share settings (`kubevirtEvacuationController`, `nodePressure`): a set whose
/// policies disagree is refused at start, and a reload to one is refused whole (the served set
/// stays), as a policy version that cannot load is.
#[tokio::test(flavor = "multi_thread")]
async fn policies_whose_shared_settings_differ_are_refused() {
    let text = policies_text("protect", &repo_root().join("dist/policies/evacuation.wasm"));
    let disagreeing =
        text.replacen("kubevirtEvacuationController: false", "kubevirtEvacuationController: true", 1);
    let disagreeing = PoliciesFile::parse(&disagreeing, "/".into()).unwrap();
    let registry_of = |file: &PoliciesFile| {
        let engine = PolicyEngine::new(EngineOptions {
            cache_dir: Some(server::cache_dir()),
            ..EngineOptions::default()
        })
        .unwrap();
        let store = Arc::new(cluster([]));
        let loader = Loader { engine, source: Arc::clone(&store) as _ };
        let registry = Arc::new(
            tokio::task::block_in_place(|| Registry::start(file, loader, Arc::new(Metrics::default())))
                .unwrap(),
        );
        Pipeline::new(registry, Executor::new(store as _), Arc::new(Metrics::default()))
    };
    let refused = Controller::new(registry_of(&disagreeing)).err().expect("refused at start").to_string();
    assert!(
        refused.contains("kubevirtEvacuationController settings") && refused.contains("differ"),
        "{refused}"
    );

    let pipeline = registry_of(&PoliciesFile::parse(&text, "/".into()).unwrap());
    Controller::new(pipeline.clone()).expect("agreeing settings");
    let served = pipeline.registry().current();
    let refusals = tokio::task::block_in_place(|| {
        pipeline.registry().reload_checked(&disagreeing, evac::control::check_policies)
    });
    assert!(matches!(refusals.as_slice(), [r] if r.contains("differ")), "{refusals:?}");
    assert!(Arc::ptr_eq(&served, &pipeline.registry().current()), "the served set stays");
}

/// A pass whose time is up leaves what it did not evaluate for the next passes, which take it
/// up in order: a disrupted launcher pod before any node, and every request in the end (as
/// `evac control` runs, with a budget per pass, so that its first pass over a whole cluster keeps
/// no newly held pod waiting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_out_of_time_leaves_the_rest_for_the_next() {
    let (store, dir) = simulated_api(true).await;
    // A preempted VM on the other node, with the preemption gate on.
    let gates = json!(["PreemptionEvictionLiveMigration"]);
    store
        .insert(with(kubevirt_cr(None), "/spec/configuration/developerConfiguration/featureGates", gates))
        .unwrap();
    let db = with(
        vmi(NS, "db", Some("LiveMigrate"), true, OTHER_NODE),
        "/metadata/labels",
        json!({"kubevirt.io/nodeName": OTHER_NODE}),
    );
    store.insert(db).unwrap();
    let preempted = with(
        with(
            launcher_pod(NS, "db", OTHER_NODE),
            "/metadata/deletionTimestamp",
            json!("2026-01-01T00:00:00Z"),
        ),
        "/status/conditions",
        json!([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]),
    );
    store.insert(preempted).unwrap();
    let (cluster, _, controller) = controller_on(&dir, "protect").await;
    let controller = controller.with_pass_budget(Duration::ZERO);

    let first = controller.reconcile(&*cluster, true).await.unwrap();
    assert_eq!(first.evaluations, 1, "{first:?}");
    assert!(first.deferred > 0, "{first:?}");
    let db = store.get(&evac_sim::kinds::vmis(), NS, "db").unwrap();
    assert_eq!(db["status"]["evacuationNodeName"], OTHER_NODE, "the preempted pod comes first: {db}");

    let mut passes = vec![first];
    while passes.last().unwrap().deferred > 0 && passes.len() < 50 {
        passes.push(controller.reconcile(&*cluster, false).await.unwrap());
    }
    let last = passes.last().unwrap();
    assert_eq!(last.deferred, 0, "work left after {} passes: {last:?}", passes.len());
    assert!(passes.iter().all(|p| p.evaluations <= 1), "{passes:?}");
    // The drained node's evacuation was evaluated in its turn: the migration exists.
    let (migrations, _) = store.list(&evac_sim::kinds::migrations(), None, None, None);
    assert!(!migrations.is_empty(), "no migration after {} passes", passes.len());
}
