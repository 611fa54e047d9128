//! `evac simulate` on the example scenarios: the outcomes KubeVirt alone gives for each kind of
//! disruption (the baseline evac is measured against), from the binary's JSON report; and clear
//! errors for bad scenario files.

use std::process::Command;

use evac_e2e::{evac_bin, fate_in_page, repo_root};
use serde_json::Value;

fn simulate(file: &std::path::Path) -> Result<Value, String> {
    let out = Command::new(evac_bin()).arg("simulate").arg("--json").arg(file).output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(serde_json::from_slice(&out.stdout).expect("the report is JSON"))
}

fn scenario(name: &str) -> Value {
    simulate(&repo_root().join(format!("examples/scenarios/{name}.yaml"))).unwrap()
}

fn count(report: &Value, field: &str) -> u64 {
    report["vms"][field].as_u64().unwrap()
}

/// The outcome and cause of each disrupted VM, as `name: outcome (cause)`.
fn outcomes(report: &Value) -> Vec<String> {
    report["disruptedVms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|vm| {
            format!("{}: {} ({})", vm["vm"].as_str().unwrap(), vm["outcome"], vm["cause"].as_str().unwrap())
        })
        .collect()
}

#[test]
fn drain_migrates_live_migrate_vms_within_the_limits_and_completes() {
    let report = scenario("drain");
    assert_eq!(count(&report, "migrated"), 10, "{:#?}", outcomes(&report));
    assert_eq!(count(&report, "shutDown"), 2, "the VMs without an eviction strategy");
    assert_eq!(count(&report, "untouched"), 12);
    for vm in report["disruptedVms"].as_array().unwrap() {
        assert_eq!(vm["cause"], "kubectl drain");
        if vm["outcome"] == "migrated" {
            assert_ne!(vm["nodeAfter"], "node01", "{vm}");
        }
    }
    let migrations = &report["migrations"];
    assert_eq!(migrations["succeeded"], 10);
    assert!(migrations["maxRunningInCluster"].as_u64().unwrap() <= 5);
    assert!(migrations["maxRunningFromANode"].as_u64().unwrap() <= 2);
    let drain = &report["drains"][0];
    assert!(drain["finishedAt"].as_f64().is_some(), "{drain}");
    assert!(drain["refused"].as_u64().unwrap() > 0, "KubeVirt's webhook answered 429 while migrating");
    // The two VMs without a strategy, and the ten source pods that completed when their VMs
    // migrated: KubeVirt leaves them for the drain, which evicts finished pods like any other.
    assert_eq!(report["evictions"]["kubectl-drain"]["accepted"], 12);
}

#[test]
fn preemption_shuts_vms_down_without_evac() {
    let report = scenario("preemption");
    // Two 16Gi pods on a node with 4Gi free and 7Gi VMs: at least 4 victims.
    let shut_down = count(&report, "shutDown");
    assert!((4..=6).contains(&shut_down), "{:#?}", outcomes(&report));
    assert_eq!(count(&report, "migrated"), 0);
    assert_eq!(count(&report, "untouched"), 12 - shut_down);
    assert!(
        outcomes(&report).iter().all(|o| o.ends_with("\"shutDown\" (scheduler preemption)")),
        "{:#?}",
        outcomes(&report)
    );
    assert_eq!(report["evictions"]["scheduler preemption"]["accepted"], shut_down);
}

#[test]
fn a_noexecute_taint_shuts_vms_down_and_always_vms_restart_elsewhere() {
    let report = scenario("noexecute-taint");
    assert_eq!(count(&report, "restarted"), 6, "{:#?}", outcomes(&report));
    assert_eq!(count(&report, "shutDown"), 2);
    for vm in report["disruptedVms"].as_array().unwrap() {
        assert_eq!(vm["cause"], "NoExecute taint");
        if vm["outcome"] == "restarted" {
            assert_ne!(vm["nodeAfter"], "node01", "restarted on another node: {vm}");
        }
    }
}

