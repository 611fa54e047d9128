//! The manifests under `deploy/`: they render with kustomize (`kubectl kustomize`), each object
//! decodes as its Kubernetes type, and they say what the webhook contract needs.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use std::sync::Arc;

use evac_cluster::MemoryStore;
use evac_core::effect::EffectType;
use evac_e2e::{declared_effects, repo_root};
use evac_evaluator::{PoliciesFile, PolicyMode};
use evac_runtime::capabilities::KubernetesCapabilities;
use evac_runtime::kubewarden;
use evac_runtime::wapc::{EngineOptions, Policy, PolicyEngine};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodSpec, ResourceQuota, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_json::Value;

/// `kubectl kustomize deploy/`, as objects by `Kind/name`.
fn rendered() -> BTreeMap<String, Value> {
    rendered_at("deploy")
}

/// `kubectl kustomize <dir>` (relative to the repository), as objects by `Kind/name`.
fn rendered_at(dir: &str) -> BTreeMap<String, Value> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo_root().join(dir))
        .output()
        .expect("kubectl is needed to render deploy/ and overlays/ (kubectl kustomize)");
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
            let writes = effect.parse::<EffectType>().map_or(&[][..], EffectType::writes);
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

/// The pod spec of a rendered Deployment or DaemonSet.
fn pod_spec(object: &Value) -> PodSpec {
    serde_json::from_value(object["spec"]["template"]["spec"].clone()).expect("a pod template")
}

/// Why `pod` would be refused under Pod Security's restricted level (v1.32's checks), if it would.
fn restricted_violations(pod: &PodSpec) -> Vec<String> {
    let mut found = Vec::new();
    for (what, set) in
        [("hostNetwork", pod.host_network), ("hostPID", pod.host_pid), ("hostIPC", pod.host_ipc)]
    {
        if set == Some(true) {
            found.push(what.to_owned());
        }
    }
    let allowed_volumes = [
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    ];
    for volume in pod.volumes.iter().flatten() {
        let value = serde_json::to_value(volume).unwrap();
        for key in value.as_object().unwrap().keys().filter(|k| *k != "name") {
            if !allowed_volumes.contains(&key.as_str()) {
                found.push(format!("volume {} of type {key}", volume.name));
            }
        }
    }
    let pod_security = pod.security_context.clone().unwrap_or_default();
    let pod_non_root = pod_security.run_as_non_root == Some(true);
    let pod_seccomp = pod_security.seccomp_profile.as_ref().map(|p| p.type_.clone());
    for container in pod.containers.iter().chain(pod.init_containers.iter().flatten()) {
        let name = &container.name;
        let security = container.security_context.clone().unwrap_or_default();
        if security.privileged == Some(true) {
            found.push(format!("{name}: privileged"));
        }
        if security.allow_privilege_escalation != Some(false) {
            found.push(format!("{name}: allowPrivilegeEscalation is not false"));
        }
        if !(security.run_as_non_root == Some(true) || pod_non_root && security.run_as_non_root.is_none()) {
            found.push(format!("{name}: runAsNonRoot is not true"));
        }
        if security.run_as_user == Some(0) || pod_security.run_as_user == Some(0) {
            found.push(format!("{name}: runAsUser 0"));
        }
        let seccomp = security.seccomp_profile.as_ref().map(|p| p.type_.clone()).or(pod_seccomp.clone());
        if !matches!(seccomp.as_deref(), Some("RuntimeDefault" | "Localhost")) {
            found.push(format!("{name}: seccompProfile is {seccomp:?}"));
        }
        let capabilities = security.capabilities.unwrap_or_default();
        if !capabilities.drop.unwrap_or_default().iter().any(|c| c == "ALL") {
            found.push(format!("{name}: capabilities do not drop ALL"));
        }
        if capabilities.add.unwrap_or_default().iter().any(|c| c != "NET_BIND_SERVICE") {
            found.push(format!("{name}: capabilities added"));
        }
        if container.ports.iter().flatten().any(|p| p.host_port.is_some_and(|port| port != 0)) {
            found.push(format!("{name}: a hostPort"));
        }
    }
    found
}

