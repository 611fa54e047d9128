//! The browser playground in headless Chromium (Debian's `chromium`; `.ci/run` installs it):
//! served by `evac playground`, the page loads, decides an example eviction as KubeVirt does
//! (verdict, message, effect, trace), decides an edited request differently, runs a scenario with
//! KubeVirt alone and with evac to the fates `evac simulate --json` reports for each, and `evac
//! demo`'s HTML report renders every scenario.
//! With `EVAC_SCREENSHOTS` set, screenshots go to `target/screenshots/` for a person to look at.
//! Without Chromium the tests skip, saying so.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use evac_e2e::command::output_within;
use evac_e2e::server::spawn_listening;
use evac_e2e::{evac_bin, fate_in_page, repo_root};
use serde_json::Value;

/// Chromium, or `None` (the test then skips, saying why). With `EVAC_REQUIRE_CHROMIUM` set (as
/// `.ci/run` sets it), a missing Chromium fails the test instead.
fn chromium() -> Option<PathBuf> {
    let candidates = std::env::var_os("CHROMIUM").map(PathBuf::from).into_iter().chain(
        ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].map(PathBuf::from),
    );
    let found = candidates.into_iter().find(|path| path.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("EVAC_REQUIRE_CHROMIUM").is_none(),
            "no Chromium, and EVAC_REQUIRE_CHROMIUM is set"
        );
        eprintln!("skipped: no Chromium (apt-get install -y chromium, or set CHROMIUM)");
    }
    found
}

/// `evac playground` on a free loopback port, stopped when dropped.
struct Playground {
    child: Child,
    url: String,
    _log: tempfile::TempDir,
}

impl Playground {
    fn start() -> Self {
        let dir = repo_root().join("dist/playground");
        assert!(dir.join("index.html").is_file(), "{} is not built: run `make playground`", dir.display());
        let log = tempfile::tempdir().unwrap();
        let args = ["playground", "--addr", "127.0.0.1:0", "--dir"].map(String::from);
        let mut args = args.to_vec();
        args.push(dir.display().to_string());
        let (child, listening) = spawn_listening(&args, &log.path().join("playground.log"));
        Self { child, url: listening.url("playground").to_owned(), _log: log }
    }
}

