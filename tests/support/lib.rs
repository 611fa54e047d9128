//! Shared helpers of evac's end-to-end tests: where the built artifacts are, loading the
//! pod-eviction module into the in-process host, and building AdmissionRequests and the cluster
//! objects (pods, VMIs, the KubeVirt CR) a decision reads.
//!
//! The tests run the BUILT module (`dist/policies/pod-eviction.wasm`, made by `make build`); a
//! missing module or binary is a test failure that says how to build it, never a skip. Only
//! Kubewarden's own binaries, which the project does not build, may be absent: the tests that
//! need them skip, printing why.

pub mod command;
pub mod control;
pub mod kubewarden_hosts;
pub mod report;
pub mod scenarios;
pub mod server;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use evac_cluster::MemoryStore;
use evac_core::effect::EvacuationSource;
use evac_core::{Effect, ObjectRef, PolicyId, PolicyResponse};
use evac_runtime::capabilities::{CapabilityError, HostCapabilities, KubernetesCapabilities, ResourceGrant};
use evac_runtime::kubewarden;
use evac_runtime::wapc::{EngineOptions, EvalError, Policy, PolicyEngine, PolicyModule};
pub use evac_testkit::objects::{launcher_name, launcher_pod, vmi};
pub use evac_testkit::requests::{eviction_object, eviction_request, eviction_request_with};
use evac_testkit::{Case, ReadFailure};
use serde_json::value::RawValue;
use serde_json::{json, Value};

/// The namespace of the tests' objects.
pub const NS: &str = "default";
/// The node the tests' VMs run on.
pub const NODE: &str = "node01";
/// Another node, where a migration goes.
pub const OTHER_NODE: &str = "node02";

// --- Paths -----------------------------------------------------------------------------------

/// The repository root (this crate lives in `<root>/tests`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// A fixture under `tests/test_data/`.
pub fn test_data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data").join(relative)
}

