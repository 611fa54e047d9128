//! Table-driven tests of the eviction verdict: every row of the tables in design documents 001
//! (first and repeated evictions) and 003 (429 for the descheduler), and KubeVirt's refinements
//! (check order, target pods, hotplug pods, dry-run, failures to read).

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::cluster::{GetResource, ListResourcesAll, ReadError};
use crate::model::AdmissionRequest;
use crate::Verdict;

const NS: &str = "default";
const NODE: &str = "node01";
const VMI: &str = "vm-cirros";
const POD: &str = "virt-launcher-vm-cirros-wn5v4";

/// An in-memory cluster that records what was read.
#[derive(Default)]
struct FakeCluster {
    objects: BTreeMap<(String, String, String), Value>,
    failing_kinds: BTreeMap<String, String>,
    /// Objects whose read fails, by name, whatever their kind.
    failing_names: BTreeMap<String, String>,
    reads: RefCell<Vec<String>>,
}

impl FakeCluster {
    fn with(mut self, object: Value) -> Self {
        let kind = object["kind"].as_str().unwrap().to_owned();
        let ns = object["metadata"]["namespace"].as_str().unwrap_or("").to_owned();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        self.objects.insert((kind, ns, name), object);
        self
    }

    fn failing(mut self, kind: &str, message: &str) -> Self {
        self.failing_kinds.insert(kind.into(), message.into());
        self
    }

    fn failing_object(mut self, name: &str, message: &str) -> Self {
        self.failing_names.insert(name.into(), message.into());
        self
    }

    fn read_kinds(&self) -> Vec<String> {
        self.reads.borrow().clone()
    }
}

impl ClusterReader for FakeCluster {
    fn get_resource(&self, r: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        self.reads.borrow_mut().push(r.kind.to_string());
        if let Some(message) =
            self.failing_kinds.get(r.kind.as_str()).or_else(|| self.failing_names.get(r.name.as_str()))
        {
            return Err(ReadError::other(message.clone()));
        }
        let key = (
            r.kind.to_string(),
            r.namespace.as_ref().map(|n| n.to_string()).unwrap_or_default(),
            r.name.to_string(),
        );
        self.objects
            .get(&key)
            .map(|o| serde_json::to_vec(o).unwrap())
            .ok_or_else(|| ReadError::not_found(&r.api_version, &r.kind, &r.name))
    }

    fn list_resources_all(&self, r: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        self.reads.borrow_mut().push(format!("list {}", r.kind));
        if let Some(message) = self.failing_kinds.get(r.kind.as_str()) {
            return Err(ReadError::other(message.clone()));
        }
        let items: Vec<&Value> =
            self.objects.iter().filter(|(k, _)| k.0 == r.kind.as_str()).map(|(_, v)| v).collect();
        Ok(serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap())
    }
}

fn launcher_pod(node: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": POD, "namespace": NS,
            "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": VMI},
            "annotations": {"kubevirt.io/domain": VMI},
        },
        "spec": {"nodeName": node, "containers": [{"name": "compute"}]},
        "status": {"phase": "Running"}
    })
}

struct Vmi {
    strategy: Option<&'static str>,
    migratable: bool,
    marked: bool,
    node: &'static str,
}

impl Vmi {
    fn new(strategy: Option<&'static str>, migratable: bool) -> Self {
        Self { strategy, migratable, marked: false, node: NODE }
    }

    fn marked(mut self) -> Self {
        self.marked = true;
        self
    }

    fn on(mut self, node: &'static str) -> Self {
        self.node = node;
        self
    }

    fn json(&self) -> Value {
        let mut vmi = json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": VMI, "namespace": NS},
            "spec": {"domain": {"devices": {}}},
            "status": {"nodeName": self.node, "phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "LiveMigratable", "status": if self.migratable { "True" } else { "False" }},
            ]}
        });
        if let Some(strategy) = self.strategy {
            vmi["spec"]["evictionStrategy"] = json!(strategy);
        }
        if self.marked {
            vmi["status"]["evacuationNodeName"] = json!(self.node);
        }
        vmi
    }
}

