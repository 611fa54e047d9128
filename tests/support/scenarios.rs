//! The adversarial scenarios' harness (`tests/adversarial/*.yaml`), shared by the suites of
//! evacuations and of launcher holds: each run of a scenario through `evac simulate --json`, once
//! per test binary; the failed expectations of a test, collected and reported together; and the
//! expectations and invariants both suites check.

use std::collections::HashMap;
use std::fmt::Display;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use crate::report::{describe, num, outcome, row, rows, vm_time};
use crate::{evac_bin, repo_root};

/// A run's report, or why there is none.
pub type RunResult = Result<Value, String>;

/// The scenario file `tests/adversarial/<name>.yaml`.
pub fn scenario_file(name: &str) -> PathBuf {
    repo_root().join("tests/adversarial").join(format!("{name}.yaml"))
}

/// The scenario file as YAML (for its parallel limits and the like).
pub fn scenario_spec(name: &str) -> Value {
    let path = scenario_file(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{} is not YAML: {e}", path.display()))
}

fn simulate_uncached(name: &str, args: &[&str]) -> RunResult {
    let mut command = Command::new(evac_bin());
    command.current_dir(repo_root()).args(["simulate", "--json"]).args(args).arg(scenario_file(name));
    let out = command.output().map_err(|e| format!("cannot run evac: {e}"))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        return Err(format!(
            "`evac simulate --json {}` exited with {}: {}",
            args.join(" "),
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("the report is not JSON: {e}"))
}

/// `evac simulate --json <args> <scenario>`, run once per test binary: the tests that read the
/// same run (a scenario's own test and the invariants over every run) share it.
pub fn simulate(name: &str, args: &[&str]) -> Arc<RunResult> {
    type Cell = Arc<OnceLock<Arc<RunResult>>>;
    type Key = (String, Vec<String>);
    static RUNS: OnceLock<Mutex<HashMap<Key, Cell>>> = OnceLock::new();
    let key = (name.to_owned(), args.iter().map(|a| a.to_string()).collect());
    let cell = RUNS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry(key)
        .or_default()
        .clone();
    cell.get_or_init(|| Arc::new(simulate_uncached(name, args))).clone()
}

/// A test's failed expectations, each naming the scenario; the test fails once, listing them all.
pub struct Checks {
    scenario: &'static str,
    failures: Vec<String>,
}

impl Checks {
    /// No expectation failed yet.
    pub fn new(scenario: &'static str) -> Self {
        Self { scenario, failures: Vec::new() }
    }

    /// The scenario's name.
    pub fn scenario(&self) -> &'static str {
        self.scenario
    }

    /// Records `message` unless `ok`.
    pub fn check(&mut self, ok: bool, message: impl FnOnce() -> String) {
        if !ok {
            self.fail(message());
        }
    }

    /// Records a failed expectation.
    pub fn fail(&mut self, message: String) {
        self.failures.push(format!("[{}] {message}", self.scenario));
    }

    /// Ends the test now: what failed so far, and `why` no more can be checked.
    pub fn give_up(&self, why: &str) -> ! {
        panic!("{}: {why}:\n  - {}\n", self.scenario, self.failures.join("\n  - "))
    }

    /// Fails the test if any expectation failed, listing them all.
    pub fn finish(self) {
        if !self.failures.is_empty() {
            panic!(
                "{}: {} expectation(s) failed:\n  - {}\n",
                self.scenario,
                self.failures.len(),
                self.failures.join("\n  - ")
            );
        }
    }
}

/// An outcome as words only ("shut down", "shutDown" and "shut-down" are one outcome).
pub fn norm(outcome: &str) -> String {
    outcome.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect()
}

/// The report's value at `keys`.
pub fn path<'a>(report: &'a Value, keys: &[&str]) -> &'a Value {
    keys.iter().fold(report, |v, k| &v[*k])
}

