//! A lane per VM: its states over time as bars, with its node's colour.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::axis::{seconds, shown_until, Scale};
use super::{escape, Section, AXIS_HEIGHT, LANE_GAP, LANE_HEIGHT, MAX_LANES, NODE_COLOURS, PLOT_X0, WIDTH};
use crate::scenario::track::{Track, VmState};

/// The VMs with a lane, in the order shown in every run of a scenario.
pub(super) struct Lanes {
    pub(super) shown: Vec<String>,
    /// VMs with a lane left out, past [`MAX_LANES`].
    pub(super) left_out: usize,
}

/// The VMs something happened to in any run: those whose state changed first on top (by when),
/// then those only asked to leave, by name; the same order for every run.
pub(super) fn lanes(section: &Section<'_>) -> Lanes {
    let mut first: BTreeMap<&str, f64> = BTreeMap::new();
    for (_, report) in &section.runs {
        let disrupted = report.disrupted_vms.iter().map(|vm| (vm.vm.as_str(), f64::INFINITY));
        let changed = report
            .track
            .vms
            .iter()
            .map(|(vm, changes)| (vm.as_str(), changes.get(1).map_or(f64::INFINITY, |c| c.at)));
        for (vm, at) in disrupted.chain(changed) {
            let earliest = first.entry(vm).or_insert(f64::INFINITY);
            *earliest = earliest.min(at);
        }
    }
    let mut vms: Vec<(&str, f64)> = first.into_iter().collect();
    vms.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    let left_out = vms.len().saturating_sub(MAX_LANES);
    Lanes { shown: vms.into_iter().take(MAX_LANES).map(|(vm, _)| vm.to_owned()).collect(), left_out }
}

/// A colour per node, the same in every run of a scenario.
pub(super) struct NodeColours(pub(super) BTreeMap<String, &'static str>);

impl NodeColours {
    pub(super) fn of(tracks: &[&Track]) -> Self {
        let mut names = BTreeSet::new();
        for change in tracks.iter().flat_map(|t| t.vms.values()).flatten() {
            if let VmState::Running { node } = &change.state {
                names.insert(node.clone());
            }
        }
        Self(
            names
                .into_iter()
                .enumerate()
                .map(|(i, node)| (node, NODE_COLOURS[i % NODE_COLOURS.len()]))
                .collect(),
        )
    }

    pub(super) fn of_node(&self, node: &str) -> &'static str {
        self.0.get(node).copied().unwrap_or(NODE_COLOURS[0])
    }
}

/// The lanes of one run: each VM's states as bars on the time axis.
pub(super) fn timeline(
    scenario: &str,
    label: &str,
    track: &Track,
    lanes: &Lanes,
    scale: &Scale,
    nodes: &NodeColours,
) -> String {
    let rows = lanes.shown.len() as f64;
    let bottom = 4.0 + rows * (LANE_HEIGHT + LANE_GAP);
    let height = bottom + AXIS_HEIGHT;
    let mut out = format!(
        "<svg class=\"timeline\" viewBox=\"0 0 {WIDTH} {height:.0}\" role=\"img\" aria-label=\"{}\">\n",
        escape(&format!("{scenario}, {label}: the states of {} VMs over time", lanes.shown.len()))
    );
    out.push_str(&scale.axis(0.0, bottom));
    for (i, vm) in lanes.shown.iter().enumerate() {
        let top = 4.0 + i as f64 * (LANE_HEIGHT + LANE_GAP);
        out.push_str(&lane(vm, track, top, scale, nodes));
    }
    out.push_str("</svg>\n");
    if lanes.left_out > 0 {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more VMs not shown (at most {MAX_LANES} lanes).</p>",
            lanes.left_out
        );
    }
    out
}

pub(super) fn lane(vm: &str, track: &Track, top: f64, scale: &Scale, nodes: &NodeColours) -> String {
    let middle = top + LANE_HEIGHT / 2.0;
    let mut out = format!(
        "<g class=\"lane\" data-vm=\"{0}\"><text x=\"{1:.1}\" y=\"{2:.1}\" text-anchor=\"end\" dominant-baseline=\"middle\"><title>{0}</title>{3}</text>",
        escape(vm),
        PLOT_X0 - 6.0,
        middle,
        escape(&shorten(vm, 24))
    );
    let Some(changes) = track.vms.get(vm) else {
        let _ = writeln!(
            out,
            "<rect class=\"st-untouched\" x=\"{PLOT_X0}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{LANE_HEIGHT}\"><title>{}: not disrupted in this run</title></rect></g>",
            scale.x(shown_until(track, scale)) - PLOT_X0,
            escape(vm)
        );
        return out;
    };
    for (i, change) in changes.iter().enumerate() {
        let until = changes.get(i + 1).map_or(shown_until(track, scale), |next| next.at);
        out.push_str(&bar(vm, &change.state, change.at, until, top, scale, nodes));
    }
    out.push_str("</g>\n");
    out
}

