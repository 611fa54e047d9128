//! How the kubelet stops a pod, and what becomes of the VM in a launcher pod.
//!
//! The kubelet stops a pod's containers when the pod is deleted (its grace period is the
//! deletion's) or when it evicts it under node pressure (`min(evictionMaxPodGracePeriod, grace)`,
//! 1 s at the hard threshold: `eviction_manager.go`, `immediateEvictionGracePeriodSeconds`):
//!
//! 1. each container's `preStop` hook runs first (`kuberuntime_container.go`, `killContainer`,
//!    `executePreStopHook`), bounded by the grace period: an `httpGet` to the node's loopback
//!    reaches what listens there ([`NodeEndpoint`](crate::store::NodeEndpoint)), and its answer, a failed connection, or the
//!    grace period's end ends it;
//! 2. then SIGTERM, and SIGKILL when the rest of the grace period, at least 2 s
//!    (`minimumGracePeriodInSeconds`), has passed;
//! 3. the pod is gone when its containers have exited (a deleted pod is removed; an evicted one
//!    stays `Failed`, reason `Evicted`, and only then carries its `DisruptionTarget` condition:
//!    `kubelet.go` `SyncTerminatingPod`, `status_manager.go` `mergePodStatus`).
//!
//! The VM in a launcher pod, at SIGTERM:
//!
//! - **stock virt-handler** (KubeVirt v1.9): virt-launcher marks the domain for a graceful
//!   shutdown (`monitor.go`, `MarkGracefulShutdownVMI`) and virt-handler's `sync`
//!   (`pkg/virt-handler/vm.go`: `gracefulShutdown && vmi.IsRunning()` -> `processVmShutdown`) asks
//!   the guest to power off about a second later; it powers off after its own shutdown time
//!   (the VMI's `sim.evac.io/guest-shutdown` annotation), or is killed at the VMI's grace period
//!   when it ignores ACPI (`KillVirtualMachine`). A migration already running then (the VMI's
//!   migration has started: `isMigrationInProgress`, "ignoring key ... as migration is in
//!   progress") is left alone, and cut when virt-launcher kills the guest at the VMI's grace
//!   period plus 15 s (`--grace-period-seconds`);
//! - **the proposals' virt-handler** (`virtHandler: proposal`): the guest runs until SIGKILL.
//!
//! A VM that stops this way fails its VMI (`Succeeded` for a guest that powered off itself,
//! `Failed` for one that was killed). The state lives on the pod, in annotations, so that the
//! store stays the only state.

use std::time::Duration;

use serde_json::json;

use super::super::with_disruption_target;
use crate::kinds::{migrations, pods, vmis};
use crate::objects::{Migration, Pod, Vmi};
use crate::store::{HookAnswer, HookCall, Patch, Store};
use crate::ApiError;
use evac_core::hold::VirtHandler;

/// When the kubelet began stopping the pod, in milliseconds of simulated time.
pub(crate) const STOPPING_SINCE_ANNOTATION: &str = "sim.evac.io/stopping-since-ms";
/// When the pod's containers got SIGTERM (their `preStop` hooks over), in milliseconds.
pub(crate) const SIGTERM_AT_ANNOTATION: &str = "sim.evac.io/sigterm-at-ms";
/// When the VM in the pod stops (decided a second after SIGTERM), in milliseconds; for a pod
/// without a VM, when its containers end (SIGKILL).
pub(crate) const VM_STOPS_AT_ANNOTATION: &str = "sim.evac.io/vm-stops-at-ms";
/// How the VM in the pod ends: `shutdown` (the guest powered off), `killed`.
const VM_END_ANNOTATION: &str = "sim.evac.io/vm-end";
/// The VMI annotation with how long its guest takes to power off once asked (a duration in
/// milliseconds), or `never` for a guest that ignores ACPI.
pub const GUEST_SHUTDOWN_ANNOTATION: &str = "sim.evac.io/guest-shutdown-ms";
/// How long after SIGTERM virt-handler asks the guest to shut down (its next `sync`).
const SHUTDOWN_DELAY: Duration = Duration::from_secs(1);
/// The least time the kubelet leaves between SIGTERM and SIGKILL (`minimumGracePeriodInSeconds`).
const MINIMUM_GRACE: Duration = Duration::from_secs(2);
/// virt-launcher's padding of the VMI's grace period before it kills the guest itself.
const LAUNCHER_PADDING: Duration = Duration::from_secs(15);

