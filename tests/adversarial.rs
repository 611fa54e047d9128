//! Adversarial scenarios (`tests/adversarial/*.yaml`): cases the simulator and evac were not
//! designed around, each run with KubeVirt alone and with evac (`evac simulate [--evac] --json`),
//! evac beside KubeVirt's webhook and evacuation controller as in a real cluster; and with evac
//! in their place (`--evac --replace-kubevirt`). Two scenarios' evac expectations were written
//! for evac in KubeVirt's place (cancel-before-start, pressure-target); once evac ran beside
//! KubeVirt by default they were moved, unchanged, to the replacing run, and the run beside
//! KubeVirt was given KubeVirt's own rule (its evacuation controller creates the migration of an
//! API eviction's mark at once), from the upstream code, not from a run.
//! The expected outcomes were derived from the upstream rules (KubeVirt v1.9, Kubernetes; see the
//! comment block at the top of each scenario file) before any of them was run; they are not
//! adjusted to what the implementation does.
//!
//! The `fidelity-*` scenarios check that the simulated cluster and evac follow one precise
//! upstream rule each (relief only from VMs that leave, KubeVirt's back-off bounded by its
//! garbage collection, the evacuation controller's node handlers, LowNodeUtilization's threshold,
//! deadlines behind a drain); the migration attempts they time come from the report's
//! `migrationTimeline`.
//!
//! Each test collects every failed expectation of its scenario and fails once, listing them all;
//! each message names the scenario, the run (KubeVirt alone or evac), the VM and the rule.
//!
//! Besides the per-VM outcomes, every run is checked for the invariants the report lets us see:
//! parallel limits (`migrations.maxRunningInCluster` / `maxRunningFromANode` against the
//! scenario's limits), no migration counted as succeeded whose VM did not end running on another
//! node (`disruptedVms[].migrations` against outcome and nodes, and their sum against
//! `migrations.succeeded`), and never more VMs shut down with evac than without. The invariants it
//! offers nothing for (no VMI with two unfinished migrations at once, launcher pods of deleted
//! VMIs garbage-collected, ...) are asserted through `invariantViolations`, an array the report
//! must carry and keep empty (being added to the simulator's report); that assertion is its own
//! test, `no_invariant_violations_in_any_run`, so that its absence does not hide the rest.

use evac_e2e::repo_root;
use evac_e2e::report::{describe, num, outcome, row, shut_down, vm_time};
use evac_e2e::scenarios::{
    expect_field, expect_time, expect_vm, invariant_violations, run_invariants, simulate, Checks,
};
use serde_json::Value;

/// Every scenario of `tests/adversarial/`.
const SCENARIOS: &[&str] = &[
    "lone-eviction",
    "uncordon-mid-drain",
    "mixed-strategies-drain",
    "too-little-room",
    "deadline-too-short",
    "deadline-too-short-taint",
    "deletion-mid-migration",
    "cancel-before-start",
    "cancel-refused-drain-taint",
    "cancel-during-drain",
    "restart-mid-drain",
    "tolerations",
    "completion-timeout",
    "pressure-target",
    "pressure-relieved",
    "target-taints",
    "untaint",
    "early-move-target-by-requests",
    "fidelity-relief-unmovable",
    "fidelity-proactive-no-pressure",
    "fidelity-proactive-saves",
    "fidelity-deadline-behind-drain",
    "fidelity-backoff-gc",
    "fidelity-drain-taint-node-handler",
    "fidelity-lownodeutilization-threshold",
    "node-affinity-nowhere",
    "fidelity-cpu-requests",
    "fidelity-run-strategies",
    "fidelity-pdb",
    "fidelity-migration-policy",
    "fidelity-hotplug",
];

const BASELINE: &str = "KubeVirt alone";
/// The actor under which the report counts the kubelet's pressure evictions.
const KUBELET: &str = "node pressure";
const EVAC: &str = "evac";
const REPLACING: &str = "evac replacing KubeVirt's evacuation controller";

/// A run of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Run {
    KubeVirt,
    Evac,
    EvacReplacing,
}

impl Run {
    const ALL: [Run; 3] = [Run::KubeVirt, Run::Evac, Run::EvacReplacing];

    fn args(self) -> &'static [&'static str] {
        match self {
            Run::KubeVirt => &[],
            Run::Evac => &["--evac"],
            Run::EvacReplacing => &["--evac", "--replace-kubevirt"],
        }
    }

    fn label(self) -> &'static str {
        match self {
            Run::KubeVirt => BASELINE,
            Run::Evac => EVAC,
            Run::EvacReplacing => REPLACING,
        }
    }
}

// --- Running scenarios ------------------------------------------------------------------------

/// The runs of a scenario these tests read.
trait Runs {
    /// Both runs' reports (KubeVirt alone, evac); a run that fails ends the test at once.
    fn both(&mut self) -> (Value, Value);

    /// The run with evac replacing KubeVirt's evacuation controller; a run that fails ends the
    /// test at once.
    fn replacing(&mut self) -> Value;
}

impl Runs for Checks {
    fn both(&mut self) -> (Value, Value) {
        let base = simulate(self.scenario(), Run::KubeVirt.args());
        let evac = simulate(self.scenario(), Run::Evac.args());
        match (&*base, &*evac) {
            (Ok(b), Ok(e)) => (b.clone(), e.clone()),
            (b, e) => {
                for (mode, run) in [(BASELINE, b), (EVAC, e)] {
                    if let Err(err) = run {
                        self.fail(format!(
                            "{mode}: the simulation must run to its end and report (rule: nothing in a scenario may \
                             stop the simulation): {err}"
                        ));
                    }
                }
                self.give_up("no report to check")
            }
        }
    }

    fn replacing(&mut self) -> Value {
        match &*simulate(self.scenario(), Run::EvacReplacing.args()) {
            Ok(report) => report.clone(),
            Err(err) => panic!("{}: {REPLACING}: no report: {err}", self.scenario()),
        }
    }
}

// --- Report accessors -------------------------------------------------------------------------

fn vm_num(report: &Value, vm: &str, field: &str) -> u64 {
    row(report, vm).map(|r| num(&r[field])).unwrap_or(0)
}

fn drain<'a>(report: &'a Value, node: &str) -> Option<&'a Value> {
    report["drains"].as_array()?.iter().find(|d| d["node"] == node)
}

/// Evictions an actor asked for that were accepted (0 when the actor never asked).
fn accepted_evictions(report: &Value, actor: &str) -> u64 {
    report["evictions"].get(actor).map(|e| num(&e["accepted"])).unwrap_or(0)
}

/// Every eviction request of the run, all actors together.
fn all_eviction_requests(report: &Value) -> u64 {
    report["evictions"].as_object().map(|m| m.values().map(|e| num(&e["requested"])).sum()).unwrap_or(0)
}

/// The report's events about a VM (`events[]`: vm, reason, message).
fn events_of(report: &Value, vm: &str) -> Vec<Value> {
    let full = format!("default/{vm}");
    report["events"]
        .as_array()
        .map(|all| all.iter().filter(|e| e["vm"] == full.as_str()).cloned().collect())
        .unwrap_or_default()
}

/// A VM's migration attempts from the report's `migrationTimeline`: (when it started moving, when
/// it failed), in order; `None` for one that did not fail.
fn attempts(report: &Value, vm: &str) -> Vec<(f64, Option<f64>)> {
    let full = format!("default/{vm}");
    let Some(timeline) = report["migrationTimeline"].as_array() else { return Vec::new() };
    timeline
        .iter()
        .filter(|m| m["vm"] == full.as_str())
        .filter_map(|m| {
            let failed = (m["phase"] == "Failed").then(|| m["endedAt"].as_f64()).flatten();
            Some((m["startedAt"].as_f64()?, failed))
        })
        .collect()
}

// --- Expectations -----------------------------------------------------------------------------

fn expect_vm_migrations(c: &mut Checks, mode: &str, report: &Value, vm: &str, expected: u64, rule: &str) {
    let got = vm_num(report, vm, "migrations");
    c.check(got == expected, || {
        format!(
            "{mode}: VM {vm}: expected {expected} succeeded migration(s), got {got} {} (rule: {rule})",
            describe(report, vm)
        )
    });
}

