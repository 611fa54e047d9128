use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;

use evac_sim::scenario::{
    self, comparison_line, comparison_problems, html, summary_table, Entry, Mode, Progress, Report, Scenario,
};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The scenarios to run (every `*.yaml` of this directory) [default: the checkout's
    /// examples/scenarios]
    #[arg(long)]
    scenarios: Option<PathBuf>,
    /// The policies evac runs with [default: the checkout's examples/control/policies.yml]
    #[arg(long)]
    policies: Option<PathBuf>,
    /// Run only the scenarios whose file name contains one of these.
    #[arg(long)]
    only: Vec<String>,
    /// Where the HTML report of every scenario goes (one self-contained page) [default: the
    /// checkout's dist/demo/index.html]
    #[arg(long)]
    html: Option<PathBuf>,
}

/// Runs every scenario twice, with KubeVirt alone and with evac (simulator, policy server and
/// controller in this process), and prints one comparison line for each as it ends, followed by
/// what either run must never show (an invariant broken, more VMs shut down with evac): a
/// failure. Then the summary table of all, and one HTML page with every scenario's pictures.
pub fn run(args: DemoArgs) -> Result<()> {
    let scenarios_dir = super::checkout::file(args.scenarios, "examples/scenarios")?;
    let policies = super::checkout::file(args.policies, "examples/control/policies.yml")?;
    let html = super::checkout::output(args.html, "dist/demo/index.html");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&scenarios_dir)
        .with_context(|| format!("cannot read the scenarios in {}", scenarios_dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .filter(|path| args.only.is_empty() || args.only.iter().any(|o| file_name(path).contains(o.as_str())))
        .collect();
    files.sort();
    let scenarios: Vec<(PathBuf, Scenario)> =
        files.iter().map(|f| Ok((f.clone(), load(f)?))).collect::<Result<_>>()?;
    // A scenario that is another's baseline is run as that baseline, not on its own.
    let baselines: Vec<PathBuf> = scenarios
        .iter()
        .filter_map(|(file, s)| s.baseline.as_ref().map(|b| file.with_file_name(b)))
        .collect();
    let (mut failures, mut unsound) = (0, 0);
    let mut runs: Vec<Compared> = Vec::new();
    for (file, scenario) in scenarios.iter().filter(|(file, _)| !baselines.contains(file)) {
        let started = std::time::Instant::now();
        match compare(file, scenario, &policies) {
            Ok(run) => {
                let name = file_name(file).replace(".yaml", "");
                println!(
                    "{}  [{:.1} s]",
                    comparison_line(&name, &run.evac, &run.baseline),
                    started.elapsed().as_secs_f64()
                );
                for problem in &run.problems {
                    println!("  FAILED: {problem}");
                }
                unsound += usize::from(!run.problems.is_empty());
                runs.push(Compared { name, ..run });
            }
            Err(e) => {
                failures += 1;
                println!("{}: error: {e:#}", file_name(file));
            }
        }
    }
    let rows: Vec<(String, &Report, &Report)> =
        runs.iter().map(|run| (run.name.clone(), &run.evac, &run.baseline)).collect();
    println!("\n{}", summary_table(&rows));
    write_page(&html, &runs)?;
    println!("The pictures of every run: {}", html.display());
    anyhow::ensure!(failures == 0, "{failures} scenario(s) could not run");
    anyhow::ensure!(unsound == 0, "{unsound} scenario(s) broke an invariant");
    Ok(())
}

/// One scenario's two runs and what they must never show (see [`comparison_problems`]).
struct Compared {
    /// The scenario's file name without `.yaml`.
    name: String,
    /// The scenario's description.
    description: String,
    evac: Report,
    baseline: Report,
    /// The baseline's name on the page: `KubeVirt alone`, or the baseline scenario's `label`.
    baseline_label: String,
    problems: Vec<String>,
}

/// Both runs of one scenario.
fn compare(file: &Path, scenario: &Scenario, policies: &Path) -> Result<Compared> {
    let baseline_scenario = match &scenario.baseline {
        Some(other) => load(&file.with_file_name(other))?,
        None => scenario.clone(),
    };
    let baseline = run_quietly(&baseline_scenario, &Mode::KubeVirt)?;
    let evac = run_quietly(
        scenario,
        &Mode::Evac(std::sync::Arc::new(crate::simulation::evac_policies(policies, false))),
    )?;
    let problems = comparison_problems(&evac, &baseline);
    Ok(Compared {
        name: String::new(),
        description: scenario.description.clone(),
        evac,
        baseline,
        baseline_label: baseline_scenario.kubevirt_label().to_owned(),
        problems,
    })
}

/// One page with every scenario, its baseline (KubeVirt alone) beside evac.
fn write_page(path: &Path, runs: &[Compared]) -> Result<()> {
    let sections: Vec<html::Section<'_>> = runs
        .iter()
        .map(|run| html::Section {
            name: &run.name,
            description: &run.description,
            runs: vec![(run.baseline_label.as_str(), &run.baseline), (html::WITH_EVAC, &run.evac)],
        })
        .collect();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, html::page("evac: every scenario, without and with evac", &sections))
        .with_context(|| format!("cannot write the HTML report {}", path.display()))
}

fn run_quietly(scenario: &Scenario, mode: &Mode) -> Result<Report> {
    Ok(scenario::run(scenario, mode, &mut Quiet)?)
}

fn load(file: &Path) -> Result<Scenario> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read the scenario {name}"))?;
    Ok(Scenario::parse(&text, &name)?)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

struct Quiet;

impl Progress for Quiet {
    fn entry(&mut self, _: &Entry) {}
    fn time(&mut self, _: std::time::Duration, _: std::time::Duration) {}
}
