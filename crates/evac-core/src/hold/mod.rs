//! The hold: keeping a launcher pod's containers from SIGTERM while its VM migrates away.
//!
//! In a stock KubeVirt, the moment a launcher pod's `compute` container gets SIGTERM (a deletion
//! by preemption or the taint manager, the kubelet's node-pressure eviction), virt-launcher marks
//! the domain for a graceful shutdown (`pkg/virt-launcher/monitor.go`, `MarkGracefulShutdownVMI`)
//! and virt-handler shuts the guest down within about a second (`pkg/virt-handler/vm.go`, `sync`:
//! `gracefulShutdown && vmi.IsRunning()` -> `processVmShutdown`). A migration started after that
//! does not save the VM. A migration already under way is left alone (`vm.go`: "ignoring key ...
//! as migration is in progress") until virt-launcher kills the guest at the VMI's grace period
//! plus 15 s (`services/template.go`, `--grace-period-seconds`).
//!
//! Before SIGTERM the kubelet runs the container's `preStop` hook, bounded by the grace period
//! (`pkg/kubelet/kuberuntime/kuberuntime_container.go`, `killContainer`, `executePreStopHook`; at
//! least 2 s are left for SIGTERM after it). evac makes that its window:
//!
//! - [`mutation`]: the `launcher-hold` policy gives every container of a launcher pod a `preStop`
//!   `httpGet` to the node's hold endpoint and raises the pod's grace period by the hold window;
//! - [`decision`]: the hold endpoint asks the `disruption-cause` policy, as long as the hook runs,
//!   whether the pod's termination may go on (allowed: the hook ends and SIGTERM follows) or must
//!   wait (429, as an eviction that is to be retried) while the VM migrates away;
//! - [`deadline`]: when a VM's time runs out, which the evacuation decision orders its migrations by.

pub mod deadline;
pub mod decision;
pub mod mutation;
mod settings;

pub use deadline::{termination_deadline, VirtHandler};
pub use decision::{decide, HoldOptions, Release};
pub use mutation::mutate;
pub use settings::{HoldSettings, LauncherHoldSettings};

/// The effects a hold decision returns (the hold recorded on its pod): what the hold endpoint
/// carries out, and all it may write besides the events it tells on pods.
pub const HOLD_EFFECTS: &[&str] = &["AnnotatePod"];
/// The pod annotation `launcher-hold` sets: the hold window in seconds. Its presence says the
/// pod's containers call the hold endpoint before SIGTERM.
pub const HOLD_WINDOW_ANNOTATION: &str = "evac.kubevirt.io/hold-window";
/// The pod annotation the hold endpoint sets when a hold begins (RFC 3339).
pub const HELD_SINCE_ANNOTATION: &str = "evac.kubevirt.io/held-since";
/// The pod annotation with when the pod's SIGTERM comes at the latest (RFC 3339): the end of the
/// hold window while it is held, the moment it ended once it has. The VM's deadline.
pub const HOLD_DEADLINE_ANNOTATION: &str = "evac.kubevirt.io/hold-deadline";
/// The pod annotation the evacuation decision sets to end a hold: why (the evacuation was given
/// up, cannot finish in time, or the VM has nowhere to go).
pub const HOLD_RELEASE_ANNOTATION: &str = "evac.kubevirt.io/hold-release";
/// The audit annotation of a hold decision that ends the hold: why.
pub const HOLD_RELEASED_AUDIT_ANNOTATION: &str = "evac.kubevirt.io/hold-released";
/// The `subResource` of the hold endpoint's requests to the `disruption-cause` policy.
pub const HOLD_SUBRESOURCE: &str = "hold";
/// The path prefix of the hold endpoint: `/hold/<namespace>/<vmi>/<container>`.
pub const HOLD_PATH: &str = "/hold";
/// The hold endpoint's default port, on the node's loopback address.
pub const DEFAULT_HOLD_PORT: u16 = 9190;
/// The default hold window, in seconds.
pub const DEFAULT_WINDOW_SECONDS: u64 = 300;
/// The priority of the `system-cluster-critical` PriorityClass: by default a preemptor at or above
/// it is never kept waiting by a hold.
pub const SYSTEM_CLUSTER_CRITICAL: i64 = 2_000_000_000;
/// The only host a `preStop` `httpGet` may name under Pod Security's `baseline` level.
pub const LOOPBACK: &str = "127.0.0.1";

/// The hook's path for a container of a VMI's launcher pod: `/hold/<namespace>/<vmi>/<container>`.
/// A mutating webhook sees no pod name (the API server generates it after admission), so the path
/// names the VMI: the endpoint finds its launcher pod on its own node.
pub fn hook_path(namespace: &str, vmi: &str, container: &str) -> String {
    format!("{HOLD_PATH}/{namespace}/{vmi}/{container}")
}

/// The namespace, VMI and container a hook's path names, or `None` for another path.
pub fn parse_hook_path(path: &str) -> Option<(&str, &str, &str)> {
    let path = path.split('?').next()?;
    let rest = path.strip_prefix(HOLD_PATH)?.strip_prefix('/')?;
    let mut parts = rest.split('/');
    let (namespace, vmi, container) = (parts.next()?, parts.next()?, parts.next()?);
    let valid =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    (parts.next().is_none() && valid(namespace) && valid(vmi) && valid(container))
        .then_some((namespace, vmi, container))
}

/// RFC 3339 in whole seconds, as Kubernetes writes timestamps.
pub(crate) fn timestamp(seconds: f64) -> String {
    let whole = seconds.floor() as i64;
    chrono::DateTime::from_timestamp(whole, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}
