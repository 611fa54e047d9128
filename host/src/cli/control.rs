use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::control::leadership::Leadership;
use crate::control::{Controller, RESYNC, WATCHED};
use crate::reload::PolicyReload;
use evac_cluster::kube::{KubeCluster, LeaderElector, LeaseSettings};
use evac_evaluator::metrics::Process;
use evac_evaluator::{Metrics, PoliciesFile, Registry};
use evac_runtime::capabilities::ResourceGrant;

#[derive(Debug, Args)]
pub struct ControlArgs {
    /// The policies file (Kubewarden's policies.yml format), with the policies `disruption-cause`
    /// and `evacuation` (see examples/control/policies.yml). It and its modules are reloaded when
    /// they change.
    #[arg(long, visible_alias = "config")]
    policies: PathBuf,
    /// The cluster's kubeconfig; without it, the in-cluster config or ~/.kube/config.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Address of /metrics.
    #[arg(long, default_value = "0.0.0.0:8082")]
    metrics_addr: SocketAddr,
    /// Time between passes, in milliseconds.
    #[arg(long, default_value_t = 250)]
    interval_ms: u64,
    /// How long to wait for the watch caches' initial lists, in seconds.
    #[arg(long, default_value_t = 60)]
    sync_timeout: u64,
    /// Where compiled modules are cached: a directory only this user can write (created 0700;
    /// refused otherwise). Default: `$XDG_CACHE_HOME/evac` or `~/.cache/evac` when it can be
    /// used, else no cache.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    #[command(flatten)]
    leader_election: LeaderElectionArgs,
}

/// kube-controller-manager's `--leader-elect*` flags, for the replicas of `evac control`
/// (durations in seconds).
#[derive(Debug, Args)]
struct LeaderElectionArgs {
    /// Elect one leader among the replicas on a coordination.k8s.io/v1 Lease: only the leader
    /// acts. `false`: this process acts alone (run one replica only).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    leader_elect: bool,
    /// The Lease's name.
    #[arg(long, default_value = "evac-control")]
    leader_elect_resource_name: String,
    /// The Lease's namespace. Default: the pod's namespace in a cluster, else the kubeconfig
    /// context's, else `default`.
    #[arg(long)]
    leader_elect_resource_namespace: Option<String>,
    /// Seconds followers wait, from when they last saw the Lease change, before taking it.
    #[arg(long, default_value_t = 15)]
    leader_elect_lease_duration: u64,
    /// Seconds the leader keeps acting without renewing the Lease; then it exits.
    #[arg(long, default_value_t = 10.0)]
    leader_elect_renew_deadline: f64,
    /// Seconds between tries to take or renew the Lease.
    #[arg(long, default_value_t = 2.0)]
    leader_elect_retry_period: f64,
}

impl LeaderElectionArgs {
    /// The candidate for the Lease, if leader election is on.
    fn elector(&self, cluster: &KubeCluster) -> Result<Option<LeaderElector>> {
        if !self.leader_elect {
            return Ok(None);
        }
        let namespace = self
            .leader_elect_resource_namespace
            .clone()
            .unwrap_or_else(|| cluster.default_namespace().to_owned());
        let seconds = |what: &str, value: f64| {
            Duration::try_from_secs_f64(value)
                .with_context(|| format!("--leader-elect-{what}: {value} is not a duration in seconds"))
        };
        let settings = LeaseSettings {
            lease_duration: Duration::from_secs(self.leader_elect_lease_duration),
            renew_deadline: seconds("renew-deadline", self.leader_elect_renew_deadline)?,
            retry_period: seconds("retry-period", self.leader_elect_retry_period)?,
            ..LeaseSettings::new(namespace, &self.leader_elect_resource_name, identity())
        };
        cluster.leader_elector(settings).map(Some).context("invalid --leader-elect-* settings")
    }
}

/// This replica's name in the Lease: the host's (a pod's name) and a random suffix, as client-go's
/// `<hostname>_<uuid>`, so two processes on one host differ.
fn identity() -> String {
    let host =
        hostname::get().ok().and_then(|h| h.into_string().ok()).unwrap_or_else(|| "evac-control".into());
    format!("{host}_{:08x}", fastrand::u32(..))
}

/// How far behind the API server the watch caches may fall before `/readiness` says so.
const CACHE_STALENESS: Duration = Duration::from_secs(30);

/// How long one pass may evaluate before leaving the rest to the next: a newly disrupted pod
/// waits at most about this long behind a pass over the whole cluster (the first one).
const PASS_BUDGET: Duration = Duration::from_millis(200);

pub fn run(args: ControlArgs) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(control(args))
}

