//! Scenario reports as pictures: a self-contained HTML page (or a fragment of one) with inline
//! SVG and CSS, nothing loaded from elsewhere and no script. Per scenario: its description and,
//! beside a baseline, why a run took longer ([`costs::slower`]); per run: what became of the VMs
//! (and, in a table, each one's outcome, cause, from and to), what the run cost in time, a lane per
//! VM showing its states over time, the migrations running against the parallel limits, and the
//! eviction requests of each actor. Its words and numbers are the text report's.

use std::collections::BTreeSet;
use std::fmt::Write as _;

mod axis;
mod charts;
mod lanes;

use self::axis::{seconds, Scale};
use self::charts::{evictions, migrations};
use self::lanes::{lanes, timeline, Lanes, NodeColours};
use super::costs;
use super::report::Report;
use super::track::Track;

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
