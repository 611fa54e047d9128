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
mod cluster;
pub mod driver;
pub mod error;
pub mod scenario;
pub mod store;

pub use clock::SimClock;
pub use driver::{Actor, Simulation};
pub use error::ApiError;
pub use store::{Event, EventType, Kind, Patch, Store};

/// A kubeconfig for a client of the simulated API at `server` (e.g. `http://127.0.0.1:6443`):
/// one cluster, one context, a user without credentials.
pub fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: evac-sim\n  cluster:\n    server: {server}\n\
         contexts:\n- name: evac-sim\n  context:\n    cluster: evac-sim\n    user: evac-sim\n\
         current-context: evac-sim\nusers:\n- name: evac-sim\n  user: {{}}\n"
    )
}
