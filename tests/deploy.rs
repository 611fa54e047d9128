//! The manifests under `deploy/`: they render with kustomize (`kubectl kustomize`), each object
//! decodes as its Kubernetes type, and they say what the webhook contract needs.

use std::collections::BTreeMap;
use std::process::Command;

use evac_e2e::repo_root;
use evac_evaluator::PoliciesFile;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::rbac::v1::ClusterRole;
use serde::Deserialize;
use serde_json::Value;

/// `kubectl kustomize deploy/`, as objects by `Kind/name`.
fn rendered() -> BTreeMap<String, Value> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo_root().join("deploy"))
        .output()
        .expect("kubectl is needed to render deploy/ (kubectl kustomize)");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| {
            let object = Value::deserialize(doc).expect("a YAML object");
            (
                format!(
                    "{}/{}",
                    object["kind"].as_str().unwrap(),
                    object["metadata"]["name"].as_str().unwrap()
                ),
                object,
            )
        })
        .collect()
}

fn typed<T: serde::de::DeserializeOwned>(objects: &BTreeMap<String, Value>, key: &str) -> T {
    let object = objects.get(key).unwrap_or_else(|| panic!("deploy/ has no {key}: {:?}", objects.keys()));
    serde_json::from_value(object.clone()).unwrap_or_else(|e| panic!("{key} is not a valid object: {e}"))
}

#[test]
fn the_webhook_sends_kubevirt_evictions_to_evac() {
    let objects = rendered();
    let config: ValidatingWebhookConfiguration =
        typed(&objects, "ValidatingWebhookConfiguration/evac-pod-eviction");
    let webhooks = config.webhooks.unwrap();
    assert_eq!(webhooks.len(), 1);
    let webhook = &webhooks[0];
    assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(webhook.side_effects, "NoneOnDryRun");
    assert_eq!(webhook.timeout_seconds, Some(10));
    assert_eq!(webhook.admission_review_versions, ["v1"]);
    let rule = &webhook.rules.as_ref().unwrap()[0];
    assert_eq!(rule.resources.as_deref(), Some(&["pods/eviction".to_owned()][..]));
    assert_eq!(rule.operations.as_deref(), Some(&["CREATE".to_owned()][..]));
    let conditions = webhook.match_conditions.as_ref().unwrap();
    let expression = &conditions[0].expression;
    assert!(expression.contains("request.name.startsWith('virt-launcher-')"), "{expression}");
    assert!(expression.contains("request.name.startsWith('hp-volume-')"), "{expression}");
    let service = webhook.client_config.service.as_ref().unwrap();
    assert_eq!(service.path.as_deref(), Some("/validate/pod-eviction"));

    let svc: Service = typed(&objects, "Service/evac-webhook");
    assert_eq!(svc.metadata.namespace.as_deref(), Some(service.namespace.as_str()));
    assert!(svc.spec.unwrap().ports.unwrap().iter().any(|p| p.port == service.port.unwrap_or(443)));
}

#[test]
fn the_server_gets_least_privilege() {
    let objects = rendered();
    let role: ClusterRole = typed(&objects, "ClusterRole/evac");
    let mut grants = BTreeMap::new();
    for rule in role.rules.unwrap() {
        assert!(rule.resource_names.is_none());
        for resource in rule.resources.unwrap() {
            let mut verbs = rule.verbs.clone();
            verbs.sort();
            grants.insert(resource, verbs.join(","));
        }
    }
    let expected: BTreeMap<String, String> = [
        ("pods", "get,list,watch"),
        ("virtualmachineinstances", "get,list,patch,watch"),
        ("kubevirts", "get,list,watch"),
    ]
    .into_iter()
    .map(|(r, v)| (r.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(grants, expected);
}

#[test]
fn the_deployment_serves_the_configured_policies_over_tls() {
    let objects = rendered();
    let deployment: Deployment = typed(&objects, "Deployment/evac");
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    let args = pod.containers[0].args.clone().unwrap();
    assert_eq!(args[0], "serve");
    for flag in [
        "--config=/etc/evac/policies.yml",
        "--cert-file=/etc/evac/tls/tls.crt",
        "--key-file=/etc/evac/tls/tls.key",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} in {args:?}");
    }
    assert!(!args.iter().any(|a| a == "--insecure-http"));
    let probe = pod.containers[0].readiness_probe.as_ref().unwrap().http_get.as_ref().unwrap();
    assert_eq!(probe.path.as_deref(), Some("/readiness"));

    // The policies file in the ConfigMap is one `evac serve` accepts.
    let config: ConfigMap = typed(&objects, "ConfigMap/evac-policies");
    let text = &config.data.unwrap()["policies.yml"];
    let file = PoliciesFile::parse(text, "/etc/evac".into()).expect("policies.yml");
    let entry = &file.policies["pod-eviction"];
    assert_eq!(file.module_path(&entry.module).unwrap(), std::path::Path::new("/policies/pod-eviction.wasm"));
    assert_eq!(entry.context_aware_resources.len(), 3);
}
