//! The manifests under `deploy/`: they render with kustomize (`kubectl kustomize`), each object
//! decodes as its Kubernetes type, and they say what the webhook contract needs.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use evac_e2e::{declared_effects, repo_root};
use evac_evaluator::PoliciesFile;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
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
    // Beside KubeVirt's own webhook, which fails closed: an evac outage is KubeVirt alone.
    assert_eq!(webhook.failure_policy.as_deref(), Some("Ignore"));
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

/// (API group, resource) -> verbs.
type Grants = BTreeMap<(String, String), BTreeSet<String>>;

fn grant(grants: &mut Grants, api_version: &str, kind: &str, verbs: &[&str]) {
    let group = api_version.split_once('/').map_or("", |(group, _)| group).to_owned();
    let resource = evac_core::cluster::resource_for_kind(kind);
    grants.entry((group, resource)).or_default().extend(verbs.iter().map(|v| v.to_string()));
}

/// What a component needs: get, list and watch of what its watch caches hold (its policies'
/// contextAwareResources and `watched`), and the writes of the effects its policies declare
/// (`io.evac.effects`, each effect's writes as the executor makes them).
fn needed(objects: &BTreeMap<String, Value>, config_map: &str, watched: &[(&str, &str)]) -> Grants {
    needed_with(objects, config_map, watched, None)
}

/// [`needed`], with the effects the component carries out given (`Some`) instead of the ones its
/// policies declare: the hold endpoint asks disruption-cause about holds only.
fn needed_with(
    objects: &BTreeMap<String, Value>,
    config_map: &str,
    watched: &[(&str, &str)],
    effects: Option<&[&str]>,
) -> Grants {
    let config: ConfigMap = typed(objects, config_map);
    let file = PoliciesFile::parse(&config.data.unwrap()["policies.yml"], "/etc/evac".into()).unwrap();
    let mut grants = Grants::new();
    // metrics-server's API serves no watch: its NodeMetrics are listed (polled) instead.
    let reads = |api_version: &str| -> &'static [&'static str] {
        if api_version.starts_with("metrics.k8s.io/") {
            &["get", "list"]
        } else {
            &["get", "list", "watch"]
        }
    };
    for (api_version, kind) in watched {
        grant(&mut grants, api_version, kind, reads(api_version));
    }
    for entry in file.policies.values() {
        for resource in &entry.context_aware_resources {
            grant(&mut grants, &resource.api_version, &resource.kind, reads(&resource.api_version));
        }
        let module = file.module_path(&entry.module).unwrap();
        let policy = module.file_stem().unwrap().to_string_lossy().into_owned();
        let effects = match effects {
            Some(effects) => effects.iter().map(|e| e.to_string()).collect(),
            None => declared_effects(&policy),
        };
        for effect in effects {
            let writes = evac_cluster::effect_writes(&effect);
            assert!(!writes.is_empty(), "{policy} declares {effect}, which the executor does not know");
            for write in writes {
                let key = (write.group.to_owned(), write.resource.to_owned());
                grants.entry(key).or_default().insert(write.verb.to_owned());
            }
        }
    }
    grants
}

/// What a ClusterRole grants, with no rule limited to names (every rule is used in full).
fn granted(objects: &BTreeMap<String, Value>, role: &str) -> Grants {
    let role: ClusterRole = typed(objects, role);
    rule_grants(role.rules.unwrap())
}

fn rule_grants(rules: Vec<PolicyRule>) -> Grants {
    let mut grants = Grants::new();
    for rule in rules {
        assert!(rule.resource_names.is_none());
        for group in rule.api_groups.clone().unwrap() {
            for resource in rule.resources.clone().unwrap() {
                grants.entry((group.clone(), resource)).or_default().extend(rule.verbs.iter().cloned());
            }
        }
    }
    grants
}

/// Each component's ClusterRole grants exactly what its watch caches and its effects use: a
/// missing rule would be refused in a cluster, an unused one is privilege nobody needs.
#[test]
fn every_read_and_write_maps_to_a_rule_and_every_rule_to_one() {
    let objects = rendered();
    assert_eq!(granted(&objects, "ClusterRole/evac"), needed(&objects, "ConfigMap/evac-policies", &[]));
    assert_eq!(
        granted(&objects, "ClusterRole/evac-controller"),
        needed(&objects, "ConfigMap/evac-controller-policies", &evac::control::WATCHED)
    );
    // The hold endpoint: its node's watch caches, the hold recorded on the pod, the events told
    // on the pod.
    let mut hold =
        needed_with(&objects, "ConfigMap/evac-hold-policies", &[], Some(evac_core::hold::HOLD_EFFECTS));
    hold.entry(("".into(), "events".into())).or_default().insert("create".into());
    assert_eq!(granted(&objects, "ClusterRole/evac-hold"), hold);
    // The leader election's calls, in the controller's namespace only, bound to its account.
    let role: Role = typed(&objects, "Role/evac-controller-leader-election");
    assert_eq!(role.metadata.namespace.as_deref(), Some("evac-system"));
    let mut lease = Grants::new();
    for access in evac_cluster::kube::LEASE_ACCESS {
        lease.entry((access.group.into(), access.resource.into())).or_default().insert(access.verb.into());
    }
    assert_eq!(rule_grants(role.rules.unwrap()), lease);
    let binding: RoleBinding = typed(&objects, "RoleBinding/evac-controller-leader-election");
    assert_eq!(binding.role_ref.name, "evac-controller-leader-election");
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!(
        (subject.name.as_str(), subject.namespace.as_deref()),
        ("evac-controller", Some("evac-system"))
    );
}

/// The controller runs as the server does: non-root, read-only root filesystem, no privilege
/// escalation, with requests; two replicas that elect a leader, spread over nodes, one of which
/// a voluntary disruption may take at a time.
#[test]
fn the_controller_runs_its_policies_locked_down() {
    let objects = rendered();
    let controller: Deployment = typed(&objects, "Deployment/evac-controller");
    let spec = controller.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.service_account_name.as_deref(), Some("evac-controller"));
    assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
    let anti = pod.affinity.unwrap().pod_anti_affinity.unwrap();
    assert!(anti.preferred_during_scheduling_ignored_during_execution.is_some());
    let container = &pod.containers[0];
    let args = container.args.as_ref().unwrap();
    assert_eq!(args[0], "control");
    assert!(args.iter().any(|a| a == "--leader-elect=true"), "{args:?}");
    let security = container.security_context.as_ref().unwrap();
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert!(container.resources.as_ref().unwrap().requests.is_some());

    for name in ["evac", "evac-controller"] {
        let pdb: PodDisruptionBudget = typed(&objects, &format!("PodDisruptionBudget/{name}"));
        assert_eq!(pdb.spec.unwrap().min_available, Some(IntOrString::Int(1)), "{name}");
    }
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
    // Liveness is the process alone: a restart cannot bring the API server back.
    let probe = pod.containers[0].liveness_probe.as_ref().unwrap().http_get.as_ref().unwrap();
    assert_eq!(probe.path.as_deref(), Some("/liveness"));

    // The policies file in the ConfigMap is one `evac serve` accepts.
    let config: ConfigMap = typed(&objects, "ConfigMap/evac-policies");
    let text = &config.data.unwrap()["policies.yml"];
    let file = PoliciesFile::parse(text, "/etc/evac".into()).expect("policies.yml");
    let entry = &file.policies["pod-eviction"];
    assert_eq!(file.module_path(&entry.module).unwrap(), std::path::Path::new("/policies/pod-eviction.wasm"));
    assert_eq!(entry.context_aware_resources.len(), 3);
}
