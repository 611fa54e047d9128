//! The same policies, the same verdicts under Kubewarden's own hosts: every case is evaluated by
//! `evac eval`, `evac serve`, `kwctl run` and `policy-server` (Kubewarden 1.36, from
//! `../shared/kubewarden/` or `$EVAC_KUBEWARDEN_DIR`; the last two read the simulated API through
//! KUBECONFIG, as they would a cluster), and each case must get one verdict: allowed, code and
//! message alike. Where Kubewarden's binaries are absent the tests skip, saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

use evac_e2e::kubewarden_hosts::*;
use evac_e2e::server::cache_dir;
use evac_e2e::*;
use serde_json::{json, Value};

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

fn write_review(dir: &Path, review: &Value) -> PathBuf {
    let path = dir.join("request.json");
    std::fs::write(&path, review.to_string()).unwrap();
    path
}

/// The objects of [`objects`] served by a simulated API server, and the context file they came
/// from (evac's own hosts read it); `dir` also gets the policy server's download directory.
async fn simulated_cluster(dir: &Path) -> (PathBuf, SimulatedApi) {
    std::fs::create_dir_all(dir.join("downloads")).unwrap();
    let context = dir.join("context.json");
    std::fs::write(&context, objects().to_string()).unwrap();
    let api = start_simulated_api(dir, &context).await;
    (context, api)
}

#[tokio::test]
async fn every_case_gets_one_verdict_under_evac_and_kubewarden() {
    let Some(kubewarden) = kubewarden_dir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (context, api) = simulated_cluster(dir).await;
    let policies = policies_file(dir);
    let policy_server = start_policy_server(&kubewarden, dir, &api.kubeconfig, &policies).await;
    let (client, module) = (client(), policy_path());

    let cases = cases();
    assert_eq!(cases.len(), 15);
    let mut disagreements = Vec::new();
    for case in &cases {
        let review = write_review(dir, &case.review);
        let refused = case.policy == "pod-eviction-refused";
        let evaluation = Evaluation { module: &module, review: &review, settings: &json!({}), refused };
        // A fresh `evac serve` per case: its effects (the marks) land in its own copy of the
        // context, and no case may see another's.
        let evac_serve = start_evac_serve(dir, &policies, &context, &cache_dir()).await;
        let (expected, _) = evac_eval(&evaluation, &context, &cache_dir()).unwrap();
        let url = |server: &str| format!("{server}/validate/{}", case.policy);
        let verdicts = [
            ("evac serve", post_review(&client, &url(&evac_serve.url), &case.review).await),
            ("kwctl run", kwctl_run(&kubewarden, dir, &api.kubeconfig, &evaluation)),
            ("policy-server", post_review(&client, &url(&policy_server.url), &case.review).await),
        ];
        check_expected(case, &expected);
        for (host, verdict) in verdicts {
            if verdict.as_ref() != Ok(&expected) {
                disagreements.push(format!("{}: {host} {verdict:?}, evac eval {expected:?}", case.name));
            }
        }
    }
    assert!(disagreements.is_empty(), "the hosts disagree:\n{}", disagreements.join("\n"));
}

#[test]
fn kwctl_inspects_every_built_module() {
    let Some(kubewarden) = kubewarden_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    for policy in ["pod-eviction", "disruption-cause", "evacuation", "launcher-hold"] {
        let module = repo_root().join(format!("dist/policies/{policy}.wasm"));
        let mut command = Command::new(kubewarden.join("kwctl"));
        command.env("HOME", home.path()).env_remove("RUST_BACKTRACE").args(["inspect", "--output", "yaml"]);
        command.arg(format!("file://{}", module.display()));
        let output = command::output_within(&mut command, command::COMMAND_LIMIT).unwrap();
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
        // kwctl leaves an empty list out (launcher-hold reads nothing).
        let set = |value: &Value| {
            let mut items: Vec<String> =
                value.as_array().into_iter().flatten().map(Value::to_string).collect();
            items.sort();
            items
        };
        assert_eq!(set(&metadata["contextAwareResources"]), set(&ours["contextAwareResources"]), "{policy}");
        assert_eq!(metadata["rules"], ours["rules"], "{policy}");
        assert_eq!(metadata["mutating"], json!(policy == "launcher-hold"), "{policy}");
    }
}