/// The text of a fixture under `tests/test_data/`.
pub fn test_data_text(relative: &str) -> String {
    let path = test_data(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read fixture {}: {e}", path.display()))
}

/// A file of `examples/evictions/` (read-only).
pub fn example(relative: &str) -> PathBuf {
    repo_root().join("examples/evictions").join(relative)
}

/// The built module of `policy` (`dist/policies/<id>.wasm`). Fails (does not skip) when it has
/// not been built.
pub fn built_policy(policy: PolicyId) -> PathBuf {
    let path = repo_root().join(format!("dist/policies/{policy}.wasm"));
    assert!(path.is_file(), "the built policy module {} is missing: run `make build` first", path.display());
    path
}

/// The built pod-eviction module.
pub fn policy_path() -> PathBuf {
    built_policy(PolicyId::PodEviction)
}

/// The bytes of the built pod-eviction module.
pub fn policy_bytes() -> Vec<u8> {
    let path = policy_path();
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The `evac` binary built by `make build` (`EVAC_BIN` overrides). Fails when it is missing.
pub fn evac_bin() -> PathBuf {
    let path = std::env::var_os("EVAC_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/release/evac"));
    assert!(path.is_file(), "the evac binary {} is missing: run `make build` first", path.display());
    path
}

// --- Host ------------------------------------------------------------------------------------

/// The built module of `policy`, compiled once per test binary by one engine (compiling is the
/// slow part). Every test binds it to its own capabilities.
pub fn built_module(policy: PolicyId) -> PolicyModule {
    static ENGINE: OnceLock<PolicyEngine> = OnceLock::new();
    static MODULES: OnceLock<[OnceLock<PolicyModule>; 4]> = OnceLock::new();
    let index = PolicyId::ALL.iter().position(|p| *p == policy).expect("every policy is in PolicyId::ALL");
    MODULES.get_or_init(Default::default)[index]
        .get_or_init(|| {
            let engine = ENGINE.get_or_init(|| PolicyEngine::new(EngineOptions::default()).expect("engine"));
            engine
                .load(&built_policy(policy))
                .unwrap_or_else(|e| panic!("cannot load the built module: {e:#}"))
        })
        .clone()
}

/// The built pod-eviction module (see [`built_module`]); [`policy_with`] binds it.
pub fn shared_module() -> PolicyModule {
    built_module(PolicyId::PodEviction)
}

/// The pod-eviction policy reading from `context`, with every resource readable.
pub fn policy_for(context: MemoryStore) -> Policy {
    policy_with(KubernetesCapabilities::new(Arc::new(context)))
}

/// The pod-eviction policy with the given capabilities.
pub fn policy_with(capabilities: impl HostCapabilities + 'static) -> Policy {
    Policy::new(shared_module(), Arc::new(capabilities))
}

/// The grants of the module's metadata (`contextAwareResources`), as `kwctl run` applies them.
pub fn metadata_grants() -> Vec<ResourceGrant> {
    vec![
        grant("v1", "Pod"),
        grant("kubevirt.io/v1", "VirtualMachineInstance"),
        grant("kubevirt.io/v1", "KubeVirt"),
    ]
}

/// A `contextAwareResources` grant of a kind.
pub fn grant(api_version: &str, kind: &str) -> ResourceGrant {
    ResourceGrant { api_version: api_version.into(), kind: kind.into() }
}

/// A cluster of these objects.
pub fn cluster(objects: impl IntoIterator<Item = Value>) -> MemoryStore {
    MemoryStore::from_objects(objects).expect("valid context objects")
}

/// `examples/evictions/context.yaml`.
pub fn example_cluster() -> MemoryStore {
    MemoryStore::from_file(&example("context.yaml")).expect("examples/evictions/context.yaml")
}

/// A JSON value as raw JSON.
pub fn raw(value: &Value) -> Box<RawValue> {
    RawValue::from_string(value.to_string()).expect("JSON")
}

/// `validate` with empty settings.
pub fn validate(policy: &Policy, request: &Value) -> Result<PolicyResponse, EvalError> {
    validate_with_settings(policy, request, &json!({}))
}

/// A `validate` payload with these settings.
pub fn validate_with_settings(
    policy: &Policy,
    request: &Value,
    settings: &Value,
) -> Result<PolicyResponse, EvalError> {
    kubewarden::validate(policy, &raw(request), &raw(settings))
}

/// Host capabilities that answer from `inner`, except for the reads `failures` name (as
/// [`TestCluster`](evac_testkit::TestCluster) fails them), which fail with the failure's
/// message, as an unreachable or failing API server would.
pub struct FailingReads {
    /// The capabilities answering the calls that do not fail.
    pub inner: KubernetesCapabilities,
    /// The reads that fail, and how.
    pub failures: Vec<ReadFailure>,
}

impl HostCapabilities for FailingReads {
    fn call(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, CapabilityError> {
        let request: Value = serde_json::from_slice(payload).unwrap_or_default();
        let kind = request["kind"].as_str().unwrap_or_default();
        // A get names its object; a list does not.
        let name = (operation == "get_resource").then(|| request["name"].as_str().unwrap_or_default());
        if let Some(failure) = self.failures.iter().find(|f| f.matches(kind, name)) {
            return Err(CapabilityError::Read(evac_core::ReadError::other(failure.message.clone())));
        }
        self.inner.call(binding, namespace, operation, payload)
    }
}

/// A table case's answer from a built module, as Kubewarden runs it: the case's objects in the
/// host's store (`MemoryStore`), read through Kubernetes capabilities limited to `grants`, the
/// case's read failures failing, and `validate` called with the case's request and settings.
pub fn validate_case(
    module: &PolicyModule,
    grants: &[ResourceGrant],
    case: &Case,
) -> Result<PolicyResponse, String> {
    let store = MemoryStore::from_objects(case.objects.iter().cloned()).map_err(|e| format!("{e:#}"))?;
    let inner = KubernetesCapabilities::new(Arc::new(store)).granting(grants.iter().cloned());
    let policy =
        Policy::new(module.clone(), Arc::new(FailingReads { inner, failures: case.failures.clone() }));
    kubewarden::validate(&policy, &raw(&case.request), &raw(&case.settings)).map_err(|e| e.to_string())
}

// --- Requests --------------------------------------------------------------------------------

/// The Eviction the descheduler posts: annotated `requested-by: sigs.k8s.io/descheduler`.
pub fn descheduler_eviction(namespace: &str, pod: &str) -> Value {
    let mut eviction = eviction_object(namespace, pod);
    eviction["metadata"]["annotations"] = json!({"requested-by": "sigs.k8s.io/descheduler"});
    eviction
}

/// An Eviction with `deleteOptions.dryRun: ["All"]`.
pub fn dry_run_eviction(namespace: &str, pod: &str) -> Value {
    let mut eviction = eviction_object(namespace, pod);
    eviction["deleteOptions"] = json!({"dryRun": ["All"]});
    eviction
}

/// The request wrapped in an `admission.k8s.io/v1` AdmissionReview.
pub fn admission_review(request: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

// --- Cluster objects -------------------------------------------------------------------------

/// The KubeVirt CR (`kubevirt/kubevirt`) with the cluster-wide strategy, when given.
pub fn kubevirt_cr(strategy: Option<&str>) -> Value {
    kubevirt_cr_named("kubevirt", "kubevirt", strategy)
}

/// A KubeVirt CR of this name, with this cluster-wide eviction strategy.
pub fn kubevirt_cr_named(namespace: &str, name: &str, strategy: Option<&str>) -> Value {
    let mut cr = json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"configuration": {"developerConfiguration": {"featureGates": []}}},
        "status": {"phase": "Deployed"},
    });
    if let Some(strategy) = strategy {
        cr["spec"]["configuration"]["evictionStrategy"] = json!(strategy);
    }
    cr
}

