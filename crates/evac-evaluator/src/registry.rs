//! The policies being served, and how a new set replaces the old one.
//!
//! The served set is one immutable map behind an [`ArcSwap`]: a request takes the map once and
//! evaluates entirely with the versions in it, while a reload builds a new map off the request
//! path (loading the modules, validating settings, warming an instance up where the policy has
//! instances) and swaps it in with one atomic
//! store. Requests in flight keep the versions they started with alive until they finish.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::config::{PoliciesFile, PolicyEntry, PolicyMode};
use crate::error::{PolicyError, PolicyRefused};
use crate::metrics::{EvaluationLabels, Metrics, PolicyLabels, SwapLabels, VersionLabels};
use evac_cluster::ObjectSource;
use evac_runtime::capabilities::{HostCapabilities, KubernetesCapabilities};
use evac_runtime::kubewarden;
use evac_runtime::WapcPolicy;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

/// One compiled version of a policy, with its settings.
pub struct Version {
    /// The module, bound to its host capabilities.
    pub policy: Arc<dyn WapcPolicy>,
    /// The settings it evaluates with, as JSON.
    pub settings: Box<RawValue>,
    /// `sha256:<hex>` of the module file.
    pub digest: String,
    /// The human label from `policies.yml`, or the module's file name.
    pub label: String,
    /// `label@sha256:<first 12 hex digits>`: what metrics and answers show.
    pub name: String,
    /// Evaluate on the blocking pool instead of the caller's thread: set once an evaluation ran
    /// past the pipeline's inline budget (see `pipeline::run`).
    pub offloaded: std::sync::atomic::AtomicBool,
}

/// A policy as served: the version that answers, and an optional shadow candidate.
pub struct ServedPolicy {
    /// The policy's id in `policies.yml` (`/validate/<id>`).
    pub id: String,
    /// Its mode.
    pub mode: PolicyMode,
    /// A denial's message instead of the policy's (`message` in policies.yml).
    pub message: Option<String>,
    /// Whether its mutations are answered (`allowedToMutate`), or reject the request.
    pub allowed_to_mutate: bool,
    /// The version whose verdicts count.
    pub active: Arc<Version>,
    /// A candidate evaluated beside it, never acted on.
    pub shadow: Option<Arc<Version>>,
    /// The active version's metric series, resolved once instead of per request.
    pub outcomes: Outcomes,
    /// Time to evaluate a request, effects included.
    pub latency: Histogram,
    /// What this was built from, to tell whether a reload changes it.
    source: Source,
}

/// The evaluation counters of one version, by outcome.
pub struct Outcomes {
    /// Requests the policy accepted.
    pub accepted: Counter,
    /// Requests it answered 429, KubeVirt's "evacuation under way" (the common rejection; others
    /// are counted by their code through the family).
    pub evacuating: Counter,
    /// Evaluations without a verdict.
    pub error: Counter,
    /// The codes of the other rejections counted, so that their series go when the version does.
    pub other_codes: std::sync::Mutex<std::collections::BTreeSet<u16>>,
}

#[derive(PartialEq)]
struct Source {
    entry: PolicyEntry,
    active_digest: String,
    shadow_digest: Option<String>,
}

/// The policies served at one moment, by id.
pub type PolicySet = BTreeMap<String, Arc<ServedPolicy>>;

/// Turns policy modules into policies: reads a module, and binds it to the host capabilities it
/// may call. The registry does the rest (grants, settings, digests, versions) the same way
/// whatever the loader: `Loader` compiles modules with wasmtime (feature `wasmtime`); the
/// browser playground binds the policy crates linked into the page.
pub trait ModuleLoader: Send + Sync {
    /// The bytes of the module at `path`: the file's, unless the loader has its own.
    fn read(&self, path: &Path) -> Result<Vec<u8>, PolicyError> {
        std::fs::read(path).map_err(|error| PolicyError::ReadModule { path: path.to_owned(), error })
    }

    /// What the policies' host capabilities read.
    fn source(&self) -> Arc<dyn ObjectSource>;

    /// A policy from a module's bytes (read from `path`), calling `capabilities`, each call
    /// limited to `timeout` when one is set.
    fn bind(
        &self,
        bytes: &[u8],
        path: &Path,
        capabilities: Arc<dyn HostCapabilities>,
        timeout: Option<Duration>,
    ) -> Result<Arc<dyn WapcPolicy>, PolicyError>;
}

