//! One line per scenario: what became of the disrupted VMs with evac, beside KubeVirt alone.

use super::report::{Outcome, Report};

/// What became of the VMs a run disrupted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// The report's disrupted VMs: those something happened to.
    pub disrupted: usize,
    /// Of those, live-migrated and never stopped.
    pub migrated: usize,
    /// Stopped, and not running again at the end.
    pub shut_down: usize,
    /// Stopped, then started again by their run strategy `Always`.
    pub restarted: usize,
}

impl Tally {
    /// Counts a report's disrupted VMs by outcome.
    pub fn of(report: &Report) -> Self {
        let mut tally = Self::default();
        for vm in &report.disrupted_vms {
            tally.disrupted += 1;
            match vm.outcome {
                Outcome::Migrated => tally.migrated += 1,
                Outcome::ShutDown => tally.shut_down += 1,
                Outcome::Restarted => tally.restarted += 1,
                Outcome::Untouched => {}
            }
        }
        tally
    }

    fn losses(&self) -> String {
        let mut text = String::new();
        if self.shut_down > 0 {
            text.push_str(&format!(", {} shut down", self.shut_down));
        }
        if self.restarted > 0 {
            text.push_str(&format!(", {} restarted", self.restarted));
        }
        text
    }
}

/// `preemption: 6/6 VMs live-migrated (baseline: 0/6, 6 shut down)`, plus the descheduler's
/// eviction requests when one ran.
pub fn line(name: &str, evac: &Report, baseline: &Report) -> String {
    let (ours, theirs) = (Tally::of(evac), Tally::of(baseline));
    let mut line = format!(
        "{name}: {}/{} VMs live-migrated{} (baseline: {}/{}{})",
        ours.migrated,
        ours.disrupted,
        ours.losses(),
        theirs.migrated,
        theirs.disrupted,
        theirs.losses()
    );
    if let (Some(ours), Some(theirs)) = (&evac.descheduler, &baseline.descheduler) {
        line.push_str(&format!(
            "; descheduler: {} eviction requests, {} VMs evacuated in background (baseline: {} requests)",
            ours.requests, ours.pod_evacuations, theirs.requests
        ));
    }
    line.push_str(&format!(
        "; at most {} migrations at once ({} from one node)",
        evac.migrations.max_running_in_cluster, evac.migrations.max_running_from_a_node
    ));
    line
}

/// What a pair of runs must never show: an invariant broken in either run, or evac ending with
/// more VMs shut down than KubeVirt alone. Empty when the pair is sound.
pub fn problems(evac: &Report, baseline: &Report) -> Vec<String> {
    let mut problems: Vec<String> = baseline
        .invariant_violations
        .iter()
        .map(|v| format!("KubeVirt alone: {v}"))
        .chain(evac.invariant_violations.iter().map(|v| format!("evac: {v}")))
        .collect();
    let (ours, theirs) = (Tally::of(evac), Tally::of(baseline));
    if ours.shut_down > theirs.shut_down {
        problems.push(format!(
            "evac shut down {} VMs, KubeVirt alone {}: evac must never lose more VMs than it",
            ours.shut_down, theirs.shut_down
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::report::VmOutcome;

    fn report(outcomes: &[Outcome], violations: &[&str]) -> Report {
        Report {
            scenario: "s".into(),
            simulated_seconds: 0.0,
            vms: Default::default(),
            disrupted_vms: outcomes
                .iter()
                .enumerate()
                .map(|(i, outcome)| VmOutcome {
                    vm: format!("vm-{i}"),
                    outcome: *outcome,
                    cause: "drain".into(),
                    migrations: 0,
                    failed_migrations: 0,
                    node_before: "n1".into(),
                    node_after: "n1".into(),
                })
                .collect(),
            migrations: Default::default(),
            evictions: Default::default(),
            drains: Vec::new(),
            descheduler: None,
            controller: None,
            evac_effects: Default::default(),
            events: Vec::new(),
            invariant_violations: violations.iter().map(|v| v.to_string()).collect(),
        }
    }

    #[test]
    fn a_sound_pair_has_no_problems() {
        let baseline = report(&[Outcome::ShutDown, Outcome::Migrated], &[]);
        let evac = report(&[Outcome::Migrated, Outcome::ShutDown], &[]);
        assert_eq!(problems(&evac, &baseline), Vec::<String>::new());
        assert_eq!(
            line("drain", &evac, &baseline),
            "drain: 1/2 VMs live-migrated, 1 shut down (baseline: 1/2, 1 shut down); at most 0 migrations at once (0 from one node)"
        );
    }

    #[test]
    fn more_shut_down_with_evac_and_broken_invariants_are_problems() {
        let baseline =
            report(&[Outcome::ShutDown, Outcome::Migrated], &["two unfinished migrations of vm-0"]);
        let evac = report(&[Outcome::ShutDown, Outcome::ShutDown], &["3 migrations ran at once"]);
        assert_eq!(
            problems(&evac, &baseline),
            [
                "KubeVirt alone: two unfinished migrations of vm-0",
                "evac: 3 migrations ran at once",
                "evac shut down 2 VMs, KubeVirt alone 1: evac must never lose more VMs than it",
            ]
        );
    }
}