/// A hotplug volume pod owned by the launcher pod `owner`.
pub fn hotplug_pod(namespace: &str, name: &str, owner: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kubevirt.io": "hotplug-disk"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": format!("uid-{owner}"), "controller": true}],
        },
        "spec": {"nodeName": NODE},
        "status": {"phase": "Running"},
    })
}

/// A pod that is not KubeVirt's.
pub fn plain_pod(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "nginx"}},
        "spec": {"nodeName": NODE, "containers": [{"name": "nginx", "image": "nginx"}]},
        "status": {"phase": "Running"},
    })
}

/// A JSON pointer's reference token, unescaped (`~1` is `/`, `~0` is `~`).
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// `value` with the field at JSON pointer `pointer` set to `new` (objects on the way are created).
pub fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let mut target = &mut value;
    for token in pointer.split('/').skip(1).map(unescape) {
        if !target.is_object() {
            *target = json!({});
        }
        target = target.as_object_mut().expect("object").entry(token).or_insert(Value::Null);
    }
    *target = new;
    value
}

/// `value` without the field at `pointer`.
pub fn without(mut value: Value, pointer: &str) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a JSON pointer");
    let removed = match value.pointer_mut(parent) {
        Some(Value::Object(object)) => object.remove(&unescape(key)),
        _ => None,
    };
    assert!(removed.is_some(), "{pointer} is not in the value");
    value
}

// --- Expected answers ------------------------------------------------------------------------

/// What a `validate` should answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// Allowed, with no effect.
    Allow,
    /// A 429 with exactly this message and no effects.
    Deny(String),
    /// `Eviction triggered evacuation of VMI "<ns>/<vmi>"` (429) with exactly this one effect.
    Triggered(Effect),
}

/// The MarkForEvacuation effect of evicting `vmi`'s launcher pod from `node`.
pub fn mark(namespace: &str, vmi: &str, node: &str) -> Effect {
    Effect::MarkForEvacuation {
        vmi: ObjectRef::new(namespace, vmi),
        node: node.into(),
        dry_run: false,
        source: None,
    }
}

/// The mark of a dry-run eviction.
pub fn mark_dry_run(namespace: &str, vmi: &str, node: &str) -> Effect {
    Effect::MarkForEvacuation {
        vmi: ObjectRef::new(namespace, vmi),
        node: node.into(),
        dry_run: true,
        source: None,
    }
}

/// The mark of an eviction the descheduler asked for.
pub fn mark_by_descheduler(namespace: &str, vmi: &str, node: &str, dry_run: bool) -> Effect {
    Effect::MarkForEvacuation {
        vmi: ObjectRef::new(namespace, vmi),
        node: node.into(),
        dry_run,
        source: Some(EvacuationSource::Descheduler),
    }
}

