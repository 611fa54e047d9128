//! Whether a migrating VM has somewhere to go: a node the scheduler would take its launcher pod
//! on (not cordoned, taints tolerated), where its memory leaves at least the node-pressure
//! marking level available. A migration with nowhere to go only waits Pending until KubeVirt's
//! unschedulable timeout; one onto a node it leaves short of memory moves the pressure there,
//! and the kubelet evicts the next pod (see [`crate::node_pressure`]).
//!
//! The scheduler picks the target, not evac: placement here only answers whether some node has
//! room, and books the VM's memory on the node with the most available, so that the VMs started
//! in one decision do not all count on the same free memory. Nodes without a `memory.available`
//! figure (no NodeMetrics: [`crate::model::Node::memory_available`]) are taken to have room:
//! without the figure, the scheduler's own fit is all there is to go by.

use crate::cluster::ClusterReader;
use crate::model::quantity::format_bytes;
use crate::model::{Node, NodeSelection, Toleration};

/// Reads every node's working set from its NodeMetrics ([`crate::node_pressure::read_working_set`]).
/// A node whose metrics cannot be read (metrics-server down or not installed) has no figure, and
/// is taken to have room, as an unscraped one is: the scheduler's own fit decides, and no
/// evacuation stops for want of a metric.
pub fn read_working_sets<C: ClusterReader + ?Sized>(nodes: &mut [Node<'_>], cluster: &C) {
    for node in nodes {
        if crate::node_pressure::read_working_set(node, cluster).is_err() {
            node.working_set = None;
        }
    }
}

/// The nodes a VM may migrate to, with the memory each has left.
#[derive(Debug)]
pub struct Placement<'n, 'a> {
    nodes: Vec<(&'n Node<'a>, Option<f64>)>,
    level: f64,
}

/// Why a VM has nowhere to go.
#[derive(Debug, Clone, PartialEq)]
pub enum NoRoom {
    /// No other node would schedule its pod (cordoned, with taints it does not tolerate, or
    /// outside its node selector or required node affinity).
    NoNode,
    /// Every node that would is short of memory: the most any keeps after taking the VM.
    Memory {
        /// The VM's memory, in bytes.
        needs: f64,
        /// What the best node would have left, in bytes.
        best_left: f64,
        /// The level it must keep, in bytes.
        level: f64,
    },
}

impl core::fmt::Display for NoRoom {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoNode => f.write_str(
                "no other node accepts it (cordoned, tainted without a toleration, or outside its node \
                     selector or required node affinity)",
            ),
            Self::Memory { needs, best_left, level } => write!(
                f,
                "no other node has room for its {}: the best would keep {} available, under the \
                 node-pressure level of {}",
                format_bytes(*needs),
                format_bytes(*best_left),
                format_bytes(*level)
            ),
        }
    }
}

