//! The table of the `pods/eviction` verdict: every row of design documents 001 (first and
//! repeated evictions) and 003 (429 for the descheduler), and KubeVirt's refinements (check order,
//! target pods, hotplug pods, dry runs, requesters, failures to read, settings).

use serde_json::{json, Value};

use super::objects::{
    kubevirt_cr, launcher_name, launcher_pod, plain_pod, vmi, with, without, NODE, NS, OTHER_NODE,
    OWN_STRATEGIES,
};
use super::requests::{eviction_object, eviction_request, eviction_request_with};
use super::{Case, Expected, ReadFailure, TestCluster};
use evac_core::effect::{EvacuationSource, ObjectRef};
use evac_core::eviction;
use evac_core::model::AdmissionRequest;
use evac_core::{Effect, PolicyResponse};

/// The VMI of most rows; its launcher pod is [`launcher_name`]`(VM)`.
const VM: &str = "vm";
/// A hotplug volume pod of VM's launcher pod.
const HOTPLUG: &str = "hp-volume-x7k2p";
const TIMEOUT: &str = "etcdserver: request timed out";
const UNAVAILABLE: &str = "the server is currently unable to handle the request";
const DESCHEDULER: &str = "sigs.k8s.io/descheduler";
/// Kubewarden's policy-server and kwctl refusing a capability the policy's `hostCapabilities`
/// lack (policy-evaluator `runtimes/callback.rs` `host_capability_denied`).
const REFUSED_CAPABILITY: &str =
    "Policy has not been granted access to the 'kubernetes/get_resource' host capability. The violation has been reported.";
/// Either host refusing a resource the policy's `contextAwareResources` lack.
const REFUSED_VMIS: &str = "Policy has not been granted access to Kubernetes kubevirt.io/v1/VirtualMachineInstance resources. The violation has been reported.";

/// Kubewarden's words for a missing object (policy-evaluator
/// `callback_handler/kubernetes/client.rs` `Client::get_resource`), behind its callback prefix.
fn kubewarden_not_found(api_version: &str, kind: &str, name: &str) -> String {
    format!(
        "Callback evaluation failure: Cannot find {api_version}/{kind} named '{name}' inside of namespace 'Some(\"{NS}\")'"
    )
}

/// The eviction decision's answer to a case, natively on `cluster` (build it with
/// [`TestCluster::for_case`]), as the pod-eviction policy answers; `Err` when the decision
/// does not answer (the request is not a `pods/eviction` CREATE).
pub fn eviction_answer(case: &Case, cluster: &TestCluster) -> Result<PolicyResponse, String> {
    let text = case.request.to_string();
    let request: AdmissionRequest<'_> =
        serde_json::from_str(&text).map_err(|e| format!("the case's request does not decode: {e}"))?;
    let settings: eviction::Settings = super::settings(&case.settings)?;
    eviction::decide(&request, &settings, cluster).map(PolicyResponse::from).map_err(|e| e.to_string())
}

// --- Requests --------------------------------------------------------------------------------

/// The eviction of `NS/pod` with a plain Eviction.
fn evict(pod: &str) -> Value {
    eviction_request(NS, pod)
}

/// The eviction of `NS/pod` carrying `eviction`.
fn evict_with(pod: &str, eviction: Value) -> Value {
    eviction_request_with(NS, pod, eviction)
}

// --- Answers ---------------------------------------------------------------------------------

fn mark(vmi: &str, dry_run: bool, source: Option<EvacuationSource>) -> Effect {
    Effect::MarkForEvacuation { vmi: ObjectRef::new(NS, vmi), node: NODE.into(), dry_run, source }
}

/// 429 `Eviction triggered evacuation of VMI "<ns>/<vmi>"`, marking it with `effect`.
fn triggered(vmi: &str, effect: Effect) -> Expected {
    Expected::reject(429, format!("Eviction triggered evacuation of VMI \"{NS}/{vmi}\"")).with_effect(effect)
}

/// A plain eviction's evacuation of `vmi`.
fn evacuated(vmi: &str) -> Expected {
    triggered(vmi, mark(vmi, false, None))
}