/// A pod the kubelet is stopping, as its annotations say.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stopping {
    /// When it began.
    pub since: Duration,
    /// The end of its grace period: no hook outlasts it.
    pub grace_end: Duration,
    /// When SIGTERM came, once it has.
    pub sigterm: Option<Duration>,
    /// When the VM in it stops, once decided.
    pub vm_stops: Option<Duration>,
}

impl Stopping {
    /// SIGKILL: the grace period's end, and at least [`MINIMUM_GRACE`] after SIGTERM.
    pub fn sigkill(&self) -> Option<Duration> {
        self.sigterm.map(|at| self.grace_end.max(at + MINIMUM_GRACE))
    }

    /// The next moment something is due.
    pub fn next(&self) -> Duration {
        match (self.sigterm, self.vm_stops) {
            (None, _) => self.grace_end,
            (Some(at), None) => at + SHUTDOWN_DELAY,
            (Some(_), Some(stops)) => stops.min(self.sigkill().unwrap_or(stops)),
        }
    }
}

fn millis(pod: Pod<'_>, key: &str) -> Option<Duration> {
    pod.meta().annotation(key).and_then(|ms| ms.parse().ok()).map(Duration::from_millis)
}

/// The stopping state of a pod whose grace period ends at `grace_end` (a deletion's end, an
/// eviction's kill time), begun at `since` unless the pod says otherwise.
pub(crate) fn stopping_of(pod: Pod<'_>, since: Duration, grace_end: Duration) -> Stopping {
    Stopping {
        since: millis(pod, STOPPING_SINCE_ANNOTATION).unwrap_or(since),
        grace_end,
        sigterm: millis(pod, SIGTERM_AT_ANNOTATION),
        vm_stops: millis(pod, VM_STOPS_AT_ANNOTATION),
    }
}

/// What the kubelet did with a pod it is stopping at `now`.
pub(crate) enum Step {
    /// Nothing more now: the pod records when its next step is due.
    Waiting,
    /// Its containers have all exited: the pod is done.
    Done,
}

/// Advances the stopping of `pod` at `now`: its hooks, SIGTERM, the VM's end.
pub(crate) fn advance(
    store: &Store,
    pod: Pod<'_>,
    mut stopping: Stopping,
    virt_handler: VirtHandler,
    now: Duration,
) -> Result<Step, ApiError> {
    let namespace = pod.meta().namespace();
    let mut annotations = serde_json::Map::new();
    if millis(pod, STOPPING_SINCE_ANNOTATION).is_none() {
        annotations.insert(STOPPING_SINCE_ANNOTATION.into(), json!(stopping.since.as_millis().to_string()));
    }
    if stopping.sigterm.is_none() {
        if hooks_running(store, pod, &stopping, now) {
            write(store, pod, annotations)?;
            return Ok(Step::Waiting);
        }
        stopping.sigterm = Some(now);
        annotations.insert(SIGTERM_AT_ANNOTATION.into(), json!(now.as_millis().to_string()));
    }
    let sigterm = stopping.sigterm.expect("SIGTERM was sent");
    let sigkill = stopping.sigkill().expect("SIGTERM was sent");
    // Any other pod's containers are taken to use their whole grace period.
    if pod.vmi().is_none() {
        if stopping.vm_stops.is_none() {
            annotations.insert(VM_STOPS_AT_ANNOTATION.into(), json!(sigkill.as_millis().to_string()));
        }
        write(store, pod, annotations)?;
        return Ok(if now >= sigkill { Step::Done } else { Step::Waiting });
    }
    // A launcher pod whose VM is not running in it (it migrated away, or stopped): virt-launcher
    // has nothing to wait for, and exits at SIGTERM.
    let vmi = pod.vmi().and_then(|vmi| store.get(&vmis(), namespace, vmi).ok());
    let runs_here = vmi.as_deref().is_some_and(|v| {
        let v = Vmi(v);
        !v.is_final() && v.node_name().is_some() && v.node_name() == pod.node_name()
    });
    if !runs_here || pod.is_finished() {
        write(store, pod, annotations)?;
        return Ok(Step::Done);
    }
    let vmi = vmi.expect("a VMI that runs here");
    // A VMI being deleted is shut down for the deletion itself, whatever the virt-handler does at
    // SIGTERM (`pkg/virt-handler/vm.go` `sync`: "Shutting down domain for VirtualMachineInstance
    // with deletion timestamp"); its pods are deleted at the same time (`lifecycle.go`).
    let virt_handler =
        if Vmi(&vmi).meta().deletion_timestamp().is_some() { VirtHandler::Stock } else { virt_handler };
    if stopping.vm_stops.is_none() {
        if now < sigterm + SHUTDOWN_DELAY && virt_handler == VirtHandler::Stock {
            write(store, pod, annotations)?;
            return Ok(Step::Waiting);
        }
        let (stops, end) = vm_end(store, Vmi(&vmi), pod, virt_handler, sigterm, sigkill);
        stopping.vm_stops = Some(stops);
        annotations.insert(VM_STOPS_AT_ANNOTATION.into(), json!(stops.as_millis().to_string()));
        annotations.insert(VM_END_ANNOTATION.into(), json!(end));
    }
    let stops = stopping.vm_stops.expect("decided");
    if now >= stops {
        write(store, pod, annotations)?;
        let end = pod.meta().annotation(VM_END_ANNOTATION).unwrap_or("killed");
        stop_vm(store, pod, end == "shutdown")?;
        return Ok(Step::Done);
    }
    write(store, pod, annotations)?;
    Ok(Step::Waiting)
}