impl<'n, 'a> Placement<'n, 'a> {
    /// The cluster's nodes; no migration may leave one with less than `level` bytes available.
    pub fn new(nodes: &'n [Node<'a>], level: f64) -> Self {
        Self { nodes: nodes.iter().map(|n| (n, n.memory_available())).collect(), level }
    }

    /// Whether a VM of `memory` bytes leaving `source`, whose pod has `tolerations` and
    /// `selection`, keeps the
    /// level on *every* node that would take it: the scheduler picks the target by requests, not
    /// by available memory, so only then is a move free of risk wherever it lands. Nodes without
    /// a figure count as clear, as in [`Placement::reserve`].
    pub fn clear_everywhere(
        &self,
        source: &str,
        memory: f64,
        tolerations: &[Toleration<'_>],
        selection: &NodeSelection<'_>,
    ) -> bool {
        self.nodes.iter().all(|(node, available)| {
            node.metadata.name == source
                || !node.admits(tolerations, selection)
                || available.is_none_or(|free| free - memory >= self.level)
        })
    }

    /// Finds room for a VM of `memory` bytes leaving `source`, whose pod has `tolerations` and
    /// `selection`, and books it on the node with the most memory available.
    pub fn reserve(
        &mut self,
        source: &str,
        memory: f64,
        tolerations: &[Toleration<'_>],
        selection: &NodeSelection<'_>,
    ) -> Result<(), NoRoom> {
        let mut best: Option<(usize, f64)> = None;
        let mut any = false;
        for (i, (node, available)) in self.nodes.iter().enumerate() {
            if node.metadata.name == source || !node.admits(tolerations, selection) {
                continue;
            }
            any = true;
            let Some(free) = *available else {
                // Unknown: the scheduler's fit decides.
                return Ok(());
            };
            if best.is_none_or(|(_, most)| free > most) {
                best = Some((i, free));
            }
        }
        let Some((best, free)) = best.filter(|_| any) else {
            return Err(NoRoom::NoNode);
        };
        let left = free - memory;
        if left < self.level {
            return Err(NoRoom::Memory { needs: memory, best_left: left, level: self.level });
        }
        self.nodes[best].1 = Some(left);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    const GI: f64 = 1024.0 * 1024.0 * 1024.0;

    /// A node with `available` memory: its capacity, none of it in use.
    fn node(name: &str, available: Option<&str>, extra: Value) -> Value {
        let mut node = json!({"metadata": {"name": name}, "spec": extra});
        if let Some(available) = available {
            node["status"] = json!({"capacity": {"memory": available}});
        }
        node
    }

    fn decode(nodes: &[Value]) -> Vec<Node<'static>> {
        // Leaked: the nodes borrow their strings, and a test's few bytes may outlive it.
        nodes
            .iter()
            .map(|n| {
                let mut node: Node<'static> =
                    serde_json::from_str(Box::leak(n.to_string().into_boxed_str())).unwrap();
                node.working_set = Some(0.0);
                node
            })
            .collect()
    }

    /// The source never counts; cordoned and intolerable nodes do not either; the VM goes where
    /// the most memory is left, and what it books there is gone for the next one.
    #[test]
    fn books_memory_on_the_roomiest_accepting_node() {
        let nodes = decode(&[
            node("n1", Some("60Gi"), json!({})),
            node("n2", Some("20Gi"), json!({})),
            node("n3", Some("30Gi"), json!({})),
            node("n4", Some("90Gi"), json!({"unschedulable": true})),
            node("n5", Some("90Gi"), json!({"taints": [{"key": "gpu", "effect": "NoSchedule"}]})),
        ]);
        let mut placement = Placement::new(&nodes, 8.0 * GI);
        // n3 (30Gi) then n2 (20Gi), then n3 again with 14Gi left: 14 - 6 = 8, exactly the level.
        assert_eq!(placement.reserve("n1", 16.0 * GI, &[], &NodeSelection::default()), Ok(()));
        assert_eq!(placement.reserve("n1", 12.0 * GI, &[], &NodeSelection::default()), Ok(()));
        assert_eq!(placement.reserve("n1", 6.0 * GI, &[], &NodeSelection::default()), Ok(()));
        // n2 has 8Gi left, n3 8Gi: nothing keeps the level any more.
        assert_eq!(
            placement.reserve("n1", 1.0 * GI, &[], &NodeSelection::default()),
            Err(NoRoom::Memory { needs: GI, best_left: 7.0 * GI, level: 8.0 * GI })
        );
        // A toleration opens n5.
        let tolerations: Vec<Toleration<'_>> =
            vec![serde_json::from_str(r#"{"key": "gpu", "operator": "Exists"}"#).unwrap()];
        assert_eq!(placement.reserve("n1", 1.0 * GI, &tolerations, &NodeSelection::default()), Ok(()));
    }

    /// Among nodes with the same room the first by name is booked, as the scheduler breaks the
    /// tie: a VM that only one of them accepts may then find it full.
    #[test]
    fn ties_go_to_the_first_node_by_name() {
        let nodes = decode(&[
            node("a", Some("20Gi"), json!({})),
            node("b", Some("20Gi"), json!({"taints": [{"key": "gpu", "effect": "NoSchedule"}]})),
        ]);
        let gpu: Vec<Toleration<'_>> =
            vec![serde_json::from_str(r#"{"key": "gpu", "operator": "Exists"}"#).unwrap()];
        let mut placement = Placement::new(&nodes, GI);
        assert_eq!(placement.reserve("src", 16.0 * GI, &gpu, &NodeSelection::default()), Ok(()));
        assert_eq!(
            placement.reserve("src", 16.0 * GI, &[], &NodeSelection::default()),
            Err(NoRoom::Memory { needs: 16.0 * GI, best_left: -12.0 * GI, level: GI })
        );
    }

    #[test]
    fn nowhere_to_go_without_an_accepting_node() {
        let nodes =
            decode(&[node("n1", Some("60Gi"), json!({})), node("n2", None, json!({"unschedulable": true}))]);
        let mut placement = Placement::new(&nodes, GI);
        assert_eq!(placement.reserve("n1", GI, &[], &NodeSelection::default()), Err(NoRoom::NoNode));
        assert_eq!(
            Placement::new(&[], GI).reserve("n1", GI, &[], &NodeSelection::default()),
            Err(NoRoom::NoNode)
        );
        assert!(NoRoom::NoNode.to_string().contains("no other node accepts it"));
    }

    /// A node that publishes no figure has room as far as evac can tell.
    #[test]
    fn a_node_without_a_figure_has_room() {
        let nodes = decode(&[
            node("n1", Some("1Gi"), json!({})),
            node("n2", None, json!({})),
            node("n3", Some("1Gi"), json!({})),
        ]);
        let mut placement = Placement::new(&nodes, 8.0 * GI);
        for _ in 0..3 {
            assert_eq!(placement.reserve("n1", 64.0 * GI, &[], &NodeSelection::default()), Ok(()));
        }
    }

    #[test]
    fn the_reason_reads_in_quantities() {
        let why = NoRoom::Memory { needs: 13.0 * GI, best_left: 6.0 * GI, level: 9.0 * GI };
        assert_eq!(
            why.to_string(),
            "no other node has room for its 13Gi: the best would keep 6Gi available, under the \
             node-pressure level of 9Gi"
        );
    }
}
