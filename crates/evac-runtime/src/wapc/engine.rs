use std::path::Path;
use std::sync::{Arc, Weak};
use std::thread;
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig};

use super::error::{EngineError, ModuleError};
use super::permits::Permits;
use super::PolicyModule;

/// How evaluations are bounded and how many may run at once.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Largest linear memory a policy may grow to.
    pub memory_limit: usize,
    /// Deadline of one evaluation.
    pub timeout: Duration,
    /// How many evaluations may be in flight at once.
    pub max_concurrent: u32,
    /// Reuse an instance after putting it back into its exact post-init state, instead of
    /// instantiating for every evaluation (for modules and kernels where that is possible).
    pub reuse_instances: bool,
    /// Where compiled modules are kept, so that loading a module compiled before (by this engine
    /// configuration) does not compile it again. `None`: no cache. The directory is created
    /// private, and refused when another user owns it or others may write to it.
    pub cache_dir: Option<std::path::PathBuf>,
    /// The time policies read (WASI's wall clock). `None`: the host's. A simulation gives its
    /// simulated clock, so that back-offs and deadlines in policies follow simulated time.
    pub wall_clock: Option<WallClock>,
}

/// A source of wall-clock time for policies: time since the Unix epoch.
#[derive(Clone)]
pub struct WallClock(pub std::sync::Arc<dyn Fn() -> Duration + Send + Sync>);

impl std::fmt::Debug for WallClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WallClock({:?})", (self.0)())
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            memory_limit: 64 * 1024 * 1024,
            timeout: Duration::from_millis(1000),
            max_concurrent: 64,
            reuse_instances: true,
            cache_dir: None,
            wall_clock: None,
        }
    }
}

/// The epoch tick: deadlines are counted in these.
pub(crate) const EPOCH_TICK: Duration = Duration::from_millis(1);

/// A wasmtime engine set up for policies, with the thread that advances its epoch (deadlines).
#[derive(Clone)]
pub struct PolicyEngine {
    inner: Arc<EngineInner>,
}

pub(crate) struct EngineInner {
    pub(crate) engine: Engine,
    pub(crate) options: EngineOptions,
    pub(crate) permits: Permits,
}

impl PolicyEngine {
    /// A wasmtime engine for policies: pooling allocator, epoch deadlines, `options`' limits.
    pub fn new(options: EngineOptions) -> Result<Self, EngineError> {
        if let Some(dir) = &options.cache_dir {
            super::compile_cache::prepare_dir(dir)?;
        }
        let mut pool = PoolingAllocationConfig::new();
        // Slots are reused between evaluations; keeping their pages resident and resetting only
        // the dirty ones (found with PAGEMAP_SCAN where the kernel has it) avoids most of the
        // kernel memory work a fresh instance costs.
        // In-flight evaluations plus the idle instances modules keep.
        let slots = options.max_concurrent.max(1).saturating_mul(4).max(8);
        pool.total_core_instances(slots)
            .total_memories(slots)
            .total_tables(slots)
            .max_memory_size(options.memory_limit)
            .linear_memory_keep_resident(2 * 1024 * 1024)
            .table_keep_resident(64 * 1024)
            .pagemap_scan(Enabled::Auto);

        let mut config = Config::new();
        config
            .epoch_interruption(true)
            .cranelift_opt_level(OptLevel::Speed)
            .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        #[cfg(feature = "profiling")]
        if std::env::var_os("EVAC_PERF_MAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(|e| EngineError::Setup(format!("{e:#}")))?;

        let in_flight = options.max_concurrent.max(1) as usize;
        let permits = Permits::new(in_flight, slots as usize - in_flight);
        let inner = Arc::new(EngineInner { engine, options, permits });
        spawn_epoch_ticker(Arc::downgrade(&inner)).map_err(EngineError::EpochThread)?;
        Ok(Self { inner })
    }

    /// The limits evaluations run under.
    pub fn options(&self) -> &EngineOptions {
        &self.inner.options
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Compiles a module from its bytes (a `.wasm` binary, or `.wat` text).
    pub fn compile(&self, bytes: &[u8]) -> Result<PolicyModule, ModuleError> {
        PolicyModule::compile(self, bytes)
    }

    /// Reads and compiles a module file.
    pub fn load(&self, path: &Path) -> Result<PolicyModule, ModuleError> {
        let bytes =
            std::fs::read(path).map_err(|error| ModuleError::Read { path: path.to_owned(), error })?;
        self.compile(&bytes).map_err(|e| ModuleError::Load { path: path.to_owned(), error: Box::new(e) })
    }

    pub(crate) fn permits(&self) -> &Permits {
        &self.inner.permits
    }

    /// A deadline, in epoch ticks.
    pub(crate) fn deadline_ticks(timeout: Duration) -> u64 {
        let ticks = timeout.as_micros() / EPOCH_TICK.as_micros();
        // One more tick: the current one may be about to end.
        u64::try_from(ticks).unwrap_or(u64::MAX - 1).max(1) + 1
    }
}

/// Advances the engine's epoch every tick for as long as the engine lives.
fn spawn_epoch_ticker(engine: Weak<EngineInner>) -> std::io::Result<()> {
    thread::Builder::new()
        .name("evac-epoch".into())
        .spawn(move || loop {
            thread::sleep(EPOCH_TICK);
            match engine.upgrade() {
                Some(inner) => inner.engine.increment_epoch(),
                None => return,
            }
        })
        .map(drop)
}