fn kubevirt_cr(strategy: Option<&str>) -> Value {
    let mut cr = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {"configuration": {"developerConfiguration": {"featureGates": []}}}
    });
    if let Some(strategy) = strategy {
        cr["spec"]["configuration"]["evictionStrategy"] = json!(strategy);
    }
    cr
}

/// The text of an AdmissionRequest; [`parse`] it to decide it.
fn eviction_request(pod: &str, eviction: Value) -> String {
    serde_json::to_string(&json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "name": pod, "namespace": NS, "operation": "CREATE",
        "object": eviction,
        "dryRun": false
    }))
    .unwrap()
}

fn parse(text: &str) -> AdmissionRequest<'_> {
    serde_json::from_str(text).unwrap()
}

fn eviction(annotations: Value, dry_run: Value) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": POD, "namespace": NS, "annotations": annotations},
        "deleteOptions": {"dryRun": dry_run}
    })
}

fn plain_eviction() -> Value {
    eviction(json!({}), json!([]))
}

fn cluster(vmi: &Vmi, cluster_strategy: Option<&str>) -> FakeCluster {
    FakeCluster::default().with(launcher_pod(NODE)).with(vmi.json()).with(kubevirt_cr(cluster_strategy))
}

fn run(cluster: &FakeCluster, request: &AdmissionRequest) -> Decision {
    decide(request, &Settings::default(), cluster).expect("a pods/eviction CREATE")
}

fn mark(dry_run: bool, source: Option<EvacuationSource>) -> Effect {
    Effect::MarkForEvacuation { vmi: ObjectRef::new(NS, VMI), node: NODE.into(), dry_run, source }
}

fn triggered() -> String {
    format!("Eviction triggered evacuation of VMI \"{NS}/{VMI}\"")
}

fn in_progress() -> String {
    format!("Evacuation in progress: Eviction triggered evacuation of VMI \"{NS}/{VMI}\"")
}

fn not_migratable() -> String {
    format!("VMI {VMI} is configured with an eviction strategy but is not live-migratable")
}

/// What a row expects.
#[derive(Debug, Clone, PartialEq)]
enum Expect {
    Allow,
    /// 429 with this message, and a mark effect.
    Evacuate(String),
    /// 429 with this message, and no effect.
    Deny(String),
}

fn check(row: &str, decision: &Decision, expect: &Expect, effect: Option<Effect>) {
    let got = match (&decision.verdict, decision.effects.as_slice()) {
        (Verdict::Allow, []) => Expect::Allow,
        (Verdict::Deny { code: 429, message }, []) => Expect::Deny(message.clone()),
        (Verdict::Deny { code: 429, message }, [e]) => {
            assert_eq!(Some(e.clone()), effect, "{row}: effect");
            Expect::Evacuate(message.clone())
        }
        other => panic!("{row}: unexpected decision {other:?}"),
    };
    assert_eq!(&got, expect, "{row}");
}

/// Design document 001, "Pod Eviction Webhook", first table; with 003's change that every
/// evacuation-triggering eviction answers 429 "Eviction triggered evacuation".
#[test]
fn first_eviction_per_strategy_and_migratability() {
    let rows: &[(Option<&str>, bool, Expect)] = &[
        (Some("None"), true, Expect::Allow),
        (Some("None"), false, Expect::Allow),
        (Some("LiveMigrate"), true, Expect::Evacuate(triggered())),
        (Some("LiveMigrate"), false, Expect::Deny(not_migratable())),
        (Some("LiveMigrateIfPossible"), true, Expect::Evacuate(triggered())),
        (Some("LiveMigrateIfPossible"), false, Expect::Allow),
        (Some("External"), true, Expect::Evacuate(triggered())),
        (Some("External"), false, Expect::Evacuate(triggered())),
        // No strategy anywhere: KubeVirt does not act.
        (None, true, Expect::Allow),
        (None, false, Expect::Allow),
        // A strategy KubeVirt does not know acts like None.
        (Some("Sideways"), true, Expect::Allow),
    ];
    for (strategy, migratable, expect) in rows {
        let vmi = Vmi::new(*strategy, *migratable);
        let cluster = cluster(&vmi, None);
        let decision = run(&cluster, &parse(&eviction_request(POD, plain_eviction())));
        let row = format!("strategy {strategy:?}, migratable {migratable}");
        check(&row, &decision, expect, Some(mark(false, None)));
    }
}

