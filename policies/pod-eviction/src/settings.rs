use kubewarden_policy_sdk::settings::Validatable;
use serde::{Deserialize, Serialize};

/// The policy's settings: those of the eviction decision.
///
/// ```yaml
/// settings:
///   kubevirt:            # optional: where the KubeVirt CR is; default: the one in the cluster
///     namespace: kubevirt
///     name: kubevirt
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Settings(evac_core::eviction::Settings);

impl Settings {
    pub fn inner(&self) -> &evac_core::eviction::Settings {
        &self.0
    }
}

impl Validatable for Settings {
    fn validate(&self) -> Result<(), String> {
        self.0.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_settings_are_valid() {
        let settings: Settings = serde_json::from_str("{}").unwrap();
        assert!(settings.validate().is_ok());
    }

    #[test]
    fn a_half_named_kubevirt_cr_is_refused() {
        let settings: Settings =
            serde_json::from_str(r#"{"kubevirt": {"namespace": "", "name": "kubevirt"}}"#).unwrap();
        assert!(settings.validate().is_err());
    }

    #[test]
    fn unknown_settings_are_refused() {
        assert!(serde_json::from_str::<Settings>(r#"{"kubevirtt": {}}"#).is_err());
    }
}
