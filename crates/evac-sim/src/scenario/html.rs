//! Scenario reports as pictures: a self-contained HTML page (or a fragment of one) with inline
//! SVG and CSS, nothing loaded from elsewhere and no script. Per scenario: its description and,
//! beside a baseline, why a run took longer ([`costs::slower`]); per run: what became of the VMs
//! (and, in a table, each one's outcome, cause, from and to), what the run cost in time, a lane per
//! VM showing its states over time, the migrations running against the parallel limits, and the
//! eviction requests of each actor. Its words and numbers are the text report's.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::costs;
use super::report::Report;
use super::track::{Track, VmState};

/// The label of a run with KubeVirt alone, in reports, tables and pages.
pub const KUBEVIRT_ALONE: &str = "KubeVirt alone";
/// The label of a run with evac.
pub const WITH_EVAC: &str = "with evac";

/// One scenario: its name, what it shows, and one or two labelled runs (e.g. [`KUBEVIRT_ALONE`],
/// [`WITH_EVAC`]).
#[derive(Debug, Clone)]
pub struct Section<'a> {
    /// The scenario's name, e.g. its file's name without `.yaml`.
    pub name: &'a str,
    /// The scenario's `description` (empty: none), shown under its name.
    pub description: &'a str,
    /// Its runs, each with its label, drawn side by side on one time scale. With two, the first
    /// is the baseline the second is compared with.
    pub runs: Vec<(&'a str, &'a Report)>,
}

/// At most this many VM lanes per run: the first VMs disrupted first; the rest are counted.
pub const MAX_LANES: usize = 60;

/// A whole self-contained page (`<!doctype html>` ...) with a title, a summary table of all
/// sections, then each section.
pub fn page(title: &str, sections: &[Section<'_>]) -> String {
    let title = escape(title);
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <div class=\"evac-report\">\n<h1>{title}</h1>\n{}</div>\n</body>\n</html>\n",
        content(sections)
    )
}

