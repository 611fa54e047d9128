//! The built pod-eviction module, run in-process by evac's wasmtime host against static clusters:
//! KubeVirt v1.9's `pods/eviction` admitter, end to end (waPC, host capabilities, Kubewarden's
//! protocol). Every denial is a 429.

use evac_cluster::MemoryStore;
use evac_e2e::*;
use evac_runtime::capabilities::KubernetesCapabilities;
use evac_runtime::kubewarden::{self, admission};
use evac_runtime::wapc::EvalError;
use serde_json::{json, Value};
use std::sync::Arc;

/// A launcher pod (on NODE) of VMI `name`, its VMI, and the KubeVirt CR.
fn launcher_cluster(vmi: Value, cluster_wide: Option<&str>) -> MemoryStore {
    let name = vmi["metadata"]["name"].as_str().unwrap().to_owned();
    cluster([launcher_pod(NS, &name, NODE), vmi, kubevirt_cr(cluster_wide)])
}

fn evict_launcher(policy: &evac_runtime::wapc::Policy, vmi: &str) -> evac_core::PolicyResponse {
    validate(policy, &eviction_request(NS, &launcher_name(vmi))).expect("validate")
}

#[test]
fn strategy_and_migratability() {
    // (case, VMI spec.evictionStrategy, KubeVirt CR strategy, LiveMigratable, expected)
    let cases = [
        ("None, migratable", Some("None"), None, true, Expect::Allow),
        ("None, not migratable", Some("None"), None, false, Expect::Allow),
        ("LiveMigrate, migratable", Some("LiveMigrate"), None, true, Expect::Triggered(mark(NS, "vm", NODE))),
        (
            "LiveMigrate, not migratable",
            Some("LiveMigrate"),
            None,
            false,
            Expect::Deny(not_migratable_message("vm")),
        ),
        (
            "LiveMigrateIfPossible, migratable",
            Some("LiveMigrateIfPossible"),
            None,
            true,
            Expect::Triggered(mark(NS, "vm", NODE)),
        ),
        ("LiveMigrateIfPossible, not migratable", Some("LiveMigrateIfPossible"), None, false, Expect::Allow),
        ("External, migratable", Some("External"), None, true, Expect::Triggered(mark(NS, "vm", NODE))),
        ("External, not migratable", Some("External"), None, false, Expect::Triggered(mark(NS, "vm", NODE))),
        ("no strategy anywhere, migratable", None, None, true, Expect::Allow),
        ("no strategy anywhere, not migratable", None, None, false, Expect::Allow),
        ("an unknown strategy", Some("Bogus"), None, true, Expect::Allow),
        // The cluster-wide strategy applies to VMIs without their own.
        (
            "cluster LiveMigrate, migratable",
            None,
            Some("LiveMigrate"),
            true,
            Expect::Triggered(mark(NS, "vm", NODE)),
        ),
        (
            "cluster LiveMigrate, not migratable",
            None,
            Some("LiveMigrate"),
            false,
            Expect::Deny(not_migratable_message("vm")),
        ),
        (
            "cluster LiveMigrateIfPossible, not migratable",
            None,
            Some("LiveMigrateIfPossible"),
            false,
            Expect::Allow,
        ),
        ("cluster External", None, Some("External"), false, Expect::Triggered(mark(NS, "vm", NODE))),
        ("cluster None", None, Some("None"), true, Expect::Allow),
        // The VMI's own strategy wins over the cluster-wide one.
        ("VMI None over cluster LiveMigrate", Some("None"), Some("LiveMigrate"), true, Expect::Allow),
        (
            "VMI LiveMigrate over cluster None",
            Some("LiveMigrate"),
            Some("None"),
            true,
            Expect::Triggered(mark(NS, "vm", NODE)),
        ),
        (
            "VMI LiveMigrateIfPossible over cluster LiveMigrate",
            Some("LiveMigrateIfPossible"),
            Some("LiveMigrate"),
            false,
            Expect::Allow,
        ),
    ];
    for (case, strategy, cluster_wide, migratable, expected) in cases {
        let policy = policy_for(launcher_cluster(vmi(NS, "vm", strategy, migratable, NODE), cluster_wide));
        check(case, &evict_launcher(&policy, "vm"), &expected);
    }
}

