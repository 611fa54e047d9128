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
        Self { namespace: namespace.into(), name: name.into() }
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
pub enum Effect {
    /// Mark a VMI for evacuation: set `status.evacuationNodeName` to `node` (and, for the
    /// descheduler, the VMI annotation `kubevirt.io/eviction-source: descheduler`). A dry-run mark
    /// is carried out as a dry-run patch.
    #[serde(rename_all = "camelCase")]
    MarkForEvacuation { vmi: ObjectRef, node: String, dry_run: bool, source: Option<EvacuationSource> },
}

/// Every field any effect has: decoding through this flat record is a single pass over the JSON,
/// where serde's tagged-enum decoding would buffer each effect first.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EffectRecord {
    #[serde(rename = "type")]
    type_: String,
    vmi: Option<ObjectRef>,
    node: Option<String>,
    dry_run: Option<bool>,
    #[serde(default)]
    source: Option<EvacuationSource>,
}

impl<'de> Deserialize<'de> for Effect {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let record = EffectRecord::deserialize(deserializer)?;
        let missing =
            |field: &'static str| D::Error::custom(format!("{} effect without `{field}`", record.type_));
        match record.type_.as_str() {
            "MarkForEvacuation" => Ok(Effect::MarkForEvacuation {
                vmi: record.vmi.clone().ok_or_else(|| missing("vmi"))?,
                node: record.node.clone().ok_or_else(|| missing("node"))?,
                dry_run: record.dry_run.ok_or_else(|| missing("dryRun"))?,
                source: record.source,
            }),
            other => Err(D::Error::custom(format!("unknown effect type {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_round_trip() {
        let effect = Effect::MarkForEvacuation {
            vmi: ObjectRef::new("default", "vm"),
            node: "node01".into(),
            dry_run: true,
            source: Some(EvacuationSource::Descheduler),
        };
        let json = serde_json::to_string(&effect).unwrap();
        assert_eq!(serde_json::from_str::<Effect>(&json).unwrap(), effect);
    }

    #[test]
    fn malformed_effects_are_refused_clearly() {
        let err = serde_json::from_str::<Effect>(r#"{"type":"MarkForEvacuation","node":"n","dryRun":false}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("MarkForEvacuation effect without `vmi`"), "{err}");
        let err = serde_json::from_str::<Effect>(r#"{"type":"Explode"}"#).unwrap_err().to_string();
        assert!(err.contains(r#"unknown effect type "Explode""#), "{err}");
    }
}
