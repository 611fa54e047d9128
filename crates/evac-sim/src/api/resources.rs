//! The resources the simulated API server serves, and its discovery documents (`/api`, `/apis`,
//! `/api/v1`, `/apis/<group>/<version>`), which kube-rs and kubectl read to find them.

use serde_json::{json, Value};

use crate::store::Kind;

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// `""` for the core group.
    pub group: &'static str,
    /// The group's version, e.g. `v1`.
    pub version: &'static str,
    /// The plural name in the API's paths, e.g. `virtualmachineinstances`.
    pub plural: &'static str,
    /// The kind, e.g. `VirtualMachineInstance`.
    pub kind: &'static str,
    /// Whether the objects live in namespaces.
    pub namespaced: bool,
    /// The short names `kubectl` accepts, e.g. `vmi`.
    pub short_names: &'static [&'static str],
    /// Subresources served beside the resource, e.g. `status`.
    pub subresources: &'static [&'static str],
    /// The verbs it serves: all of them (`VERBS`), or `get` and `list` for metrics-server's
    /// NodeMetrics, which cannot be watched or written.
    pub verbs: &'static [&'static str],
}

impl Resource {
    /// The `apiVersion`: `<version>` for the core group, else `<group>/<version>`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The [`Kind`] the store keeps these objects under.
    pub fn store_kind(&self) -> Kind {
        Kind::new(&self.api_version(), self.kind)
    }
}

/// Every resource the API server serves: namespaces, nodes, pods, events, DaemonSets (which
/// `kubectl drain --ignore-daemonsets` looks up for their pods), PodDisruptionBudgets, Leases
/// (leader election), ValidatingWebhookConfigurations, KubeVirt's VMIs, migrations and
/// KubeVirt CRs, metrics-server's NodeMetrics, and, read-only and empty, the resources common
/// controllers inform on (`read_only`).
pub const RESOURCES: &[Resource] = &[
    Resource {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        subresources: &["status"],
        verbs: VERBS,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "nodes",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        subresources: &["status"],
        verbs: VERBS,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "pods",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        subresources: &["status", "eviction"],
        verbs: VERBS,
    },
    Resource {
        group: "",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        subresources: &[],
        verbs: VERBS,
    },
    read_only("", "persistentvolumeclaims", "PersistentVolumeClaim", true, &["pvc"]),
    read_only("", "persistentvolumes", "PersistentVolume", false, &["pv"]),
    read_only("", "services", "Service", true, &["svc"]),
    read_only("", "replicationcontrollers", "ReplicationController", true, &["rc"]),
    read_only("", "configmaps", "ConfigMap", true, &["cm"]),
    Resource {
        group: "apps",
        version: "v1",
        plural: "daemonsets",
        kind: "DaemonSet",
        namespaced: true,
        short_names: &["ds"],
        subresources: &["status"],
        verbs: VERBS,
    },
    read_only("apps", "replicasets", "ReplicaSet", true, &["rs"]),
    read_only("apps", "statefulsets", "StatefulSet", true, &["sts"]),
    read_only("apps", "deployments", "Deployment", true, &["deploy"]),
    Resource {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        subresources: &["status"],
        verbs: VERBS,
    },
    Resource {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        subresources: &[],
        verbs: VERBS,
    },
    Resource {
        group: "admissionregistration.k8s.io",
        version: "v1",
        plural: "validatingwebhookconfigurations",
        kind: "ValidatingWebhookConfiguration",
        namespaced: false,
        short_names: &[],
        subresources: &[],
        verbs: VERBS,
    },
    // KubeVirt's MigrationPolicies: the simulated migration controller applies the one that
    // matches a VMI (`actors::migration`).
    Resource {
        group: "migrations.kubevirt.io",
        version: "v1alpha1",
        plural: "migrationpolicies",
        kind: "MigrationPolicy",
        namespaced: false,
        short_names: &[],
        subresources: &["status"],
        verbs: VERBS,
    },
    // VirtualMachines: the simulated VM controller follows their run strategy
    // (`actors::virt_controller`).
    Resource {
        group: "kubevirt.io",
        version: "v1",
        plural: "virtualmachines",
        kind: "VirtualMachine",
        namespaced: true,
        short_names: &["vm", "vms"],
        subresources: &["status"],
        verbs: VERBS,
    },
    Resource {
        group: "kubevirt.io",
        version: "v1",
        plural: "virtualmachineinstances",
        kind: "VirtualMachineInstance",
        namespaced: true,
        short_names: &["vmi", "vmis"],
        subresources: &[],
        verbs: VERBS,
    },
    Resource {
        group: "kubevirt.io",
        version: "v1",
        plural: "virtualmachineinstancemigrations",
        kind: "VirtualMachineInstanceMigration",
        namespaced: true,
        short_names: &["vmim"],
        subresources: &[],
        verbs: VERBS,
    },
    Resource {
        group: "kubevirt.io",
        version: "v1",
        plural: "kubevirts",
        kind: "KubeVirt",
        namespaced: true,
        short_names: &["kv"],
        subresources: &[],
        verbs: VERBS,
    },
    // metrics-server's aggregated API (`metrics.k8s.io/v1beta1`, `pkg/api/install.go`): NodeMetrics
    // under the plural `nodes`, read-only and without watch.
    Resource {
        group: "metrics.k8s.io",
        version: "v1beta1",
        plural: "nodes",
        kind: "NodeMetrics",
        namespaced: false,
        short_names: &[],
        subresources: &[],
        verbs: &["get", "list"],
    },
    read_only("batch", "jobs", "Job", true, &[]),
    read_only("storage.k8s.io", "storageclasses", "StorageClass", false, &["sc"]),
    read_only("scheduling.k8s.io", "priorityclasses", "PriorityClass", false, &["pc"]),
];

