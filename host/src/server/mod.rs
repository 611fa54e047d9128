//! `evac serve`: a Kubewarden-style policy server. It answers admission requests with policy
//! modules (`POST /validate/<policy id>`), carries out the effects they return, swaps policy
//! versions in while serving, and evaluates shadow versions beside the active ones.

mod bodies;
pub(crate) mod connections;
mod give_back;
pub(crate) mod http;
pub(crate) mod probes;
pub mod process_metrics;
mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::reload::{OwnFiles, PolicyReload, ReloadTarget, Stamps};
use evac_cluster::ClusterStore;
use evac_evaluator::metrics::{InstanceLabels, ResultLabels};
use evac_evaluator::{Metrics, Pipeline, PipelineBuilder, PoliciesFile, Registry};
use evac_runtime::wapc::EngineOptions;
pub use tls::Tls;

/// Connections the probe port keeps open at once: the kubelet and a scraper or two. Beyond it,
/// the one idle longest is closed to make room, so probes never wait behind idle sockets.
pub(crate) const PROBE_CONNECTIONS: usize = 64;

/// How long a probe connection may stay idle: the kubelet opens one per probe.
pub(crate) const PROBE_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// `policies.yml`.
    pub config: PathBuf,
    /// The admission address.
    pub addr: SocketAddr,
    /// `/readiness`, `/liveness` and `/metrics`, with their own connection allowance
    /// (`PROBE_CONNECTIONS`).
    pub probe_addr: SocketAddr,
    /// `(certificate, key)` PEM files; `None` serves plain HTTP (local use only).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Largest AdmissionReview accepted, in bytes.
    pub max_body_bytes: usize,
    /// Request bodies held in memory at once, in bytes (each request reserves its declared
    /// length, or `max_body_bytes`, until it is answered).
    pub max_buffered_body_bytes: usize,
    /// Threads serving admission connections, each with its own listener and single-threaded
    /// runtime: a request is read, evaluated and answered on one thread, without waking another.
    pub workers: usize,
    /// The policy engine's limits.
    pub engine: EngineOptions,
    /// Admission connections open at once (all threads together); beyond it the one idle longest
    /// is closed to make room (a new one is closed when every connection has a request in
    /// flight). The probe port has its own allowance, so admission traffic never starves it.
    pub max_connections: usize,
    /// How long a client may keep a connection without a request in flight (the TLS handshake,
    /// the first bytes, a request's headers, between requests), and take to send a body.
    pub client_timeout: Duration,
}

/// A cluster as the server uses it: where policies read, where effects go, and whether its
/// caches are ready.
pub struct ClusterAccess {
    /// Where policies read and effects are written.
    pub store: Arc<dyn ClusterStore>,
    /// `Some(why)` while reads cannot be answered yet (watch caches still listing).
    pub not_ready: Box<dyn Fn() -> Option<String> + Send + Sync>,
}

/// Everything the request handlers share.
pub struct Server {
    /// How it was started.
    pub options: ServeOptions,
    /// The policies and what evaluating them goes through.
    pub pipeline: Pipeline,
    tls: Option<Arc<Tls>>,
    cluster_not_ready: Box<dyn Fn() -> Option<String> + Send + Sync>,
    /// The memory request bodies may take at once.
    bodies: bodies::BodyBudget,
    /// The configuration's files as they were before they were loaded: the reloader's start.
    loaded_from: Stamps,
}

impl Server {
    /// Loads TLS and every policy; fails on the first invalid one.
    pub fn start(options: ServeOptions, cluster: ClusterAccess) -> Result<Arc<Self>> {
        // Stamped before anything is read: a change from here on is reloaded.
        let tls_files: Vec<&std::path::Path> =
            options.tls.iter().flat_map(|(cert, key)| [cert.as_path(), key.as_path()]).collect();
        let loaded_from = Stamps::read(&options.config, &tls_files);
        let tls = match &options.tls {
            Some((cert, key)) => Some(Arc::new(Tls::load(cert, key)?)),
            None => None,
        };
        let file = PoliciesFile::load(&options.config)?;
        let metrics = Arc::new(process_metrics::metrics(evac_evaluator::metrics::Process::Serve));
        let pipeline = PipelineBuilder::wasmtime(options.engine.clone(), cluster.store)?
            .metrics(metrics)
            .build(&file)?;
        let bodies = bodies::BodyBudget::new(options.max_buffered_body_bytes);
        Ok(Arc::new(Self {
            options,
            pipeline,
            tls,
            cluster_not_ready: cluster.not_ready,
            bodies,
            loaded_from,
        }))
    }

    /// The policies served.
    pub fn registry(&self) -> &Registry {
        self.pipeline.registry()
    }

    /// The server's metrics.
    pub fn metrics(&self) -> &Metrics {
        self.pipeline.metrics()
    }

    /// Why the server should not get traffic yet, if it should not.
    pub fn not_ready(&self) -> Option<String> {
        if let Some(why) = (self.cluster_not_ready)() {
            return Some(why);
        }
        if self.registry().current().is_empty() {
            return Some("no policy is being served".into());
        }
        None
    }

