//! The simulator's Kubernetes-compatible HTTP API: discovery, get/list/watch with label and field
//! selectors, create, update, patch (merge, JSON, and strategic merge as merge) and delete, with
//! dry runs, for the resources in [`resources::RESOURCES`]. Errors are `metav1.Status` objects.
//!
//! The server ([`router`], watches, OpenAPI documents) needs the `http` feature; the eviction path
//! ([`eviction`]) and KubeVirt's admitters ([`virt_api`]) are the same with or without it, and call
//! webhooks by URL only with it.

pub mod eviction;
#[cfg(feature = "http")]
mod openapi;
pub mod pods;
// The discovery documents are served only by the HTTP server.
#[cfg_attr(not(feature = "http"), allow(dead_code))]
mod resources;
#[cfg(feature = "http")]
mod server;
#[cfg(feature = "http")]
mod table;
pub mod virt_api;
#[cfg(feature = "http")]
mod watch;
pub mod webhooks;

pub use resources::{Resource, RESOURCES};
#[cfg(feature = "http")]
pub use server::router;

#[cfg(all(test, feature = "http"))]
mod tests;
