//! The built module carries its Kubewarden metadata (custom section `io.kubewarden.metadata`),
//! as `kwctl annotate` writes it: what the policy is for, and what it may read.

use std::collections::BTreeSet;

use evac_e2e::*;
use evac_runtime::kubewarden::metadata::{self, Metadata, Rule, METADATA_SECTION};
use serde_json::{json, Value};

/// The payloads of the module's custom sections called `name` (a minimal walk of the binary).
fn custom_sections<'a>(module: &'a [u8], name: &str) -> Vec<&'a [u8]> {
    fn leb128(bytes: &[u8], at: &mut usize) -> usize {
        let (mut value, mut shift) = (0usize, 0);
        loop {
            let byte = bytes[*at];
            *at += 1;
            value |= usize::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return value;
            }
            shift += 7;
        }
    }
    assert_eq!(&module[..8], b"\0asm\x01\0\0\0", "not a wasm module");
    let mut sections = Vec::new();
    let mut at = 8;
    while at < module.len() {
        let id = module[at];
        at += 1;
        let size = leb128(module, &mut at);
        let (start, end) = (at, at + size);
        if id == 0 {
            let mut inner = start;
            let name_len = leb128(module, &mut inner);
            if &module[inner..inner + name_len] == name.as_bytes() {
                sections.push(&module[inner + name_len..end]);
            }
        }
        at = end;
    }
    sections
}

#[test]
fn the_built_module_carries_its_metadata() {
    let module = policy_bytes();
    let metadata = metadata::read(&module)
        .expect("readable metadata")
        .expect("the built module has no io.kubewarden.metadata section: run `make build`");

    assert_eq!(metadata.protocol_version.as_deref(), Some("v1"));
    assert_eq!(
        metadata.rules,
        vec![Rule {
            api_groups: vec![String::new()],
            api_versions: vec!["v1".into()],
            resources: vec!["pods/eviction".into()],
            operations: vec!["CREATE".into()],
        }]
    );
    assert!(!metadata.mutating);
    assert_eq!(metadata.context_aware_resources, metadata_grants().into_iter().collect::<BTreeSet<_>>());
    assert_eq!(metadata.execution_mode, "kubewarden-wapc");
    assert_eq!(metadata.policy_type, "kubernetes");

    // It is the policy's metadata.yml, plus the protocol version the module reported.
    let yml = std::fs::read_to_string(repo_root().join("policies/pod-eviction/metadata.yml")).unwrap();
    let mut expected = Metadata::from_yaml(&yml).unwrap();
    expected.protocol_version = Some("v1".into());
    assert_eq!(metadata, expected, "dist/policies/pod-eviction.wasm is stale: run `make build`");
}

#[test]
fn the_metadata_section_is_kwctls_json() {
    let module = policy_bytes();
    let sections = custom_sections(&module, METADATA_SECTION);
    assert_eq!(sections.len(), 1, "exactly one metadata section");
    let json: Value = serde_json::from_slice(sections[0]).expect("the section is JSON");
    assert_eq!(json["protocolVersion"], "v1");
    assert_eq!(
        json["rules"],
        json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods/eviction"], "operations": ["CREATE"]}])
    );
    assert_eq!(json["mutating"], false);
    assert_eq!(json["executionMode"], "kubewarden-wapc");
    assert_eq!(json["policyType"], "kubernetes");
    let resources: BTreeSet<(String, String)> = json["contextAwareResources"]
        .as_array()
        .expect("contextAwareResources")
        .iter()
        .map(|r| (r["apiVersion"].as_str().unwrap().to_owned(), r["kind"].as_str().unwrap().to_owned()))
        .collect();
    let expected: BTreeSet<(String, String)> =
        [("v1", "Pod"), ("kubevirt.io/v1", "VirtualMachineInstance"), ("kubevirt.io/v1", "KubeVirt")]
            .into_iter()
            .map(|(a, k)| (a.to_owned(), k.to_owned()))
            .collect();
    assert_eq!(resources, expected);
}

#[test]
fn a_module_without_metadata_has_none() {
    assert_eq!(metadata::read(&wat_fixture("guest.wat")).unwrap(), None);
    let module = policy_bytes();
    // Truncated: the module is invalid (and its metadata section, written last, cut off).
    let error = metadata::read(&module[..module.len() / 2]).expect_err("a truncated module");
    assert!(format!("{error:#}").contains("not a valid WebAssembly module"), "{error:#}");
}

/// Every effect a table row expects of pod-eviction or disruption-cause (its disruptions and its
/// holds) is one its metadata declares, and each declared one occurs.
#[test]
fn the_tables_effects_are_the_declared_ones() {
    use evac_testkit::{disruption_cases, eviction_cases, hold_cases};
    let disruptions = disruption_cases().into_iter().chain(hold_cases()).collect();
    for (policy, cases) in [("pod-eviction", eviction_cases()), ("disruption-cause", disruptions)] {
        let declared = evac_e2e::declared_effects(policy);
        let mut seen = std::collections::BTreeSet::new();
        for case in &cases {
            for effect in &case.expected.effects {
                let name = effect.type_name().to_owned();
                assert!(declared.contains(&name), "{policy}: {}: {name} is not declared", case.name);
                seen.insert(name);
            }
        }
        let mut declared = declared;
        declared.sort();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), declared, "{policy}: declared but never returned");
    }
}
