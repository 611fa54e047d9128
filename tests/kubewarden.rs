//! The same policies, the same verdicts under Kubewarden's own hosts: every case is evaluated by
//! `evac eval`, `evac serve`, `kwctl run` and `policy-server` (Kubewarden 1.36, from
//! `../shared/kubewarden/` or `$EVAC_KUBEWARDEN_DIR`; the last two read the simulated API through
//! KUBECONFIG, as they would a cluster), and each case must get one verdict: allowed, code and
//! message alike. Where Kubewarden's binaries are absent the tests skip, saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use evac_e2e::server::{spawn, wait_until_ok, Process};
use evac_e2e::*;
use serde_json::{json, Value};

/// Where Kubewarden's `kwctl` and `policy-server` are, if they are.
fn kubewarden_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("EVAC_KUBEWARDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/kubewarden"));
    let present = ["kwctl", "policy-server"].iter().all(|binary| dir.join(binary).is_file());
    if !present {
        eprintln!(
            "skipped: Kubewarden's kwctl and policy-server are not in {} (set EVAC_KUBEWARDEN_DIR)",
            dir.display()
        );
    }
    present.then_some(dir)
}

/// A verdict as every host reports it.
#[derive(Debug, Clone, PartialEq)]
struct Verdict {
    allowed: bool,
    code: Option<u64>,
    message: String,
}

impl Verdict {
    /// From an AdmissionResponse (`allowed`, `status.code`, `status.message`).
    fn of_response(response: &Value) -> Self {
        let allowed = response["allowed"].as_bool().unwrap_or_else(|| panic!("no allowed: {response}"));
        Self {
            allowed,
            code: if allowed { None } else { response["status"]["code"].as_u64() },
            message: response["status"]["message"].as_str().unwrap_or_default().to_owned(),
        }
    }

    /// From evac eval's PolicyResponse (`accepted`, `code`, `message`).
    fn of_policy_response(response: &Value) -> Self {
        let allowed = response["accepted"].as_bool().unwrap_or_else(|| panic!("no accepted: {response}"));
        Self {
            allowed,
            code: if allowed { None } else { response["code"].as_u64() },
            message: response["message"].as_str().unwrap_or_default().to_owned(),
        }
    }
}

/// One request, under one policy of the policies file.
struct Case {
    name: String,
    policy: &'static str,
    review: Value,
}

/// The objects of the example cluster, plus the ones the missing-object cases need: a launcher
/// pod whose VMI does not exist, a hotplug pod whose owner pod does not exist, and a hotplug
/// pod owned by the launcher pod without a VMI.
fn objects() -> Value {
    let text = std::fs::read_to_string(example("context.yaml")).unwrap();
    let mut list: Value = serde_yaml::from_str(&text).unwrap();
    let items = list["items"].as_array_mut().unwrap();
    items.push(launcher_pod(NS, "novmi", NODE));
    items.push(hotplug_pod(NS, "hp-volume-orphan", &launcher_name("ghost")));
    items.push(hotplug_pod(NS, "hp-volume-novmi", &launcher_name("novmi")));
    list
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let dir = repo_root().join("examples/evictions/requests");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for file in files {
        let review: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        cases.push(Case { name, policy: "pod-eviction", review });
    }
    for pod in [launcher_name("novmi"), "hp-volume-orphan".into(), "hp-volume-novmi".into()] {
        let review = admission_review(eviction_request(NS, &pod));
        cases.push(Case { name: format!("missing object: {pod}"), policy: "pod-eviction", review });
    }
    let review = admission_review(eviction_request(NS, "virt-launcher-web-1-8xk2p"));
    cases.push(Case { name: "refused capability".into(), policy: "pod-eviction-refused", review });
    cases
}

