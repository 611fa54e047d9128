use serde::{Deserialize, Serialize};

use super::{null_as_default, Condition, ObjectMeta, Str};

/// A `v1` Pod.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Pod<'a> {
    /// `metadata`, where KubeVirt marks its pods ([`APP_LABEL`], [`DOMAIN_ANNOTATION`]).
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `spec`: the pod's node and grace period.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: PodSpec<'a>,
    /// `status`: the pod's phase and conditions.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: PodStatus<'a>,
}

/// A pod's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec<'a> {
    /// `spec.nodeName`: the node the pod is bound to; empty until it is scheduled.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub node_name: Str<'a>,
    /// `terminationGracePeriodSeconds`: how long the pod may take to stop once deleted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// `priority`: the pod's priority, resolved from its PriorityClass at creation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

/// A pod's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatus<'a> {
    /// `status.phase`: `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub phase: Str<'a>,
    /// `status.conditions`, e.g. `Ready`, `DisruptionTarget`.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition<'a>>,
    /// `status.nominatedNodeName`: the node a pending pod preempted others on and waits for.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub nominated_node_name: Str<'a>,
}

/// The label KubeVirt puts on the pods it creates (`virtv1.AppLabel`).
pub const APP_LABEL: &str = "kubevirt.io";
/// The pod condition a component sets before it disrupts the pod (Kubernetes 1.26+).
pub const DISRUPTION_TARGET_CONDITION: &str = "DisruptionTarget";
/// The pod annotation that names the VMI a launcher pod runs (`virtv1.DomainAnnotation`).
pub const DOMAIN_ANNOTATION: &str = "kubevirt.io/domain";

/// What a pod is to KubeVirt, from its `kubevirt.io` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodRole {
    /// A `virt-launcher` pod: the pod a VMI runs in.
    Launcher,
    /// A hotplug volume pod, owned by exactly one launcher pod.
    HotplugVolume,
    /// Any other pod.
    Other,
}

impl<'a> Pod<'a> {
    /// The pod's role, reading its labels once.
    pub fn role(&self) -> PodRole {
        match self.metadata.label(APP_LABEL).as_deref() {
            Some("virt-launcher") => PodRole::Launcher,
            Some("hotplug-disk") if self.metadata.owner_references.get().len() == 1 => PodRole::HotplugVolume,
            _ => PodRole::Other,
        }
    }

    /// Whether the pod is a `virt-launcher` pod ([`PodRole::Launcher`]).
    pub fn is_virt_launcher(&self) -> bool {
        self.role() == PodRole::Launcher
    }

    /// A pod that has finished: phase `Succeeded` or `Failed`.
    pub fn is_completed(&self) -> bool {
        matches!(self.status.phase.as_str(), "Succeeded" | "Failed")
    }

    /// The VMI a launcher pod runs, from its `kubevirt.io/domain` annotation.
    pub fn domain(&self) -> Option<Str<'a>> {
        self.metadata.annotation(DOMAIN_ANNOTATION)
    }

    /// Whether the pod is being deleted (it has a `deletionTimestamp`).
    pub fn is_terminating(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// When the pod's deletion began, in seconds since the Unix epoch: its `deletionTimestamp`
    /// less its `deletionGracePeriodSeconds` (the API server sets the timestamp that far ahead);
    /// `None` when it is not being deleted.
    pub fn deletion_started_at(&self) -> Option<f64> {
        let deadline = self.metadata.deletion_timestamp.as_deref().and_then(super::time::unix_seconds)?;
        Some(deadline - self.metadata.deletion_grace_period_seconds.unwrap_or(0).max(0) as f64)
    }

    /// The `DisruptionTarget` condition's reason, when the condition is `True`: the component
    /// that is about to disrupt the pod (`PreemptionByScheduler`, `DeletionByTaintManager`,
    /// `TerminationByKubelet`, `EvictionByEvictionAPI`, `DeletionByPodGC`).
    pub fn disruption_reason(&self) -> Option<&str> {
        Condition::find_true(&self.status.conditions, DISRUPTION_TARGET_CONDITION).map(|c| c.reason.as_str())
    }
}