/// The same content without `<html>`/`<head>`/`<body>`: a `<div class="evac-report">` with its
/// styles in a `<style>` block, for insertion into another page.
pub fn fragment(sections: &[Section<'_>]) -> String {
    format!("<div class=\"evac-report\">\n<style>{STYLE}</style>\n{}</div>\n", content(sections))
}

/// Text made safe to put in HTML, in element content and in quoted attributes alike.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The `id` of a section: `scenario-` and its name, anything but letters, digits, `-` and `_`
/// made `-`, so that a link or a test finds it.
pub fn section_id(name: &str) -> String {
    let slug: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .collect();
    format!("scenario-{slug}")
}

/// Every class is under `.evac-report`, so that the fragment does not restyle its host page.
const STYLE: &str = "
.evac-report{font:14px/1.4 system-ui,sans-serif;color:#222;max-width:1400px;margin:0 auto;padding:0 1em}
.evac-report h2{border-bottom:1px solid #ccc;margin-top:2em}
.evac-report h3{margin:.5em 0 .2em}
.evac-report table.summary{border-collapse:collapse;margin:1em 0}
.evac-report table.summary th,.evac-report table.summary td{border:1px solid #ccc;padding:.2em .6em}
.evac-report table.summary td.n{text-align:right;font-variant-numeric:tabular-nums}
.evac-report .bad{color:#b00000;font-weight:bold}
.evac-report .runs{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:1.5em}
@media (max-width:900px){.evac-report .runs{grid-template-columns:minmax(0,1fr)}}
.evac-report svg{width:100%;height:auto;display:block;margin:.3em 0}
.evac-report svg text{font:10px system-ui,sans-serif;fill:#333}
.evac-report svg text.on-bar{fill:#fff}
.evac-report svg .grid{stroke:#e4e4e4}
.evac-report svg .axis{stroke:#888}
.evac-report .st-migrating{fill:#f28e2b}
.evac-report .st-terminating{fill:#e15759;fill-opacity:.75}
.evac-report .st-shutdown{fill:#333}
.evac-report .st-pending{fill:#fff;stroke:#888;stroke-dasharray:3 2}
.evac-report .st-untouched{fill:#ececec}
.evac-report .deadline{stroke:#b00000;stroke-width:2}
.evac-report .whisker{stroke:#b00000;stroke-width:1}
.evac-report .line{fill:none;stroke-width:2}
.evac-report .limit{stroke-width:1.5;stroke-dasharray:6 4}
.evac-report .refused{stroke-dasharray:4 3}
.evac-report .c-cluster{stroke:#4e79a7}
.evac-report .c-node{stroke:#b07aa1}
.evac-report .legend{display:flex;flex-wrap:wrap;gap:.4em 1.2em;margin:.5em 0;padding:0;list-style:none}
.evac-report .swatch{display:inline-block;width:1.6em;height:.9em;vertical-align:middle;margin-right:.3em;border-radius:2px}
.evac-report .fates b{font-size:1.1em}
.evac-report .violations{color:#b00000}
.evac-report .note{color:#666}
.evac-report .description{white-space:pre-line;max-width:60em}
.evac-report .slower{background:#fff6e5;border-left:4px solid #f28e2b;padding:.3em .8em;margin:.8em 0}
.evac-report .slower p{margin:.3em 0}
.evac-report ul.costs{margin:.3em 0;padding-left:1.2em}
.evac-report table.vms{border-collapse:collapse;margin:.3em 0;font-size:13px}
.evac-report table.vms th,.evac-report table.vms td{border-bottom:1px solid #e4e4e4;padding:.1em .5em;text-align:left}
";

/// The colours of nodes (a VM running on one), dark enough for white names on them and apart
/// from the state colours.
const NODE_COLOURS: [&str; 10] = [
    "#4e79a7", "#59a14f", "#8e6bb5", "#2f8f8a", "#9c755f", "#2f5f8a", "#3d7b37", "#b07aa1", "#5f7f3f",
    "#6b6b9f",
];

/// The colours of actors in the eviction charts.
const ACTOR_COLOURS: [&str; 6] = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#9c755f"];

/// The SVGs' width in user units; they scale to their column.
const WIDTH: f64 = 640.0;
/// Where the plots start: room for VM names to the left.
const PLOT_X0: f64 = 150.0;
/// Where the plots end: room for the last time's label to the right.
const PLOT_X1: f64 = 620.0;
const LANE_HEIGHT: f64 = 12.0;
const LANE_GAP: f64 = 4.0;
/// Room under a plot for its time axis.
const AXIS_HEIGHT: f64 = 28.0;
const CHART_HEIGHT: f64 = 110.0;

fn content(sections: &[Section<'_>]) -> String {
    let mut out = summary(sections);
    out.push_str(LEGEND);
    // Rows line up across runs only where there are runs side by side.
    out.push_str(if compares(sections) {
        "<p class=\"note\">Hover a bar for its VM, state and times. Lanes show the VMs something happened to, the same VM on the same row in each run.</p>\n"
    } else {
        "<p class=\"note\">Hover a bar for its VM, state and times. Lanes show the VMs something happened to.</p>\n"
    });
    for section in sections {
        out.push_str(&scenario(section));
    }
    out
}

/// What the colours and lines mean.
const LEGEND: &str = "<h2>How to read the pictures</h2>
<ul class=\"legend\">
<li><span class=\"swatch\" style=\"background:#4e79a7\"></span><span class=\"swatch\" style=\"background:#59a14f\"></span>running, coloured by node (named on the bar)</li>
<li><span class=\"swatch\" style=\"background:#f28e2b\"></span>migrating</li>
<li><span class=\"swatch\" style=\"background:#e15759;opacity:.75\"></span>terminating (launcher pod being deleted); <span style=\"color:#b00000\">|</span> its grace deadline</li>
<li><span class=\"swatch\" style=\"background:#333\"></span>shut down</li>
<li><span class=\"swatch\" style=\"border:1px dashed #888\"></span>pending (restarted, waiting)</li>
<li><span class=\"swatch\" style=\"background:#ececec\"></span>not disrupted in this run</li>
</ul>
<ul class=\"legend\">
<li><span class=\"swatch\" style=\"background:#4e79a7;height:3px\"></span>migrations running in the cluster</li>
<li><span class=\"swatch\" style=\"background:#b07aa1;height:3px\"></span>migrations running from the busiest node</li>
<li>dashed: the parallel limits of the KubeVirt CR</li>
<li>eviction requests: solid = allowed (201), dashed = refused (429 or another error), cumulative per actor</li>
</ul>
";

/// The summary's groups of columns, one per position of a run in its scenario (the baseline
/// first): the runs' label when they share one, else `baseline` for the first (`run` on a page
/// of single runs) and the labels joined for the others (each row then names its own).
fn column_titles(sections: &[Section<'_>]) -> Vec<String> {
    let most = sections.iter().map(|s| s.runs.len()).max().unwrap_or(0);
    (0..most)
        .map(|position| {
            let mut labels: Vec<&str> = Vec::new();
            for (label, _) in sections.iter().filter_map(|s| s.runs.get(position)) {
                if !labels.contains(label) {
                    labels.push(label);
                }
            }
            match labels.as_slice() {
                [one] => (*one).to_owned(),
                // Without runs side by side there is no baseline, only runs.
                _ if position == 0 && most == 1 => "run".to_owned(),
                _ if position == 0 => "baseline".to_owned(),
                more => more.join(" / "),
            }
        })
        .collect()
}

/// Whether any scenario of the page has runs side by side: only then does it compare.
fn compares(sections: &[Section<'_>]) -> bool {
    sections.iter().any(|s| s.runs.len() > 1)
}

/// The summary table: a row per scenario, what became of its VMs in each run out of the same
/// number (the VMs in the scenario), and the eviction requests of each run.
fn summary(sections: &[Section<'_>]) -> String {
    let titles = column_titles(sections);
    let mut out = String::from("<h2>Summary</h2>\n<table class=\"summary\">\n<thead>\n<tr><th rowspan=\"2\">scenario</th><th rowspan=\"2\">VMs</th>");
    for title in &titles {
        let _ = write!(out, "<th colspan=\"3\">{}</th>", escape(title));
    }
    let requests = titles.iter().map(|t| escape(t)).collect::<Vec<_>>().join(" → ");
    let _ = writeln!(out, "<th rowspan=\"2\">eviction requests<br>{requests}</th><th rowspan=\"2\">invariant violations</th></tr>");
    out.push_str("<tr>");
    for _ in &titles {
        out.push_str("<th>migrated</th><th>shut down</th><th>restarted</th>");
    }
    out.push_str("</tr>\n</thead>\n<tbody>\n");
    for section in sections {
        out.push_str(&summary_row(section, &titles));
    }
    out.push_str("</tbody>\n</table>\n");
    if compares(sections) {
        out.push_str("<p class=\"note\">Counts are out of the VMs in the scenario, the same in every run; the rest were untouched.</p>\n");
    } else {
        out.push_str(
            "<p class=\"note\">Counts are out of the VMs in the scenario; the rest were untouched.</p>\n",
        );
    }
    for section in sections {
        if let Some(note) = baseline_note(section) {
            let _ = writeln!(out, "<p class=\"note baseline\">{}</p>", escape(&note));
        }
    }
    out
}

/// When a scenario's baseline is another scenario (`descheduler`'s is `descheduler-naive`), which
/// one, and its label.
fn baseline_note(section: &Section<'_>) -> Option<String> {
    let [(label, baseline), (_, compared), ..] = section.runs.as_slice() else { return None };
    (baseline.scenario != compared.scenario).then(|| {
        format!(
            "{}: the baseline, “{label}”, is another scenario, “{}”, run without evac.",
            section.name, baseline.scenario
        )
    })
}

fn summary_row(section: &Section<'_>, titles: &[String]) -> String {
    let totals: BTreeSet<usize> = section.runs.iter().map(|(_, r)| r.vms.total).collect();
    let totals = totals.iter().map(usize::to_string).collect::<Vec<_>>().join(" / ");
    // A run under a column whose title is not its label is named in the row.
    let named: String = section
        .runs
        .iter()
        .zip(titles)
        .filter(|((label, _), title)| label != title)
        .map(|((label, _), title)| {
            format!("<br><span class=\"note\">{}: {}</span>", escape(title), escape(label))
        })
        .collect();
    let mut out = format!(
        "<tr><td><a href=\"#{}\">{}</a>{named}</td><td class=\"n\">{totals}</td>",
        section_id(section.name),
        escape(section.name)
    );
    for position in 0..titles.len() {
        match section.runs.get(position) {
            Some((_, r)) => {
                for n in [r.vms.migrated, r.vms.shut_down, r.vms.restarted] {
                    let _ = write!(out, "<td class=\"n\">{n}</td>");
                }
            }
            None => out.push_str("<td>–</td><td>–</td><td>–</td>"),
        }
    }
    let requests: Vec<String> = section.runs.iter().map(|(_, r)| r.eviction_requests().to_string()).collect();
    let violations: usize = section.runs.iter().map(|(_, r)| r.invariant_violations.len()).sum();
    let class = if violations > 0 { "n bad" } else { "n" };
    let _ = writeln!(
        out,
        "<td class=\"n\">{}</td><td class=\"{class}\">{violations}</td></tr>",
        requests.join(" → ")
    );
    out
}

/// One scenario: its runs side by side, on one time scale and with one order of lanes.
fn scenario(section: &Section<'_>) -> String {
    let tracks: Vec<&Track> = section.runs.iter().map(|(_, r)| &r.track).collect();
    let scale = Scale::of(&tracks);
    let lanes = lanes(section);
    let nodes = NodeColours::of(&tracks);
    let mut out = format!(
        "<section class=\"scenario\" id=\"{}\">\n<h2>{}</h2>\n",
        section_id(section.name),
        escape(section.name)
    );
    if !section.description.trim().is_empty() {
        let _ = writeln!(out, "<p class=\"description\">{}</p>", escape(section.description.trim()));
    }
    if let [(baseline_label, baseline), compared @ ..] = section.runs.as_slice() {
        for (label, report) in compared {
            let why = costs::slower(report, label, baseline, baseline_label);
            if why.is_empty() {
                continue;
            }
            let _ = write!(out, "<div class=\"slower\" data-compared=\"{}\">", escape(label));
            for sentence in &why {
                let _ = write!(out, "<p>{}</p>", escape(sentence));
            }
            out.push_str("</div>\n");
        }
    }
    if scale.horizon < scale.end {
        let _ = writeln!(
            out,
            "<p class=\"note\">Shown up to {}; the run went on to {} with nothing more happening.</p>",
            seconds(scale.horizon),
            seconds(scale.end)
        );
    }
    out.push_str("<div class=\"runs\">\n");
    for (label, report) in &section.runs {
        out.push_str(&run(section.name, label, report, &lanes, &scale, &nodes));
    }
    out.push_str("</div>\n</section>\n");
    out
}

fn run(
    scenario: &str,
    label: &str,
    report: &Report,
    lanes: &Lanes,
    scale: &Scale,
    nodes: &NodeColours,
) -> String {
    let mut out = format!("<div class=\"run\" data-run=\"{0}\">\n<h3>{0}</h3>\n", escape(label));
    out.push_str(&fates(report));
    out.push_str(&violations(report));
    out.push_str(&cost_lines(report));
    out.push_str(&timeline(scenario, label, &report.track, lanes, scale, nodes));
    out.push_str(&vm_table(report));
    out.push_str(&migrations(scenario, label, report, scale));
    out.push_str(&evictions(scenario, label, report, scale));
    out.push_str("</div>\n");
    out
}

/// What the run cost in time, in the text report's words ([`costs::lines`]).
fn cost_lines(report: &Report) -> String {
    let lines = costs::lines(report);
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("<ul class=\"costs\">\n");
    for line in &lines {
        let _ = writeln!(out, "<li>{}</li>", escape(line));
    }
    out.push_str("</ul>\n");
    out
}

/// The disrupted VMs as the text report lists them: outcome, cause, migrations, from and to
/// (to is [`NOWHERE`](super::report::NOWHERE) for a VM shut down).
fn vm_table(report: &Report) -> String {
    if report.disrupted_vms.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<details class=\"vms\"><summary>The {} disrupted VMs: outcome, cause, from, to</summary>\n<table class=\"vms\">\n\
         <thead><tr><th>VM</th><th>outcome</th><th>cause</th><th>migrations</th><th>from</th><th>to</th></tr></thead>\n<tbody>\n",
        report.disrupted_vms.len()
    );
    for vm in &report.disrupted_vms {
        let migrations = if vm.failed_migrations > 0 {
            format!("{} ({} failed)", vm.migrations, vm.failed_migrations)
        } else {
            vm.migrations.to_string()
        };
        let _ = writeln!(
            out,
            "<tr data-vm-row=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{migrations}</td><td>{}</td><td>{}</td></tr>",
            escape(&vm.vm),
            escape(&vm.vm),
            vm.outcome.as_str(),
            escape(&vm.cause),
            escape(&vm.node_before),
            escape(vm.to_column())
        );
    }
    out.push_str("</tbody></table></details>\n");
    out
}

/// What became of the VMs, each number in an element of its own for a browser test to read.
fn fates(report: &Report) -> String {
    let v = &report.vms;
    format!(
        "<p class=\"fates\">Of <b data-fate=\"total\">{}</b> VMs: <b data-fate=\"migrated\">{}</b> migrated, \
         <b data-fate=\"shut-down\">{}</b> shut down, <b data-fate=\"restarted\">{}</b> restarted, \
         <b data-fate=\"untouched\">{}</b> untouched.</p>\n",
        v.total, v.migrated, v.shut_down, v.restarted, v.untouched
    )
}

fn violations(report: &Report) -> String {
    if report.invariant_violations.is_empty() {
        return "<p class=\"note\">No invariant violations.</p>\n".to_owned();
    }
    let mut out = String::from("<div class=\"violations\"><b>Invariant violations</b>\n<ul>\n");
    for violation in &report.invariant_violations {
        let _ = writeln!(out, "<li>{}</li>", escape(violation));
    }
    out.push_str("</ul></div>\n");
    out
}

/// The time axis shared by the runs of a scenario.
struct Scale {
    /// The time shown at the right end, in seconds.
    horizon: f64,
    /// When the longest run ended.
    end: f64,
}

/// Until when a run's last states show: nothing changes after its end, so they last as far as
/// the axis goes.
fn shown_until(track: &Track, scale: &Scale) -> f64 {
    track.end.max(scale.horizon)
}

impl Scale {
    /// Up to a little after the last thing that happened in any run: runs go on, idle, to their
    /// scenario's duration, which would squeeze what matters to the left.
    fn of(tracks: &[&Track]) -> Self {
        let end = tracks.iter().map(|t| t.end).fold(0.0, f64::max);
        let last = tracks.iter().map(|t| last_activity(t)).fold(0.0, f64::max);
        let horizon = if last > 0.0 { round_up((last * 1.1).max(last + 5.0)) } else { end };
        Self { horizon: horizon.max(1.0), end }
    }

    fn x(&self, at: f64) -> f64 {
        PLOT_X0 + at.clamp(0.0, self.horizon) / self.horizon * (PLOT_X1 - PLOT_X0)
    }

    /// The tick marks: 0 and round steps, about eight.
    fn ticks(&self) -> Vec<f64> {
        let step = nice_step(self.horizon / 8.0);
        (0..).map(|i| f64::from(i) * step).take_while(|t| *t <= self.horizon + 1e-9).collect()
    }

    /// Vertical grid lines with their times below, from `top` down to `bottom`.
    fn axis(&self, top: f64, bottom: f64) -> String {
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
fn last_activity(track: &Track) -> f64 {
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
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|s| *s >= raw).unwrap_or(10.0 * power)
}

/// `value` rounded up to a step of the axis it would get.
fn round_up(value: f64) -> f64 {
    let step = nice_step(value / 8.0);
    (value / step).ceil() * step
}

/// Seconds as an axis or hover text shows them: `90 s`, `2.5 s`.
fn seconds(at: f64) -> String {
    if (at - at.round()).abs() < 0.05 {
        format!("{at:.0} s")
    } else {
        format!("{at:.1} s")
    }
}

/// The VMs with a lane, in the order shown in every run of a scenario.
struct Lanes {
    shown: Vec<String>,
    /// VMs with a lane left out, past [`MAX_LANES`].
    left_out: usize,
}

/// The VMs something happened to in any run: those whose state changed first on top (by when),
/// then those only asked to leave, by name; the same order for every run.
fn lanes(section: &Section<'_>) -> Lanes {
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
struct NodeColours(BTreeMap<String, &'static str>);

impl NodeColours {
    fn of(tracks: &[&Track]) -> Self {
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

    fn of_node(&self, node: &str) -> &'static str {
        self.0.get(node).copied().unwrap_or(NODE_COLOURS[0])
    }
}

/// The lanes of one run: each VM's states as bars on the time axis.
fn timeline(
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

fn lane(vm: &str, track: &Track, top: f64, scale: &Scale, nodes: &NodeColours) -> String {
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
fn bar(
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
fn whisker(vm: &str, from: f64, deadline: f64, top: f64, scale: &Scale) -> String {
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

fn describe(state: &VmState) -> String {
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
fn shorten(name: &str, most: usize) -> String {
    let count = name.chars().count();
    if count <= most {
        return name.to_owned();
    }
    let tail: String = name.chars().skip(count - (most - 1)).collect();
    format!("…{tail}")
}

/// A chart's vertical scale, from 0 at the bottom to `top_value` at the top.
struct Vertical {
    top_value: f64,
    top: f64,
    bottom: f64,
}

impl Vertical {
    fn y(&self, value: f64) -> f64 {
        self.bottom - value / self.top_value * (self.bottom - self.top)
    }

    /// Horizontal grid lines at round values, labelled to the left.
    fn ticks(&self) -> String {
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
fn step_path(points: &[(f64, f64)], end: f64, scale: &Scale, vertical: &Vertical) -> String {
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

/// Migrations running over time, against the parallel limits.
fn migrations(scenario: &str, label: &str, report: &Report, scale: &Scale) -> String {
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

fn limit_line(class: &str, name: &str, value: usize, vertical: &Vertical) -> String {
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
fn evictions(scenario: &str, label: &str, report: &Report, scale: &Scale) -> String {
    let track = &report.track;
    let mut out = String::new();
    // An actor's colour: its place among those with requests drawn.
    let colour = |actor: &str| {
        track.evictions.keys().position(|a| a == actor).map(|i| ACTOR_COLOURS[i % ACTOR_COLOURS.len()])
    };
    if track.evictions.is_empty() {
        out.push_str("<p class=\"note\">No eviction requests.</p>\n");
    } else {
        let cumulative = |requests: &[(f64, u16)], allowed: bool| -> Vec<(f64, f64)> {
            let mut count = 0.0;
            requests
                .iter()
                .filter(|(_, code)| (*code == 201) == allowed)
                .map(|(at, _)| {
                    count += 1.0;
                    (*at, count)
                })
                .collect()
        };
        let most = track
            .evictions
            .values()
            .flat_map(|r| [cumulative(r, true).len(), cumulative(r, false).len()])
            .max()
            .unwrap_or(0);
        let vertical =
            Vertical { top_value: (most.max(1) as f64 * 1.1).ceil(), top: 6.0, bottom: CHART_HEIGHT };
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
            let colour = colour(actor).unwrap_or(ACTOR_COLOURS[0]);
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
    }
    let actors = report.actors();
    if actors.is_empty() {
        return out;
    }
    out.push_str("<ul class=\"legend actors\">\n");
    for actor in &actors {
        let swatch = colour(&actor.actor).map_or(String::new(), |colour| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::track::testing::kubevirt_alone;
    use crate::scenario::track::{Change, VmState};

    /// The part of a page from `start` to the next `end` after it.
    fn between<'p>(page: &'p str, start: &str, end: &str) -> &'p str {
        let from = page.find(start).unwrap_or_else(|| panic!("no {start}"));
        let to = page[from..].find(end).map_or(page.len(), |i| from + i);
        &page[from..to]
    }

    /// The number in `<b data-fate="{fate}">` of a part of a page.
    fn fate(part: &str, fate: &str) -> usize {
        let text = between(part, &format!("data-fate=\"{fate}\">"), "</b>");
        text.split('>').nth(1).unwrap().parse().unwrap()
    }

    #[test]
    fn escapes_what_html_gives_meaning_to() {
        assert_eq!(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
        assert_eq!(escape("node01 → node02"), "node01 → node02");
    }

    #[test]
    fn a_page_has_a_lane_per_disrupted_vm_and_the_fates_of_the_report() {
        let (drain, preemption) = (kubevirt_alone("drain"), kubevirt_alone("preemption"));
        let sections = [
            Section { name: "drain", description: "", runs: vec![("KubeVirt alone", drain)] },
            Section { name: "preemption", description: "", runs: vec![("KubeVirt alone", preemption)] },
        ];
        let page = page("Disruptions", &sections);
        assert!(page.starts_with("<!doctype html>") && page.trim_end().ends_with("</html>"));
        for (name, report) in [("drain", drain), ("preemption", preemption)] {
            let section =
                between(&page, &format!("<section class=\"scenario\" id=\"scenario-{name}\">"), "</section>");
            let run = between(section, "<div class=\"run\" data-run=\"KubeVirt alone\">", "</div>\n</div>");
            assert!(!report.disrupted_vms.is_empty());
            assert_eq!(run.matches("<g class=\"lane\"").count(), report.disrupted_vms.len(), "{name}");
            for vm in &report.disrupted_vms {
                assert!(run.contains(&format!("data-vm=\"{}\"", vm.vm)), "{name}: no lane for {}", vm.vm);
            }
            let v = &report.vms;
            let fates = [
                ("total", v.total),
                ("migrated", v.migrated),
                ("shut-down", v.shut_down),
                ("restarted", v.restarted),
                ("untouched", v.untouched),
            ];
            for (name, count) in fates {
                assert_eq!(fate(run, name), count, "{name}");
            }
            // The timeline, the migrations, and the eviction requests when there were any.
            let charts = if report.track.evictions.is_empty() { 2 } else { 3 };
            assert_eq!(run.matches("<svg").count(), charts, "{name}");
            assert_eq!(run.matches("role=\"img\" aria-label=\"").count(), charts);
        }
        // The preempted VMs' grace deadlines, the drain's migrations and its refusals.
        assert!(page.contains("class=\"deadline\""));
        assert!(page.contains("class=\"st-migrating\""));
        assert!(page.contains("parallelMigrationsPerCluster 5"));
        assert!(page.contains("kubectl-drain: "));
        assert!(between(&page, "id=\"scenario-preemption\"", "</section>").contains("No eviction requests."));
        assert!(page.contains("× 429"));
    }

    #[test]
    fn a_page_loads_nothing_from_elsewhere() {
        let drain = kubevirt_alone("drain");
        let sections = [Section {
            name: "drain",
            description: "",
            runs: vec![("KubeVirt alone", drain), ("again", drain)],
        }];
        for html in [page("t", &sections), fragment(&sections)] {
            for reference in ["http://", "https://", "src=", "url(", "<script", "@import", "<link"] {
                assert!(!html.contains(reference), "{reference}");
            }
        }
    }

    #[test]
    fn a_fragment_is_one_styled_element() {
        let drain = kubevirt_alone("drain");
        let fragment =
            fragment(&[Section { name: "drain", description: "", runs: vec![("KubeVirt alone", drain)] }]);
        assert!(fragment.starts_with("<div class=\"evac-report\">\n<style>"));
        for tag in ["<html", "<head", "<body", "<!doctype"] {
            assert!(!fragment.contains(tag), "{tag}");
        }
        assert!(fragment.contains("id=\"scenario-drain\""));
    }

    #[test]
    fn the_runs_of_a_scenario_share_their_lanes_and_time_scale() {
        let drain = kubevirt_alone("drain");
        let mut other = drain.clone();
        // A VM only the other run disrupted, late: it gets a lane in both, the run that left it
        // alone showing it untouched, and the time axis reaches its change in both.
        other.track.vms.insert(
            "default/late".to_owned(),
            vec![
                Change { at: 0.0, state: VmState::Running { node: "node02".into() } },
                Change { at: 2000.0, state: VmState::ShutDown },
            ],
        );
        let page = page(
            "t",
            &[Section { name: "drain", description: "", runs: vec![("one", drain), ("other", &other)] }],
        );
        let one = between(&page, "data-run=\"one\"", "data-run=\"other\"");
        let two = between(&page, "data-run=\"other\"", "</section>");
        fn lanes(run: &str) -> Vec<String> {
            run.match_indices("data-vm=\"").map(|(i, _)| between(&run[i..], "\"", "\">").to_owned()).collect()
        }
        assert_eq!(lanes(one), lanes(two));
        assert_eq!(lanes(one).len(), drain.disrupted_vms.len() + 1);
        assert!(between(one, "data-vm=\"default/late\"", "</g>").contains("not disrupted in this run"));
        for run in [one, two] {
            assert!(run.contains(">2000 s</text>"), "the axis reaches the late change");
        }
    }

    #[test]
    fn many_vms_show_at_most_the_most_lanes_and_say_how_many_are_left_out() {
        let mut report = kubevirt_alone("drain").clone();
        for i in 0..100 {
            let changes = vec![
                Change { at: 0.0, state: VmState::Running { node: "node02".into() } },
                Change { at: 5000.0 + f64::from(i), state: VmState::ShutDown },
            ];
            report.track.vms.insert(format!("bulk/vm-{i:03}"), changes);
        }
        let total = report.track.vms.len();
        let page =
            page("t", &[Section { name: "many", description: "", runs: vec![("KubeVirt alone", &report)] }]);
        assert_eq!(page.matches("<g class=\"lane\"").count(), MAX_LANES);
        assert!(page.contains(&format!("{} more VMs not shown", total - MAX_LANES)));
        // The first disrupted first: the drain's VMs before the bulk (from 5000 s).
        for vm in &report.disrupted_vms {
            assert!(page.contains(&format!("data-vm=\"{}\"", vm.vm)), "{}", vm.vm);
        }
        assert!(page.contains("data-vm=\"bulk/vm-000\""));
        assert!(!page.contains("data-vm=\"bulk/vm-099\""));
    }

    #[test]
    fn names_from_the_report_are_escaped() {
        let mut report = kubevirt_alone("drain").clone();
        report.invariant_violations = vec!["pod <x> & 'y'".to_owned()];
        let vm = "ns/<img onerror=\"x\">".to_owned();
        report
            .track
            .vms
            .insert(vm.clone(), vec![Change { at: 0.0, state: VmState::Running { node: "n<1>".into() } }]);
        let page =
            page("a <title>", &[Section { name: "s&<x>", description: "", runs: vec![("<run>", &report)] }]);
        for raw in ["<img", "<x>", "<1>", "<run>", "s&<x>", "a <title>"] {
            assert!(!page.contains(raw), "{raw} unescaped");
        }
        assert!(page.contains("<li>pod &lt;x&gt; &amp; &#39;y&#39;</li>"));
        assert!(page.contains("id=\"scenario-s--x-\""));
        assert!(page.contains("class=\"violations\""));
        assert!(page.contains("<td class=\"n bad\">1</td>"));
    }

    #[test]
    fn a_page_shows_each_scenario_s_description_escaped() {
        let drain = kubevirt_alone("drain");
        let description = crate::scenario::track::testing::scenario("drain").description;
        assert!(!description.trim().is_empty());
        let sections = [
            Section { name: "drain", description: &description, runs: vec![("KubeVirt alone", drain)] },
            Section {
                name: "other",
                description: "a <b>bold</b> & odd one",
                runs: vec![("KubeVirt alone", drain)],
            },
        ];
        let page = page("t", &sections);
        let section = between(&page, "id=\"scenario-drain\"", "</section>");
        assert!(section.contains(&format!("<p class=\"description\">{}</p>", escape(description.trim()))));
        let other = between(&page, "id=\"scenario-other\"", "</section>");
        assert!(
            other.contains("<p class=\"description\">a &lt;b&gt;bold&lt;/b&gt; &amp; odd one</p>"),
            "{other}"
        );
    }

    /// A page of single runs (`evac simulate --html`) says nothing of a baseline or of other runs.
    #[test]
    fn a_single_run_page_does_not_compare() {
        let sections = [
            Section {
                name: "drain",
                description: "",
                runs: vec![("KubeVirt alone", kubevirt_alone("drain"))],
            },
            Section {
                name: "preemption",
                description: "",
                runs: vec![("with evac", kubevirt_alone("preemption"))],
            },
        ];
        let page = page("t", &sections);
        let summary = between(&page, "<h2>Summary</h2>", "<h2>How to read");
        assert!(!summary.contains('→'), "{summary}");
        for words in [
            "baseline",
            "every run",
            "each run",
            "took longer",
            "class=\"slower\"",
            "saved",
            " vs ",
            "alone → ",
        ] {
            // SVG's `dominant-baseline` is no word of the page.
            assert!(!page.replace("dominant-baseline", "").contains(words), "{words}");
        }
    }

    /// Beside a baseline, a run that took longer says what and why, from its own figures; the
    /// baseline beside a faster run says nothing.
    #[test]
    fn a_slower_run_says_what_took_longer_and_why() {
        use crate::scenario::costs::{seconds, Costs};
        let drain = kubevirt_alone("drain");
        let mut slower = drain.clone();
        let finished = slower.drains[0].finished_at.expect("the drain finishes");
        slower.drains[0].finished_at = Some(finished + 120.0);
        let sections =
            [Section { name: "drain", description: "", runs: vec![("base", drain), ("slow", &slower)] }];
        let page = page("t", &sections);
        let why = between(&page, "<div class=\"slower\" data-compared=\"slow\">", "</div>");
        let (ours, theirs) = (Costs::of(&slower), Costs::of(drain));
        let took = |costs: &Costs| seconds(costs.drains[0].1.unwrap());
        assert!(
            why.contains(&format!("the drain of node01 took {} (base: {})", took(&ours), took(&theirs))),
            "{why}"
        );
        assert!(ours.migrations > 0);
        assert!(
            why.contains(&format!(
                "{} VMs were live-migrated (base: {}), each moving for {} on average (the longest {})",
                ours.migrations,
                theirs.migrations,
                seconds(ours.migration_mean),
                seconds(ours.migration_longest)
            )),
            "{why}"
        );
        let faster =
            [Section { name: "drain", description: "", runs: vec![("base", &slower), ("fast", drain)] }];
        assert!(!page_of(&faster).contains("class=\"slower\""));
    }

    fn page_of(sections: &[Section<'_>]) -> String {
        page("t", sections)
    }

    /// The page lists what the run cost and each actor's eviction requests in the text report's
    /// words, and a VM shut down in place has no node to go to in either.
    #[test]
    fn the_page_and_the_text_report_agree() {
        for name in ["drain", "preemption"] {
            let report = kubevirt_alone(name);
            let text = report.render();
            let page =
                page("t", &[Section { name, description: "", runs: vec![("KubeVirt alone", report)] }]);
            for line in crate::scenario::costs::lines(report) {
                assert!(text.contains(&format!("  {line}\n")), "{name}: {line} not in {text}");
                assert!(page.contains(&format!("<li>{}</li>", escape(&line))), "{name}: {line}");
            }
            for actor in report.actors() {
                assert!(text.contains(&format!("  {}\n", actor.line())), "{name}: {text}");
                let item = between(&page, &format!("<li data-actor=\"{}\"", escape(&actor.actor)), "</li>");
                assert!(item.contains(&escape(&actor.line())), "{item}");
            }
            for vm in &report.disrupted_vms {
                let row = between(&page, &format!("<tr data-vm-row=\"{}\">", vm.vm), "</tr>");
                let cells: Vec<&str> =
                    row.split("<td>").skip(1).map(|c| c.trim_end_matches("</td>")).collect();
                let text_row = text.lines().find(|l| l.starts_with(&format!("{} ", vm.vm))).unwrap();
                let columns: Vec<&str> = text_row.split_whitespace().collect();
                let (from, to) = (columns[columns.len() - 2], columns[columns.len() - 1]);
                assert_eq!((cells[4], cells[5]), (from, to), "{name}: {}", vm.vm);
                if vm.outcome == crate::scenario::Outcome::ShutDown {
                    assert_eq!(to, crate::scenario::NOWHERE, "{}", vm.vm);
                }
            }
        }
    }

    #[test]
    fn the_summary_has_a_row_per_scenario() {
        let (drain, preemption) = (kubevirt_alone("drain"), kubevirt_alone("preemption"));
        let sections = [
            Section {
                name: "drain",
                description: "",
                runs: vec![("KubeVirt alone", drain), ("with evac", drain)],
            },
            Section {
                name: "preemption",
                description: "",
                runs: vec![("KubeVirt alone", preemption), ("with evac", preemption)],
            },
        ];
        let page = page("t", &sections);
        let table = between(&page, "<table class=\"summary\">", "</table>");
        assert_eq!(between(table, "<tbody>", "</tbody>").matches("<tr>").count(), 2);
        let row = between(table, "<a href=\"#scenario-drain\">", "</tr>");
        let requests = drain.eviction_requests();
        assert!(row.contains(&format!("<td class=\"n\">{requests} → {requests}</td>")), "{row}");
        let numbers = format!(
            "<td class=\"n\">{}</td><td class=\"n\">{}</td>",
            drain.vms.migrated, drain.vms.shut_down
        );
        assert_eq!(row.matches(&numbers).count(), 2, "{row}");
    }
}