/// Every namespaced object is in a namespace deploy/ creates, and every workload passes its
/// namespace's Pod Security level: evac-system is restricted, and only the hold endpoint, which
/// needs the host's network, runs in a namespace that is not (and passes every other restricted
/// check there).
#[test]
fn every_pod_passes_its_namespaces_pod_security_level() {
    let objects = rendered();
    let mut levels = BTreeMap::new();
    for (key, object) in &objects {
        if key.starts_with("Namespace/") {
            let namespace: Namespace = serde_json::from_value(object.clone()).unwrap();
            let labels = namespace.metadata.labels.unwrap_or_default();
            let level = labels.get("pod-security.kubernetes.io/enforce").cloned();
            levels.insert(
                namespace.metadata.name.unwrap(),
                level.unwrap_or_else(|| panic!("{key}: no Pod Security level")),
            );
        }
    }
    assert_eq!(levels.get("evac-system").map(String::as_str), Some("restricted"));

    let cluster_scoped = [
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ];
    let mut outside_restricted = Vec::new();
    for (key, object) in &objects {
        let kind = object["kind"].as_str().unwrap();
        let namespace = object["metadata"]["namespace"].as_str();
        if cluster_scoped.contains(&kind) {
            assert_eq!(namespace, None, "{key} is cluster-scoped");
            continue;
        }
        let namespace = namespace.unwrap_or_else(|| panic!("{key} names no namespace"));
        let level = levels
            .get(namespace)
            .unwrap_or_else(|| panic!("{key}: deploy/ creates no namespace {namespace}"));
        if !matches!(kind, "Deployment" | "DaemonSet") {
            continue;
        }
        let pod = pod_spec(object);
        let violations = restricted_violations(&pod);
        if level == "restricted" {
            assert!(
                violations.is_empty(),
                "{key} would be refused in {namespace} (restricted): {violations:?}"
            );
        } else {
            // Only the host network, which the hold endpoint needs, is why it is not restricted.
            assert_eq!(violations, ["hostNetwork"], "{key} in {namespace} ({level})");
            outside_restricted.push(key.clone());
        }
    }
    assert_eq!(outside_restricted, ["DaemonSet/evac-hold"]);
    let hold: DaemonSet = typed(&objects, "DaemonSet/evac-hold");
    assert_eq!(hold.metadata.namespace.as_deref(), Some("evac-hold"));
}

/// The webhook is on the path of every drain (and of every launcher pod's creation): its replicas
/// spread over nodes where they can, so that a drained node takes one of them only, and it runs
/// at the priority of the cluster's own components, so that node pressure or a preemptor takes a
/// workload before it.
#[test]
fn the_webhook_spreads_over_nodes_at_cluster_critical_priority() {
    let objects = rendered();
    let deployment: Deployment = typed(&objects, "Deployment/evac");
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let template_labels = spec.template.metadata.unwrap().labels.unwrap();
    let pod = spec.template.spec.unwrap();
    assert_eq!(pod.priority_class_name.as_deref(), Some("system-cluster-critical"));
    let anti = pod.affinity.and_then(|a| a.pod_anti_affinity).expect("podAntiAffinity");
    // Preferred, not required: a cluster of one schedulable node still runs both replicas.
    assert!(anti.required_during_scheduling_ignored_during_execution.is_none());
    let terms = anti.preferred_during_scheduling_ignored_during_execution.expect("preferred anti-affinity");
    let term = &terms[0].pod_affinity_term;
    assert_eq!(term.topology_key, "kubernetes.io/hostname");
    let selector = term.label_selector.clone().unwrap().match_labels.unwrap();
    assert!(!selector.is_empty());
    for (key, value) in &selector {
        assert_eq!(template_labels.get(key), Some(value), "the anti-affinity selects the webhook's own pods");
    }
}

