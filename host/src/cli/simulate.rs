use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use evac_sim::scenario::{self, html, Entry, Mode, Progress, Scenario, Section};

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The scenario file (see examples/scenarios/).
    scenario: PathBuf,
    /// Print the report as JSON (and no timeline).
    #[arg(long)]
    json: bool,
    /// Leave the timeline out.
    #[arg(long)]
    quiet: bool,
    /// Run the cluster with evac (its policy server and controller) instead of KubeVirt alone.
    #[arg(long)]
    evac: bool,
    /// With `--evac`: evac replaces KubeVirt's eviction webhook and evacuation controller, instead
    /// of running beside them as it does in a real cluster.
    #[arg(long, requires = "evac")]
    replace_kubevirt: bool,
    /// The policies evac runs with (`--evac`) [default: the checkout's
    /// examples/control/policies.yml]
    #[arg(long)]
    policies: Option<PathBuf>,
    /// Also write the report as a self-contained HTML page (timelines per VM, migrations over
    /// time, eviction requests) to this file.
    #[arg(long)]
    html: Option<PathBuf>,
    /// What KubeVirt's virt-handler does with a VM whose launcher pod gets SIGTERM, in place of
    /// the scenario's `cluster.kubevirt.virtHandler`: `stock` (KubeVirt as shipped: the guest is
    /// shut down at once) or `proposal` (the proposals' virt-handler: it runs until the pod's
    /// grace period ends), to see what the proposals' design adds.
    #[arg(long, value_parser = ["stock", "proposal"])]
    virt_handler: Option<String>,
}

pub fn run(args: SimulateArgs) -> Result<()> {
    let file = args.scenario.display().to_string();
    // Found before the run: a missing file is said at once.
    let policies = match args.evac {
        true => Some(super::checkout::file(args.policies.clone(), "examples/control/policies.yml")?),
        false => None,
    };
    let text = std::fs::read_to_string(&args.scenario)
        .with_context(|| format!("cannot read the scenario {file}"))?;
    let mut scenario = Scenario::parse(&text, &file)?;
    if let Some(virt_handler) = &args.virt_handler {
        scenario.cluster.kubevirt.virt_handler = serde_json::from_value(serde_json::json!(virt_handler))?;
    }
    let timeline = !args.json && !args.quiet && scenario.report.contains(&Section::Timeline);
    if timeline {
        println!("== {}", scenario.name);
        if !scenario.description.is_empty() {
            println!("{}", scenario.description.trim());
        }
    }
    let mut progress = Terminal { bar: bar(), timeline };
    let started = std::time::Instant::now();
    let mode = match &policies {
        Some(policies) => {
            Mode::Evac(std::sync::Arc::new(crate::simulation::evac_policies(policies, args.replace_kubevirt)))
        }
        None => Mode::KubeVirt,
    };
    let report = scenario::run(&scenario, &mode, &mut progress)?;
    progress.bar.finish_and_clear();
    tracing::info!(wall_ms = started.elapsed().as_millis() as u64, "scenario run");
    if let Some(path) = &args.html {
        let label = if args.evac { html::WITH_EVAC } else { scenario.kubevirt_label() };
        let section = html::Section {
            name: &scenario.name,
            description: &scenario.description,
            runs: vec![(label, &report)],
        };
        let page = html::page(&format!("evac: {}", scenario.name), &[section]);
        std::fs::write(path, page)
            .with_context(|| format!("cannot write the HTML report {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render_sections(&scenario.report));
    }
    Ok(())
}

/// The timeline on standard output, the progress bar (simulated time) on standard error when
/// it is a terminal.
struct Terminal {
    bar: ProgressBar,
    timeline: bool,
}

fn bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {msg} (simulated; {elapsed} wall)")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

impl Progress for Terminal {
    fn entry(&mut self, entry: &Entry) {
        if self.timeline {
            self.bar.suspend(|| println!("{:>8}  {}", clock(entry.at), entry.what));
        }
    }

    fn time(&mut self, reached: Duration, of: Duration) {
        self.bar.set_length(of.as_secs());
        self.bar.set_position(reached.as_secs());
        self.bar.set_message(format!("{} / {}", clock(reached.as_secs_f64()), clock(of.as_secs_f64())));
    }
}

/// Simulated seconds as `h:mm:ss`.
fn clock(seconds: f64) -> String {
    let s = seconds as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}
