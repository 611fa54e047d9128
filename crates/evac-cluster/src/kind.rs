//! A kind of object: what reads, writes and grants name.

use serde::{Deserialize, Serialize};

/// A kind of object, e.g. `v1` `Pod` or `kubevirt.io/v1` `VirtualMachineInstance`. Serialized as
/// Kubewarden's `contextAwareResources` entries are: `{apiVersion, kind}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Kind {
    /// `v1`, `kubevirt.io/v1`, ...
    pub api_version: String,
    /// `Pod`, `VirtualMachineInstance`, ...
    pub kind: String,
}

impl Kind {
    /// The kind `kind` of `api_version`.
    pub fn new(api_version: &str, kind: &str) -> Self {
        Self { api_version: api_version.to_owned(), kind: kind.to_owned() }
    }

    /// The API group: `""` for the core group.
    pub fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(group, _)| group)
    }

    /// The plural resource name (`pods`, `virtualmachineinstances`), as Kubernetes derives it.
    pub fn plural(&self) -> String {
        evac_core::cluster::resource_for_kind(&self.kind)
    }

    /// How Kubernetes names the resource in messages: `pods`, `virtualmachineinstances.kubevirt.io`.
    pub fn resource(&self) -> String {
        let plural = self.plural();
        match self.group() {
            "" => plural,
            group => format!("{plural}.{group}"),
        }
    }

    /// Whether this is `api_version` `kind`.
    pub fn is(&self, api_version: &str, kind: &str) -> bool {
        self.api_version == api_version && self.kind == kind
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_are_named_as_kubernetes_names_them() {
        assert_eq!(Kind::new("v1", "Pod").resource(), "pods");
        assert_eq!(
            Kind::new("kubevirt.io/v1", "VirtualMachineInstance").resource(),
            "virtualmachineinstances.kubevirt.io"
        );
        assert_eq!(Kind::new("policy/v1", "PodDisruptionBudget").group(), "policy");
        let json = serde_json::to_string(&Kind::new("v1", "Node")).unwrap();
        assert_eq!(json, r#"{"apiVersion":"v1","kind":"Node"}"#);
    }
}
