//! One evaluation of the pod-eviction policy, in a fresh isolated guest state per call, beside the
//! same policy code called natively.
//!
//! - `reset`: evac's default, an initialised instance put back into its post-init state after
//!   each call;
//! - `instantiate`: a new instance per call (pooling allocator), Kubewarden's model;
//! - `native`: the policy crate compiled for the host, reading the same JSON.
//!
//! Needs the built module: `make bench` (or `make build` first). Numbers go in docs/benchmarks.md.

// `criterion_group!` writes its `pub fn benches` without a doc comment.
#![allow(missing_docs)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use evac_cluster::MemoryStore;
use evac_core::cluster::{GetResource, ListResourcesAll};
use evac_core::{ClusterReader, ReadError};
use evac_runtime::capabilities::{HostCapabilities, KubernetesCapabilities};
use evac_runtime::kubewarden::{self, admission};
use evac_runtime::wapc::{EngineOptions, Policy, PolicyEngine};
use serde_json::value::RawValue;

/// The requests measured: the evacuation path (reads the pod, the VMI and the KubeVirt CR, parses
/// the Eviction, marks the VMI) and the cheapest path (a pod that is not KubeVirt's).
const CASES: [(&str, &str); 2] =
    [("evacuate", "01-drain-live-migratable.json"), ("allow-plain-pod", "11-plain-pod.json")];

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
    let context = MemoryStore::from_file(&examples.join("context.yaml")).unwrap();
    let input = std::fs::read(examples.join("requests").join(request)).unwrap();
    Fixture {
        capabilities: Arc::new(KubernetesCapabilities::new(Arc::new(context))),
        request: admission::request_from_input(&input).unwrap(),
        settings: RawValue::from_string("{}".into()).unwrap(),
    }
}

fn policy(fixture: &Fixture, reuse_instances: bool) -> Policy {
    let engine = PolicyEngine::new(EngineOptions { reuse_instances, ..EngineOptions::default() }).unwrap();
    let module =
        engine.load(&repo().join("dist/policies/pod-eviction.wasm")).expect("run `make build` first");
    module.prewarm(1).unwrap();
    Policy::new(module, fixture.capabilities.clone())
}

/// The host capabilities as a native `ClusterReader`, so the native run reads the same JSON.
struct Native<'a>(&'a dyn HostCapabilities);

impl ClusterReader for Native<'_> {
    fn get_resource(&self, r: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        let payload = serde_json::to_vec(r).unwrap();
        self.0
            .call("kubewarden", "kubernetes", "get_resource", &payload)
            .map_err(|e| ReadError::from_message(e.to_string()))
    }

    fn list_resources_all(&self, r: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        let payload = serde_json::to_vec(r).unwrap();
        self.0
            .call("kubewarden", "kubernetes", "list_resources_all", &payload)
            .map_err(|e| ReadError::from_message(e.to_string()))
    }
}

fn evaluation(c: &mut Criterion) {
    let mut group = c.benchmark_group("pod-eviction");
    for (label, request) in CASES {
        let fixture = fixture(request);
        for (mode, reuse) in [("reset", true), ("instantiate", false)] {
            let policy = policy(&fixture, reuse);
            group.bench_function(format!("{label}/wasm-{mode}"), |b| {
                b.iter(|| kubewarden::validate(&policy, &fixture.request, &fixture.settings).unwrap())
            });
        }
        let payload = kubewarden::validation_payload(&fixture.request, &fixture.settings);
        let reader = Native(fixture.capabilities.as_ref());
        group.bench_function(format!("{label}/native"), |b| {
            b.iter(|| pod_eviction::evaluate(&payload, &reader).unwrap())
        });
    }
    group.finish();
}

/// p50, p90 and p99 of single evaluations, which criterion does not report. This machine has
/// bursts of slowness of its own (they show in native code too), so the pass runs in five rounds
/// and reports each round's p50 beside the figures over all of them.
fn percentiles(_: &mut Criterion) {
    const ROUNDS: usize = 5;
    const PER_ROUND: usize = 20_000;
    for (label, request) in CASES {
        let fixture = fixture(request);
        for (mode, reuse) in [("reset", true), ("instantiate", false)] {
            let policy = policy(&fixture, reuse);
            let mut all = Vec::with_capacity(ROUNDS * PER_ROUND);
            let mut round_p50s = Vec::with_capacity(ROUNDS);
            for _ in 0..ROUNDS {
                let mut round: Vec<Duration> = (0..PER_ROUND)
                    .map(|_| {
                        let start = Instant::now();
                        kubewarden::validate(&policy, &fixture.request, &fixture.settings).unwrap();
                        start.elapsed()
                    })
                    .collect();
                round.sort();
                round_p50s.push(round[PER_ROUND / 2]);
                all.extend(round);
            }
            all.sort();
            round_p50s.sort();
            let at = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)];
            println!(
                "pod-eviction/{label}/wasm-{mode}: p50 {:.1?}  p90 {:.1?}  p99 {:.1?}; round p50s {:.1?} ({:?})",
                at(0.50),
                at(0.90),
                at(0.99),
                round_p50s,
                policy.module().stats()
            );
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(4)).warm_up_time(Duration::from_secs(1));
    targets = evaluation, percentiles
}
criterion_main!(benches);