/// 001's second table (evictions of a pod whose VMI is already marked), answered as KubeVirt does
/// since the descheduler support: 429 "Evacuation in progress", without marking again.
#[test]
fn repeated_eviction_of_a_marked_vmi() {
    let rows: &[(&str, bool, Expect)] = &[
        ("LiveMigrate", true, Expect::Deny(in_progress())),
        ("LiveMigrateIfPossible", true, Expect::Deny(in_progress())),
        ("External", true, Expect::Deny(in_progress())),
        ("External", false, Expect::Deny(in_progress())),
        // The strategy check comes first.
        ("LiveMigrate", false, Expect::Deny(not_migratable())),
        ("LiveMigrateIfPossible", false, Expect::Allow),
        ("None", true, Expect::Allow),
    ];
    for (strategy, migratable, expect) in rows {
        let vmi = Vmi::new(Some(*strategy), *migratable).marked();
        let cluster = cluster(&vmi, None);
        let decision = run(&cluster, &parse(&eviction_request(POD, plain_eviction())));
        check(&format!("marked {strategy}, migratable {migratable}"), &decision, expect, None);
    }
}

/// The VMI's own strategy wins; without one, the KubeVirt CR's cluster-wide strategy applies.
#[test]
fn cluster_wide_strategy_is_the_fallback() {
    let rows: &[(Option<&str>, Option<&str>, bool, Expect)] = &[
        (None, Some("LiveMigrate"), true, Expect::Evacuate(triggered())),
        (None, Some("LiveMigrate"), false, Expect::Deny(not_migratable())),
        (None, Some("LiveMigrateIfPossible"), true, Expect::Evacuate(triggered())),
        (None, Some("LiveMigrateIfPossible"), false, Expect::Allow),
        (None, Some("External"), false, Expect::Evacuate(triggered())),
        (None, Some("None"), true, Expect::Allow),
        (Some("None"), Some("LiveMigrate"), true, Expect::Allow),
        (Some("LiveMigrate"), Some("None"), true, Expect::Evacuate(triggered())),
        (Some("External"), Some("LiveMigrateIfPossible"), false, Expect::Evacuate(triggered())),
    ];
    for (vmi_strategy, cluster_strategy, migratable, expect) in rows {
        let vmi = Vmi::new(*vmi_strategy, *migratable);
        let cluster = cluster(&vmi, *cluster_strategy);
        let decision = run(&cluster, &parse(&eviction_request(POD, plain_eviction())));
        let row = format!("vmi {vmi_strategy:?}, cluster {cluster_strategy:?}, migratable {migratable}");
        check(&row, &decision, expect, Some(mark(false, None)));
        // The KubeVirt CR is read only when the VMI has no strategy of its own.
        let read_cr = cluster.read_kinds().iter().any(|k| k.contains("KubeVirt"));
        assert_eq!(read_cr, vmi_strategy.is_none(), "{row}: reads {:?}", cluster.read_kinds());
    }
}

