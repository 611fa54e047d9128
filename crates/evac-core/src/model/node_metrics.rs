//! `metrics.k8s.io/v1beta1` NodeMetrics, as metrics-server serves them (`pkg/api/node.go`): a
//! node's usage over its last scrape window. `usage.memory` is the node's working set, the figure
//! the kubelet subtracts from the node's capacity for its `memory.available` eviction signal.

use serde::{Deserialize, Serialize};

use super::{null_as_default, ObjectMeta, RawMap};

/// The API version NodeMetrics are served under (metrics-server's aggregated API).
pub const NODE_METRICS_API_VERSION: &str = "metrics.k8s.io/v1beta1";
/// The kind.
pub const NODE_METRICS_KIND: &str = "NodeMetrics";

/// A node's metrics.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct NodeMetrics<'a> {
    /// `metadata`: named after the node.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `usage`: `cpu` and `memory` (the working set) as quantities.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "RawMap::is_empty")]
    pub usage: RawMap<'a>,
}

impl NodeMetrics<'_> {
    /// `usage.memory` in bytes, when it is a quantity.
    pub fn memory_working_set(&self) -> Option<f64> {
        self.usage.get("memory").and_then(|q| super::quantity::bytes(&q))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_set_is_usage_memory() {
        let text = r#"{"kind":"NodeMetrics","apiVersion":"metrics.k8s.io/v1beta1","metadata":{"name":"n1"},
                       "timestamp":"2026-11-23T10:00:00Z","window":"10.062s",
                       "usage":{"cpu":"137m","memory":"28000Mi"}}"#;
        let metrics: NodeMetrics<'_> = serde_json::from_str(text).unwrap();
        assert_eq!(metrics.memory_working_set(), Some(28000.0 * 1024.0 * 1024.0));
        for usage in [r#"{}"#, r#"{"usage":null}"#, r#"{"usage":{"memory":"lots"}}"#] {
            let metrics: NodeMetrics<'_> = serde_json::from_str(usage).unwrap();
            assert_eq!(metrics.memory_working_set(), None, "{usage}");
        }
    }
}
