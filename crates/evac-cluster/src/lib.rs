//! evac's cluster layer: how the host reads Kubernetes objects and carries out effects.
//!
//! Policies never see this crate; they read through host capabilities, which answer from an
//! [`ObjectSource`], and return effects, which one [`Executor`] turns into writes through a
//! [`ClusterStore`]. A back end implements only reads, writes and the change feed:
//!
//! - [`MemoryStore`]: objects in memory with the API server's consistency rules (resource
//!   versions, conflicts, an ordered change history). It holds the objects of a context file
//!   (`evac eval`, `evac serve --context`, tests) and the embedded simulator's cluster alike.
//! - [`kube::KubeCluster`] (feature `kube`): a real API server, read through kube-rs watch caches.
//!
//! The seams are here because everything above them (the policy runtime, the evaluation
//! pipeline, the controller) must behave the same whichever cluster is underneath.
//!
//! It depends on `evac-core` only among evac's crates, and must not depend on the policy runtime,
//! the pipeline or the simulator: they are built on it.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![warn(missing_docs)]

mod changes;
mod clock;
mod context_file;
mod error;
mod executor;
mod kind;
#[cfg(feature = "kube")]
pub mod kube;
mod kubeconfig;
mod memory;
mod selector;
mod source;
mod store;

pub use changes::{Change, ChangeFeed, Cursor};
pub use clock::{Clock, SystemClock};
pub use context_file::{list_items, ContextError, InsertError};
pub use error::ApiError;
pub use evac_core::effect::Access;
pub use evac_core::effect::Effect;
pub use evac_core::ReadError;
pub use executor::{Applied, EffectError, Executor};
pub use kind::Kind;
pub use kubeconfig::kubeconfig;
pub use memory::{check_precondition, AsUser, CreateCheck, Event, EventType, MemoryStore, ANONYMOUS_USER};
pub use selector::{FieldSelector, LabelSelector, SelectorError};
pub use source::{list_json, CoreReader, ListQuery, ObjectSource};
pub use store::{ClusterStore, Patch};
