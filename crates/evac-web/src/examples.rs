//! The examples the page opens with, compiled in (the page makes no network requests): the
//! example requests of each policy (`examples/evictions/`, `examples/disruption-cause/`,
//! `examples/evacuation/`) with their cluster and settings, and the scenarios of
//! `examples/scenarios/`.

use evac_core::PolicyId;
use serde::Serialize;

use crate::WebError;

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

/// The example disruptions of launcher pods (AdmissionReviews of pod updates and deletions).
pub const DISRUPTIONS: &[Example] = examples!("disruption-cause/requests", ".json":
    "01-preemption-live-migratable",
    "02-noexecute-taint-delete",
    "03-preemption-strategy-none",
    "04-plain-delete",
);

/// The example node updates of the evacuation policy.
pub const NODE_UPDATES: &[Example] = examples!("evacuation/requests", ".json":
    "01-drained-node",
    "02-uncordoned-node-marked-vm",
    "03-unchanged-node",
);

/// One policy's examples: its requests, the cluster they are decided against (a `v1 List`) and
/// the settings they are decided with (empty: the defaults).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PolicyExamples {
    /// The policy (in JSON, its module's name: `pod-eviction`, ...).
    pub policy: PolicyId,
    /// Its example requests.
    pub requests: &'static [Example],
    /// The cluster, `context.yaml` of its examples' directory.
    pub context: &'static str,
    /// Its settings, `settings.json` of its examples' directory when it has one.
    pub settings: &'static str,
}

/// Every policy's examples, in the page's order.
pub const REQUESTS: &[PolicyExamples] = &[
    PolicyExamples {
        policy: PolicyId::PodEviction,
        requests: EVICTIONS,
        context: EVICTION_CONTEXT,
        settings: "",
    },
    PolicyExamples {
        policy: PolicyId::DisruptionCause,
        requests: DISRUPTIONS,
        context: include_str!("../../../examples/disruption-cause/context.yaml"),
        settings: "",
    },
    PolicyExamples {
        policy: PolicyId::Evacuation,
        requests: NODE_UPDATES,
        context: include_str!("../../../examples/evacuation/context.yaml"),
        settings: include_str!("../../../examples/evacuation/settings.json"),
    },
];

/// The example request named `name`, with its policy's examples; an unknown name is an error
/// that lists the names there are.
pub fn request(name: &str) -> Result<(&'static PolicyExamples, &'static Example), WebError> {
    REQUESTS
        .iter()
        .find_map(|policy| policy.requests.iter().find(|e| e.name == name).map(|e| (policy, e)))
        .ok_or_else(|| {
            let names: Vec<&str> = REQUESTS.iter().flat_map(|p| p.requests.iter().map(|e| e.name)).collect();
            WebError::new(format!("no example named {name:?}; the examples are: {}", names.join(", ")))
        })
}

/// The scenario named `name`; an unknown name is an error that lists the names there are.
pub fn scenario(name: &str) -> Result<&'static Example, WebError> {
    SCENARIOS.iter().find(|s| s.name == name).ok_or_else(|| {
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        WebError::new(format!("no scenario named {name:?}; the scenarios are: {}", names.join(", ")))
    })
}

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
    /// [`REQUESTS`].
    pub requests: &'static [PolicyExamples],
    /// [`SCENARIOS`].
    pub scenarios: &'static [Example],
}

/// The catalog of examples.
pub fn catalog() -> Catalog {
    Catalog { requests: REQUESTS, scenarios: SCENARIOS }
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
        assert_eq!(names("disruption-cause/requests"), listed(DISRUPTIONS));
        assert_eq!(names("evacuation/requests"), listed(NODE_UPDATES));
        assert_eq!(names("scenarios"), listed(SCENARIOS));
        // A name in a link (`?example=`) opens one example.
        let mut all: Vec<&str> = REQUESTS.iter().flat_map(|p| p.requests.iter().map(|e| e.name)).collect();
        let count = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), count, "example names are unique across the policies");
    }

    #[test]
    fn an_unknown_name_lists_the_names_there_are() {
        let (policy, example) = request("02-noexecute-taint-delete").unwrap();
        assert_eq!((policy.policy.as_str(), example.name), ("disruption-cause", "02-noexecute-taint-delete"));
        let error = request("foo").unwrap_err().to_string();
        assert!(
            error.starts_with("no example named \"foo\"; the examples are: 01-drain-live-migratable, "),
            "{error}"
        );
        for name in ["01-preemption-live-migratable", "03-unchanged-node"] {
            assert!(error.contains(name), "{error}");
        }
        assert_eq!(scenario("drain").unwrap().name, "drain");
        let error = scenario("foo").unwrap_err().to_string();
        let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        assert_eq!(error, format!("no scenario named \"foo\"; the scenarios are: {}", names.join(", ")));
    }
}