impl<L: ModuleLoader + ?Sized> ModuleLoader for Box<L> {
    fn read(&self, path: &Path) -> Result<Vec<u8>, PolicyError> {
        (**self).read(path)
    }

    fn source(&self) -> Arc<dyn ObjectSource> {
        (**self).source()
    }

    fn bind(
        &self,
        bytes: &[u8],
        path: &Path,
        capabilities: Arc<dyn HostCapabilities>,
        timeout: Option<Duration>,
    ) -> Result<Arc<dyn WapcPolicy>, PolicyError> {
        (**self).bind(bytes, path, capabilities, timeout)
    }
}

/// Builds policy versions on wasmtime: compiles modules, binds them to the cluster.
#[cfg(feature = "wasmtime")]
pub struct Loader {
    /// The engine modules are compiled with.
    pub engine: evac_runtime::wapc::PolicyEngine,
    /// What their host capabilities read.
    pub source: Arc<dyn ObjectSource>,
}

#[cfg(feature = "wasmtime")]
impl ModuleLoader for Loader {
    fn source(&self) -> Arc<dyn ObjectSource> {
        Arc::clone(&self.source)
    }

    fn bind(
        &self,
        bytes: &[u8],
        path: &Path,
        capabilities: Arc<dyn HostCapabilities>,
        timeout: Option<Duration>,
    ) -> Result<Arc<dyn WapcPolicy>, PolicyError> {
        let module = self
            .engine
            .compile(bytes)
            .map_err(|error| PolicyError::Compile { path: path.to_owned(), error })?;
        let mut policy = evac_runtime::wapc::Policy::new(module, capabilities);
        if let Some(timeout) = timeout {
            policy = policy.with_timeout(timeout);
        }
        Ok(Arc::new(policy))
    }
}

/// The policies served, swapped atomically on reload.
pub struct Registry {
    current: ArcSwap<PolicySet>,
    loader: Box<dyn ModuleLoader>,
    metrics: Arc<Metrics>,
}

/// A module file read and digested, before compiling.
struct ModuleFile {
    path: PathBuf,
    bytes: Vec<u8>,
    digest: String,
}

fn read_module(
    loader: &dyn ModuleLoader,
    file: &PoliciesFile,
    reference: &str,
) -> Result<ModuleFile, PolicyError> {
    let path = file.module_path(reference)?;
    let bytes = loader.read(&path)?;
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
    Ok(ModuleFile { path, bytes, digest })
}

/// An entry's module files: the active version's and the shadow's.
struct EntryModules {
    active: ModuleFile,
    shadow: Option<ModuleFile>,
}

impl EntryModules {
    fn read(
        loader: &dyn ModuleLoader,
        file: &PoliciesFile,
        entry: &PolicyEntry,
    ) -> Result<Self, PolicyError> {
        let active = read_module(loader, file, &entry.module)?;
        let shadow = match &entry.shadow {
            Some(shadow) => Some(
                read_module(loader, file, &shadow.module).map_err(|e| PolicyError::Shadow(Box::new(e)))?,
            ),
            None => None,
        };
        Ok(Self { active, shadow })
    }

    fn source(&self, entry: &PolicyEntry) -> Source {
        Source {
            entry: entry.clone(),
            active_digest: self.active.digest.clone(),
            shadow_digest: self.shadow.as_ref().map(|s| s.digest.clone()),
        }
    }
}

impl Registry {
    /// Loads every policy of the file; any invalid entry is an error.
    pub fn start(
        file: &PoliciesFile,
        loader: impl ModuleLoader + 'static,
        metrics: Arc<Metrics>,
    ) -> Result<Self, PolicyRefused> {
        let loader = Box::new(loader);
        let registry = Self { current: ArcSwap::from_pointee(PolicySet::new()), loader, metrics };
        let mut set = PolicySet::new();
        for (id, entry) in &file.policies {
            let refused = |error| PolicyRefused { id: id.clone(), error };
            let modules = EntryModules::read(&*registry.loader, file, entry).map_err(refused)?;
            let served = registry.build(id, entry, modules).map_err(refused)?;
            set.insert(id.clone(), Arc::new(served));
        }
        registry.publish(set);
        Ok(registry)
    }

