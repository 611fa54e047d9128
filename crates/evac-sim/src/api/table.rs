//! Server-side printing: what `kubectl get` shows. kubectl asks for a `meta.k8s.io/v1` Table
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`) and prints its columns as they come,
//! so the columns and cells follow kube-apiserver's printers (kubernetes
//! `pkg/printers/internalversion/printers.go`: `printPod`, `printNode`) and, for KubeVirt's
//! resources, the `additionalPrinterColumns` of KubeVirt's CRDs
//! (`pkg/virt-operator/resource/generate/components/crds.go`); any other kind gets the default
//! table convertor's Name and Created At (`apiserver/pkg/registry/rest/table.go`).
//!
//! Ages are computed on the server, against the simulated clock, so they read right however
//! fast the simulated cluster runs.

use axum::http::{header, HeaderMap};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::resources::Resource;

/// Whether the client asked for a Table (kubectl's `get`).
pub fn wanted(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|accept| {
        accept.split(',').any(|media| media.contains("as=Table") && media.contains("g=meta.k8s.io"))
    })
}

/// A column: its name, type, and priority (1: only with `-o wide`).
struct Column {
    name: &'static str,
    type_: &'static str,
    priority: u8,
}

const fn column(name: &'static str, type_: &'static str, priority: u8) -> Column {
    Column { name, type_, priority }
}

const POD: &[Column] = &[
    column("Name", "string", 0),
    column("Ready", "string", 0),
    column("Status", "string", 0),
    column("Restarts", "string", 0),
    column("Age", "string", 0),
    column("IP", "string", 1),
    column("Node", "string", 1),
    column("Nominated Node", "string", 1),
    column("Readiness Gates", "string", 1),
];
const NODE: &[Column] = &[
    column("Name", "string", 0),
    column("Status", "string", 0),
    column("Roles", "string", 0),
    column("Age", "string", 0),
    column("Version", "string", 0),
];
const VMI: &[Column] = &[
    column("Name", "string", 0),
    column("Age", "string", 0),
    column("Phase", "string", 0),
    column("IP", "string", 0),
    column("NodeName", "string", 0),
    column("Ready", "string", 0),
    column("Live-Migratable", "string", 1),
];
const VM: &[Column] = &[
    column("Name", "string", 0),
    column("Age", "string", 0),
    column("Status", "string", 0),
    column("Ready", "string", 0),
];
const MIGRATION: &[Column] =
    &[column("Name", "string", 0), column("Phase", "string", 0), column("VMI", "string", 0)];
const NAMESPACE: &[Column] =
    &[column("Name", "string", 0), column("Status", "string", 0), column("Age", "string", 0)];
const DEFAULT: &[Column] = &[column("Name", "string", 0), column("Created At", "date", 0)];

/// The objects as a Table, their ages taken at `now`.
pub fn of(
    resource: &Resource,
    objects: &[&Value],
    resource_version: Option<String>,
    now: DateTime<Utc>,
) -> Value {
    let columns = match (resource.group, resource.kind) {
        ("", "Pod") => POD,
        ("", "Node") => NODE,
        ("", "Namespace") => NAMESPACE,
        ("kubevirt.io", "VirtualMachineInstance") => VMI,
        ("kubevirt.io", "VirtualMachine") => VM,
        ("kubevirt.io", "VirtualMachineInstanceMigration") => MIGRATION,
        _ => DEFAULT,
    };
    let definitions: Vec<Value> = columns
        .iter()
        .map(|c| {
            let format = if c.name == "Name" { "name" } else { "" };
            json!({"name": c.name, "type": c.type_, "format": format, "description": "", "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let cells: Vec<Value> =
                columns.iter().map(|c| cell(resource.kind, c.name, object, now)).collect();
            let metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
            json!({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                              "metadata": metadata}})
        })
        .collect();
    let mut table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
                           "columnDefinitions": definitions, "rows": rows});
    if let Some(version) = resource_version {
        table["metadata"]["resourceVersion"] = json!(version);
    }
    table
}

fn text<'a>(object: &'a Value, path: &str) -> Option<&'a str> {
    object.pointer(path).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn none_if_empty(value: Option<&str>) -> Value {
    json!(value.unwrap_or("<none>"))
}

/// One cell.
fn cell(kind: &str, column: &str, object: &Value, now: DateTime<Utc>) -> Value {
    match (kind, column) {
        (_, "Name") => json!(text(object, "/metadata/name").unwrap_or_default()),
        (_, "Age") => json!(age(object, now)),
        (_, "Created At") => json!(text(object, "/metadata/creationTimestamp").unwrap_or_default()),
        ("Pod", "Ready") => {
            let total = object.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
            let ready = match object.pointer("/status/containerStatuses").and_then(Value::as_array) {
                Some(statuses) => statuses.iter().filter(|s| s["ready"] == true).count(),
                // The simulated kubelet writes no container statuses: a running pod's are ready.
                None if text(object, "/status/phase") == Some("Running") => total,
                None => 0,
            };
            json!(format!("{ready}/{total}"))
        }
        ("Pod", "Status") => json!(pod_status(object)),
        ("Pod", "Restarts") => json!("0"),
        ("Pod", "IP") => none_if_empty(text(object, "/status/podIP")),
        ("Pod", "Node") => none_if_empty(text(object, "/spec/nodeName")),
        ("Pod", "Nominated Node") => none_if_empty(text(object, "/status/nominatedNodeName")),
        ("Pod", "Readiness Gates") => json!("<none>"),
        ("Node", "Status") => json!(node_status(object)),
        ("Node", "Roles") => {
            let roles: Vec<&str> = object
                .pointer("/metadata/labels")
                .and_then(Value::as_object)
                .into_iter()
                .flat_map(|labels| labels.keys())
                .filter_map(|key| key.strip_prefix("node-role.kubernetes.io/"))
                .collect();
            json!(if roles.is_empty() { "<none>".to_owned() } else { roles.join(",") })
        }
        ("Node", "Version") => json!(text(object, "/status/nodeInfo/kubeletVersion").unwrap_or_default()),
        ("Namespace", "Status") => json!(text(object, "/status/phase").unwrap_or("Active")),
        ("VirtualMachineInstance", "Phase") => json!(text(object, "/status/phase").unwrap_or_default()),
        ("VirtualMachineInstance", "IP") => {
            json!(text(object, "/status/interfaces/0/ipAddress").unwrap_or_default())
        }
        ("VirtualMachineInstance", "NodeName") => json!(text(object, "/status/nodeName").unwrap_or_default()),
        ("VirtualMachineInstance" | "VirtualMachine", "Ready") => json!(condition(object, "Ready")),
        ("VirtualMachineInstance", "Live-Migratable") => json!(condition(object, "LiveMigratable")),
        ("VirtualMachine", "Status") => json!(text(object, "/status/printableStatus").unwrap_or_default()),
        ("VirtualMachineInstanceMigration", "Phase") => {
            json!(text(object, "/status/phase").unwrap_or_default())
        }
        ("VirtualMachineInstanceMigration", "VMI") => {
            json!(text(object, "/spec/vmiName").unwrap_or_default())
        }
        _ => json!(""),
    }
}

/// A condition's status (`True`, `False`), empty when absent.
fn condition(object: &Value, type_: &str) -> String {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .and_then(|c| c["status"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// `printPod`'s reason: `Terminating` once deleted, else the phase (or its reason).
fn pod_status(pod: &Value) -> String {
    if text(pod, "/metadata/deletionTimestamp").is_some() {
        return "Terminating".into();
    }
    text(pod, "/status/reason").or_else(|| text(pod, "/status/phase")).unwrap_or("Pending").to_owned()
}

/// `printNode`'s status: `Ready`, `NotReady` or `Unknown`, with `SchedulingDisabled` when cordoned.
fn node_status(node: &Value) -> String {
    let ready = match condition(node, "Ready").as_str() {
        "True" => "Ready",
        "False" => "NotReady",
        _ => "Unknown",
    };
    if node.pointer("/spec/unschedulable") == Some(&json!(true)) {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_owned()
    }
}

/// kubectl's short age (`translateTimestampSince`, `duration.HumanDuration`): `<unknown>` without
/// a creation timestamp.
fn age(object: &Value, now: DateTime<Utc>) -> String {
    let Some(created) = text(object, "/metadata/creationTimestamp")
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
    else {
        return "<unknown>".into();
    };
    human_duration((now - created).to_std().unwrap_or_default())
}

/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`.
fn human_duration(d: std::time::Duration) -> String {
    let seconds = d.as_secs();
    let (minutes, hours) = (seconds / 60, seconds / 3600);
    match seconds {
        s if s < 60 * 2 => format!("{s}s"),
        _ if minutes < 10 => match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        },
        _ if minutes < 60 * 3 => format!("{minutes}m"),
        _ if hours < 8 => match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        },
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 24 * 8 => match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        },
        _ if hours < 24 * 365 * 2 => format!("{}d", hours / 24),
        _ if hours < 24 * 365 * 8 => match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        },
        _ => format!("{}y", hours / 24 / 365),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `duration.HumanDuration`'s steps.
    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (9 * 3600, "9h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (800 * 86400, "2y70d"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(std::time::Duration::from_secs(seconds)), expected, "{seconds} s");
        }
    }

    #[test]
    fn kubectl_get_asks_for_a_table() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
                .parse()
                .unwrap(),
        );
        assert!(wanted(&headers));
        headers.insert(header::ACCEPT, "application/json".parse().unwrap());
        assert!(!wanted(&headers));
    }
}
