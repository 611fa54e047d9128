use serde::{Deserialize, Serialize};

/// Settings of the pod-eviction decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Settings {
    /// Where the KubeVirt CR lives. Unset: the one in effect of those in the cluster (there is
    /// one; see [`crate::kubevirt_config::in_effect`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt: Option<KubeVirtRef>,
}

/// The namespace and name of the KubeVirt CR.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct KubeVirtRef {
    /// The CR's namespace (`kubevirt` in a standard install).
    pub namespace: String,
    /// The CR's name (`kubevirt` in a standard install).
    pub name: String,
}

impl Settings {
    /// Checks the settings: a `kubevirt` reference needs both fields, else the error is
    /// `kubevirt: both namespace and name must be set`.
    pub fn validate(&self) -> Result<(), crate::InvalidSettings> {
        if let Some(at) = &self.kubevirt {
            if at.namespace.is_empty() || at.name.is_empty() {
                return Err("kubevirt: both namespace and name must be set".into());
            }
        }
        Ok(())
    }
}