/// Whether the pod's `preStop` hooks still run. The simulator runs a pod's hooks as one: they ask
/// the same endpoint the same question.
fn hooks_running(store: &Store, pod: Pod<'_>, stopping: &Stopping, now: Duration) -> bool {
    let Some((container, port, path)) = pod.loopback_pre_stop_hooks().into_iter().next() else {
        return false;
    };
    // No hook outlasts the grace period.
    if now >= stopping.grace_end {
        return false;
    }
    let node = pod.node_name().unwrap_or_default();
    let Some(endpoint) = store.node_endpoint(port) else {
        failed_hook(
            store,
            pod,
            container,
            path,
            &format!("dial tcp 127.0.0.1:{port}: connect: connection refused"),
        );
        return false;
    };
    let call = HookCall {
        namespace: pod.meta().namespace().to_owned(),
        pod: pod.meta().name().to_owned(),
        uid: pod.meta().uid().to_owned(),
        container: container.to_owned(),
        since: stopping.since,
    };
    match endpoint.get(store, node, path, &call) {
        HookAnswer::Waiting => true,
        HookAnswer::Answered(status) if (200..400).contains(&status) => false,
        HookAnswer::Answered(status) => {
            failed_hook(
                store,
                pod,
                container,
                path,
                &format!("Get \"http://127.0.0.1:{port}{path}\": {status}"),
            );
            false
        }
        HookAnswer::Failed(why) => {
            failed_hook(store, pod, container, path, &why);
            false
        }
    }
}

/// The kubelet's `FailedPreStopHook` event (`kuberuntime_container.go`, `executePreStopHook`;
/// the message of `lifecycle/handlers.go`'s HTTP handler).
fn failed_hook(store: &Store, pod: Pod<'_>, container: &str, path: &str, error: &str) {
    let (namespace, name) = (pod.meta().namespace(), pod.meta().name());
    let message = format!(
        "HTTP lifecycle hook ({path}) for Container \"{container}\" in Pod \"{name}_{namespace}({})\" failed - error: {error}",
        pod.meta().uid()
    );
    let event = json!({
        "metadata": {"generateName": format!("{name}."), "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name,
                           "uid": pod.meta().uid(), "fieldPath": format!("spec.containers{{{container}}}")},
        "reason": "FailedPreStopHook", "message": message, "type": "Warning",
        "source": {"component": "kubelet", "host": pod.node_name().unwrap_or_default()},
        "firstTimestamp": store.clock().timestamp(), "lastTimestamp": store.clock().timestamp(), "count": 1,
    });
    if let Err(e) = store.create(&crate::store::Kind::new("v1", "Event"), namespace, event, false) {
        tracing::debug!(pod = %pod.meta().key(), "cannot record FailedPreStopHook: {}", e.message);
    }
}

