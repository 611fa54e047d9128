//! Effects as `evac serve` carries them out, in-process: a failed effect turns the answer into
//! KubeVirt's 429 `kubevirt failed marking the vmi for eviction: <err>`, and monitor mode carries
//! out none.

use std::sync::{Arc, Mutex};

use evac_cluster::{
    ApiError, ClusterStore, Executor, Kind, ListQuery, MemoryStore, ObjectSource, Patch, ReadError,
};
use evac_e2e::*;
use evac_evaluator::admission;
use evac_evaluator::{Loader, Metrics, Pipeline, PoliciesFile, Registry};
use evac_runtime::wapc::{EngineOptions, PolicyEngine};
use futures::future::BoxFuture;
use serde_json::{json, Value};

/// Reads from a context, refuses every write with the API server's words, and records the
/// patches it was asked for.
struct RefusingStore {
    context: MemoryStore,
    asked: Mutex<Vec<(String, String, Value)>>,
    /// Never answer patches, as a hung API server.
    hang: bool,
}

impl ObjectSource for RefusingStore {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<[u8]>, ReadError> {
        ObjectSource::get(&self.context, api_version, kind, namespace, name)
    }

    fn list(&self, api_version: &str, kind: &str, query: &ListQuery<'_>) -> Result<Vec<u8>, ReadError> {
        ObjectSource::list(&self.context, api_version, kind, query)
    }
}

fn refusal() -> ApiError {
    ApiError {
        code: 400,
        reason: "BadRequest",
        message: "admission webhook \"virtualmachineinstances.kubevirt.io\" denied the request".into(),
    }
}

impl ClusterStore for RefusingStore {
    fn create<'a>(
        &'a self,
        kind: &'a Kind,
        _: &'a str,
        object: Value,
        _: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        self.asked.lock().unwrap().push((kind.kind.clone(), String::new(), object));
        Box::pin(async { Err(refusal()) })
    }

    fn patch<'a>(
        &'a self,
        kind: &'a Kind,
        _: &'a str,
        name: &'a str,
        patch: &'a Patch,
        _: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        let Patch::Merge(patch) = patch else { panic!("marks are merge patches") };
        self.asked.lock().unwrap().push((kind.kind.clone(), name.to_owned(), patch.clone()));
        if self.hang {
            return Box::pin(std::future::pending());
        }
        Box::pin(async { Err(refusal()) })
    }

    fn delete<'a>(
        &'a self,
        kind: &'a Kind,
        _: &'a str,
        name: &'a str,
        _: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        self.asked.lock().unwrap().push((kind.kind.clone(), name.to_owned(), Value::Null));
        Box::pin(async { Err(refusal()) })
    }
}

fn pipeline(mode: &str) -> (Pipeline, Arc<RefusingStore>) {
    pipeline_over(mode, false)
}

fn pipeline_over(mode: &str, hang: bool) -> (Pipeline, Arc<RefusingStore>) {
    let policies = format!(
        "pod-eviction:\n  module: {}\n  policyMode: {mode}\n  hostCapabilities: [kubernetes/*]\n  contextAwareResources:\n    - {{apiVersion: v1, kind: Pod}}\n    - {{apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}}\n    - {{apiVersion: kubevirt.io/v1, kind: KubeVirt}}\n",
        policy_path().display()
    );
    let file = PoliciesFile::parse(&policies, "/".into()).unwrap();
    let context = MemoryStore::from_objects([
        kubevirt_cr(Some("LiveMigrate")),
        vmi(NS, "vm-1", None, true, NODE),
        launcher_pod(NS, "vm-1", NODE),
    ])
    .unwrap();
    let store = Arc::new(RefusingStore { context, asked: Mutex::default(), hang });
    let engine = PolicyEngine::new(EngineOptions::default()).unwrap();
    let metrics = Arc::new(Metrics::default());
    let registry =
        Registry::start(&file, Loader { engine, source: Arc::clone(&store) as _ }, Arc::clone(&metrics))
            .unwrap();
    (Pipeline::new(Arc::new(registry), Executor::new(Arc::clone(&store) as _), metrics), store)
}

fn drain(uid: &str) -> admission::ParsedReview {
    let review =
        with(admission_review(eviction_request(NS, &launcher_name("vm-1"))), "/request/uid", json!(uid));
    admission::parse_review(&serde_json::to_vec(&review).unwrap()).unwrap()
}

#[tokio::test]
async fn a_failed_effect_becomes_kubevirts_429() {
    let (pipeline, store) = pipeline("protect");
    let served = pipeline.registry().current()["pod-eviction"].clone();
    let (answer, _) = admission::answer(&pipeline, &served, drain("u-1")).await;
    let answer = serde_json::to_value(&answer).unwrap();
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 429);
    assert_eq!(
        answer["response"]["status"]["message"],
        "kubevirt failed marking the vmi for eviction: admission webhook \"virtualmachineinstances.kubevirt.io\" denied the request"
    );
    let asked = store.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        vec![(
            "VirtualMachineInstance".into(),
            "vm-1".into(),
            // A drain's mark: no source, and none left from an earlier mark of evac's own; a
            // request evac held is replaced by the mark.
            json!({"status": {"evacuationNodeName": NODE},
                   "metadata": {"annotations": {"kubevirt.io/eviction-source": null,
                                                "evac.kubevirt.io/evacuate-from": null}}})
        )]
    );
    assert!(pipeline.metrics().encode().contains(
        r#"evac_policy_effects_total{policy="pod-eviction",effect="MarkForEvacuation",result="failed"} 1"#
    ));
}

#[tokio::test]
async fn monitor_mode_carries_out_no_effect() {
    let (pipeline, store) = pipeline("monitor");
    let served = pipeline.registry().current()["pod-eviction"].clone();
    let (answer, _) = admission::answer(&pipeline, &served, drain("u-2")).await;
    let answer = serde_json::to_value(&answer).unwrap();
    assert_eq!(answer["response"]["allowed"], true);
    assert!(store.asked.lock().unwrap().is_empty());
    assert_eq!(
        pipeline.effect_counts(),
        [("pod-eviction MarkForEvacuation monitored".to_owned(), 1)].into(),
        "what the policy would have done is recorded"
    );
}

/// A hung API server: the mark waits at most the pipeline's effect deadline, then the eviction
/// gets KubeVirt's 429 for a mark it could not write, well within the webhook's timeout.
#[tokio::test]
async fn a_hung_api_server_is_a_429_at_the_effect_deadline() {
    let (pipeline, store) = pipeline_over("protect", true);
    let pipeline = pipeline.with_effect_timeout(std::time::Duration::from_millis(100));
    let served = pipeline.registry().current()["pod-eviction"].clone();
    let (answer, _) = admission::answer(&pipeline, &served, drain("u-2")).await;
    let answer = serde_json::to_value(&answer).unwrap();
    assert_eq!(answer["response"]["status"]["code"], 429, "{answer}");
    assert_eq!(
        answer["response"]["status"]["message"],
        "kubevirt failed marking the vmi for eviction: the API server did not answer within 100 ms"
    );
    assert_eq!(store.asked.lock().unwrap().len(), 1);
}
