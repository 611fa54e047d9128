//! Actors: the simulated cluster's components, which change it the way Kubernetes and KubeVirt
//! components do. Each reconciles against the store at the simulated clock's time and says when
//! it next has something to do, so a driver can jump the clock straight there.

pub mod migration;
mod quantity;
pub mod taint_manager;

pub use migration::MigrationController;
pub use taint_manager::TaintManager;