fn expect_vm_failed(
    c: &mut Checks,
    mode: &str,
    report: &Value,
    vm: &str,
    range: std::ops::RangeInclusive<u64>,
    rule: &str,
) {
    let got = vm_num(report, vm, "failedMigrations");
    c.check(range.contains(&got), || {
        format!(
            "{mode}: VM {vm}: expected {}..={} failed migration(s), got {got} {} (rule: {rule})",
            range.start(),
            range.end(),
            describe(report, vm)
        )
    });
}

fn expect_vm_node_after(c: &mut Checks, mode: &str, report: &Value, vm: &str, node: &str, rule: &str) {
    let got = row(report, vm).map(|r| r["nodeAfter"].as_str().unwrap_or("?").to_owned());
    c.check(got.as_deref() == Some(node), || {
        format!(
            "{mode}: VM {vm}: expected to end on {node}, got {got:?} {} (rule: {rule})",
            describe(report, vm)
        )
    });
}

fn expect_field_at_least(c: &mut Checks, mode: &str, report: &Value, path: &[&str], least: u64, rule: &str) {
    let got = path.iter().fold(report, |v, k| &v[*k]);
    c.check(got.as_u64().is_some_and(|n| n >= least), || {
        format!("{mode}: report {}: expected at least {least}, got {got} (rule: {rule})", path.join("."))
    });
}

fn expect_drain_finished(c: &mut Checks, mode: &str, report: &Value, node: &str, finished: bool, rule: &str) {
    let Some(d) = drain(report, node) else {
        c.check(false, || format!("{mode}: no drain of {node} in the report's drains (rule: {rule})"));
        return;
    };
    let done = d["finishedAt"].as_f64().is_some();
    c.check(done == finished, || {
        format!(
            "{mode}: drain of {node}: expected {}, got {d} (rule: {rule})",
            if finished { "finished" } else { "NOT finished (finishedAt null)" }
        )
    });
}

fn expect_vms(c: &mut Checks, mode: &str, report: &Value, vms: &[&str], expected: &str, rule: &str) {
    for vm in vms {
        expect_vm(c, mode, report, vm, expected, rule);
    }
}

fn expect_cause(c: &mut Checks, mode: &str, report: &Value, vm: &str, cause: &str, rule: &str) {
    let got = row(report, vm).map(|r| r["cause"].clone());
    c.check(got.as_ref().is_some_and(|g| g == cause), || {
        format!("{mode}: VM {vm}: expected cause {cause:?}, got {got:?} (rule: {rule})")
    });
}

fn expect_kubelet_evictions(c: &mut Checks, mode: &str, report: &Value, expected: u64, rule: &str) {
    let got = accepted_evictions(report, KUBELET);
    c.check(got == expected, || {
        format!(
            "{mode}: expected {expected} kubelet pressure eviction(s), got {got} (evictions: {}) (rule: {rule})",
            report["evictions"]
        )
    });
}

/// Both runs' invariants, and the comparison between them.
fn common(c: &mut Checks, base: &Value, evac: &Value) {
    common_as(c, base, EVAC, evac);
}

/// [`common`] for the run of evac `label` names.
fn common_as(c: &mut Checks, base: &Value, label: &str, evac: &Value) {
    run_invariants(c, BASELINE, base);
    run_invariants(c, label, evac);
    let (b, e) = (shut_down(base), shut_down(evac));
    c.check(e <= b, || {
        format!("{label} shut down {e} VM(s), KubeVirt alone {b} (rule: evac must never end with more VMs shut down than KubeVirt alone)")
    });
}

// --- The scenarios ----------------------------------------------------------------------------

#[test]
fn lone_eviction() {
    let mut c = Checks::new("lone-eviction");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        let lone =
            "a lone API eviction marks the VMI and the evacuation controller migrates every marked VMI \
                    whose mark names its node, tainted node or not; evac: 'it must leave'";
        expect_vm(&mut c, mode, r, "lm", "migrated", lone);
        expect_vm_migrations(&mut c, mode, r, "lm", 1, lone);
        expect_vm(
            &mut c,
            mode,
            r,
            "lmip",
            "migrated",
            "LiveMigrateIfPossible + migratable is marked like LiveMigrate",
        );
        expect_vm_migrations(
            &mut c,
            mode,
            r,
            "lmip",
            1,
            "LiveMigrateIfPossible + migratable is marked like LiveMigrate",
        );
        let again = "a successful migration clears the mark; an eviction on the new node marks it again";
        expect_vm(&mut c, mode, r, "twice", "migrated", again);
        expect_vm_migrations(&mut c, mode, r, "twice", 2, again);
        expect_vm_failed(&mut c, mode, r, "twice", 0..=0, again);
        let external = "External: marked, never migrated by KubeVirt ('an external controller acts')";
        expect_vm(&mut c, mode, r, "ext", "untouched", external);
        expect_vm_migrations(&mut c, mode, r, "ext", 0, external);
        expect_vm_failed(&mut c, mode, r, "ext", 0..=0, external);
        expect_vm(&mut c, mode, r, "none", "shutDown", "None: the eviction is allowed and the pod deleted");
        expect_vm(
            &mut c,
            mode,
            r,
            "lmipnm",
            "shutDown",
            "LiveMigrateIfPossible + not migratable: the eviction is allowed",
        );
        let nm = "LiveMigrate + not migratable: 429 'not live-migratable', no mark";
        expect_vm(&mut c, mode, r, "lmnm", "untouched", nm);
        expect_vm_failed(&mut c, mode, r, "lmnm", 0..=0, nm);
        expect_vm(&mut c, mode, r, "bystand", "untouched", "a VM nobody disrupts stays");
        expect_field(
            &mut c,
            mode,
            r,
            &["vms", "shutDown"],
            2,
            "only None and LiveMigrateIfPossible+not migratable evictions are allowed",
        );
        expect_field(&mut c, mode, r, &["migrations", "marksCleared"], 0, "KubeVirt never clears a mark; evac: an API eviction's mark lasts until the VM left or an explicit cancel");
        expect_field(
            &mut c,
            mode,
            r,
            &["migrations", "succeeded"],
            4,
            "lm, lmip and twice (twice) migrate, nothing else",
        );
        expect_field(&mut c, mode, r, &["migrations", "failed"], 0, "no migration of this scenario can fail");
    }
    c.finish();
}

#[test]
fn uncordon_mid_drain() {
    let mut c = Checks::new("uncordon-mid-drain");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let rule = "kubectl drain cordons once and does not notice an uncordon; marks are never cleared; \
                evac: the drain still completes and every LiveMigrate VM migrates (no mark clearing loop)";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        for i in 1..=6 {
            let vm = format!("web{i:02}");
            expect_vm(&mut c, mode, r, &vm, "migrated", rule);
            expect_vm_migrations(&mut c, mode, r, &vm, 1, rule);
        }
        expect_vm(&mut c, mode, r, "scratch", "shutDown", "None: the drain's eviction is allowed");
        expect_drain_finished(&mut c, mode, r, "node01", true, rule);
        expect_field(&mut c, mode, r, &["migrations", "created"], 6, rule);
        expect_field(&mut c, mode, r, &["migrations", "succeeded"], 6, rule);
        expect_field(&mut c, mode, r, &["migrations", "failed"], 0, rule);
        expect_field(&mut c, mode, r, &["migrations", "marksCleared"], 0, rule);
    }
    c.finish();
}

