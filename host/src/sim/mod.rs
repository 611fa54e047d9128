//! The embedded cluster simulator: Kubernetes and KubeVirt as far as disruptions go, so that evac's
//! real-cluster code paths can run without a real cluster.
//!
//! [`store`] keeps the objects with Kubernetes' consistency rules (resource versions, conflicts,
//! ordered watch history); [`api`] serves them as a Kubernetes API; [`actors`] are the cluster's
//! components (KubeVirt's migration controller, the taint manager, ...), which [`driver`] runs on
//! the simulated time of [`clock`].

pub mod actors;
pub mod api;
pub mod clock;
pub mod driver;
pub mod error;
pub mod store;

pub use clock::SimClock;
pub use driver::{Actor, Simulation};
pub use error::ApiError;
pub use store::{Event, EventType, Kind, Patch, Store};