    /// The set requests are served from now.
    pub fn current(&self) -> Arc<PolicySet> {
        self.current.load_full()
    }

    /// Replaces the served set with the file's. Unchanged policies keep their versions; a policy
    /// whose new version cannot be loaded keeps its old one (and the refusal is logged and
    /// counted); a policy that is new and cannot be loaded is not served. Returns the refusals.
    pub fn reload(&self, file: &PoliciesFile) -> Vec<String> {
        self.reload_checked(file, |_| Ok::<(), std::convert::Infallible>(()))
    }

    /// [`Registry::reload`], refusing the whole new set (the served one stays, the refusal is
    /// logged, counted under policy `*` and returned) when `check` finds its policies do not go
    /// together: what holds between policies no single one can check.
    pub fn reload_checked<E: std::fmt::Display>(
        &self,
        file: &PoliciesFile,
        check: impl Fn(&PolicySet) -> Result<(), E>,
    ) -> Vec<String> {
        let old = self.current();
        let mut set = PolicySet::new();
        let mut refusals = Vec::new();
        let mut swaps: Vec<(&str, &'static str)> = Vec::new();
        for (id, entry) in &file.policies {
            let previous = old.get(id);
            match self.rebuild(file, id, entry, previous) {
                Ok(Some(served)) => {
                    tracing::info!(
                        policy = %id,
                        version = %served.active.name,
                        shadow = served.shadow.as_ref().map(|s| s.name.as_str()),
                        "policy version swapped in"
                    );
                    swaps.push((id, "applied"));
                    set.insert(id.clone(), Arc::new(served));
                }
                Ok(None) => {
                    set.insert(id.clone(), Arc::clone(previous.expect("unchanged implies present")));
                }
                Err(e) => {
                    match previous {
                        Some(previous) => {
                            tracing::error!(policy = %id, keeps = %previous.active.name, "new policy version refused: {e}");
                            set.insert(id.clone(), Arc::clone(previous));
                        }
                        None => tracing::error!(policy = %id, "new policy refused: {e}"),
                    }
                    swaps.push((id, "refused"));
                    refusals.push(format!("policy {id}: {e}"));
                }
            }
        }
        for id in old.keys().filter(|id| !file.policies.contains_key(*id)) {
            tracing::info!(policy = %id, "policy removed");
            swaps.push((id, "applied"));
        }
        if let Err(why) = check(&set) {
            return vec![self.refuse_file(&why.to_string())];
        }
        for (id, result) in swaps {
            self.count_swap(id, result);
        }
        self.publish(set);
        refusals
    }

    /// `Ok(None)` when the policy is unchanged (same entry, same module bytes).
    fn rebuild(
        &self,
        file: &PoliciesFile,
        id: &str,
        entry: &PolicyEntry,
        previous: Option<&Arc<ServedPolicy>>,
    ) -> Result<Option<ServedPolicy>, PolicyError> {
        let modules = EntryModules::read(&*self.loader, file, entry)?;
        if previous.is_some_and(|previous| modules.source(entry) == previous.source) {
            return Ok(None);
        }
        self.build(id, entry, modules).map(Some)
    }

    fn build(
        &self,
        id: &str,
        entry: &PolicyEntry,
        modules: EntryModules,
    ) -> Result<ServedPolicy, PolicyError> {
        let source = modules.source(entry);
        let settings = entry.settings.clone().unwrap_or_else(|| serde_json::json!({}));
        let active = self.version(entry, modules.active, entry.label.as_deref(), &settings)?;
        let shadow = match (&entry.shadow, modules.shadow) {
            (Some(shadow), Some(module_file)) => {
                let settings = shadow.settings.clone().unwrap_or_else(|| settings.clone());
                let version = self
                    .version(entry, module_file, shadow.label.as_deref(), &settings)
                    .map_err(|e| PolicyError::Shadow(Box::new(e)))?;
                Some(Arc::new(version))
            }
            _ => None,
        };
        let counter = |outcome, code| {
            let labels =
                EvaluationLabels { policy: id.to_owned(), version: active.name.clone(), outcome, code };
            self.metrics.evaluations.get_or_create(&labels).clone()
        };
        let outcomes = Outcomes {
            accepted: counter("accepted", 200),
            evacuating: counter("rejected", 429),
            error: counter("error", 500),
            other_codes: Default::default(),
        };
        let latency = self.metrics.latency.get_or_create(&PolicyLabels { policy: id.to_owned() }).clone();
        Ok(ServedPolicy {
            id: id.to_owned(),
            mode: entry.policy_mode,
            message: entry.message.clone(),
            allowed_to_mutate: entry.allowed_to_mutate.unwrap_or(false),
            active: Arc::new(active),
            shadow,
            outcomes,
            latency,
            source,
        })
    }

    /// Binds a module, and checks the settings with the module's `validate_settings`.
    fn version(
        &self,
        entry: &PolicyEntry,
        module_file: ModuleFile,
        label: Option<&str>,
        settings: &serde_json::Value,
    ) -> Result<Version, PolicyError> {
        let allowed = entry.capability_patterns()?;
        let capabilities = KubernetesCapabilities::new(self.loader.source())
            .granting(entry.context_aware_resources.iter().cloned())
            .allowing(allowed);
        let policy = self.loader.bind(
            &module_file.bytes,
            &module_file.path,
            Arc::new(capabilities),
            entry.timeout(),
        )?;
        let settings = RawValue::from_string(serde_json::to_string(settings)?)?;
        let verdict =
            kubewarden::validate_settings(&*policy, &settings).map_err(PolicyError::SettingsUnchecked)?;
        if !verdict.valid {
            let why = verdict.message.unwrap_or_else(|| "(no reason given)".into());
            return Err(PolicyError::InvalidSettings(why));
        }
        // The first request should not pay for instantiation.
        policy.prewarm().map_err(PolicyError::Prewarm)?;
        let label = match label {
            Some(label) => label.to_owned(),
            None => module_file
                .path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "module".into()),
        };
        let short = module_file.digest.trim_start_matches("sha256:").get(..12).unwrap_or_default().to_owned();
        Ok(Version {
            policy,
            settings,
            name: format!("{label}@sha256:{short}"),
            digest: module_file.digest,
            label,
            offloaded: Default::default(),
        })
    }