#[test]
fn memory_pressure_makes_the_kubelet_kill_a_vm() {
    let report = scenario("memory-pressure");
    assert_eq!(count(&report, "shutDown"), 1, "{:#?}", outcomes(&report));
    assert_eq!(report["disruptedVms"][0]["cause"], "node pressure");
    assert_eq!(report["evictions"]["node pressure"]["accepted"], 1);
}

#[test]
fn the_kep_1397_descheduler_keeps_to_its_limits_where_the_naive_one_over_evicts() {
    let kep = scenario("descheduler");
    let naive = scenario("descheduler-naive");
    let cycles = kep["descheduler"]["perCycle"].as_array().unwrap();
    assert!(!cycles.is_empty());
    for cycle in cycles {
        // maxTotal 4 and maxPerNode 2, counting evictions in progress.
        assert!(cycle["countedTotal"].as_u64().unwrap() <= 4, "{cycle}");
        assert!(cycle["countedMostOnANode"].as_u64().unwrap() <= 2, "{cycle}");
        assert!(cycle["requests"].as_u64().unwrap() <= 4, "{cycle}");
    }
    let (kep_requests, naive_requests) = (
        kep["descheduler"]["requests"].as_u64().unwrap(),
        naive["descheduler"]["requests"].as_u64().unwrap(),
    );
    assert!(kep["descheduler"]["podEvacuations"].as_u64().unwrap() > 0);
    assert_eq!(naive["descheduler"]["podEvacuations"], 0);
    assert!(naive_requests > 4 * kep_requests, "naive {naive_requests} vs KEP-1397 {kep_requests}");
    assert!(count(&naive, "migrated") > count(&kep, "migrated"));
}

#[test]
fn bad_scenario_files_get_errors_that_say_where() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("name: x\ncluster: {nodes: []}\n", "cluster.nodes: the cluster needs at least one node"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: lots}]}\n", "cluster.nodes[0].memory: \"lots\" is not a quantity"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi, color: red}]}\n", "unknown field `color`"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}]}\ndisruptions: [{at: soon, drain: {node: n}}]\n", "disruptions[0].at: \"soon\" is not a duration"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}]}\ndisruptions: [{drain: {node: m}}]\n", "disruptions[0]: the cluster has no node \"m\""),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}], vms: [{namePrefix: v, memory: 1Gi, evictionStrategy: Sometimes}]}\n", "unknown variant `Sometimes`"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}]}\ndisruptions: [{explode: {node: n}}]\n", "disruptions[0]: explode: unknown variant `explode`, expected one of `drain`, `uncordon`, `taint`"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}]}\ndisruptions: [{preempt: {pod: 2, memory: 1Gi, priority: 1}}]\n", "disruptions[0]: preempt: unknown field `pod`, expected one of `pods`, `memory`, `priority`, `node`"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}]}\ndisruptions: [{at: 1s, drain: {node: n}, uncordon: {node: n}}]\n", "disruptions[0]: a disruption is `at` and one of drain, uncordon"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}]}\ndisruptions: [{restartEvacControl: {now: true}}]\n", "unknown field `now`, there are no fields"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi, cpu: many}]}\n", "cluster.nodes[0].cpu: \"many\" is not a CPU quantity"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}], vms: [{namePrefix: v, memory: 1Gi, affinity: [a]}]}\n", "cluster.vms[0].affinity: not a Kubernetes affinity"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}], podDisruptionBudgets: [{name: b, selector: {matchLabels: {app: a}}}]}\n", "cluster.podDisruptionBudgets[0]: exactly one of minAvailable and maxUnavailable"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}], podDisruptionBudgets: [{name: b, selector: {matchLabels: {app: a}}, minAvailable: lots}]}\n", "cluster.podDisruptionBudgets[0]: minAvailable/maxUnavailable is a number of pods or a percentage"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}], migrationPolicies: [{name: p, selectors: {}, bandwidthPerMigration: fast}]}\n", "cluster.migrationPolicies[0].bandwidthPerMigration: \"fast\" is not a quantity"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}], migrationPolicies: [{name: p, selectors: {podSelector: {}}}]}\n", "unknown field `podSelector`"),
        ("name: x\ncluster: {nodes: [{namePrefix: n, memory: 1Gi}], vms: [{namePrefix: v, memory: 1Gi, runStrategy: Sometimes}]}\n", "unknown variant `Sometimes`, expected one of `Always`, `RerunOnFailure`, `Once`, `Manual`"),
        ("{ not yaml", "scenario.yaml"),
    ];
    for (text, expected) in cases {
        let file = dir.path().join("scenario.yaml");
        std::fs::write(&file, text).unwrap();
        let err = simulate(&file).unwrap_err();
        assert!(err.contains(expected), "{text:?}: expected {expected:?} in {err:?}");
        assert!(err.contains("scenario.yaml"), "the error names the file: {err}");
    }
    let err = simulate(&dir.path().join("missing.yaml")).unwrap_err();
    assert!(err.contains("cannot read the scenario"), "{err}");
}