/// launcher-hold's policies file: the module allowed to mutate, as `deploy/policies.yaml` has it.
fn launcher_hold_policies(dir: &Path) -> PathBuf {
    let module = format!("file://{}", repo_root().join("dist/policies/launcher-hold.wasm").display());
    let text = format!(
        "launcher-hold:\n  module: {module}\n  allowedToMutate: true\n  settings: {{windowSeconds: 300, port: 9190}}\n"
    );
    let path = dir.join("launcher-hold-policies.yml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The object an AdmissionResponse's JSON patch (`patch`, base64) makes of `object`; `object`
/// itself when the response has none.
fn patched(object: &Value, response: &Value) -> Result<Value, String> {
    use base64::Engine as _;
    let Some(encoded) = response["patch"].as_str() else { return Ok(object.clone()) };
    if response["patchType"] != "JSONPatch" {
        return Err(format!("patchType {} is not JSONPatch", response["patchType"]));
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).map_err(|e| e.to_string())?;
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let mut result = object.clone();
    json_patch::patch(&mut result, &patch).map_err(|e| e.to_string())?;
    Ok(result)
}

/// launcher-hold's mutation, alike under every host: the pod each one's answer makes (evac eval's
/// `mutatedObject`; the others' JSON patch applied to the request's pod) is the same, a launcher
/// pod with the hook and the longer grace, any other pod unchanged.
#[tokio::test]
async fn launcher_hold_mutates_alike_under_evac_and_kubewarden() {
    let Some(kubewarden) = kubewarden_dir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (context, api) = simulated_cluster(dir).await;
    let policies = launcher_hold_policies(dir);
    let policy_server = start_policy_server(&kubewarden, dir, &api.kubeconfig, &policies).await;
    let evac_serve = start_evac_serve(dir, &policies, &context, &cache_dir()).await;
    let client = client();
    let module = repo_root().join("dist/policies/launcher-hold.wasm");
    let settings = json!({"windowSeconds": 300, "port": 9190});

    let mut disagreements = Vec::new();
    for example in ["launcher-pod-create.json", "other-pod-create.json"] {
        let path = repo_root().join("examples/hold").join(example);
        let review: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let object = &review["request"]["object"];
        let evaluation = Evaluation { module: &module, review: &path, settings: &settings, refused: false };
        let (verdict, response) = evac_eval(&evaluation, &context, &cache_dir()).unwrap();
        assert!(verdict.allowed, "{example}: {response}");
        let expected = match &response["mutatedObject"] {
            Value::Null => object.clone(),
            mutated => mutated.clone(),
        };
        let launcher = example.starts_with("launcher");
        assert_eq!(expected != *object, launcher, "{example}: only a launcher pod is changed");
        let url = format!("{}/validate/launcher-hold", evac_serve.url);
        let answers = [
            ("evac serve", post_review_response(&client, &url, &review).await),
            ("kwctl run", kwctl_run_response(&kubewarden, dir, &api.kubeconfig, &evaluation)),
            (
                "policy-server",
                post_review_response(
                    &client,
                    &format!("{}/validate/launcher-hold", policy_server.url),
                    &review,
                )
                .await,
            ),
        ];
        for (host, answer) in answers {
            let pod = answer.and_then(|response| {
                if response["allowed"] != true {
                    return Err(format!("not allowed: {response}"));
                }
                patched(object, &response)
            });
            if pod.as_ref() != Ok(&expected) {
                disagreements.push(format!("{example}: {host} made {pod:?}, evac eval {expected}"));
            }
        }
    }
    assert!(disagreements.is_empty(), "the hosts disagree:\n{}", disagreements.join("\n"));
}

/// `deploy/kubewarden/`'s ClusterAdmissionPolicies as Kubewarden's own `kwctl scaffold manifest`
/// writes them from each built module: the same rules, mutating flag and context-aware resources.
#[test]
fn kwctl_scaffolds_the_cluster_admission_policies_deploy_ships() {
    let Some(kubewarden) = kubewarden_dir() else { return };
    let home = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo_root().join("deploy/kubewarden/policies.yaml")).unwrap();
    let shipped: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|doc| <Value as serde::Deserialize>::deserialize(doc).unwrap())
        .filter(|object| object["kind"] == "ClusterAdmissionPolicy")
        .collect();
    let sorted = |value: &Value| {
        let mut items: Vec<String> = value.as_array().into_iter().flatten().map(Value::to_string).collect();
        items.sort();
        items
    };
    for policy in ["pod-eviction", "disruption-cause", "evacuation", "launcher-hold"] {
        let module = repo_root().join(format!("dist/policies/{policy}.wasm"));
        let mut command = Command::new(kubewarden.join("kwctl"));
        command.env("HOME", home.path()).env_remove("RUST_BACKTRACE");
        command.args(["scaffold", "manifest", "--type", "ClusterAdmissionPolicy", "--allow-context-aware"]);
        command.arg(format!("file://{}", module.display()));
        let output = command::output_within(&mut command, command::COMMAND_LIMIT).unwrap();
        assert!(
            output.status.success(),
            "kwctl scaffold {policy}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let scaffolded: Value = serde_yaml::from_slice(&output.stdout).unwrap();
        let ours = shipped
            .iter()
            .find(|o| o["metadata"]["name"] == format!("evac-{policy}"))
            .unwrap_or_else(|| panic!("deploy/kubewarden/policies.yaml has no evac-{policy}"));
        let (theirs, ours) = (&scaffolded["spec"], &ours["spec"]);
        assert_eq!(sorted(&theirs["rules"]), sorted(&ours["rules"]), "{policy}: rules");
        assert_eq!(theirs["mutating"], ours["mutating"], "{policy}: mutating");
        assert_eq!(theirs["backgroundAudit"], ours["backgroundAudit"], "{policy}: backgroundAudit");
        assert_eq!(
            sorted(&theirs["contextAwareResources"]),
            sorted(&ours["contextAwareResources"]),
            "{policy}: contextAwareResources"
        );
    }
}
