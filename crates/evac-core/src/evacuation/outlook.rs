//! KubeVirt's queue of unfinished migrations, read for [`queue::outlook`]: how long each holds
//! its slot, from its VMI's memory.

use super::inputs::Inputs;
use super::queue;
use super::Context;
use crate::cluster::{ClusterReader, GetResource};
use crate::kubevirt::VMI_KIND;
use crate::kubevirt_config::KUBEVIRT_API_VERSION;
use crate::model::{Migration, VirtualMachineInstance};

/// The outlook of KubeVirt's queue for the node. The VMIs of other nodes' migrations are read one
/// by one, only for the migrations that stay ahead (started ones, and pending ones of VMs that may
/// have a deadline); one that cannot be read counts as taking no time.
pub(super) fn read<'i, 'a, C>(
    inputs: &Inputs<'i, 'a>,
    cluster: &C,
    cx: &mut Context<'_>,
) -> queue::Outlook<'i, 'a>
where
    C: ClusterReader + ?Sized,
{
    let node_name = inputs.node.metadata.name.as_str();
    let entries =
        inputs.migrations.iter().filter(|m| m.is_active()).map(|m| entry(m, inputs, cluster, cx)).collect();
    let outlook = queue::outlook(
        entries,
        inputs.config.parallel_migrations_per_cluster,
        inputs.config.parallel_outbound_migrations_per_node,
        cx.now,
    );
    for migration in &outlook.requeue {
        cx.trace.note(|| {
            format!(
                "migration {}/{} of {} has not started and its VM has no deadline: requeue it behind the VMs of {node_name} whose pods have one",
                migration.metadata.namespace, migration.metadata.name, migration.spec.vmi_name
            )
        });
    }
    outlook
}

/// One unfinished migration in the queue: whether it is from the node, its VM's deadline, and how
/// long it still holds its slot.
fn entry<'i, 'a, C>(
    migration: &'i Migration<'a>,
    inputs: &Inputs<'i, 'a>,
    cluster: &C,
    cx: &mut Context<'_>,
) -> queue::Entry<'i, 'a>
where
    C: ClusterReader + ?Sized,
{
    let node_name = inputs.node.metadata.name.as_str();
    let namespace = migration.metadata.namespace.as_str();
    let vmi_name = migration.spec.vmi_name.as_str();
    let local = inputs.vmis.iter().find(|v| {
        v.metadata.namespace == namespace && v.metadata.name == vmi_name && v.status.node_name == node_name
    });
    let from_node = migration.evacuation_node().is_some_and(|n| n == node_name)
        || migration.status.migration_state.source_node == node_name;
    let deadline = local.map_or(f64::INFINITY, |_| inputs.deadline_of(namespace, vmi_name));
    let waits_anyway =
        migration.is_unstarted() && deadline.is_infinite() && queue::without_deadline(migration);
    let full = match local {
        _ if waits_anyway => 0.0,
        Some(vmi) => inputs.estimate(vmi, vmi.memory().unwrap_or(0.0)).seconds(),
        None => remote_seconds(migration, inputs, cluster, cx),
    };
    let seconds = match migration.started_at() {
        Some(started) if !migration.is_unstarted() => (started + full - cx.now).max(0.0),
        _ => full,
    };
    queue::Entry { migration, seconds, from_node, deadline }
}

/// How long the migration of another node's VMI takes, from the VMI read by name; no time when it
/// cannot be read.
fn remote_seconds<C>(
    migration: &Migration<'_>,
    inputs: &Inputs<'_, '_>,
    cluster: &C,
    cx: &mut Context<'_>,
) -> f64
where
    C: ClusterReader + ?Sized,
{
    let namespace = migration.metadata.namespace.as_str();
    let read = cluster.get_resource(&GetResource {
        api_version: KUBEVIRT_API_VERSION.into(),
        kind: VMI_KIND.1.into(),
        name: migration.spec.vmi_name.as_str().into(),
        namespace: Some(namespace.into()),
        disable_cache: false,
    });
    let decoded =
        read.as_ref().ok().and_then(|raw| serde_json::from_slice::<VirtualMachineInstance<'_>>(raw).ok());
    match decoded {
        Some(vmi) => inputs.estimate(&vmi, vmi.memory().unwrap_or(0.0)).seconds(),
        None => {
            cx.trace.note(|| {
                format!(
                    "migration {namespace}/{}: its VMI cannot be read: counted as taking no time",
                    migration.metadata.name
                )
            });
            0.0
        }
    }
}