/// A resource the simulator has no objects of, served read-only and empty (`get`, `list`,
/// `watch`), so that the informers of common controllers (the descheduler's on PVCs, priority
/// classes, owners) start against it as against a real API server.
const fn read_only(
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
) -> Resource {
    Resource {
        group,
        version: "v1",
        plural,
        kind,
        namespaced,
        short_names,
        subresources: &[],
        verbs: READ_ONLY,
    }
}

/// The verbs of a resource served read-only.
const READ_ONLY: &[&str] = &["get", "list", "watch"];

/// The resource served at `group`/`version`/`plural`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES.iter().find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The verbs of a resource kept in the API server's own storage.
pub const VERBS: &[&str] = &["create", "delete", "get", "list", "patch", "update", "watch"];

/// `GET /api`.
pub fn core_versions() -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"],
           "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}]})
}

fn groups() -> Vec<&'static str> {
    let mut groups: Vec<_> = RESOURCES.iter().map(|r| r.group).filter(|g| !g.is_empty()).collect();
    groups.dedup();
    groups
}

fn group_document(group: &str) -> Value {
    let version = RESOURCES.iter().find(|r| r.group == group).map_or("v1", |r| r.version);
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv], "preferredVersion": gv})
}

/// `GET /apis`.
pub fn group_list() -> Value {
    let groups: Vec<Value> = groups().into_iter().map(group_document).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/<group>`, if the group is served.
pub fn group(group: &str) -> Option<Value> {
    groups().contains(&group).then(|| {
        let mut document = group_document(group);
        document["kind"] = json!("APIGroup");
        document["apiVersion"] = json!("v1");
        document
    })
}

/// `GET /api/v1` or `GET /apis/<group>/<version>`, if served.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let served: Vec<&Resource> =
        RESOURCES.iter().filter(|r| r.group == group && r.version == version).collect();
    if served.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for r in &served {
        resources.push(
            json!({"name": r.plural, "singularName": r.kind.to_lowercase(), "namespaced": r.namespaced,
                              "kind": r.kind, "verbs": r.verbs, "shortNames": r.short_names}),
        );
        for sub in r.subresources {
            let name = format!("{}/{sub}", r.plural);
            resources.push(match *sub {
                // kubectl drain looks for this entry (kind Eviction, group policy) to evict
                // instead of deleting.
                "eviction" => json!({"name": name, "singularName": "", "namespaced": true, "group": "policy",
                                     "version": "v1", "kind": "Eviction", "verbs": ["create"]}),
                _ => json!({"name": name, "singularName": "", "namespaced": r.namespaced, "kind": r.kind,
                            "verbs": ["get", "patch", "update"]}),
            });
        }
    }
    let group_version = served[0].api_version();
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}
