//! Watching what the server was started from: `policies.yml`, the module files it names, and the
//! TLS files. A change of one of them (or SIGHUP) reloads them off the request path; the registry
//! and the TLS acceptor swap in what loads and keep what they had for what does not. Other files
//! of the watched directories (a log written beside `policies.yml`) change nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::config_files::{PolicyReload, Reloaded};
use super::Server;
use evac_evaluator::metrics::ResultLabels;
use evac_evaluator::PoliciesFile;
use evac_evaluator::Registry;

/// Changes closer together than this are taken as one (editors and `kubectl cp` write in steps).
const SETTLE: Duration = Duration::from_millis(150);

/// The file watches and the SIGHUP handler, set up before the server says it is ready: a file
/// replaced as soon as it is must be seen.
pub struct Reloader {
    server: Arc<Server>,
    watcher: Option<notify::RecommendedWatcher>,
    watched: BTreeSet<PathBuf>,
    /// `true`: SIGHUP, which reloads even when no file changed.
    rx: mpsc::UnboundedReceiver<bool>,
    files: PolicyReload,
}

/// Starts watching the files the server was started from, and SIGHUP.
pub fn start(server: Arc<Server>) -> Reloader {
    let (tx, rx) = mpsc::unbounded_channel::<bool>();
    let events = tx.clone();
    let watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !matches!(e.kind, notify::EventKind::Access(_))) {
            let _ = events.send(false);
        }
    });
    let mut watcher = match watcher {
        Ok(watcher) => Some(watcher),
        Err(e) => {
            tracing::warn!("cannot watch files ({e}); reload with SIGHUP");
            None
        }
    };
    let mut watched = BTreeSet::new();
    if let Some(watcher) = watcher.as_mut() {
        rewatch(watcher, &mut watched, &watch_dirs(&server, None));
    }
    let files = PolicyReload::from_stamps(&server.options.config, server.loaded_from.clone());
    // A change made while the policies were loading, before the watches were set up.
    if files.changed(&tls_files(&server)) {
        let _ = tx.send(false);
    }
    spawn_sighup(tx);
    Reloader { server, watcher, watched, rx, files }
}

fn tls_files(server: &Server) -> Vec<&Path> {
    server.tls.as_ref().map(|tls| tls.files().to_vec()).unwrap_or_default()
}

impl Reloader {
    /// Runs until the server stops: reloads on file changes and on SIGHUP.
    pub async fn run(self) {
        let Reloader { server, mut watcher, mut watched, mut rx, mut files } = self;
        while let Some(mut forced) = rx.recv().await {
            tokio::time::sleep(SETTLE).await;
            while let Ok(signal) = rx.try_recv() {
                forced |= signal;
            }
            if !forced && !files.changed(&tls_files(&server)) {
                continue;
            }
            let task = Arc::clone(&server);
            // Compiling is heavy CPU work: never on the request path.
            let reloaded = tokio::task::spawn_blocking(move || {
                let outcome = reload(&task, &mut files, forced);
                (files, outcome)
            })
            .await;
            let Ok((kept, outcome)) = reloaded else {
                tracing::error!("the reload task failed; reloading stops (restart to reload)");
                return;
            };
            files = kept;
            if let Some(watcher) = watcher.as_mut() {
                let file = match outcome {
                    Reloaded::Loaded(file) => Some(file),
                    _ => None,
                };
                rewatch(watcher, &mut watched, &watch_dirs(&server, file.as_ref()));
            }
        }
    }
}

/// Reloads TLS and the policies.
fn reload(server: &Server, files: &mut PolicyReload, forced: bool) -> Reloaded {
    if let Some(tls) = &server.tls {
        let result = match tls.reload() {
            Ok(true) => {
                tracing::info!("TLS certificate reloaded");
                Some("applied")
            }
            Ok(false) => None,
            Err(e) => {
                tracing::error!("TLS certificate reload refused, keeping the previous one: {e:#}");
                Some("refused")
            }
        };
        if let Some(result) = result {
            server.metrics().tls_reloads.get_or_create(&ResultLabels { result }).inc();
        }
    }
    files.reload(server.registry(), &|_| Ok(()), &tls_files(server), forced)
}

/// The directories holding every watched file: watching directories, not files, sees files that
/// are replaced by a rename (editors, Kubernetes ConfigMap and Secret volumes).
fn watch_dirs(server: &Server, file: Option<&PoliciesFile>) -> BTreeSet<PathBuf> {
    let mut files = vec![server.options.config.clone()];
    match file {
        Some(file) => files.extend(Registry::module_paths(file)),
        None => {
            if let Ok(file) = PoliciesFile::load(&server.options.config) {
                files.extend(Registry::module_paths(&file));
            }
        }
    }
    if let Some(tls) = &server.tls {
        files.extend(tls.files().iter().map(|p| p.to_path_buf()));
    }
    files.iter().map(|f| parent_dir(f)).collect()
}

fn parent_dir(file: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn rewatch(
    watcher: &mut notify::RecommendedWatcher,
    watched: &mut BTreeSet<PathBuf>,
    wanted: &BTreeSet<PathBuf>,
) {
    for dir in watched.difference(wanted) {
        let _ = watcher.unwatch(dir);
    }
    for dir in wanted.difference(watched) {
        if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
            tracing::warn!(dir = %dir.display(), "cannot watch: {e}");
        }
    }
    *watched = wanted.clone();
}

fn spawn_sighup(tx: mpsc::UnboundedSender<bool>) {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::hangup()) {
        Ok(mut hangups) => {
            tokio::spawn(async move {
                while hangups.recv().await.is_some() {
                    tracing::info!("SIGHUP: reloading");
                    if tx.send(true).is_err() {
                        return;
                    }
                }
            });
        }
        Err(e) => tracing::warn!("cannot handle SIGHUP: {e}"),
    }
}
