//! `evac control` and its feature gates, on the kube-rs back end against the simulated API
//! server: a preemption with its gate off is left to KubeVirt, and says so (a Warning event on the
//! VMI, recorded once; the disruption counted once, by cause and handling); the same preemption
//! with the gate on is an evacuation. KubeVirt 1.9's `disabledFeatureGates` switches a gate off.

use std::sync::Arc;
use std::time::Duration;

use evac::control::Controller;
use evac_cluster::kube::KubeCluster;
use evac_cluster::Kind;
use evac_control::disruptions::gate_states;
use evac_core::disruption::{NODE_PRESSURE_GATE, NOEXECUTE_TAINT_GATE, PREEMPTION_GATE};
use evac_e2e::*;
use evac_evaluator::metrics::DisruptionLabels;
use evac_evaluator::{Metrics, PoliciesFile};
use evac_sim::{SimClock, Store};
use serde_json::{json, Value};

fn policies() -> PoliciesFile {
    let module = |name: &str| repo_root().join(format!("dist/policies/{name}.wasm"));
    let resources = "  hostCapabilities: [kubernetes/*]\n  contextAwareResources:\n    - {apiVersion: v1, kind: Node}\n    - {apiVersion: metrics.k8s.io/v1beta1, kind: NodeMetrics}\n    - {apiVersion: v1, kind: Pod}\n    - {apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}\n    - {apiVersion: kubevirt.io/v1, kind: VirtualMachineInstanceMigration}\n    - {apiVersion: kubevirt.io/v1, kind: KubeVirt}\n";
    let text = format!(
        "evacuation:\n  module: {}\n{resources}disruption-cause:\n  module: {}\n{resources}",
        module("evacuation").display(),
        module("disruption-cause").display()
    );
    PoliciesFile::parse(&text, "/".into()).unwrap()
}

/// A preempted launcher pod (`DisruptionTarget`, being deleted) of a running, migratable VMI.
fn preempted_pod(vmi: &str) -> Value {
    let pod = launcher_pod(NS, vmi, NODE);
    let pod = with(pod, "/metadata/uid", json!(format!("pod-uid-{vmi}")));
    let pod = with(pod, "/metadata/deletionTimestamp", json!("2026-11-27T10:00:00Z"));
    with(
        pod,
        "/status/conditions",
        json!([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]),
    )
}

fn running_vmi(name: &str) -> Value {
    with(
        vmi(NS, name, Some("LiveMigrate"), true, NODE),
        "/metadata/labels",
        json!({"kubevirt.io/nodeName": NODE}),
    )
}

/// The simulated API server with two nodes and a KubeVirt CR with these developer gates.
async fn simulated_api(enabled: &[&str], disabled: &[&str]) -> (Arc<Store>, tempfile::TempDir) {
    let store = Arc::new(Store::new(Arc::new(SimClock::default()), 10_000));
    let mut cr = kubevirt_cr(None);
    cr["spec"]["configuration"]["developerConfiguration"] =
        json!({"featureGates": enabled, "disabledFeatureGates": disabled});
    for name in [NODE, OTHER_NODE] {
        store
            .insert(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}))
            .unwrap();
    }
    store.insert(cr).unwrap();
    let dir = evac_e2e::control::serve_simulated_api(&store).await;
    (store, dir)
}

async fn controller(dir: &tempfile::TempDir) -> (Arc<KubeCluster>, Arc<Metrics>, Controller) {
    let metrics = Arc::new(Metrics::new(evac_evaluator::metrics::Process::Control));
    let (cluster, _, controller) =
        evac_e2e::control::controller_parts(&dir.path().join("kubeconfig"), policies(), Arc::clone(&metrics))
            .await;
    (cluster, metrics, controller)
}

/// Passes until the watch caches have what the store has (the controller reads its caches).
async fn settle(cluster: &KubeCluster, controller: &Controller) {
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        controller.reconcile(cluster, true).await.unwrap();
    }
}

fn disruptions(metrics: &Metrics, handling: &str) -> u64 {
    metrics
        .disruptions
        .get_or_create(&DisruptionLabels { cause: "preemption".into(), handling: handling.into() })
        .get()
}

fn events(store: &Store, reason: &str) -> Vec<Value> {
    let (events, _) = store.list(&Kind::new("v1", "Event"), None, None, None);
    events.into_iter().map(|e| (*e).clone()).filter(|e| e["reason"] == reason).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemption_with_its_gate_off_is_left_to_kubevirt_and_said_once() {
    // NoExecute and node pressure on; preemption listed in both lists: off.
    let (store, dir) =
        simulated_api(&[NOEXECUTE_TAINT_GATE, NODE_PRESSURE_GATE, PREEMPTION_GATE], &[PREEMPTION_GATE]).await;
    let (cluster, metrics, controller) = controller(&dir).await;

    // At start: what evac acts on.
    let states = gate_states(&controller.registry().current(), &*cluster).unwrap();
    let on: Vec<(&str, bool)> = states.iter().map(|s| (s.gate, s.on)).collect();
    assert_eq!(on, [(PREEMPTION_GATE, false), (NOEXECUTE_TAINT_GATE, true), (NODE_PRESSURE_GATE, true)]);

    store.insert(running_vmi("web")).unwrap();
    store.insert(preempted_pod("web")).unwrap();
    settle(&cluster, &controller).await;
    // The pod changes again (its containers stop): still one disruption, one event.
    let pod = with(preempted_pod("web"), "/status/phase", json!("Failed"));
    store.update(&evac_sim::kinds::pods(), NS, pod, false).unwrap();
    settle(&cluster, &controller).await;

    assert_eq!(disruptions(&metrics, "gate-off"), 1, "{}", metrics.encode());
    assert_eq!(disruptions(&metrics, "evacuating"), 0, "{}", metrics.encode());
    let warnings = events(&store, "DisruptionLeftToKubeVirt");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let event = &warnings[0];
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["involvedObject"]["kind"], "VirtualMachineInstance");
    assert_eq!(event["involvedObject"]["name"], "web");
    let message = event["message"].as_str().unwrap();
    assert!(message.contains("feature gate PreemptionEvictionLiveMigration is off"), "{message}");
    let vmi = store.get(&evac_sim::kinds::vmis(), NS, "web").unwrap();
    assert!(vmi.pointer("/status/evacuationNodeName").is_none(), "marked with the gate off: {vmi}");
    assert!(vmi.pointer("/metadata/annotations").is_none(), "asked for with the gate off: {vmi}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemption_with_its_gate_on_is_an_evacuation() {
    let (store, dir) = simulated_api(&[PREEMPTION_GATE], &[]).await;
    let (cluster, metrics, controller) = controller(&dir).await;
    store.insert(running_vmi("web")).unwrap();
    store.insert(preempted_pod("web")).unwrap();
    settle(&cluster, &controller).await;
    assert_eq!(disruptions(&metrics, "evacuating"), 1, "{}", metrics.encode());
    assert_eq!(disruptions(&metrics, "gate-off"), 0, "{}", metrics.encode());
    assert!(events(&store, "DisruptionLeftToKubeVirt").is_empty());
    // Beside KubeVirt's evacuation controller, evac asks for the evacuation (it marks in turn).
    let vmi = store.get(&evac_sim::kinds::vmis(), NS, "web").unwrap();
    assert_eq!(
        vmi.pointer("/metadata/annotations/evac.kubevirt.io~1evacuate-from"),
        Some(&json!(NODE)),
        "{vmi}"
    );
}
