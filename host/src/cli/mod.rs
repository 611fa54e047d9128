//! The `evac` command line.

mod annotate;
mod checkout;
mod control;
mod demo;
mod eval;
mod hold;
mod inspect;
mod playground;
mod serve;
mod sim;
mod simulate;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::reload::{PolicyReload, ReloadTarget, Reloader, SetCheck};
use clap::{Parser, Subcommand};
use evac_cluster::ClusterStore;
use evac_evaluator::metrics::Process;
use evac_evaluator::{Metrics, Pipeline, PipelineBuilder, PoliciesFile};
use evac_runtime::wapc::EngineOptions;

// The command line. Undocumented in rustdoc on purpose: clap reads doc comments as help text,
// and the help says what the binary is.
#[allow(missing_docs)]
#[derive(Debug, Parser)]
#[command(name = "evac", version, about = "Live-migrate KubeVirt VMs on every kind of pod disruption")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[allow(missing_docs)] // clap: doc comments are the commands' help.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate one admission request with a policy module and print its response as JSON.
    Eval(eval::EvalArgs),
    /// Embed a policy's metadata.yml in its module, as `kwctl annotate` does.
    Annotate(annotate::AnnotateArgs),
    /// Print the metadata embedded in a policy module.
    Inspect(inspect::InspectArgs),
    /// Serve policies as Kubernetes admission webhooks (Kubewarden's policy-server protocol).
    Serve(serve::ServeArgs),
    /// The embedded cluster simulator.
    Sim(sim::SimArgs),
    /// The main job: every example scenario with KubeVirt alone and with evac, side by side.
    Demo(demo::DemoArgs),
    /// Run the controller: disruption causes and evacuations, from cluster changes.
    Control(control::ControlArgs),
    /// Run the node-local hold endpoint: launcher pods' preStop hooks, held while their VM
    /// migrates away (a DaemonSet on every node).
    Hold(hold::HoldArgs),
    /// Run a scenario on the simulator: a timeline, then a report of what became of each VM.
    Simulate(simulate::SimulateArgs),
    /// Serve the browser playground (`make playground`) on loopback.
    Playground(playground::PlaygroundArgs),
}

impl Cli {
    /// Runs the command given.
    pub fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Eval(args) => eval::run(args),
            Command::Annotate(args) => annotate::run(args),
            Command::Inspect(args) => inspect::run(args),
            Command::Serve(args) => serve::run(args),
            Command::Sim(args) => sim::run(args),
            Command::Simulate(args) => simulate::run(args),
            Command::Control(args) => control::run(args),
            Command::Hold(args) => hold::run(args),
            Command::Demo(args) => demo::run(args),
            Command::Playground(args) => playground::run(args),
        }
    }
}

/// Prints the addresses a server listens on, as one line on standard output:
/// `listening: admission=https://127.0.0.1:8443 probes=http://127.0.0.1:8081`. With a port 0
/// in its options, the port the system chose is only known from this line.
pub fn report_listening(addresses: &[(&str, String)]) {
    use std::io::Write;
    let line: Vec<String> = addresses.iter().map(|(what, url)| format!("{what}={url}")).collect();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "listening: {}", line.join(" "));
    let _ = stdout.flush();
}

/// Reads a file, or standard input for `-`.
pub(crate) fn read_input(path: &str, what: &str) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context;
    use std::io::Read;
    if path == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read the {what} from standard input"))?;
        Ok(bytes)
    } else {
        std::fs::read(path).with_context(|| format!("cannot read the {what} file {path}"))
    }
}

/// What `evac control` and `evac hold` run on: the pipeline of their policies over the cluster,
/// its metrics, and the reloader that swaps in a changed `policies.yml`.
pub(crate) struct ClusterHost {
    pub pipeline: Pipeline,
    pub metrics: Arc<Metrics>,
    pub reloader: Reloader,
}

/// Starts a [`ClusterHost`]: the policies of `file` (read from `path`, its files stamped in
/// `files` before it was read) run by wasmtime, compiled modules cached in `cache_dir` (else the
/// default one, when it can serve), reading from `cluster` and writing effects to it, recording
/// to the metrics of `process`; a new set that fails `check` is refused whole.
pub(crate) fn cluster_host(
    path: &Path,
    (file, files): (&PoliciesFile, PolicyReload),
    cache_dir: Option<PathBuf>,
    cluster: Arc<dyn ClusterStore>,
    (process, check): (Process, SetCheck),
) -> anyhow::Result<ClusterHost> {
    use anyhow::Context;
    let metrics = Arc::new(crate::server::process_metrics::metrics(process));
    let engine = EngineOptions {
        cache_dir: cache_dir.or_else(evac_runtime::wapc::usable_default_cache_dir),
        ..EngineOptions::default()
    };
    let builder = PipelineBuilder::wasmtime(engine, cluster)?.metrics(Arc::clone(&metrics));
    // Compiling is heavy CPU work: off the runtime's threads.
    let pipeline = tokio::task::block_in_place(|| builder.build(file))
        .with_context(|| format!("cannot load {}", path.display()))?;
    let target = ReloadTarget {
        policies: path.to_path_buf(),
        registry: Arc::clone(pipeline.registry()),
        check,
        own: None,
    };
    Ok(ClusterHost { pipeline, metrics, reloader: crate::reload::start(target, files) })
}
