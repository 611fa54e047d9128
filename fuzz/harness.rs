//! What each fuzz target runs, shared with `tests/fuzz_regressions.rs`, which replays the seeds and
//! every input fuzzing has found through the same functions. A target passes an input when it
//! returns: every refusal must be an error value, never a panic, and nothing may hang.

use std::sync::{Arc, OnceLock};

use evac_core::model::{
    quantity, AdmissionRequest, Eviction, KubeVirt, Migration, Node, Pod, VirtualMachineInstance,
};
use evac_testkit::TestCluster;
use serde_json::Value;

/// The objects of `examples/evictions/context.yaml`: a cluster in which the decisions reach their
/// deeper branches (launcher pods, VMIs, a KubeVirt CR).
fn example_objects() -> &'static [Value] {
    static OBJECTS: OnceLock<Vec<Value>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let list: Value = serde_yaml::from_str(include_str!("../examples/evictions/context.yaml"))
            .expect("examples/evictions/context.yaml is YAML");
        list["items"].as_array().expect("a v1 List").clone()
    })
}

/// An AdmissionReview body as `evac serve` receives it: the envelope checked as the server checks
/// it, then the request decided as pod-eviction, disruption-cause and evacuation decide it.
pub fn admission_review(data: &[u8]) {
    let Ok(review) = evac_evaluator::admission::parse_review(data) else { return };
    let Ok(request) = serde_json::from_str::<AdmissionRequest<'_>>(review.request.get()) else { return };
    let _ = request.resource_path();
    let _ = request.is_dry_run();
    let cluster = TestCluster::new(example_objects().iter().cloned());
    let _ = evac_core::eviction::decide(&request, &Default::default(), &cluster);
    let _ = evac_core::disruption::decide(&request, &Default::default(), &cluster, 1.0e9);
    let mut evac = evac_core::evacuation::Context {
        flavor: evac_core::evacuation::Flavor::Evac,
        now: 1.0e9,
        trace: &mut evac_core::trace::Trace::off(),
    };
    let _ = evac_core::evacuation::decide_request(&request, &Default::default(), &cluster, &mut evac);
}

/// A JSON document decoded as each object the core reads, and every accessor the decisions call.
pub fn core_models(data: &[u8]) {
    let Ok(text) = evac_core::json_text(data) else { return };
    if let Ok(pod) = serde_json::from_str::<Pod<'_>>(text) {
        let _ = (pod.role(), pod.is_virt_launcher(), pod.is_completed(), pod.domain());
        let _ = (pod.is_terminating(), pod.disruption_reason());
    }
    if let Ok(vmi) = serde_json::from_str::<VirtualMachineInstance<'_>>(text) {
        let _ = (vmi.is_migratable(), vmi.memory(), vmi.is_being_deleted(), vmi.is_marked_for_evacuation());
        let _ = vmi.eviction_strategy(None);
    }
    if let Ok(node) = serde_json::from_str::<Node<'_>>(text) {
        let _ = (node.is_drain_tainted(), node.has_memory_pressure(), node.memory_available());
        let _ = node.memory_capacity();
    }
    if let Ok(metrics) = serde_json::from_str::<evac_core::model::NodeMetrics<'_>>(text) {
        let _ = metrics.memory_working_set();
    }
    if let Ok(eviction) = serde_json::from_str::<Eviction<'_>>(text) {
        let _ = (eviction.is_dry_run(), eviction.requested_by_descheduler());
    }
    if let Ok(migration) = serde_json::from_str::<Migration<'_>>(text) {
        let _ = (migration.is_active(), migration.is_failed(), migration.evacuation_node());
    }
    if let Ok(kubevirt) = serde_json::from_str::<KubeVirt<'_>>(text) {
        let _ =
            (kubevirt.eviction_strategy(), kubevirt.parallel_limits(), kubevirt.bandwidth_per_migration());
        let _ = (kubevirt.migration_timeouts(), kubevirt.feature_gate_enabled("NodePressureEvacuation"));
    }
}

/// A resource quantity (`16Gi`, `1.5e3`, `-2Ki`, ...) read as bytes and written back.
pub fn quantity(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Some(bytes) = quantity::bytes(text) {
        let _ = quantity::format_bytes(bytes);
    }
}

/// One HTTP request to the simulator's API, as `kubectl` or a controller would send it: the first
/// byte picks the method, the text up to the first newline is the path and query, the next byte
/// the content type, the rest the body. The API answers every request (an error is a Kubernetes
/// `Status`); a watch is opened and dropped without being read.
pub fn sim_api_request(data: &[u8]) {
    use tower::ServiceExt;

    let Some((&method, rest)) = data.split_first() else { return };
    let method = ["GET", "POST", "PUT", "PATCH", "DELETE"][usize::from(method) % 5];
    let newline = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    let Ok(target) = std::str::from_utf8(&rest[..newline]) else { return };
    let rest = rest.get(newline + 1..).unwrap_or_default();
    let (content_type, body) = match rest.split_first() {
        Some((&choice, body)) => (
            [
                "application/json",
                "application/merge-patch+json",
                "application/json-patch+json",
                "application/strategic-merge-patch+json",
                "application/apply-patch+yaml",
            ][usize::from(choice) % 5],
            body,
        ),
        None => ("application/json", &[][..]),
    };
    let Ok(request) = axum::http::Request::builder()
        .method(method)
        .uri(format!("http://sim{}{target}", if target.starts_with('/') { "" } else { "/" }))
        .header("content-type", content_type)
        .body(axum::body::Body::from(body.to_vec()))
    else {
        return;
    };
    let watching = target.contains("watch");
    let store = Arc::new(evac_sim::Store::new(Arc::new(evac_sim::SimClock::default()), 1_000));
    for object in example_objects() {
        let _ = store.insert(object.clone());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    runtime.block_on(async move {
        let response = evac_sim::api::router(store).oneshot(request).await.expect("the router is infallible");
        assert_ne!(response.status().as_u16(), 500, "{method} {target} answered 500");
        if !watching {
            let _ = axum::body::to_bytes(response.into_body(), 64 << 20).await;
        }
    });
}
