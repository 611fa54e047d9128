//! KubeVirt's and Kubernetes' names that evac, its simulator and its hosts share: the kinds
//! decisions read and effects write, KubeVirt's labels, annotations and default limits. Each is
//! defined once, here or in the module that owns its meaning (re-exported here).

pub use crate::effect::{
    CAUSE_ANNOTATION, EVACUATION_MIGRATION_ANNOTATION, EVACUATION_MIGRATION_PREFIX,
    EVICTION_IN_PROGRESS_ANNOTATION, EVICTION_SOURCE_ANNOTATION, REQUEST_EVICT_ONLY_ANNOTATION,
};
pub use crate::evacuation::{BACKOFF_MAX_SECONDS, BACKOFF_START_SECONDS};
pub use crate::model::{
    APP_LABEL, DEFAULT_COMPLETION_TIMEOUT_PER_GIB, DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER,
    DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE, DEFAULT_PROGRESS_TIMEOUT, DISRUPTION_TARGET_CONDITION,
    DOMAIN_ANNOTATION, DRAIN_TAINT_KEY, LIVE_MIGRATABLE_CONDITION, MEMORY_PRESSURE_CONDITION,
};

/// The `apiVersion` of KubeVirt's resources.
pub const KUBEVIRT_API_VERSION: &str = "kubevirt.io/v1";

/// `(apiVersion, kind)` of an event.
pub const EVENT_KIND: (&str, &str) = ("v1", "Event");
/// `(apiVersion, kind)` of a pod.
pub const POD_KIND: (&str, &str) = ("v1", "Pod");
/// `(apiVersion, kind)` of a node.
pub const NODE_KIND: (&str, &str) = ("v1", "Node");
/// `(apiVersion, kind)` of a VirtualMachineInstance.
pub const VMI_KIND: (&str, &str) = (KUBEVIRT_API_VERSION, "VirtualMachineInstance");
/// `(apiVersion, kind)` of a VirtualMachineInstanceMigration.
pub const MIGRATION_KIND: (&str, &str) = (KUBEVIRT_API_VERSION, "VirtualMachineInstanceMigration");
/// `(apiVersion, kind)` of KubeVirt's configuration CR.
pub const KUBEVIRT_KIND: (&str, &str) = (KUBEVIRT_API_VERSION, "KubeVirt");

/// The value of [`APP_LABEL`] on launcher pods.
pub const LAUNCHER_APP: &str = "virt-launcher";
/// The label selector of launcher pods.
pub const LAUNCHER_SELECTOR: &str = "kubevirt.io=virt-launcher";
/// The label KubeVirt keeps on a VMI naming the node it runs on (`virtv1.NodeNameLabel`).
pub const NODE_NAME_LABEL: &str = "kubevirt.io/nodeName";
/// The label on a launcher pod with its VMI's uid (`virtv1.CreatedByLabel`).
pub const CREATED_BY_LABEL: &str = "kubevirt.io/created-by";
/// KubeVirt's failure wording when the VMI cannot be marked for evacuation.
pub const FAILED_MARKING: &str = "kubevirt failed marking the vmi for eviction";
/// How fast a VM's guest dirties memory, per second (a quantity such as `40Mi`), as a metrics
/// exporter publishes KubeVirt's `kubevirt_vmi_dirty_rate_bytes_per_second` on the VMI: what evac
/// estimates a migration's duration with.
pub const DIRTY_RATE_ANNOTATION: &str = "evac.kubevirt.io/dirty-rate";