#[test]
fn settings_name_the_kubevirt_cr() {
    let vmi = Vmi::new(None, true);
    let cluster = cluster(&vmi, Some("LiveMigrate"));
    let settings =
        Settings { kubevirt: Some(KubeVirtRef { namespace: "kubevirt".into(), name: "kubevirt".into() }) };
    let decision = decide(&parse(&eviction_request(POD, plain_eviction())), &settings, &cluster).unwrap();
    check("named CR", &decision, &Expect::Evacuate(triggered()), Some(mark(false, None)));
    assert_eq!(cluster.read_kinds(), ["Pod", "VirtualMachineInstance", "KubeVirt"]);

    // A named CR that does not exist means no cluster-wide strategy.
    let settings =
        Settings { kubevirt: Some(KubeVirtRef { namespace: "other".into(), name: "kubevirt".into() }) };
    let decision = decide(&parse(&eviction_request(POD, plain_eviction())), &settings, &cluster).unwrap();
    check("missing named CR", &decision, &Expect::Allow, None);
}

#[test]
fn no_kubevirt_cr_means_no_cluster_wide_strategy() {
    let vmi = Vmi::new(None, true);
    let cluster = FakeCluster::default().with(launcher_pod(NODE)).with(vmi.json());
    let decision = run(&cluster, &parse(&eviction_request(POD, plain_eviction())));
    check("no CR", &decision, &Expect::Allow, None);
}

#[test]
fn unreadable_cluster_configuration_denies() {
    let vmi = Vmi::new(None, true);
    let cluster = cluster(&vmi, Some("LiveMigrate")).failing("KubeVirt", "connection refused");
    let decision = run(&cluster, &parse(&eviction_request(POD, plain_eviction())));
    let expect = "kubevirt failed getting the cluster-wide eviction strategy: connection refused";
    check("CR read fails", &decision, &Expect::Deny(expect.into()), None);
}

/// Evicting the migration target (the VMI runs on another node) is refused without marking.
#[test]
fn eviction_of_the_target_pod() {
    let target = cluster_with(Vmi::new(Some("LiveMigrate"), true).on("node02"));
    let decision = run(&target, &parse(&eviction_request(POD, plain_eviction())));
    check("target pod", &decision, &Expect::Deny("Eviction request for target Pod".into()), None);

    // An evacuation in progress is reported before the target check.
    let marked = cluster_with(Vmi::new(Some("LiveMigrate"), true).on("node02").marked());
    let decision = run(&marked, &parse(&eviction_request(POD, plain_eviction())));
    check("marked target pod", &decision, &Expect::Deny(in_progress()), None);
}

#[test]
fn dry_run_from_the_request_or_the_eviction() {
    let rows: &[(bool, Value, bool)] = &[
        (false, json!([]), false),
        (true, json!([]), true),
        (false, json!(["All"]), true),
        (true, json!(["All"]), true),
        (false, json!(["Nothing"]), false),
        (false, Value::Null, false),
    ];
    for (request_dry_run, delete_dry_run, expect_dry_run) in rows {
        let vmi = Vmi::new(Some("LiveMigrate"), true);
        let cluster = cluster(&vmi, None);
        let text = eviction_request(POD, eviction(json!({}), delete_dry_run.clone()));
        let mut request = parse(&text);
        request.dry_run = Some(*request_dry_run);
        let decision = run(&cluster, &request);
        let row = format!("request dryRun {request_dry_run}, deleteOptions.dryRun {delete_dry_run}");
        check(&row, &decision, &Expect::Evacuate(triggered()), Some(mark(*expect_dry_run, None)));
    }
}

#[test]
fn descheduler_evictions_carry_their_source() {
    let rows: &[(Value, Option<EvacuationSource>)] = &[
        (json!({"requested-by": "sigs.k8s.io/descheduler"}), Some(EvacuationSource::Descheduler)),
        (json!({"requested-by": "someone-else"}), None),
        (json!({}), None),
        (Value::Null, None),
    ];
    for (annotations, source) in rows {
        let vmi = Vmi::new(Some("LiveMigrate"), true);
        let cluster = cluster(&vmi, None);
        let decision =
            run(&cluster, &parse(&eviction_request(POD, eviction(annotations.clone(), json!([])))));
        check(
            &format!("annotations {annotations}"),
            &decision,
            &Expect::Evacuate(triggered()),
            Some(mark(false, *source)),
        );
    }
}

