//! Why a scenario cannot be read or run.

use crate::ApiError;

/// Why a scenario cannot be read or run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    /// The file, or one of its fields, is not valid; the message names the file and the field.
    #[error("{0}")]
    Invalid(String),
    /// The simulated cluster refused what the run asked of it.
    #[error("{what}: {}", .error.message)]
    Cluster {
        /// What the run was doing (`cannot build the cluster`, `the simulation stopped`).
        what: &'static str,
        /// The simulated API server's answer.
        error: ApiError,
    },
    /// evac could not be started in the cluster.
    #[error("{0}")]
    Evac(String),
}

impl From<String> for ScenarioError {
    fn from(why: String) -> Self {
        Self::Invalid(why)
    }
}
