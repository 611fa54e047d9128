use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;

use crate::server::{ClusterAccess, ServeOptions, Server};
use evac_cluster::kube::KubeCluster;
use evac_cluster::MemoryStore;
use evac_evaluator::PoliciesFile;
use evac_runtime::wapc::EngineOptions;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The policies file (Kubewarden's policies.yml format).
    #[arg(long, visible_alias = "policies")]
    config: PathBuf,
    /// Admission address.
    #[arg(long, default_value = "0.0.0.0:8443")]
    addr: SocketAddr,
    /// Address of /readiness and /metrics.
    #[arg(long, default_value = "0.0.0.0:8081")]
    probe_addr: SocketAddr,
    /// TLS certificate chain (PEM). Reloaded when it changes.
    #[arg(long, requires = "key_file")]
    cert_file: Option<PathBuf>,
    /// TLS private key (PEM). Reloaded when it changes.
    #[arg(long, requires = "cert_file")]
    key_file: Option<PathBuf>,
    /// Serve plain HTTP instead of HTTPS: for local use only (the API server calls webhooks
    /// over HTTPS).
    #[arg(long, conflicts_with_all = ["cert_file", "key_file"])]
    insecure_http: bool,
    /// Serve reads from this v1 List (JSON or YAML) and apply effects to it in memory, instead of
    /// a cluster.
    #[arg(long, conflicts_with = "kubeconfig")]
    context: Option<PathBuf>,
    /// The cluster's kubeconfig; without it (and without --context), the in-cluster config or
    /// ~/.kube/config.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Where compiled modules are cached, so restarts and swaps back do not recompile: a
    /// directory only this user can write (created 0700; refused otherwise). Default:
    /// `$XDG_CACHE_HOME/evac` or `~/.cache/evac` when it can be used, else no cache.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Default deadline of one evaluation, in milliseconds (a policy's timeout overrides it).
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Memory limit of one evaluation, in MiB.
    #[arg(long, default_value_t = 64)]
    memory_limit_mib: usize,
    /// Evaluations in flight at once (more wait).
    #[arg(long, default_value_t = 64)]
    max_concurrent: u32,
    /// Largest AdmissionReview accepted, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Request bodies held in memory at once, in bytes: each request reserves its declared length
    /// (or --max-body-bytes) before its body is read and until it is answered; more wait, within
    /// --client-timeout-ms. At least --max-body-bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_buffered_body_bytes: usize,
    /// Threads serving admission connections (default: one per CPU).
    #[arg(long)]
    workers: Option<usize>,
    /// Admission connections open at once; beyond it the one idle longest is closed to make room
    /// (default: half the process's descriptor limit, at most 10,000).
    #[arg(long)]
    max_connections: Option<usize>,
    /// How long, in milliseconds, a client may keep a connection with no request in flight (the
    /// TLS handshake, the first bytes, each request's headers, between requests), and may take to
    /// send a request's body.
    #[arg(long, visible_alias = "handshake-timeout-ms", default_value_t = 10_000)]
    client_timeout_ms: u64,
    /// /readiness answers 503 once the API server has not answered, or a watch has been failing,
    /// for this many seconds: verdicts from caches that old may be wrong, so the Service sends the
    /// webhook's calls to a replica that sees the cluster (the API server is probed every second,
    /// each probe given 5 s; hence at least 10).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(10..))]
    max_cache_staleness_seconds: u64,
}

/// Half the soft limit on open descriptors (the rest for the cluster's watches, modules and
/// the probe port), between 64 and 10,000.
fn default_max_connections() -> usize {
    let soft = rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft);
    usize::try_from(soft / 2).unwrap_or(usize::MAX).clamp(64, 10_000)
}

pub fn run(args: ServeArgs) -> Result<()> {
    let started = Instant::now();
    let tls = match (&args.cert_file, &args.key_file, args.insecure_http) {
        (Some(cert), Some(key), _) => Some((cert.clone(), key.clone())),
        (None, None, true) => None,
        _ => bail!("give --cert-file and --key-file to serve HTTPS, or --insecure-http for local use"),
    };
    if args.max_buffered_body_bytes < args.max_body_bytes {
        bail!(
            "--max-buffered-body-bytes ({}) must be at least --max-body-bytes ({}): a request of the largest size must fit",
            args.max_buffered_body_bytes,
            args.max_body_bytes
        );
    }
    let options = ServeOptions {
        config: args.config.clone(),
        addr: args.addr,
        probe_addr: args.probe_addr,
        tls,
        max_body_bytes: args.max_body_bytes,
        max_buffered_body_bytes: args.max_buffered_body_bytes,
        workers: args.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        max_connections: args.max_connections.unwrap_or_else(default_max_connections),
        client_timeout: Duration::from_millis(args.client_timeout_ms),
        engine: EngineOptions {
            memory_limit: args.memory_limit_mib * 1024 * 1024,
            timeout: Duration::from_millis(args.timeout_ms),
            max_concurrent: args.max_concurrent,
            reuse_instances: true,
            cache_dir: args.cache_dir.clone().or_else(evac_runtime::wapc::usable_default_cache_dir),
            wall_clock: None,
        },
    };
    // This runtime watches the cluster and files and serves the probes; admission connections
    // have threads of their own (ServeOptions::workers).
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    runtime.block_on(async move {
        let cluster = connect(&args).await?;
        let server = tokio::task::block_in_place(|| Server::start(options, cluster))?;
        server.run(started).await
    })
}

async fn connect(args: &ServeArgs) -> Result<ClusterAccess> {
    if let Some(path) = &args.context {
        let context = Arc::new(MemoryStore::from_file(path)?);
        return Ok(ClusterAccess { store: context, not_ready: Box::new(|| None) });
    }
    // Watch what the policies may read.
    let file = PoliciesFile::load(&args.config)?;
    let mut resources: Vec<_> =
        file.policies.values().flat_map(|p| p.context_aware_resources.iter().cloned()).collect();
    resources.sort();
    resources.dedup();
    let cluster = Arc::new(KubeCluster::connect(args.kubeconfig.as_deref(), &resources).await?);
    let watched = Arc::clone(&cluster);
    let bound = Duration::from_secs(args.max_cache_staleness_seconds);
    Ok(ClusterAccess {
        store: cluster,
        not_ready: Box::new(move || {
            if !watched.is_synced() {
                return Some("the cluster caches are not synced yet".into());
            }
            watched.staleness(bound)
        }),
    })
}
