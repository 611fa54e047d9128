//! What a run cost in time: how long preemptors and drains waited, how long migrations moved and
//! waited to start, how long launcher pods were held; and, beside a baseline, what took longer and
//! why, told from those figures. The text report and the page print the same lines.

use super::report::Report;

/// A run's figures of time, in simulated seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Costs {
    /// The longest a preemptor waited for its node (to its binding, or to the end of the run).
    pub preemptor_wait: Option<f64>,
    /// Each drain: its node, and how long from its start until the node was empty (none: it
    /// never was).
    pub drains: Vec<(String, Option<f64>)>,
    /// Migrations that succeeded.
    pub migrations: usize,
    /// How long those moved (`Running` to `Succeeded`), on average.
    pub migration_mean: f64,
    /// The longest of those.
    pub migration_longest: f64,
    /// Migrations that waited after their creation before they counted against the parallel
    /// limits (`Pending`: no free slot, or a back-off).
    pub waited_to_start: usize,
    /// The longest such wait.
    pub longest_wait_to_start: f64,
    /// Launcher pods whose termination evac held.
    pub holds: usize,
    /// The longest hold that ended.
    pub longest_hold: f64,
    /// When the last change came: a VM's state, an eviction request, a migration starting or
    /// ending.
    pub busy_until: f64,
}

/// A wait shorter than this is no wait: the simulator's passes are a second apart at most.
const NO_WAIT: f64 = 0.5;

impl Costs {
    /// The figures of a run.
    pub fn of(report: &Report) -> Self {
        let moved: Vec<f64> = report
            .migration_timeline
            .iter()
            .filter(|m| m.phase == "Succeeded")
            .filter_map(|m| Some(m.ended_at? - m.started_at?))
            .collect();
        let waits: Vec<f64> = report
            .migration_timeline
            .iter()
            .filter_map(|m| Some(m.counted_from? - m.created_at))
            .filter(|wait| *wait >= NO_WAIT)
            .collect();
        let track = &report.track;
        let states = track.vms.values().flat_map(|changes| changes.iter().skip(1).map(|c| c.at));
        let evictions = track.evictions.values().flatten().map(|(at, _)| *at);
        let migrations = track.migrations_running.iter().map(|(at, _)| *at);
        Self {
            preemptor_wait: report.preemptors.iter().map(|p| p.waited_seconds).reduce(f64::max),
            drains: report
                .drains
                .iter()
                .map(|d| (d.node.clone(), d.finished_at.map(|at| at - d.started_at)))
                .collect(),
            migrations: moved.len(),
            migration_mean: if moved.is_empty() {
                0.0
            } else {
                moved.iter().sum::<f64>() / moved.len() as f64
            },
            migration_longest: moved.iter().copied().fold(0.0, f64::max),
            waited_to_start: waits.len(),
            longest_wait_to_start: waits.iter().copied().fold(0.0, f64::max),
            holds: report.holds.len(),
            longest_hold: report
                .holds
                .iter()
                .filter_map(|h| Some(h.ended_at? - h.started_at))
                .fold(0.0, f64::max),
            busy_until: states.chain(evictions).chain(migrations).fold(0.0, f64::max),
        }
    }
}

/// Seconds as the reports write a duration: `56 s`, `2.5 s`.
pub fn seconds(value: f64) -> String {
    if (value - value.round()).abs() < 0.05 {
        format!("{value:.0} s")
    } else {
        format!("{value:.1} s")
    }
}

/// The lines of what a run cost, for the text report and the page alike: the preemptors' waits,
/// each drain, the migrations' times and the holds. Empty when nothing waited or moved.
pub fn lines(report: &Report) -> Vec<String> {
    let costs = Costs::of(report);
    let mut lines = Vec::new();
    if !report.preemptors.is_empty() {
        let waits: Vec<String> = report
            .preemptors
            .iter()
            .map(|p| match p.bound_at {
                Some(_) => format!("{} {}", p.pod, seconds(p.waited_seconds)),
                None => format!("{} still pending after {}", p.pod, seconds(p.waited_seconds)),
            })
            .collect();
        lines.push(format!("Preemptors waited for their node: {}", waits.join(", ")));
    }
    for drain in &report.drains {
        let took = match drain.finished_at {
            Some(at) => format!("the node was empty {} after it began", seconds(at - drain.started_at)),
            None => "the node was never empty".to_owned(),
        };
        lines.push(format!(
            "Drain of {}: {took}; {} eviction requests, {} refused with 429",
            drain.node, drain.state.requests, drain.state.refused
        ));
    }
    if costs.migrations > 0 {
        let mut line = format!(
            "Migrations: {} moved for {} on average (the longest {})",
            costs.migrations,
            seconds(costs.migration_mean),
            seconds(costs.migration_longest)
        );
        if costs.waited_to_start > 0 {
            line.push_str(&format!(
                "; {} waited before they started (Pending: the parallel limits or a back-off), the longest {}",
                costs.waited_to_start,
                seconds(costs.longest_wait_to_start)
            ));
        }
        lines.push(line);
    }
    if !report.holds.is_empty() {
        let mut reasons: std::collections::BTreeMap<&str, usize> = Default::default();
        for hold in &report.holds {
            *reasons.entry(hold.reason.as_str()).or_default() += 1;
        }
        let reasons: Vec<String> = reasons.iter().map(|(why, n)| format!("{n} {why}")).collect();
        lines.push(format!(
            "Holds: {} launcher pods held, the longest {}; ended: {}",
            report.holds.len(),
            seconds(costs.longest_hold),
            reasons.join(", ")
        ));
    }
    lines
}