/// Checks a response against what was expected; `case` names the case in failures.
pub fn check(case: &str, response: &PolicyResponse, expected: &Expect) {
    match expected {
        Expect::Allow => {
            assert!(response.accepted, "{case}: expected allowed, got {response:?}");
            assert_eq!(response.message, None, "{case}: message of an allowed eviction");
            assert_eq!(response.code, None, "{case}: code of an allowed eviction");
            assert!(
                response.effects.is_empty(),
                "{case}: effects of an allowed eviction: {:?}",
                response.effects
            );
        }
        Expect::Deny(message) => {
            assert!(!response.accepted, "{case}: expected denied, got {response:?}");
            assert_eq!(response.code, Some(429), "{case}: code");
            assert_eq!(response.message.as_deref(), Some(message.as_str()), "{case}: message");
            assert!(response.effects.is_empty(), "{case}: unexpected effects: {:?}", response.effects);
        }
        Expect::Triggered(effect) => {
            let Effect::MarkForEvacuation { vmi, .. } = effect else {
                panic!("{case}: a triggered evacuation marks the VMI, not {effect:?}");
            };
            let message = format!("Eviction triggered evacuation of VMI \"{}/{}\"", vmi.namespace, vmi.name);
            assert!(!response.accepted, "{case}: expected denied, got {response:?}");
            assert_eq!(response.code, Some(429), "{case}: code");
            assert_eq!(response.message.as_deref(), Some(message.as_str()), "{case}: message");
            assert_eq!(response.effects, vec![effect.clone()], "{case}: effects");
        }
    }
    assert_eq!(response.mutated_object, None, "{case}: a validating policy mutated");
}

/// `Eviction triggered evacuation of VMI "<ns>/<vmi>"`.
pub fn triggered_message(namespace: &str, vmi: &str) -> String {
    format!("Eviction triggered evacuation of VMI \"{namespace}/{vmi}\"")
}

/// `Evacuation in progress: Eviction triggered evacuation of VMI "<ns>/<vmi>"`.
pub fn in_progress_message(namespace: &str, vmi: &str) -> String {
    format!("Evacuation in progress: {}", triggered_message(namespace, vmi))
}

/// `VMI <name> is configured with an eviction strategy but is not live-migratable`.
pub fn not_migratable_message(vmi: &str) -> String {
    format!("VMI {vmi} is configured with an eviction strategy but is not live-migratable")
}

/// KubeVirt's words for the eviction of a migration's target pod.
pub const TARGET_POD_MESSAGE: &str = "Eviction request for target Pod";

// --- waPC test guests ------------------------------------------------------------------------

/// An engine with these limits for the hand-written test guests.
pub fn engine(options: EngineOptions) -> PolicyEngine {
    PolicyEngine::new(options).expect("engine")
}

/// A WAT fixture of `tests/test_data/wat/`, assembled into a `.wasm` binary.
///
/// The fixtures are assembled here rather than handed to the engine as text, because
/// `PolicyEngine::compile` does not accept WAT text (see `wapc_host::compile_accepts_wat_text`).
pub fn wat_fixture(name: &str) -> Vec<u8> {
    let text = test_data_text(&format!("wat/{name}"));
    wat::parse_str(&text).unwrap_or_else(|e| panic!("{name} is not valid WAT: {e}"))
}

/// Compiles a WAT fixture of `tests/test_data/wat/`.
pub fn compile_wat(engine: &PolicyEngine, name: &str) -> PolicyModule {
    engine.compile(&wat_fixture(name)).unwrap_or_else(|e| panic!("cannot compile {name}: {e:#}"))
}

/// A policy of a test guest: its host capabilities answer from an empty cluster.
pub fn guest_policy(module: PolicyModule) -> Policy {
    Policy::new(module, Arc::new(KubernetesCapabilities::new(Arc::new(MemoryStore::empty()))))
}

/// The effect types a policy's metadata declares (`io.evac.effects`), which its host must be
/// allowed to carry out.
pub fn declared_effects(policy: &str) -> Vec<String> {
    let path = repo_root().join(format!("policies/{policy}/metadata.yml"));
    let metadata: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let declared = metadata["annotations"]["io.evac.effects"].as_str().expect("io.evac.effects");
    declared.split(',').map(|effect| effect.trim().to_owned()).filter(|effect| !effect.is_empty()).collect()
}

// --- Report pages ------------------------------------------------------------------------------

/// The number in a report page's `data-fate="<fate>"` element of the run labelled `run` (its
/// `data-run`): what `evac simulate --html`, `evac demo` and the playground draw.
pub fn fate_in_page(page: &str, run: &str, fate: &str) -> u64 {
    let start =
        page.find(&format!("data-run=\"{run}\"")).unwrap_or_else(|| panic!("no run {run:?} in the page"));
    let marker = format!("data-fate=\"{fate}\"");
    let at = start + page[start..].find(&marker).unwrap_or_else(|| panic!("no fate {fate} for {run}"));
    let text = &page[at + marker.len()..];
    let text = &text[text.find('>').unwrap() + 1..];
    text[..text.find('<').unwrap()].trim().parse().unwrap()
}
