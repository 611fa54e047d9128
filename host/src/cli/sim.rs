use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::Value;

use evac_cluster::ClusterStore;
use evac_sim::actors::{Kubelet, MigrationController, Scheduler, TaintManager, VirtController};
use evac_sim::api::{self, RESOURCES};
use evac_sim::{SimClock, Simulation, Store};

#[derive(Debug, Args)]
pub struct SimArgs {
    #[command(subcommand)]
    command: SimCommand,
}

#[derive(Debug, Subcommand)]
enum SimCommand {
    /// Run the simulated cluster as a Kubernetes API server on loopback, for kubectl, kube-rs
    /// clients and `evac serve --kubeconfig`.
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Address of the API.
    #[arg(long, default_value = "127.0.0.1:6443")]
    addr: SocketAddr,
    /// Where to write a kubeconfig for clients [default: a new temporary file, whose path is
    /// printed]
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Objects to start with: a v1 List (JSON or YAML) of nodes, pods, VMIs, the KubeVirt CR,
    /// PodDisruptionBudgets, ValidatingWebhookConfigurations...
    #[arg(long)]
    objects: Option<PathBuf>,
    /// Start from a scenario's cluster (examples/scenarios/): its nodes, KubeVirt and its
    /// settings, its VMs, and its kubelets' eviction settings; its disruptions are left to you
    /// (kubectl drain, taint, ...). Objects from `--objects` are added to it.
    #[arg(long, conflicts_with = "no_components")]
    scenario: Option<PathBuf>,
    /// Changes a watch can resume from.
    #[arg(long, default_value_t = 100_000)]
    watch_history: usize,
    /// How much faster than real time the cluster's components (kubelet, scheduler, KubeVirt's
    /// controllers, taint manager) act: grace periods and migrations take 1/speed of their time.
    /// Above 1, the simulated clock starts (speed - 1) days in the past, so that for a day of
    /// running no timestamp lies in the clients' future.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Turn KubeVirt's evacuation controller off, for an `evac control` whose policies set
    /// `kubevirtEvacuationController: false` (it then creates the migrations itself). By default
    /// KubeVirt's components run as shipped, as in a real cluster, and evac runs beside them.
    #[arg(long)]
    replace_kubevirt: bool,
    /// Serve the objects as they are: no cluster component runs, so nothing changes but what
    /// clients write (for comparing policy hosts on a fixed cluster).
    #[arg(long, conflicts_with_all = ["speed", "replace_kubevirt"])]
    no_components: bool,
}

pub fn run(args: SimArgs) -> Result<()> {
    match args.command {
        SimCommand::Serve(args) => serve(args),
    }
}

fn serve(args: ServeArgs) -> Result<()> {
    if !(args.speed > 0.0 && args.speed.is_finite()) {
        anyhow::bail!("--speed must be a positive number, got {}", args.speed);
    }
    let store = Arc::new(Store::new(Arc::new(clock(args.speed)), args.watch_history));
    let components = match &args.scenario {
        Some(path) => {
            let file = path.display().to_string();
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read the scenario {file}"))?;
            let scenario = evac_sim::scenario::Scenario::parse(&text, &file)?;
            let components = evac_sim::scenario::cluster(&store, &scenario, !args.replace_kubevirt)?;
            tracing::info!(scenario = %scenario.name, file, "cluster built");
            components
        }
        None => default_components(!args.replace_kubevirt),
    };
    if let Some(path) = &args.objects {
        let count = load(&store, path)?;
        tracing::info!(objects = count, file = %path.display(), "cluster loaded");
    }
    create_namespaces(&store)?;
    if !args.no_components {
        start_components(&store, components, args.speed)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("cannot listen on {}", args.addr))?;
        let url = format!("http://{}", listener.local_addr()?);
        let kubeconfig = write_kubeconfig(args.kubeconfig.as_deref(), &url)?;
        eprintln!("simulated cluster at {url}; kubeconfig: {}", kubeconfig.display());
        super::report_listening(&[("api", url.clone())]);
        axum::serve(listener, api::router(store)).await.context("serving the simulated API")
    })
}

/// The simulated clock. At a speed above real time it starts `(speed - 1)` days in the past, so
/// that for the first day of a run no timestamp lies ahead of the clients' clocks (kubectl
/// prints ages it computes from them, and a timestamp in its future as `<invalid>`).
fn clock(speed: f64) -> SimClock {
    use chrono::SubsecRound;
    let ahead = chrono::Duration::seconds(((speed - 1.0).max(0.0) * 86_400.0).min(1e11) as i64);
    SimClock::starting_at((chrono::Utc::now() - ahead).trunc_subsecs(0))
}

/// The namespaces every cluster has, and KubeVirt's, unless the objects bring them.
fn create_namespaces(store: &Store) -> Result<()> {
    let kind = evac_sim::Kind::new("v1", "Namespace");
    for name in ["default", "kube-system", "kube-public", "kube-node-lease", "kubevirt"] {
        let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name}, "status": {"phase": "Active"}});
        match store.create(&kind, "", namespace, false) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => anyhow::bail!("cannot create the namespace {name}: {}", e.message),
        }
    }
    Ok(())
}