async fn control(args: ControlArgs) -> Result<()> {
    // Stamped before reading: a change from here on is reloaded.
    let files = PolicyReload::new(&args.policies, &[]);
    let file = PoliciesFile::load(&args.policies)?;
    let cluster = connect(&args, &file).await?;
    // Hot swap, as evac serve and evac hold do: a set the controller cannot run is refused whole.
    let check: crate::reload::SetCheck =
        Box::new(|set| crate::control::check_policies(set).map_err(Into::into));
    let host = super::cluster_host(
        &args.policies,
        (&file, files),
        args.cache_dir.clone(),
        Arc::clone(&cluster) as _,
        (Process::Control, check),
    )?;
    let (pipeline, metrics) = (host.pipeline, host.metrics);
    let registry = Arc::clone(pipeline.registry());
    let controller = Controller::new(pipeline)?.with_pass_budget(PASS_BUDGET);
    report_gates(&registry, &cluster);
    let listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .with_context(|| format!("cannot serve metrics on {}", args.metrics_addr))?;
    super::report_listening(&[("metrics", format!("http://{}", listener.local_addr()?))]);
    tokio::spawn(serve_probes(listener, Arc::clone(&cluster), Arc::clone(&registry), Arc::clone(&metrics)));
    tokio::spawn(host.reloader.run());
    tracing::info!(policies = %args.policies.display(), "evac control started");

    // One listener for the whole run: a signal between two waits is not lost.
    let shutdown = crate::server::shutdown_signal();
    tokio::pin!(shutdown);
    // A follower keeps its caches and modules warm, and starts acting where the cluster is.
    let leadership = match args.leader_election.elector(&cluster)? {
        Some(elector) => tokio::select! {
            leadership = Leadership::acquire(elector, &metrics) => Some(leadership),
            () = &mut shutdown => {
                tracing::info!("evac control stopping");
                return Ok(());
            }
        },
        None => None,
    };
    let interval = Duration::from_millis(args.interval_ms);
    reconcile_until_stopped(&controller, &cluster, leadership, interval, shutdown).await
}

/// Connects to the cluster and waits for its watch caches: what the policies read, and what the
/// controller routes on.
async fn connect(args: &ControlArgs, file: &PoliciesFile) -> Result<Arc<KubeCluster>> {
    let mut resources: Vec<ResourceGrant> =
        file.policies.values().flat_map(|p| p.context_aware_resources.iter().cloned()).collect();
    resources.extend(WATCHED.iter().map(|(v, k)| ResourceGrant::new(v, k)));
    let cluster = Arc::new(KubeCluster::connect(args.kubeconfig.as_deref(), &resources).await?);
    cluster.wait_synced(Duration::from_secs(args.sync_timeout)).await?;
    Ok(cluster)
}

/// Runs passes, `interval` apart (at once when a pass left work), until `shutdown` resolves or
/// the Lease is lost (an error: another replica leads).
async fn reconcile_until_stopped(
    controller: &Controller,
    cluster: &KubeCluster,
    mut leadership: Option<Leadership>,
    interval: Duration,
    mut shutdown: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Result<()> {
    let mut last_resync = Instant::now();
    loop {
        let resync = last_resync.elapsed() >= RESYNC;
        if resync {
            last_resync = Instant::now();
        }
        // A pass races the Lease: one lost mid-pass stops the pass before its next write (its
        // effects are each idempotent, so a cut pass leaves nothing half-done to a successor).
        let pass = tokio::select! {
            pass = controller.reconcile(cluster, resync) => pass,
            why = lost(&mut leadership) => bail!("{why}; stopping, so that another replica leads"),
        };
        // Work left for the next pass (the budget ran out) is taken up without waiting.
        let deferred = matches!(&pass, Ok(pass) if pass.deferred > 0);
        match pass {
            Ok(pass) if pass.evaluations > 0 => tracing::debug!(?pass, "pass"),
            Ok(_) => {}
            Err(e) => tracing::warn!("pass failed: {e}"),
        }
        tokio::select! {
            _ = tokio::time::sleep(if deferred { Duration::ZERO } else { interval }) => {}
            () = &mut shutdown => {
                tracing::info!("evac control stopping");
                if let Some(leadership) = leadership {
                    leadership.release(Duration::from_secs(5)).await;
                }
                return Ok(());
            }
            why = lost(&mut leadership) => bail!("{why}; stopping, so that another replica leads"),
        }
    }
}

/// Resolves when the Lease is lost; never without leader election.
async fn lost(leadership: &mut Option<Leadership>) -> String {
    match leadership {
        Some(leadership) => leadership.lost().await,
        None => std::future::pending().await,
    }
}

/// `/readiness` (the watch caches synced and fresh, policies loaded), `/liveness` and `/metrics`,
/// with the probe port's limits: idle scrapers cannot take the process's descriptors.
async fn serve_probes(
    listener: tokio::net::TcpListener,
    cluster: Arc<KubeCluster>,
    registry: Arc<Registry>,
    metrics: Arc<Metrics>,
) {
    let ready = move || {
        if !cluster.is_synced() {
            return Some("the watch caches have not synced".to_owned());
        }
        if let Some(why) = cluster.staleness(CACHE_STALENESS) {
            return Some(why);
        }
        registry.current().is_empty().then(|| "no policy is loaded".to_owned())
    };
    let router = crate::server::probes::router(Arc::new(ready), metrics, None);
    crate::server::connections::serve(listener, router, None, crate::server::probe_limits()).await;
}

/// Prints which disruptions evac acts on, by the feature gates of the KubeVirt CR the policies
/// read: beside a stock KubeVirt these gates are evac's alone, and one left off is a disruption
/// KubeVirt handles by itself (the VM shuts down).
fn report_gates(registry: &Registry, cluster: &KubeCluster) {
    match evac_control::disruptions::gate_states(&registry.current(), cluster) {
        Ok(states) => {
            for line in evac_control::disruptions::describe(&states) {
                if states.iter().any(|s| !s.on && line.contains(s.gate)) {
                    tracing::warn!("{line}");
                } else {
                    tracing::info!("{line}");
                }
            }
        }
        Err(e) => tracing::warn!("cannot read the KubeVirt CR's feature gates: {e}"),
    }
}
