//! The examples the page opens with, compiled in (the page makes no network requests): the
//! example evictions of `examples/evictions/` with their cluster, and the scenarios of
//! `examples/scenarios/`.

use serde::Serialize;

/// One example: its name (the file name without extension) and its text.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Example {
    /// `01-drain-live-migratable`.
    pub name: &'static str,
    /// The file's text.
    pub text: &'static str,
}

macro_rules! examples {
    ($dir:literal, $ext:literal: $($name:literal),* $(,)?) => {
        &[$(Example { name: $name, text: include_str!(concat!("../../../examples/", $dir, "/", $name, $ext)) }),*]
    };
}

/// The example evictions (AdmissionReviews of `pods/eviction`).
pub const EVICTIONS: &[Example] = examples!("evictions/requests", ".json":
    "01-drain-live-migratable",
    "02-descheduler-live-migratable",
    "03-dry-run",
    "04-not-migratable",
    "05-if-possible-not-migratable",
    "06-external",
    "07-evacuation-in-progress",
    "08-strategy-none",
    "09-target-pod",
    "10-hotplug-volume-pod",
    "11-plain-pod",
);

/// The cluster the example evictions are decided against (a `v1 List`).
pub const EVICTION_CONTEXT: &str = include_str!("../../../examples/evictions/context.yaml");

/// The scenarios a page can run. `drain-500-nodes` (10,000 VMs) is left out: it is the
/// command line's benchmark, not something to wait for in a browser.
pub const SCENARIOS: &[Example] = examples!("scenarios", ".yaml":
    "descheduler",
    "descheduler-naive",
    "drain",
    "memory-pressure",
    "noexecute-taint",
    "preemption",
);

/// Everything, as the page receives it.
#[derive(Debug, Serialize)]
pub struct Catalog {
    /// [`EVICTIONS`].
    pub evictions: &'static [Example],
    /// [`EVICTION_CONTEXT`].
    pub eviction_context: &'static str,
    /// [`SCENARIOS`].
    pub scenarios: &'static [Example],
}

/// The catalog of examples.
pub fn catalog() -> Catalog {
    Catalog { evictions: EVICTIONS, eviction_context: EVICTION_CONTEXT, scenarios: SCENARIOS }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Every file of the examples' directories is in the page (but the benchmark), so that the
    /// page never lags behind them.
    #[test]
    fn every_example_file_is_compiled_in() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
        let names = |dir: &str| -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "yaml"))
                .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
                .filter(|n| n != "drain-500-nodes")
                .collect();
            names.sort();
            names
        };
        let listed = |examples: &[Example]| -> Vec<String> {
            let mut names: Vec<String> = examples.iter().map(|e| e.name.to_owned()).collect();
            names.sort();
            names
        };
        assert_eq!(names("evictions/requests"), listed(EVICTIONS));
        assert_eq!(names("scenarios"), listed(SCENARIOS));
    }
}
