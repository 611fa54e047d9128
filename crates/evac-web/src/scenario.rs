//! A scenario in the page: the simulator's own runner, with KubeVirt alone.

use evac_sim::scenario::{self, html, Entry, Mode, Progress, Report, Scenario};
use serde::Serialize;

use crate::WebError;

/// A run as the page shows it.
#[derive(Debug, Serialize)]
pub struct Run {
    /// The report, as `evac simulate --json` prints it.
    pub report: Report,
    /// The timeline, one line per event.
    pub timeline: Vec<Entry>,
    /// The pictures, as `evac simulate --html` draws them (a fragment for the page).
    pub html: String,
}

/// Runs `text` (a scenario's YAML) with KubeVirt alone.
pub fn run(text: &str) -> Result<Run, WebError> {
    let scenario = Scenario::parse(text, "scenario").map_err(|e| WebError::new(e.to_string()))?;
    let mut timeline = Timeline::default();
    let report =
        scenario::run(&scenario, &Mode::KubeVirt, &mut timeline).map_err(|e| WebError::new(e.to_string()))?;
    let section = html::Section { name: &scenario.name, runs: vec![("KubeVirt alone", &report)] };
    let html = html::fragment(&[section]);
    Ok(Run { report, timeline: timeline.0, html })
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
