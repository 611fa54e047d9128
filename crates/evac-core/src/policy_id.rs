//! The ids of evac's policies: the names their modules, `policies.yml` entries and webhook paths
//! (`/validate/<id>`) go by.

use core::fmt;
use core::str::FromStr;

use serde::{Deserialize, Serialize};

/// One of evac's four policies; in JSON, its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyId {
    /// `pod-eviction`: KubeVirt's `pods/eviction` verdict ([`crate::eviction`]).
    PodEviction,
    /// `disruption-cause`: what is about to disrupt a launcher pod ([`crate::disruption`]).
    DisruptionCause,
    /// `evacuation`: the evacuation plan on node updates ([`crate::evacuation`]).
    Evacuation,
    /// `launcher-hold`: the hold's `preStop` hook on launcher pods' creation ([`crate::hold`]).
    LauncherHold,
}

impl PolicyId {
    /// Every policy, in the order of their pipeline: an eviction, its cause, the evacuation, the
    /// hold.
    pub const ALL: [PolicyId; 4] =
        [Self::PodEviction, Self::DisruptionCause, Self::Evacuation, Self::LauncherHold];

    /// The id (`pod-eviction`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::PodEviction => "pod-eviction",
            Self::DisruptionCause => "disruption-cause",
            Self::Evacuation => "evacuation",
            Self::LauncherHold => "launcher-hold",
        }
    }
}

impl fmt::Display for PolicyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AsRef<str> for PolicyId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

/// A name that is none of evac's policy ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPolicy(pub String);

impl fmt::Display for UnknownPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no policy {:?}: expected pod-eviction, disruption-cause, evacuation or launcher-hold",
            self.0
        )
    }
}

impl std::error::Error for UnknownPolicy {}

impl FromStr for PolicyId {
    type Err = UnknownPolicy;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|p| p.as_str() == id).ok_or_else(|| UnknownPolicy(id.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_unknown_ones_are_named() {
        for id in PolicyId::ALL {
            assert_eq!(id.as_str().parse::<PolicyId>(), Ok(id));
            assert_eq!(id.to_string(), id.as_str());
            assert_eq!(serde_json::to_value(id).unwrap(), id.as_str());
        }
        assert_eq!(
            "pod-evictions".parse::<PolicyId>().unwrap_err().to_string(),
            r#"no policy "pod-evictions": expected pod-eviction, disruption-cause, evacuation or launcher-hold"#
        );
    }
}