    /// Copies the instance counters of the served versions into the metrics: counters the
    /// module pool keeps, exported as they stand at the scrape (a version no longer served goes).
    pub fn record_instance_stats(&self) {
        self.metrics().instances.clear();
        for served in self.registry().current().values() {
            for version in std::iter::once(&served.active).chain(served.shadow.as_ref()) {
                let Some(stats) = version.policy.instance_stats() else { continue };
                for (how, count) in [("created", stats.created), ("reused", stats.reused)] {
                    let labels =
                        InstanceLabels { policy: served.id.clone(), version: version.name.clone(), how };
                    self.metrics().instances.get_or_create(&labels).inc_by(count);
                }
            }
        }
    }

    /// What the reloader reloads: the policies, and the TLS files first.
    fn reload_target(self: &Arc<Self>) -> ReloadTarget {
        let own = self.tls.as_ref().map(|tls| {
            let server = Arc::clone(self);
            OwnFiles {
                paths: tls.files().iter().map(|p| p.to_path_buf()).collect(),
                reload: Box::new(move || server.reload_tls()),
            }
        });
        ReloadTarget {
            policies: self.options.config.clone(),
            registry: Arc::clone(self.pipeline.registry()),
            check: Box::new(|_| Ok(())),
            own,
        }
    }

    /// Swaps in the TLS certificate if its files changed; keeps the previous one if they do not
    /// load.
    fn reload_tls(&self) {
        let Some(tls) = &self.tls else { return };
        let result = match tls.reload() {
            Ok(true) => {
                tracing::info!("TLS certificate reloaded");
                "applied"
            }
            Ok(false) => return,
            Err(e) => {
                tracing::error!("TLS certificate reload refused, keeping the previous one: {e:#}");
                "refused"
            }
        };
        self.metrics().tls_reloads.get_or_create(&ResultLabels { result }).inc();
    }

    /// Serves until the process is stopped (SIGTERM or Ctrl-C).
    pub async fn run(self: Arc<Self>, started: Instant) -> Result<()> {
        let shards = http::bind_shards(self.options.addr, self.options.workers)?;
        let addr = shards[0].local_addr().context("admission address")?;
        let probes = http::bind(self.options.probe_addr).await?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let admission_router = http::admission_router(Arc::clone(&self));
        let (stopped_tx, mut stopped) = tokio::sync::mpsc::channel::<String>(1);
        let admission_limits =
            connections::ConnectionLimits::new(self.options.max_connections, self.options.client_timeout);
        for (i, listener) in shards.into_iter().enumerate() {
            let (router, tls, stopped) = (admission_router.clone(), self.tls.clone(), stopped_tx.clone());
            let limits = admission_limits.clone();
            std::thread::Builder::new().name(format!("evac-admission-{i}")).spawn(move || {
                let served = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(anyhow::Error::from)
                    .and_then(|runtime| {
                        runtime.block_on(async {
                            let listener = tokio::net::TcpListener::from_std(listener)?;
                            connections::serve(listener, router, tls, limits).await;
                            Ok(())
                        })
                    });
                let _ = stopped.blocking_send(format!("admission thread {i} stopped: {served:?}"));
            })?;
        }
        let probe_addr = probes.local_addr().context("probe address")?;
        let reloader = crate::reload::start(
            self.reload_target(),
            PolicyReload::from_stamps(&self.options.config, self.loaded_from.clone()),
        );
        // The addresses bound (a port 0 becomes the one the system chose), for whoever started us.
        crate::cli::report_listening(&[
            ("admission", format!("{scheme}://{addr}")),
            ("probes", format!("http://{probe_addr}")),
        ]);
        tracing::info!(
            addr = %addr,
            probes = %probe_addr,
            policies = ?self.registry().current().keys().collect::<Vec<_>>(),
            ready_after_ms = started.elapsed().as_millis() as u64,
            "serving admission requests over {scheme}"
        );
        let probe_router = {
            let (ready, scrape) = (Arc::clone(&self), Arc::clone(&self));
            probes::router(
                Arc::new(move || ready.not_ready()),
                Arc::clone(self.pipeline.metrics()),
                Some(Arc::new(move || scrape.record_instance_stats())),
            )
        };
        tokio::select! {
            Some(why) = stopped.recv() => anyhow::bail!(why),
            () = connections::serve(probes, probe_router, None, probe_limits()) => {}
            () = reloader.run() => {}
            () = self.bodies.give_back_after_bursts(Duration::from_secs(2)) => {}
            () = shutdown_signal() => tracing::info!("stopping"),
        }
        Ok(())
    }
}

/// The limits of a probe or metrics port.
pub(crate) fn probe_limits() -> connections::ConnectionLimits {
    connections::ConnectionLimits::new(PROBE_CONNECTIONS, PROBE_IDLE_TIMEOUT)
}

/// Resolves at SIGTERM (a pod being deleted) or SIGINT.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
