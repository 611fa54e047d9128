//! KubeVirt's exact texts. Tools grep for them (the descheduler looks for
//! `Eviction triggered evacuation`), so they must not drift.

use core::fmt::Display;

use crate::ObjectRef;

/// The text the descheduler's KEP-1397 support looks for in a 429 answer.
pub const EVACUATION_TRIGGERED: &str = "Eviction triggered evacuation";

pub const TARGET_POD: &str = "Eviction request for target Pod";

pub fn evacuation_triggered(vmi: &ObjectRef) -> String {
    format!("{EVACUATION_TRIGGERED} of VMI \"{}/{}\"", vmi.namespace, vmi.name)
}

pub fn evacuation_in_progress(vmi: &ObjectRef) -> String {
    format!("Evacuation in progress: {}", evacuation_triggered(vmi))
}

pub fn not_live_migratable(vmi_name: &str) -> String {
    format!("VMI {vmi_name} is configured with an eviction strategy but is not live-migratable")
}

pub fn failed_getting_vmi(err: &dyn Display) -> String {
    format!("kubevirt failed getting the vmi: {err}")
}

pub fn failed_getting_hotplug_owner(err: &dyn Display) -> String {
    format!("failed getting owner for hotplug pod: {err}")
}

pub fn failed_getting_cluster_config(err: &dyn Display) -> String {
    format!("kubevirt failed getting the cluster-wide eviction strategy: {err}")
}

pub fn failed_parsing_eviction(err: &dyn Display) -> String {
    format!("failed to parse the eviction object: {err}")
}

pub fn hotplug_pod_protected(pod: &str, vmi: &str, namespace: &str) -> String {
    format!("cannot evict hotplug pod: {pod} associated with running vmi: {vmi} in namespace {namespace}")
}

pub fn failed_marking_vmi(err: &dyn Display) -> String {
    format!("kubevirt failed marking the vmi for eviction: {err}")
}
