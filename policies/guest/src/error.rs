//! Why a module answers an operation with a waPC error instead of a response.

use evac_core::eviction::NotAnEviction;

/// Why a policy answers `validate` or `validate_settings` with a waPC error rather than a
/// response: the host then handles the request by the policy's failure policy. The error keeps
/// its kind in the crate; its text becomes the waPC error only where the module returns it (the
/// glue [`policy!`](crate::policy) writes), or where a program linking the crate stands in for the
/// module.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// The payload is not a ValidationRequest of the policy (its settings included): the
    /// decoder's words.
    #[error("cannot decode the validation request: {0}")]
    Request(String),
    /// A request the pod-eviction decision does not take (the webhook's rules sent another).
    #[error(transparent)]
    NotAnEviction(#[from] NotAnEviction),
    /// The response did not encode.
    #[error(transparent)]
    Response(#[from] serde_json::Error),
}
