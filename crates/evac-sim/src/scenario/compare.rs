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

/// The terminal summary table's columns: a group's title over the names of its columns.
const GROUPS: [(&str, &[&str]); 4] = [
    ("", &["scenario", "VMs"]),
    (super::html::KUBEVIRT_ALONE, &["migrated", "shut down", "restarted"]),
    (super::html::WITH_EVAC, &["migrated", "shut down", "restarted"]),
    ("eviction requests", &["alone → evac"]),
];

/// What the summary table's columns mean.
pub const SUMMARY_LEGEND: &str = "\
VMs: the VMs in the scenario; every count is out of them, in both runs (the rest were untouched).
migrated: live-migrated and never stopped. shut down: stopped, not running at the end.
restarted: stopped, then started again by its run strategy (Always, or RerunOnFailure after a failure: a new launcher pod).
eviction requests: pods/eviction calls by every actor (drain, descheduler, ...), each retry counted.";

/// One row per scenario (name, the run with evac, the run with KubeVirt alone): what became of
/// its VMs in each run, out of the same number (the VMs in the scenario), and the eviction
/// requests of each run; aligned columns, then `SUMMARY_LEGEND`, and a line for each scenario
/// whose baseline is another scenario (the descheduler's: the naive descheduler).
pub fn summary_table(rows: &[(String, &Report, &Report)]) -> String {
    let mut cells: Vec<Vec<String>> =
        vec![GROUPS.iter().flat_map(|(_, names)| names.iter().map(|n| n.to_string())).collect()];
    for (name, evac, baseline) in rows {
        let vms = if evac.vms.total == baseline.vms.total {
            evac.vms.total.to_string()
        } else {
            format!("{}/{}", baseline.vms.total, evac.vms.total)
        };
        let mut row = vec![name.clone(), vms];
        for report in [baseline, evac] {
            let v = &report.vms;
            row.extend([v.migrated, v.shut_down, v.restarted].map(|n| n.to_string()));
        }
        row.push(format!("{} → {}", baseline.eviction_requests(), evac.eviction_requests()));
        cells.push(row);
    }
    let mut widths: Vec<usize> = (0..cells[0].len())
        .map(|column| cells.iter().map(|row| row[column].chars().count()).max().unwrap_or(0))
        .collect();
    widen_for_titles(&mut widths);
    let mut out = String::new();
    out.push_str(&group_titles(&widths));
    for (i, row) in cells.iter().enumerate() {
        out.push_str(&table_line(row, &widths, i == 0));
    }
    out.push('\n');
    out.push_str(SUMMARY_LEGEND);
    out.push('\n');
    for (name, evac, baseline) in rows {
        if baseline.scenario != evac.scenario {
            out.push_str(&format!(
                "{name}: its baseline, in the KubeVirt alone columns, is another scenario: \"{}\".\n",
                baseline.scenario
            ));
        }
    }
    out
}

/// Widens each group's last column until the group's title fits above it.
fn widen_for_titles(widths: &mut [usize]) {
    let mut first = 0;
    for (title, names) in GROUPS {
        let columns = first..first + names.len();
        let width: usize = widths[columns.clone()].iter().sum::<usize>() + 2 * (names.len() - 1);
        let title = title.chars().count();
        if title > width {
            widths[columns.end - 1] += title - width;
        }
        first = columns.end;
    }
}

/// The line of group titles over the header, each over its columns.
fn group_titles(widths: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut first = 0;
    for (title, names) in GROUPS {
        let width: usize = widths[first..first + names.len()].iter().sum::<usize>() + 2 * (names.len() - 1);
        parts.push(format!("{title:<width$}"));
        first += names.len();
    }
    format!("{}\n", parts.join(" | ").trim_end())
}

/// One line of the table: the scenario's name to the left, numbers to the right, groups apart.
fn table_line(row: &[String], widths: &[usize], header: bool) -> String {
    let mut parts = Vec::new();
    let mut first = 0;
    for (_, names) in GROUPS {
        let cells: Vec<String> = (first..first + names.len())
            .map(|i| {
                let width = widths[i];
                if i == 0 || header {
                    format!("{:<width$}", row[i])
                } else {
                    format!("{:>width$}", row[i])
                }
            })
            .collect();
        parts.push(cells.join("  "));
        first += names.len();
    }
    format!("{}\n", parts.join(" | ").trim_end())
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
                    disrupted_at: None,
                    held_until: None,
                    stopped_at: None,
                    migrated_at: None,
                })
                .collect(),
            migrations: Default::default(),
            migration_timeline: Vec::new(),
            evictions: Default::default(),
            disruptions: Default::default(),
            drains: Vec::new(),
            descheduler: None,
            controller: None,
            evac_effects: Default::default(),
            virt_handler: "stock",
            preemptors: Vec::new(),
            holds: Vec::new(),
            events: Vec::new(),
            invariant_violations: violations.iter().map(|v| v.to_string()).collect(),
            track: Default::default(),
        }
    }

    /// The positions of the group separators of a table line.
    fn separators(line: &str) -> Vec<usize> {
        line.char_indices().filter(|(_, c)| *c == '|').map(|(i, _)| line[..i].chars().count()).collect()
    }

    #[test]
    fn the_summary_table_has_a_row_per_scenario_aligned_and_a_legend() {
        use crate::scenario::track::testing::kubevirt_alone;
        let (drain, preemption) = (kubevirt_alone("drain"), kubevirt_alone("preemption"));
        let mut evac = drain.clone();
        evac.vms.migrated += 2;
        evac.vms.shut_down -= 2;
        let mut naive = preemption.clone();
        naive.scenario = "preemption (naive)".to_owned();
        let rows = [("drain".to_owned(), &evac, drain), ("preemption".to_owned(), preemption, &naive)];
        let table = summary_table(&rows);
        let (grid, legend) = table.split_once("\n\n").expect("a legend after the table");
        let lines: Vec<&str> = grid.lines().collect();
        assert_eq!(lines.len(), 2 + rows.len(), "{table}");
        assert!(lines[0].contains("KubeVirt alone") && lines[0].contains("with evac"), "{table}");
        assert!(lines[1].starts_with("scenario") && lines[1].contains("alone → evac"), "{table}");
        for line in &lines {
            assert_eq!(separators(line), separators(lines[1]), "{table}");
        }
        let cells = |line: &str| {
            line.split(['|', ' ']).filter(|c| !c.is_empty()).map(str::to_owned).collect::<Vec<_>>()
        };
        let v = &drain.vms;
        let requests = drain.eviction_requests().to_string();
        let expected = [
            "drain".to_owned(),
            v.total.to_string(),
            v.migrated.to_string(),
            v.shut_down.to_string(),
            v.restarted.to_string(),
            (v.migrated + 2).to_string(),
            (v.shut_down - 2).to_string(),
            v.restarted.to_string(),
            requests.clone(),
            "→".to_owned(),
            requests,
        ];
        assert_eq!(cells(lines[2]), expected);
        assert!(lines[3].starts_with("preemption "), "{table}");
        assert!(legend.contains("VMs: the VMs in the scenario"), "{legend}");
        assert!(
            legend.ends_with(
                "preemption: its baseline, in the KubeVirt alone columns, is another scenario: \"preemption (naive)\".\n"
            ),
            "{legend}"
        );
        assert_eq!(legend.matches("another scenario").count(), 1, "{legend}");
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