#[test]
fn mixed_strategies_drain() {
    let mut c = Checks::new("mixed-strategies-drain");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(&mut c, mode, r, "lm", "migrated", "LiveMigrate: marked, migrated");
        expect_vm(
            &mut c,
            mode,
            r,
            "lmip",
            "migrated",
            "LiveMigrateIfPossible + migratable: marked, migrated",
        );
        expect_vm(
            &mut c,
            mode,
            r,
            "lmipnm",
            "shutDown",
            "LiveMigrateIfPossible + not migratable: eviction allowed, VM shut down",
        );
        expect_vm(&mut c, mode, r, "none", "shutDown", "None: eviction allowed, VM shut down");
        let ext = "External: marked, 429, never migrated by KubeVirt";
        expect_vm(&mut c, mode, r, "ext", "untouched", ext);
        expect_vm_failed(&mut c, mode, r, "ext", 0..=0, ext);
        let nm = "LiveMigrate + not migratable: 429 'not live-migratable' forever, no mark, never shut down";
        expect_vm(&mut c, mode, r, "lmnm", "untouched", nm);
        expect_vm_failed(&mut c, mode, r, "lmnm", 0..=0, nm);
        let blocked = "kubectl drain retries 429 every 5 s without limit: ext and lmnm block it forever";
        expect_drain_finished(&mut c, mode, r, "node01", false, blocked);
        if let Some(d) = drain(r, "node01") {
            c.check(d["error"].is_null(), || {
                format!("{mode}: drain of node01 has an error {d} (rule: 429s are retried, not errors)")
            });
            c.check(num(&d["refused"]) >= 200, || {
                format!(
                    "{mode}: drain of node01 refused only {} times (rule: {blocked}: ~2 pods x 590 s / 5 s)",
                    d["refused"]
                )
            });
        }
        expect_field(
            &mut c,
            mode,
            r,
            &["evictions", "kubectl-drain", "accepted"],
            4,
            "None and LiveMigrateIfPossible+not migratable are allowed, and so is each completed source pod of \
             lm and lmip (the admitter allows completed launcher pods; kubectl drain evicts finished pods)",
        );
        expect_field(
            &mut c,
            mode,
            r,
            &["migrations", "marks"],
            3,
            "lm, lmip and ext are marked once; lmnm never",
        );
        expect_field(&mut c, mode, r, &["migrations", "marksCleared"], 0, "nothing clears a mark");
        expect_field(&mut c, mode, r, &["migrations", "succeeded"], 2, "lm and lmip migrate");
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 2, "lmipnm and none");
    }
    c.finish();
}

#[test]
fn too_little_room() {
    let mut c = Checks::new("too-little-room");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let room = "by memory requests node03 takes exactly one more 12Gi VM; drained nodes are cordoned; \
                migration targets go through the scheduler";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        let drained = ["a01", "a02", "b01", "b02"];
        let moved: Vec<&str> = drained.iter().copied().filter(|vm| outcome(r, vm) == "migrated").collect();
        c.check(moved.len() == 1, || {
            format!("{mode}: expected exactly one of {drained:?} migrated, got {moved:?} (rule: {room})")
        });
        if let [vm] = moved[..] {
            c.check(vm.starts_with('a'), || {
                format!(
                    "{mode}: VM {vm} migrated, expected a01 or a02: node01 is drained first (rule: {room})"
                )
            });
            expect_vm_node_after(&mut c, mode, r, vm, "node03", room);
        }
        for vm in drained.iter().filter(|vm| !moved.contains(vm)) {
            expect_vm(
                &mut c,
                mode,
                r,
                vm,
                "untouched",
                "a LiveMigrate VM that fits nowhere is not migrated and never shut down by a drain (429)",
            );
        }
        expect_vm(&mut c, mode, r, "n1", "shutDown", "None: eviction allowed");
        expect_vm(&mut c, mode, r, "n2", "shutDown", "None: eviction allowed");
        expect_vm(&mut c, mode, r, "c1", "untouched", "node03 is not drained");
        expect_field(
            &mut c,
            mode,
            r,
            &["vms", "shutDown"],
            2,
            "only the None VMs; evac must not shut down more than KubeVirt alone",
        );
        expect_drain_finished(
            &mut c,
            mode,
            r,
            "node01",
            false,
            "a VM that fits nowhere keeps its pod on node01 (429 forever)",
        );
        expect_drain_finished(
            &mut c,
            mode,
            r,
            "node02",
            false,
            "a VM that fits nowhere keeps its pod on node02 (429 forever)",
        );
    }
    expect_field_at_least(
        &mut c,
        BASELINE,
        &base,
        &["migrations", "failed"],
        3,
        "KubeVirt fails a migration whose target pod stays unschedulable for 5 minutes (3 VMs stuck from ~10-20 s, 15 min run)",
    );
    c.finish();
}

fn deadline_too_short(scenario: &'static str, cause: &str) {
    let mut c = Checks::new(scenario);
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let small: Vec<String> = (1..=5).map(|i| format!("s{i:02}")).collect();
    let alone = "preemption / NoExecute deletion bypass the eviction API: KubeVirt alone lets the VM die (runStrategy Once)";
    for vm in small.iter().map(String::as_str).chain(["big"]) {
        expect_vm(&mut c, BASELINE, &base, vm, "shutDown", alone);
        let got = row(&base, vm).map(|r| r["cause"].clone());
        c.check(got.as_ref().is_some_and(|g| g == cause), || format!("{BASELINE}: VM {vm}: expected cause {cause:?}, got {got:?} (rule: every VM on node01 is disrupted)"));
    }
    expect_field(&mut c, BASELINE, &base, &["migrations", "created"], 0, alone);
    let save = "evac migrates as long as the migration can finish before the grace period ends; a migration that \
                cannot finish before its VM's deadline is not started while a savable VM waits: all five small VMs survive";
    for vm in &small {
        expect_vm(&mut c, EVAC, &evac, vm, "migrated", save);
        expect_vm_migrations(&mut c, EVAC, &evac, vm, 1, save);
    }
    let hopeless = "big needs ~683 s, its deadline is ~195 s away: no migration is started for it";
    expect_vm(&mut c, EVAC, &evac, "big", "shutDown", hopeless);
    expect_vm_failed(&mut c, EVAC, &evac, "big", 0..=0, hopeless);
    expect_field(&mut c, EVAC, &evac, &["migrations", "created"], 5, hopeless);
    expect_field(&mut c, EVAC, &evac, &["migrations", "succeeded"], 5, save);
    expect_field(&mut c, EVAC, &evac, &["vms", "shutDown"], 1, save);
    c.finish();
}

#[test]
fn deadline_too_short_preemption() {
    deadline_too_short("deadline-too-short", "scheduler preemption");
}

#[test]
fn deadline_too_short_noexecute_taint() {
    deadline_too_short("deadline-too-short-taint", "NoExecute taint");
}

#[test]
fn deletion_mid_migration() {
    let mut c = Checks::new("deletion-mid-migration");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let died = "a migration whose VM died before it finished fails (never counts as succeeded)";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(
            &mut c,
            mode,
            r,
            "doomed",
            "shutDown",
            "its VMI was deleted (runStrategy Once): the VM is gone",
        );
        expect_vm_migrations(&mut c, mode, r, "doomed", 0, died);
        expect_vm_failed(&mut c, mode, r, "doomed", 1..=1, died);
        expect_vm(
            &mut c,
            mode,
            r,
            "phoenix",
            "restarted",
            "runStrategy Always: KubeVirt's VM controller starts a new VMI for a deleted one",
        );
        expect_vm_migrations(&mut c, mode, r, "phoenix", 0, died);
        expect_vm_failed(&mut c, mode, r, "phoenix", 1..=1, died);
        expect_vm(&mut c, mode, r, "stay", "migrated", "a lone eviction migrates the VM");
        expect_vm(
            &mut c,
            mode,
            r,
            "late",
            "migrated",
            "deleting a VMI mid-migration must not stop the simulation: the eviction at 200 s still acts",
        );
        expect_field(
            &mut c,
            mode,
            r,
            &["migrations", "created"],
            4,
            "one migration per eviction; none for a deleted VMI",
        );
        expect_field(&mut c, mode, r, &["migrations", "succeeded"], 2, died);
        expect_field(&mut c, mode, r, &["migrations", "failed"], 2, died);
        let seconds = r["simulatedSeconds"].as_f64().unwrap_or(0.0);
        c.check(seconds >= 200.0, || format!("{mode}: the run stopped at {seconds} s (rule: deleting a VMI mid-migration must not stop the simulation)"));
    }
    c.finish();
}