/// `--html` writes a self-contained page whose fates are the JSON report's.
#[test]
fn the_html_report_shows_the_fates_of_the_json_report() {
    let dir = tempfile::tempdir().unwrap();
    let page_file = dir.path().join("drain.html");
    let file = repo_root().join("examples/scenarios/drain.yaml");
    let out = Command::new(evac_bin())
        .args(["simulate", "--json", "--html"])
        .arg(&page_file)
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let page = std::fs::read_to_string(&page_file).unwrap();
    assert!(page.starts_with("<!doctype html>") || page.starts_with("<!DOCTYPE html>"), "{}", &page[..40]);
    for (fate, field) in [("migrated", "migrated"), ("shut-down", "shutDown"), ("restarted", "restarted")] {
        assert_eq!(fate_in_page(&page, "KubeVirt alone", fate), count(&report, field), "{fate}");
    }
    for vm in report["disruptedVms"].as_array().unwrap() {
        assert!(page.contains(&format!("data-vm=\"{}\"", vm["vm"].as_str().unwrap())), "no lane for {vm}");
    }
    assert!(!page.contains("http://") && !page.contains("https://"), "the page refers to the network");
}

/// A page that cannot be written is a clear error, before any report is printed.
#[test]
fn an_html_report_that_cannot_be_written_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let page_file = dir.path().join("no-such-dir/drain.html");
    let out = Command::new(evac_bin())
        .args(["simulate", "--quiet", "--html"])
        .arg(&page_file)
        .arg(repo_root().join("examples/scenarios/preemption.yaml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot write the HTML report"), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// The numbers after which each of `words` comes in `text` (`822 eviction requests, 12 allowed`).
fn number_before(text: &str, words: &str) -> usize {
    text.find(words).map_or(0, |at| {
        text[..at].split_whitespace().last().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{text}"))
    })
}

/// The value of `attribute="..."` in an HTML element's text.
fn attribute<'a>(element: &'a str, attribute: &str) -> &'a str {
    let from =
        element.find(&format!("{attribute}=\"")).unwrap_or_else(|| panic!("no {attribute} in {element}"));
    let value = &element[from + attribute.len() + 2..];
    &value[..value.find('"').unwrap()]
}

