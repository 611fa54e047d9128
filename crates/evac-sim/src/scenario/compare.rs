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
