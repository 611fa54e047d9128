//! The example scenarios with evac (`evac simulate --evac`): its policy server answers the
//! eviction webhook and `evac control` runs as one of the cluster's components. The outcomes
//! evac promises, against KubeVirt alone: preemption, NoExecute taints and node pressure migrate
//! VMs instead of shutting them down (with the feature gates on; with them off, the baseline),
//! the descheduler's limits hold, the parallel limits are never exceeded, and a controller
//! restarted mid-evacuation creates no duplicate migration.

use std::path::Path;
use std::process::Command;

use evac_e2e::{evac_bin, repo_root};
use serde_json::Value;

fn simulate(file: &Path, evac: bool) -> Value {
    let mut command = Command::new(evac_bin());
    command.current_dir(repo_root()).arg("simulate").arg("--json").arg(file);
    if evac {
        command.arg("--evac");
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("the report is JSON")
}

fn example(name: &str) -> std::path::PathBuf {
    repo_root().join(format!("examples/scenarios/{name}.yaml"))
}

/// A copy of an example scenario, changed by `edit`, in a temporary file.
fn variant(name: &str, edit: impl FnOnce(&mut serde_yaml::Value)) -> tempfile::NamedTempFile {
    let text = std::fs::read_to_string(example(name)).unwrap();
    let mut scenario: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    edit(&mut scenario);
    let file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    std::fs::write(file.path(), serde_yaml::to_string(&scenario).unwrap()).unwrap();
    file
}

fn vms(report: &Value) -> &Vec<Value> {
    report["disruptedVms"].as_array().unwrap()
}

fn outcome_count(report: &Value, outcome: &str) -> usize {
    vms(report).iter().filter(|vm| vm["outcome"] == outcome).count()
}

fn assert_within_parallel_limits(report: &Value) {
    let migrations = &report["migrations"];
    assert!(migrations["maxRunningInCluster"].as_u64().unwrap() <= 5, "{migrations}");
    assert!(migrations["maxRunningFromANode"].as_u64().unwrap() <= 2, "{migrations}");
}

/// Every disrupted VM migrated exactly once and none was shut down or restarted.
fn assert_all_migrated_once(report: &Value, expected: usize) {
    assert_eq!(vms(report).len(), expected, "{:#}", report["disruptedVms"]);
    for vm in vms(report) {
        assert_eq!(vm["outcome"], "migrated", "{vm}");
        assert_eq!(vm["migrations"], 1, "{vm}");
        assert_ne!(vm["nodeAfter"], vm["nodeBefore"], "{vm}");
    }
    assert_eq!(report["migrations"]["failed"], 0);
}

#[test]
fn preemption_migrates_every_victim_with_the_gate_on() {
    let baseline = simulate(&example("preemption"), false);
    let victims = vms(&baseline).len();
    assert!(victims >= 4, "the scheduler preempts VMs: {:#}", baseline["disruptedVms"]);
    assert_eq!(outcome_count(&baseline, "shutDown"), victims, "KubeVirt alone shuts them down");

    let evac = simulate(&example("preemption"), true);
    assert_all_migrated_once(&evac, victims);
    assert_within_parallel_limits(&evac);
}

#[test]
fn preemption_with_the_gate_off_is_the_baseline() {
    let gates_off = variant("preemption", |s| {
        s["cluster"]["kubevirt"]["featureGates"] = serde_yaml::Value::Sequence(vec![])
    });
    let evac = simulate(gates_off.path(), true);
    assert!(!vms(&evac).is_empty());
    assert_eq!(outcome_count(&evac, "shutDown"), vms(&evac).len(), "{:#}", evac["disruptedVms"]);
    assert_eq!(evac["migrations"]["created"], 0);
}

#[test]
fn a_noexecute_taint_migrates_every_vm_with_the_gate_on() {
    let baseline = simulate(&example("noexecute-taint"), false);
    assert_eq!(outcome_count(&baseline, "shutDown") + outcome_count(&baseline, "restarted"), 8);
    let evac = simulate(&example("noexecute-taint"), true);
    assert_all_migrated_once(&evac, 8);
    assert_within_parallel_limits(&evac);

    let gates_off = variant("noexecute-taint", |s| {
        s["cluster"]["kubevirt"]["featureGates"] =
            serde_yaml::from_str("[PreemptionEvictionLiveMigration]").unwrap()
    });
    let evac = simulate(gates_off.path(), true);
    assert_eq!(evac["migrations"]["created"], 0, "only the preemption gate is on");
    assert_eq!(outcome_count(&evac, "shutDown") + outcome_count(&evac, "restarted"), 8);
}

#[test]
fn node_pressure_is_relieved_by_migrations_before_the_kubelet_kills() {
    let baseline = simulate(&example("memory-pressure"), false);
    assert!(
        outcome_count(&baseline, "shutDown") >= 1,
        "the kubelet kills a VM: {:#}",
        baseline["disruptedVms"]
    );

    let evac = simulate(&example("memory-pressure"), true);
    let on_node = vms(&evac).iter().filter(|vm| vm["nodeBefore"] == "node01").count();
    let migrated =
        vms(&evac).iter().filter(|vm| vm["nodeBefore"] == "node01" && vm["outcome"] == "migrated").count();
    assert!(on_node > 0);
    assert!(migrated * 100 >= on_node * 95, "{migrated} of {on_node}: {:#}", evac["disruptedVms"]);
    assert_eq!(outcome_count(&evac, "shutDown"), 0);
    // Ahead of the kubelet: it never had to evict.
    assert!(evac["evictions"].get("node pressure").is_none(), "{:#}", evac["evictions"]);
    assert_within_parallel_limits(&evac);

    let gate_off = variant("memory-pressure", |s| {
        s["cluster"]["kubevirt"]["featureGates"] = serde_yaml::Value::Sequence(vec![])
    });
    let evac = simulate(gate_off.path(), true);
    assert_eq!(evac["migrations"]["created"], 0);
    assert!(outcome_count(&evac, "shutDown") >= 1);
}

#[test]
fn the_descheduler_limits_hold_counting_evictions_in_progress() {
    let evac = simulate(&example("descheduler"), true);
    let naive = simulate(&example("descheduler-naive"), false);
    let cycles = evac["descheduler"]["perCycle"].as_array().unwrap();
    assert!(!cycles.is_empty());
    for cycle in cycles {
        // The scenario's maxTotal 4 and maxPerNode 2.
        assert!(cycle["countedTotal"].as_u64().unwrap() <= 4, "{cycle}");
        assert!(cycle["countedMostOnANode"].as_u64().unwrap() <= 2, "{cycle}");
    }
    let (ours, theirs) = (
        evac["descheduler"]["requests"].as_u64().unwrap(),
        naive["descheduler"]["requests"].as_u64().unwrap(),
    );
    assert!(ours < theirs, "KEP-1397 with evac asks {ours} times, the naive descheduler {theirs}");
    assert_eq!(outcome_count(&evac, "shutDown"), 0);
    for vm in vms(&evac).iter().filter(|vm| vm["outcome"] == "migrated") {
        assert_eq!(vm["migrations"], 1, "{vm}");
    }
    assert_within_parallel_limits(&evac);
}

#[test]
fn a_restarted_controller_creates_no_duplicate_migration() {
    // Restarts while the drain's first migrations run, and again later.
    let restarting = variant("drain", |s| {
        let disruptions = s["disruptions"].as_sequence_mut().unwrap();
        for at in ["45s", "200s"] {
            disruptions
                .push(serde_yaml::from_str(&format!("{{at: {at}, restartEvacControl: {{}}}}")).unwrap());
        }
    });
    let evac = simulate(restarting.path(), true);
    let migrated: Vec<&Value> = vms(&evac).iter().filter(|vm| vm["outcome"] == "migrated").collect();
    assert_eq!(migrated.len(), 10, "{:#}", evac["disruptedVms"]);
    for vm in migrated {
        assert_eq!(vm["migrations"], 1, "{vm}");
    }
    assert_eq!(evac["migrations"]["created"], 10, "no duplicates");
    assert!(evac["drains"][0]["finishedAt"].as_f64().is_some());
    assert_within_parallel_limits(&evac);
}

#[test]
fn the_drain_with_evac_matches_kubevirt() {
    let baseline = simulate(&example("drain"), false);
    let evac = simulate(&example("drain"), true);
    assert_eq!(outcome_count(&evac, "migrated"), outcome_count(&baseline, "migrated"));
    assert_eq!(outcome_count(&evac, "shutDown"), outcome_count(&baseline, "shutDown"));
    assert_within_parallel_limits(&evac);
}

/// `examples/control/policies.yml` with `disruption-cause` and `evacuation` in monitor mode, in a
/// temporary directory (module paths made absolute).
fn monitor_policies() -> tempfile::TempDir {
    let text = std::fs::read_to_string(repo_root().join("examples/control/policies.yml")).unwrap();
    let mut policies: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let dist = repo_root().join("dist/policies");
    for (id, entry) in policies.as_mapping_mut().unwrap() {
        let id = id.as_str().unwrap().to_owned();
        entry["module"] = dist.join(format!("{id}.wasm")).to_str().unwrap().into();
        if id != "pod-eviction" {
            entry["policyMode"] = "monitor".into();
        }
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policies.yml"), serde_yaml::to_string(&policies).unwrap()).unwrap();
    dir
}

#[test]
fn monitor_mode_carries_out_nothing_and_says_what_it_would_have_done() {
    // Preemption: with disruption-cause and evacuation in protect mode evac migrates every victim
    // (see above); in monitor mode the cluster sees nothing of evac.
    let policies = monitor_policies();
    let out = Command::new(evac_bin())
        .current_dir(repo_root())
        .args(["simulate", "--json", "--evac", "--policies"])
        .arg(policies.path().join("policies.yml"))
        .arg(example("preemption"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let monitored: Value = serde_json::from_slice(&out.stdout).unwrap();
    let baseline = simulate(&example("preemption"), false);
    let migrations = &monitored["migrations"];
    assert_eq!(migrations["created"], 0, "no migration: {migrations}");
    assert_eq!(migrations["marks"], 0, "no VMI marked: {migrations}");
    assert_eq!(migrations["inProgressAnnotations"], 0, "no pod annotated: {migrations}");
    assert_eq!(outcome_count(&monitored, "shutDown"), outcome_count(&baseline, "shutDown"));
    // What it would have done, by policy and effect.
    let effects = monitored["evacEffects"].as_object().expect("the report lists evac's effects");
    let would = |key: &str| effects.get(key).and_then(Value::as_u64).unwrap_or(0);
    assert!(would("disruption-cause RequestEvacuation monitored") >= 4, "{effects:?}");
    assert!(effects.keys().all(|k| !k.ends_with(" applied") || k.starts_with("pod-eviction")), "{effects:?}");
    assert_eq!(monitored["controller"]["effectsApplied"], 0);
    assert!(monitored["controller"]["effectsMonitored"].as_u64().unwrap() >= 4);

    // And the text report says it.
    let out = Command::new(evac_bin())
        .current_dir(repo_root())
        .args(["simulate", "--quiet", "--evac", "--policies"])
        .arg(policies.path().join("policies.yml"))
        .arg(example("preemption"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("evac in monitor mode: nothing carried out; it would have applied:"), "{text}");
    assert!(text.contains("disruption-cause RequestEvacuation"), "{text}");
}

/// Every example scenario, with KubeVirt alone and with evac: no run breaks an invariant (the
/// simulator's `invariantViolations`), and evac never ends with more VMs shut down than KubeVirt
/// alone.
#[test]
fn every_example_keeps_the_invariants() {
    let mut examples: Vec<_> = std::fs::read_dir(repo_root().join("examples/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 7, "{examples:?}");
    let mut failures = Vec::new();
    for file in &examples {
        let (baseline, evac) = (simulate(file, false), simulate(file, true));
        for (mode, report) in [("KubeVirt alone", &baseline), ("evac", &evac)] {
            let violations = report["invariantViolations"].as_array().expect("invariantViolations");
            if !violations.is_empty() {
                failures.push(format!("{}: {mode}: {violations:?}", file.display()));
            }
        }
        let (ours, theirs) = (outcome_count(&evac, "shutDown"), outcome_count(&baseline, "shutDown"));
        if ours > theirs {
            failures.push(format!("{}: evac shut down {ours} VMs, KubeVirt alone {theirs}", file.display()));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
