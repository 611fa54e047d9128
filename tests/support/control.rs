//! `evac control`'s parts on the kube-rs back end, in the test's process, against an API server
//! (the simulated one) named by a kubeconfig: its watch caches (synced), its pipeline and its
//! controller, as `evac control` assembles them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use evac::control::{Controller, WATCHED};
use evac_cluster::kube::KubeCluster;
use evac_cluster::{Executor, Kind};
use evac_evaluator::{Loader, Metrics, Pipeline, PoliciesFile, Registry};
use evac_runtime::wapc::{EngineOptions, PolicyEngine};

/// The controller's parts with these policies, counting into `metrics`.
pub async fn controller_parts(
    kubeconfig: &Path,
    file: PoliciesFile,
    metrics: Arc<Metrics>,
) -> (Arc<KubeCluster>, Pipeline, Controller) {
    let mut resources: Vec<Kind> =
        file.policies.values().flat_map(|p| p.context_aware_resources.iter().cloned()).collect();
    resources.extend(WATCHED.iter().map(|(v, k)| Kind::new(v, k)));
    let cluster = Arc::new(KubeCluster::connect(Some(kubeconfig), &resources).await.unwrap());
    cluster.wait_synced(Duration::from_secs(10)).await.unwrap();
    let engine = PolicyEngine::new(EngineOptions {
        cache_dir: Some(crate::server::cache_dir()),
        ..EngineOptions::default()
    })
    .unwrap();
    let registry = Arc::new(
        tokio::task::block_in_place(|| {
            Registry::start(&file, Loader { engine, source: Arc::clone(&cluster) as _ }, Arc::clone(&metrics))
        })
        .unwrap(),
    );
    let pipeline = Pipeline::new(registry, Executor::new(Arc::clone(&cluster) as _), metrics);
    let controller = Controller::new(pipeline.clone()).unwrap();
    (cluster, pipeline, controller)
}

/// Serves `store` as the simulated API server on a port the system chose, and writes a kubeconfig
/// for it (`kubeconfig` in the returned directory).
pub async fn serve_simulated_api(store: &Arc<evac_sim::Store>) -> tempfile::TempDir {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = evac_sim::api::router(Arc::clone(store));
    tokio::spawn(async move { axum::serve(listener, router).await });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kubeconfig"), evac_sim::kubeconfig(&url)).unwrap();
    dir
}
