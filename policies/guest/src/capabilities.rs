//! Kubewarden's `kubernetes` host capabilities, as a [`ClusterReader`].

use evac_core::cluster::{GetResource, ListResourcesAll};
use evac_core::{ClusterReader, ReadError};

/// Kubewarden's `kubernetes` capabilities as the core's [`ClusterReader`], over any way of calling
/// them: `call(operation, payload)` answers `kubewarden/kubernetes/<operation>` with the host's
/// answer or its error text. Requests go as JSON; errors are classified by their words
/// ([`ReadError::from_message`]), the only part of them that crosses the waPC boundary. A module
/// calls through waPC (`host_capabilities`); the browser playground, which links the policy
/// crates, calls its host's capabilities directly, with the same requests and the same errors.
pub struct KubernetesCalls<F>(pub F);

impl<F: Fn(&str, &[u8]) -> Result<Vec<u8>, String>> KubernetesCalls<F> {
    fn call(&self, operation: &str, request: &impl serde::Serialize) -> Result<Vec<u8>, ReadError> {
        let payload = serde_json::to_vec(request).map_err(|e| ReadError::other(e.to_string()))?;
        (self.0)(operation, &payload).map_err(ReadError::from_message)
    }
}

impl<F: Fn(&str, &[u8]) -> Result<Vec<u8>, String>> ClusterReader for KubernetesCalls<F> {
    fn get_resource(&self, request: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        self.call("get_resource", request)
    }

    fn list_resources_all(&self, request: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        self.call("list_resources_all", request)
    }
}

/// The host capabilities of a module, through waPC's `__host_call` (only inside a Kubewarden
/// host: the wasm32-wasip1 module).
#[cfg(target_os = "wasi")]
pub fn host_capabilities() -> impl ClusterReader {
    KubernetesCalls(wapc_call)
}

#[cfg(target_os = "wasi")]
fn wapc_call(operation: &str, payload: &[u8]) -> Result<Vec<u8>, String> {
    kubewarden_policy_sdk::wapc_guest::host_call("kubewarden", "kubernetes", operation, payload)
        .map_err(|e| host_error_text(e.as_ref()))
}

/// The host's own words: wapc-guest wraps them as `Host error: <text>`.
#[cfg(target_os = "wasi")]
fn host_error_text(error: &(dyn std::error::Error + Send + Sync)) -> String {
    let text = error.to_string();
    match text.strip_prefix("Host error: ") {
        Some(inner) => inner.to_owned(),
        None => text,
    }
}