fn deny(message: impl Into<String>) -> Expected {
    Expected::reject(429, message)
}

fn in_progress(vmi: &str) -> Expected {
    deny(format!("Evacuation in progress: Eviction triggered evacuation of VMI \"{NS}/{vmi}\""))
}

fn not_migratable(vmi: &str) -> Expected {
    deny(format!("VMI {vmi} is configured with an eviction strategy but is not live-migratable"))
}

fn target_pod() -> Expected {
    deny("Eviction request for target Pod")
}

// --- Objects ---------------------------------------------------------------------------------

/// VM, running on NODE.
fn vm(strategy: Option<&str>, migratable: bool) -> Value {
    vmi(NS, VM, strategy, migratable, NODE)
}

/// VM marked for evacuation from `node`.
fn marked(vmi: Value, node: &str) -> Value {
    with(vmi, "/status/evacuationNodeName", json!(node))
}

/// VM's launcher pod on NODE.
fn launcher() -> Value {
    launcher_pod(NS, VM, NODE)
}

/// The KubeVirt CR `kubevirt/kubevirt`, with this cluster-wide strategy.
fn cr(strategy: Option<&str>) -> Value {
    kubevirt_cr("kubevirt", strategy, &[])
}

/// A hotplug volume pod owned by the pods `owners` (by name).
fn hotplug_pod(owners: &[&str]) -> Value {
    let owners: Vec<Value> = owners
        .iter()
        .map(|owner| json!({"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": format!("uid-{owner}"), "controller": true}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": HOTPLUG, "namespace": NS, "labels": {"kubevirt.io": "hotplug-disk"}, "ownerReferences": owners},
        "spec": {"nodeName": NODE},
        "status": {"phase": "Running"},
    })
}

fn describe(strategy: Option<&str>) -> &str {
    strategy.unwrap_or("unset")
}

/// Every case of the `pods/eviction` verdict.
pub fn eviction_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    strategies(&mut cases);
    marks_of_evacs_own(&mut cases);
    target_pods(&mut cases);
    dry_runs_and_requesters(&mut cases);
    malformed_evictions(&mut cases);
    pods_kubevirt_does_not_act_on(&mut cases);
    unreadable_objects(&mut cases);
    settings(&mut cases);
    hotplug_pods(&mut cases);
    cases
}

/// Design document 001's tables, first evictions and repeated ones (of a marked VMI), for every
/// eviction strategy of the VMI and of the cluster (the VMI's own wins; KubeVirt does not act on
/// VMIs without one, and an unknown strategy acts as `None`), and whether the VMI can migrate.
/// 003: every evacuation answers 429, and a repeated one is not marked again.
fn strategies(cases: &mut Vec<Case>) {
    let clusters: [(&str, Option<Option<&str>>); 6] = [
        ("no KubeVirt CR", None),
        ("cluster-wide unset", Some(None)),
        ("cluster-wide None", Some(Some("None"))),
        ("cluster-wide LiveMigrate", Some(Some("LiveMigrate"))),
        ("cluster-wide LiveMigrateIfPossible", Some(Some("LiveMigrateIfPossible"))),
        ("cluster-wide External", Some(Some("External"))),
    ];
    let own = OWN_STRATEGIES;
    for marked_vmi in [false, true] {
        for (cluster, cluster_wide) in clusters {
            for strategy in own {
                for migratable in [true, false] {
                    let vmi = vm(strategy, migratable);
                    let vmi = if marked_vmi { marked(vmi, NODE) } else { vmi };
                    let mut objects = vec![launcher(), vmi];
                    objects.extend(cluster_wide.map(cr));
                    // A repeated eviction of a VMI that would be marked is not marked again.
                    let evacuation = || if marked_vmi { in_progress(VM) } else { evacuated(VM) };
                    let expected = match strategy.or(cluster_wide.flatten()) {
                        Some("LiveMigrate") if !migratable => not_migratable(VM),
                        Some("LiveMigrate" | "External") => evacuation(),
                        Some("LiveMigrateIfPossible") if migratable => evacuation(),
                        _ => Expected::allow(),
                    };
                    let group = if marked_vmi { "repeated eviction" } else { "first eviction" };
                    let migratable = if migratable { "migratable" } else { "not migratable" };
                    let name = format!("{group}: VMI {}, {cluster}, {migratable}", describe(strategy));
                    cases.push(Case::new(name, objects, evict(&launcher_name(VM)), expected));
                }
            }
        }
    }
    // A mark for another node is an evacuation in progress all the same.
    cases.push(Case::new(
        "repeated eviction: marked for another node",
        vec![launcher(), marked(vm(Some("LiveMigrate"), true), OTHER_NODE), cr(None)],
        evict(&launcher_name(VM)),
        in_progress(VM),
    ));
}

