//! KubeVirt's exact texts. Tools grep for them (the descheduler looks for
//! `Eviction triggered evacuation`), so they must not drift.

use core::fmt::Display;

use crate::ObjectRef;

/// The text the descheduler's KEP-1397 support looks for in a 429 answer.
pub const EVACUATION_TRIGGERED: &str = "Eviction triggered evacuation";

/// The 429 message for the eviction of a launcher pod that is not on its VMI's node (a migration
/// target pod, or one not scheduled yet): `Eviction request for target Pod`.
pub const TARGET_POD: &str = "Eviction request for target Pod";

/// The 429 message once the VMI is marked (dry run or not):
/// `Eviction triggered evacuation of VMI "<namespace>/<name>"`. KubeVirt keeps this format
/// for the descheduler.
pub fn evacuation_triggered(vmi: &ObjectRef) -> String {
    format!("{EVACUATION_TRIGGERED} of VMI \"{}/{}\"", vmi.namespace, vmi.name)
}

/// The 429 message for a VMI marked already:
/// `Evacuation in progress: Eviction triggered evacuation of VMI "<namespace>/<name>"`.
pub fn evacuation_in_progress(vmi: &ObjectRef) -> String {
    format!("Evacuation in progress: {}", evacuation_triggered(vmi))
}

/// The 429 message for a `LiveMigrate` VMI that cannot migrate, which is not marked:
/// `VMI <name> is configured with an eviction strategy but is not live-migratable`.
pub fn not_live_migratable(vmi_name: &str) -> String {
    format!("VMI {vmi_name} is configured with an eviction strategy but is not live-migratable")
}

/// The 429 message when the VMI cannot be read (for a launcher pod, also when it does not
/// exist): `kubevirt failed getting the vmi: <error>`.
pub fn failed_getting_vmi(err: &dyn Display) -> String {
    format!("kubevirt failed getting the vmi: {err}")
}

/// The 429 message when a hotplug volume pod's owner pod cannot be read (NotFound aside):
/// `failed getting owner for hotplug pod: <error>`.
pub fn failed_getting_hotplug_owner(err: &dyn Display) -> String {
    format!("failed getting owner for hotplug pod: {err}")
}

/// The 429 message when the KubeVirt CR cannot be read for the cluster-wide strategy:
/// `kubevirt failed getting the cluster-wide eviction strategy: <error>`. evac's own text:
/// KubeVirt reads its configuration from a cache and has no such failure.
pub fn failed_getting_cluster_config(err: &dyn Display) -> String {
    format!("kubevirt failed getting the cluster-wide eviction strategy: {err}")
}

/// The 429 message when the request's Eviction does not decode:
/// `failed to parse the eviction object: <error>`.
pub fn failed_parsing_eviction(err: &dyn Display) -> String {
    format!("failed to parse the eviction object: {err}")
}

/// The 429 message for a hotplug volume pod whose launcher pod's VMI exists:
/// `cannot evict hotplug pod: <pod> associated with running vmi: <vmi> in namespace <namespace>`.
pub fn hotplug_pod_protected(pod: &str, vmi: &str, namespace: &str) -> String {
    format!("cannot evict hotplug pod: {pod} associated with running vmi: {vmi} in namespace {namespace}")
}

/// The 429 message when the VMI cannot be marked: `kubevirt failed marking the vmi for eviction: <error>`.
pub fn failed_marking_vmi(err: &dyn Display) -> String {
    format!("{}: {err}", crate::kubevirt::FAILED_MARKING)
}