#[test]
fn cancel_before_start() {
    let mut c = Checks::new("cancel-before-start");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(&mut c, mode, r, "long", "migrated", "a lone eviction migrates the VM");
        expect_field(
            &mut c,
            mode,
            r,
            &["migrations", "marksCleared"],
            1,
            "evacuate/cancel on a node without the drain taint removes the mark",
        );
    }
    let v19 = "KubeVirt v1.9 creates the evacuation migration at once (limits apply to running migrations) and \
               evacuate/cancel does not delete an in-flight migration: the pending migration runs when long finishes";
    expect_vm(&mut c, BASELINE, &base, "victim", "migrated", v19);
    // Beside KubeVirt, its evacuation controller created victim's migration at once, as alone.
    expect_vm(&mut c, EVAC, &evac, "victim", "migrated", v19);
    let honoured = "evac: a mark set by an API eviction lasts until the VM left or the evacuation is cancelled explicitly \
                    (1.8 semantics); cancelled before its migration started, the VM stays";
    let replacing = c.replacing();
    common_as(&mut c, &base, REPLACING, &replacing);
    expect_vm(&mut c, REPLACING, &replacing, "victim", "untouched", honoured);
    expect_vm_migrations(&mut c, REPLACING, &replacing, "victim", 0, honoured);
    c.finish();
}

#[test]
fn cancel_refused_on_drain_taint() {
    let mut c = Checks::new("cancel-refused-drain-taint");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let refused =
        "evacuate/cancel is refused while the node carries kubevirt.io/drain:NoSchedule: the mark stays";
    let tainted = "the evacuation controller migrates every migratable VMI on a node with the drain taint";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(&mut c, mode, r, "victim", "migrated", refused);
        expect_vm_migrations(&mut c, mode, r, "victim", 1, refused);
        expect_vm(&mut c, mode, r, "other", "migrated", tainted);
        expect_vm(
            &mut c,
            mode,
            r,
            "plain",
            "untouched",
            "None VMIs are skipped by the evacuation; a NoSchedule taint evicts nothing",
        );
        expect_vm(&mut c, mode, r, "hog", "migrated", "a lone eviction migrates the VM");
        expect_field(&mut c, mode, r, &["migrations", "marksCleared"], 0, refused);
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, "nothing here shuts a VM down");
    }
    c.finish();
}

#[test]
fn cancel_during_drain() {
    let mut c = Checks::new("cancel-during-drain");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let rule =
        "cordoning does not refuse a cancel; kubectl drain re-evicts every 5 s and marks the VMI again";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        for vm in ["w01", "w02"] {
            expect_vm(&mut c, mode, r, vm, "migrated", rule);
            expect_vm_migrations(&mut c, mode, r, vm, 1, rule);
        }
        expect_drain_finished(&mut c, mode, r, "node01", true, rule);
        expect_field(
            &mut c,
            mode,
            r,
            &["migrations", "marksCleared"],
            1,
            "the one cancel is accepted (no drain taint)",
        );
        expect_field(
            &mut c,
            mode,
            r,
            &["migrations", "created"],
            2,
            "one migration per VM, no duplicate after the re-mark",
        );
        expect_field(&mut c, mode, r, &["migrations", "succeeded"], 2, rule);
    }
    c.finish();
}

#[test]
fn restart_mid_drain() {
    let mut c = Checks::new("restart-mid-drain");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let rule = "evac's state is only a cache of the cluster's: a restart resyncs and creates no duplicate migration; \
                every VM migrates exactly once";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        for i in 1..=6 {
            let vm = format!("web{i:02}");
            expect_vm(&mut c, mode, r, &vm, "migrated", rule);
            expect_vm_migrations(&mut c, mode, r, &vm, 1, rule);
            expect_vm_failed(&mut c, mode, r, &vm, 0..=0, rule);
        }
        expect_vm(&mut c, mode, r, "scratch", "shutDown", "None: the drain's eviction is allowed");
        expect_field(&mut c, mode, r, &["migrations", "created"], 6, rule);
        expect_field(&mut c, mode, r, &["migrations", "succeeded"], 6, rule);
        expect_drain_finished(&mut c, mode, r, "node01", true, rule);
    }
    c.finish();
}

#[test]
fn noexecute_tolerations() {
    let mut c = Checks::new("tolerations");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let alone = "the taint manager deletes (no eviction API): KubeVirt alone lets the VM die";
    expect_vm(&mut c, BASELINE, &base, "notol", "shutDown", alone);
    expect_vm(
        &mut c,
        BASELINE,
        &base,
        "tolother",
        "shutDown",
        "a toleration of another key does not match: deleted at once; the VM dies",
    );
    expect_vm(
        &mut c,
        BASELINE,
        &base,
        "tol60",
        "shutDown",
        "tolerationSeconds 60: deleted at ~70 s; the VM dies",
    );
    expect_vm(&mut c, BASELINE, &base, "always", "restarted", "runStrategy Always: restarted elsewhere");
    if let Some(r) = row(&base, "always") {
        c.check(r["nodeAfter"] != "node01", || format!("{BASELINE}: VM always restarted on node01 {r} (rule: node01's NoExecute taint is not tolerated)"));
    }
    expect_field(&mut c, BASELINE, &base, &["vms", "shutDown"], 5, alone);
    let gate = "NoExecuteTaintEvictionLiveMigration: LiveMigrate VMs migrate when the migration finishes within the grace period";
    for vm in ["notol", "tolother", "always", "tol60"] {
        expect_vm(&mut c, EVAC, &evac, vm, "migrated", gate);
        expect_vm_migrations(&mut c, EVAC, &evac, vm, 1, gate);
    }
    expect_field(&mut c, EVAC, &evac, &["vms", "shutDown"], 2, gate);
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        let forever = "a toleration without tolerationSeconds tolerates the taint forever: never disrupted";
        expect_vm(&mut c, mode, r, "tolforever", "untouched", forever);
        expect_vm_failed(&mut c, mode, r, "tolforever", 0..=0, forever);
        expect_vm(&mut c, mode, r, "tol60none", "shutDown", "None cannot migrate: deleted at ~70 s, dies");
        expect_vm(
            &mut c,
            mode,
            r,
            "lmipnm",
            "shutDown",
            "LiveMigrateIfPossible + not migratable cannot migrate",
        );
    }
    c.finish();
}

#[test]
fn completion_timeout_and_back_off() {
    let mut c = Checks::new("completion-timeout");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let units = "completion timeout = completionTimeoutPerGiB x memory in decimal GB rounded up (KubeVirt \
                 getVMIMigrationDataSize): 1Gi -> 300 s, 4Gi -> 750 s";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        for vm in ["quick", "mid4"] {
            expect_vm(&mut c, mode, r, vm, "migrated", units);
            expect_vm_failed(&mut c, mode, r, vm, 0..=0, units);
        }
        expect_vm(
            &mut c,
            mode,
            r,
            "slow",
            "untouched",
            "341 s > 300 s: every attempt fails; the VM keeps running on node02",
        );
        expect_field(
            &mut c,
            mode,
            r,
            &["migrations", "marksCleared"],
            0,
            "a failed migration does not clear the mark",
        );
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, "a failed migration never shuts the VM down");
    }
    expect_vm_failed(
        &mut c,
        BASELINE,
        &base,
        "slow",
        3..=3,
        "failed evacuation migrations back off 20 s doubling: failures at ~310, ~630, ~970 s; the 4th (~1350 s) is after the end",
    );
    expect_vm_failed(
        &mut c,
        EVAC,
        &evac,
        "slow",
        2..=3,
        "the requester was told the VM is leaving, so evac keeps retrying, with a back-off no shorter than 20 s doubling",
    );
    c.finish();
}

#[test]
fn pressure_relieved_during_the_back_off() {
    let mut c = Checks::new("pressure-relieved");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let alone =
        "node pressure is no evacuation cause for KubeVirt, and the kubelet's soft eviction needs 900 s";
    expect_vm(&mut c, BASELINE, &base, "stuck", "untouched", alone);
    expect_field(&mut c, BASELINE, &base, &["migrations", "created"], 0, alone);
    let ends = "evac's own mark ends with its cause; a retry that has not started goes with it";
    let replacing = c.replacing();
    common_as(&mut c, &base, REPLACING, &replacing);
    for (mode, r, created, cancelled) in [(EVAC, &evac, 2, 1), (REPLACING, &replacing, 1, 0)] {
        expect_vm(&mut c, mode, r, "stuck", "untouched", ends);
        expect_vm_failed(&mut c, mode, r, "stuck", 1..=1, "no progress for 150 s aborts the migration");
        expect_field(&mut c, mode, r, &["migrations", "created"], created, ends);
        expect_field(&mut c, mode, r, &["migrations", "failed"], 1, ends);
        expect_field(&mut c, mode, r, &["migrations", "cancelled"], cancelled, ends);
        expect_field(&mut c, mode, r, &["migrations", "marksCleared"], 1, ends);
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, "nothing here shuts a VM down");
    }
    c.finish();
}

