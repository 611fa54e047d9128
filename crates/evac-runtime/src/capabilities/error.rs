//! Why a host call was not answered, kept typed until it becomes the waPC error text a policy
//! reads (`__host_error`).

use evac_core::ReadError;

/// Why a host capability call failed. Its `Display` is the text the policy receives; refusals use
/// Kubewarden's words (policy-evaluator `runtimes/callback.rs`), which the policies recognise as a
/// refusal whichever host runs them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapabilityError {
    /// The policy's `hostCapabilities` do not allow this capability.
    #[error(
        "Policy has not been granted access to the '{capability}' host capability. The violation has been reported."
    )]
    CapabilityNotGranted {
        /// `<namespace>/<operation>`, as `hostCapabilities` patterns name it.
        capability: String,
    },
    /// The policy's `contextAwareResources` do not include the resource it read.
    #[error(
        "Policy has not been granted access to Kubernetes {api_version}/{kind} resources. The violation has been reported."
    )]
    ResourceNotGranted {
        /// The resource's apiVersion.
        api_version: String,
        /// The resource's kind.
        kind: String,
    },
    /// No such binding (evac serves `kubewarden` only).
    #[error("unknown binding: {0}")]
    UnknownBinding(String),
    /// No such capability in the binding.
    #[error("unknown host capability {0}")]
    UnknownCapability(String),
    /// This host answers no capability here (`protocol_version`, warming instances up).
    #[error("host capability {0} is not available here")]
    Unavailable(String),
    /// The request's payload does not decode.
    #[error("invalid kubernetes/{operation} request: {reason}")]
    InvalidRequest {
        /// The operation called.
        operation: String,
        /// Why its payload is not a request.
        reason: String,
    },
    /// The cluster read failed: the object is missing (kind `NotFound`), or the source could not
    /// answer.
    #[error("{}", .0.message)]
    Read(ReadError),
}

impl From<ReadError> for CapabilityError {
    fn from(error: ReadError) -> Self {
        Self::Read(error)
    }
}