/// One state of a VM, from `from` to `until`: a bar, with its node named on it when it fits,
/// and for a terminating pod a whisker to its grace deadline.
pub(super) fn bar(
    vm: &str,
    state: &VmState,
    from: f64,
    until: f64,
    top: f64,
    scale: &Scale,
    nodes: &NodeColours,
) -> String {
    if from > scale.horizon {
        return String::new();
    }
    let (x0, x1) = (scale.x(from), scale.x(until));
    // A stop or a wait shows however short it was (the simulator restarts a VM at once).
    let least = if matches!(state, VmState::ShutDown | VmState::Pending) { 3.0 } else { 1.0 };
    let width = (x1 - x0).max(least);
    let (paint, text) = match state {
        VmState::Running { node } => (format!("style=\"fill:{}\"", nodes.of_node(node)), node.clone()),
        VmState::Migrating { from, to } => ("class=\"st-migrating\"".to_owned(), format!("{from} → {to}")),
        VmState::Terminating { node, .. } => ("class=\"st-terminating\"".to_owned(), node.clone()),
        VmState::ShutDown => ("class=\"st-shutdown\"".to_owned(), String::new()),
        VmState::Pending => ("class=\"st-pending\"".to_owned(), String::new()),
    };
    let hover = format!("{vm}: {} from {} to {}", describe(state), seconds(from), seconds(until));
    let mut out = format!(
        "<rect {paint} x=\"{x0:.1}\" y=\"{top:.1}\" width=\"{width:.1}\" height=\"{LANE_HEIGHT}\"><title>{}</title></rect>",
        escape(&hover)
    );
    if let VmState::Terminating { deadline: Some(deadline), .. } = state {
        out.push_str(&whisker(vm, from, *deadline, top, scale));
    }
    // About 5.5 units a character at the bars' font size, and a margin.
    if !text.is_empty() && width >= text.chars().count() as f64 * 5.5 + 6.0 {
        let _ = write!(
            out,
            "<text class=\"on-bar\" x=\"{:.1}\" y=\"{:.1}\" dominant-baseline=\"middle\">{}</text>",
            x0 + 3.0,
            top + LANE_HEIGHT / 2.0,
            escape(&text)
        );
    }
    out
}

/// From a pod's deletion to its grace deadline, with a mark at the deadline.
pub(super) fn whisker(vm: &str, from: f64, deadline: f64, top: f64, scale: &Scale) -> String {
    let middle = top + LANE_HEIGHT / 2.0;
    let (x0, x1) = (scale.x(from), scale.x(deadline));
    format!(
        "<line class=\"whisker\" x1=\"{x0:.1}\" y1=\"{middle:.1}\" x2=\"{x1:.1}\" y2=\"{middle:.1}\"/>\
         <line class=\"deadline\" x1=\"{x1:.1}\" y1=\"{:.1}\" x2=\"{x1:.1}\" y2=\"{:.1}\"><title>{}</title></line>",
        top - 1.0,
        top + LANE_HEIGHT + 1.0,
        escape(&format!("{vm}: grace period ends at {}", seconds(deadline)))
    )
}

pub(super) fn describe(state: &VmState) -> String {
    match state {
        VmState::Running { node } => format!("running on {node}"),
        VmState::Migrating { from, to } if to.is_empty() => format!("migrating from {from}"),
        VmState::Migrating { from, to } => format!("migrating from {from} to {to}"),
        VmState::Terminating { node, deadline: Some(deadline) } => {
            format!("terminating on {node} (grace period ends at {})", seconds(*deadline))
        }
        VmState::Terminating { node, deadline: None } => format!("terminating on {node}"),
        other => other.name().to_owned(),
    }
}

/// A name cut to `most` characters, its end kept (where VM names differ).
pub(super) fn shorten(name: &str, most: usize) -> String {
    let count = name.chars().count();
    if count <= most {
        return name.to_owned();
    }
    let tail: String = name.chars().skip(count - (most - 1)).collect();
    format!("…{tail}")
}
