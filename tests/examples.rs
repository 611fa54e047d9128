//! The example requests of `examples/disruption-cause/` and `examples/evacuation/`, each run with
//! `evac eval` on the built module as their README says, give the answer and the effects the
//! README's table documents for them; every request file has its row.

use std::path::Path;
use std::process::Command;

use evac_e2e::{evac_bin, repo_root};
use evac_testkit::examples::{in_words, readme_rows};
use serde_json::Value;

/// A row of an examples README's table: the request's name, the answer (`allowed` or
/// `denied: <code>`), and its effects (`none`, or `<Type> <namespace>/<name>, ...`).
#[derive(Debug)]
struct Row {
    request: String,
    answer: String,
    effects: String,
}

/// The table's rows of `<dir>/README.md` (`| request | answer | effects | why |`).
fn documented(dir: &Path) -> Vec<Row> {
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    readme_rows(&readme)
        .into_iter()
        .map(|cells| Row {
            request: cells[0].to_owned(),
            answer: cells[1].to_owned(),
            effects: cells[2].to_owned(),
        })
        .collect()
}

fn check(policy: &str, settings: Option<&str>) {
    let dir = repo_root().join("examples").join(policy);
    let module = repo_root().join(format!("dist/policies/{policy}.wasm"));
    assert!(module.is_file(), "{} is missing: run `make build`", module.display());
    let rows = documented(&dir);
    let mut files: Vec<String> = std::fs::read_dir(dir.join("requests"))
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let listed: Vec<&str> = rows.iter().map(|r| r.request.as_str()).collect();
    assert_eq!(listed, files, "{policy}: the README's table lists every request, in order");
    // The compiled module is cached for the runs after the first.
    let cache = tempfile::tempdir().unwrap();
    for row in &rows {
        let mut eval = Command::new(evac_bin());
        eval.arg("eval")
            .arg("--policy")
            .arg(&module)
            .arg("--context")
            .arg(dir.join("context.yaml"))
            .arg("--request")
            .arg(dir.join(format!("requests/{}.json", row.request)))
            .arg("--cache-dir")
            .arg(cache.path().join("cache"));
        if let Some(settings) = settings {
            eval.arg("--settings").arg(dir.join(settings));
        }
        let out = eval.output().unwrap();
        assert!(out.status.success(), "{}: {}", row.request, String::from_utf8_lossy(&out.stderr));
        let response: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            in_words(&response),
            (row.answer.clone(), row.effects.clone()),
            "{policy}: {}",
            row.request
        );
    }
}

#[test]
fn the_disruption_cause_examples_answer_as_documented() {
    check("disruption-cause", None);
}

#[test]
fn the_evacuation_examples_answer_as_documented() {
    check("evacuation", Some("settings.json"));
}
