//! The embedded cluster simulator: Kubernetes and KubeVirt as far as disruptions go, so that evac's
//! real-cluster code paths can run without a real cluster.
//!
//! [`store`] keeps the objects with Kubernetes' consistency rules (resource versions, conflicts,
//! ordered watch history); [`clock`] is the simulated time actors run on.

pub mod actors;
pub mod api;
pub mod clock;
pub mod error;
pub mod store;

pub use clock::SimClock;
pub use error::ApiError;
pub use store::{Event, EventType, Kind, Patch, Store};
