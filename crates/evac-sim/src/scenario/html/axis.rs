//! The time axis shared by the runs of a scenario, and the charts' vertical scales.

use std::fmt::Write as _;

use super::{PLOT_X0, PLOT_X1};
use crate::scenario::track::{Track, VmState};

/// The time axis shared by the runs of a scenario.
pub(super) struct Scale {
    /// The time shown at the right end, in seconds.
    pub(super) horizon: f64,
    /// When the longest run ended.
    pub(super) end: f64,
}

/// Until when a run's last states show: nothing changes after its end, so they last as far as
/// the axis goes.
pub(super) fn shown_until(track: &Track, scale: &Scale) -> f64 {
    track.end.max(scale.horizon)
}

impl Scale {
    /// Up to a little after the last thing that happened in any run: runs go on, idle, to their
    /// scenario's duration, which would squeeze what matters to the left.
    pub(super) fn of(tracks: &[&Track]) -> Self {
        let end = tracks.iter().map(|t| t.end).fold(0.0, f64::max);
        let last = tracks.iter().map(|t| last_activity(t)).fold(0.0, f64::max);
        let horizon = if last > 0.0 { round_up((last * 1.1).max(last + 5.0)) } else { end };
        Self { horizon: horizon.max(1.0), end }
    }

    pub(super) fn x(&self, at: f64) -> f64 {
        PLOT_X0 + at.clamp(0.0, self.horizon) / self.horizon * (PLOT_X1 - PLOT_X0)
    }

    /// The tick marks: 0 and round steps, about eight.
    pub(super) fn ticks(&self) -> Vec<f64> {
        let step = nice_step(self.horizon / 8.0);
        (0..).map(|i| f64::from(i) * step).take_while(|t| *t <= self.horizon + 1e-9).collect()
    }

    /// Vertical grid lines with their times below, from `top` down to `bottom`.
    pub(super) fn axis(&self, top: f64, bottom: f64) -> String {
        let mut out = String::new();
        for t in self.ticks() {
            let x = self.x(t);
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                bottom + 12.0,
                seconds(t)
            );
        }
        let _ = write!(
            out,
            "<line class=\"axis\" x1=\"{PLOT_X0}\" y1=\"{bottom:.1}\" x2=\"{PLOT_X1}\" y2=\"{bottom:.1}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">seconds since the start</text>",
            PLOT_X1,
            bottom + 24.0
        );
        out
    }
}

/// The last moment anything happened in a run: a change of state, a grace deadline, an eviction
/// request, a change in the migrations running.
pub(super) fn last_activity(track: &Track) -> f64 {
    let states = track.vms.values().flat_map(|changes| {
        changes.iter().skip(1).flat_map(|c| match c.state {
            VmState::Terminating { deadline: Some(deadline), .. } => [c.at, deadline],
            _ => [c.at, c.at],
        })
    });
    let evictions = track.evictions.values().flatten().map(|(at, _)| *at);
    let migrations = track.migrations_running.iter().map(|(at, _)| *at);
    states.chain(evictions).chain(migrations).fold(0.0, f64::max)
}

/// A round step near `raw`: 1, 2 or 5 times a power of ten.
pub(super) fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power)
}

/// `value` rounded up to a step of the axis it would get.
pub(super) fn round_up(value: f64) -> f64 {
    let step = nice_step(value / 8.0);
    (value / step).ceil() * step
}

/// Seconds as an axis or hover text shows them: `90 s`, `2.5 s`.
pub(super) fn seconds(at: f64) -> String {
    if (at - at.round()).abs() < 0.05 {
        format!("{at:.0} s")
    } else {
        format!("{at:.1} s")
    }
}

/// A chart's vertical scale, from 0 at the bottom to `top_value` at the top.
pub(super) struct Vertical {
    pub(super) top_value: f64,
    pub(super) top: f64,
    pub(super) bottom: f64,
}

impl Vertical {
    pub(super) fn y(&self, value: f64) -> f64 {
        self.bottom - value / self.top_value * (self.bottom - self.top)
    }

    /// Horizontal grid lines at round values, labelled to the left.
    pub(super) fn ticks(&self) -> String {
        let step = nice_step(self.top_value / 4.0).max(1.0);
        let mut out = String::new();
        let mut value = 0.0;
        while value <= self.top_value + 1e-9 {
            let y = self.y(value);
            let _ = write!(
                out,
                "<line class=\"grid\" x1=\"{PLOT_X0}\" y1=\"{y:.1}\" x2=\"{PLOT_X1}\" y2=\"{y:.1}\"/>\
                 <text x=\"{:.1}\" y=\"{y:.1}\" text-anchor=\"end\" dominant-baseline=\"middle\">{value:.0}</text>",
                PLOT_X0 - 6.0
            );
            value += step;
        }
        out
    }
}

/// A step line through `(seconds, value)` points, from 0 at the start to the run's `end`. Points
/// that fall on the same unit of width are drawn as one vertical stroke to their highest value
/// and back to their last, so that a long run stays a short path and no peak is lost.
pub(super) fn step_path(points: &[(f64, f64)], end: f64, scale: &Scale, vertical: &Vertical) -> String {
    let mut path = format!("M{PLOT_X0:.1} {:.1}", vertical.y(0.0));
    let mut i = 0;
    while i < points.len() && points[i].0 <= scale.horizon {
        let x = scale.x(points[i].0);
        let mut highest = points[i].1;
        let mut j = i;
        while j + 1 < points.len() && points[j + 1].0 <= scale.horizon && (scale.x(points[j + 1].0) - x) < 0.5
        {
            j += 1;
            highest = highest.max(points[j].1);
        }
        let _ = write!(path, "H{x:.1}V{:.1}V{:.1}", vertical.y(highest), vertical.y(points[j].1));
        i = j + 1;
    }
    let _ = write!(path, "H{:.1}", scale.x(end));
    path
}
