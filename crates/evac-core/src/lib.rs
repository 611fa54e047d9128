//! evac's decision core.
//!
//! Everything here is pure: serde models of the Kubernetes and KubeVirt objects the decisions read,
//! the decisions themselves, and the data they return (a verdict plus a list of [`Effect`]s for a host
//! to carry out). Cluster objects are read through the [`ClusterReader`] trait, which a Kubewarden
//! policy implements with host capabilities and tests implement with a map. The crate compiles for
//! the host, `wasm32-wasip1` and `wasm32-unknown-unknown`.
//!
//! It depends on no other evac crate and must not: no I/O, no async runtime, no wasm runtime
//! (wasmtime) and no Kubernetes client, so that the same decisions run in a module, a host and a
//! browser page.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![warn(missing_docs)]

pub mod cluster;
pub mod disruption;
pub mod effect;
pub mod estimate;
pub mod evacuation;
pub mod eviction;
pub mod hold;
pub mod kubevirt;
pub mod kubevirt_config;
pub mod migration_policy;
pub mod model;
pub mod node_pressure;
pub mod placement;
pub mod policy_id;
pub mod response;
pub mod trace;

pub use cluster::{ClusterReader, GetResource, ListResourcesAll, ReadError, ReadErrorKind};
pub use effect::{Effect, ObjectRef};
pub use policy_id::PolicyId;
pub use response::{Decision, PolicyResponse, Verdict, INTERNAL_ERROR, TOO_MANY_REQUESTS};

/// Settings a decision cannot run with; the message names the field (`kubevirt: both namespace
/// and name must be set`), as Kubewarden's `validate_settings` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSettings(pub String);

impl core::fmt::Display for InvalidSettings {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidSettings {}

impl From<&str> for InvalidSettings {
    fn from(why: &str) -> Self {
        Self(why.to_owned())
    }
}

impl From<String> for InvalidSettings {
    fn from(why: String) -> Self {
        Self(why)
    }
}

impl PartialEq<&str> for InvalidSettings {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// JSON bytes as text, checked as UTF-8 once: decoding from `&str` spares serde_json from
/// re-checking every string it reads, which is most of a small document's decoding time.
pub fn json_text(bytes: &[u8]) -> Result<&str, core::str::Utf8Error> {
    core::str::from_utf8(bytes)
}

/// A JSON decoding error without serde_json's ` at line L column C`: the position is in the
/// text a host wrote, and each host writes the same object differently (field order, spacing),
/// so with it one error would read differently under each host, and it points into text the
/// reader never sees.
pub fn json_error_text(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&position) {
        Some(without) if error.line() > 0 => without.to_owned(),
        _ => text,
    }
}
