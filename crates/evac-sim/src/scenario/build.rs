//! The cluster a scenario describes, as the objects the simulator stores: nodes, the KubeVirt CR
//! and KubeVirt's eviction webhook ([`install`]), and for each VM its VMI and virt-launcher pod
//! ([`create_vms`]).

use crate::actors::NODE_NAME_LABEL;
use serde_json::{json, Value};

use super::spec::{group_names, PolicySpec, Scenario, VmGroup};
use crate::actors::kubelet::termination::GUEST_SHUTDOWN_ANNOTATION;
use crate::actors::launcher;
use crate::actors::migration::DIRTY_RATE_ANNOTATION;
use crate::api::virt_api;
use crate::objects::Vmi;
use crate::store::{Kind, Store};
use crate::ApiError;

/// KubeVirt's eviction webhook (the name tools and messages show).
pub const KUBEVIRT_WEBHOOK: &str = "virt-launcher-eviction-interceptor.kubevirt.io";
/// KubeVirt's eviction webhook for hotplug attachment pods.
pub const KUBEVIRT_HOTPLUG_WEBHOOK: &str = "hotplug-pod-eviction-interceptor.kubevirt.io";

/// evac's webhook configuration (`deploy/webhook.yaml`), beside KubeVirt's.
pub const EVAC_WEBHOOK_CONFIGURATION: &str = "evac-pod-eviction";
/// evac's webhook on `pods/eviction`.
pub const EVAC_WEBHOOK: &str = "pod-eviction.evac.kubevirt.io";

/// Installs the scenario's cluster in an empty store: its nodes, the KubeVirt CR and KubeVirt's
/// eviction webhook. `with_evac`: evac's webhook is registered beside KubeVirt's, or,
/// `replacing`, in its place.
pub fn install(store: &Store, scenario: &Scenario, with_evac: bool, replacing: bool) -> Result<(), ApiError> {
    virt_api::register(store);
    create_nodes(store, scenario)?;
    for policy in &scenario.cluster.migration_policies {
        let kind = Kind::new(
            evac_core::migration_policy::MIGRATION_POLICY_API_VERSION,
            evac_core::migration_policy::MIGRATION_POLICY_KIND,
        );
        store.create(&kind, "", migration_policy(policy), false)?;
    }
    for budget in &scenario.cluster.pod_disruption_budgets {
        let mut spec = json!({"selector": budget.selector});
        if let Some(min) = &budget.min_available {
            spec["minAvailable"] = min.clone();
        }
        if let Some(max) = &budget.max_unavailable {
            spec["maxUnavailable"] = max.clone();
        }
        let pdb = json!({"metadata": {"name": budget.name}, "spec": spec});
        store.create(&Kind::new("policy/v1", "PodDisruptionBudget"), &budget.namespace, pdb, false)?;
    }
    store.create(
        &Kind::new("kubevirt.io/v1", "KubeVirt"),
        "kubevirt",
        kubevirt(scenario, with_evac),
        false,
    )?;
    let webhooks = Kind::new("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration");
    if with_evac && replacing {
        store.create(&webhooks, "", eviction_webhook("virt-api-validator", KUBEVIRT_WEBHOOK, true), false)?;
    } else {
        store.create(&webhooks, "", kubevirt_eviction_webhooks(), false)?;
        if with_evac {
            let evac = eviction_webhook(EVAC_WEBHOOK_CONFIGURATION, EVAC_WEBHOOK, true);
            store.create(&webhooks, "", evac, false)?;
        }
    }
    Ok(())
}

/// The scenario's nodes, group by group, with their groups' labels and CPU.
fn create_nodes(store: &Store, scenario: &Scenario) -> Result<(), ApiError> {
    let nodes = scenario.node_names();
    let groups = scenario.cluster.nodes.iter().flat_map(|group| std::iter::repeat_n(group, group.count));
    for (name, group) in nodes.iter().zip(groups) {
        let mut node = node(name, &group.memory.0);
        for (key, value) in &group.labels {
            node["metadata"]["labels"][key] = json!(value);
        }
        if let Some(cpu) = &group.cpu {
            node["status"]["capacity"]["cpu"] = json!(cpu.0);
            node["status"]["allocatable"]["cpu"] = json!(cpu.0);
        }
        store.create(&Kind::new("v1", "Node"), "", node, false)?;
    }
    Ok(())
}

