//! Kubewarden's `kubernetes` host capabilities, as a [`ClusterReader`].

use evac_core::cluster::{GetResource, ListResourcesAll};
use evac_core::{ClusterReader, ReadError};

pub struct HostCapabilities;

impl HostCapabilities {
    #[cfg(target_os = "wasi")]
    fn call(operation: &str, payload: &impl serde::Serialize) -> Result<Vec<u8>, ReadError> {
        let message = serde_json::to_vec(payload).map_err(|e| ReadError::other(e.to_string()))?;
        kubewarden_policy_sdk::wapc_guest::host_call("kubewarden", "kubernetes", operation, &message)
            .map_err(|e| ReadError::from_message(host_error_text(e.as_ref())))
    }

    /// Host capabilities exist only inside a Kubewarden host (the wasm32-wasip1 module); other
    /// builds (unit tests, the browser playground) pass their own reader.
    #[cfg(not(target_os = "wasi"))]
    fn call(operation: &str, _payload: &impl serde::Serialize) -> Result<Vec<u8>, ReadError> {
        Err(ReadError::other(format!(
            "host capability kubernetes/{operation} is only available inside a policy host"
        )))
    }
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

impl ClusterReader for HostCapabilities {
    fn get_resource(&self, request: &GetResource<'_>) -> Result<Vec<u8>, ReadError> {
        Self::call("get_resource", request)
    }

    fn list_resources_all(&self, request: &ListResourcesAll<'_>) -> Result<Vec<u8>, ReadError> {
        Self::call("list_resources_all", request)
    }
}