/// The Eviction is parsed last: a malformed one is refused only where KubeVirt gets that far.
#[test]
fn malformed_eviction_object() {
    let malformed = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": "oops"});
    let vmi = Vmi::new(Some("LiveMigrate"), true);
    let cluster = cluster(&vmi, None);
    let decision = run(&cluster, &parse(&eviction_request(POD, malformed.clone())));
    match &decision.verdict {
        Verdict::Deny { code: 429, message } => {
            assert!(message.starts_with("failed to parse the eviction object: "), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert!(decision.effects.is_empty());

    // Earlier checks decide first.
    let marked = cluster_with(Vmi::new(Some("LiveMigrate"), true).marked());
    let decision = run(&marked, &parse(&eviction_request(POD, malformed.clone())));
    check("malformed, marked", &decision, &Expect::Deny(in_progress()), None);
    let none = cluster_with(Vmi::new(Some("None"), true));
    check(
        "malformed, None",
        &run(&none, &parse(&eviction_request(POD, malformed.clone()))),
        &Expect::Allow,
        None,
    );
    let plain = FakeCluster::default().with(plain_pod());
    check(
        "malformed, plain pod",
        &run(&plain, &parse(&eviction_request("web-0", malformed))),
        &Expect::Allow,
        None,
    );
}

fn cluster_with(vmi: Vmi) -> FakeCluster {
    cluster(&vmi, None)
}

fn plain_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "web-0", "namespace": NS, "labels": {"app": "web"}},
           "spec": {"nodeName": NODE}, "status": {"phase": "Running"}})
}

#[test]
fn pods_kubevirt_does_not_act_on() {
    let vmi = Vmi::new(Some("LiveMigrate"), true);
    let with_pod = |pod: Value| FakeCluster::default().with(pod).with(vmi.json());

    check(
        "not a KubeVirt pod",
        &run(&with_pod(plain_pod()), &parse(&eviction_request("web-0", plain_eviction()))),
        &Expect::Allow,
        None,
    );
    check(
        "missing pod",
        &run(&with_pod(plain_pod()), &parse(&eviction_request("gone", plain_eviction()))),
        &Expect::Allow,
        None,
    );
    let failing = with_pod(launcher_pod(NODE)).failing("Pod", "etcdserver: request timed out");
    check(
        "unreadable pod",
        &run(&failing, &parse(&eviction_request(POD, plain_eviction()))),
        &Expect::Allow,
        None,
    );
    for phase in ["Succeeded", "Failed"] {
        let mut pod = launcher_pod(NODE);
        pod["status"]["phase"] = json!(phase);
        check(
            phase,
            &run(&with_pod(pod), &parse(&eviction_request(POD, plain_eviction()))),
            &Expect::Allow,
            None,
        );
    }
    for phase in ["Pending", "Running", "Unknown"] {
        let mut pod = launcher_pod(NODE);
        pod["status"]["phase"] = json!(phase);
        let decision = run(&with_pod(pod), &parse(&eviction_request(POD, plain_eviction())));
        check(phase, &decision, &Expect::Evacuate(triggered()), Some(mark(false, None)));
    }
    let mut no_domain = launcher_pod(NODE);
    no_domain["metadata"]["annotations"] = json!(null);
    let cluster = with_pod(no_domain);
    check(
        "no domain annotation",
        &run(&cluster, &parse(&eviction_request(POD, plain_eviction()))),
        &Expect::Allow,
        None,
    );
    assert_eq!(cluster.read_kinds(), ["Pod"]);
}

#[test]
fn launcher_pod_whose_vmi_cannot_be_read() {
    let cluster = FakeCluster::default().with(launcher_pod(NODE));
    let decision = run(&cluster, &parse(&eviction_request(POD, plain_eviction())));
    let expect =
        format!("kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io \"{VMI}\" not found");
    check("missing VMI", &decision, &Expect::Deny(expect), None);

    let cluster = FakeCluster::default()
        .with(launcher_pod(NODE))
        .failing("VirtualMachineInstance", "the server is currently unable to handle the request");
    let decision = run(&cluster, &parse(&eviction_request(POD, plain_eviction())));
    let expect = "kubevirt failed getting the vmi: the server is currently unable to handle the request";
    check("unreadable VMI", &decision, &Expect::Deny(expect.into()), None);
}

