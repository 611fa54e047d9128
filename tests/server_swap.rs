//! Hot swaps under load: hundreds of requests in flight while `policies.yml` alternates between
//! two versions many times. No request fails, and every answer is wholly one version's: its
//! verdict matches the version its audit annotation names. A broken version is then refused
//! and the last good one keeps answering.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use evac_e2e::server::{replace, Setup, TestServer};
use evac_e2e::*;
use serde_json::{json, Value};

/// Version `a` reads the cluster-wide LiveMigrate strategy (denies the drain of a migratable VM
/// without its own strategy); version `b` names a KubeVirt CR that does not exist (allows it).
fn policies(label: &str, module: &str) -> String {
    let kubevirt = if label.starts_with('a') { "kubevirt" } else { "missing" };
    format!(
        "pod-eviction:
  module: {module}
  label: {label}
  hostCapabilities: [kubernetes/*]
  contextAwareResources:
    - {{apiVersion: v1, kind: Pod}}
    - {{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}}
    - {{apiVersion: kubevirt.io/v1, kind: KubeVirt}}
  settings: {{kubevirt: {{namespace: kubevirt, name: {kubevirt}}}}}
"
    )
}

fn context() -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": [
        kubevirt_cr_named("kubevirt", "kubevirt", Some("LiveMigrate")),
        vmi(NS, "vm-1", None, true, NODE),
        launcher_pod(NS, "vm-1", NODE),
    ]})
}

/// A dry-run drain: nothing is marked, so every request sees the same cluster.
fn review(uid: usize) -> Value {
    let request = with(eviction_request(NS, &launcher_name("vm-1")), "/dryRun", json!(true));
    with(admission_review(request), "/request/uid", json!(format!("uid-{uid}")))
}

#[test]
fn versions_swap_under_load_without_a_failed_request() {
    let module_copy = tempfile::tempdir().unwrap();
    let module = module_copy.path().join("pod-eviction.wasm");
    std::fs::copy(policy_path(), &module).unwrap();
    let module = module.display().to_string();
    let server =
        TestServer::start(Setup { policies: &policies("a0", &module), context: context(), extra_args: &[] });
    let server = Arc::new(server);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    const CLIENTS: usize = 200;
    const SWAPS: usize = 24;
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let by_version: Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>> = Default::default();

    runtime.block_on(async {
        let mut clients = Vec::new();
        for client in 0..CLIENTS {
            let (server, stop, answered, by_version) =
                (server.clone(), stop.clone(), answered.clone(), by_version.clone());
            clients.push(tokio::spawn(async move {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let uid = client * 1_000_000 + n;
                    n += 1;
                    let body = serde_json::to_vec(&review(uid)).unwrap();
                    let (status, answer) = server.post("pod-eviction", body).await;
                    assert_eq!(status, 200, "request {uid} failed: {answer}");
                    let response = &answer["response"];
                    assert_eq!(response["uid"], json!(format!("uid-{uid}")));
                    let version =
                        response["auditAnnotations"]["evac-policy-version"].as_str().unwrap().to_owned();
                    let denied = response["allowed"] == false;
                    if version.starts_with('a') {
                        assert!(denied, "version {version} must deny: {response}");
                        assert_eq!(response["status"]["code"], 429);
                    } else {
                        assert!(version.starts_with('b'), "unknown version {version}");
                        assert!(!denied, "version {version} must allow: {response}");
                    }
                    let label = version.split('@').next().unwrap().to_owned();
                    *by_version.lock().unwrap().entry(label).or_default() += 1;
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }));
        }

        // Swap while the clients run: a, b, a, b, ... each a new version label.
        let config = server.path("policies.yml");
        for swap in 1..=SWAPS {
            let label = format!("{}{swap}", if swap % 2 == 1 { 'b' } else { 'a' });
            let before = answered.load(Ordering::Relaxed);
            replace(&config, policies(&label, &module).as_bytes());
            wait_for_version(&server, &label).await;
            // Let some requests through on each version.
            while answered.load(Ordering::Relaxed) < before + 50 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }

        // A broken module is refused; the last good version keeps answering.
        let broken = module_copy.path().join("broken.wasm");
        std::fs::write(&broken, b"\0asm\x01\0\0\0 this is not a module").unwrap();
        let broken = broken.display().to_string();
        replace(&config, policies("a-broken", &broken).as_bytes());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let metrics = server.metrics().await;
            if metrics.contains(r#"evac_policy_swaps_total{policy="pod-eviction",result="refused"} 1"#) {
                break;
            }
            assert!(Instant::now() < deadline, "the broken version was not refused:\n{}", server.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let last = format!("{}{SWAPS}", if SWAPS % 2 == 1 { 'b' } else { 'a' });
        let response = server.review("pod-eviction", &review(0)).await;
        assert!(response["auditAnnotations"]["evac-policy-version"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{last}@")));
        assert!(server.log().contains("new policy version refused"), "{}", server.log());

        stop.store(true, Ordering::Relaxed);
        for client in clients {
            client.await.expect("a client failed");
        }
    });

    let by_version = by_version.lock().unwrap();
    assert_eq!(by_version.len(), SWAPS + 1, "every version answered: {by_version:?}");
    let total: usize = by_version.values().sum();
    eprintln!("{total} answers across {} versions: {by_version:?}", by_version.len());
    assert!(total >= SWAPS * 50, "{total} answers");
    let metrics = runtime.block_on(server.metrics());
    assert!(
        metrics.contains(&format!(
            r#"evac_policy_swaps_total{{policy="pod-eviction",result="applied"}} {SWAPS}"#
        )),
        "{metrics}"
    );
}

async fn wait_for_version(server: &TestServer, label: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = server.metrics().await;
        if metrics.lines().any(|l| {
            l.starts_with("evac_policy_version_info") && l.contains(&format!(r#"version="{label}@sha256:"#))
        }) {
            return;
        }
        assert!(Instant::now() < deadline, "version {label} was not swapped in:\n{}", server.log());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
