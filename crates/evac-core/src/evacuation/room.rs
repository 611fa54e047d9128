//! The room KubeVirt's parallel limits leave for more migrations
//! (`parallelMigrationsPerCluster`, `parallelOutboundMigrationsPerNode`), and the order the
//! candidates take it in.

use super::flavor::Flavor;
use super::inputs::Inputs;
use super::order::Candidate;
use super::Context;

/// Orders the candidates and says how many migrations may start, counting the unfinished ones
/// and the `kubevirt_starting` KubeVirt's evacuation controller is about to create.
pub(super) fn room(
    candidates: &mut [Candidate<'_, '_>],
    inputs: &Inputs<'_, '_>,
    kubevirt_starting: u32,
    cx: &mut Context<'_>,
) -> usize {
    let node_name = inputs.node.metadata.name.as_str();
    let config = inputs.config;
    let mut load = super::history::load(inputs.migrations, node_name);
    load.cluster += kubevirt_starting;
    load.outbound += kubevirt_starting;
    let flavor = cx.flavor;
    let room = flavor.order(candidates, load, config, cx.now);
    cx.trace.note(|| match flavor {
        Flavor::Evac => format!(
            "room for {room} more migrations: {} of {} running in the cluster, {} of {} from {node_name}{}",
            load.cluster,
            config.parallel_migrations_per_cluster,
            load.outbound,
            config.parallel_outbound_migrations_per_node,
            if kubevirt_starting > 0 {
                format!(" (with {kubevirt_starting} KubeVirt is about to start)")
            } else {
                String::new()
            }
        ),
        Flavor::KubeVirt => {
            "KubeVirt creates a migration for every candidate; its migration controller holds them to the limits"
                .to_owned()
        }
    });
    if !candidates.is_empty() {
        cx.trace.note(|| {
            let order: Vec<String> =
                candidates.iter().map(|c| format!("{}/{}", c.namespace, c.name)).collect();
            format!("candidates in order: {}", order.join(", "))
        });
    }
    room
}