/// The VM's outcome, and what that outcome implies for its row.
pub fn expect_vm(c: &mut Checks, mode: impl Display, report: &Value, vm: &str, expected: &str, rule: &str) {
    let got = outcome(report, vm);
    let same = norm(&got) == norm(expected);
    c.check(same, || {
        format!(
            "{mode}: VM {vm}: expected outcome {expected}, got {got} {} (rule: {rule})",
            describe(report, vm)
        )
    });
    if !same {
        return;
    }
    let Some(r) = row(report, vm) else { return };
    match norm(expected).as_str() {
        "migrated" => {
            c.check(num(&r["migrations"]) >= 1, || {
                format!("{mode}: VM {vm}: migrated with no migration counted {r} (rule: {rule})")
            });
            // Once migrated, a VM is elsewhere; twice migrated, it may be back.
            c.check(num(&r["migrations"]) != 1 || r["nodeAfter"] != r["nodeBefore"], || {
                format!("{mode}: VM {vm}: migrated once but ended on its own node {r} (rule: {rule})")
            });
            c.check(r["migratedAt"].as_f64().is_some(), || {
                format!("{mode}: VM {vm}: migrated without a migratedAt {r} (rule: {rule})")
            });
        }
        "shutdown" => {
            c.check(r["stoppedAt"].as_f64().is_some(), || {
                format!("{mode}: VM {vm}: shut down without a stoppedAt {r} (rule: {rule})")
            });
        }
        "untouched" => {
            c.check(r["nodeAfter"] == r["nodeBefore"], || {
                format!("{mode}: VM {vm}: untouched but moved {r} (rule: {rule})")
            });
            c.check(num(&r["migrations"]) == 0, || {
                format!("{mode}: VM {vm}: untouched with a succeeded migration counted {r} (rule: {rule})")
            });
        }
        _ => {}
    }
}

/// A time field of the VM's row within `[lo, hi]` seconds.
#[allow(clippy::too_many_arguments)]
pub fn expect_time(
    c: &mut Checks,
    mode: impl Display,
    report: &Value,
    vm: &str,
    field: &str,
    lo: f64,
    hi: f64,
    rule: &str,
) {
    let got = vm_time(report, vm, field);
    c.check(got.is_some_and(|t| (lo..=hi).contains(&t)), || {
        format!(
            "{mode}: VM {vm}: expected {field} within {lo}..{hi} s, got {got:?} {} (rule: {rule})",
            describe(report, vm)
        )
    });
}

/// A count of the report at `at`.
pub fn expect_field(
    c: &mut Checks,
    mode: impl Display,
    report: &Value,
    at: &[&str],
    expected: u64,
    rule: &str,
) {
    let got = path(report, at);
    c.check(got.as_u64() == Some(expected), || {
        format!("{mode}: report {}: expected {expected}, got {got} (rule: {rule})", at.join("."))
    });
}

/// What the simulator's own invariant checks found wrong in a run (`invariantViolations`, which
/// every report carries), as a failed expectation; `None` when the run kept them all.
pub fn invariant_violations(mode: impl Display, report: &Value) -> Option<String> {
    match report.get("invariantViolations").and_then(Value::as_array) {
        None => Some(format!(
            "{mode}: the report has no invariantViolations array (rule: the simulator reports two unfinished \
             migrations of one VMI, parallel limits exceeded, migrations counted as succeeded whose VM did not end on \
             its target, launcher pods of deleted VMIs not collected)"
        )),
        Some(v) if !v.is_empty() => {
            Some(format!("{mode}: invariantViolations: {} (rule: a correct run has none)", Value::Array(v.clone())))
        }
        Some(_) => None,
    }
}

/// The invariants every run keeps, from the report: the scenario's parallel limits, outcomes that
/// add up, no migration counted as succeeded whose VM did not end running on another node, and
/// the same from the migrations' timeline alone.
pub fn run_invariants(c: &mut Checks, mode: impl Display, report: &Value) {
    let spec = scenario_spec(c.scenario());
    let kubevirt = &spec["cluster"]["kubevirt"];
    let limits = Limits {
        per_cluster: kubevirt["parallelMigrationsPerCluster"].as_u64().unwrap_or(5),
        per_node: kubevirt["parallelOutboundMigrationsPerNode"].as_u64().unwrap_or(2),
    };
    let m = &report["migrations"];
    c.check(m["maxRunningInCluster"].as_u64().is_some_and(|n| n <= limits.per_cluster), || {
        format!(
            "{mode}: parallel limit exceeded: maxRunningInCluster {} > {} (rule: parallelMigrationsPerCluster)",
            m["maxRunningInCluster"], limits.per_cluster
        )
    });
    c.check(m["maxRunningFromANode"].as_u64().is_some_and(|n| n <= limits.per_node), || {
        format!(
            "{mode}: parallel limit exceeded: maxRunningFromANode {} > {} (rule: parallelOutboundMigrationsPerNode)",
            m["maxRunningFromANode"], limits.per_node
        )
    });
    let vms = &report["vms"];
    let sum = num(&vms["migrated"]) + num(&vms["shutDown"]) + num(&vms["restarted"]) + num(&vms["untouched"]);
    c.check(sum == num(&vms["total"]), || format!("{mode}: vms outcomes do not add up to the total: {vms}"));
    succeeded_invariants(c, &mode, report);
    timeline_invariants(c, &mode, report, limits);
}

