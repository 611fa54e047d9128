//! The hold, through the built modules: `launcher-hold`'s mutation under `evac eval` and through
//! the admission answer `evac serve` gives (the JSON patch, `allowedToMutate`, monitor mode), and
//! every row of the hold table through the built `disruption-cause` module on the tables' clock.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use evac_cluster::{Executor, MemoryStore};
use evac_core::PolicyId;
use evac_e2e::*;
use evac_evaluator::{admission, Loader, Metrics, Pipeline, PoliciesFile, Registry};
use evac_runtime::kubewarden::metadata;
use evac_runtime::wapc::{EngineOptions, PolicyEngine, WallClock};
use evac_testkit::{check_cases, hold_cases, TABLE_NOW};
use serde_json::{json, Value};

/// `evac eval` of a pod CREATE through `launcher-hold`: its answer as JSON.
fn eval(request: &str, settings: Option<&str>) -> Value {
    let mut command = Command::new(evac_bin());
    command
        .arg("eval")
        .arg("--policy")
        .arg(built_policy(PolicyId::LauncherHold))
        .arg("--request")
        .arg(example_hold(request));
    if let Some(settings) = settings {
        command.arg("--settings").arg(settings);
    }
    let output = command.env_remove("EVAC_LOG").output().expect("evac eval");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("one JSON answer")
}

fn example_hold(name: &str) -> PathBuf {
    repo_root().join("examples/hold").join(name)
}

#[test]
fn evac_eval_gives_a_launcher_pod_the_hook_and_a_longer_grace() {
    let answer = eval("launcher-pod-create.json", None);
    assert_eq!(answer["accepted"], true);
    let pod = &answer["mutatedObject"];
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 360, "KubeVirt's 60 s and the 300 s window");
    for (i, container) in ["compute", "volumecontainerdisk"].iter().enumerate() {
        let hook = &pod["spec"]["containers"][i]["lifecycle"]["preStop"]["httpGet"];
        assert_eq!(hook["host"], "127.0.0.1", "{container}");
        assert_eq!(hook["port"], 9190, "{container}");
        assert_eq!(hook["path"], format!("/hold/default/web-1/{container}"));
    }
    assert_eq!(pod["metadata"]["annotations"]["evac.kubevirt.io/hold-window"], "300");
    // The rest of the pod is as virt-controller made it.
    assert_eq!(pod["spec"]["containers"][0]["command"][9], "--grace-period-seconds");
    assert_eq!(answer["effects"], json!([]));

    let longer = eval("launcher-pod-create.json", Some(r#"{"windowSeconds": 900, "port": 9300}"#));
    assert_eq!(longer["mutatedObject"]["spec"]["terminationGracePeriodSeconds"], 960);
    assert_eq!(
        longer["mutatedObject"]["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["port"],
        9300
    );
}

#[test]
fn evac_eval_leaves_other_pods_unchanged() {
    let answer = eval("other-pod-create.json", None);
    assert_eq!(answer["accepted"], true);
    assert_eq!(answer["mutatedObject"], Value::Null);
}

#[test]
fn the_module_declares_itself_mutating() {
    let bytes = std::fs::read(built_policy(PolicyId::LauncherHold)).unwrap();
    let metadata = metadata::read(&bytes).unwrap().expect("embedded metadata");
    assert!(metadata.mutating);
    assert!(metadata.context_aware_resources.is_empty(), "it reads nothing");
}

/// `evac serve`'s answer for the launcher pod's creation, with `launcher-hold` served as `entry`.
async fn served_answer(entry: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies.yml");
    let module = built_policy(PolicyId::LauncherHold);
    std::fs::write(&policies, format!("launcher-hold:\n  module: {}\n{entry}", module.display())).unwrap();
    let file = PoliciesFile::load(&policies).unwrap();
    let store = Arc::new(MemoryStore::from_objects(Vec::new()).unwrap());
    let engine = PolicyEngine::new(EngineOptions::default()).unwrap();
    let metrics = Arc::new(Metrics::default());
    let loader = Loader { engine, source: Arc::clone(&store) as _ };
    let registry = Arc::new(Registry::start(&file, loader, Arc::clone(&metrics)).unwrap());
    let pipeline = Pipeline::new(Arc::clone(&registry), Executor::new(store), metrics);
    let served = registry.current()["launcher-hold"].clone();
    let body = std::fs::read(example_hold("launcher-pod-create.json")).unwrap();
    let review = admission::parse_review(&body).unwrap();
    let (answer, _) = admission::answer(&pipeline, &served, review).await;
    serde_json::to_value(&answer).unwrap()
}

#[tokio::test]
async fn evac_serve_answers_the_mutation_as_a_json_patch() {
    let answer = served_answer("  allowedToMutate: true\n").await;
    let response = &answer["response"];
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let patch =
        base64::engine::general_purpose::STANDARD.decode(response["patch"].as_str().unwrap()).unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    // Applied to the pod as the API server applies it, the patch is the mutation.
    let mut pod: Value =
        serde_json::from_slice::<Value>(&std::fs::read(example_hold("launcher-pod-create.json")).unwrap())
            .unwrap()["request"]["object"]
            .clone();
    json_patch::patch(&mut pod, &patch).unwrap();
    assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 360);
    assert_eq!(pod["spec"]["containers"][0]["lifecycle"]["preStop"]["httpGet"]["host"], "127.0.0.1");
}

#[tokio::test]
async fn a_mutation_not_allowed_rejects_and_monitor_mode_drops_it() {
    // Kubewarden's policy-server: a policy that mutates without allowedToMutate rejects the request.
    let refused = served_answer("").await;
    assert_eq!(refused["response"]["allowed"], false);
    assert_eq!(
        refused["response"]["status"]["message"],
        "Request rejected by policy launcher-hold. The policy attempted to mutate the request, but it is \
         currently configured to not allow mutations."
    );
    assert!(refused["response"].get("patch").is_none());
    // Monitor mode: allowed, and nothing changed.
    let monitored = served_answer("  allowedToMutate: true\n  policyMode: monitor\n").await;
    assert_eq!(monitored["response"]["allowed"], true);
    assert!(monitored["response"].get("patch").is_none());
    assert!(monitored["response"].get("patchType").is_none());
}

/// Every row of the hold table through the built disruption-cause module, with the grants of its
/// metadata, on the tables' clock.
#[test]
fn every_row_of_the_hold_table_through_the_module() {
    let clock = WallClock(Arc::new(|| Duration::from_secs_f64(TABLE_NOW)));
    let engine =
        PolicyEngine::new(EngineOptions { wall_clock: Some(clock), ..EngineOptions::default() }).unwrap();
    let path = built_policy(PolicyId::DisruptionCause);
    let module = engine.load(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let grants: Vec<_> =
        metadata::read(&bytes).unwrap().unwrap().context_aware_resources.into_iter().collect();
    check_cases("hold", &hold_cases(), |case| validate_case(&module, &grants, case));
}
