//! The tables of the admission decisions (every row of [`eviction_cases`] and
//! [`disruption_cases`]) under the four hosts: `evac eval`, `evac serve`, Kubewarden's `kwctl
//! run` and Kubewarden's `policy-server`, the last two reading each row's cluster from a
//! simulated API server through KUBECONFIG. Every row must get one verdict (allowed, code and
//! message) from all four, and evac eval's answer must be the row's.
//!
//! Rows that share a cluster share one simulated API and one policy-server (one policy entry per
//! settings); `evac serve` starts afresh for each row, since it carries out the effects (marks)
//! it decides, on its copy of the cluster. Rows whose reads are made to fail
//! ([`evac_testkit::Case::failures`]) are left out: a real API server cannot be told to
//! fail one read, and what they test (a host's error text, a missing object in Kubewarden's
//! words, a refused read) is run for real by `tests/kubewarden.rs` (objects that are missing,
//! capabilities that are refused). Where Kubewarden's binaries are absent, the tests skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use evac_core::PolicyResponse;
use evac_e2e::kubewarden_hosts::*;
use evac_e2e::server::cache_dir;
use evac_e2e::*;
use evac_runtime::kubewarden;
use evac_runtime::wapc::{EngineOptions, Policy, PolicyEngine};
use evac_testkit::{disruption_cases, eviction_cases, Case};
use serde_json::{json, Value};

#[test]
fn every_row_of_the_eviction_table_gets_one_verdict_under_evac_and_kubewarden() {
    run_table("pod-eviction", eviction_cases());
}

#[test]
fn every_row_of_the_disruption_table_gets_one_verdict_under_evac_and_kubewarden() {
    run_table("disruption-cause", disruption_cases());
}

/// Rows that share a cluster.
struct Group {
    objects: Vec<Value>,
    cases: Vec<Case>,
}

/// How many groups run at once (each a simulated API, a policy-server and the per-row processes).
const WORKERS: usize = 2;

/// What every group of a table runs with.
struct Hosts<'a> {
    kubewarden: &'a Path,
    /// The policy's name (`pod-eviction`, `disruption-cause`).
    policy: &'a str,
    /// Its built module.
    module: &'a Path,
    /// kwctl's home for the whole table: its wasmtime cache compiles the module once.
    kwctl_home: &'a Path,
    /// The module in-process, to tell the settings it refuses.
    guest: Policy,
}

fn run_table(policy: &str, cases: Vec<Case>) {
    let Some(kubewarden) = kubewarden_dir() else { return };
    let total = cases.len();
    let (failing, cases): (Vec<Case>, Vec<Case>) =
        cases.into_iter().partition(|case| !case.failures.is_empty());
    eprintln!("{policy}: {} rows, {} left out (their reads are made to fail)", total, failing.len());
    let groups = groups(cases);
    let module = repo_root().join(format!("dist/policies/{policy}.wasm"));
    assert!(module.is_file(), "{} is missing: run `make build` first", module.display());
    let kwctl_home = tempfile::tempdir().unwrap();
    let engine = PolicyEngine::new(EngineOptions::default()).unwrap();
    let guest = guest_policy(engine.load(&module).unwrap());
    let hosts =
        Hosts { kubewarden: &kubewarden, policy, module: &module, kwctl_home: kwctl_home.path(), guest };

    let next = AtomicUsize::new(0);
    let disagreements = Mutex::new(Vec::new());
    let rows = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                while let Some(group) = groups.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let found = runtime.block_on(run_group(&hosts, group));
                    rows.fetch_add(group.cases.len(), Ordering::Relaxed);
                    disagreements.lock().unwrap().extend(found);
                }
            });
        }
    });
    let disagreements = disagreements.into_inner().unwrap();
    let rows = rows.into_inner();
    assert!(
        disagreements.is_empty(),
        "{} disagreements in {rows} rows:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    assert_eq!(rows, total - failing.len(), "every row ran");
}

/// The rows grouped by their cluster, in the table's order.
fn groups(cases: Vec<Case>) -> Vec<Group> {
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    let mut groups: Vec<Group> = Vec::new();
    for case in cases {
        let key = serde_json::to_string(&case.objects).unwrap();
        let at = *index.entry(key).or_insert_with(|| {
            groups.push(Group { objects: case.objects.clone(), cases: Vec::new() });
            groups.len() - 1
        });
        groups[at].cases.push(case);
    }
    groups
}

/// The name of the policy entry of the `i`th distinct settings.
fn entry(policy: &str, settings: usize) -> String {
    format!("{policy}-{settings}")
}

/// A policies file with one entry per distinct settings of the group, each as deployed: the
/// module's contextAwareResources and `kubernetes/*`.
fn policies_file(dir: &Path, policy: &str, module: &Path, settings: &[Value]) -> PathBuf {
    let metadata: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join(format!("policies/{policy}/metadata.yml"))).unwrap(),
    )
    .unwrap();
    let entries: serde_json::Map<String, Value> = settings
        .iter()
        .enumerate()
        .map(|(i, settings)| {
            let entry_value = json!({
                "module": format!("file://{}", module.display()),
                "hostCapabilities": ["kubernetes/*"],
                "contextAwareResources": metadata["contextAwareResources"],
                "settings": settings,
            });
            (entry(policy, i), entry_value)
        })
        .collect();
    let path = dir.join("policies.yml");
    std::fs::write(&path, serde_yaml::to_string(&entries).unwrap()).unwrap();
    path
}

