//! The built pod-eviction module, run in-process by evac's wasmtime host against static clusters:
//! KubeVirt v1.9's `pods/eviction` admitter, end to end (waPC, host capabilities, Kubewarden's
//! protocol). Every denial is a 429.
//!
//! Every row of the verdict's table ([`evac_testkit::eviction_cases`]) runs through the
//! module; the other tests here are of what only the module and its host do: grants, settings
//! validation, the protocol, the examples, the forms of the input.

use evac_cluster::MemoryStore;
use evac_e2e::*;
use evac_runtime::capabilities::KubernetesCapabilities;
use evac_runtime::kubewarden::{self, admission};
use evac_runtime::wapc::EvalError;
use evac_testkit::{check_cases, eviction_cases};
use serde_json::{json, Value};
use std::sync::Arc;

/// Every row of the table, through the built module with the grants of its metadata.
#[test]
fn every_row_of_the_eviction_table() {
    let module = shared_module();
    let grants = metadata_grants();
    check_cases("eviction", &eviction_cases(), |case| validate_case(&module, &grants, case));
}

/// A launcher pod (on NODE) of VMI `name`, its VMI, and the KubeVirt CR.
fn launcher_cluster(vmi: Value, cluster_wide: Option<&str>) -> MemoryStore {
    let name = vmi["metadata"]["name"].as_str().unwrap().to_owned();
    cluster([launcher_pod(NS, &name, NODE), vmi, kubevirt_cr(cluster_wide)])
}

fn evict_launcher(policy: &evac_runtime::wapc::Policy, vmi: &str) -> evac_core::PolicyResponse {
    validate(policy, &eviction_request(NS, &launcher_name(vmi))).expect("validate")
}

#[test]
fn the_effect_has_kubewardens_wire_form() {
    let pod = launcher_name("vm");
    let policy = policy_for(launcher_cluster(vmi(NS, "vm", Some("LiveMigrate"), true, NODE), None));
    let request = eviction_request_with(NS, &pod, descheduler_eviction(NS, &pod));
    let answer = policy
        .call("validate", &kubewarden::validation_payload(&raw(&request), &raw(&json!({}))))
        .expect("validate");
    let answer: Value = serde_json::from_slice(&answer).expect("a JSON answer");
    assert_eq!(answer["accepted"], false);
    assert_eq!(answer["code"], 429);
    assert_eq!(answer["message"], triggered_message(NS, "vm"));
    assert_eq!(
        answer["effects"],
        json!([{"type": "MarkForEvacuation", "vmi": {"namespace": NS, "name": "vm"}, "node": NODE, "dryRun": false, "source": "descheduler"}])
    );
    let plain = policy
        .call(
            "validate",
            &kubewarden::validation_payload(&raw(&eviction_request(NS, &pod)), &raw(&json!({}))),
        )
        .expect("validate");
    let plain: Value = serde_json::from_slice(&plain).expect("a JSON answer");
    assert_eq!(plain["effects"][0]["source"], Value::Null);
    assert!(
        plain["effects"][0].as_object().unwrap().contains_key("source"),
        "source is always present: {plain}"
    );
}

#[test]
fn requests_that_are_not_eviction_creates_are_errors() {
    let pod = launcher_name("vm");
    let policy = policy_for(launcher_cluster(vmi(NS, "vm", Some("LiveMigrate"), true, NODE), None));
    let cases = [
        ("a pod CREATE", without(eviction_request(NS, &pod), "/subResource"), "got CREATE pods"),
        (
            "an eviction DELETE",
            with(eviction_request(NS, &pod), "/operation", json!("DELETE")),
            "got DELETE pods/eviction",
        ),
        (
            "an eviction UPDATE",
            with(eviction_request(NS, &pod), "/operation", json!("UPDATE")),
            "got UPDATE pods/eviction",
        ),
        (
            "pods/status",
            with(eviction_request(NS, &pod), "/subResource", json!("status")),
            "got CREATE pods/status",
        ),
        (
            "another group's pods",
            with(eviction_request(NS, &pod), "/resource/group", json!("metrics.k8s.io")),
            "got CREATE pods/eviction.metrics.k8s.io",
        ),
        (
            "no operation",
            without(eviction_request(NS, &pod), "/operation"),
            "got <no operation> pods/eviction",
        ),
    ];
    for (case, request, got) in cases {
        let payload = kubewarden::validation_payload(&raw(&request), &raw(&json!({})));
        for result in [policy.call("validate", &payload).map(|_| ()), validate(&policy, &request).map(|_| ())]
        {
            match result {
                Err(EvalError::Guest(message)) => {
                    assert!(
                        message.contains("only evaluates pods/eviction CREATE requests"),
                        "{case}: {message}"
                    );
                    assert!(message.contains(got), "{case}: {message} does not say {got:?}");
                }
                other => panic!("{case}: expected a guest error, got {other:?}"),
            }
        }
    }
    // The error reads as one line.
    let err = validate(&policy, &without(eviction_request(NS, &pod), "/subResource")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the policy returned an error: this policy only evaluates pods/eviction CREATE requests, got CREATE pods"
    );
}

