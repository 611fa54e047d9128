//! Effects as `evac serve` carries them out, in-process: a failed effect turns the answer into
//! KubeVirt's 429 `kubevirt failed marking the vmi for eviction: <err>`, and monitor mode carries
//! out none.

use std::sync::{Arc, Mutex};

use evac::cluster::{ClusterWriter, Effect, StaticContext};
use evac::server::admission::{self, Context};
use evac::server::config::PoliciesFile;
use evac::server::metrics::Metrics;
use evac::server::registry::{Loader, Registry};
use evac::wapc::{EngineOptions, PolicyEngine};
use evac_e2e::*;
use futures::future::BoxFuture;
use serde_json::json;

/// Refuses every effect with the API server's words, and records what it was asked.
#[derive(Default)]
struct RefusingWriter {
    asked: Mutex<Vec<Effect>>,
}

impl ClusterWriter for RefusingWriter {
    fn apply<'a>(&'a self, effect: &'a Effect) -> BoxFuture<'a, Result<(), String>> {
        self.asked.lock().unwrap().push(effect.clone());
        Box::pin(async {
            Err("admission webhook \"virtualmachineinstances.kubevirt.io\" denied the request".into())
        })
    }
}

fn registry(mode: &str) -> Registry {
    let policies = format!(
        "pod-eviction:\n  module: {}\n  policyMode: {mode}\n  contextAwareResources:\n    - {{apiVersion: v1, kind: Pod}}\n    - {{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}}\n    - {{apiVersion: kubevirt.io/v1, kind: KubeVirt}}\n",
        policy_path().display()
    );
    let file = PoliciesFile::parse(&policies, "/".into()).unwrap();
    let context = StaticContext::from_objects([
        kubevirt_cr(Some("LiveMigrate")),
        vmi(NS, "vm-1", None, true, NODE),
        launcher_pod(NS, "vm-1", NODE),
    ])
    .unwrap();
    let engine = PolicyEngine::new(EngineOptions::default()).unwrap();
    Registry::start(&file, Loader { engine, source: Arc::new(context) }, Arc::new(Metrics::default()))
        .unwrap()
}

fn drain(uid: &str) -> admission::ParsedReview {
    let review =
        with(admission_review(eviction_request(NS, &launcher_name("vm-1"))), "/request/uid", json!(uid));
    admission::parse_review(&serde_json::to_vec(&review).unwrap()).unwrap()
}

#[tokio::test]
async fn a_failed_effect_becomes_kubevirts_429() {
    let registry = registry("protect");
    let writer = Arc::new(RefusingWriter::default());
    let context = Context { writer: writer.clone(), metrics: Arc::new(Metrics::default()) };
    let served = registry.current()["pod-eviction"].clone();
    let answer = admission::answer(&context, served, drain("u-1")).await;
    let answer = serde_json::to_value(&answer).unwrap();
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 429);
    assert_eq!(
        answer["response"]["status"]["message"],
        "kubevirt failed marking the vmi for eviction: admission webhook \"virtualmachineinstances.kubevirt.io\" denied the request"
    );
    assert_eq!(*writer.asked.lock().unwrap(), vec![mark(NS, "vm-1", NODE)]);
    assert!(context.metrics.encode().contains(
        r#"evac_policy_effects_total{policy="pod-eviction",effect="MarkForEvacuation",result="failed"} 1"#
    ));
}

#[tokio::test]
async fn monitor_mode_carries_out_no_effect() {
    let registry = registry("monitor");
    let writer = Arc::new(RefusingWriter::default());
    let context = Context { writer: writer.clone(), metrics: Arc::new(Metrics::default()) };
    let served = registry.current()["pod-eviction"].clone();
    let answer = serde_json::to_value(admission::answer(&context, served, drain("u-2")).await).unwrap();
    assert_eq!(answer["response"]["allowed"], true);
    assert!(writer.asked.lock().unwrap().is_empty());
}
