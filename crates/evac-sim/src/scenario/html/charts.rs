//! Charts over time: the migrations running against the parallel limits, and the eviction
//! requests of each actor.

use std::fmt::Write as _;

use super::axis::{shown_until, step_path, Scale, Vertical};
use super::{escape, ACTOR_COLOURS, AXIS_HEIGHT, CHART_HEIGHT, PLOT_X0, PLOT_X1, WIDTH};
use crate::scenario::report::Report;
use crate::scenario::track::Track;

/// Migrations running over time, against the parallel limits.
pub(super) fn migrations(scenario: &str, label: &str, report: &Report, scale: &Scale) -> String {
    let track = &report.track;
    let as_f64 = |series: &[(f64, usize)]| series.iter().map(|(at, n)| (*at, *n as f64)).collect::<Vec<_>>();
    let most = track.migrations_running.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let limit = track.limits.map_or(0, |l| l.per_cluster);
    let vertical = Vertical { top_value: (most.max(limit) + 1) as f64, top: 6.0, bottom: CHART_HEIGHT };
    let mut out = format!(
        "<svg class=\"migrations\" viewBox=\"0 0 {WIDTH} {:.0}\" role=\"img\" aria-label=\"{}\">\n<text x=\"4\" y=\"12\">migrations running</text>",
        CHART_HEIGHT + AXIS_HEIGHT,
        escape(&format!(
            "{scenario}, {label}: migrations running over time, at most {} at once in the cluster and {} from one node",
            report.migrations.max_running_in_cluster, report.migrations.max_running_from_a_node
        ))
    );
    out.push_str(&vertical.ticks());
    out.push_str(&scale.axis(vertical.top, vertical.bottom));
    if let Some(limits) = track.limits {
        out.push_str(&limit_line("c-cluster", "parallelMigrationsPerCluster", limits.per_cluster, &vertical));
        out.push_str(&limit_line("c-node", "parallelOutboundMigrationsPerNode", limits.per_node, &vertical));
    }
    for (class, series, what) in [
        ("c-node", &track.migrations_from_a_node, "from the busiest node"),
        ("c-cluster", &track.migrations_running, "in the cluster"),
    ] {
        let _ = write!(
            out,
            "<path class=\"line {class}\" d=\"{}\"><title>migrations running {what}</title></path>",
            step_path(&as_f64(series), shown_until(track, scale), scale, &vertical)
        );
    }
    out.push_str("</svg>\n");
    let m = &report.migrations;
    let limits = track.limits.map_or("the KubeVirt CR's limits unknown".to_owned(), |l| {
        format!("limits {} in the cluster, {} from a node", l.per_cluster, l.per_node)
    });
    let _ = writeln!(
        out,
        "<p class=\"note\">{} migrations created, {} succeeded, {} failed, {} cancelled; at most {} at once in the cluster, {} from one node ({limits}).</p>",
        m.created, m.succeeded, m.failed, m.cancelled, m.max_running_in_cluster, m.max_running_from_a_node
    );
    out
}

pub(super) fn limit_line(class: &str, name: &str, value: usize, vertical: &Vertical) -> String {
    let y = vertical.y(value as f64);
    format!(
        "<line class=\"limit {class}\" x1=\"{PLOT_X0}\" y1=\"{y:.1}\" x2=\"{PLOT_X1}\" y2=\"{y:.1}\"><title>{name} {value}</title></line>\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{name} {value}</text>",
        PLOT_X1 - 2.0,
        y - 3.0
    )
}

/// Eviction requests per actor: cumulative, allowed and refused apart; then each actor's totals
/// in the text report's words ([`Report::actors`]), disruptions without a request included.
pub(super) fn evictions(scenario: &str, label: &str, report: &Report, scale: &Scale) -> String {
    let mut out = if report.track.evictions.is_empty() {
        "<p class=\"note\">No eviction requests.</p>\n".to_owned()
    } else {
        eviction_chart(scenario, label, report, scale)
    };
    out.push_str(&actor_legend(report));
    out
}

/// An actor's colour: its place among those with requests drawn.
pub(super) fn actor_colour(track: &Track, actor: &str) -> Option<&'static str> {
    track.evictions.keys().position(|a| a == actor).map(|i| ACTOR_COLOURS[i % ACTOR_COLOURS.len()])
}

/// The requests allowed (or refused) so far, at each request's time.
pub(super) fn cumulative(requests: &[(f64, u16)], allowed: bool) -> Vec<(f64, f64)> {
    let mut count = 0.0;
    requests
        .iter()
        .filter(|(_, code)| (*code == 201) == allowed)
        .map(|(at, _)| {
            count += 1.0;
            (*at, count)
        })
        .collect()
}

/// The chart of eviction requests per actor over time, allowed and refused apart.
pub(super) fn eviction_chart(scenario: &str, label: &str, report: &Report, scale: &Scale) -> String {
    let track = &report.track;
    let mut out = String::new();
    let most = track
        .evictions
        .values()
        .flat_map(|r| [cumulative(r, true).len(), cumulative(r, false).len()])
        .max()
        .unwrap_or(0);
    let vertical = Vertical { top_value: (most.max(1) as f64 * 1.1).ceil(), top: 6.0, bottom: CHART_HEIGHT };
    let _ = write!(
        out,
        "<svg class=\"evictions\" viewBox=\"0 0 {WIDTH} {:.0}\" role=\"img\" aria-label=\"{}\">\n<text x=\"4\" y=\"12\">eviction requests</text>",
        CHART_HEIGHT + AXIS_HEIGHT,
        escape(&format!(
            "{scenario}, {label}: eviction requests per actor over time, {} in all",
            report.eviction_requests()
        ))
    );
    out.push_str(&vertical.ticks());
    out.push_str(&scale.axis(vertical.top, vertical.bottom));
    for (actor, requests) in &track.evictions {
        let colour = actor_colour(track, actor).unwrap_or(ACTOR_COLOURS[0]);
        for (allowed, class, what) in [(true, "", "allowed"), (false, " refused", "refused")] {
            let points = cumulative(requests, allowed);
            if points.is_empty() {
                continue;
            }
            let _ = write!(
                out,
                "<path class=\"line{class}\" style=\"stroke:{colour}\" d=\"{}\"><title>{}</title></path>",
                step_path(&points, shown_until(track, scale), scale, &vertical),
                escape(&format!("{actor}: {} {what}", points.len()))
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

/// Each actor's totals in the text report's words, with its colour in the chart; nothing when
/// no actor evicted or disrupted anything.
pub(super) fn actor_legend(report: &Report) -> String {
    let actors = report.actors();
    if actors.is_empty() {
        return String::new();
    }
    let mut out = "<ul class=\"legend actors\">\n".to_owned();
    for actor in &actors {
        let swatch = actor_colour(&report.track, &actor.actor).map_or(String::new(), |colour| {
            format!("<span class=\"swatch\" style=\"background:{colour};height:3px\"></span>")
        });
        let _ = writeln!(
            out,
            "<li data-actor=\"{}\" data-requested=\"{}\" data-accepted=\"{}\" data-refused=\"{}\" data-disruptions=\"{}\">{swatch}{}</li>",
            escape(&actor.actor),
            actor.requested,
            actor.accepted,
            actor.refused_total(),
            actor.disruptions,
            escape(&actor.line())
        );
    }
    out.push_str("</ul>\n");
    out
}