#[test]
fn settings_and_protocol_version() {
    enum Verdict {
        Valid,
        /// `valid: false` with a message containing this (settings that do not decode too).
        Invalid(&'static str),
    }
    let policy = policy_for(MemoryStore::empty());
    let cases = [
        (json!({}), Verdict::Valid),
        (json!({"kubevirt": {"namespace": "kubevirt", "name": "kubevirt"}}), Verdict::Valid),
        (
            json!({"kubevirt": {"namespace": "", "name": "kubevirt"}}),
            Verdict::Invalid("kubevirt: both namespace and name must be set"),
        ),
        (
            json!({"kubevirt": {"namespace": "kubevirt", "name": ""}}),
            Verdict::Invalid("kubevirt: both namespace and name must be set"),
        ),
        (json!(null), Verdict::Valid),
        (json!({"kubevirtt": {}}), Verdict::Invalid("unknown field `kubevirtt`")),
        (json!({"kubevirt": {"namespace": "kubevirt"}}), Verdict::Invalid("missing field `name`")),
    ];
    for (settings, expected) in cases {
        let verdict = kubewarden::validate_settings(&policy, &raw(&settings));
        match (verdict, expected) {
            (Ok(verdict), Verdict::Valid) => {
                assert!(verdict.valid, "{settings}: {verdict:?}");
                assert_eq!(verdict.message, None, "{settings}");
            }
            (Ok(verdict), Verdict::Invalid(text)) => {
                assert!(!verdict.valid, "{settings}: {verdict:?}");
                let message = verdict.message.unwrap_or_default();
                assert!(message.contains(text), "{settings}: {message}");
            }
            (other, _) => panic!("{settings}: unexpected {other:?}"),
        }
    }
    assert_eq!(kubewarden::protocol_version(&policy).unwrap(), "v1");
}

#[test]
fn grants_limit_what_the_policy_reads() {
    let objects = || {
        [
            launcher_pod(NS, "own", NODE),
            vmi(NS, "own", Some("LiveMigrate"), true, NODE),
            launcher_pod(NS, "inherits", NODE),
            vmi(NS, "inherits", None, true, NODE),
            kubevirt_cr(Some("LiveMigrate")),
        ]
    };
    let granted = |grants: Vec<evac_runtime::capabilities::ResourceGrant>| {
        policy_with(KubernetesCapabilities::new(Arc::new(cluster(objects()))).granting(grants))
    };
    // A read the policy was not granted is a configuration error, answered as one: a 500 naming
    // what to grant, whichever read it was (never KubeVirt's allow for a pod it cannot read).
    let misconfigured = |case: &str, response: &evac_core::PolicyResponse, what: &str| {
        assert!(!response.accepted, "{case}: {response:?}");
        assert_eq!(response.code, Some(500), "{case}");
        let message = response.message.as_deref().unwrap_or_default();
        assert!(
            message.starts_with("policy pod-eviction cannot read the cluster (grant it"),
            "{case}: {message}"
        );
        let refusal = format!("Policy has not been granted access to Kubernetes {what} resources.");
        assert!(message.contains(&refusal), "{case}: {message}");
        assert!(response.effects.is_empty(), "{case}");
    };

    // The metadata's grants are enough.
    let policy = granted(metadata_grants());
    check("all granted", &evict_launcher(&policy, "own"), &Expect::Triggered(mark(NS, "own", NODE)));
    check(
        "all granted, inherits",
        &evict_launcher(&policy, "inherits"),
        &Expect::Triggered(mark(NS, "inherits", NODE)),
    );

    let policy = granted(vec![grant("v1", "Pod"), grant("kubevirt.io/v1", "KubeVirt")]);
    misconfigured("no VMI grant", &evict_launcher(&policy, "own"), "kubevirt.io/v1/VirtualMachineInstance");

    let policy = granted(vec![grant("v1", "Pod"), grant("kubevirt.io/v1", "VirtualMachineInstance")]);
    check(
        "no KubeVirt grant, own strategy",
        &evict_launcher(&policy, "own"),
        &Expect::Triggered(mark(NS, "own", NODE)),
    );
    misconfigured(
        "no KubeVirt grant, cluster-wide strategy",
        &evict_launcher(&policy, "inherits"),
        "kubevirt.io/v1/KubeVirt",
    );

    let policy =
        granted(vec![grant("kubevirt.io/v1", "VirtualMachineInstance"), grant("kubevirt.io/v1", "KubeVirt")]);
    misconfigured("no Pod grant", &evict_launcher(&policy, "own"), "v1/Pod");

    // A grant of another version is not a grant.
    let policy = granted(vec![grant("v1", "Pod"), grant("kubevirt.io/v1alpha3", "VirtualMachineInstance")]);
    misconfigured(
        "VMI grant of another version",
        &evict_launcher(&policy, "own"),
        "kubevirt.io/v1/VirtualMachineInstance",
    );
}

/// A context without objects is refused (a cluster of no objects is the table's "an empty
/// cluster").
#[test]
fn an_empty_context_is_refused() {
    let err = MemoryStore::from_list("").unwrap_err();
    assert!(format!("{err:#}").contains("empty"), "{err:#}");
    let err = MemoryStore::from_list("  \n\n").unwrap_err();
    assert!(format!("{err:#}").contains("empty"), "{err:#}");
    let err = MemoryStore::from_file(&test_data("empty-context.yaml")).unwrap_err();
    assert!(format!("{err:#}").contains("empty"), "{err:#}");
}

#[test]
fn the_examples() {
    let mark_example = |vmi: &str| mark("default", vmi, "node01");
    let cases = [
        ("01-drain-live-migratable", Expect::Triggered(mark_example("web-1"))),
        ("02-descheduler-live-migratable", Expect::Triggered(mark_by_descheduler("default", "web-1", "node01", false))),
        ("03-dry-run", Expect::Triggered(mark_dry_run("default", "web-1", "node01"))),
        ("04-not-migratable", Expect::Deny(not_migratable_message("gpu-1"))),
        ("05-if-possible-not-migratable", Expect::Allow),
        ("06-external", Expect::Triggered(mark_example("capk-1"))),
        ("07-evacuation-in-progress", Expect::Deny(in_progress_message("default", "db-1"))),
        ("08-strategy-none", Expect::Allow),
        ("09-target-pod", Expect::Deny(TARGET_POD_MESSAGE.into())),
        (
            "10-hotplug-volume-pod",
            Expect::Deny("cannot evict hotplug pod: hp-volume-kq7zx associated with running vmi: web-1 in namespace default".into()),
        ),
        ("11-plain-pod", Expect::Allow),
    ];
    let requests = std::fs::read_dir(example("requests")).expect("examples/evictions/requests").count();
    assert_eq!(requests, cases.len(), "every example request has a case here");

    // As `kwctl run` would: limited to the module's contextAwareResources.
    let policy =
        policy_with(KubernetesCapabilities::new(Arc::new(example_cluster())).granting(metadata_grants()));
    for (name, expected) in cases {
        let input = std::fs::read(example(&format!("requests/{name}.json"))).expect(name);
        let request = admission::request_from_input(&input).expect(name);
        let response = kubewarden::validate(&policy, &request, &raw(&json!({}))).expect(name);
        check(name, &response, &expected);
    }
}

#[test]
fn a_review_and_a_bare_request_get_the_same_answer() {
    let policy = policy_for(launcher_cluster(vmi(NS, "vm", Some("LiveMigrate"), true, NODE), None));
    let request = eviction_request(NS, &launcher_name("vm"));
    let bare = admission::request_from_input(request.to_string().as_bytes()).unwrap();
    let review = admission::request_from_input(admission_review(request).to_string().as_bytes()).unwrap();
    let settings = raw(&json!({}));
    let from_bare = kubewarden::validate(&policy, &bare, &settings).unwrap();
    let from_review = kubewarden::validate(&policy, &review, &settings).unwrap();
    assert_eq!(from_bare, from_review);
    check("review", &from_review, &Expect::Triggered(mark(NS, "vm", NODE)));
}

/// Deeply nested JSON in fields the policy does not read is skipped (serde_json skips without
/// recursing), so it neither overflows the guest's small stack nor changes the answer.
#[test]
fn deeply_nested_input_is_handled() {
    let nested = (0..5000).fold(json!("bottom"), |inner, _| json!({ "n": inner }));
    let policy = policy_for(cluster([
        launcher_pod(NS, "deep", NODE),
        vmi(NS, "deep", Some("LiveMigrate"), true, NODE),
    ]));
    let expected = Expect::Triggered(mark(NS, "deep", NODE));

    let eviction =
        with(eviction_object(NS, &launcher_name("deep")), "/deleteOptions", json!({ "extra": nested }));
    let response = validate(&policy, &eviction_request_with(NS, &launcher_name("deep"), eviction)).unwrap();
    check("nested in the Eviction", &response, &expected);

    let request =
        with(eviction_request(NS, &launcher_name("deep")), "/userInfo/extra", json!({ "x": nested }));
    check("nested in the request", &validate(&policy, &request).unwrap(), &expected);

    let response = validate(&policy, &eviction_request(NS, &launcher_name("deep"))).unwrap();
    check("afterwards", &response, &expected);
}
