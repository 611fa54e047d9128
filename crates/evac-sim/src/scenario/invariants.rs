//! What a run must never do, checked at its end (the observer checks the rest as it goes: no VMI
//! with two unfinished migrations, no migration succeeded whose VM is not on its target), and the
//! parts of the report read from the cluster at the end: events, and what blocks a drain.

use std::collections::HashSet;

use serde::Serialize;

use super::observer::Observed;
use super::track::Limits;
use crate::api::eviction::EvictionRecord;
use crate::kinds::{nodes, pods, vmis};
use crate::objects::{Meta, Node, Pod};
use crate::store::{Kind, Store};

/// An event evac recorded on a VMI.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventLine {
    /// namespace/name of the VMI.
    pub vm: String,
    pub reason: String,
    pub message: String,
}

/// A pod a drain could not evict.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Blocker {
    /// namespace/name.
    pub pod: String,
    /// The VM it runs, for a launcher pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm: Option<String>,
    /// The last refusal of its eviction, as kubectl would print it; none when it was not asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// The invariants read at the end: the parallel limits of the KubeVirt CR were kept (counted as
/// KubeVirt counts running migrations), no launcher pod outlived its VMI (the garbage collector
/// deletes a deleted VMI's pods through their ownerReferences), and, `with_evac`, every evacuation
/// migration names its cause, whoever created it.
pub fn at_the_end(store: &Store, observed: &Observed, with_evac: bool) -> Vec<String> {
    let mut violations = Vec::new();
    if with_evac {
        let (migrations, _) = store.list(&crate::kinds::migrations(), None, None, None);
        for migration in migrations.iter().map(|m| Meta(m)) {
            let evacuation =
                migration.annotation(evac_core::effect::EVACUATION_MIGRATION_ANNOTATION).is_some();
            if evacuation && migration.annotation(evac_core::effect::CAUSE_ANNOTATION).is_none() {
                violations.push(format!("evacuation migration {} names no cause", migration.key()));
            }
        }
    }
    if let Some(Limits { per_cluster, per_node }) = parallel_limits(store) {
        if observed.max_running > per_cluster {
            violations.push(format!(
                "{} migrations ran at once in the cluster, over parallelMigrationsPerCluster {per_cluster}",
                observed.max_running
            ));
        }
        if observed.max_running_on_a_node > per_node {
            violations.push(format!(
                "{} migrations ran at once from one node, over parallelOutboundMigrationsPerNode {per_node}",
                observed.max_running_on_a_node
            ));
        }
    }
    let (all_vmis, _) = store.list(&vmis(), None, None, None);
    let uids: HashSet<&str> = all_vmis.iter().map(|v| Meta(v).uid()).collect();
    let (all_pods, _) = store.list(&pods(), None, None, None);
    for pod in all_pods.iter().map(|p| Pod(p)) {
        if let Some(("VirtualMachineInstance", vmi, uid)) = pod.meta().controller() {
            if !uids.contains(uid) {
                violations.push(format!("pod {} outlived its VMI {vmi} (uid {uid})", pod.meta().key()));
            }
        }
    }
    violations
}

/// The parallel migration limits of the cluster's KubeVirt CR, as KubeVirt reads them (its
/// defaults where the CR sets none); none without a CR.
pub fn parallel_limits(store: &Store) -> Option<Limits> {
    let (kubevirts, _) = store.list(&Kind::new("kubevirt.io/v1", "KubeVirt"), None, None, None);
    let text = kubevirts.first()?.to_string();
    let model = serde_json::from_str::<evac_core::model::KubeVirt<'_>>(&text).ok()?;
    let (per_cluster, per_node) = model.parallel_limits();
    Some(Limits { per_cluster: per_cluster as usize, per_node: per_node as usize })
}

