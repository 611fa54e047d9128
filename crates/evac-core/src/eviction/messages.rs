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

/// evac's 500 message for a read the host refused: `policy pod-eviction cannot read the cluster
/// (grant it in policies.yml: ...): <the host's refusal>`. Not KubeVirt's: its admitter has no
/// such case.
pub fn policy_misconfigured(refusal: &impl Display) -> String {
    format!("policy pod-eviction cannot read the cluster ({}): {refusal}", crate::cluster::REFUSAL_HINT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_read_names_the_policy_and_the_fix() {
        assert_eq!(
            policy_misconfigured(
                &"Policy has not been granted access to the 'kubernetes/get_resource' host capability."
            ),
            "policy pod-eviction cannot read the cluster (grant it in policies.yml: hostCapabilities \
             kubernetes/*, and the resource in contextAwareResources): Policy has not been granted access \
             to the 'kubernetes/get_resource' host capability."
        );
    }

    /// Every text in full, as KubeVirt's pods/eviction admitter words it, with a Kubernetes
    /// error where the text carries one.
    #[test]
    fn kubevirts_exact_wording() {
        let vmi = ObjectRef::new("default", "vm-cirros");
        let err = r#"pods "virt-launcher-vm-cirros-wn5v4" not found"#;
        let rows: &[(&str, String, &str)] = &[
            (
                "evacuation_triggered",
                evacuation_triggered(&vmi),
                r#"Eviction triggered evacuation of VMI "default/vm-cirros""#,
            ),
            (
                "evacuation_in_progress",
                evacuation_in_progress(&vmi),
                r#"Evacuation in progress: Eviction triggered evacuation of VMI "default/vm-cirros""#,
            ),
            (
                "not_live_migratable",
                not_live_migratable("vm-cirros"),
                "VMI vm-cirros is configured with an eviction strategy but is not live-migratable",
            ),
            (
                "failed_getting_vmi",
                failed_getting_vmi(&"connection refused"),
                "kubevirt failed getting the vmi: connection refused",
            ),
            (
                "failed_getting_hotplug_owner",
                failed_getting_hotplug_owner(&err),
                r#"failed getting owner for hotplug pod: pods "virt-launcher-vm-cirros-wn5v4" not found"#,
            ),
            (
                "failed_getting_cluster_config",
                failed_getting_cluster_config(&"connection refused"),
                "kubevirt failed getting the cluster-wide eviction strategy: connection refused",
            ),
            (
                "failed_parsing_eviction",
                failed_parsing_eviction(&"expected value at line 1 column 1"),
                "failed to parse the eviction object: expected value at line 1 column 1",
            ),
            (
                "hotplug_pod_protected",
                hotplug_pod_protected("hp-volume-x7k2p", "vm-cirros", "default"),
                "cannot evict hotplug pod: hp-volume-x7k2p associated with running vmi: vm-cirros in namespace default",
            ),
            (
                "failed_marking_vmi",
                failed_marking_vmi(&"the object has been modified"),
                "kubevirt failed marking the vmi for eviction: the object has been modified",
            ),
        ];
        for (name, got, want) in rows {
            assert_eq!(got, want, "{name}");
        }
        // The descheduler matches this prefix of a 429's message (KEP-1397).
        assert!(evacuation_triggered(&vmi).starts_with(EVACUATION_TRIGGERED));
        assert!(evacuation_in_progress(&vmi).contains(EVACUATION_TRIGGERED));
    }
}
