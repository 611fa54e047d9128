//! evac's evaluation pipeline, shared by the policy server, the controller and the simulator, as
//! Kubewarden's `policy-evaluator` is shared by its server and `kwctl`:
//!
//! - [`config`]: `policies.yml`, Kubewarden's policy-server format with evac's additions;
//! - [`registry`]: the policies served, their versions and shadows, swapped atomically on reload;
//! - [`pipeline`]: one request through a policy: evaluate, apply the mode, carry out (or record)
//!   the effects, compare with the shadow;
//! - [`builder`]: the one way a process assembles registry and pipeline from its options;
//! - [`admission`]: AdmissionReviews in and out;
//! - [`metrics`]: what every stage counts.
//!
//! It depends on `evac-runtime` and `evac-cluster`, and must not depend on an HTTP server, the
//! controller or the simulator: every host builds its pipeline here ([`PipelineBuilder`]) and
//! serves it its own way.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]
#![warn(missing_docs)]

pub mod admission;
pub mod builder;
pub mod config;
pub mod error;
pub mod exposition;
pub mod log_limit;
pub mod metrics;
pub mod pipeline;
pub mod registry;

pub use builder::PipelineBuilder;
pub use config::{PoliciesFile, PolicyEntry, PolicyMode};
pub use error::{ConfigError, PolicyError, PolicyRefused};
pub use metrics::Metrics;
pub use pipeline::{EffectOutcome, Evaluation, Fault, Pipeline, ShadowRun};
#[cfg(feature = "wasmtime")]
pub use registry::Loader;
pub use registry::{ModuleLoader, PolicySet, Registry, ServedPolicy, Version};