fn hotplug_pod(owners: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "hp-volume-x7k2p", "namespace": NS,
                        "labels": {"kubevirt.io": "hotplug-disk"},
                        "ownerReferences": owners},
           "spec": {"nodeName": NODE}, "status": {"phase": "Running"}})
}

fn owned_by_launcher() -> Value {
    json!([{"apiVersion": "v1", "kind": "Pod", "name": POD, "uid": "1234", "controller": true}])
}

#[test]
fn hotplug_volume_pods() {
    let vmi = Vmi::new(Some("None"), false);
    let protected = format!(
        "cannot evict hotplug pod: hp-volume-x7k2p associated with running vmi: {VMI} in namespace {NS}"
    );
    let text = eviction_request("hp-volume-x7k2p", plain_eviction());
    let request = parse(&text);

    let full = FakeCluster::default()
        .with(hotplug_pod(owned_by_launcher()))
        .with(launcher_pod(NODE))
        .with(vmi.json());
    check("VMI running", &run(&full, &request), &Expect::Deny(protected), None);

    let no_vmi = FakeCluster::default().with(hotplug_pod(owned_by_launcher())).with(launcher_pod(NODE));
    check("VMI gone", &run(&no_vmi, &request), &Expect::Allow, None);

    let no_owner = FakeCluster::default().with(hotplug_pod(owned_by_launcher())).with(vmi.json());
    check("owner gone", &run(&no_owner, &request), &Expect::Allow, None);

    let mut finished = launcher_pod(NODE);
    finished["status"]["phase"] = json!("Succeeded");
    let done = FakeCluster::default().with(hotplug_pod(owned_by_launcher())).with(finished).with(vmi.json());
    check("owner finished", &run(&done, &request), &Expect::Allow, None);

    let two_owners =
        json!([owned_by_launcher()[0], {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "5"}]);
    let not_hotplug =
        FakeCluster::default().with(hotplug_pod(two_owners)).with(launcher_pod(NODE)).with(vmi.json());
    check("two owners", &run(&not_hotplug, &request), &Expect::Allow, None);

    let owner_is_plain = json!([{"apiVersion": "v1", "kind": "Pod", "name": "web-0", "uid": "7"}]);
    let plain_owner = FakeCluster::default().with(hotplug_pod(owner_is_plain)).with(plain_pod());
    check("owner not a launcher", &run(&plain_owner, &request), &Expect::Allow, None);

    let vmi_fails = FakeCluster::default()
        .with(hotplug_pod(owned_by_launcher()))
        .with(launcher_pod(NODE))
        .failing("VirtualMachineInstance", "timeout");
    check(
        "VMI unreadable",
        &run(&vmi_fails, &request),
        &Expect::Deny("kubevirt failed getting the vmi: timeout".into()),
        None,
    );
}