/// A mark of evac's own (preemption, a NoExecute taint, node pressure) ends with its cause; an
/// eviction of the same VM makes it the eviction's, which lasts until the VM has left: the
/// answer is KubeVirt's "in progress", and the mark's source becomes the requester's (none for a
/// plain eviction, `descheduler` for the descheduler's), dry runs as dry runs. A mark that is
/// already an eviction's, or one for another node, is left as it is.
fn marks_of_evacs_own(cases: &mut Vec<Case>) {
    let pod = launcher_name(VM);
    let marked_by = |source: &str, node: &str| {
        let vmi = marked(vm(Some("LiveMigrate"), true), node);
        vec![
            launcher(),
            with(vmi, "/metadata/annotations", json!({"kubevirt.io/eviction-source": source})),
            cr(None),
        ]
    };
    let descheduler =
        || with(eviction_object(NS, &pod), "/metadata/annotations", json!({"requested-by": DESCHEDULER}));
    for source in ["preemption", "noexecute-taint", "node-pressure"] {
        let rows = [
            ("plain eviction", evict(&pod), mark(VM, false, None)),
            ("dry run", with(evict(&pod), "/dryRun", json!(true)), mark(VM, true, None)),
            (
                "the descheduler",
                evict_with(&pod, descheduler()),
                mark(VM, false, Some(EvacuationSource::Descheduler)),
            ),
        ];
        for (row, request, effect) in rows {
            cases.push(Case::new(
                format!("evac's own mark ({source}): {row} claims it"),
                marked_by(source, NODE),
                request,
                in_progress(VM).with_effect(effect),
            ));
        }
        cases.push(Case::new(
            format!("evac's own mark ({source}) for another node: left alone"),
            marked_by(source, OTHER_NODE),
            evict(&pod),
            in_progress(VM),
        ));
    }
    cases.push(Case::new(
        "the descheduler's mark: left alone",
        marked_by("descheduler", NODE),
        evict(&pod),
        in_progress(VM),
    ));
}

/// Evicting a launcher pod that is not on its VMI's node (a migration's target, or a VMI not
/// scheduled yet) is refused without marking; an evacuation in progress is reported first.
fn target_pods(cases: &mut Vec<Case>) {
    let rows = [
        ("LiveMigrate", vm(Some("LiveMigrate"), true), target_pod()),
        ("External, not migratable", vm(Some("External"), false), target_pod()),
        ("strategy None", vm(Some("None"), true), Expected::allow()),
        (
            "LiveMigrateIfPossible, not migratable",
            vm(Some("LiveMigrateIfPossible"), false),
            Expected::allow(),
        ),
        ("already marked", marked(vm(Some("LiveMigrate"), true), NODE), in_progress(VM)),
        ("VMI not scheduled yet", without(vm(Some("LiveMigrate"), true), "/status/nodeName"), target_pod()),
    ];
    for (row, vmi, expected) in rows {
        let objects = vec![launcher_pod(NS, VM, OTHER_NODE), vmi, cr(None)];
        cases.push(Case::new(format!("target pod: {row}"), objects, evict(&launcher_name(VM)), expected));
    }
}