/// What the missing-object and refused-capability cases must get, from KubeVirt's rules (a
/// missing VMI is a failed read; a missing owner or owner's VMI frees a hotplug pod) and
/// evac's (a refused read is a configuration error).
fn check_expected(case: &Case, verdict: &Verdict) {
    match case.name.as_str() {
        "missing object: virt-launcher-novmi-abcde" | "missing object: virt-launcher-novmi-8xk2p" => {
            let message =
                "kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io \"novmi\" not found";
            assert_eq!(verdict, &Verdict { allowed: false, code: Some(429), message: message.into() });
        }
        "missing object: hp-volume-orphan" | "missing object: hp-volume-novmi" => {
            assert!(verdict.allowed, "{}: {verdict:?}", case.name);
        }
        "refused capability" => {
            assert_eq!((verdict.allowed, verdict.code), (false, Some(500)), "{verdict:?}");
            assert!(
                verdict.message.starts_with("policy pod-eviction cannot read the cluster"),
                "{verdict:?}"
            );
            assert!(verdict.message.contains("'kubernetes/get_resource' host capability"), "{verdict:?}");
        }
        _ => {}
    }
}

/// The policies file both servers read: pod-eviction as deployed, and again without
/// `hostCapabilities` (so every host call is refused).
fn policies_file(dir: &Path) -> PathBuf {
    let module = format!("file://{}", policy_path().display());
    let resources = "[{apiVersion: v1, kind: Pod}, {apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}, {apiVersion: kubevirt.io/v1, kind: KubeVirt}]";
    let text = format!(
        "pod-eviction:\n  module: {module}\n  hostCapabilities: [kubernetes/*]\n  contextAwareResources: {resources}\n\
         pod-eviction-refused:\n  module: {module}\n  contextAwareResources: {resources}\n"
    );
    let path = dir.join("policies.yml");
    std::fs::write(&path, text).unwrap();
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn post_review(url: &str, review: &Value) -> Verdict {
    let request = reqwest::Client::new().post(url).header("content-type", "application/json");
    let response = request.body(review.to_string()).send().await.unwrap();
    let text = response.text().await.unwrap();
    let answer: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: {e}: {text}"));
    assert!(answer["response"].is_object(), "{url}: {text}");
    Verdict::of_response(&answer["response"])
}

fn write_review(dir: &Path, review: &Value) -> PathBuf {
    let path = dir.join("request.json");
    std::fs::write(&path, review.to_string()).unwrap();
    path
}

fn evac_eval(dir: &Path, case: &Case, context: &Path) -> Verdict {
    let request = write_review(dir, &case.review);
    let mut command = Command::new(evac_bin());
    command.args(["eval", "--policy"]).arg(policy_path()).arg("--request").arg(&request);
    command.arg("--context").arg(context);
    if case.policy == "pod-eviction-refused" {
        command.arg("--allowed-host-capabilities");
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "evac eval: {}", String::from_utf8_lossy(&output.stderr));
    Verdict::of_policy_response(&serde_json::from_slice(&output.stdout).unwrap())
}

/// A fresh `evac serve` per case: its effects (the marks) land in its own copy of the context,
/// and no case may see another's.
async fn evac_serve(dir: &Path, case: &Case, policies: &Path, context: &Path) -> Verdict {
    let (policies, context) = (policies.to_str().unwrap(), context.to_str().unwrap());
    let mut args = vec!["serve", "--config", policies, "--context", context, "--insecure-http"];
    args.extend(["--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0"]);
    let log = dir.join("evac-serve.log");
    let (_server, listening) = spawn(&args, &log);
    wait_until_ok(&format!("{}/readiness", listening.url("probes")), "evac serve", &log).await;
    post_review(&format!("{}/validate/{}", listening.url("admission"), case.policy), &case.review).await
}

fn kwctl_run(kubewarden: &Path, dir: &Path, kubeconfig: &Path, case: &Case) -> Verdict {
    let request = write_review(dir, &case.review);
    let mut command = Command::new(kubewarden.join("kwctl"));
    command.env("KUBECONFIG", kubeconfig).env_remove("RUST_BACKTRACE").env("HOME", dir);
    command.args(["run", "--allow-context-aware"]);
    if case.policy == "pod-eviction-refused" {
        // Without a value, an empty allow-list; before another flag, so that it takes no value.
        command.arg("--allowed-host-capabilities");
    }
    command.arg("--request-path").arg(&request).arg(format!("file://{}", policy_path().display()));
    let output = command.stderr(Stdio::piped()).output().unwrap();
    assert!(output.status.success(), "kwctl run: {}", String::from_utf8_lossy(&output.stderr));
    Verdict::of_response(&serde_json::from_slice(&output.stdout).unwrap())
}

async fn start_policy_server(
    kubewarden: &Path,
    dir: &Path,
    kubeconfig: &Path,
    policies: &Path,
) -> (Process, String) {
    let (port, probe) = (free_port(), free_port());
    let log = dir.join("policy-server.log");
    let child = Command::new(kubewarden.join("policy-server"))
        .env("KUBECONFIG", kubeconfig)
        .env_remove("RUST_BACKTRACE")
        .env("HOME", dir)
        .arg("--policies")
        .arg(policies)
        .args([
            "--addr",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--readiness-probe-port",
            &probe.to_string(),
        ])
        .arg("--policies-download-dir")
        .arg(dir.join("downloads"))
        .arg("--sigstore-cache-dir")
        .arg(dir.join("sigstore"))
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(dir.join("policy-server.err")).unwrap())
        .spawn()
        .unwrap();
    let process = Process(child);
    let readiness = format!("http://127.0.0.1:{probe}/readiness");
    wait_until_ok(&readiness, "policy-server", &dir.join("policy-server.err")).await;
    (process, format!("http://127.0.0.1:{port}"))
}