#[test]
fn pressure_on_the_migration_target() {
    let mut c = Checks::new("pressure-target");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let alone = "the scheduler fits a on node02 by requests; node02 then falls under evictionSoft 8Gi and the kubelet \
                 evicts the lowest-priority pod, b, which cannot migrate in its 45 s";
    expect_vm(&mut c, BASELINE, &base, "a", "migrated", alone);
    expect_vm_node_after(&mut c, BASELINE, &base, "a", "node02", alone);
    expect_vm(&mut c, BASELINE, &base, "b", "shutDown", alone);
    let cause = row(&base, "b").map(|r| r["cause"].clone());
    c.check(cause.as_ref().is_some_and(|v| v == "node pressure"), || {
        format!("{BASELINE}: VM b: expected cause \"node pressure\", got {cause:?} (rule: {alone})")
    });
    expect_drain_finished(&mut c, BASELINE, &base, "node01", true, alone);
    // Beside KubeVirt, the drain's mark is migrated by KubeVirt's evacuation controller at once,
    // wherever the scheduler fits it: the outcome is KubeVirt's.
    expect_vm(&mut c, EVAC, &evac, "a", "migrated", alone);
    expect_vm(&mut c, EVAC, &evac, "b", "shutDown", alone);
    let never = "evac must not migrate a VM onto a node where it would cause the next pressure eviction";
    let replacing = c.replacing();
    common_as(&mut c, &base, REPLACING, &replacing);
    expect_vm(&mut c, REPLACING, &replacing, "a", "untouched", never);
    expect_vm(&mut c, REPLACING, &replacing, "b", "untouched", never);
    expect_field(&mut c, REPLACING, &replacing, &["vms", "shutDown"], 0, never);
    let kubelet = replacing["evictions"].get("node pressure").map(|e| num(&e["accepted"])).unwrap_or(0);
    c.check(kubelet == 0, || {
        format!("{REPLACING}: the kubelet evicted {kubelet} pod(s) for node pressure (rule: {never})")
    });
    expect_drain_finished(
        &mut c,
        REPLACING,
        &replacing,
        "node01",
        false,
        "a stays on node01, so the drain cannot finish",
    );
    c.finish();
}

#[test]
fn target_taints_and_tolerations() {
    let mut c = Checks::new("target-taints");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let sched = "migration targets go through the scheduler (memory requests, taints, tolerations, cordon)";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(&mut c, mode, r, "tolerant", "migrated", sched);
        expect_vm_node_after(&mut c, mode, r, "tolerant", "node02", sched);
        expect_vm(
            &mut c,
            mode,
            r,
            "intolerant",
            "untouched",
            "node02's taint is not tolerated, node03 is cordoned: it fits nowhere and is not migrated",
        );
        expect_vm(
            &mut c,
            mode,
            r,
            "bigtol",
            "untouched",
            "40Gi does not fit node02's 32Gi, node03 is cordoned: it fits nowhere and is not migrated",
        );
        expect_field(
            &mut c,
            mode,
            r,
            &["vms", "shutDown"],
            0,
            "LiveMigrate VMs are never shut down by a drain",
        );
        expect_drain_finished(&mut c, mode, r, "node03", true, "an empty node's drain finishes at once");
        expect_drain_finished(
            &mut c,
            mode,
            r,
            "node01",
            false,
            "intolerant and bigtol keep their pods (429 forever)",
        );
    }
    expect_field(
        &mut c,
        BASELINE,
        &base,
        &["migrations", "failed"],
        2,
        "KubeVirt fails a migration after 5 minutes unschedulable: intolerant and bigtol once each (~320 s); retries fail after the 480 s end",
    );
    c.finish();
}

#[test]
fn a_taint_removed_before_the_toleration_ends() {
    let mut c = Checks::new("untaint");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let cancelled = "taint_eviction.go handleNodeUpdate: a node left without NoExecute taints has its scheduled deletions cancelled";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(&mut c, mode, r, "none", "untouched", cancelled);
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, cancelled);
        let deleted = accepted_evictions(r, "NoExecute taint");
        c.check(deleted == 0, || {
            format!("{mode}: {deleted} pod(s) deleted by the taint manager (rule: {cancelled})")
        });
    }
    expect_vm(&mut c, BASELINE, &base, "tol", "untouched", cancelled);
    let tol = outcome(&evac, "tol");
    c.check(tol == "untouched" || tol == "migrated", || {
        format!(
            "{EVAC}: VM tol ended {tol} {} (rule: moved while the taint stood, or left; never stopped)",
            describe(&evac, "tol")
        )
    });
    c.finish();
}

#[test]
fn no_early_move_the_scheduler_could_put_under_pressure() {
    let mut c = Checks::new("early-move-target-by-requests");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let rule = "over the kubelet's threshold the kubelet never evicts; a move there is made only if every node \
                the scheduler could pick (by requests: node03) stays clear, and node03 would fall under its hard threshold";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vms(&mut c, mode, r, &["a01", "a02", "a03", "b01", "c01"], "untouched", rule);
        expect_field(&mut c, mode, r, &["migrations", "created"], 0, rule);
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, rule);
        expect_kubelet_evictions(&mut c, mode, r, 0, rule);
    }
    c.finish();
}

#[test]
fn required_node_affinity_with_nowhere_to_go() {
    let mut c = Checks::new("node-affinity-nowhere");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let alone = "taint_eviction.go deletes the untolerating pods at once; a stock virt-handler shuts the guest down at SIGTERM";
    expect_vms(&mut c, BASELINE, &base, &["z01", "z02", "any"], "shutDown", alone);
    expect_field(&mut c, BASELINE, &base, &["migrations", "created"], 0, alone);
    let moved = "the held pod of a VM without affinity migrates to zone b";
    expect_vm(&mut c, EVAC, &evac, "any", "migrated", moved);
    let nowhere = "template.go copies the VMI's required node affinity to the target pod; zone a is tainted NoExecute, \
                   zone b is outside the affinity: no node takes it, so no migration is created and the hold ends at once";
    for vm in ["z01", "z02"] {
        expect_vm(&mut c, EVAC, &evac, vm, "shutDown", nowhere);
        expect_vm_migrations(&mut c, EVAC, &evac, vm, 0, nowhere);
        expect_vm_failed(&mut c, EVAC, &evac, vm, 0..=0, nowhere);
        expect_time(&mut c, EVAC, &evac, vm, "stoppedAt", 10.0, 20.0, nowhere);
        let said = events_of(&evac, vm);
        c.check(
            said.iter().any(|e| {
                e["reason"] == "EvacuationDeferred"
                    && e["message"].as_str().is_some_and(|m| m.contains("no other node accepts it"))
            }),
            || format!("{EVAC}: expected an EvacuationDeferred event for {vm} naming no node that accepts it, got {said:?} (rule: {nowhere})"),
        );
    }
    expect_field(&mut c, EVAC, &evac, &["migrations", "created"], 1, nowhere);
    c.finish();
}

#[test]
fn cpu_requests_bound_where_a_drains_vms_go() {
    let mut c = Checks::new("fidelity-cpu-requests");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let rule = "noderesources fit: the target pod needs 2 CPUs; node03 has 2 left, then none, node02 none: one VM \
                migrates, the other's target pod is unschedulable and its migrations fail after 300 s each \
                (handlePendingPodTimeout); its eviction keeps being refused, so it runs on and the drain waits";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        let migrated: Vec<&str> =
            ["c01", "c02"].into_iter().filter(|vm| outcome(r, vm) == "migrated").collect();
        c.check(migrated.len() == 1, || {
            format!("{mode}: migrated {migrated:?}, expected exactly one of c01, c02 (rule: {rule})")
        });
        let stuck = if migrated == ["c01"] { "c02" } else { "c01" };
        expect_vm(&mut c, mode, r, stuck, "untouched", rule);
        expect_vm_failed(&mut c, mode, r, stuck, 1..=2, rule);
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, rule);
        expect_drain_finished(&mut c, mode, r, "node01", false, rule);
        expect_vm_node_after(&mut c, mode, r, migrated.first().copied().unwrap_or("c01"), "node03", rule);
    }
    c.finish();
}