/// A dry run (the request's `dryRun`, or the Eviction's `deleteOptions.dryRun[0] == "All"`)
/// marks as a dry run; the descheduler's `requested-by` annotation is the mark's source.
fn dry_runs_and_requesters(cases: &mut Vec<Case>) {
    let objects = || vec![launcher(), vm(Some("LiveMigrate"), true), cr(None)];
    let pod = launcher_name(VM);
    let delete_options = [
        ("no deleteOptions", None, false),
        ("deleteOptions.dryRun []", Some(json!({"dryRun": []})), false),
        ("deleteOptions.dryRun [All]", Some(json!({"dryRun": ["All"]})), true),
        ("deleteOptions.dryRun [Nothing]", Some(json!({"dryRun": ["Nothing"]})), false),
        ("deleteOptions.dryRun [Nothing, All]", Some(json!({"dryRun": ["Nothing", "All"]})), false),
        ("deleteOptions.dryRun null", Some(json!({"dryRun": null})), false),
        ("deleteOptions without dryRun", Some(json!({"gracePeriodSeconds": 0})), false),
    ];
    for request_dry_run in [false, true] {
        for (row, options, eviction_dry_run) in &delete_options {
            let mut eviction = eviction_object(NS, &pod);
            if let Some(options) = options {
                eviction["deleteOptions"] = options.clone();
            }
            let request = with(evict_with(&pod, eviction), "/dryRun", json!(request_dry_run));
            let dry_run = request_dry_run || *eviction_dry_run;
            let name = format!("dry run: request.dryRun {request_dry_run}, {row}");
            cases.push(Case::new(name, objects(), request, triggered(VM, mark(VM, dry_run, None))));
        }
    }
    let requesters = [
        ("the descheduler", json!({"requested-by": DESCHEDULER}), Some(EvacuationSource::Descheduler)),
        ("another requester", json!({"requested-by": "someone-else"}), None),
        ("no annotations", json!({}), None),
        ("annotations null", Value::Null, None),
    ];
    for (requester, annotations, source) in requesters {
        for (how, request_dry_run, eviction_dry_run) in [
            ("", false, false),
            (", request.dryRun", true, false),
            (", deleteOptions.dryRun [All]", false, true),
        ] {
            let mut eviction = with(eviction_object(NS, &pod), "/metadata/annotations", annotations.clone());
            if eviction_dry_run {
                eviction["deleteOptions"] = json!({"dryRun": ["All"]});
            }
            let request = with(evict_with(&pod, eviction), "/dryRun", json!(request_dry_run));
            let effect = mark(VM, request_dry_run || eviction_dry_run, source);
            cases.push(Case::new(
                format!("requester: {requester}{how}"),
                objects(),
                request,
                triggered(VM, effect),
            ));
        }
    }
}

