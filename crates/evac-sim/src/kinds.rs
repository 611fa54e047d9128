//! The kinds the simulator's components read and write, named once.

use evac_core::kubevirt::{MIGRATION_KIND, NODE_KIND, POD_KIND, VMI_KIND};

use crate::Kind;

/// `v1` Pods.
pub fn pods() -> Kind {
    Kind::new(POD_KIND.0, POD_KIND.1)
}

/// `v1` Nodes.
pub fn nodes() -> Kind {
    Kind::new(NODE_KIND.0, NODE_KIND.1)
}

/// `kubevirt.io/v1` VirtualMachineInstances.
pub fn vmis() -> Kind {
    Kind::new(VMI_KIND.0, VMI_KIND.1)
}

/// `kubevirt.io/v1` VirtualMachines: a VM's run strategy.
pub fn vms() -> Kind {
    Kind::new(VMI_KIND.0, "VirtualMachine")
}

/// `kubevirt.io/v1` VirtualMachineInstanceMigrations.
pub fn migrations() -> Kind {
    Kind::new(MIGRATION_KIND.0, MIGRATION_KIND.1)
}

/// `metrics.k8s.io/v1beta1` NodeMetrics, as metrics-server serves them.
pub fn node_metrics() -> Kind {
    Kind::new(evac_core::model::NODE_METRICS_API_VERSION, evac_core::model::NODE_METRICS_KIND)
}