#[test]
fn run_strategies_and_a_graceful_vmi_deletion() {
    let mut c = Checks::new("fidelity-run-strategies");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let strategies = "vm.go syncRunStrategy: Always restarts a final VMI, RerunOnFailure only a Failed one (a guest \
                      that ignores ACPI is killed at its grace: Failed; one that powers off: Succeeded), Manual never";
    let deletion = "lifecycle.go deletes a deleted VMI's pods at once and its finalizer holds it until final; \
                    evacuation.go never migrates a VMI with a deletionTimestamp; the guest ignores ACPI and is killed \
                    at its 30 s grace";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vms(&mut c, mode, r, &["always", "hard"], "restarted", strategies);
        expect_vms(&mut c, mode, r, &["soft", "manual"], "shutDown", strategies);
        expect_vm(&mut c, mode, r, "gone", "shutDown", deletion);
        expect_vm_migrations(&mut c, mode, r, "gone", 0, deletion);
        expect_vm_failed(&mut c, mode, r, "gone", 0..=0, deletion);
        expect_time(&mut c, mode, r, "gone", "stoppedAt", 30.0, 50.0, deletion);
        expect_vm(&mut c, mode, r, "stay", "migrated", deletion);
        expect_drain_finished(&mut c, mode, r, "node02", true, deletion);
    }
    c.finish();
}

#[test]
fn disruption_budgets_during_a_drain() {
    let mut c = Checks::new("fidelity-pdb");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let rule = "eviction.go: webhooks first, then the budget; a LiveMigrate pod gets KubeVirt's 429 and migrates, \
                its Succeeded source pod skips the budget (canIgnorePDB); a None pod passes the webhooks and its \
                budget (minAvailable 1, 1 healthy) refuses it with 429, which kubectl drain retries";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(&mut c, mode, r, "web", "migrated", rule);
        expect_vm(&mut c, mode, r, "db", "untouched", rule);
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, rule);
        expect_drain_finished(&mut c, mode, r, "node01", false, rule);
        let blocked = drain(r, "node01").map(|d| d["blockedBy"].to_string()).unwrap_or_default();
        c.check(blocked.contains("disruption budget"), || {
            format!("{mode}: the drain should wait on db's budget, blockedBy {blocked} (rule: {rule})")
        });
    }
    c.finish();
}

#[test]
fn migration_policies_set_bandwidth_and_post_copy() {
    let mut c = Checks::new("fidelity-migration-policy");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let post_copy = "matchPolicy gives pc the postcopy policy; at its 750 s completion timeout it switches to \
                     post-copy (handleLegacyConvergence) and the 1096Mi left go at 64Mi/s: done ~767 s after it starts";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(&mut c, mode, r, "pc", "migrated", post_copy);
        expect_vm_failed(&mut c, mode, r, "pc", 0..=0, post_copy);
        expect_time(&mut c, mode, r, "pc", "migratedAt", 760.0, 800.0, post_copy);
        expect_drain_finished(&mut c, mode, r, "node01", true, post_copy);
        let converge =
            "the converge policy's allowAutoConverge: QEMU throttles ac's 100Mi/s to 30Mi/s (70 %), \
                        4Gi at the 34Mi/s left: ~120 s, where it could not converge unthrottled";
        expect_vm(&mut c, mode, r, "ac", "migrated", converge);
        expect_vm_failed(&mut c, mode, r, "ac", 0..=0, converge);
        expect_time(&mut c, mode, r, "ac", "migratedAt", 120.0, 150.0, converge);
    }
    let alone = "taint_eviction.go deletes the pods at once; a stock virt-handler shuts the guests down";
    expect_vms(&mut c, BASELINE, &base, &["bulk", "fast"], "shutDown", alone);
    let fast = "held, and 8Gi at the cluster's 64Mi/s takes 128 s, before the 310 s deadline";
    expect_vm(&mut c, EVAC, &evac, "fast", "migrated", fast);
    let bulk =
        "the bulk policy's 16Mi/s makes bulk's migration 512 s, past its deadline: evac estimates with the \
                settings KubeVirt applies, starts nothing, and ends the hold at once";
    expect_vm(&mut c, EVAC, &evac, "bulk", "shutDown", bulk);
    expect_vm_migrations(&mut c, EVAC, &evac, "bulk", 0, bulk);
    expect_time(&mut c, EVAC, &evac, "bulk", "stoppedAt", 10.0, 25.0, bulk);
    let said = events_of(&evac, "bulk");
    c.check(said.iter().any(|e| e["reason"] == "EvacuationDeferred"), || {
        format!("{EVAC}: expected an EvacuationDeferred event for bulk, got {said:?} (rule: {bulk})")
    });
    c.finish();
}

#[test]
fn hotplug_attachment_pods_during_a_drain() {
    let mut c = Checks::new("fidelity-hotplug");
    let (base, evac) = c.both();
    let replacing = c.replacing();
    common(&mut c, &base, &evac);
    let rule = "admitHotplugPod refuses an attachment pod's eviction (429) while its launcher pod runs a VMI; after \
                the migration the source's attachment pod goes (cleanupAttachmentPods), and a final VMI's too \
                (deleteAllAttachmentPods); the drain finishes";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac), (REPLACING, &replacing)] {
        expect_vm(&mut c, mode, r, "hp", "migrated", rule);
        expect_vm(&mut c, mode, r, "cold", "shutDown", rule);
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 1, rule);
        expect_drain_finished(&mut c, mode, r, "node01", true, rule);
        // Two launcher pods evicted (cold's, and hp's completed source); the attachment pods never:
        // refused while their VM ran, then deleted by KubeVirt.
        let accepted = accepted_evictions(r, "kubectl-drain");
        c.check(accepted == 2, || {
            format!("{mode}: {accepted} evictions accepted, expected 2: the attachment pods are never evicted (rule: {rule})")
        });
    }
    c.finish();
}

// --- The fidelity scenarios -------------------------------------------------------------------

#[test]
fn relief_counts_only_vms_that_leave() {
    let mut c = Checks::new("fidelity-relief-unmovable");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);

    let rank = "kubelet rankMemoryPressure: no pod exceeds its requests, so the lowest priority goes first \
                (s01, s02 at -10); one pod per pass until memory.available >= evictionSoft 3500Mi (1000 -> 3048 -> 5096)";
    let grace =
        "eviction_manager.go synchronize: a soft threshold is acted on only after evictionSoftGracePeriod \
                 (met at 10 s + 120 s)";
    for vm in ["s01", "s02"] {
        expect_vm(&mut c, BASELINE, &base, vm, "shutDown", rank);
        expect_cause(&mut c, BASELINE, &base, vm, KUBELET, rank);
        expect_time(&mut c, BASELINE, &base, vm, "stoppedAt", 129.0, 200.0, grace);
    }
    let never = "VMIMigratableOnEviction: External / LiveMigrateIfPossible+not migratable never migrate; \
                 the kubelet's rank reaches them only after s01 and s02, and by then the pressure is gone";
    expect_vms(&mut c, BASELINE, &base, &["ext", "nm", "big", "idle02", "idle03"], "untouched", never);
    expect_field(&mut c, BASELINE, &base, &["vms", "shutDown"], 2, rank);
    expect_kubelet_evictions(&mut c, BASELINE, &base, 2, rank);
    expect_field(
        &mut c,
        BASELINE,
        &base,
        &["migrations", "created"],
        0,
        "node pressure is no evacuation cause for KubeVirt",
    );

    let relief = "relief counts only VMs that will leave (VMIMigratableOnEviction): ext (4Gi) and nm (5Gi) never \
                  leave; the fewest VMs that will leave and cover the 2500Mi (3524Mi with the headroom) gap: big (6Gi)";
    expect_vm(&mut c, EVAC, &evac, "big", "migrated", relief);
    expect_vm_migrations(&mut c, EVAC, &evac, "big", 1, relief);
    expect_time(
        &mut c,
        EVAC,
        &evac,
        "big",
        "migratedAt",
        10.0,
        129.0,
        "big must be gone before the kubelet's soft grace ends at 130 s (6Gi at 256Mi/s: 24 s)",
    );
    expect_vms(&mut c, EVAC, &evac, &["ext", "nm"], "untouched", never);
    for vm in ["ext", "nm"] {
        expect_vm_failed(&mut c, EVAC, &evac, vm, 0..=0, never);
    }
    expect_vms(
        &mut c,
        EVAC,
        &evac,
        &["s01", "s02", "idle02", "idle03"],
        "untouched",
        "once big has left (available 7144Mi) nothing else needs to move, and the kubelet never acts",
    );
    expect_field(
        &mut c,
        EVAC,
        &evac,
        &["vms", "migrated"],
        1,
        "the fewest VMs that relieve the node: one (big)",
    );
    expect_field(
        &mut c,
        EVAC,
        &evac,
        &["vms", "shutDown"],
        0,
        "no LiveMigrate VM may be killed by the kubelet",
    );
    expect_kubelet_evictions(
        &mut c,
        EVAC,
        &evac,
        0,
        "the pressure is relieved (big gone by ~35-50 s) before the kubelet's 120 s soft grace ends",
    );
    c.finish();
}

