use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;

use evac_sim::scenario::{
    self, comparison_line, comparison_problems, Entry, Mode, Progress, Report, Scenario,
};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The scenarios to run (every `*.yaml` of this directory).
    #[arg(long, default_value = "examples/scenarios")]
    scenarios: PathBuf,
    /// The policies evac runs with.
    #[arg(long, default_value = "examples/control/policies.yml")]
    policies: PathBuf,
    /// Run only the scenarios whose file name contains one of these.
    #[arg(long)]
    only: Vec<String>,
}

/// Runs every scenario twice, with KubeVirt alone and with evac (simulator, policy server and
/// controller in this process), and prints one comparison line for each, followed by what either
/// run must never show (an invariant broken, more VMs shut down with evac): a failure.
pub fn run(args: DemoArgs) -> Result<()> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(&args.scenarios)
        .with_context(|| format!("cannot read the scenarios in {}", args.scenarios.display()))?
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
    for (file, scenario) in scenarios.iter().filter(|(file, _)| !baselines.contains(file)) {
        let started = std::time::Instant::now();
        match compare(file, scenario, &args.policies) {
            Ok((line, problems)) => {
                println!("{line}  [{:.1} s]", started.elapsed().as_secs_f64());
                for problem in &problems {
                    println!("  FAILED: {problem}");
                }
                unsound += usize::from(!problems.is_empty());
            }
            Err(e) => {
                failures += 1;
                println!("{}: error: {e:#}", file_name(file));
            }
        }
    }
    anyhow::ensure!(failures == 0, "{failures} scenario(s) could not run");
    anyhow::ensure!(unsound == 0, "{unsound} scenario(s) broke an invariant");
    Ok(())
}

/// The comparison line of one scenario, and its problems (see [`comparison_problems`]).
fn compare(file: &Path, scenario: &Scenario, policies: &Path) -> Result<(String, Vec<String>)> {
    let baseline_scenario = match &scenario.baseline {
        Some(other) => load(&file.with_file_name(other))?,
        None => scenario.clone(),
    };
    let baseline = run_quietly(&baseline_scenario, &Mode::KubeVirt)?;
    let evac = run_quietly(
        scenario,
        &Mode::Evac(std::sync::Arc::new(crate::simulation::EvacPolicies {
            policies: policies.to_owned(),
            replace_kubevirt: false,
        })),
    )?;
    let line = comparison_line(&file_name(file).replace(".yaml", ""), &evac, &baseline);
    Ok((line, comparison_problems(&evac, &baseline)))
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
