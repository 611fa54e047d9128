//! Serde models of the objects evac's decisions read.
//!
//! Only the fields a decision needs are modelled; unknown fields are ignored and `null` reads as
//! absent, so objects from any Kubernetes or KubeVirt version deserialize.

mod admission;
pub mod envelope;
mod eviction;
mod kubevirt;
mod lazy;
mod meta;
mod migration;
mod node;
mod node_metrics;
mod node_selection;
mod pod;
pub mod quantity;
mod raw_map;
mod str;
pub mod time;
mod vmi;

pub use admission::{
    eviction_admission_request, AdmissionRequest, GroupVersionKind, GroupVersionResource, UserInfo,
    ValidationRequest,
};
pub use eviction::{DeleteOptions, Eviction};
pub use kubevirt::{
    DeveloperConfiguration, KubeVirt, KubeVirtConfiguration, KubeVirtSpec, MigrationConfiguration,
    DEFAULT_COMPLETION_TIMEOUT_PER_GIB, DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER,
    DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE, DEFAULT_PROGRESS_TIMEOUT,
};
pub use lazy::Lazy;
pub use meta::{Condition, ObjectMeta, OwnerReference};
pub use migration::{Migration, MigrationSpec, MigrationState, MigrationStatus, PhaseTransition};
pub use node::{
    Node, NodeSpec, NodeStatus, Taint, Toleration, DRAIN_TAINT_KEY, MEMORY_PRESSURE_CONDITION,
    NODE_DOWN_TAINT_KEYS,
};
pub use node_metrics::{NodeMetrics, NODE_METRICS_API_VERSION, NODE_METRICS_KIND};
pub use node_selection::{
    Affinity, NodeAffinity, NodeSelection, NodeSelector, NodeSelectorTerm, Requirement,
};
pub use pod::{Pod, PodRole, PodSpec, PodStatus, APP_LABEL, DISRUPTION_TARGET_CONDITION, DOMAIN_ANNOTATION};
pub use raw_map::RawMap;
pub use str::Str;
pub use vmi::{
    EvictionStrategy, VirtualMachineInstance, VmiDomain, VmiSpec, VmiStatus, LIVE_MIGRATABLE_CONDITION,
};

/// Deserializes `null` as the type's default, for fields Kubernetes may send as `null`.
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    use serde::Deserialize;
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