/// The Eviction is parsed last: a malformed one is refused only where KubeVirt gets that far.
fn malformed_evictions(cases: &mut Vec<Case>) {
    let malformed = |pod: &str| {
        evict_with(pod, json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": "oops"}))
    };
    let launcher_with = |vmi: Value| vec![launcher(), vmi, cr(None)];
    let rows = [
        (
            "a VMI to mark",
            launcher_with(vm(Some("LiveMigrate"), true)),
            launcher_name(VM),
            deny("failed to parse the eviction object: invalid type: string \"oops\", expected struct ObjectMeta"),
        ),
        (
            "a marked VMI",
            launcher_with(marked(vm(Some("LiveMigrate"), true), NODE)),
            launcher_name(VM),
            in_progress(VM),
        ),
        ("strategy None", launcher_with(vm(Some("None"), true)), launcher_name(VM), Expected::allow()),
        (
            "a target pod",
            vec![launcher_pod(NS, VM, OTHER_NODE), vm(Some("LiveMigrate"), true)],
            launcher_name(VM),
            target_pod(),
        ),
        ("a plain pod", vec![plain_pod(NS, "nginx")], "nginx".into(), Expected::allow()),
    ];
    for (row, objects, pod, expected) in rows {
        cases.push(Case::new(format!("malformed Eviction: {row}"), objects, malformed(&pod), expected));
    }
}

/// Pods that are not running launcher pods are left to the API server, and so are pods that
/// cannot be read; a launcher pod not finished yet is one.
fn pods_kubevirt_does_not_act_on(cases: &mut Vec<Case>) {
    let pod_phase = |phase: &str| with(launcher(), "/status/phase", json!(phase));
    let two_owners = hotplug_pod(&[&launcher_name(VM), "other"]);
    // (row, the pod, its name; VM's launcher pod is there too unless the row replaces it)
    let rows: Vec<(&str, Option<Value>, String)> = vec![
        ("a plain pod", Some(plain_pod(NS, "nginx")), "nginx".into()),
        ("a missing pod", None, "ghost".into()),
        ("a launcher pod that Succeeded", Some(pod_phase("Succeeded")), launcher_name(VM)),
        ("a launcher pod that Failed", Some(pod_phase("Failed")), launcher_name(VM)),
        (
            "a launcher pod without kubevirt.io/domain",
            Some(without(launcher(), "/metadata/annotations/kubevirt.io~1domain")),
            launcher_name(VM),
        ),
        (
            "a pod with only the domain annotation",
            Some(without(launcher(), "/metadata/labels/kubevirt.io")),
            launcher_name(VM),
        ),
        (
            "another kubevirt.io pod",
            Some(with(
                plain_pod(NS, "virt-handler-x"),
                "/metadata/labels",
                json!({"kubevirt.io": "virt-handler"}),
            )),
            "virt-handler-x".into(),
        ),
        ("a hotplug pod with two owners", Some(two_owners), HOTPLUG.into()),
        (
            "a pod that does not decode",
            Some(with(launcher(), "/status", json!("Running"))),
            launcher_name(VM),
        ),
    ];
    for (row, pod, name) in rows {
        let mut objects = vec![vm(Some("LiveMigrate"), true), cr(Some("LiveMigrate"))];
        if name != launcher_name(VM) {
            objects.push(launcher());
        }
        objects.extend(pod);
        cases.push(Case::new(
            format!("not a running launcher pod: {row}"),
            objects,
            evict(&name),
            Expected::allow(),
        ));
    }
    let all = || vec![launcher(), vm(Some("LiveMigrate"), true), cr(None)];
    cases.push(Case::new(
        "not a running launcher pod: the launcher pod's name in another namespace",
        all(),
        eviction_request("elsewhere", &launcher_name(VM)),
        Expected::allow(),
    ));
    cases.push(Case::new(
        "not a running launcher pod: an empty cluster",
        vec![],
        evict(&launcher_name(VM)),
        Expected::allow(),
    ));
    cases.push(
        Case::new(
            "not a running launcher pod: the pod cannot be read",
            all(),
            evict(&launcher_name(VM)),
            Expected::allow(),
        )
        .with_failure(ReadFailure::of_kind("Pod", UNAVAILABLE)),
    );
    // KubeVirt's allow on a failed pod read is for the API server's failures: a policy refused
    // the capability would otherwise allow every eviction, and a drain shut every VM down.
    cases.push(
        Case::new(
            "the policy may not read pods: a configuration error, not an allow",
            all(),
            evict(&launcher_name(VM)),
            Expected::reject(500, evac_core::eviction::messages::policy_misconfigured(&REFUSED_CAPABILITY)),
        )
        .with_failure(ReadFailure::of_every_read(REFUSED_CAPABILITY)),
    );
    for phase in ["Pending", "Running", "Unknown"] {
        let objects = vec![pod_phase(phase), vm(Some("LiveMigrate"), true), cr(None)];
        cases.push(Case::new(
            format!("a launcher pod {phase}"),
            objects,
            evict(&launcher_name(VM)),
            evacuated(VM),
        ));
    }
}

/// A launcher pod whose VMI (or, for the cluster-wide strategy, KubeVirt CR) cannot be read is
/// refused with the read's error; a missing VMI is such an error.
fn unreadable_objects(cases: &mut Vec<Case>) {
    let not_found = "kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io \"vm\" not found";
    let rows = [
        ("the VMI is missing", vec![launcher(), cr(Some("LiveMigrate"))], None, deny(not_found)),
        (
            "the VMI is in another namespace",
            vec![launcher(), vmi("elsewhere", VM, Some("LiveMigrate"), true, NODE)],
            None,
            deny(not_found),
        ),
        (
            "the VMI cannot be read",
            vec![launcher(), vm(Some("LiveMigrate"), true), cr(None)],
            Some(ReadFailure::of_kind("VirtualMachineInstance", UNAVAILABLE)),
            deny(format!("kubevirt failed getting the vmi: {UNAVAILABLE}")),
        ),
        (
            "the VMI is missing, in Kubewarden's words",
            vec![launcher(), cr(Some("LiveMigrate"))],
            Some(ReadFailure::of_kind(
                "VirtualMachineInstance",
                &kubewarden_not_found("kubevirt.io/v1", "VirtualMachineInstance", VM),
            )),
            deny(not_found),
        ),
        (
            "the policy may not read VMIs: a configuration error, not a verdict",
            vec![launcher(), vm(Some("LiveMigrate"), true), cr(None)],
            Some(ReadFailure::of_kind("VirtualMachineInstance", REFUSED_VMIS)),
            Expected::reject(500, evac_core::eviction::messages::policy_misconfigured(&REFUSED_VMIS)),
        ),
        (
            "the VMI does not decode",
            vec![launcher(), with(vm(Some("LiveMigrate"), true), "/status", json!("broken"))],
            None,
            deny(
                "kubevirt failed getting the vmi: cannot decode the VirtualMachineInstance: invalid type: \
                 string \"broken\", expected struct VmiStatus",
            ),
        ),
        (
            "the KubeVirt CR cannot be read, the VMI has no strategy",
            vec![launcher(), vm(None, true), cr(Some("LiveMigrate"))],
            Some(ReadFailure::of_kind("KubeVirt", UNAVAILABLE)),
            deny(format!("kubevirt failed getting the cluster-wide eviction strategy: {UNAVAILABLE}")),
        ),
        (
            "the KubeVirt CR cannot be read, the VMI has its own strategy",
            vec![launcher(), vm(Some("LiveMigrate"), true), cr(Some("None"))],
            Some(ReadFailure::of_kind("KubeVirt", UNAVAILABLE)),
            evacuated(VM),
        ),
        (
            "the KubeVirt CR does not decode",
            vec![
                launcher(),
                vm(None, true),
                with(cr(None), "/spec/configuration/evictionStrategy", json!(7)),
            ],
            None,
            deny(
                "kubevirt failed getting the cluster-wide eviction strategy: cannot decode the KubeVirt \
                 list: invalid type: integer `7`, expected a string",
            ),
        ),
    ];
    for (row, objects, failure, expected) in rows {
        let case = Case::new(format!("unreadable: {row}"), objects, evict(&launcher_name(VM)), expected);
        cases.push(failure.into_iter().fold(case, Case::with_failure));
    }
}

/// The settings name the KubeVirt CR of the cluster-wide strategy; without them, the first one
/// listed. A named CR that does not exist means no cluster-wide strategy.
fn settings(cases: &mut Vec<Case>) {
    let named = |namespace: &str, name: &str| json!({"kubevirt": {"namespace": namespace, "name": name}});
    let one = || vec![launcher(), vm(None, true), cr(Some("LiveMigrate"))];
    let two = || {
        vec![
            launcher(),
            vm(None, true),
            kubevirt_cr("a-first", Some("None"), &[]),
            kubevirt_cr("kubevirt", Some("LiveMigrate"), &[]),
        ]
    };
    let rows = [
        ("null: the defaults", one(), Value::Null, evacuated(VM)),
        ("the CR there is, named", one(), named("kubevirt", "kubevirt"), evacuated(VM)),
        ("a CR in another namespace", one(), named("elsewhere", "kubevirt"), Expected::allow()),
        ("of two CRs, the named one", two(), named("kubevirt", "kubevirt"), evacuated(VM)),
        ("of two CRs, the other one", two(), named("kubevirt", "a-first"), Expected::allow()),
        ("of two CRs, one that does not exist", two(), named("kubevirt", "nope"), Expected::allow()),
        ("of two CRs, none named: the first listed", two(), json!({}), Expected::allow()),
    ];
    for (row, objects, settings, expected) in rows {
        cases.push(
            Case::new(format!("settings: {row}"), objects, evict(&launcher_name(VM)), expected)
                .with_settings(settings),
        );
    }
}

/// A hotplug volume pod is protected while its launcher pod's VMI exists, whatever the VMI's
/// strategy; a launcher pod that is gone frees it, one that cannot be read is no answer.
fn hotplug_pods(cases: &mut Vec<Case>) {
    let protected = deny(format!(
        "cannot evict hotplug pod: {HOTPLUG} associated with running vmi: {VM} in namespace {NS}"
    ));
    let owned = || hotplug_pod(&[&launcher_name(VM)]);
    let running = || vm(Some("LiveMigrate"), true);
    let rows = [
        ("the VMI runs", vec![owned(), launcher(), running()], None, protected.clone()),
        ("the VMI runs, strategy None", vec![owned(), launcher(), vm(Some("None"), false)], None, protected),
        ("the VMI is gone", vec![owned(), launcher()], None, Expected::allow()),
        ("the launcher pod is gone", vec![owned(), running()], None, Expected::allow()),
        (
            "the launcher pod has completed",
            vec![owned(), with(launcher(), "/status/phase", json!("Succeeded")), running()],
            None,
            Expected::allow(),
        ),
        (
            "the launcher pod names no VMI",
            vec![owned(), without(launcher(), "/metadata/annotations/kubevirt.io~1domain"), running()],
            None,
            Expected::allow(),
        ),
        (
            "the owner is not a launcher pod",
            vec![hotplug_pod(&["nginx"]), plain_pod(NS, "nginx"), running()],
            None,
            Expected::allow(),
        ),
        (
            "the VMI cannot be read",
            vec![owned(), launcher(), running()],
            Some(ReadFailure::of_kind("VirtualMachineInstance", TIMEOUT)),
            deny(format!("kubevirt failed getting the vmi: {TIMEOUT}")),
        ),
        (
            "the launcher pod cannot be read",
            vec![owned(), launcher(), running()],
            Some(ReadFailure::of_object(&launcher_name(VM), TIMEOUT)),
            deny(format!("failed getting owner for hotplug pod: {TIMEOUT}")),
        ),
        (
            "the launcher pod is gone, in Kubewarden's words",
            vec![owned(), running()],
            Some(ReadFailure::of_object(
                &launcher_name(VM),
                &kubewarden_not_found("v1", "Pod", &launcher_name(VM)),
            )),
            Expected::allow(),
        ),
        (
            "the VMI is gone, in Kubewarden's words",
            vec![owned(), launcher()],
            Some(ReadFailure::of_kind(
                "VirtualMachineInstance",
                &kubewarden_not_found("kubevirt.io/v1", "VirtualMachineInstance", VM),
            )),
            Expected::allow(),
        ),
        (
            "the launcher pod's error has several lines",
            vec![owned(), launcher(), running()],
            Some(ReadFailure::of_object(
                &launcher_name(VM),
                &format!(
                    "{TIMEOUT}\n\nCaused by:\n    0: stack backtrace:\n   1: policy_evaluator::callback"
                ),
            )),
            deny(format!("failed getting owner for hotplug pod: {TIMEOUT}")),
        ),
        (
            "the launcher pod does not decode",
            vec![owned(), with(launcher(), "/status", json!("Running")), running()],
            None,
            deny(
                "failed getting owner for hotplug pod: cannot decode the Pod: invalid type: string \
                 \"Running\", expected struct PodStatus",
            ),
        ),
    ];
    for (row, objects, failure, expected) in rows {
        let case = Case::new(format!("hotplug pod: {row}"), objects, evict(HOTPLUG), expected);
        cases.push(failure.into_iter().fold(case, Case::with_failure));
    }
}
