//! A scenario in the page: the simulator's own runner, with KubeVirt alone and with evac side by
//! side, as `evac demo` compares them. evac runs as `evac simulate --evac` runs it (the same
//! policies file, registry, pipeline and controller, through `evac_sim::with_evac`), its policies the
//! linked policy crates ([`crate::linked`]) instead of their wasm modules.

use std::path::PathBuf;
use std::sync::Arc;

use evac_evaluator::{ModuleLoader, PoliciesFile};
use evac_sim::scenario::html::{self, WITH_EVAC};
use evac_sim::scenario::{self, comparison_problems, Entry, Mode, Progress, Report, Scenario};
use evac_sim::with_evac::EvacPolicies;
use serde::Serialize;

use crate::examples::SCENARIOS;
use crate::linked::LinkedPolicies;
use crate::WebError;

/// The policies evac runs with in the page: `examples/control/policies.yml`, as `evac simulate
/// --evac` reads it by default.
pub const POLICIES: &str = include_str!("../../../examples/control/policies.yml");

/// Which runs to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// KubeVirt alone, on the scenario itself (as `evac simulate` runs it; side by side, as `evac
    /// demo` runs it, KubeVirt's run is on the scenario's `baseline` when it names one).
    KubeVirt,
    /// evac beside KubeVirt.
    Evac,
    /// Both, side by side (the baseline as the scenario's `baseline` names it).
    Both,
}

impl Runs {
    /// `kubevirt`, `evac`, or `both` (also for an empty name).
    pub fn parse(name: &str) -> Result<Self, WebError> {
        match name {
            "kubevirt" => Ok(Self::KubeVirt),
            "evac" => Ok(Self::Evac),
            "" | "both" => Ok(Self::Both),
            other => Err(WebError::new(format!("no runs {other:?}: expected kubevirt, evac or both"))),
        }
    }
}

/// One run as the page shows it.
#[derive(Debug, Serialize)]
pub struct Run {
    /// `with evac`, or without evac `KubeVirt alone` (the scenario's `label` when it has one,
    /// e.g. `naive descheduler`), as `evac demo`'s page names them.
    pub label: String,
    /// The report, as `evac simulate --json` prints it.
    pub report: Report,
    /// The timeline, one line per event.
    pub timeline: Vec<Entry>,
}

/// A scenario's runs, and their pictures.
#[derive(Debug, Serialize)]
pub struct ScenarioRuns {
    /// The runs, KubeVirt alone first.
    pub runs: Vec<Run>,
    /// What the pair must never show (an invariant broken, evac losing more VMs than KubeVirt
    /// alone), when both ran; empty when sound.
    pub problems: Vec<String>,
    /// The pictures, as `evac demo` draws them (a fragment for the page).
    pub html: String,
}

/// Runs `text` (a scenario's YAML).
pub fn run(text: &str, runs: Runs) -> Result<ScenarioRuns, WebError> {
    let scenario = parse(text, "scenario")?;
    let mut done = Vec::new();
    if runs != Runs::Evac {
        // The baseline may be another scenario (`descheduler`'s is `descheduler-naive`).
        let baseline = match &scenario.baseline {
            Some(name) if runs == Runs::Both => baseline_named(name)?,
            _ => scenario.clone(),
        };
        done.push(one(&baseline, baseline.kubevirt_label(), &Mode::KubeVirt)?);
    }
    if runs != Runs::KubeVirt {
        done.push(one(&scenario, WITH_EVAC, &Mode::Evac(Arc::new(linked_evac())))?);
    }
    let problems = match done.as_slice() {
        [baseline, evac] => comparison_problems(&evac.report, &baseline.report),
        _ => Vec::new(),
    };
    let section = html::Section {
        name: &scenario.name,
        description: &scenario.description,
        runs: done.iter().map(|r| (r.label.as_str(), &r.report)).collect(),
    };
    let html = html::fragment(&[section]);
    Ok(ScenarioRuns { runs: done, problems, html })
}

fn parse(text: &str, name: &str) -> Result<Scenario, WebError> {
    Scenario::parse(text, name).map_err(|e| WebError::new(e.to_string()))
}

/// The page's scenario a `baseline` names (`descheduler-naive.yaml`).
fn baseline_named(file: &str) -> Result<Scenario, WebError> {
    let name = file.strip_suffix(".yaml").unwrap_or(file);
    let example = SCENARIOS.iter().find(|s| s.name == name).ok_or_else(|| {
        WebError::new(format!(
            "the baseline {file} is not one of the page's scenarios: run kubevirt and evac apart"
        ))
    })?;
    parse(example.text, file)
}

fn one(scenario: &Scenario, label: &str, mode: &Mode) -> Result<Run, WebError> {
    let mut timeline = Timeline::default();
    let report =
        scenario::run(scenario, mode, &mut timeline).map_err(|e| WebError::new(format!("{label}: {e}")))?;
    Ok(Run { label: label.to_owned(), report, timeline: timeline.0 })
}

/// evac with [`POLICIES`], beside KubeVirt, its policies linked into the page.
pub fn linked_evac() -> EvacPolicies {
    EvacPolicies {
        name: "examples/control/policies.yml".into(),
        load: Box::new(|| PoliciesFile::parse(POLICIES, PathBuf::from("examples/control"))),
        loader: Box::new(|store| {
            let loader = LinkedPolicies::new(Arc::clone(store.memory()) as _, Arc::clone(store.clock()));
            Ok(Box::new(loader) as Box<dyn ModuleLoader>)
        }),
        replace_kubevirt: false,
    }
}

/// Collects the timeline.
#[derive(Default)]
struct Timeline(Vec<Entry>);

impl Progress for Timeline {
    fn entry(&mut self, entry: &Entry) {
        self.0.push(entry.clone());
    }

    fn time(&mut self, _: std::time::Duration, _: std::time::Duration) {}
}