/// A `MigrationPolicy` object: its selectors, and the settings the scenario gives.
fn migration_policy(policy: &PolicySpec) -> Value {
    let mut selectors = json!({});
    if let Some(vmi) = &policy.selectors.virtual_machine_instance_selector {
        selectors["virtualMachineInstanceSelector"] = json!(vmi);
    }
    if let Some(namespace) = &policy.selectors.namespace_selector {
        selectors["namespaceSelector"] = json!(namespace);
    }
    let mut spec = json!({"selectors": selectors});
    let fields = [
        ("bandwidthPerMigration", policy.bandwidth_per_migration.as_ref().map(|b| json!(b.0))),
        ("completionTimeoutPerGiB", policy.completion_timeout_per_gib.map(|t| json!(t))),
        ("allowPostCopy", policy.allow_post_copy.map(|b| json!(b))),
        ("allowWorkloadDisruption", policy.allow_workload_disruption.map(|b| json!(b))),
        ("allowAutoConverge", policy.allow_auto_converge.map(|b| json!(b))),
    ];
    for (field, value) in fields {
        if let Some(value) = value {
            spec[field] = value;
        }
    }
    json!({"metadata": {"name": policy.name}, "spec": spec})
}

/// Creates the scenario's VMs: for each, its VMI and its launcher pod as virt-controller renders
/// it ([`launcher::render`]), created through the pod's admission (a mutating webhook evac
/// registered shapes it, as in a cluster where evac was installed before the VMs started) and
/// running on its node. Returns how many VMs there are.
pub fn create_vms(store: &Store, scenario: &Scenario) -> Result<usize, ApiError> {
    let nodes = scenario.node_names();
    let mut vms = 0;
    for (g, group) in scenario.cluster.vms.iter().enumerate() {
        let placement: Vec<&String> =
            if group.nodes.is_empty() { nodes.iter().collect() } else { group.nodes.iter().collect() };
        let shutdown = group
            .guest_shutdown_ms(&format!("cluster.vms[{g}].guestShutdown"))
            .map_err(ApiError::bad_request)?
            .map_or_else(|| "never".to_owned(), |ms| ms.to_string());
        for (i, name) in group_names(&group.name_prefix, group.count).enumerate() {
            let node = placement[(vms + i) % placement.len()];
            create_vm(store, group, &name, node, &shutdown)?;
        }
        vms += group.count;
    }
    Ok(vms)
}

/// One VM of a group, running on `node`: its VirtualMachine, its VMI, its launcher pod (and its
/// hotplug attachment pod, if the group has one).
fn create_vm(store: &Store, group: &VmGroup, name: &str, node: &str, shutdown: &str) -> Result<(), ApiError> {
    let mut vmi = vmi(group, name, node, shutdown);
    // Its VirtualMachine, whose run strategy the VM controller follows; the VMI is its.
    let vm = store.create(
        &Kind::new("kubevirt.io/v1", "VirtualMachine"),
        &group.namespace,
        json!({"metadata": {"name": name},
               "spec": {"runStrategy": group.run_strategy.as_str(),
                        "template": {"spec": vmi["spec"].clone()}},
               "status": {"printableStatus": "Running", "ready": true}}),
        false,
    )?;
    vmi["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": name,
        "uid": vm["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true,
    }]);
    if group.hotplug_volume {
        vmi["metadata"]["annotations"][crate::actors::hotplug::HOTPLUG_ANNOTATION] = json!("true");
    }
    if !group.request_evict_only {
        vmi["metadata"]["annotations"][launcher::NO_REQUEST_EVICT_ONLY_ANNOTATION] = json!("true");
    }
    let vmi =
        store.create(&Kind::new("kubevirt.io/v1", "VirtualMachineInstance"), &group.namespace, vmi, false)?;
    // Running on its node from the start.
    let mut pod = launcher::render(Vmi(&vmi));
    pod["spec"]["nodeName"] = json!(node);
    pod["status"] = json!({"phase": "Running"});
    let launcher = store.create_pod(&group.namespace, pod)?;
    if group.hotplug_volume {
        crate::actors::hotplug::attach(store, &launcher)?;
    }
    Ok(())
}

/// A VM group's VMI, running on `node`, with the group's memory, CPU, labels, placement and
/// settings (`shutdown`: the guest's shutdown time, in ms, or `never`).
fn vmi(group: &VmGroup, name: &str, node: &str, shutdown: &str) -> Value {
    let mut vmi = json!({
        "metadata": {"name": name, "labels": {NODE_NAME_LABEL: node},
                     "annotations": {GUEST_SHUTDOWN_ANNOTATION: shutdown,
                                     launcher::PRIORITY_ANNOTATION: group.priority.to_string()}},
        "spec": {"domain": {"memory": {"guest": group.memory.0}}, "tolerations": group.tolerations,
                 "terminationGracePeriodSeconds": group.termination_grace_period_seconds},
        "status": {"phase": "Running", "nodeName": node, "conditions": [migratable(group.migratable)]},
    });
    if let Some(strategy) = group.eviction_strategy {
        vmi["spec"]["evictionStrategy"] = json!(strategy.as_str());
    }
    for (key, value) in &group.labels {
        vmi["metadata"]["labels"][key] = json!(value);
    }
    if !group.node_selector.is_empty() {
        vmi["spec"]["nodeSelector"] = json!(group.node_selector);
    }
    if let Some(affinity) = &group.affinity {
        vmi["spec"]["affinity"] = affinity.clone();
    }
    if let Some(cpu) = &group.cpu {
        vmi["spec"]["domain"]["resources"] = json!({"requests": {"cpu": cpu.0}});
    }
    if let Some(rate) = &group.dirty_rate {
        vmi["metadata"]["annotations"][DIRTY_RATE_ANNOTATION] = json!(rate.0);
    }
    vmi
}