/// A pod of a critical priority class is admitted wherever the cluster limits those classes to
/// namespaces with a quota for them: each namespace that runs one has a ResourceQuota scoped to
/// its class.
#[test]
fn every_critical_pod_has_a_quota_for_its_class() {
    let objects = rendered();
    let mut critical = 0;
    for (key, object) in
        objects.iter().filter(|(key, _)| key.starts_with("Deployment/") || key.starts_with("DaemonSet/"))
    {
        let Some(class) = pod_spec(object).priority_class_name.filter(|c| c.starts_with("system-")) else {
            continue;
        };
        critical += 1;
        let namespace = object["metadata"]["namespace"].as_str().unwrap();
        let quota_names_it =
            objects.iter().filter(|(k, _)| k.starts_with("ResourceQuota/")).any(|(_, quota)| {
                let quota: ResourceQuota = serde_json::from_value(quota.clone()).unwrap();
                quota.metadata.namespace.as_deref() == Some(namespace)
                    && quota
                        .spec
                        .and_then(|s| s.scope_selector)
                        .and_then(|s| s.match_expressions)
                        .is_some_and(|e| {
                            e.iter().any(|e| {
                                e.scope_name == "PriorityClass"
                                    && e.operator == "In"
                                    && e.values.iter().flatten().any(|v| *v == class)
                            })
                        })
            });
        assert!(quota_names_it, "{key} runs at {class} in {namespace}, which has no ResourceQuota for it");
    }
    assert_eq!(critical, 2, "the webhook and the hold endpoint");
}

/// evac control's probes: readiness and liveness on its metrics port (where `--metrics-addr`
/// serves them), liveness less eager than readiness.
#[test]
fn the_controller_is_probed_on_its_metrics_port() {
    let objects = rendered();
    let controller: Deployment = typed(&objects, "Deployment/evac-controller");
    let pod = controller.spec.unwrap().template.spec.unwrap();
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap();
    assert!(args.iter().any(|a| a == "--metrics-addr=0.0.0.0:8082"), "{args:?}");
    let port_of = |port: &IntOrString| match port {
        IntOrString::Int(number) => *number,
        IntOrString::String(name) => {
            let ports = container.ports.as_ref().unwrap();
            ports.iter().find(|p| p.name.as_deref() == Some(name)).expect("a named port").container_port
        }
    };
    let readiness = container.readiness_probe.clone().expect("readinessProbe");
    let get = readiness.http_get.expect("an httpGet readiness probe");
    assert_eq!((get.path.as_deref(), port_of(&get.port)), (Some("/readiness"), 8082));
    let liveness = container.liveness_probe.clone().expect("livenessProbe");
    let get = liveness.http_get.expect("an httpGet liveness probe");
    assert_eq!((get.path.as_deref(), port_of(&get.port)), (Some("/liveness"), 8082));
    assert!(liveness.initial_delay_seconds.unwrap_or(0) > 0);
    assert!(liveness.period_seconds.unwrap_or(10) >= readiness.period_seconds.unwrap_or(10));
}

/// The policies file of a rendered ConfigMap, as YAML (its comments left out).
fn policies_yaml(objects: &BTreeMap<String, Value>, config_map: &str) -> serde_yaml::Value {
    let config: ConfigMap = typed(objects, config_map);
    serde_yaml::from_str(&config.data.unwrap()["policies.yml"]).expect("policies.yml is YAML")
}

/// The same file as `PoliciesFile`, as evac loads it.
fn policies_file(objects: &BTreeMap<String, Value>, config_map: &str) -> PoliciesFile {
    let config: ConfigMap = typed(objects, config_map);
    PoliciesFile::parse(&config.data.unwrap()["policies.yml"], "/etc/evac".into())
        .unwrap_or_else(|e| panic!("{config_map}: {e:#}"))
}

