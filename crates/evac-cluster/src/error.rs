//! API errors shaped like Kubernetes' `metav1.Status`, so clients (kube-rs, kubectl) read them as
//! they read a real API server's.

use serde_json::{json, Value};

/// A failed API call: HTTP code, Kubernetes reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status code (404, 409, 422, ...).
    pub code: u16,
    /// Kubernetes' `StatusReason` (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// The message clients show.
    pub message: String,
}

/// The `StatusReason`s Kubernetes defines (`k8s.io/apimachinery/pkg/apis/meta/v1/types.go`).
const REASONS: [&str; 17] = [
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
];

impl ApiError {
    /// A reason as a client received it, among Kubernetes' known ones (`Expired` and
    /// `ServiceUnavailable` included); `Unknown` otherwise.
    pub fn known_reason(reason: &str) -> &'static str {
        REASONS
            .iter()
            .chain(&["Expired", "ServiceUnavailable"])
            .find(|known| **known == reason)
            .copied()
            .unwrap_or("Unknown")
    }

    /// 404: `<resource> "<name>" not found`.
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self { code: 404, reason: "NotFound", message: format!("{resource} \"{name}\" not found") }
    }

    /// 409: `<resource> "<name>" already exists`.
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

    /// 409 for a deletion whose `preconditions.resourceVersion` is not the stored one, worded as
    /// the API server words it (`checkPreconditions` in
    /// `staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go`, wrapped by the registry's
    /// `InterpretDeleteError` as a conflict on the object).
    pub fn precondition_failed(resource: &str, name: &str, expected: &str, stored: &str) -> Self {
        Self {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": Precondition failed: \
                 ResourceVersion in precondition: {expected}, ResourceVersion in object meta: {stored}"
            ),
        }
    }

    /// 422: `<resource> "<name>" is invalid: <why>`.
    pub fn invalid(resource: &str, name: &str, why: &str) -> Self {
        Self { code: 422, reason: "Invalid", message: format!("{resource} \"{name}\" is invalid: {why}") }
    }

    /// 503: the back end could not reach the API server, with its message.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self { code: 503, reason: "ServiceUnavailable", message: message.into() }
    }

    /// 400, with the message as given.
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