/// Beside a baseline run: what took longer in `run` (a preemptor's wait, a drain, the last
/// change) and why, from the run's own figures (migrations moving and waiting for the parallel
/// limits, pods held until their VMs had left, more eviction requests). Empty when nothing
/// took longer.
pub fn slower(run: &Report, label: &str, baseline: &Report, baseline_label: &str) -> Vec<String> {
    let (ours, theirs) = (Costs::of(run), Costs::of(baseline));
    let longer = what_took_longer(&ours, &theirs, baseline_label);
    if longer.is_empty() {
        return Vec::new();
    }
    let mut why =
        vec![format!("The run “{label}” took longer than “{baseline_label}”: {}.", longer.join("; "))];
    why.extend(why_longer(run, &ours, &theirs, baseline, baseline_label));
    why
}

/// What took longer in a run than in the baseline: a preemptor's wait, a drain, the last change.
fn what_took_longer(ours: &Costs, theirs: &Costs, baseline_label: &str) -> Vec<String> {
    let mut longer = Vec::new();
    if let (Some(a), Some(b)) = (ours.preemptor_wait, theirs.preemptor_wait) {
        if a > b + NO_WAIT {
            longer.push(format!("preemptors waited up to {} ({baseline_label}: {})", seconds(a), seconds(b)));
        }
    }
    for (node, took) in &ours.drains {
        let theirs = theirs.drains.iter().find(|(n, _)| n == node).and_then(|(_, took)| *took);
        let (ours_text, longer_than) = match (took, theirs) {
            (Some(a), Some(b)) => (seconds(*a), *a > b + NO_WAIT),
            (None, Some(_)) => ("never ended".to_owned(), true),
            _ => continue,
        };
        if longer_than {
            longer.push(format!(
                "the drain of {node} took {ours_text} ({baseline_label}: {})",
                theirs.map(seconds).unwrap_or_default()
            ));
        }
    }
    if ours.busy_until > theirs.busy_until + NO_WAIT {
        longer.push(format!(
            "the last change came at {} ({baseline_label}: {})",
            seconds(ours.busy_until),
            seconds(theirs.busy_until)
        ));
    }
    longer
}

/// Why a run took longer than the baseline, from its own figures: migrations moving and waiting
/// for the parallel limits, pods held until their VMs had left, more eviction requests.
fn why_longer(
    run: &Report,
    ours: &Costs,
    theirs: &Costs,
    baseline: &Report,
    baseline_label: &str,
) -> Vec<String> {
    let mut why = Vec::new();
    if ours.migrations > 0 {
        let m = &run.migrations;
        let limits = run.track.limits.map_or(String::new(), |l| {
            format!(
                " (parallelMigrationsPerCluster {}, parallelOutboundMigrationsPerNode {})",
                l.per_cluster, l.per_node
            )
        });
        why.push(format!(
            "{} VMs were live-migrated ({baseline_label}: {}), each moving for {} on average (the longest {}), \
             at most {} at once in the cluster and {} from one node{limits}.",
            ours.migrations,
            theirs.migrations,
            seconds(ours.migration_mean),
            seconds(ours.migration_longest),
            m.max_running_in_cluster,
            m.max_running_from_a_node
        ));
    }
    if ours.waited_to_start > 0 {
        why.push(format!(
            "{} migrations waited before they started (Pending: the parallel limits or a back-off), the longest {}.",
            ours.waited_to_start,
            seconds(ours.longest_wait_to_start)
        ));
    }
    if ours.holds > 0 {
        why.push(format!(
            "{} launcher pods were held until their VMs had left (the longest {}): their room was freed then, not at once.",
            ours.holds,
            seconds(ours.longest_hold)
        ));
    }
    let (a, b) = (run.eviction_requests(), baseline.eviction_requests());
    if a > b {
        why.push(format!("{a} eviction requests were sent ({baseline_label}: {b})."));
    }
    why
}