/// Memory a node keeps from pods (`kube-reserved`, `system-reserved` and the eviction
/// threshold): a node full of pods is not under memory pressure.
const RESERVED: f64 = 4.0 * 1024.0 * 1024.0 * 1024.0;

fn node(name: &str, memory: &str) -> Value {
    let capacity = crate::actors::quantity::bytes(memory).unwrap_or_default();
    let allocatable = format!("{}", (capacity - RESERVED).max(0.0) as u64);
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "capacity": {"memory": memory},
            "allocatable": {"memory": allocatable},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    })
}

fn migratable(yes: bool) -> Value {
    if yes {
        json!({"type": "LiveMigratable", "status": "True"})
    } else {
        json!({"type": "LiveMigratable", "status": "False", "reason": "DisksNotLiveMigratable",
               "message": "cannot migrate VMI: PVC rootdisk is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"})
    }
}

/// The feature gates that turn preemption, NoExecute taints and node pressure into evacuations.
pub const EVAC_FEATURE_GATES: [&str; 3] = [
    "PreemptionEvictionLiveMigration",
    "NoExecuteTaintEvictionLiveMigration",
    "NodePressureEvictionLiveMigration",
];

fn kubevirt(scenario: &Scenario, with_evac: bool) -> Value {
    let settings = &scenario.cluster.kubevirt;
    let gates = match &settings.feature_gates {
        Some(gates) => gates.clone(),
        None if with_evac => EVAC_FEATURE_GATES.map(str::to_owned).to_vec(),
        None => Vec::new(),
    };
    let mut configuration = json!({
        "developerConfiguration": {"featureGates": gates},
        "migrations": {
            "parallelMigrationsPerCluster": settings.parallel_migrations_per_cluster,
            "parallelOutboundMigrationsPerNode": settings.parallel_outbound_migrations_per_node,
            "bandwidthPerMigration": settings.bandwidth_per_migration.0,
        },
    });
    if let Some(strategy) = settings.eviction_strategy {
        configuration["evictionStrategy"] = json!(strategy.as_str());
    }
    json!({"metadata": {"name": "kubevirt"}, "spec": {"configuration": configuration}})
}

/// KubeVirt's two webhooks on `pods/eviction`, served by virt-api's pod-eviction admitter
/// (`pkg/virt-operator/resource/generate/components/webhooks.go`): one for launcher pods, one for
/// hotplug attachment pods, each with its match condition.
fn kubevirt_eviction_webhooks() -> Value {
    let mut configuration = eviction_webhook("virt-api-validator", KUBEVIRT_WEBHOOK, false);
    let launcher = &mut configuration["webhooks"][0];
    launcher["matchConditions"] =
        json!([{"name": "only-vms", "expression": "object.metadata.name.startsWith(\"virt-launcher\")"}]);
    let mut hotplug = launcher.clone();
    hotplug["name"] = json!(KUBEVIRT_HOTPLUG_WEBHOOK);
    hotplug["matchConditions"] = json!([{"name": "only-hotplug-pods", "expression": "object.metadata.name.startsWith(\"hp-volume-\")"}]);
    configuration["webhooks"].as_array_mut().expect("one webhook").push(hotplug);
    configuration
}

/// A webhook configuration on `pods/eviction` for launcher and attachment pods: KubeVirt's, served
/// by virt-api, or one served by evac's policy server (its pod-eviction policy), with evac's match
/// condition (`deploy/webhook.yaml`).
fn eviction_webhook(configuration: &str, webhook: &str, by_evac: bool) -> Value {
    let ((namespace, name), path) = if by_evac {
        (super::evac::SERVICE, super::evac::WEBHOOK_PATH)
    } else {
        (virt_api::SERVICE, "/launcher-eviction-validate")
    };
    json!({
        "metadata": {"name": configuration},
        "webhooks": [{
            "name": webhook,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Fail",
            "clientConfig": {"service": {"namespace": namespace, "name": name, "path": path}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods/eviction"]}],
            "matchConditions": [{"name": "kubevirt-pods",
                                 "expression": "request.name.startsWith('virt-launcher-') || request.name.startsWith('hp-volume-')"}],
        }],
    })
}