/// Whether the module accepts `settings`: `Err` with its reason when it does not.
fn settings_verdict(policy: &Policy, settings: &Value) -> Result<(), String> {
    let verdict = kubewarden::validate_settings(policy, &raw(settings)).expect("validate_settings");
    if verdict.valid {
        Ok(())
    } else {
        Err(verdict.message.unwrap_or_default())
    }
}

/// Runs every row of a group under the four hosts; the disagreements.
async fn run_group(hosts: &Hosts<'_>, group: &Group) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let context = dir.join("context.json");
    std::fs::write(&context, json!({"apiVersion": "v1", "kind": "List", "items": group.objects}).to_string())
        .unwrap();
    let api = start_simulated_api(dir, &context).await;
    let mut disagreements = Vec::new();

    // Settings the module refuses are refused by every host, each in its own way.
    let mut settings: Vec<Value> = Vec::new();
    for case in &group.cases {
        if settings.contains(&case.settings) {
            continue;
        }
        match settings_verdict(&hosts.guest, &case.settings) {
            Ok(()) => settings.push(case.settings.clone()),
            Err(why) => disagreements.extend(refused_settings(hosts, dir, &api, &context, case, &why).await),
        }
    }
    if settings.is_empty() {
        return disagreements;
    }
    let policies = policies_file(dir, hosts.policy, hosts.module, &settings);
    let mut policy_server = start_policy_server(hosts.kubewarden, dir, &api.kubeconfig, &policies).await;
    let client = client();

    // One `evac serve` until a row's answer carries effects, which it carries out on its copy of
    // the cluster: the next row gets a fresh one.
    let mut evac_serve: Option<EvacServer> = None;
    for case in &group.cases {
        let Some(index) = settings.iter().position(|s| s == &case.settings) else { continue };
        let url = |server: &str| format!("{server}/validate/{}", entry(hosts.policy, index));
        let review = admission_review(case.request.clone());
        let review_file = dir.join("review.json");
        std::fs::write(&review_file, review.to_string()).unwrap();
        let evaluation = Evaluation {
            module: hosts.module,
            review: &review_file,
            settings: &case.settings,
            refused: false,
        };

        let mut effects = true;
        let expected = evac_eval(&evaluation, &context, &cache_dir()).map(|(verdict, response)| {
            let response: PolicyResponse = serde_json::from_value(response).unwrap();
            if let Err(why) = case.expected.check(&response) {
                disagreements.push(format!("{}: evac eval is not the row's answer: {why}", case.name));
            }
            effects = !response.effects.is_empty();
            verdict
        });
        if evac_serve.is_none() {
            evac_serve = Some(start_evac_serve(dir, &policies, &context, &cache_dir()).await);
        }
        let evac_serve_url = url(&evac_serve.as_ref().unwrap().url);
        let mut policy_server_verdict = post_review(&client, &url(&policy_server.url), &review).await;
        if policy_server_verdict.as_ref().is_err_and(|e| e.contains("error sending request")) {
            // No answer at all (the process lost its port to another, or died): once more, on a
            // fresh one. A wrong answer is never retried.
            policy_server = start_policy_server(hosts.kubewarden, dir, &api.kubeconfig, &policies).await;
            policy_server_verdict = post_review(&client, &url(&policy_server.url), &review).await;
        }
        let verdicts = [
            ("evac serve", post_review(&client, &evac_serve_url, &review).await),
            ("kwctl run", kwctl_run(hosts.kubewarden, hosts.kwctl_home, &api.kubeconfig, &evaluation)),
            ("policy-server", policy_server_verdict),
        ];
        if effects {
            evac_serve = None;
        }
        for (host, verdict) in verdicts {
            if verdict != expected {
                disagreements.push(format!("{}: {host} {verdict:?}, evac eval {expected:?}", case.name));
            }
        }
    }
    disagreements
}

/// A row whose settings the module refuses (`why`): evac eval and kwctl run fail with the
/// module's reason, and neither server starts.
async fn refused_settings(
    hosts: &Hosts<'_>,
    dir: &Path,
    api: &SimulatedApi,
    context: &Path,
    case: &Case,
    why: &str,
) -> Vec<String> {
    let dir = dir.join("refused");
    std::fs::create_dir_all(&dir).unwrap();
    let review_file = dir.join("review.json");
    std::fs::write(&review_file, admission_review(case.request.clone()).to_string()).unwrap();
    let evaluation =
        Evaluation { module: hosts.module, review: &review_file, settings: &case.settings, refused: false };
    let policies = policies_file(&dir, hosts.policy, hosts.module, std::slice::from_ref(&case.settings));
    let failures = [
        ("evac eval", evac_eval(&evaluation, context, &cache_dir()).map(|(v, _)| format!("{v:?}"))),
        (
            "kwctl run",
            kwctl_run(hosts.kubewarden, hosts.kwctl_home, &api.kubeconfig, &evaluation)
                .map(|v| format!("{v:?}")),
        ),
        (
            "evac serve",
            evac_serve_refusal(&dir, &policies, context, &cache_dir()).map(|()| "started".to_owned()),
        ),
        (
            "policy-server",
            policy_server_refusal(hosts.kubewarden, &dir, &api.kubeconfig, &policies)
                .map(|()| "started".to_owned()),
        ),
    ];
    let mut disagreements = Vec::new();
    for (host, outcome) in failures {
        match outcome {
            Err(error) if error.contains(why) => {}
            other => disagreements
                .push(format!("{}: {host} should refuse the settings ({why}), got {other:?}", case.name)),
        }
    }
    disagreements
}