/// A launcher pod that is gone frees its hotplug pod; one that cannot be read is no answer, and
/// the eviction is refused with the read's error (KubeVirt's "failed getting owner").
#[test]
fn hotplug_owner_missing_or_unreadable() {
    let vmi = Vmi::new(Some("None"), false);
    let text = eviction_request("hp-volume-x7k2p", plain_eviction());
    let request = parse(&text);
    let mut undecodable = launcher_pod(NODE);
    undecodable["status"] = json!("Running");
    let rows = [
        ("owner gone", FakeCluster::default(), Expect::Allow),
        (
            "owner unreadable",
            FakeCluster::default()
                .with(launcher_pod(NODE))
                .failing_object(POD, "etcdserver: request timed out"),
            Expect::Deny("failed getting owner for hotplug pod: etcdserver: request timed out".into()),
        ),
    ];
    for (row, cluster, expect) in rows {
        let cluster = cluster.with(hotplug_pod(owned_by_launcher())).with(vmi.json());
        check(row, &run(&cluster, &request), &expect, None);
        // The VMI is read only once the owner is known to be its running launcher pod.
        assert_eq!(cluster.read_kinds(), ["Pod", "Pod"], "{row}");
    }
    // An owner that does not decode is refused the same way, with the decoding error.
    let cluster =
        FakeCluster::default().with(undecodable).with(hotplug_pod(owned_by_launcher())).with(vmi.json());
    let decision = run(&cluster, &request);
    match &decision.verdict {
        Verdict::Deny { code: 429, message } => assert!(
            message.starts_with("failed getting owner for hotplug pod: cannot decode the Pod: "),
            "{message}"
        ),
        other => panic!("owner undecodable: {other:?}"),
    }
    assert!(decision.effects.is_empty());
}

#[test]
fn only_pods_eviction_create_is_decided() {
    let cluster = FakeCluster::default();
    let text = eviction_request(POD, plain_eviction());
    let mut request = parse(&text);
    request.sub_resource = Default::default();
    let err = decide(&request, &Settings::default(), &cluster).unwrap_err();
    assert_eq!(err.to_string(), "this policy only evaluates pods/eviction CREATE requests, got CREATE pods");

    let text = eviction_request(POD, plain_eviction());
    let mut request = parse(&text);
    request.operation = "DELETE".into();
    let err = decide(&request, &Settings::default(), &cluster).unwrap_err();
    assert_eq!(err.got, "DELETE pods/eviction");

    let text = eviction_request(POD, plain_eviction());
    let mut request = parse(&text);
    request.resource.group = "kubevirt.io".into();
    request.resource.resource = "virtualmachineinstances".into();
    request.sub_resource = Default::default();
    let err = decide(&request, &Settings::default(), &cluster).unwrap_err();
    assert_eq!(err.got, "CREATE virtualmachineinstances.kubevirt.io");
    assert!(cluster.read_kinds().is_empty());
}

#[test]
fn settings_validation() {
    assert!(Settings::default().validate().is_ok());
    let bad = Settings { kubevirt: Some(KubeVirtRef { namespace: String::new(), name: "kubevirt".into() }) };
    assert_eq!(bad.validate().unwrap_err(), "kubevirt: both namespace and name must be set");
    assert!(
        serde_json::from_value::<Settings>(json!({"kubeVirt": {}})).is_err(),
        "unknown fields are refused"
    );
}

#[test]
fn effect_wire_format() {
    let effect = mark(true, Some(EvacuationSource::Descheduler));
    assert_eq!(
        serde_json::to_string(&effect).unwrap(),
        r#"{"type":"MarkForEvacuation","vmi":{"namespace":"default","name":"vm-cirros"},"node":"node01","dryRun":true,"source":"descheduler"}"#
    );
    assert_eq!(
        serde_json::to_string(&mark(false, None)).unwrap(),
        r#"{"type":"MarkForEvacuation","vmi":{"namespace":"default","name":"vm-cirros"},"node":"node01","dryRun":false,"source":null}"#
    );
}

#[test]
fn response_wire_format() {
    let response = crate::PolicyResponse::from(Decision::deny("no").with_effect(mark(false, None)));
    let value = serde_json::to_value(&response).unwrap();
    assert_eq!(value["accepted"], json!(false));
    assert_eq!(value["code"], json!(429));
    assert_eq!(value["message"], json!("no"));
    assert_eq!(value["effects"][0]["type"], json!("MarkForEvacuation"));
    for field in ["warnings", "audit_annotations", "mutated_object"] {
        assert!(value.as_object().unwrap().contains_key(field), "{field}");
    }
    let allowed = serde_json::to_value(crate::PolicyResponse::from(Decision::allow())).unwrap();
    assert_eq!(allowed["accepted"], json!(true));
    assert_eq!(allowed["effects"], json!([]));
}
