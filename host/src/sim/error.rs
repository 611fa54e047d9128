//! API errors shaped like Kubernetes' `metav1.Status`, so clients (kube-rs, kubectl) read them as
//! they read a real API server's.

use serde_json::{json, Value};

/// A failed API call: HTTP code, Kubernetes reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self { code: 404, reason: "NotFound", message: format!("{resource} \"{name}\" not found") }
    }

    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self { code: 409, reason: "AlreadyExists", message: format!("{resource} \"{name}\" already exists") }
    }

    /// An update that was based on an old version of the object.
    pub fn conflict(resource: &str, name: &str) -> Self {
        Self {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again"
            ),
        }
    }

    pub fn invalid(resource: &str, name: &str, why: &str) -> Self {
        Self { code: 422, reason: "Invalid", message: format!("{resource} \"{name}\" is invalid: {why}") }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self { code: 400, reason: "BadRequest", message: message.into() }
    }

    /// A watch from a resource version older than the history kept.
    pub fn gone(resource_version: u64, oldest: u64) -> Self {
        Self {
            code: 410,
            reason: "Expired",
            message: format!("too old resource version: {resource_version} ({oldest})"),
        }
    }

    /// The `Status` object a Kubernetes API server answers with.
    pub fn status(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} {})", self.message, self.code, self.reason)
    }
}

impl std::error::Error for ApiError {}
