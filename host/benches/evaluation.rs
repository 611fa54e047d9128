//! One evaluation of the pod-eviction policy: the module in a fresh isolated guest state per call
//! (what the server and `evac eval` do), beside the same policy code called natively.
//!
//! Needs the built module: `make bench` (or `make build` first). Numbers go in docs/benchmarks.md.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use evac::capabilities::{HostCapabilities, KubernetesCapabilities};
use evac::cluster::StaticContext;
use evac::kubewarden::{self, admission};
use evac::wapc::{EngineOptions, Policy, PolicyEngine};
use evac_core::cluster::{GetResource, ListResourcesAll};
use evac_core::{ClusterReader, ReadError};
use serde_json::value::RawValue;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Fixture {
    capabilities: Arc<KubernetesCapabilities>,
    request: Box<RawValue>,
    settings: Box<RawValue>,
}

fn fixture(request: &str) -> Fixture {
    let examples = repo().join("examples/evictions");
    let context = StaticContext::from_file(&examples.join("context.yaml")).unwrap();
    let input = std::fs::read(examples.join("requests").join(request)).unwrap();
    Fixture {
        capabilities: Arc::new(KubernetesCapabilities::new(Arc::new(context))),
        request: admission::request_from_input(&input).unwrap(),
        settings: RawValue::from_string("{}".into()).unwrap(),
    }
}

/// The host capabilities as a native `ClusterReader`, so the native run reads the same JSON.
struct Native<'a>(&'a dyn HostCapabilities);

impl ClusterReader for Native<'_> {
    fn get_resource(&self, r: &GetResource) -> Result<Vec<u8>, ReadError> {
        let payload = serde_json::to_vec(r).unwrap();
        self.0.call("kubewarden", "kubernetes", "get_resource", &payload).map_err(ReadError::from_message)
    }

    fn list_resources_all(&self, r: &ListResourcesAll) -> Result<Vec<u8>, ReadError> {
        let payload = serde_json::to_vec(r).unwrap();
        self.0.call("kubewarden", "kubernetes", "list_resources_all", &payload).map_err(ReadError::from_message)
    }
}

fn policy(fixture: &Fixture) -> Policy {
    let engine = PolicyEngine::new(EngineOptions::default()).unwrap();
    let module = engine.load(&repo().join("dist/policies/pod-eviction.wasm")).expect("run `make build` first");
    Policy::new(module, fixture.capabilities.clone())
}

fn evaluation(c: &mut Criterion) {
    let mut group = c.benchmark_group("pod-eviction");
    // The evacuation path: reads the pod, the VMI and the KubeVirt CR, parses the Eviction, marks.
    for (label, request) in [("evacuate", "01-drain-live-migratable.json"), ("allow-plain-pod", "11-plain-pod.json")] {
        let fixture = fixture(request);
        let policy = policy(&fixture);
        group.bench_function(format!("wasm-isolated/{label}"), |b| {
            b.iter(|| kubewarden::validate(&policy, &fixture.request, &fixture.settings).unwrap())
        });
        let payload = kubewarden::validation_payload(&fixture.request, &fixture.settings);
        let reader = Native(fixture.capabilities.as_ref());
        group.bench_function(format!("native/{label}"), |b| {
            b.iter(|| pod_eviction::evaluate(&payload, &reader).unwrap())
        });
    }
    group.finish();
}

/// p50 and p99 of single evaluations, which criterion does not report.
fn percentiles(_: &mut Criterion) {
    let fixture = fixture("01-drain-live-migratable.json");
    let policy = policy(&fixture);
    let mut samples: Vec<Duration> = (0..20_000)
        .map(|_| {
            let start = Instant::now();
            kubewarden::validate(&policy, &fixture.request, &fixture.settings).unwrap();
            start.elapsed()
        })
        .collect();
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "pod-eviction/wasm-isolated/evacuate: p50 {:?}  p90 {:?}  p99 {:?}  max {:?} ({} runs)",
        at(0.50),
        at(0.90),
        at(0.99),
        samples[samples.len() - 1],
        samples.len()
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    targets = evaluation, percentiles
}
criterion_main!(benches);
