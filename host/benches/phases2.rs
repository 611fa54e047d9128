use evac::cluster::{ObjectSource, StaticContext, ListQuery};
use evac::kubewarden::{self, admission};
use evac_core::cluster::{GetResource, ListResourcesAll};
use evac_core::{ClusterReader, ReadError};
use serde_json::value::RawValue;
struct Direct(StaticContext);
impl ClusterReader for Direct {
    fn get_resource(&self, r: &GetResource) -> Result<Vec<u8>, ReadError> {
        self.0.get(&r.api_version, &r.kind, r.namespace.as_deref(), &r.name).map(|a| a.to_vec())
    }
    fn list_resources_all(&self, r: &ListResourcesAll) -> Result<Vec<u8>, ReadError> {
        self.0.list(&r.api_version, &r.kind, &ListQuery::default())
    }
}
fn main() {
    let root = std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let ctx = StaticContext::from_file(&root.join("examples/evictions/context.yaml")).unwrap();
    for f in ["01-drain-live-migratable.json", "11-plain-pod.json"] {
    let input = std::fs::read(root.join("examples/evictions/requests").join(f)).unwrap();
    let req = admission::request_from_input(&input).unwrap();
    let settings = RawValue::from_string("{}".into()).unwrap();
    let payload = kubewarden::validation_payload(&req, &settings);
    let reader = Direct(StaticContext::from_file(&root.join("examples/evictions/context.yaml")).unwrap());
    let n = 300000;
    let t = std::time::Instant::now();
    for _ in 0..n { pod_eviction::evaluate(&payload, &reader).unwrap(); }
    println!("{f} full {:?}", t.elapsed() / n);
    let t = std::time::Instant::now();
    for _ in 0..n { let v: evac_core::model::ValidationRequest<pod_eviction::Settings> = serde_json::from_slice(&payload).unwrap(); std::hint::black_box(v); }
    println!("parse request {:?}", t.elapsed() / n);
    let pod = ctx.get("v1","Pod",Some("default"),"virt-launcher-web-1-8xk2p").unwrap();
    let t = std::time::Instant::now();
    for _ in 0..n { let v: evac_core::model::Pod = serde_json::from_slice(&pod).unwrap(); std::hint::black_box(v); }
    println!("parse pod {:?} ({} bytes)", t.elapsed() / n, pod.len());
    let t = std::time::Instant::now();
    for _ in 0..n { let v: serde::de::IgnoredAny = serde_json::from_slice(&pod).unwrap(); std::hint::black_box(v); }
    println!("skip pod {:?}", t.elapsed() / n);
    }
}
