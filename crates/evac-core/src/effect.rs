//! Effects: what a decision asks its host to do. A policy never writes to the cluster; it returns
//! effects, and the host (server or controller) carries them out.

use serde::{Deserialize, Serialize};

/// A namespaced object named by an effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub struct ObjectRef {
    pub namespace: String,
    pub name: String,
}

impl ObjectRef {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl core::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Who asked for an evacuation, when that changes how it is carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EvacuationSource {
    /// The descheduler (the Eviction carried `requested-by: sigs.k8s.io/descheduler`).
    Descheduler,
}

/// The vocabulary of effects. Serialized with a `type` tag, e.g.
/// `{"type":"MarkForEvacuation","vmi":{...},"node":"n1","dryRun":false,"source":null}`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "type")]
pub enum Effect {
    /// Mark a VMI for evacuation: set `status.evacuationNodeName` to `node` (and, for the
    /// descheduler, the VMI annotation `kubevirt.io/eviction-source: descheduler`). A dry-run mark
    /// is carried out as a dry-run patch.
    #[serde(rename_all = "camelCase")]
    MarkForEvacuation {
        vmi: ObjectRef,
        node: String,
        dry_run: bool,
        source: Option<EvacuationSource>,
    },
}