/// The pods on `node` a drain still has to evict: not finished, not a DaemonSet's (kubectl
/// drain's `--ignore-daemonsets`), each with its last refused eviction.
pub fn blocking(store: &Store, node: &str, evictions: &[EvictionRecord]) -> Vec<Blocker> {
    let on_node = format!("spec.nodeName={node}");
    let selector = evac_cluster::FieldSelector::parse(&on_node).ok();
    let (on_node, _) = store.list(&pods(), None, None, selector.as_ref());
    let mut blockers: Vec<Blocker> = on_node
        .iter()
        .map(|p| Pod(p))
        .filter(|p| !p.is_finished() && !matches!(p.meta().controller(), Some(("DaemonSet", _, _))))
        .map(|p| {
            let (namespace, name) = (p.meta().namespace(), p.meta().name());
            let refused = evictions
                .iter()
                .rev()
                .find(|r| r.namespace == namespace && r.pod == name && r.code != 201)
                .map(|r| format!("{}: {}", r.code, r.message));
            Blocker { pod: p.meta().key(), vm: p.vmi().map(|vm| format!("{namespace}/{vm}")), refused }
        })
        .collect();
    blockers.sort_by(|a, b| a.pod.cmp(&b.pod));
    // The node may be gone: then nothing is left to block.
    if store.get(&nodes(), "", node).map(|n| Node(&n).name().is_empty()).unwrap_or(true) {
        return Vec::new();
    }
    blockers
}

/// The events evac recorded on VMIs, by VM and reason.
pub fn events(store: &Store) -> Vec<EventLine> {
    let (events, _) = store.list(&Kind::new("v1", "Event"), None, None, None);
    let mut lines: Vec<EventLine> = events
        .iter()
        .filter(|e| e.pointer("/source/component").and_then(|c| c.as_str()) == Some("evac"))
        // What evac did not do (deferred, given up); what it did is in the rest of the report.
        .filter(|e| e.get("type").and_then(|t| t.as_str()) == Some("Warning"))
        .map(|e| {
            let text =
                |pointer: &str| e.pointer(pointer).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            EventLine {
                vm: format!("{}/{}", text("/involvedObject/namespace"), text("/involvedObject/name")),
                reason: text("/reason"),
                message: text("/message"),
            }
        })
        .collect();
    lines.sort_by(|a, b| (&a.vm, &a.reason, &a.message).cmp(&(&b.vm, &b.reason, &b.message)));
    lines
}

/// The holds seen, with why each ended: the `TerminationReleased` event evac's hold endpoint
/// recorded on the pod (its reason's code), the kubelet's `FailedPreStopHook` (the hook's
/// connection failed), or, without either, the grace period's end.
pub fn holds(
    store: &Store,
    seen: &std::collections::BTreeMap<String, super::observer::HoldTrack>,
) -> Vec<super::report::HoldRecord> {
    let (events, _) = store.list(&Kind::new("v1", "Event"), None, None, None);
    let text = |e: &serde_json::Value, pointer: &str| {
        e.pointer(pointer).and_then(|v| v.as_str()).unwrap_or_default().to_owned()
    };
    seen.iter()
        .map(|(pod, track)| {
            let about = |e: &&std::sync::Arc<serde_json::Value>| {
                format!("{}/{}", text(e, "/involvedObject/namespace"), text(e, "/involvedObject/name"))
                    == *pod
            };
            let released = events.iter().filter(about).find(|e| text(e, "/reason") == "TerminationReleased");
            let failed = events.iter().filter(about).find(|e| text(e, "/reason") == "FailedPreStopHook");
            let reason = match (released, failed) {
                (Some(e), _) => {
                    let message = text(e, "/message");
                    let why = message.split_once(": ").map_or(message.as_str(), |(_, why)| why);
                    why.split_once(':').map_or(why, |(code, _)| code).to_owned()
                }
                (None, Some(e)) => format!("hook failed: {}", text(e, "/message")),
                (None, None) if track.ended_at.is_some() => "grace period over".to_owned(),
                (None, None) => "still held".to_owned(),
            };
            super::report::HoldRecord {
                pod: pod.clone(),
                vm: track.vm.clone(),
                started_at: track.started_at,
                ended_at: track.ended_at,
                reason,
            }
        })
        .collect()
}
