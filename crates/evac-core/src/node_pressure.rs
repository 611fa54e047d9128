//! When a node is short of memory: one setting, `nodePressure`, that the disruption-cause decision
//! marks VMs by and the evacuation decision calls those marks off and places migrations by, so
//! that marking and releasing cannot fight each other.
//!
//! A node is short of memory when `memory.available` is under `threshold + headroom`: VMs are
//! marked to leave it. A node-pressure mark is called off only once the node has at least
//! `threshold + 2 × headroom` available and no `MemoryPressure`: one headroom of hysteresis, so a
//! node hovering at the marking level does not flap between marking and releasing. And no VM is
//! migrated onto a node it would leave with less than `threshold + headroom`: the migration
//! would only move the pressure there.

use serde::{Deserialize, Serialize};

use crate::cluster::{ClusterReader, GetResource, ReadError};
use crate::model::{quantity, Node, NodeMetrics, NODE_METRICS_API_VERSION, NODE_METRICS_KIND};

/// Reads a node's memory working set from its NodeMetrics (`metrics.k8s.io/v1beta1`, served by
/// metrics-server) into [`Node::working_set`], so that [`Node::memory_available`] has a figure.
/// A node metrics-server has not scraped yet has none (NotFound): its availability stays
/// unknown. One `get_resource` per node: metrics-server's API has no watch, and a host answers a
/// get from its own poll of it or by asking (Kubewarden's policy-server).
pub fn read_working_set<C: ClusterReader + ?Sized>(
    node: &mut Node<'_>,
    cluster: &C,
) -> Result<(), ReadError> {
    let request = GetResource {
        api_version: NODE_METRICS_API_VERSION.into(),
        kind: NODE_METRICS_KIND.into(),
        name: node.metadata.name.as_str().into(),
        namespace: None,
        disable_cache: false,
    };
    node.working_set = match cluster.get_resource(&request) {
        Ok(raw) => crate::cluster::decode::<NodeMetrics<'_>>(&raw, NODE_METRICS_KIND)?.memory_working_set(),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e),
    };
    Ok(())
}

/// When a node is short of memory, ahead of the kubelet.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct NodePressure {
    /// The kubelet's `evictionSoft` `memory.available`: below it, the kubelet starts evicting.
    pub threshold: String,
    /// How much sooner to act: a live migration needs time to finish before the kubelet kills.
    pub headroom: String,
}

impl Default for NodePressure {
    /// The soft threshold of the node-pressure design's functional tests, and room for a small VM.
    fn default() -> Self {
        Self { threshold: "3500Mi".into(), headroom: "1Gi".into() }
    }
}

/// [`NodePressure`] in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PressureLevels {
    /// `threshold`.
    pub threshold: f64,
    /// `headroom`.
    pub headroom: f64,
}

impl PressureLevels {
    /// Below this much available memory, VMs are marked to leave the node; no migration may
    /// leave a target with less.
    pub fn mark_below(self) -> f64 {
        self.threshold + self.headroom
    }

    /// From this much available memory on, a node-pressure mark is called off.
    pub fn release_from(self) -> f64 {
        self.threshold + 2.0 * self.headroom
    }
}

impl NodePressure {
    /// `(threshold, headroom)` in bytes.
    pub fn bytes(&self) -> Result<(f64, f64), crate::InvalidSettings> {
        let levels = self.levels()?;
        Ok((levels.threshold, levels.headroom))
    }

    /// The levels in bytes; an error names the field that is not a memory quantity.
    pub fn levels(&self) -> Result<PressureLevels, crate::InvalidSettings> {
        let parse = |field: &str, value: &str| match quantity::bytes(value) {
            Some(bytes) if bytes >= 0.0 => Ok(bytes),
            Some(_) => Err(crate::InvalidSettings::from(format!(
                "nodePressure.{field}: {value:?} is negative: a memory quantity is at least 0"
            ))),
            None => Err(crate::InvalidSettings::from(format!(
                "nodePressure.{field}: {value:?} is not a memory quantity (e.g. 3500Mi)"
            ))),
        };
        Ok(PressureLevels {
            threshold: parse("threshold", &self.threshold)?,
            headroom: parse("headroom", &self.headroom)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: f64 = 1024.0 * 1024.0;

    /// Marking below threshold + headroom, releasing from threshold + 2 × headroom: the default
    /// marks under 4524Mi and releases from 5548Mi.
    #[test]
    fn release_sits_one_headroom_above_marking() {
        let levels = NodePressure::default().levels().unwrap();
        assert_eq!(levels.mark_below(), 4524.0 * MI);
        assert_eq!(levels.release_from(), 5548.0 * MI);
        let custom = NodePressure { threshold: "8Gi".into(), headroom: "512Mi".into() }.levels().unwrap();
        assert_eq!((custom.mark_below(), custom.release_from()), (8704.0 * MI, 9216.0 * MI));
    }

    #[test]
    fn a_value_that_is_not_a_quantity_is_named() {
        let bad = NodePressure { threshold: "lots".into(), headroom: "1Gi".into() };
        assert_eq!(
            bad.levels().unwrap_err().to_string(),
            r#"nodePressure.threshold: "lots" is not a memory quantity (e.g. 3500Mi)"#
        );
        let bad = NodePressure { threshold: "1Gi".into(), headroom: "-".into() };
        assert!(bad.bytes().unwrap_err().to_string().starts_with("nodePressure.headroom"));
        let negative = NodePressure { threshold: "1Gi".into(), headroom: "-1Gi".into() };
        assert_eq!(
            negative.levels().unwrap_err().to_string(),
            r#"nodePressure.headroom: "-1Gi" is negative: a memory quantity is at least 0"#
        );
    }
}
