//! Reloading a process's configuration while it runs, the same way in `evac serve`, `evac control`
//! and `evac hold`: `policies.yml`, the module files it names, and files of the process's own (the
//! TLS files of `evac serve`). A change of one of them, seen by a directory watch or by the
//! periodic look at the files' stamps, or SIGHUP, reloads them off the request path; the registry
//! swaps in what loads and keeps what it had for what does not. Whether a file changed is decided
//! from the files' stamps ([`stamps`]): other files of the watched directories (a log written
//! beside `policies.yml`) change nothing, and a refused file is refused (logged, counted) once.

pub mod stamps;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use evac_evaluator::{PoliciesFile, PolicySet, Registry};
pub use stamps::{PolicyReload, Reloaded, Stamps};

/// Changes closer together than this are taken as one (editors and `kubectl cp` write in steps).
const SETTLE: Duration = Duration::from_millis(150);

/// How often the files' stamps are looked at without a watch event: a change a directory watch
/// cannot see (a file system without inotify, watches over the system's limit) still reloads.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Why a new policy set does not suit the process (`evac control` needs its two policies alike).
pub type SetCheck =
    Box<dyn Fn(&PolicySet) -> Result<(), Box<dyn std::error::Error + Send + Sync>> + Send + Sync>;

/// Files of the process's own, reloaded before the policies: what they are, and how to reload
/// them (the TLS certificate of `evac serve`).
pub struct OwnFiles {
    /// The files whose change reloads.
    pub paths: Vec<PathBuf>,
    /// Reloads them (logging and counting what it did).
    pub reload: Box<dyn Fn() + Send + Sync>,
}

/// What a process reloads.
pub struct ReloadTarget {
    /// `policies.yml`.
    pub policies: PathBuf,
    /// The registry its policies are served from.
    pub registry: Arc<Registry>,
    /// What a new set must satisfy; a set that fails it is refused whole.
    pub check: SetCheck,
    /// Files of the process's own, if any.
    pub own: Option<OwnFiles>,
}

impl ReloadTarget {
    fn own_paths(&self) -> Vec<&Path> {
        self.own.iter().flat_map(|own| own.paths.iter().map(PathBuf::as_path)).collect()
    }

    /// Reloads the process's own files, then the policies if their files changed (or `forced`).
    fn reload(&self, files: &mut PolicyReload, forced: bool) -> Reloaded {
        if let Some(own) = &self.own {
            (own.reload)();
        }
        files.reload(&self.registry, |set: &PolicySet| (self.check)(set), &self.own_paths(), forced)
    }

    /// The directories holding every watched file: watching directories, not files, sees files
    /// that are replaced by a rename (editors, Kubernetes ConfigMap and Secret volumes).
    fn watch_dirs(&self, file: Option<&PoliciesFile>) -> BTreeSet<PathBuf> {
        let mut files = vec![self.policies.clone()];
        match file {
            Some(file) => files.extend(Registry::module_paths(file)),
            None => {
                if let Ok(file) = PoliciesFile::load(&self.policies) {
                    files.extend(Registry::module_paths(&file));
                }
            }
        }
        files.extend(self.own_paths().into_iter().map(Path::to_path_buf));
        files.iter().map(|f| parent_dir(f)).collect()
    }
}

/// The file watches, the periodic look and the SIGHUP handler, set up before the process says it
/// is ready: a file replaced as soon as it is must be seen.
pub struct Reloader {
    target: Arc<ReloadTarget>,
    watcher: Option<notify::RecommendedWatcher>,
    watched: BTreeSet<PathBuf>,
    /// `true`: SIGHUP, which reloads even when no file changed.
    rx: mpsc::UnboundedReceiver<bool>,
    files: PolicyReload,
}

/// Starts watching `target`'s files and SIGHUP. `files`: the files as they were before they were
/// loaded, so that a change made while they loaded is reloaded at once.
pub fn start(target: ReloadTarget, files: PolicyReload) -> Reloader {
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
            tracing::warn!("cannot watch files ({e}); changes are seen within {LOOK_EVERY:?}, or at SIGHUP");
            None
        }
    };
    let mut watched = BTreeSet::new();
    if let Some(watcher) = watcher.as_mut() {
        rewatch(watcher, &mut watched, &target.watch_dirs(None));
    }
    if files.changed(&target.own_paths()) {
        let _ = tx.send(false);
    }
    spawn_sighup(tx.clone());
    spawn_look(tx);
    Reloader { target: Arc::new(target), watcher, watched, rx, files }
}

impl Reloader {
    /// Runs until the process stops: reloads on file changes and on SIGHUP.
    pub async fn run(self) {
        let Reloader { target, mut watcher, mut watched, mut rx, mut files } = self;
        while let Some(mut forced) = rx.recv().await {
            tokio::time::sleep(SETTLE).await;
            while let Ok(signal) = rx.try_recv() {
                forced |= signal;
            }
            if !forced && !files.changed(&target.own_paths()) {
                continue;
            }
            let task = Arc::clone(&target);
            // Compiling is heavy CPU work: never on the request path.
            let reloaded = tokio::task::spawn_blocking(move || {
                let outcome = task.reload(&mut files, forced);
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
                rewatch(watcher, &mut watched, &target.watch_dirs(file.as_ref()));
            }
        }
    }
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

/// Asks for a look at the stamps every [`LOOK_EVERY`]: the reload happens only if they changed.
fn spawn_look(tx: mpsc::UnboundedSender<bool>) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(LOOK_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every.tick().await;
        loop {
            every.tick().await;
            if tx.send(false).is_err() {
                return;
            }
        }
    });
}
