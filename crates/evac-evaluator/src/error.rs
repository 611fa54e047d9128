//! Why policies cannot be served: a `policies.yml` refused ([`ConfigError`]), a policy version
//! refused ([`PolicyError`]), a policy of a set refused at start ([`PolicyRefused`]). Each message
//! says what a user must fix, its causes inline.

use std::path::PathBuf;

use evac_runtime::capabilities::PatternError;
use evac_runtime::EvalError;

/// Why a `policies.yml`, or an entry or module reference of it, is refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read the policies file {}: {error}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why not.
        error: std::io::Error,
    },
    /// The file was read, and is refused.
    #[error("invalid policies file {}: {error}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        error: Box<ConfigError>,
    },
    /// The file holds nothing.
    #[error("the file is empty: expected a map of policy ids to policies")]
    Empty,
    /// The file is not a map.
    #[error("expected a map of policy ids to policies: {0}")]
    NotAMap(serde_yaml::Error),
    /// A policy id cannot be a URL path segment.
    #[error("invalid policy id {0:?}: use letters, digits, '-', '_' and '.' (it becomes a URL path)")]
    InvalidId(String),
    /// One policy of the file is refused.
    #[error("policy {id}: {error}")]
    Policy {
        /// The policy's id.
        id: String,
        /// Why.
        error: Box<ConfigError>,
    },
    /// Kubewarden's policy groups, which evac does not serve.
    #[error("policy groups are not supported by evac")]
    PolicyGroup,
    /// The entry does not deserialize (unknown or missing fields, wrong types).
    #[error("{0}")]
    Entry(serde_yaml::Error),
    /// `settings` is neither a map nor absent.
    #[error("settings must be a map, got {0}")]
    SettingsNotAMap(serde_json::Value),
    /// A `hostCapabilities` pattern Kubewarden would refuse.
    #[error("invalid hostCapabilities pattern: {0}")]
    CapabilityPattern(PatternError),
    /// A zero evaluation timeout.
    #[error("the evaluation timeout must be more than zero")]
    ZeroTimeout,
    /// A module reference by a URL scheme evac does not fetch.
    #[error("module {reference}: {scheme}:// modules are not supported; use a file path or file://")]
    UnsupportedScheme {
        /// The reference as written.
        reference: String,
        /// Its scheme.
        scheme: String,
    },
    /// A module reference without a path.
    #[error("module {0:?}: no path")]
    NoPath(String),
}

impl ConfigError {
    /// This error, as one of policy `id`'s.
    pub(crate) fn in_policy(self, id: &str) -> Self {
        Self::Policy { id: id.to_owned(), error: Box::new(self) }
    }
}

/// Why a policy version cannot be served: its module cannot be read or bound, or its settings
/// are refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The entry is refused (its module reference, its `hostCapabilities`).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The module file could not be read.
    #[error("cannot read module {}: {error}", .path.display())]
    ReadModule {
        /// The module file.
        path: PathBuf,
        /// Why not.
        error: std::io::Error,
    },
    /// wasmtime refused the module.
    #[cfg(feature = "wasmtime")]
    #[error("cannot load module {}: {error}", .path.display())]
    Compile {
        /// The module file.
        path: PathBuf,
        /// Why.
        error: evac_runtime::wapc::ModuleError,
    },
    /// A loader of its own ([`ModuleLoader`](crate::ModuleLoader)) refused the module.
    #[error("{0}")]
    Bind(Box<dyn std::error::Error + Send + Sync>),
    /// The settings could not be passed to the module as JSON.
    #[error(transparent)]
    SettingsJson(#[from] serde_json::Error),
    /// The module's `validate_settings` gave no answer.
    #[error("cannot validate its settings: {0}")]
    SettingsUnchecked(EvalError),
    /// The module's `validate_settings` refused the settings.
    #[error("invalid settings: {0}")]
    InvalidSettings(String),
    /// The first instance could not be started.
    #[error("cannot start an instance: {0}")]
    Prewarm(EvalError),
    /// The shadow version is refused.
    #[error("shadow version: {0}")]
    Shadow(Box<PolicyError>),
}

/// A policy refused when a registry starts: any refusal fails the start.
#[derive(Debug, thiserror::Error)]
#[error("policy {id}: {error}")]
pub struct PolicyRefused {
    /// The policy's id.
    pub id: String,
    /// Why.
    pub error: PolicyError,
}