/// `evac simulate` prints its text report and writes its page from one run: both give each
/// actor the same eviction requests (allowed, refused) and disruptions without a request, and
/// each disrupted VM the same FROM and TO, a VM shut down having none to go to in both.
#[test]
fn the_text_report_and_the_page_agree() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["drain", "preemption"] {
        let page_file = dir.path().join(format!("{name}.html"));
        let out = Command::new(evac_bin())
            .args(["simulate", "--quiet", "--html"])
            .arg(&page_file)
            .arg(repo_root().join(format!("examples/scenarios/{name}.yaml")))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let page = std::fs::read_to_string(&page_file).unwrap();
        let actors: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("Eviction requests and disruptions by actor:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .collect();
        assert!(!actors.is_empty(), "{name}: {text}");
        let mut requests = 0;
        for line in actors {
            let (actor, counts) = line.trim().split_once(": ").unwrap();
            let at = page
                .find(&format!("<li data-actor=\"{actor}\""))
                .unwrap_or_else(|| panic!("{name}: {actor}"));
            let item = &page[at..at + page[at..].find('>').unwrap()];
            for (words, data) in [
                (" eviction requests", "data-requested"),
                (" allowed", "data-accepted"),
                (" refused", "data-refused"),
                (" pods disrupted without", "data-disruptions"),
            ] {
                let number = number_before(counts, words);
                assert_eq!(attribute(item, data), number.to_string(), "{name}, {actor}: {words}");
            }
            requests += number_before(counts, " eviction requests");
        }
        let summary = &page[page.find("<tbody>").unwrap()..page.find("</tbody>").unwrap()];
        assert!(summary.contains(&format!("<td class=\"n\">{requests}</td>")), "{name}: {summary}");

        let rows: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("VM "))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect();
        assert!(!rows.is_empty(), "{name}: {text}");
        for row in rows {
            let columns: Vec<&str> = row.split_whitespace().collect();
            let (vm, from, to) = (columns[0], columns[columns.len() - 2], columns[columns.len() - 1]);
            let at =
                page.find(&format!("<tr data-vm-row=\"{vm}\">")).unwrap_or_else(|| panic!("{name}: {vm}"));
            let cells: Vec<&str> = page[at..at + page[at..].find("</tr>").unwrap()]
                .split("<td>")
                .skip(1)
                .map(|cell| cell.trim_end_matches("</td>"))
                .collect();
            assert_eq!((cells[4], cells[5]), (from, to), "{name}: {vm}");
            if row.contains(" shut down ") {
                assert_eq!(to, "—", "{name}: a VM shut down runs nowhere: {row}");
            }
        }
    }
}

/// `evac demo`'s page names the descheduler's baseline by its scenario's `label` (the naive
/// descheduler, not KubeVirt alone), shows each scenario's description, and says why a run with
/// evac took longer from the runs' own figures: the preemptors' waits `evac simulate` reports.
#[test]
fn the_demo_page_names_baselines_and_says_why_a_run_took_longer() {
    let dir = tempfile::tempdir().unwrap();
    let page_file = dir.path().join("demo.html");
    let out = Command::new(evac_bin())
        .current_dir(repo_root())
        .args(["demo", "--only", "descheduler", "--only", "preemption", "--html"])
        .arg(&page_file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("descheduler: its baseline, in the KubeVirt alone columns, is another scenario: \"descheduler rebalancing (naive)\"."), "{stdout}");
    let page = std::fs::read_to_string(&page_file).unwrap();
    let section = |name: &str| {
        let at = page.find(&format!("id=\"scenario-{name}\"")).unwrap();
        &page[at..at + page[at..].find("</section>").unwrap()]
    };
    let descheduler = section("descheduler");
    assert!(descheduler.contains("data-run=\"naive descheduler\""), "the baseline's label");
    assert!(!descheduler.contains("KubeVirt alone"), "the naive descheduler is not KubeVirt alone");
    assert!(descheduler.contains("<p class=\"description\">node01 and node02 are crowded"));

    let longest = |args: &[&str]| {
        let out = Command::new(evac_bin())
            .current_dir(repo_root())
            .args(["simulate", "--json"])
            .args(args)
            .arg("examples/scenarios/preemption.yaml")
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let waits =
            report["preemptors"].as_array().unwrap().iter().map(|p| p["waitedSeconds"].as_f64().unwrap());
        waits.fold(0.0, f64::max)
    };
    let (with_evac, alone) = (longest(&["--evac"]), longest(&[]));
    assert!(with_evac > alone, "with evac the preemptors wait for the migrations");
    let preemption = section("preemption");
    let slower = &preemption[preemption
        .find("<div class=\"slower\" data-compared=\"with evac\">")
        .expect("why it took longer")..];
    let slower = &slower[..slower.find("</div>").unwrap()];
    assert!(
        slower.contains(&format!("preemptors waited up to {with_evac:.0} s (KubeVirt alone: {alone:.0} s)")),
        "{slower}"
    );
    assert!(slower.contains("VMs were live-migrated (KubeVirt alone: 0)"), "{slower}");
}