/// The base's policies files, changed as `change` says, are the overlay's; and every object but
/// those in `changed` renders as in the base.
fn differs_from_base_only_in(
    overlay: &BTreeMap<String, Value>,
    changed: &[&str],
    change: impl Fn(&str, &str, &mut serde_yaml::Mapping),
) {
    let base = rendered();
    for config_map in changed.iter().filter(|key| key.starts_with("ConfigMap/")) {
        let mut expected = policies_yaml(&base, config_map);
        for (id, entry) in expected.as_mapping_mut().unwrap() {
            change(config_map, id.as_str().unwrap(), entry.as_mapping_mut().unwrap());
        }
        assert_eq!(
            policies_yaml(overlay, config_map),
            expected,
            "{config_map}: the overlay's file is out of step with deploy/"
        );
    }
    let unchanged = |objects: &BTreeMap<String, Value>| -> BTreeMap<String, Value> {
        objects
            .iter()
            .filter(|(key, _)| !changed.contains(&key.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(unchanged(overlay), unchanged(&base), "the overlay changes more than it says");
}

const POLICY_CONFIG_MAPS: [&str; 3] =
    ["ConfigMap/evac-policies", "ConfigMap/evac-controller-policies", "ConfigMap/evac-hold-policies"];

/// overlays/monitor: every policy of every component in monitor mode, and nothing else changed.
#[test]
fn the_monitor_overlay_monitors_every_policy() {
    let overlay = rendered_at("overlays/monitor");
    for config_map in POLICY_CONFIG_MAPS {
        let file = policies_file(&overlay, config_map);
        assert!(!file.policies.is_empty());
        for (id, entry) in &file.policies {
            assert_eq!(entry.policy_mode, PolicyMode::Monitor, "{config_map}: {id}");
        }
    }
    differs_from_base_only_in(&overlay, &POLICY_CONFIG_MAPS, |_, _, entry| {
        entry.insert("policyMode".into(), "monitor".into());
    });
}

/// overlays/replace-evacuation-controller: evac control's policies and the hold's disruption-cause
/// say KubeVirt's evacuation controller is off, and the eviction webhook fails closed; nothing
/// else changed.
#[test]
fn the_replacing_overlay_turns_evac_into_the_evacuation_controller() {
    let overlay = rendered_at("overlays/replace-evacuation-controller");
    let config_maps = ["ConfigMap/evac-controller-policies", "ConfigMap/evac-hold-policies"];
    for config_map in config_maps {
        for (id, entry) in policies_file(&overlay, config_map).policies {
            let settings = entry.settings.unwrap_or_default();
            assert_eq!(settings["kubevirtEvacuationController"], false, "{config_map}: {id}");
        }
    }
    let webhook: ValidatingWebhookConfiguration =
        typed(&overlay, "ValidatingWebhookConfiguration/evac-pod-eviction");
    assert_eq!(webhook.webhooks.unwrap()[0].failure_policy.as_deref(), Some("Fail"));
    // The webhook: only its failure policy differs.
    let mut expected = rendered()["ValidatingWebhookConfiguration/evac-pod-eviction"].clone();
    expected["webhooks"][0]["failurePolicy"] = "Fail".into();
    assert_eq!(overlay["ValidatingWebhookConfiguration/evac-pod-eviction"], expected);

    let mut changed = config_maps.to_vec();
    changed.push("ValidatingWebhookConfiguration/evac-pod-eviction");
    differs_from_base_only_in(&overlay, &changed, |_, _, entry| {
        let settings = entry.entry("settings".into()).or_insert_with(|| serde_yaml::Mapping::new().into());
        settings.as_mapping_mut().unwrap().insert("kubevirtEvacuationController".into(), false.into());
    });
}

/// overlays/without-hold: everything of the hold gone (the DaemonSet, its namespace, account,
/// role, policies and quota, the launcher-hold webhook and policy), every namespace left
/// restricted and no pod on the host's network; nothing else changed.
#[test]
fn the_overlay_without_the_hold_leaves_no_part_of_it() {
    let base = rendered();
    let overlay = rendered_at("overlays/without-hold");
    let hold: BTreeSet<String> = base
        .iter()
        .filter(|(key, object)| {
            object["metadata"]["namespace"] == "evac-hold"
                || ["Namespace/evac-hold", "ClusterRole/evac-hold", "ClusterRoleBinding/evac-hold"]
                    .contains(&key.as_str())
                || key.as_str() == "MutatingWebhookConfiguration/evac-launcher-hold"
        })
        .map(|(key, _)| key.clone())
        .collect();
    assert_eq!(hold.len(), 8, "{hold:?}");
    let left: BTreeSet<&String> = overlay.keys().collect();
    let expected: BTreeSet<&String> = base.keys().filter(|key| !hold.contains(*key)).collect();
    assert_eq!(left, expected);

    let serve = policies_file(&overlay, "ConfigMap/evac-policies");
    assert_eq!(serve.policies.keys().collect::<Vec<_>>(), ["pod-eviction"]);
    for (key, object) in &overlay {
        if key.starts_with("Namespace/") {
            assert_eq!(
                object["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
                "{key}"
            );
        }
        if key.starts_with("Deployment/") || key.starts_with("DaemonSet/") {
            assert_ne!(pod_spec(object).host_network, Some(true), "{key}");
        }
    }

    let base_without_hold: BTreeMap<String, Value> =
        base.into_iter().filter(|(key, _)| !hold.contains(key)).collect();
    let mut expected_serve = policies_yaml(&base_without_hold, "ConfigMap/evac-policies");
    expected_serve.as_mapping_mut().unwrap().remove("launcher-hold");
    assert_eq!(policies_yaml(&overlay, "ConfigMap/evac-policies"), expected_serve);
    let unchanged = |objects: &BTreeMap<String, Value>| -> BTreeMap<String, Value> {
        objects
            .iter()
            .filter(|(key, _)| *key != "ConfigMap/evac-policies")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(unchanged(&overlay), unchanged(&base_without_hold));
}

/// A policy's metadata.yml, as JSON.
fn policy_metadata(policy: &str) -> Value {
    let path = repo_root().join("policies").join(policy).join("metadata.yml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap()
}

/// Whether the built module accepts `settings` (its own validate_settings), and why not.
fn module_accepts(engine: &PolicyEngine, policy: &str, settings: &Value) -> Result<(), String> {
    let path = repo_root().join("dist/policies").join(format!("{policy}.wasm"));
    assert!(path.is_file(), "{} is missing: run `make build`", path.display());
    let module = engine.load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
    let policy = Policy::new(module, Arc::new(KubernetesCapabilities::new(Arc::new(MemoryStore::empty()))));
    let raw = serde_json::value::to_raw_value(settings).unwrap();
    let answer = kubewarden::validate_settings(&policy, &raw).expect("validate_settings answers");
    if answer.valid {
        Ok(())
    } else {
        Err(answer.message.unwrap_or_default())
    }
}

/// The Kubewarden ClusterAdmissionPolicies (deploy/kubewarden) are the modules as they describe
/// themselves: each one's rules, mutating and contextAwareResources its metadata.yml's, its module
/// the release's OCI artifact, its settings deploy/'s for that policy and accepted by the module,
/// its match conditions and failure policy evac's webhook's; and the PolicyServer's account may
/// read exactly what they read.
#[test]
fn the_kubewarden_policies_are_the_modules_as_deploy_runs_them() {
    let objects = rendered_at("deploy/kubewarden");
    let base = rendered();
    let serve = policies_file(&base, "ConfigMap/evac-policies");
    let control = policies_file(&base, "ConfigMap/evac-controller-policies");
    let engine = PolicyEngine::new(EngineOptions::default()).expect("engine");
    let version = env!("CARGO_PKG_VERSION");
    let mut reads = Grants::new();
    let mut seen = Vec::new();
    for (key, object) in objects.iter().filter(|(key, _)| key.starts_with("ClusterAdmissionPolicy/")) {
        assert_eq!(object["apiVersion"], "policies.kubewarden.io/v1", "{key}");
        assert!(object["metadata"].get("namespace").is_none(), "{key} is cluster-scoped");
        let spec = &object["spec"];
        let module = spec["module"].as_str().unwrap();
        let (name, tag) = module
            .strip_prefix("registry://ghcr.io/evac-project/policies/")
            .and_then(|m| m.split_once(':'))
            .unwrap_or_else(|| panic!("{key}: module {module}"));
        assert_eq!(tag, format!("v{version}"), "{key}: the module is the release's");
        assert_eq!(key.as_str(), format!("ClusterAdmissionPolicy/evac-{name}"));
        seen.push(name.to_owned());

        let metadata = policy_metadata(name);
        assert_eq!(spec["rules"], metadata["rules"], "{key}: rules");
        assert_eq!(spec["mutating"], metadata["mutating"], "{key}: mutating");
        assert_eq!(spec["backgroundAudit"], false, "{key}");
        assert_eq!(metadata["backgroundAudit"], false, "{name}'s metadata.yml");
        let resources = |value: &Value| -> BTreeSet<(String, String)> {
            value
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| {
                    (r["apiVersion"].as_str().unwrap().to_owned(), r["kind"].as_str().unwrap().to_owned())
                })
                .collect()
        };
        let context = resources(&spec["contextAwareResources"]);
        assert_eq!(context, resources(&metadata["contextAwareResources"]), "{key}: contextAwareResources");
        for (api_version, kind) in &context {
            let verbs: &[&str] = if api_version.starts_with("metrics.k8s.io/") {
                &["get", "list"]
            } else {
                &["get", "list", "watch"]
            };
            grant(&mut reads, api_version, kind, verbs);
        }

        // The settings deploy/ gives the policy, which the module accepts.
        let entry = match name {
            "pod-eviction" | "launcher-hold" => &serve.policies[name],
            _ => &control.policies[name],
        };
        let settings = entry.settings.clone().unwrap_or_else(|| serde_json::json!({}));
        assert_eq!(spec["settings"], settings, "{key}: settings");
        module_accepts(&engine, name, &settings)
            .unwrap_or_else(|e| panic!("{key}: the module refuses its settings: {e}"));

        // The verdicts work under Kubewarden; the controller's policies only audit there.
        let mode = if ["pod-eviction", "launcher-hold"].contains(&name) { "protect" } else { "monitor" };
        assert_eq!(spec["mode"], mode, "{key}");
        assert_eq!(spec["failurePolicy"], "Ignore", "{key}");
        assert_eq!(spec["sideEffects"], "None", "{key}: Kubewarden writes nothing");
        let webhook = match name {
            "pod-eviction" => Some(&base["ValidatingWebhookConfiguration/evac-pod-eviction"]),
            "launcher-hold" => Some(&base["MutatingWebhookConfiguration/evac-launcher-hold"]),
            _ => None,
        };
        match webhook {
            Some(webhook) => {
                assert_eq!(spec["matchConditions"], webhook["webhooks"][0]["matchConditions"], "{key}");
                assert_eq!(spec["failurePolicy"], webhook["webhooks"][0]["failurePolicy"], "{key}");
            }
            None => assert!(spec.get("matchConditions").is_none(), "{key}"),
        }
    }
    seen.sort();
    assert_eq!(seen, ["disruption-cause", "evacuation", "launcher-hold", "pod-eviction"]);

    assert_eq!(granted(&objects, "ClusterRole/evac-kubewarden-policy-server"), reads);
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding =
        typed(&objects, "ClusterRoleBinding/evac-kubewarden-policy-server");
    assert_eq!(binding.role_ref.name, "evac-kubewarden-policy-server");
    let subject = &binding.subjects.unwrap()[0];
    assert_eq!((subject.name.as_str(), subject.namespace.as_deref()), ("policy-server", Some("kubewarden")));
}

/// A module refuses settings it does not know: the check above can fail.
#[test]
fn a_module_refuses_settings_it_does_not_know() {
    let engine = PolicyEngine::new(EngineOptions::default()).expect("engine");
    assert!(module_accepts(&engine, "launcher-hold", &serde_json::json!({"windowSeconds": 0})).is_err());
}

/// overlays/kubewarden: Kubewarden's policies in place of evac serve, and evac control and evac
/// hold beside them (they carry out what Kubewarden does not); nothing of evac serve is left.
#[test]
fn the_kubewarden_overlay_runs_the_controller_and_the_hold_in_place_of_the_server() {
    let base = rendered();
    let kubewarden = rendered_at("deploy/kubewarden");
    let overlay = rendered_at("overlays/kubewarden");
    let server: BTreeSet<String> = [
        "Deployment/evac",
        "Service/evac-webhook",
        "PodDisruptionBudget/evac",
        "ConfigMap/evac-policies",
        "ServiceAccount/evac",
        "ClusterRole/evac",
        "ClusterRoleBinding/evac",
        "ValidatingWebhookConfiguration/evac-pod-eviction",
        "MutatingWebhookConfiguration/evac-launcher-hold",
        "Issuer/evac-selfsigned",
        "Certificate/evac-webhook",
        "ResourceQuota/evac-critical-pods",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let mut expected: BTreeMap<String, Value> =
        base.into_iter().filter(|(key, _)| !server.contains(key)).chain(kubewarden).collect();
    assert_eq!(overlay.len(), expected.len(), "{:?}", overlay.keys().collect::<Vec<_>>());
    for (key, object) in &overlay {
        assert_eq!(Some(object), expected.remove(key).as_ref(), "{key}");
    }
    for workload in ["Deployment/evac-controller", "DaemonSet/evac-hold"] {
        assert!(overlay.contains_key(workload), "{workload}");
    }
}