#[tokio::test]
async fn every_case_gets_one_verdict_under_evac_and_kubewarden() {
    let Some(kubewarden) = kubewarden_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::create_dir_all(dir.join("downloads")).unwrap();
    let context = dir.join("context.json");
    std::fs::write(&context, objects().to_string()).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    let (kubeconfig_arg, context_arg) = (kubeconfig.to_str().unwrap(), context.to_str().unwrap());
    let sim_args =
        ["sim", "serve", "--addr", "127.0.0.1:0", "--kubeconfig", kubeconfig_arg, "--objects", context_arg];
    let (_sim, listening) = spawn(&sim_args, &dir.join("sim.log"));
    wait_until_ok(&format!("{}/api", listening.url("api")), "the simulated API", &dir.join("sim.log")).await;
    let policies = policies_file(dir);
    let (_policy_server, policy_server) = start_policy_server(&kubewarden, dir, &kubeconfig, &policies).await;

    let cases = cases();
    assert_eq!(cases.len(), 15);
    let mut disagreements = Vec::new();
    for case in &cases {
        let verdicts = [
            ("evac eval", evac_eval(dir, case, &context)),
            ("evac serve", evac_serve(dir, case, &policies, &context).await),
            ("kwctl run", kwctl_run(&kubewarden, dir, &kubeconfig, case)),
            (
                "policy-server",
                post_review(&format!("{policy_server}/validate/{}", case.policy), &case.review).await,
            ),
        ];
        check_expected(case, &verdicts[0].1);
        for (host, verdict) in &verdicts[1..] {
            if verdict != &verdicts[0].1 {
                disagreements
                    .push(format!("{}: {host} {verdict:?}, evac eval {:?}", case.name, verdicts[0].1));
            }
        }
    }
    assert!(disagreements.is_empty(), "the hosts disagree:\n{}", disagreements.join("\n"));
}

#[test]
fn kwctl_inspects_every_built_module() {
    let Some(kubewarden) = kubewarden_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    for policy in ["pod-eviction", "disruption-cause", "evacuation"] {
        let module = repo_root().join(format!("dist/policies/{policy}.wasm"));
        let output = Command::new(kubewarden.join("kwctl"))
            .env("HOME", home.path())
            .env_remove("RUST_BACKTRACE")
            .args(["inspect", "--output", "yaml"])
            .arg(format!("file://{}", module.display()))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "kwctl inspect {policy}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_yaml::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("kwctl inspect {policy}: {e}: {}", String::from_utf8_lossy(&output.stdout))
        });
        let ours: Value = serde_yaml::from_str(
            &std::fs::read_to_string(repo_root().join(format!("policies/{policy}/metadata.yml"))).unwrap(),
        )
        .unwrap();
        let set = |value: &Value| {
            let mut items: Vec<String> = value.as_array().unwrap().iter().map(Value::to_string).collect();
            items.sort();
            items
        };
        assert_eq!(set(&metadata["contextAwareResources"]), set(&ours["contextAwareResources"]), "{policy}");
        assert_eq!(metadata["rules"], ours["rules"], "{policy}");
        assert_eq!(metadata["mutating"], json!(false), "{policy}");
    }
}