#[test]
fn no_kubevirt_cr_means_no_cluster_wide_strategy() {
    let policy = policy_for(cluster([launcher_pod(NS, "vm", NODE), vmi(NS, "vm", None, true, NODE)]));
    check("no KubeVirt CR", &evict_launcher(&policy, "vm"), &Expect::Allow);
    let policy = policy_with(KubernetesCapabilities::new(Arc::new(cluster([
        launcher_pod(NS, "vm", NODE),
        vmi(NS, "vm", Some("LiveMigrate"), true, NODE),
    ]))));
    check(
        "no KubeVirt CR, VMI strategy",
        &evict_launcher(&policy, "vm"),
        &Expect::Triggered(mark(NS, "vm", NODE)),
    );
}

#[test]
fn settings_can_name_the_kubevirt_cr() {
    let objects = || {
        [
            launcher_pod(NS, "vm", NODE),
            vmi(NS, "vm", None, true, NODE),
            kubevirt_cr_named("kubevirt", "a-first", Some("None")),
            kubevirt_cr_named("kubevirt", "kubevirt", Some("LiveMigrate")),
        ]
    };
    let policy = policy_for(cluster(objects()));
    let request = eviction_request(NS, &launcher_name("vm"));
    let cases = [
        (
            "the named CR",
            json!({"kubevirt": {"namespace": "kubevirt", "name": "kubevirt"}}),
            Expect::Triggered(mark(NS, "vm", NODE)),
        ),
        ("the other CR", json!({"kubevirt": {"namespace": "kubevirt", "name": "a-first"}}), Expect::Allow),
        (
            "a CR that does not exist",
            json!({"kubevirt": {"namespace": "kubevirt", "name": "nope"}}),
            Expect::Allow,
        ),
    ];
    for (case, settings, expected) in cases {
        let response = validate_with_settings(&policy, &request, &settings).expect(case);
        check(case, &response, &expected);
    }
}

#[test]
fn an_evacuation_already_in_progress_is_not_marked_again() {
    let marked = |strategy: Option<&str>, migratable: bool| {
        with(vmi(NS, "vm", strategy, migratable, NODE), "/status/evacuationNodeName", json!(NODE))
    };
    let cases = [
        ("LiveMigrate", marked(Some("LiveMigrate"), true), None, Expect::Deny(in_progress_message(NS, "vm"))),
        (
            "LiveMigrateIfPossible",
            marked(Some("LiveMigrateIfPossible"), true),
            None,
            Expect::Deny(in_progress_message(NS, "vm")),
        ),
        ("External", marked(Some("External"), false), None, Expect::Deny(in_progress_message(NS, "vm"))),
        (
            "cluster-wide LiveMigrate",
            marked(None, true),
            Some("LiveMigrate"),
            Expect::Deny(in_progress_message(NS, "vm")),
        ),
        // The strategy is checked first.
        ("None", marked(Some("None"), true), None, Expect::Allow),
        (
            "LiveMigrate, not migratable",
            marked(Some("LiveMigrate"), false),
            None,
            Expect::Deny(not_migratable_message("vm")),
        ),
        (
            "LiveMigrateIfPossible, not migratable",
            marked(Some("LiveMigrateIfPossible"), false),
            None,
            Expect::Allow,
        ),
        // Marked for evacuation from another node: still in progress.
        (
            "marked from another node",
            with(
                vmi(NS, "vm", Some("LiveMigrate"), true, NODE),
                "/status/evacuationNodeName",
                json!(OTHER_NODE),
            ),
            None,
            Expect::Deny(in_progress_message(NS, "vm")),
        ),
    ];
    for (case, vmi, cluster_wide, expected) in cases {
        let policy = policy_for(launcher_cluster(vmi, cluster_wide));
        check(case, &evict_launcher(&policy, "vm"), &expected);
    }
}

#[test]
fn evicting_the_migration_target_pod_is_denied() {
    // The VMI runs on node01; this launcher pod is on node02 (the target of a migration).
    let cases = [
        (
            "LiveMigrate",
            vmi(NS, "vm", Some("LiveMigrate"), true, NODE),
            Expect::Deny(TARGET_POD_MESSAGE.into()),
        ),
        ("External", vmi(NS, "vm", Some("External"), false, NODE), Expect::Deny(TARGET_POD_MESSAGE.into())),
        ("None", vmi(NS, "vm", Some("None"), true, NODE), Expect::Allow),
        (
            "already marked",
            with(vmi(NS, "vm", Some("LiveMigrate"), true, NODE), "/status/evacuationNodeName", json!(NODE)),
            Expect::Deny(in_progress_message(NS, "vm")),
        ),
        (
            "VMI not scheduled yet",
            without(vmi(NS, "vm", Some("LiveMigrate"), true, NODE), "/status/nodeName"),
            Expect::Deny(TARGET_POD_MESSAGE.into()),
        ),
    ];
    for (case, vmi, expected) in cases {
        let policy = policy_for(cluster([launcher_pod(NS, "vm", OTHER_NODE), vmi, kubevirt_cr(None)]));
        check(case, &evict_launcher(&policy, "vm"), &expected);
    }
}