/// The components of a cluster built from objects: KubeVirt's and the kubelets' defaults.
fn default_components(kubevirt_evacuation: bool) -> Vec<Box<dyn evac_sim::Actor>> {
    vec![
        Box::new(Scheduler),
        Box::new(VirtController::new(kubevirt_evacuation)),
        Box::new(MigrationController::default()),
        Box::new(Kubelet::default()),
        Box::new(TaintManager::default()),
        Box::new(evac_sim::actors::GarbageCollector::default()),
    ]
}

/// Starts the cluster's components on their own thread (they call webhooks synchronously).
fn start_components(store: &Arc<Store>, components: Vec<Box<dyn evac_sim::Actor>>, speed: f64) -> Result<()> {
    let components = Simulation::new(Arc::clone(store), components);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::Builder::new().name("sim-components".into()).spawn(move || {
        if let Err(e) = components.run_realtime(speed, &stop) {
            tracing::error!("the simulated cluster's components stopped: {}", e.message);
        }
    })?;
    Ok(())
}

/// Creates every object of a v1 List in the store; returns how many.
fn load(store: &Store, path: &std::path::Path) -> Result<usize> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let list: Value = serde_yaml::from_str(&text)
        .with_context(|| format!("{} is not valid YAML or JSON", path.display()))?;
    let items = list.get("items").and_then(Value::as_array).with_context(|| {
        format!("{}: expected a v1 List of Kubernetes objects (kind: List, items: [...])", path.display())
    })?;
    for (i, item) in items.iter().enumerate() {
        let api_version = item.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
        let resource = RESOURCES
            .iter()
            .find(|r| r.api_version() == api_version && r.kind == kind)
            .with_context(|| {
                format!("{}: items[{i}]: the simulator does not serve {api_version} {kind}", path.display())
            })?;
        let namespace = match item.pointer("/metadata/namespace").and_then(Value::as_str) {
            Some(ns) if resource.namespaced => ns,
            None if resource.namespaced => "default",
            _ => "",
        };
        // An object with a uid (a dump of a cluster) keeps it: the ownerReferences of its
        // dependents name it, and the garbage collector deletes dependents of an absent uid.
        let kind = resource.store_kind();
        let loaded =
            match (item.pointer("/metadata/uid"), item.pointer("/metadata/name").and_then(Value::as_str)) {
                (Some(Value::String(_)), Some(name)) => {
                    let mut item = item.clone();
                    if item.pointer("/metadata/creationTimestamp").is_none() {
                        item["metadata"]["creationTimestamp"] =
                            Value::String(ClusterStore::timestamp(&**store.memory()));
                    }
                    store.restore(&kind, namespace, name, item)
                }
                _ => store.create(&kind, namespace, item.clone(), false),
            };
        loaded.map_err(|e| anyhow::anyhow!("{}: items[{i}]: {}", path.display(), e.message))?;
    }
    Ok(items.len())
}

/// Writes the kubeconfig where asked, or else to a new file of the temporary directory (created
/// new, readable by its owner only: nothing there is taken over or followed), and says where.
fn write_kubeconfig(path: Option<&std::path::Path>, url: &str) -> Result<PathBuf> {
    let text = evac_sim::kubeconfig(url);
    if let Some(path) = path {
        std::fs::write(path, text)
            .with_context(|| format!("cannot write the kubeconfig {}", path.display()))?;
        return Ok(path.to_path_buf());
    }
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = std::env::temp_dir();
    let mut attempt = 0;
    loop {
        let path = dir.join(format!("evac-sim-{}-{:08x}.kubeconfig", std::process::id(), fastrand::u32(..)));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path) {
            Ok(mut file) => {
                file.write_all(text.as_bytes())
                    .with_context(|| format!("cannot write the kubeconfig {}", path.display()))?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
            Err(e) => {
                return Err(e).with_context(|| format!("cannot create the kubeconfig {}", path.display()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<usize> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        let store = Store::new(Arc::new(SimClock::default()), 10);
        load(&store, file.path()).map_err(|e| anyhow::anyhow!("{e:#}"))
    }

    #[test]
    fn seeds_objects_and_refuses_bad_files_clearly() {
        let count = load_text(
            "kind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n\
             - {apiVersion: v1, kind: Pod, metadata: {name: p}}\n",
        )
        .unwrap();
        assert_eq!(count, 2);
        // A dump's uids are kept: its ownerReferences name them.
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            file.path(),
            "items: [{apiVersion: v1, kind: Node, metadata: {name: n1, uid: uid-n1}}]",
        )
        .unwrap();
        let store = Store::new(Arc::new(SimClock::default()), 10);
        load(&store, file.path()).unwrap();
        let node = store.get(&evac_cluster::Kind::new("v1", "Node"), "", "n1").unwrap();
        assert_eq!(node["metadata"]["uid"], "uid-n1");
        assert!(node["metadata"]["creationTimestamp"].is_string(), "{node}");
        let err = load_text("kind: Pod").unwrap_err().to_string();
        assert!(err.contains("expected a v1 List of Kubernetes objects"), "{err}");
        let err = load_text("kind: List\nitems: [{apiVersion: v1, kind: Secret, metadata: {name: s}}]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("items[0]: the simulator does not serve v1 Secret"), "{err}");
        let err = load_text("kind: List\nitems: [{apiVersion: v1, kind: Pod, metadata: {}}]")
            .unwrap_err()
            .to_string();
        assert!(err.contains("items[0]: pods \"\" is invalid"), "{err}");
        let err = load_text("{ not yaml").unwrap_err().to_string();
        assert!(err.contains("is not valid YAML or JSON"), "{err}");
    }
}