impl Drop for Playground {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Chromium on `url`: the DOM once the page's work is done (`done` says so; a DOM dumped before,
/// on a loaded machine, is read again, three times at most), and, with `EVAC_SCREENSHOTS` set, a
/// screenshot named `shot` in `target/screenshots/` (to look at the pages; a second Chromium run
/// each, so not by default).
fn load(browser: &Path, url: &str, shot: &str, done: impl Fn(&str) -> bool) -> String {
    let profile = tempfile::tempdir().unwrap();
    let screenshots = repo_root().join("target/screenshots");
    let run = |extra: &[String]| {
        let mut command = Command::new(browser);
        command
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars"])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            // Simulated time for the page's tasks: the DOM is read once they are all done.
            .arg("--virtual-time-budget=60000")
            .args(extra)
            .arg(url);
        let out = output_within(&mut command, Duration::from_secs(180)).unwrap();
        assert!(out.status.success(), "chromium failed on {url}: {}", String::from_utf8_lossy(&out.stderr));
        out
    };
    let mut dom = String::new();
    for attempt in 1..=3 {
        dom = String::from_utf8(run(&["--dump-dom".into()]).stdout).unwrap();
        if done(&dom) {
            break;
        }
        eprintln!("{url}: the page was not done at attempt {attempt}");
    }
    if std::env::var_os("EVAC_SCREENSHOTS").is_some() {
        std::fs::create_dir_all(&screenshots).unwrap();
        run(&[
            format!("--screenshot={}", screenshots.join(shot).display()),
            "--window-size=1400,2000".into(),
        ]);
    }
    dom
}

/// The page is ready and has decided (or said why not).
fn decided(dom: &str) -> bool {
    dom.contains("data-ready-ms=") && (dom.contains("data-code=") || !text_of(dom, "error").is_empty())
}

/// The page has run its scenario (or said why not).
fn ran(dom: &str) -> bool {
    dom.contains("data-fates=") || !text_of(dom, "scenario-error").is_empty()
}

/// The text inside the element with `id` (tags removed, entities of the page's text decoded).
fn text_of(dom: &str, id: &str) -> String {
    let start = dom.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no element #{id}"));
    let open_end = start + dom[start..].find('>').unwrap() + 1;
    let tag_start = dom[..start].rfind('<').unwrap() + 1;
    let tag: String = dom[tag_start..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    let close = open_end + dom[open_end..].find(&format!("</{tag}>")).unwrap();
    let mut text = String::new();
    let mut in_tag = false;
    for c in dom[open_end..close].chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push('\n');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.replace("&gt;", ">").replace("&lt;", "<").replace("&quot;", "\"").replace("&amp;", "&")
}

/// The items of a list element, one per line.
fn items_of(dom: &str, id: &str) -> Vec<String> {
    text_of(dom, id).lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect()
}

fn query(pairs: &[(&str, &str)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    pairs.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect::<Vec<_>>().join("&")
}

#[test]
fn an_example_eviction_shows_kubevirts_verdict_message_effect_and_trace() {
    let Some(browser) = chromium() else { return };
    let playground = Playground::start();
    let dom = load(
        &browser,
        &format!("{}index.html?example=01-drain-live-migratable", playground.url),
        "eviction.png",
        decided,
    );
    assert!(text_of(&dom, "status").starts_with("Ready"), "{}", text_of(&dom, "status"));
    assert_eq!(text_of(&dom, "verdict"), "denied: 429");
    assert_eq!(text_of(&dom, "message"), r#"Eviction triggered evacuation of VMI "default/web-1""#);
    assert_eq!(items_of(&dom, "effects"), ["MarkForEvacuation default/web-1 from node01"]);
    let trace = items_of(&dom, "trace");
    assert_eq!(
        trace.first().map(String::as_str),
        Some("eviction of pod default/virt-launcher-web-1-8xk2p"),
        "{trace:?}"
    );
    assert!(trace.iter().any(|step| step.starts_with("strategy LiveMigrate")), "{trace:?}");
    assert_eq!(
        trace.last().map(String::as_str),
        Some("not yet marked -> 429, mark for evacuation from node01")
    );
    assert!(text_of(&dom, "error").is_empty(), "{}", text_of(&dom, "error"));
}

#[test]
fn an_edited_request_changes_the_verdict() {
    let Some(browser) = chromium() else { return };
    let playground = Playground::start();
    let examples = repo_root().join("examples/evictions");
    let original = std::fs::read_to_string(examples.join("requests/01-drain-live-migratable.json")).unwrap();
    // The same eviction for a pod the cluster does not have: the API server answers, so KubeVirt allows.
    let edited = original.replace("virt-launcher-web-1-8xk2p", "no-such-pod");
    assert_ne!(edited, original);
    let objects = std::fs::read_to_string(examples.join("context.yaml")).unwrap();
    let url = format!(
        "{}index.html?{}",
        playground.url,
        query(&[("policy", "pod-eviction"), ("request", &edited), ("objects", &objects)])
    );
    let dom = load(&browser, &url, "edited-eviction.png", decided);
    assert_eq!(text_of(&dom, "verdict"), "allowed");
    assert_eq!(items_of(&dom, "effects"), ["none"]);
    assert_eq!(items_of(&dom, "reads"), ["get Pod default/no-such-pod: pods \"no-such-pod\" not found"]);
}

/// The example requests of disruption-cause and evacuation open with their policy, cluster and
/// settings, and decide as their README says (`tests/examples.rs`).
#[test]
fn the_other_policies_examples_open_with_their_policy() {
    let Some(browser) = chromium() else { return };
    let playground = Playground::start();
    let dom = load(
        &browser,
        &format!("{}index.html?example=02-noexecute-taint-delete", playground.url),
        "example-disruption-cause.png",
        decided,
    );
    assert!(dom.contains("data-policy=\"disruption-cause\""), "decided by the example's policy");
    assert_eq!(text_of(&dom, "verdict"), "allowed");
    assert_eq!(items_of(&dom, "effects"), ["RequestEvacuation default/db-1 from node01"]);
    assert!(text_of(&dom, "error").is_empty(), "{}", text_of(&dom, "error"));
}

/// A link naming an example or a scenario the page does not have says so, and which there are.
#[test]
fn an_unknown_example_or_scenario_says_which_there_are() {
    let Some(browser) = chromium() else { return };
    let playground = Playground::start();
    let said =
        |id: &'static str| move |dom: &str| dom.contains("data-ready-ms=") && !text_of(dom, id).is_empty();
    let dom = load(
        &browser,
        &format!("{}index.html?example=foo", playground.url),
        "unknown-example.png",
        said("error"),
    );
    let error = text_of(&dom, "error");
    assert!(
        error.starts_with("no example named \"foo\"; the examples are: 01-drain-live-migratable, "),
        "{error}"
    );
    assert!(error.contains("01-preemption-live-migratable") && error.contains("01-drained-node"), "{error}");
    assert!(text_of(&dom, "verdict").is_empty());
    let dom = load(
        &browser,
        &format!("{}index.html?scenario=foo", playground.url),
        "unknown-scenario.png",
        said("scenario-error"),
    );
    let error = text_of(&dom, "scenario-error");
    assert!(error.starts_with("no scenario named \"foo\"; the scenarios are: descheduler, "), "{error}");
    assert!(!error.contains("missing field"), "{error}");
    assert!(!dom.contains("data-fates="), "nothing ran");
}

/// The fates `evac simulate --json` reports for a scenario, with `args` (`--evac`).
fn simulated_fates(scenario: &Path, args: &[&str]) -> Value {
    let out = Command::new(evac_bin())
        .current_dir(repo_root())
        .args(["simulate", "--json"])
        .args(args)
        .arg(scenario)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["vms"].clone()
}

/// Both runs of a scenario in the page, KubeVirt alone and with evac (its pipeline and
/// controller, the policy crates linked in), end with the fates `evac simulate --json` and `evac
/// simulate --json --evac` (wasm modules on wasmtime) report.
#[test]
fn a_scenario_in_the_page_has_the_fates_of_evac_simulate() {
    let Some(browser) = chromium() else { return };
    let playground = Playground::start();
    for name in ["drain", "preemption", "noexecute-taint", "memory-pressure"] {
        let file = repo_root().join(format!("examples/scenarios/{name}.yaml"));
        let dom = load(
            &browser,
            &format!("{}index.html?scenario={name}", playground.url),
            &format!("scenario-{name}.png"),
            ran,
        );
        assert!(text_of(&dom, "scenario-error").is_empty(), "{name}: {}", text_of(&dom, "scenario-error"));
        assert!(
            items_of(&dom, "scenario-problems").is_empty(),
            "{name}: {:?}",
            items_of(&dom, "scenario-problems")
        );
        for (run, args) in [("KubeVirt alone", &[][..]), ("with evac", &["--evac"][..])] {
            let expected = simulated_fates(&file, args);
            for (fate, field) in [
                ("total", "total"),
                ("migrated", "migrated"),
                ("shut-down", "shutDown"),
                ("restarted", "restarted"),
                ("untouched", "untouched"),
            ] {
                assert_eq!(
                    Some(fate_in_page(&dom, run, fate)),
                    expected[field].as_u64(),
                    "{name}, {run}: {fate}"
                );
            }
        }
        assert!(dom.contains("class=\"lane\""), "{name}: no VM lanes drawn");
    }
}

#[test]
fn the_demo_report_renders_every_scenario() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("demo.html");
    let mut demo = Command::new(evac_bin());
    demo.arg("demo").arg("--html").arg(&page).current_dir(repo_root());
    let out = output_within(&mut demo, Duration::from_secs(600)).unwrap();
    assert!(out.status.success(), "evac demo failed: {}", String::from_utf8_lossy(&out.stdout));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("The pictures of every run: {}", page.display())), "{stdout}");
    let dom = load(&browser, &format!("file://{}", page.display()), "demo.png", |_| true);
    let mut scenarios: Vec<String> = std::fs::read_dir(repo_root().join("examples/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "descheduler-naive") // the descheduler's baseline, not a scenario of its own
        .collect();
    scenarios.sort();
    for name in &scenarios {
        let at =
            dom.find(&format!("id=\"scenario-{name}\"")).unwrap_or_else(|| panic!("no section for {name}"));
        let section = &dom[at..];
        let section = &section[..section[1..].find("id=\"scenario-").map_or(section.len(), |end| end + 1)];
        // A baseline that is another scenario is named by its `label` (the naive descheduler).
        let file = |name: &str| -> serde_yaml::Value {
            let text = std::fs::read_to_string(repo_root().join("examples/scenarios").join(name)).unwrap();
            serde_yaml::from_str(&text).unwrap()
        };
        let scenario = file(&format!("{name}.yaml"));
        let baseline = match scenario["baseline"].as_str() {
            Some(other) => file(other)["label"].as_str().expect("a baseline scenario's label").to_owned(),
            None => "KubeVirt alone".to_owned(),
        };
        for run in [baseline.as_str(), "with evac"] {
            assert!(section.contains(&format!("data-run=\"{run}\"")), "{name}: no run {run}");
        }
        assert!(section.matches("<svg").count() >= 2, "{name}: its pictures are missing");
    }
}

/// `evac playground` on a directory without the built page says how to build it.
#[test]
fn the_playground_server_refuses_a_directory_without_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(evac_bin())
        .args(["playground", "--addr", "127.0.0.1:0", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("index.html is missing: build the playground first (make playground)"),
        "{stderr}"
    );
}
