//! `evac eval`, the binary `make build` makes (`target/release/evac`): one JSON line on stdout for
//! an answer; for bad input, a non-zero exit and exactly one `error: ` line on stderr.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use evac_e2e::*;
use serde_json::Value;

fn path(p: &Path) -> String {
    p.to_str().expect("UTF-8 path").to_owned()
}

/// Runs `evac <args>` with `stdin` (empty when `None`).
fn evac(args: &[String], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(evac_bin())
        .args(args)
        .env_remove("EVAC_LOG")
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run evac");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).expect("stdin");
    drop(input);
    child.wait_with_output().expect("evac")
}

/// `evac eval --policy <built module> --request <request> --context <examples context>` + extra.
fn eval_args(request: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        "eval".into(),
        "--policy".into(),
        path(&policy_path()),
        "--request".into(),
        request.into(),
        "--context".into(),
        path(&example("context.yaml")),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The answer of a successful run: exit 0, one JSON object line on stdout, nothing on stderr.
fn answer(case: &str, output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{case}: exit {:?}, stderr: {stderr}", output.status.code());
    assert!(stderr.is_empty(), "{case}: stderr: {stderr}");
    assert!(stdout.ends_with('\n') && stdout.lines().count() == 1, "{case}: not one line: {stdout:?}");
    let json: Value =
        serde_json::from_str(stdout.trim_end()).unwrap_or_else(|e| panic!("{case}: {e}: {stdout}"));
    assert!(json.is_object(), "{case}: {json}");
    json
}

/// The error of a failed run: non-zero exit, nothing on stdout, one `error: ` line on stderr.
fn error(case: &str, output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{case}: succeeded: {stdout}");
    assert!(output.status.code().is_some_and(|c| c != 0), "{case}: {:?}", output.status);
    assert!(stdout.is_empty(), "{case}: stdout: {stdout}");
    assert_eq!(stderr.lines().count(), 1, "{case}: not one line: {stderr:?}");
    assert!(stderr.ends_with('\n'), "{case}: {stderr:?}");
    assert!(stderr.starts_with("error: "), "{case}: {stderr:?}");
    stderr
}

#[test]
fn eval_prints_the_answer_as_one_json_line() {
    let request = path(&example("requests/01-drain-live-migratable.json"));
    let json = answer("01", &evac(&eval_args(&request, &[]), None));
    assert_eq!(json["accepted"], false);
    assert_eq!(json["code"], 429);
    assert_eq!(json["message"], r#"Eviction triggered evacuation of VMI "default/web-1""#);
    assert_eq!(
        json["effects"],
        serde_json::json!([{"type": "MarkForEvacuation", "vmi": {"namespace": "default", "name": "web-1"}, "node": "node01", "dryRun": false, "source": null}])
    );
}

#[test]
fn eval_reads_the_request_from_stdin() {
    let file = example("requests/02-descheduler-live-migratable.json");
    let bytes = std::fs::read(&file).unwrap();
    let from_stdin = answer("stdin", &evac(&eval_args("-", &[]), Some(&bytes)));
    let from_file = answer("file", &evac(&eval_args(&path(&file), &[]), None));
    assert_eq!(from_stdin, from_file);
    assert_eq!(from_stdin["effects"][0]["source"], "descheduler");
}

#[test]
fn eval_answers_every_example() {
    // (example, accepted, effects)
    let cases = [
        ("01-drain-live-migratable", false, 1),
        ("02-descheduler-live-migratable", false, 1),
        ("03-dry-run", false, 1),
        ("04-not-migratable", false, 0),
        ("05-if-possible-not-migratable", true, 0),
        ("06-external", false, 1),
        ("07-evacuation-in-progress", false, 0),
        ("08-strategy-none", true, 0),
        ("09-target-pod", false, 0),
        ("10-hotplug-volume-pod", false, 0),
        ("11-plain-pod", true, 0),
    ];
    for (name, accepted, effects) in cases {
        let request = path(&example(&format!("requests/{name}.json")));
        let json = answer(name, &evac(&eval_args(&request, &[]), None));
        assert_eq!(json["accepted"], accepted, "{name}: {json}");
        if !accepted {
            assert_eq!(json["code"], 429, "{name}: {json}");
        }
        assert_eq!(json["effects"].as_array().map(Vec::len), Some(effects), "{name}: {json}");
    }
}

#[test]
fn eval_settings() {
    let request = path(&example("requests/01-drain-live-migratable.json"));
    let json = answer(
        "settings naming the CR",
        &evac(
            &eval_args(
                &request,
                &["--settings", r#"{"kubevirt":{"namespace":"kubevirt","name":"kubevirt"}}"#],
            ),
            None,
        ),
    );
    assert_eq!(json["accepted"], false, "{json}");
    assert_eq!(json["effects"][0]["dryRun"], false, "{json}");
    assert_one_key_style(&json);
    let stderr = error(
        "invalid settings",
        &evac(
            &eval_args(&request, &["--settings", r#"{"kubevirt":{"namespace":"","name":"kubevirt"}}"#]),
            None,
        ),
    );
    assert!(stderr.contains("invalid settings: kubevirt: both namespace and name must be set"), "{stderr}");
}

#[test]
fn eval_refuses_bad_input_with_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let module = policy_bytes();
    let truncated = dir.path().join("truncated.wasm");
    std::fs::write(&truncated, &module[..module.len() / 2]).unwrap();
    let panics = dir.path().join("panics.wasm");
    std::fs::write(&panics, wat_fixture("panics.wat")).unwrap();
    let request = path(&example("requests/01-drain-live-migratable.json"));
    let empty_context = path(&test_data("empty-context.yaml"));

    let with_policy = |policy: &Path| {
        let mut args = eval_args(&request, &[]);
        args[2] = path(policy);
        args
    };
    let with_context = |context: &str| {
        let mut args = eval_args(&request, &[]);
        args[6] = context.into();
        args
    };
    // (case, arguments, standard input, what the error line must say)
    type Case<'a> = (&'a str, Vec<String>, Option<&'a [u8]>, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        (
            "missing request file",
            eval_args(&path(&test_data("requests/missing.json")), &[]),
            None,
            vec!["cannot read the request file", "missing.json"],
        ),
        (
            "request that is not JSON",
            eval_args(&path(&test_data("requests/not-json.txt")), &[]),
            None,
            vec!["invalid --request", "not valid JSON"],
        ),
        ("empty standard input", eval_args("-", &[]), Some(b""), vec!["invalid --request", "not valid JSON"]),
        (
            "truncated module",
            with_policy(&truncated),
            None,
            vec!["cannot load policy module", "truncated.wasm", "not a valid WebAssembly module"],
        ),
        (
            "missing module",
            with_policy(&dir.path().join("missing.wasm")),
            None,
            vec!["cannot read policy module", "missing.wasm"],
        ),
        ("empty context file", with_context(&empty_context), None, vec!["empty-context.yaml", "empty"]),
        (
            "missing context file",
            with_context(&path(&dir.path().join("missing.yaml"))),
            None,
            vec!["cannot read context file", "missing.yaml"],
        ),
        (
            "a policy that panics (writing its message through WASI, as Rust policies do)",
            with_policy(&panics),
            None,
            vec!["the policy trapped", "the policy wrote: panicked at src/lib.rs:12:5: boom"],
        ),
        (
            "a request that is not a pods/eviction CREATE",
            eval_args(&path(&test_data("requests/pod-delete.json")), &[]),
            None,
            vec!["only evaluates pods/eviction CREATE requests", "got DELETE pods"],
        ),
    ];
    for (case, args, stdin, expected) in cases {
        let stderr = error(case, &evac(&args, stdin));
        for text in expected {
            assert!(stderr.contains(text), "{case}: {stderr:?} does not say {text:?}");
        }
    }
}

#[test]
fn inspect_prints_the_metadata() {
    let output = evac(&["inspect".into(), path(&policy_path())], None);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let yaml: Value = serde_yaml::from_slice(&output.stdout).expect("YAML");
    assert_eq!(yaml["protocolVersion"], "v1");
    assert_eq!(yaml["rules"][0]["resources"][0], "pods/eviction");

    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("bare.wasm");
    std::fs::write(&bare, wat_fixture("guest.wat")).unwrap();
    let stderr = error("a module without metadata", &evac(&["inspect".into(), path(&bare)], None));
    assert!(stderr.contains("bare.wasm carries no io.kubewarden.metadata section"), "{stderr}");
}

/// Every key of `evac eval`'s answer in Kubernetes' camelCase, the effects' as the rest.
fn assert_one_key_style(value: &serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                // Annotation keys are data, not fields.
                if key.contains('/') || key.contains('-') {
                    continue;
                }
                assert!(!key.contains('_'), "a snake_case key in evac eval's answer: {key}");
                assert_one_key_style(value);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(assert_one_key_style),
        _ => {}
    }
}

/// `evac simulate --evac` and `evac demo` from a directory that is not the checkout: the
/// checkout's examples and modules are found (the binary's checkout), and nothing is written to
/// the current directory but what was asked for.
#[test]
fn the_simulator_runs_from_any_directory() {
    let elsewhere = tempfile::tempdir().unwrap();
    let scenario = repo_root().join("examples/scenarios/drain.yaml");
    let output = Command::new(evac_bin())
        .current_dir(elsewhere.path())
        .args(["simulate", "--evac", "--json"])
        .arg(&scenario)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report.is_object(), "{report}");
    let html = elsewhere.path().join("demo.html");
    let output = Command::new(evac_bin())
        .current_dir(elsewhere.path())
        .args(["demo", "--only", "drain.yaml", "--html"])
        .arg(&html)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(std::fs::metadata(&html).unwrap().len() > 1000);
    let written: Vec<_> =
        std::fs::read_dir(elsewhere.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(written, ["demo.html"], "{written:?}");
}

/// `evac sim serve` without `--kubeconfig` writes none into the current directory: it writes a
/// new temporary file, owner-only, and prints where.
#[test]
fn sim_serve_writes_its_kubeconfig_where_it_says() {
    let elsewhere = tempfile::tempdir().unwrap();
    let mut child = Command::new(evac_bin())
        .current_dir(elsewhere.path())
        .args(["sim", "serve", "--no-components", "--addr", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let line = std::io::BufRead::lines(std::io::BufReader::new(stderr))
        .map(Result::unwrap)
        .find(|l| l.contains("kubeconfig: "))
        .expect("the kubeconfig's path is printed");
    child.kill().unwrap();
    child.wait().unwrap();
    let path = std::path::PathBuf::from(line.rsplit("kubeconfig: ").next().unwrap());
    assert!(path.starts_with(std::env::temp_dir()), "{}", path.display());
    let metadata = std::fs::metadata(&path).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600);
    assert!(std::fs::read_to_string(&path).unwrap().contains("server: http://127.0.0.1:"));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}
