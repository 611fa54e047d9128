//! The one way a process assembles its evaluation pipeline: the policies of a `policies.yml`
//! bound by a module loader into a [`Registry`], and a [`Pipeline`] over it carrying out effects
//! through an [`Executor`]. `evac serve`, `evac control`, `evac hold` and the simulator differ
//! only in the options they give.

use std::sync::Arc;
use std::time::Duration;

use evac_cluster::Executor;

use crate::error::PolicyRefused;
use crate::{Metrics, ModuleLoader, Pipeline, PoliciesFile, Registry};

/// Options in, a ready pipeline out ([`PipelineBuilder::build`]).
pub struct PipelineBuilder {
    loader: Box<dyn ModuleLoader>,
    executor: Executor,
    metrics: Arc<Metrics>,
    effect_timeout: Option<Duration>,
}

impl PipelineBuilder {
    /// Policies bound by `loader`, their effects carried out by `executor`; fresh metrics, and
    /// no deadline on effects (an in-memory store answers at once).
    pub fn new(loader: impl ModuleLoader + 'static, executor: Executor) -> Self {
        Self { loader: Box::new(loader), executor, metrics: Arc::default(), effect_timeout: None }
    }

    /// Policy modules compiled by wasmtime with `engine`'s limits, reading from `cluster` and
    /// writing their effects to it, each effect within [`DEFAULT_EFFECT_TIMEOUT`]: what a process
    /// facing a real API server runs.
    ///
    /// [`DEFAULT_EFFECT_TIMEOUT`]: crate::pipeline::DEFAULT_EFFECT_TIMEOUT
    #[cfg(feature = "wasmtime")]
    pub fn wasmtime(
        engine: evac_runtime::wapc::EngineOptions,
        cluster: Arc<dyn evac_cluster::ClusterStore>,
    ) -> Result<Self, evac_runtime::wapc::EngineError> {
        let engine = evac_runtime::wapc::PolicyEngine::new(engine)?;
        let loader = crate::Loader { engine, source: Arc::clone(&cluster) as _ };
        Ok(Self::new(loader, Executor::new(cluster)).effect_timeout(crate::pipeline::DEFAULT_EFFECT_TIMEOUT))
    }

    /// Records to these metrics (a process's, with its own collectors) instead of fresh ones.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Fails an effect the cluster has not answered within `timeout` (504), as a failed write.
    #[must_use]
    pub fn effect_timeout(mut self, timeout: Duration) -> Self {
        self.effect_timeout = Some(timeout);
        self
    }

    /// Loads every policy of `file` (any refused one fails the build) and returns the pipeline
    /// over them; its registry is [`Pipeline::registry`]. Compiling modules is heavy CPU work:
    /// within an async runtime, call it off the runtime's threads.
    pub fn build(self, file: &PoliciesFile) -> Result<Pipeline, PolicyRefused> {
        let registry = Arc::new(Registry::start(file, self.loader, Arc::clone(&self.metrics))?);
        let pipeline = Pipeline::new(registry, self.executor, self.metrics);
        Ok(match self.effect_timeout {
            Some(timeout) => pipeline.with_effect_timeout(timeout),
            None => pipeline,
        })
    }
}
