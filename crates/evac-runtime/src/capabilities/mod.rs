//! Host capabilities: what a policy may ask its host for through waPC `__host_call`.
//!
//! Only Kubewarden's `kubewarden/kubernetes/*` reads are served; they are answered from a
//! [`ObjectSource`](evac_cluster::ObjectSource) (a static context file, the simulator, or a real
//! API server's watch caches) and limited to the resources the policy was granted.

mod error;
mod kubernetes;
mod patterns;

pub use error::CapabilityError;
pub use kubernetes::{KubernetesCapabilities, ResourceGrant};
pub use patterns::{CapabilityPatterns, PatternError, KNOWN_CAPABILITIES};

/// Answers `__host_call(binding, namespace, operation, payload)`. An error becomes the waPC error
/// text the policy reads only at the wasm boundary.
pub trait HostCapabilities: Send + Sync {
    /// One host call: the answer's bytes, or why there is none.
    fn call(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, CapabilityError>;
}

/// For calls that must not read the cluster (`protocol_version`, warming instances up).
pub struct NoCapabilities;

impl HostCapabilities for NoCapabilities {
    fn call(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        _: &[u8],
    ) -> Result<Vec<u8>, CapabilityError> {
        Err(CapabilityError::Unavailable(format!("{binding}/{namespace}/{operation}")))
    }
}