#[test]
fn no_proactive_move_onto_nodes_that_would_fall_under_their_threshold() {
    let mut c = Checks::new("fidelity-proactive-no-pressure");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let above =
        "thresholdsMet: met only when threshold > available; node01 has 4012Mi, node02/node03 5600Mi, \
                 all > 3500Mi: the kubelet evicts nothing";
    let targets = "a 4Gi VM would leave node02/node03 at 1504Mi < 3500Mi: under their own soft threshold; \
                   nothing may be moved there (README: no migration to a node it would bring under threshold + headroom)";
    let all = ["a01", "a02", "a03", "b01", "b02", "c01", "c02"];
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        let rule = if mode == BASELINE { above } else { targets };
        expect_vms(&mut c, mode, r, &all, "untouched", rule);
        expect_field(&mut c, mode, r, &["vms", "migrated"], 0, rule);
        expect_field(&mut c, mode, r, &["migrations", "created"], 0, rule);
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, above);
        expect_kubelet_evictions(&mut c, mode, r, 0, above);
    }
    c.finish();
}

#[test]
fn acting_early_saves_a_vm_from_a_hard_eviction() {
    let mut c = Checks::new("fidelity-proactive-saves");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let hard = "eviction_manager.go synchronize: the hard threshold (1Gi) is met at 300 s (12Mi available) and acted \
                on at once with immediateEvictionGracePeriodSeconds (1 s); rankMemoryPressure: lowest priority first (v1)";
    expect_vm(&mut c, BASELINE, &base, "v1", "shutDown", hard);
    expect_cause(&mut c, BASELINE, &base, "v1", KUBELET, hard);
    expect_time(&mut c, BASELINE, &base, "v1", "stoppedAt", 299.0, 315.0, hard);
    let after = "after v1 is gone available is 4108Mi: neither threshold is met, no further eviction; \
                 before 300 s available is 4012Mi > 3500Mi: nothing happens";
    expect_vms(&mut c, BASELINE, &base, &["v2", "v3", "w02", "w03"], "untouched", after);
    expect_field(&mut c, BASELINE, &base, &["vms", "shutDown"], 1, hard);
    expect_kubelet_evictions(&mut c, BASELINE, &base, 1, hard);

    let early = "evac acts within its headroom (4012Mi < 3500 + 1024Mi) from 10 s: a VM moved before 300 s leaves \
                 4108Mi after the rise, above both thresholds; a hard eviction (1 s grace) leaves no window to save \
                 a VM afterwards";
    let early_moves = ["v1", "v2", "v3"]
        .iter()
        .filter(|vm| {
            outcome(&evac, vm) == "migrated" && vm_time(&evac, vm, "migratedAt").is_some_and(|t| t < 300.0)
        })
        .count();
    c.check(early_moves >= 1, || {
        format!(
            "{EVAC}: expected at least one of v1..v3 migrated before 300 s, got {} (rule: {early})",
            ["v1", "v2", "v3"].iter().map(|vm| describe(&evac, vm)).collect::<Vec<_>>().join(", ")
        )
    });
    for vm in ["v1", "v2", "v3"] {
        c.check(outcome(&evac, vm) != "shutDown", || {
            format!("{EVAC}: VM {vm} shut down {} (rule: {early})", describe(&evac, vm))
        });
    }
    expect_field(&mut c, EVAC, &evac, &["vms", "shutDown"], 0, early);
    expect_kubelet_evictions(&mut c, EVAC, &evac, 0, early);
    c.finish();
}

#[test]
fn deadlines_behind_a_drain_with_one_slot() {
    let mut c = Checks::new("fidelity-deadline-behind-drain");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let drained = ["d01", "d02", "d03", "d04"];
    let drain_rule = "evacuation.go sync creates a migration for every marked VMI at once; the migration controller \
                      runs them one at a time (parallelMigrationsPerCluster 1); kubectl drain retries 429s until done";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vms(&mut c, mode, r, &drained, "migrated", drain_rule);
        for vm in drained {
            expect_vm_migrations(&mut c, mode, r, vm, 1, drain_rule);
        }
        expect_drain_finished(&mut c, mode, r, "node01", true, drain_rule);
    }

    let alone =
        "taint_eviction.go deletes the untolerating pods at once (grace 60 s, no preStop); KubeVirt has no \
                 handling of DisruptionTarget; a stock virt-handler shuts the guest down at SIGTERM";
    for vm in ["t01", "t02", "t03"] {
        expect_vm(&mut c, BASELINE, &base, vm, "shutDown", alone);
        expect_cause(&mut c, BASELINE, &base, vm, "NoExecute taint", alone);
        expect_time(&mut c, BASELINE, &base, vm, "stoppedAt", 12.0, 30.0, alone);
        expect_vm_failed(&mut c, BASELINE, &base, vm, 0..=0, alone);
    }
    expect_field(&mut c, BASELINE, &base, &["vms", "shutDown"], 3, alone);

    let first = "the slot frees at ~138 s (d01, started before the taint, is never pre-empted); the held pods' \
                 deadline is 12 + 300 = 312 s; t01 + t02 (128 s) fit before it, so they go before the drain's \
                 VMs, which have no deadline";
    for vm in ["t01", "t02"] {
        expect_vm(&mut c, EVAC, &evac, vm, "migrated", first);
        expect_vm_migrations(&mut c, EVAC, &evac, vm, 1, first);
        expect_time(&mut c, EVAC, &evac, vm, "migratedAt", 138.0, 314.0, first);
    }
    let hopeless = "t03 needs 256 s: from 138 s it cannot end before SIGTERM at 312 s nor before the guest's kill at \
                    ~357 s; it is not started (README: 'one that cannot leave in time ... is not started, with an \
                    event that says so') and dies";
    expect_vm(&mut c, EVAC, &evac, "t03", "shutDown", hopeless);
    expect_vm_failed(&mut c, EVAC, &evac, "t03", 0..=0, hopeless);
    expect_vm_migrations(&mut c, EVAC, &evac, "t03", 0, hopeless);
    let said = events_of(&evac, "t03");
    c.check(
        said.iter().any(|e| e["reason"] == "EvacuationDeferred" || e["reason"] == "EvacuationGivenUp"),
        || {
            format!(
                "{EVAC}: expected an EvacuationDeferred/EvacuationGivenUp event for t03 (the report must say why it died \
                 waiting for a slot), got {said:?} (rule: {hopeless})"
            )
        },
    );
    expect_field(&mut c, EVAC, &evac, &["vms", "shutDown"], 1, first);
    c.finish();
}