#[test]
fn dry_run_and_descheduler_evictions() {
    let pod = launcher_name("vm");
    let dry_run_request = with(eviction_request(NS, &pod), "/dryRun", json!(true));
    let mut both = dry_run_eviction(NS, &pod);
    both["metadata"]["annotations"] = json!({"requested-by": "sigs.k8s.io/descheduler"});
    let cases = [
        ("plain", eviction_request(NS, &pod), mark(NS, "vm", NODE)),
        ("request.dryRun", dry_run_request.clone(), mark_dry_run(NS, "vm", NODE)),
        (
            "deleteOptions.dryRun All",
            eviction_request_with(NS, &pod, dry_run_eviction(NS, &pod)),
            mark_dry_run(NS, "vm", NODE),
        ),
        (
            "deleteOptions.dryRun empty",
            eviction_request_with(
                NS,
                &pod,
                with(eviction_object(NS, &pod), "/deleteOptions", json!({"dryRun": []})),
            ),
            mark(NS, "vm", NODE),
        ),
        (
            "deleteOptions without dryRun",
            eviction_request_with(
                NS,
                &pod,
                with(eviction_object(NS, &pod), "/deleteOptions", json!({"gracePeriodSeconds": 0})),
            ),
            mark(NS, "vm", NODE),
        ),
        (
            "descheduler",
            eviction_request_with(NS, &pod, descheduler_eviction(NS, &pod)),
            mark_by_descheduler(NS, "vm", NODE, false),
        ),
        (
            "descheduler, dry run",
            eviction_request_with(NS, &pod, both),
            mark_by_descheduler(NS, "vm", NODE, true),
        ),
        (
            "descheduler, request.dryRun",
            with(dry_run_request, "/object", descheduler_eviction(NS, &pod)),
            mark_by_descheduler(NS, "vm", NODE, true),
        ),
        (
            "another requester",
            eviction_request_with(
                NS,
                &pod,
                with(
                    eviction_object(NS, &pod),
                    "/metadata/annotations",
                    json!({"requested-by": "someone-else"}),
                ),
            ),
            mark(NS, "vm", NODE),
        ),
    ];
    let policy = policy_for(launcher_cluster(vmi(NS, "vm", Some("LiveMigrate"), true, NODE), None));
    for (case, request, effect) in cases {
        let response = validate(&policy, &request).expect(case);
        check(case, &response, &Expect::Triggered(effect));
    }
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
fn pods_that_are_not_running_launchers_are_allowed() {
    let completed = |phase: &str| with(launcher_pod(NS, "vm", NODE), "/status/phase", json!(phase));
    let two_owners = with(
        hotplug_pod(NS, "hp-two-owners", &launcher_name("vm")),
        "/metadata/ownerReferences",
        json!([{"apiVersion": "v1", "kind": "Pod", "name": launcher_name("vm"), "uid": "a"}, {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "b"}]),
    );
    let cases: Vec<(&str, Option<Value>, String)> = vec![
        ("a plain pod", Some(plain_pod(NS, "nginx")), "nginx".into()),
        ("a missing pod", None, "ghost".into()),
        ("a launcher pod that Succeeded", Some(completed("Succeeded")), launcher_name("vm")),
        ("a launcher pod that Failed", Some(completed("Failed")), launcher_name("vm")),
        (
            "a launcher pod without kubevirt.io/domain",
            Some(without(launcher_pod(NS, "vm", NODE), "/metadata/annotations/kubevirt.io~1domain")),
            launcher_name("vm"),
        ),
        (
            "a pod with only the domain annotation",
            Some(without(launcher_pod(NS, "vm", NODE), "/metadata/labels/kubevirt.io")),
            launcher_name("vm"),
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
        ("a hotplug pod with two owners", Some(two_owners), "hp-two-owners".into()),
    ];
    for (case, pod, name) in cases {
        let mut objects =
            vec![vmi(NS, "vm", Some("LiveMigrate"), true, NODE), kubevirt_cr(Some("LiveMigrate"))];
        objects.extend(pod);
        // The launcher pod is there too unless the case replaces it.
        if name != launcher_name("vm") {
            objects.push(launcher_pod(NS, "vm", NODE));
        }
        let policy = policy_for(cluster(objects));
        let response = validate(&policy, &eviction_request(NS, &name)).expect(case);
        check(case, &response, &Expect::Allow);
    }
}

#[test]
fn a_pod_in_another_namespace_is_not_found() {
    let policy = policy_for(launcher_cluster(vmi(NS, "vm", Some("LiveMigrate"), true, NODE), None));
    let response = validate(&policy, &eviction_request("elsewhere", &launcher_name("vm"))).unwrap();
    check("the launcher pod's name in another namespace", &response, &Expect::Allow);
}

#[test]
fn a_launcher_pod_whose_vmi_is_missing_is_denied() {
    let policy = policy_for(cluster([launcher_pod(NS, "gone", NODE), kubevirt_cr(Some("LiveMigrate"))]));
    check(
        "VMI missing",
        &evict_launcher(&policy, "gone"),
        &Expect::Deny(
            r#"kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io "gone" not found"#.into(),
        ),
    );
    // The VMI lookup uses the request's namespace.
    let policy = policy_for(cluster([
        launcher_pod(NS, "vm", NODE),
        vmi("elsewhere", "vm", Some("LiveMigrate"), true, NODE),
    ]));
    check(
        "VMI in another namespace",
        &evict_launcher(&policy, "vm"),
        &Expect::Deny(
            r#"kubevirt failed getting the vmi: virtualmachineinstances.kubevirt.io "vm" not found"#.into(),
        ),
    );
}

#[test]
fn hotplug_volume_pods() {
    let owner = launcher_name("vm");
    let protected =
        "cannot evict hotplug pod: hp-volume-1 associated with running vmi: vm in namespace default";
    let hotplug = || hotplug_pod(NS, "hp-volume-1", &owner);
    let running_vmi = || vmi(NS, "vm", Some("LiveMigrate"), true, NODE);
    let cases = [
        (
            "VMI running",
            vec![hotplug(), launcher_pod(NS, "vm", NODE), running_vmi()],
            Expect::Deny(protected.into()),
        ),
        // Whatever the VMI's strategy: the pod holds a disk of a running VM.
        (
            "VMI with strategy None",
            vec![hotplug(), launcher_pod(NS, "vm", NODE), vmi(NS, "vm", Some("None"), false, NODE)],
            Expect::Deny(protected.into()),
        ),
        ("VMI gone", vec![hotplug(), launcher_pod(NS, "vm", NODE)], Expect::Allow),
        ("launcher pod gone", vec![hotplug(), running_vmi()], Expect::Allow),
        (
            "launcher pod completed",
            vec![
                hotplug(),
                with(launcher_pod(NS, "vm", NODE), "/status/phase", json!("Succeeded")),
                running_vmi(),
            ],
            Expect::Allow,
        ),
        (
            "owner is not a launcher pod",
            vec![hotplug_pod(NS, "hp-volume-1", "nginx"), plain_pod(NS, "nginx"), running_vmi()],
            Expect::Allow,
        ),
    ];
    for (case, objects, expected) in cases {
        let policy = policy_for(cluster(objects));
        let response = validate(&policy, &eviction_request(NS, "hp-volume-1")).expect(case);
        check(case, &response, &expected);
    }
}

#[test]
fn a_malformed_eviction_object() {
    let malformed = |pod: &str| {
        eviction_request_with(
            NS,
            pod,
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": "oops"}),
        )
    };
    let launcher = launcher_name("vm");

    // A launcher pod with a marking strategy: the Eviction is parsed, and that fails.
    let policy = policy_for(cluster([
        launcher_pod(NS, "vm", NODE),
        vmi(NS, "vm", Some("LiveMigrate"), true, NODE),
        plain_pod(NS, "nginx"),
        launcher_pod(NS, "keep", NODE),
        vmi(NS, "keep", Some("None"), true, NODE),
    ]));
    let response = validate(&policy, &malformed(&launcher)).unwrap();
    assert!(!response.accepted, "{response:?}");
    assert_eq!(response.code, Some(429));
    let message = response.message.unwrap_or_default();
    assert!(message.starts_with("failed to parse the eviction object: "), "{message}");
    assert!(
        message.len() > "failed to parse the eviction object: ".len(),
        "the parse error is missing: {message}"
    );
    assert!(response.effects.is_empty());

    // The object is read only when a VMI is about to be marked.
    check("plain pod", &validate(&policy, &malformed("nginx")).unwrap(), &Expect::Allow);
    check("strategy None", &validate(&policy, &malformed(&launcher_name("keep"))).unwrap(), &Expect::Allow);
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
    let denied_containing = |case: &str, response: &evac_core::PolicyResponse, prefix: &str, what: &str| {
        assert!(!response.accepted, "{case}: {response:?}");
        assert_eq!(response.code, Some(429), "{case}");
        let message = response.message.as_deref().unwrap_or_default();
        assert!(message.starts_with(prefix), "{case}: {message}");
        assert!(message.contains("has not been granted access"), "{case}: {message}");
        assert!(message.contains(what), "{case}: {message}");
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
    denied_containing(
        "no VMI grant",
        &evict_launcher(&policy, "own"),
        "kubevirt failed getting the vmi: ",
        "kubevirt.io/v1 VirtualMachineInstance",
    );

    let policy = granted(vec![grant("v1", "Pod"), grant("kubevirt.io/v1", "VirtualMachineInstance")]);
    check(
        "no KubeVirt grant, own strategy",
        &evict_launcher(&policy, "own"),
        &Expect::Triggered(mark(NS, "own", NODE)),
    );
    denied_containing(
        "no KubeVirt grant, cluster-wide strategy",
        &evict_launcher(&policy, "inherits"),
        "kubevirt failed getting the cluster-wide eviction strategy: ",
        "kubevirt.io/v1 KubeVirt",
    );

    // Without reading the pod there is nothing to decide: the API server's answer stands.
    let policy =
        granted(vec![grant("kubevirt.io/v1", "VirtualMachineInstance"), grant("kubevirt.io/v1", "KubeVirt")]);
    check("no Pod grant", &evict_launcher(&policy, "own"), &Expect::Allow);

    // A grant of another version is not a grant.
    let policy = granted(vec![grant("v1", "Pod"), grant("kubevirt.io/v1alpha3", "VirtualMachineInstance")]);
    denied_containing(
        "VMI grant of another version",
        &evict_launcher(&policy, "own"),
        "kubevirt failed getting the vmi: ",
        "has not",
    );
}

#[test]
fn failed_reads_other_than_not_found_deny() {
    let objects = || {
        [
            launcher_pod(NS, "vm", NODE),
            vmi(NS, "vm", None, true, NODE),
            kubevirt_cr(Some("LiveMigrate")),
            hotplug_pod(NS, "hp-volume-1", &launcher_name("vm")),
        ]
    };
    let failing = |kind: &'static str| {
        policy_with(FailingKind {
            inner: KubernetesCapabilities::new(Arc::new(cluster(objects()))),
            kind,
            message: "the server is currently unable to handle the request",
        })
    };
    check(
        "VMI read fails",
        &evict_launcher(&failing("VirtualMachineInstance"), "vm"),
        &Expect::Deny(
            "kubevirt failed getting the vmi: the server is currently unable to handle the request".into(),
        ),
    );
    check(
        "KubeVirt list fails",
        &evict_launcher(&failing("KubeVirt"), "vm"),
        &Expect::Deny("kubevirt failed getting the cluster-wide eviction strategy: the server is currently unable to handle the request".into()),
    );
    check(
        "hotplug pod's VMI read fails",
        &validate(&failing("VirtualMachineInstance"), &eviction_request(NS, "hp-volume-1")).unwrap(),
        &Expect::Deny(
            "kubevirt failed getting the vmi: the server is currently unable to handle the request".into(),
        ),
    );
    // The pod itself cannot be read: KubeVirt lets the API server decide.
    check("pod read fails", &evict_launcher(&failing("Pod"), "vm"), &Expect::Allow);
}

#[test]
fn an_empty_cluster() {
    let err = MemoryStore::from_list("").unwrap_err();
    assert!(format!("{err:#}").contains("empty"), "{err:#}");
    let err = MemoryStore::from_list("  \n\n").unwrap_err();
    assert!(format!("{err:#}").contains("empty"), "{err:#}");
    let err = MemoryStore::from_file(&test_data("empty-context.yaml")).unwrap_err();
    assert!(format!("{err:#}").contains("empty"), "{err:#}");

    // Every read is NotFound: the launcher pod is not there, so the eviction is allowed.
    let policy = policy_for(MemoryStore::empty());
    for pod in [launcher_name("web-1"), "virt-launcher-web-1-8xk2p".into(), "nginx".into()] {
        check(&pod, &validate(&policy, &eviction_request(NS, &pod)).unwrap(), &Expect::Allow);
    }
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