/// When the VM stops, and how (`shutdown` or `killed`), as the virt-handler decides a second
/// after SIGTERM.
fn vm_end(
    store: &Store,
    vmi: Vmi<'_>,
    pod: Pod<'_>,
    virt_handler: VirtHandler,
    sigterm: Duration,
    sigkill: Duration,
) -> (Duration, &'static str) {
    if virt_handler == VirtHandler::Proposal {
        return (sigkill, "killed");
    }
    let grace = Duration::from_secs(vmi.grace_period());
    if migration_running(store, vmi, pod.node_name().unwrap_or_default()) {
        return ((sigterm + grace + LAUNCHER_PADDING).min(sigkill), "killed");
    }
    let asked = sigterm + SHUTDOWN_DELAY;
    match vmi.meta().annotation(GUEST_SHUTDOWN_ANNOTATION) {
        Some("never") => ((asked + grace).min(sigkill), "killed"),
        shutdown => {
            let takes =
                shutdown.and_then(|ms| ms.parse().ok()).map_or(Duration::from_secs(5), Duration::from_millis);
            if asked + takes < sigkill {
                (asked + takes, "shutdown")
            } else {
                (sigkill, "killed")
            }
        }
    }
}

/// Whether a migration of the VMI away from `node` has started (its phase is `Running`: the
/// source virt-launcher set its start, `isMigrationInProgress`).
fn migration_running(store: &Store, vmi: Vmi<'_>, node: &str) -> bool {
    let (all, _) = store.list(&migrations(), Some(vmi.meta().namespace()), None, None);
    all.iter().map(|m| Migration(m)).any(|m| {
        m.vmi_name() == vmi.meta().name() && m.phase() == Some("Running") && m.source_node() == Some(node)
    })
}

/// The VM still running in the pod stops: its VMI ends (`Succeeded` after a shutdown of its own,
/// `Failed` when killed), with the pod's disruption as its reason.
fn stop_vm(store: &Store, pod: Pod<'_>, shut_down: bool) -> Result<(), ApiError> {
    let namespace = pod.meta().namespace();
    let Some(vmi) = pod.vmi() else { return Ok(()) };
    let Ok(current) = store.get(&vmis(), namespace, vmi) else { return Ok(()) };
    let current = Vmi(&current);
    if current.node_name().is_none() || current.node_name() != pod.node_name() || current.is_final() {
        return Ok(());
    }
    let reason = pod
        .condition("DisruptionTarget")
        .and_then(|c| c.reason())
        .or_else(|| pod.meta().annotation(super::EVICTION_MESSAGE_ANNOTATION).map(|_| super::REASON))
        .unwrap_or("PodDeleted");
    let phase = if shut_down { "Succeeded" } else { "Failed" };
    let patch = Patch::Merge(json!({"status": {"phase": phase, "reason": reason}}));
    store.patch(&vmis(), namespace, vmi, &patch, false)?;
    // The VMI is final: virt-controller deletes its attachment pods (`deleteAllAttachmentPods`).
    if crate::actors::hotplug::has_volumes(current) {
        let launcher = pod.meta().uid();
        crate::actors::hotplug::detach(store, namespace, |owner| owner == launcher)?;
    }
    Ok(())
}

fn write(
    store: &Store,
    pod: Pod<'_>,
    annotations: serde_json::Map<String, serde_json::Value>,
) -> Result<(), ApiError> {
    if annotations.is_empty() {
        return Ok(());
    }
    let patch = Patch::Merge(json!({"metadata": {"annotations": annotations}}));
    match store.patch(&pods(), pod.meta().namespace(), pod.meta().name(), &patch, false) {
        Err(e) if e.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

/// The pod an eviction stopped, once its containers have exited: `Failed`, reason `Evicted`, with
/// the `DisruptionTarget` condition and message the kubelet kept for it.
pub(crate) fn evicted(store: &Store, pod: Pod<'_>, message: &str) -> Result<(), ApiError> {
    let conditions = with_disruption_target(pod.0, super::REASON, message, &store.clock().timestamp());
    let patch = Patch::Merge(json!({"status": {"phase": "Failed", "reason": "Evicted", "message": message,
                                               "conditions": conditions}}));
    match store.patch(&pods(), pod.meta().namespace(), pod.meta().name(), &patch, false) {
        Err(e) if e.code == 404 => Ok(()),
        other => other.map(drop),
    }
}