/// No migration counted as succeeded whose VM did not end running on another node.
fn succeeded_invariants(c: &mut Checks, mode: &impl Display, report: &Value) {
    let m = &report["migrations"];
    let mut counted = 0;
    for r in rows(report) {
        let n = num(&r["migrations"]);
        counted += n;
        if n > 0 {
            // (A VM migrated twice may have come back to its first node.)
            c.check(r["outcome"] == "migrated" && (n > 1 || r["nodeAfter"] != r["nodeBefore"]), || {
                format!(
                    "{mode}: VM {}: {n} migration(s) counted as succeeded but the VM did not end running on another \
                     node: {r} (rule: a migration whose VM died before it finished fails, never counts as succeeded)",
                    r["vm"]
                )
            });
        }
    }
    c.check(counted == num(&m["succeeded"]), || {
        format!(
            "{mode}: migrations.succeeded {} but the VMs' rows count {counted} succeeded migrations \
             (rule: every succeeded migration belongs to a VM that ended on its target)",
            m["succeeded"]
        )
    });
    c.check(num(&m["created"]) >= num(&m["succeeded"]) + num(&m["failed"]), || {
        format!("{mode}: more migrations finished than were created: {m}")
    });
}

/// KubeVirt's parallel migration limits of a scenario.
#[derive(Debug, Clone, Copy)]
struct Limits {
    per_cluster: u64,
    per_node: u64,
}

/// The invariants again, from outside: from `migrationTimeline` alone, no VM has two unfinished
/// migrations at once, and the migrations counted against the parallel limits (from their target
/// pod to their end) never exceed them.
fn timeline_invariants(c: &mut Checks, mode: &impl Display, report: &Value, limits: Limits) {
    let Some(timeline) = report["migrationTimeline"].as_array() else {
        c.fail(format!("{mode}: the report has no migrationTimeline"));
        return;
    };
    let created = num(&report["migrations"]["created"]);
    c.check(timeline.len() as u64 == created, || {
        format!(
            "{mode}: migrationTimeline has {} migrations, migrations.created says {created}",
            timeline.len()
        )
    });
    let mut by_vm: HashMap<&str, Vec<&Value>> = HashMap::new();
    for m in timeline {
        by_vm.entry(m["vm"].as_str().unwrap_or_default()).or_default().push(m);
        if m["phase"] == "Succeeded" {
            c.check(
                !m["target"].as_str().unwrap_or_default().is_empty() && m["target"] != m["source"],
                || format!("{mode}: migration {} succeeded without moving its VM: {m}", m["name"]),
            );
        }
    }
    for (vm, mut migrations) in by_vm {
        migrations.sort_by(|a, b| time(&a["createdAt"]).total_cmp(&time(&b["createdAt"])));
        for pair in migrations.windows(2) {
            c.check(time(&pair[1]["createdAt"]) >= time(&pair[0]["endedAt"]), || {
                format!(
                    "{mode}: VM {vm} had two unfinished migrations at once (from the timeline): {} and {} \
                     (rule: virt-api refuses a second one, canMigrateVMI fails it)",
                    pair[0], pair[1]
                )
            });
        }
    }
    counted_invariants(c, mode, timeline, limits);
}

/// A time of the timeline; one that has not come is infinitely late.
fn time(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::INFINITY)
}

/// The migrations counted against the parallel limits at every moment of the timeline.
fn counted_invariants(c: &mut Checks, mode: &impl Display, timeline: &[Value], limits: Limits) {
    // (when, +1 starts counting / -1 stops, source node)
    let mut steps: Vec<(f64, i64, &str)> = Vec::new();
    for m in timeline.iter().filter(|m| !m["countedFrom"].is_null()) {
        let source = m["source"].as_str().unwrap_or_default();
        steps.push((time(&m["countedFrom"]), 1, source));
        steps.push((time(&m["endedAt"]), -1, source));
    }
    // Ends before starts at the same moment: a slot freed is taken in the same instant.
    steps.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut in_cluster, mut from_node) = (0i64, HashMap::<&str, i64>::new());
    for (at, delta, node) in steps {
        in_cluster += delta;
        let on_node = from_node.entry(node).or_default();
        *on_node += delta;
        let on_node = *on_node;
        c.check(in_cluster <= limits.per_cluster as i64, || {
            format!(
                "{mode}: {in_cluster} migrations counted at {at} s, over parallelMigrationsPerCluster {} (from the \
                 timeline)",
                limits.per_cluster
            )
        });
        c.check(on_node <= limits.per_node as i64, || {
            format!(
                "{mode}: {on_node} migrations from {node} at {at} s, over parallelOutboundMigrationsPerNode {} (from \
                 the timeline)",
                limits.per_node
            )
        });
    }
}
