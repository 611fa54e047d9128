//! The embedded cluster simulator: Kubernetes and KubeVirt as far as disruptions go, so that
//! evac's real-cluster code paths can run without a real cluster, and so that every scenario can be
//! run with KubeVirt alone and with evac, side by side.
//!
//! [`store`] is the API server's storage (evac's [`evac_cluster::MemoryStore`] on the simulated
//! [`clock`]); [`api`] serves it as a Kubernetes API; [`actors`] are the cluster's components
//! (kube-scheduler, the kubelet, the taint manager, KubeVirt's controllers, `kubectl drain`, the
//! descheduler), which [`driver`] runs on simulated time; [`scenario`] builds clusters from
//! scenario files, runs them and reports.
//!
//! The simulator depends on no part of evac's product but the decision core and the cluster
//! layer: evac joins a simulation through the interfaces a real cluster offers it (a webhook
//! service, a component acting on the store), which its host plugs in ([`scenario::Evac`]). The
//! `evac` feature holds that wiring (evac's pipeline and controller in a simulated cluster), which
//! depends on evac's evaluation crates, never the other way round: `evac simulate` and the
//! browser playground enable it, each with its own way of running the policies.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![warn(missing_docs)]

pub mod actors;
pub mod api;
pub mod clock;
pub mod driver;
pub mod kinds;
pub mod objects;
pub mod scenario;
pub mod store;
#[cfg(feature = "evac")]
pub mod with_evac;

pub use clock::SimClock;
pub use driver::{Actor, Simulation};
pub use evac_cluster::kubeconfig;
pub use store::{ApiError, Event, EventType, Kind, Patch, Store};
