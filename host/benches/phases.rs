use std::sync::Arc;
use evac::capabilities::KubernetesCapabilities;
use evac::cluster::StaticContext;
use evac::kubewarden::{self, admission};
use evac::wapc::{EngineOptions, Policy, PolicyEngine};
use serde_json::value::RawValue;
fn main() {
    let root = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let ctx = StaticContext::from_file(&root.join("examples/evictions/context.yaml")).unwrap();
    let input = std::fs::read(root.join("examples/evictions/requests/01-drain-live-migratable.json")).unwrap();
    let req = admission::request_from_input(&input).unwrap();
    let settings = RawValue::from_string("{}".into()).unwrap();
    for reuse in [true] {
    let engine = PolicyEngine::new(EngineOptions { reuse_instances: reuse, ..EngineOptions::default() }).unwrap();
    let module = engine.load(&root.join("dist/policies/pod-eviction.wasm")).unwrap();
    println!("blocker {:?}", module.reuse_blocker());
    let policy = Policy::new(module, Arc::new(KubernetesCapabilities::new(Arc::new(StaticContext::from_file(&root.join("examples/evictions/context.yaml")).unwrap()))));
    let t = std::time::Instant::now();
    let n = 150000;
    for _ in 0..n { kubewarden::validate(&policy, &req, &settings).unwrap(); }
    println!("reuse={reuse} {:?}/eval reset {} call {}", t.elapsed() / n, evac::wapc::RESET_NS.load(std::sync::atomic::Ordering::Relaxed)/n as u64, evac::wapc::CALL_NS.load(std::sync::atomic::Ordering::Relaxed)/n as u64);
    println!("dirty {} memlen {}", evac::wapc::DIRTY.load(std::sync::atomic::Ordering::Relaxed)/n as u64, evac::wapc::MEMLEN.load(std::sync::atomic::Ordering::Relaxed));
    }
    let _ = ctx;
}
