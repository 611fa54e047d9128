//! The third harness of the admission tables: every row of [`eviction_cases`] and
//! [`disruption_cases`] decided by the browser playground's code (`evac_web::decide`, the policy
//! crates' functions over the pasted objects, as the page runs them) and by the built policy
//! module on wasmtime (Kubewarden's protocol, the module's metadata grants). Both must give the
//! same answer: verdict, code, message, warnings and effects.
//!
//! Rows whose reads are made to fail ([`Case::failures`]) cannot be pasted (a list of objects
//! does not fail a read): for them the page's decision after its inputs are read
//! ([`decide_with`]) runs over the case's cluster with those reads failing, as the module's host
//! fails them.

use evac_core::PolicyId;
use evac_core::PolicyResponse;
use evac_e2e::{built_policy, validate_case};
use evac_runtime::kubewarden::metadata;
use evac_runtime::wapc::{EngineOptions, PolicyEngine};
use evac_testkit::{disruption_cases, eviction_cases, Case, TestCluster};
use evac_web::decide::{decide, decide_with};
use serde_json::json;
use serde_json::value::RawValue;

#[test]
fn the_page_agrees_with_the_pod_eviction_module_on_every_row() {
    agree(PolicyId::PodEviction, eviction_cases());
}

#[test]
fn the_page_agrees_with_the_disruption_cause_module_on_every_row() {
    agree(PolicyId::DisruptionCause, disruption_cases());
}

/// What two answers must agree on.
fn comparable(response: &PolicyResponse) -> String {
    serde_json::to_string(&json!({
        "accepted": response.accepted,
        "code": response.code,
        "message": response.message,
        "warnings": response.warnings,
        "effects": response.effects,
    }))
    .unwrap()
}

fn agree(policy: PolicyId, cases: Vec<Case>) {
    let path = built_policy(policy);
    let bytes =
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}: run `make build` first", path.display()));
    let grants: Vec<_> = metadata::read(&bytes)
        .unwrap()
        .expect("the module's metadata")
        .context_aware_resources
        .into_iter()
        .collect();
    let engine = PolicyEngine::new(EngineOptions::default()).unwrap();
    let module = engine.load(&path).unwrap();
    let now = 1_700_000_000.0;
    let (mut compared, mut disagreements) = (0, Vec::new());
    for case in &cases {
        let module_answer = validate_case(&module, &grants, case).map(|r| comparable(&r));
        let page_answer = if case.failures.is_empty() {
            let objects = json!({"apiVersion": "v1", "kind": "List", "items": case.objects}).to_string();
            decide(policy, &case.request.to_string(), &objects, &case.settings.to_string(), now)
        } else {
            let raw = |value: &serde_json::Value| RawValue::from_string(value.to_string()).unwrap();
            decide_with(policy, &raw(&case.request), &raw(&case.settings), &TestCluster::for_case(case), now)
        }
        .map(|answer| comparable(&answer.response))
        .map_err(|e| e.to_string());
        compared += 1;
        if module_answer != page_answer {
            disagreements
                .push(format!("{}:\n  module: {module_answer:?}\n  page:   {page_answer:?}", case.name));
        }
    }
    eprintln!("{}: {compared} rows compared", policy.as_str());
    assert_eq!(compared, cases.len());
    assert!(compared > 20, "too few rows: {compared}");
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s):\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
