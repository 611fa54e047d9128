use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;

use crate::hold::{router, watches, HoldServer, Holds};
use crate::reload::PolicyReload;
use crate::server::connections::{self, ConnectionLimits};
use evac_cluster::kube::KubeCluster;
use evac_control::hold::Holder;
use evac_control::DISRUPTION_CAUSE;
use evac_evaluator::metrics::Process;
use evac_evaluator::{Metrics, PoliciesFile};

#[derive(Debug, Args)]
pub struct HoldArgs {
    /// The policies file (Kubewarden's policies.yml format) with the policy `disruption-cause`,
    /// which decides when a hold ends.
    #[arg(long, visible_alias = "config")]
    policies: PathBuf,
    /// The node this endpoint runs on (a DaemonSet passes `spec.nodeName`).
    #[arg(long, env = "NODE_NAME")]
    node: String,
    /// Address of the hold endpoint: the node's loopback (the only host a `preStop` `httpGet` may
    /// name under Pod Security's baseline), at `launcher-hold`'s `port`.
    #[arg(long, default_value = "127.0.0.1:9190")]
    addr: SocketAddr,
    /// Address of /readiness, /liveness and /metrics.
    #[arg(long, default_value = "127.0.0.1:9191")]
    probe_addr: SocketAddr,
    /// The cluster's kubeconfig; without it, the in-cluster config or ~/.kube/config.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Seconds between two questions about a hold when nothing on the node changed.
    #[arg(long, default_value_t = 5)]
    recheck_seconds: u64,
    /// How long to wait for the watch caches' initial lists, in seconds.
    #[arg(long, default_value_t = 60)]
    sync_timeout: u64,
    /// Where compiled modules are cached (see `evac serve --cache-dir`).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

pub fn run(args: HoldArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(hold(args))
}

async fn hold(args: HoldArgs) -> Result<()> {
    if args.node.is_empty() {
        bail!("--node (or $NODE_NAME) must name the node this endpoint runs on");
    }
    // Stamped before reading: a change from here on is reloaded.
    let files = PolicyReload::new(&args.policies, &[]);
    let file = PoliciesFile::load(&args.policies)?;
    if !file.policies.contains_key(DISRUPTION_CAUSE) {
        bail!(
            "{} has no policy `{DISRUPTION_CAUSE}`: evac hold asks it when a hold ends",
            args.policies.display()
        );
    }
    let cluster =
        Arc::new(KubeCluster::connect_watches(args.kubeconfig.as_deref(), &watches(&args.node)).await?);
    cluster.wait_synced(Duration::from_secs(args.sync_timeout)).await?;
    // Hot swap, as evac serve and evac control do: a policies.yml changed in place (a ConfigMap
    // update, monitor mode to protect) is taken up without a restart, which would end every hold.
    let check: crate::reload::SetCheck = Box::new(|set| holds_disruptions(set).map_err(Into::into));
    let host = super::cluster_host(
        &args.policies,
        (&file, files),
        args.cache_dir.clone(),
        Arc::clone(&cluster) as _,
        (Process::Hold, check),
    )?;
    let (pipeline, metrics, reloader) = (host.pipeline, host.metrics, host.reloader);
    let server = Arc::new(HoldServer {
        holder: Holder::new(pipeline),
        cluster: Arc::clone(&cluster),
        node: args.node.clone(),
        recheck: Duration::from_secs(args.recheck_seconds.max(1)),
        holds: Holds::default(),
    });
    let listener = crate::server::http::bind(args.addr).await?;
    let probes = crate::server::http::bind(args.probe_addr).await?;
    super::report_listening(&[
        ("hold", format!("http://{}", listener.local_addr()?)),
        ("probes", format!("http://{}", probes.local_addr()?)),
    ]);
    tracing::info!(node = %args.node, addr = %args.addr, "evac hold started");
    // Holds are long polls (a request in flight, never closed as idle): many may be open at once,
    // one per held container.
    let limits = ConnectionLimits::new(4096, Duration::from_secs(10));
    tokio::select! {
        () = reloader.run() => {}
        () = connections::serve(listener, router(Arc::clone(&server)), None, limits) => {}
        () = connections::serve(probes, probe_router(&server, metrics), None, crate::server::probe_limits()) => {}
        () = crate::server::shutdown_signal() => tracing::info!("evac hold stopping: its open holds end"),
    }
    Ok(())
}

/// A policy set `evac hold` can run: one with `disruption-cause`, which decides the holds.
fn holds_disruptions(set: &evac_evaluator::PolicySet) -> Result<(), String> {
    match set.contains_key(DISRUPTION_CAUSE) {
        true => Ok(()),
        false => Err(format!(
            "policies.yml has no policy `{DISRUPTION_CAUSE}`: evac hold asks it when a hold ends"
        )),
    }
}

/// The probes: ready once the node's watch caches are synced and fresh; the hold gauges set at
/// each scrape.
fn probe_router(server: &Arc<HoldServer>, metrics: Arc<Metrics>) -> axum::Router {
    let cluster = Arc::clone(&server.cluster);
    let ready = move || {
        if !cluster.is_synced() {
            return Some("the watch caches have not synced".to_owned());
        }
        cluster.staleness(Duration::from_secs(30))
    };
    let (holding, gauges) = (Arc::clone(server), Arc::clone(&metrics));
    let before_scrape = move || holding.holds.record(&gauges);
    crate::server::probes::router(Arc::new(ready), metrics, Some(Arc::new(before_scrape)))
}