#[test]
fn back_off_is_bounded_by_the_garbage_collection() {
    let mut c = Checks::new("fidelity-backoff-gc");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let count = "each attempt fails after progressTimeout 150 s; handleMigrationBackoff doubles from 20 s per failed \
                 migration still present, and garbageCollectFinalizedMigrations keeps 5: back-off 20, 40, 80, 160, \
                 then 320 s forever: 18 failures by 7200 s (17 if each attempt took 10 s longer; 9 if the back-off \
                 kept doubling)";
    let retry = "evacuation.go: the mark stays after a failure, so a new migration is created as soon as the previous \
                 one is final (the last one waits in its back-off at the end)";
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vm(&mut c, mode, r, "stuck", "untouched", "a failed migration never moves nor stops the VM");
        expect_vm_failed(&mut c, mode, r, "stuck", 16..=18, count);
        let failed = vm_num(r, "stuck", "failedMigrations");
        expect_field(&mut c, mode, r, &["migrations", "created"], failed + 1, retry);
        expect_field(
            &mut c,
            mode,
            r,
            &["migrations", "marksCleared"],
            0,
            "an API eviction's mark is never given up",
        );
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, "a failed migration never shuts the VM down");

        // Per-attempt times, from the report's migrationTimeline.
        let tries = attempts(r, "stuck");
        c.check(tries.len() as u64 >= 16, || {
            format!(
                "{mode}: expected at least 16 attempts of stuck in the timeline, got {} (rule: {count})",
                tries.len()
            )
        });
        let expected_backoff = [20.0, 40.0, 80.0, 160.0];
        for (i, pair) in tries.windows(2).enumerate() {
            let (start, failed_at) = pair[0];
            let next_start = pair[1].0;
            let Some(failed_at) = failed_at else {
                c.check(false, || {
                    format!("{mode}: attempt {} of stuck (started {start} s) has no failure before the next start {next_start} s (rule: {count})", i + 1)
                });
                continue;
            };
            let gap = next_start - failed_at;
            let want = expected_backoff.get(i).copied().unwrap_or(320.0);
            c.check((want - 5.0..=want + 5.0).contains(&gap), || {
                format!(
                    "{mode}: back-off after failure {} of stuck (failed {failed_at} s, next start {next_start} s): {gap} s, \
                     expected {want} s +- 5 (rule: {count})",
                    i + 1
                )
            });
            c.check(gap <= 325.0, || {
                format!(
                    "{mode}: back-off after failure {} of stuck is {gap} s > 320 s (rule: {count})",
                    i + 1
                )
            });
            let span = next_start - start;
            c.check(span <= 480.0, || {
                format!(
                    "{mode}: attempts {} and {} of stuck start {span} s apart > 320 s back-off + 150 s attempt (+10) \
                     (rule: {count})",
                    i + 1,
                    i + 2
                )
            });
        }
    }
    c.finish();
}

#[test]
fn drain_taint_alone_starts_migrations() {
    let mut c = Checks::new("fidelity-drain-taint-node-handler");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let handler = "evacuation.go registers updateNode -> enqueueNode: a node with the kubevirt.io/drain:NoSchedule \
                   taint has every migratable VMI migrated at once (vmisToMigrate), no eviction needed; nothing else \
                   wakes the controller and the informers resync only after 12 h";
    let skipped =
        "filterRunningNonMigratingVMIs: None and External do not want to migrate (VMIMigratableOnEviction), \
                   LiveMigrate without LiveMigratable=True cannot; a NoSchedule taint evicts nothing";
    let lms = ["lm01", "lm02", "lm03"];
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_vms(&mut c, mode, r, &lms, "migrated", handler);
        for vm in lms {
            expect_vm_migrations(&mut c, mode, r, vm, 1, handler);
            expect_time(
                &mut c,
                mode,
                r,
                vm,
                "migratedAt",
                10.0,
                80.0,
                "third one starts when a slot frees: ~10 + 2 x 32 s",
            );
        }
        let early = lms.iter().filter(|vm| vm_time(r, vm, "migratedAt").is_some_and(|t| t <= 45.0)).count();
        c.check(early >= 2, || {
            format!(
                "{mode}: expected two of lm01..lm03 migrated by 45 s (created at ~10 s, 2 outbound per node, 32 s each), \
                 got {early}: {} (rule: {handler})",
                lms.iter().map(|vm| describe(r, vm)).collect::<Vec<_>>().join(", ")
            )
        });
        expect_vms(&mut c, mode, r, &["ext", "none", "lmnm"], "untouched", skipped);
        for vm in ["ext", "none", "lmnm"] {
            expect_vm_failed(&mut c, mode, r, vm, 0..=0, skipped);
        }
        expect_field(&mut c, mode, r, &["vms", "shutDown"], 0, skipped);
        let requests = all_eviction_requests(r);
        c.check(requests == 0, || {
            format!(
                "{mode}: expected no eviction request at all, got {requests}: {} (rule: {handler})",
                r["evictions"]
            )
        });

        let mut starts: Vec<f64> = lms.iter().filter_map(|vm| attempts(r, vm).first().map(|a| a.0)).collect();
        starts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        c.check(starts.len() == 3 && starts[1] <= 13.0, || {
            format!(
                "{mode}: expected the first two migrations of lm01..lm03 to start by 13 s (taint at 10 s), got starts {starts:?} \
                 (rule: {handler})"
            )
        });
    }
    c.finish();
}

#[test]
fn lownodeutilization_counts_a_node_at_the_threshold_as_underutilized() {
    let mut c = Checks::new("fidelity-lownodeutilization-threshold");
    let (base, evac) = c.both();
    common(&mut c, &base, &evac);
    let rule = "nodeutilization.go isNodeBelowThreshold: underutilized when usage <= threshold (node02 at 7Gi / 28Gi \
                allocatable = 25.0 %); evictPods goes on while node01 is above 50 % of 28Gi and node02 has room \
                below 50 %: 18 -> 15 -> 12Gi: two evictions";
    let hot = ["h01", "h02", "h03", "h04", "h05", "h06"];
    for (mode, r) in [(BASELINE, &base), (EVAC, &evac)] {
        expect_field(&mut c, mode, r, &["descheduler", "requests"], 2, rule);
        let first = r["descheduler"]["perCycle"].get(0).map(|p| num(&p["requests"]));
        c.check(first == Some(2), || {
            format!("{mode}: expected the first cycle to ask for 2 evictions, got {first:?} (rule: {rule})")
        });
        let moved = hot.iter().filter(|vm| outcome(r, vm) == "migrated").count();
        c.check(moved == 2, || {
            format!(
                "{mode}: expected exactly 2 of h01..h06 migrated, got {moved}: {} (rule: {rule})",
                hot.iter().map(|vm| format!("{vm}: {}", outcome(r, vm))).collect::<Vec<_>>().join(", ")
            )
        });
        expect_vm(&mut c, mode, r, "edge", "untouched", "the underutilized node's own VM is not evicted");
        expect_field(&mut c, mode, r, &["vms", "migrated"], 2, rule);
        expect_field(
            &mut c,
            mode,
            r,
            &["vms", "shutDown"],
            0,
            "a LiveMigrate VM evicted by the descheduler migrates",
        );
    }
    c.finish();
}

// --- Across every run -------------------------------------------------------------------------

/// The invariants the report offers no field for (no VMI with two unfinished migrations at once,
/// launcher pods of deleted VMIs garbage-collected, parallel limits at every instant, no migration
/// counted as succeeded whose VM did not end on its target) are reported by the simulator in
/// `invariantViolations`, which must be present and empty in every run.
#[test]
fn no_invariant_violations_in_any_run() {
    let mut failures = Vec::new();
    for name in SCENARIOS {
        for run in Run::ALL {
            let mode = run.label();
            match &*simulate(name, run.args()) {
                Err(e) => failures.push(format!("[{name}] {mode}: no report: {e}")),
                Ok(report) => {
                    failures.extend(invariant_violations(mode, report).map(|m| format!("[{name}] {m}")))
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} run(s) with invariant violations:\n  - {}\n",
        failures.len(),
        failures.join("\n  - ")
    );
}

/// Every file of `tests/adversarial/` is one of the scenarios above.
#[test]
fn every_adversarial_scenario_is_run() {
    // The hold's scenarios (`hold-*`) are run by tests/adversarial_hold.rs.
    let mut files: Vec<String> = std::fs::read_dir(repo_root().join("tests/adversarial"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".yaml").map(str::to_owned))
        .filter(|name| !name.starts_with("hold-"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = SCENARIOS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed);
}
