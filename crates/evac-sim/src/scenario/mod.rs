//! Scenarios: a cluster, the disruptions to apply to it and when, and what to report, as a YAML
//! file (`examples/scenarios/`); `evac simulate` runs one on the simulator.

mod build;
mod compare;
pub mod costs;
mod error;
mod evac;
pub mod html;
mod invariants;
mod observer;
mod report;
mod run;
mod spec;
mod steps;
mod track;

pub use build::{EVAC_FEATURE_GATES, KUBEVIRT_WEBHOOK};
pub use compare::{line as comparison_line, problems as comparison_problems, summary_table, Tally};
pub use error::ScenarioError;
pub use evac::{Evac, EvacRun, Mode, SERVICE as EVAC_SERVICE, WEBHOOK_PATH as EVAC_WEBHOOK_PATH};
pub use observer::{Entry, MigrationTrack};
pub use report::{ActorEvictions, ControllerStats, Outcome, Report, VmOutcome, NOWHERE};
pub use run::{cluster, run, Progress};
pub use spec::{Scenario, Section};
pub use track::{Change, Limits, Track, VmState};
