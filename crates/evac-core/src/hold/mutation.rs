//! The `launcher-hold` mutation: a launcher pod, as it is created, gets a `preStop` hook on each
//! container that calls the node's hold endpoint, and a grace period longer by the hold window.
//!
//! KubeVirt puts no lifecycle hook on a launcher pod (`pkg/virt-controller/services/template.go`,
//! `renderLaunchManifest`) and nothing rewrites one later, so the hook added at creation stays.
//! The kubelet stops a pod's containers in parallel (`kuberuntime_container.go`,
//! `killContainersWithSyncResult`): a sidecar the guest depends on while it runs (a container disk,
//! virtiofs, a hook sidecar) would be stopped under it, so every container gets the hook, and they
//! all wait for the same answer. A container that has a `preStop` of its own keeps it: it is named
//! in [`HOLD_SKIPPED_ANNOTATION`], and the hold cannot cover it. The pod's grace period is raised
//! by the window (`terminationGracePeriodSeconds`: KubeVirt's own is the VMI's grace period plus
//! 30 s), so that after a whole hold the guest still has its grace for a clean shutdown.
//! Migration target pods are launcher pods too: they are held in turn when they are disrupted.

use serde_json::{json, Map, Value};

use super::{hook_path, LauncherHoldSettings, HOLD_WINDOW_ANNOTATION, LOOPBACK};
use crate::model::{AdmissionRequest, APP_LABEL, DOMAIN_ANNOTATION};

/// The pod annotation naming the containers the hold cannot cover (they have a `preStop` of their
/// own), comma-separated.
pub const HOLD_SKIPPED_ANNOTATION: &str = "evac.kubevirt.io/hold-skipped";
/// A pod's grace period when its spec sets none (Kubernetes' default).
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// What the mutation does with a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Mutation {
    /// The object is left as it is, for this reason.
    Unchanged(&'static str),
    /// The object as it is to be created.
    Mutated(Value),
}

/// A launcher pod the mutation cannot read: the decoder's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndecodablePod(pub String);

impl core::fmt::Display for UndecodablePod {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "cannot decode the Pod: {}", self.0)
    }
}

impl std::error::Error for UndecodablePod {}

/// Mutates a launcher pod's CREATE; anything else is left unchanged (the webhook's rules and
/// match conditions should send nothing else, and a mutating policy must never block a creation
/// it does not understand). A launcher pod that cannot be decoded is an error.
pub fn mutate(
    request: &AdmissionRequest<'_>,
    settings: &LauncherHoldSettings,
) -> Result<Mutation, UndecodablePod> {
    let kind = &request.kind;
    if !(kind.group.is_empty() && kind.kind == "Pod" && request.operation == "CREATE") {
        return Ok(Mutation::Unchanged("not a pod creation"));
    }
    let Some(object) = request.object.filter(|o| o.get() != "null") else {
        return Ok(Mutation::Unchanged("the request carries no pod"));
    };
    let mut pod: Value =
        serde_json::from_str(object.get()).map_err(|e| UndecodablePod(crate::json_error_text(&e)))?;
    let text = |pod: &Value, pointer: &str| pod.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
    if pod.pointer("/metadata/labels").and_then(|l| l.get(APP_LABEL)).and_then(Value::as_str)
        != Some("virt-launcher")
    {
        return Ok(Mutation::Unchanged("not a virt-launcher pod"));
    }
    let annotations = pod.pointer("/metadata/annotations").and_then(Value::as_object);
    if annotations.is_some_and(|a| a.contains_key(HOLD_WINDOW_ANNOTATION)) {
        return Ok(Mutation::Unchanged("the pod is held already"));
    }
    let Some(vmi) =
        annotations.and_then(|a| a.get(DOMAIN_ANNOTATION)).and_then(Value::as_str).map(str::to_owned)
    else {
        return Ok(Mutation::Unchanged("the launcher pod names no VMI"));
    };
    let namespace = text(&pod, "/metadata/namespace")
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| request.namespace.to_string());

    let mut skipped = Vec::new();
    let Some(containers) = pod.pointer_mut("/spec/containers").and_then(Value::as_array_mut) else {
        return Ok(Mutation::Unchanged("the pod has no containers"));
    };
    for container in containers.iter_mut() {
        let Some(container) = container.as_object_mut() else { continue };
        let name = container.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let lifecycle = container.entry("lifecycle").or_insert_with(|| json!({}));
        if lifecycle.get("preStop").is_some_and(|p| !p.is_null()) {
            skipped.push(name);
            continue;
        }
        lifecycle["preStop"] = json!({"httpGet": {
            "host": LOOPBACK,
            "port": settings.port,
            "path": hook_path(&namespace, &vmi, &name),
            "scheme": "HTTP",
        }});
    }
    let spec = pod["spec"].as_object_mut().expect("a pod with containers has a spec");
    let grace =
        spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_GRACE_SECONDS);
    let window = i64::try_from(settings.window_seconds).unwrap_or(i64::MAX);
    spec.insert("terminationGracePeriodSeconds".into(), json!(grace.saturating_add(window)));
    let metadata = pod["metadata"].as_object_mut().expect("a pod with labels has metadata");
    let annotations = metadata.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
    annotations[HOLD_WINDOW_ANNOTATION] = json!(settings.window_seconds.to_string());
    if !skipped.is_empty() {
        annotations[HOLD_SKIPPED_ANNOTATION] = json!(skipped.join(","));
    }
    Ok(Mutation::Mutated(pod))
}

/// The hold window a pod was given, in seconds, if `launcher-hold` mutated it.
pub fn window_of(pod: &crate::model::Pod<'_>) -> Option<u64> {
    pod.metadata.annotation(HOLD_WINDOW_ANNOTATION).and_then(|w| w.parse().ok())
}