    fn publish(&self, set: PolicySet) {
        // Counters of versions no longer served go, so that series do not pile up swap after swap.
        for old in self.current.load().values() {
            let still_served = set.get(&old.id).is_some_and(|new| new.active.name == old.active.name);
            if !still_served {
                let others =
                    old.outcomes.other_codes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let codes = [("accepted", 200), ("rejected", 429), ("error", 500)]
                    .into_iter()
                    .chain(others.iter().map(|code| ("rejected", *code)));
                for (outcome, code) in codes {
                    let labels = EvaluationLabels {
                        policy: old.id.clone(),
                        version: old.active.name.clone(),
                        outcome,
                        code,
                    };
                    self.metrics.evaluations.remove(&labels);
                }
            }
        }
        self.metrics.versions.clear();
        for served in set.values() {
            let mark = |role, version: &Version| {
                let labels = VersionLabels {
                    policy: served.id.clone(),
                    role,
                    version: version.name.clone(),
                    digest: version.digest.clone(),
                };
                self.metrics.versions.get_or_create(&labels).set(1);
            };
            mark("active", &served.active);
            if let Some(shadow) = &served.shadow {
                mark("shadow", shadow);
            }
        }
        self.current.store(Arc::new(set));
    }

    /// Refuses a new policies file as a whole (it does not parse, or its policies do not go
    /// together): the served policies stay; the refusal is logged and counted under policy `*`.
    /// Returns the refusal's text.
    pub fn refuse_file(&self, why: &str) -> String {
        let refusal = format!("policies file refused, keeping the policies being served: {why}");
        tracing::error!("{refusal}");
        self.count_swap("*", "refused");
        refusal
    }

    fn count_swap(&self, policy: &str, result: &'static str) {
        self.metrics.swaps.get_or_create(&SwapLabels { policy: policy.to_owned(), result }).inc();
    }

    /// The module files the served policies come from, for watching.
    pub fn module_paths(file: &PoliciesFile) -> Vec<PathBuf> {
        file.policies
            .values()
            .flat_map(|entry| std::iter::once(&entry.module).chain(entry.shadow.as_ref().map(|s| &s.module)))
            .filter_map(|reference| file.module_path(reference).ok())
            .collect()
    }
}
