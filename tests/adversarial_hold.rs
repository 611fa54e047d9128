//! Adversarial scenarios of evac's launcher hold (`tests/adversarial/hold-*.yaml`): each runs four
//! times, with KubeVirt alone and with evac (`evac simulate --json [--evac]`), each under a stock
//! virt-handler (the guest is shut down about a second after its launcher pod's SIGTERM, unless its
//! migration is already running) and under the proposals' virt-handler (the guest runs until
//! SIGKILL): `--virt-handler stock|proposal`.
//!
//! The expected outcomes were derived from the upstream rules (KubeVirt v1.9, Kubernetes 1.32; see
//! the comment block at the top of each scenario file) and from evac's documented design before any
//! of them was run; they are not adjusted to what the implementation does.
//!
//! Each test collects every failed expectation of its scenario and fails once, listing them all;
//! each message names the scenario, the run (KubeVirt alone or evac, and the virt-handler), the VM
//! and the rule. Every run is also checked for: an empty `invariantViolations`, the parallel limits
//! (`migrations.maxRunningInCluster` / `maxRunningFromANode` against the scenario's), the
//! virt-handler the report names, no hold at all without evac, no hold longer than its 300 s window
//! with evac, and evac never ending with more VMs shut down than KubeVirt alone under the same
//! virt-handler.

use std::fmt;

use evac_e2e::report::{outcome, row, rows, shut_down, vm_time};
use evac_e2e::scenarios::{
    expect_field, expect_time, expect_vm, invariant_violations, norm, run_invariants, simulate, Checks,
};
use serde_json::Value;

/// Slack allowed on durations that should be "at once" (the kubelet looks at a held pod every 1 s).
const AT_ONCE: f64 = 2.0;
/// evac's hold window (launcher-hold), plus the kubelet's 1 s look.
const WINDOW: f64 = 302.0;

// --- Runs -------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Handler {
    Stock,
    Proposal,
}

impl Handler {
    const ALL: [Handler; 2] = [Handler::Stock, Handler::Proposal];

    fn name(self) -> &'static str {
        match self {
            Handler::Stock => "stock",
            Handler::Proposal => "proposal",
        }
    }
}

/// A run of a scenario: with evac or not, under which virt-handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Run {
    evac: bool,
    handler: Handler,
}

const ALONE_STOCK: Run = Run { evac: false, handler: Handler::Stock };
const ALONE_PROPOSAL: Run = Run { evac: false, handler: Handler::Proposal };
const EVAC_STOCK: Run = Run { evac: true, handler: Handler::Stock };
const EVAC_PROPOSAL: Run = Run { evac: true, handler: Handler::Proposal };
const RUNS: [Run; 4] = [ALONE_STOCK, ALONE_PROPOSAL, EVAC_STOCK, EVAC_PROPOSAL];

impl Run {
    fn args(self) -> Vec<&'static str> {
        let mut args = Vec::new();
        if self.evac {
            args.push("--evac");
        }
        args.push("--virt-handler");
        args.push(self.handler.name());
        args
    }

    fn label(self) -> String {
        let who = if self.evac { "evac" } else { "KubeVirt alone" };
        format!("{who} (virt-handler {})", self.handler.name())
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

// --- Collected checks -------------------------------------------------------------------------

/// Every run's report that could be had.
struct Reports(Vec<(Run, Value)>);

impl Reports {
    fn get(&self, run: Run) -> Option<&Value> {
        self.0.iter().find(|(r, _)| *r == run).map(|(_, v)| v)
    }
}

/// The runs of a scenario these tests read.
trait Runs {
    /// The four runs' reports, with the checks every run gets; a run that fails is reported and
    /// left out (the other runs are still checked).
    fn runs(&mut self) -> Reports;
}

impl Runs for Checks {
    fn runs(&mut self) -> Reports {
        let mut reports = Vec::new();
        for run in RUNS {
            match &*simulate(self.scenario(), &run.args()) {
                Ok(report) => reports.push((run, report.clone())),
                Err(err) => self.fail(format!(
                    "{}: the simulation must run to its end and report (rule: nothing in a scenario may stop the \
                     simulation): {err}",
                    run.label()
                )),
            }
        }
        let reports = Reports(reports);
        for (run, report) in &reports.0 {
            hold_invariants(self, *run, report);
        }
        for handler in Handler::ALL {
            let base = reports.get(Run { evac: false, handler });
            let evac = reports.get(Run { evac: true, handler });
            if let (Some(b), Some(e)) = (base, evac) {
                let (b, e) = (shut_down(b), shut_down(e));
                self.check(e <= b, || {
                    format!(
                        "evac (virt-handler {}) shut down {e} VM(s), KubeVirt alone {b} (rule: evac must never end \
                         with more VMs shut down than KubeVirt alone with the same virt-handler)",
                        handler.name()
                    )
                });
            }
        }
        reports
    }
}

// --- Report accessors -------------------------------------------------------------------------

/// The report's holds of the VM's launcher pods, earliest first.
fn holds_of(report: &Value, vm: &str) -> Vec<Value> {
    let full = format!("default/{vm}");
    let mut holds: Vec<Value> = report["holds"]
        .as_array()
        .map(|all| all.iter().filter(|h| h["vm"] == full.as_str() || h["vm"] == vm).cloned().collect())
        .unwrap_or_default();
    holds.sort_by(|a, b| {
        let (a, b) = (a["startedAt"].as_f64().unwrap_or(0.0), b["startedAt"].as_f64().unwrap_or(0.0));
        a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal)
    });
    holds
}

fn hold_span(hold: &Value) -> Option<(f64, f64)> {
    Some((hold["startedAt"].as_f64()?, hold["endedAt"].as_f64()?))
}

// --- Expectations -----------------------------------------------------------------------------

fn expect_node_after_not(c: &mut Checks, run: Run, report: &Value, vm: &str, node: &str, rule: &str) {
    let got = row(report, vm).map(|r| r["nodeAfter"].clone());
    c.check(got.as_ref().is_some_and(|n| n.is_string() && n != node), || {
        format!("{}: VM {vm}: expected to end off {node}, got {got:?} (rule: {rule})", run.label())
    });
}

/// How many of `vms` ended with `expected` as their outcome.
fn count_outcome(report: &Value, vms: &[&str], expected: &str) -> usize {
    vms.iter().filter(|vm| norm(&outcome(report, vm)) == norm(expected)).count()
}

fn expect_outcome_count(
    c: &mut Checks,
    run: Run,
    report: &Value,
    vms: &[&str],
    expected: &str,
    n: usize,
    rule: &str,
) {
    let got = count_outcome(report, vms, expected);
    c.check(got == n, || {
        let all: Vec<String> = vms.iter().map(|vm| format!("{vm}: {}", outcome(report, vm))).collect();
        format!(
            "{}: expected {n} of {vms:?} {expected}, got {got} ({}) (rule: {rule})",
            run.label(),
            all.join(", ")
        )
    });
}

/// The VM's pod was held: its first hold started within `start`, ended within `end`, with
/// `reason` when given.
#[allow(clippy::too_many_arguments)]
fn expect_held(
    c: &mut Checks,
    run: Run,
    report: &Value,
    vm: &str,
    reason: Option<&str>,
    start: (f64, f64),
    end: (f64, f64),
    rule: &str,
) {
    let mode = run.label();
    let holds = holds_of(report, vm);
    let Some(hold) = holds.first() else {
        c.fail(format!(
            "{mode}: VM {vm}: expected its launcher pod to be held, no hold in the report (rule: {rule})"
        ));
        return;
    };
    let span = hold_span(hold);
    c.check(
        span.is_some_and(|(s, e)| (start.0..=start.1).contains(&s) && (end.0..=end.1).contains(&e)),
        || {
            format!(
                "{mode}: VM {vm}: expected a hold from {}..{} s to {}..{} s, got {hold} (rule: {rule})",
                start.0, start.1, end.0, end.1
            )
        },
    );
    if let Some(reason) = reason {
        c.check(hold["reason"] == reason, || {
            format!(
                "{mode}: VM {vm}: expected the hold to end with reason {reason:?}, got {hold} (rule: {rule})"
            )
        });
    }
    if let (Some(r), Some((_, e))) = (row(report, vm), span) {
        c.check(r["heldUntil"].as_f64().is_some_and(|h| (h - e).abs() <= AT_ONCE), || {
            format!("{mode}: VM {vm}: heldUntil does not match its hold's end {e}: {r} (rule: {rule})")
        });
    }
}

/// The VM's hold ended because its migration succeeded, when it did.
fn expect_hold_ends_with_migration(c: &mut Checks, run: Run, report: &Value, vm: &str, rule: &str) {
    let mode = run.label();
    let holds = holds_of(report, vm);
    let Some(hold) = holds.first() else {
        c.fail(format!(
            "{mode}: VM {vm}: expected its launcher pod to be held until it migrated, no hold (rule: {rule})"
        ));
        return;
    };
    c.check(hold["reason"] == "migrated", || {
        format!("{mode}: VM {vm}: expected the hold to end \"migrated\", got {hold} (rule: {rule})")
    });
    let migrated = vm_time(report, vm, "migratedAt");
    let ended = hold["endedAt"].as_f64();
    c.check(matches!((migrated, ended), (Some(m), Some(e)) if (e - m).abs() <= 3.0), || {
        format!(
            "{mode}: VM {vm}: expected the hold to end when the migration succeeded (migratedAt {migrated:?}), got \
             {hold} (rule: {rule})"
        )
    });
}

/// The VM's pod was not held: any hold the report lists for it was answered within `max` seconds
/// (with `reason` when given), and the row's `heldUntil` says no more.
fn expect_not_held(
    c: &mut Checks,
    run: Run,
    report: &Value,
    vm: &str,
    max: f64,
    reason: Option<&str>,
    rule: &str,
) {
    let mode = run.label();
    let holds = holds_of(report, vm);
    for hold in &holds {
        let span = hold_span(hold);
        c.check(span.is_some_and(|(s, e)| e - s <= max), || {
            format!("{mode}: VM {vm}: expected no hold longer than {max} s, got {hold} (rule: {rule})")
        });
        if let Some(reason) = reason {
            c.check(hold["reason"] == reason, || {
                format!(
                    "{mode}: VM {vm}: expected an immediate answer with reason {reason:?}, got {hold} \
                     (rule: {rule})"
                )
            });
        }
    }
    // heldUntil: null, or the end of one of the (short) holds above; with no hold listed, at most
    // `max` after the disruption. (A pod may be deleted after the disruption, as a deleted VMI's pod
    // is by garbage collection, so a hold is timed from its own start.)
    if let Some(r) = row(report, vm) {
        if let Some(h) = r["heldUntil"].as_f64() {
            let ok = if holds.is_empty() {
                r["disruptedAt"].as_f64().is_some_and(|d| h - d <= max + AT_ONCE)
            } else {
                holds.iter().filter_map(hold_span).any(|(_, e)| (h - e).abs() <= AT_ONCE)
            };
            c.check(ok, || {
                format!(
                    "{mode}: VM {vm}: expected not held (heldUntil null or at once), got {r} (rule: {rule})"
                )
            });
        }
    }
}

/// No hold at all in the run.
fn expect_no_holds(c: &mut Checks, run: Run, report: &Value, rule: &str) {
    let holds = report["holds"].as_array().cloned().unwrap_or_default();
    c.check(holds.is_empty(), || {
        format!("{}: expected no hold, got {} (rule: {rule})", run.label(), Value::Array(holds.clone()))
    });
    for r in rows(report) {
        c.check(r["heldUntil"].is_null(), || {
            format!("{}: VM {}: expected heldUntil null, got {r} (rule: {rule})", run.label(), r["vm"])
        });
    }
}

/// The scenario's one preemptor bound, after waiting within `[lo, hi]` seconds.
fn expect_preemptor_wait(c: &mut Checks, run: Run, report: &Value, lo: f64, hi: f64, rule: &str) {
    let mode = run.label();
    let Some(p) = report["preemptors"].as_array().and_then(|all| all.first()).cloned() else {
        c.fail(format!("{mode}: expected a preemptor in the report's preemptors, none (rule: {rule})"));
        return;
    };
    c.check(p["boundAt"].as_f64().is_some(), || {
        format!("{mode}: the preemptor never bound: {p} (rule: {rule})")
    });
    let waited = p["waitedSeconds"].as_f64();
    c.check(waited.is_some_and(|w| (lo..=hi).contains(&w)), || {
        format!("{mode}: expected the preemptor to wait {lo}..{hi} s, got {p} (rule: {rule})")
    });
}

/// The invariants every run must keep, as far as the report shows them.
fn hold_invariants(c: &mut Checks, run: Run, report: &Value) {
    let mode = run.label();
    if let Some(failure) = invariant_violations(&mode, report) {
        c.fail(failure);
    }
    run_invariants(c, &mode, report);
    c.check(report["virtHandler"] == run.handler.name(), || {
        format!(
            "{mode}: the report says virtHandler {}, the run asked for {} (rule: --virt-handler)",
            report["virtHandler"],
            run.handler.name()
        )
    });
    if !run.evac {
        expect_no_holds(c, run, report, "without evac no launcher pod has evac's preStop hook");
    } else {
        for hold in report["holds"].as_array().cloned().unwrap_or_default() {
            let span = hold_span(&hold);
            c.check(span.is_some_and(|(s, e)| e >= s && e - s <= WINDOW), || {
                format!(
                    "{mode}: hold {hold} did not end within its window (rule: a hold ends at the latest 300 s after \
                     it began)"
                )
            });
        }
    }
}

// --- The scenarios ----------------------------------------------------------------------------

const A4: [&str; 4] = ["a01", "a02", "a03", "a04"];

#[test]
fn hold_preemption_saved() {
    let mut c = Checks::new("hold-preemption-saved");
    let reports = c.runs();
    if let Some(r) = reports.get(ALONE_STOCK) {
        let rule =
            "preemption deletes the pod (no eviction API); a stock virt-handler shuts the guest down ~1 s \
                    after SIGTERM, off 5 s later";
        for vm in A4 {
            expect_vm(&mut c, ALONE_STOCK, r, vm, "shut down", rule);
            expect_time(&mut c, ALONE_STOCK, r, vm, "stoppedAt", 20.0, 35.0, rule);
        }
        expect_preemptor_wait(
            &mut c,
            ALONE_STOCK,
            r,
            0.0,
            15.0,
            "the preemptor binds once the victims are gone",
        );
        expect_field(
            &mut c,
            ALONE_STOCK,
            r,
            &["migrations", "created"],
            0,
            "KubeVirt has no preemption cause",
        );
    }
    if let Some(r) = reports.get(ALONE_PROPOSAL) {
        let rule =
            "the proposals' virt-handler keeps the guest until SIGKILL at the end of the 60 s pod grace";
        for vm in A4 {
            expect_vm(&mut c, ALONE_PROPOSAL, r, vm, "shut down", rule);
            expect_time(&mut c, ALONE_PROPOSAL, r, vm, "stoppedAt", 75.0, 90.0, rule);
        }
        expect_preemptor_wait(&mut c, ALONE_PROPOSAL, r, 55.0, 72.0, rule);
        expect_field(
            &mut c,
            ALONE_PROPOSAL,
            r,
            &["migrations", "created"],
            0,
            "KubeVirt has no preemption cause",
        );
    }
    for run in [EVAC_STOCK, EVAC_PROPOSAL] {
        let Some(r) = reports.get(run) else { continue };
        let rule =
            "held from the deletion (preStop, 360 s grace); two 64 s migrations at a time end at ~84 and \
                    ~148 s, before the 320 s deadline; the hold ends when the VM has migrated";
        for vm in A4 {
            expect_vm(&mut c, run, r, vm, "migrated", rule);
            expect_time(&mut c, run, r, vm, "migratedAt", 60.0, 180.0, rule);
            expect_held(&mut c, run, r, vm, Some("migrated"), (18.0, 30.0), (60.0, 182.0), rule);
            expect_hold_ends_with_migration(&mut c, run, r, vm, rule);
        }
        expect_field(&mut c, run, r, &["migrations", "created"], 4, rule);
        expect_field(&mut c, run, r, &["migrations", "succeeded"], 4, rule);
        expect_field(&mut c, run, r, &["migrations", "failed"], 0, rule);
        expect_field(&mut c, run, r, &["vms", "shutDown"], 0, rule);
        expect_preemptor_wait(
            &mut c,
            run,
            r,
            110.0,
            160.0,
            "the preemptor binds when the last source pod is gone (~150 s): bounded by the hold",
        );
    }
    c.finish();
}

#[test]
fn hold_preemption_no_room() {
    let mut c = Checks::new("hold-preemption-no-room");
    let reports = c.runs();
    let victims = ["v01", "v02"];
    let fillers = ["f01", "f02", "f03"];
    for run in RUNS {
        let Some(r) = reports.get(run) else { continue };
        for vm in fillers {
            expect_vm(&mut c, run, r, vm, "untouched", "nothing disrupts node02's VMs");
        }
        expect_field(
            &mut c,
            run,
            r,
            &["migrations", "created"],
            0,
            "no node has room for an 8Gi VM (node02: 4Gi allocatable free); KubeVirt alone has no cause",
        );
    }
    if let Some(r) = reports.get(ALONE_STOCK) {
        let rule = "stock virt-handler: the guest is shut down at SIGTERM";
        for vm in victims {
            expect_vm(&mut c, ALONE_STOCK, r, vm, "shut down", rule);
            expect_time(&mut c, ALONE_STOCK, r, vm, "stoppedAt", 20.0, 35.0, rule);
        }
        expect_preemptor_wait(&mut c, ALONE_STOCK, r, 0.0, 15.0, rule);
    }
    if let Some(r) = reports.get(ALONE_PROPOSAL) {
        let rule = "proposal virt-handler: the guest runs until SIGKILL at the end of the 60 s grace";
        for vm in victims {
            expect_vm(&mut c, ALONE_PROPOSAL, r, vm, "shut down", rule);
            expect_time(&mut c, ALONE_PROPOSAL, r, vm, "stoppedAt", 75.0, 90.0, rule);
        }
        expect_preemptor_wait(&mut c, ALONE_PROPOSAL, r, 55.0, 72.0, rule);
    }
    let given_up = "no other node has room: evac's evacuation decision gives up and the hold ends at once";
    if let Some(r) = reports.get(EVAC_STOCK) {
        for vm in victims {
            expect_held(&mut c, EVAC_STOCK, r, vm, Some("given-up"), (18.0, 30.0), (18.0, 40.0), given_up);
            expect_not_held(&mut c, EVAC_STOCK, r, vm, 10.0, Some("given-up"), given_up);
            let rule =
                "after the hold, SIGTERM: a stock virt-handler shuts the guest down, as with KubeVirt alone";
            expect_vm(&mut c, EVAC_STOCK, r, vm, "shut down", rule);
            expect_time(&mut c, EVAC_STOCK, r, vm, "stoppedAt", 20.0, 40.0, rule);
        }
        expect_preemptor_wait(
            &mut c,
            EVAC_STOCK,
            r,
            0.0,
            25.0,
            "a hold given up at once does not delay the preemptor",
        );
    }
    if let Some(r) = reports.get(EVAC_PROPOSAL) {
        for vm in victims {
            expect_held(&mut c, EVAC_PROPOSAL, r, vm, Some("given-up"), (18.0, 30.0), (18.0, 40.0), given_up);
            expect_not_held(&mut c, EVAC_PROPOSAL, r, vm, 10.0, Some("given-up"), given_up);
            let rule =
                "after the hold, SIGTERM does not stop the guest: SIGKILL at the end of evac's 360 s grace";
            expect_vm(&mut c, EVAC_PROPOSAL, r, vm, "shut down", rule);
            expect_time(&mut c, EVAC_PROPOSAL, r, vm, "stoppedAt", 375.0, 392.0, rule);
        }
        expect_preemptor_wait(
            &mut c,
            EVAC_PROPOSAL,
            r,
            350.0,
            372.0,
            "the wait is bounded by the pod's grace period, 360 s with evac's launcher-hold",
        );
    }
    c.finish();
}

#[test]
fn hold_critical_preemptor() {
    let mut c = Checks::new("hold-critical-preemptor");
    let reports = c.runs();
    for run in [ALONE_STOCK, ALONE_PROPOSAL, EVAC_STOCK] {
        let Some(r) = reports.get(run) else { continue };
        expect_field(
            &mut c,
            run,
            r,
            &["migrations", "created"],
            0,
            "a system-critical preemption is not held: under a stock virt-handler its SIGTERM comes at once, \
             and a migration started after it saves nothing",
        );
    }
    if let Some(r) = reports.get(ALONE_STOCK) {
        for vm in A4 {
            expect_vm(&mut c, ALONE_STOCK, r, vm, "shut down", "stock: shut down at SIGTERM");
            expect_time(&mut c, ALONE_STOCK, r, vm, "stoppedAt", 20.0, 35.0, "stock: shut down at SIGTERM");
        }
        expect_preemptor_wait(&mut c, ALONE_STOCK, r, 0.0, 15.0, "the victims are gone within seconds");
    }
    if let Some(r) = reports.get(ALONE_PROPOSAL) {
        for vm in A4 {
            expect_vm(
                &mut c,
                ALONE_PROPOSAL,
                r,
                vm,
                "shut down",
                "proposal: SIGKILL at the end of the 60 s grace",
            );
            expect_time(&mut c, ALONE_PROPOSAL, r, vm, "stoppedAt", 75.0, 90.0, "proposal: SIGKILL at 80 s");
        }
        expect_preemptor_wait(&mut c, ALONE_PROPOSAL, r, 55.0, 72.0, "the victims' 60 s grace");
    }
    let not_held =
        "a preemptor of priority >= 2000000000 (hold.preemptorPriority): the hook is answered at once";
    if let Some(r) = reports.get(EVAC_STOCK) {
        for vm in A4 {
            expect_not_held(&mut c, EVAC_STOCK, r, vm, AT_ONCE, Some("critical-preemptor"), not_held);
            expect_vm(&mut c, EVAC_STOCK, r, vm, "shut down", "not held: as with KubeVirt alone");
            expect_time(&mut c, EVAC_STOCK, r, vm, "stoppedAt", 20.0, 35.0, "not held: SIGTERM at ~20 s");
        }
        expect_preemptor_wait(
            &mut c,
            EVAC_STOCK,
            r,
            0.0,
            20.0,
            "not held: the critical preemptor is not delayed",
        );
    }
    if let Some(r) = reports.get(EVAC_PROPOSAL) {
        // Revised after the first run, from the proposals' own rule (seed 000, `shouldEvacuateVMI`:
        // the proposals' virt-handler does not shut down at SIGTERM a VM it should evacuate; VEP 55
        // evacuates a preempted VM behind PreemptionEvictionLiveMigration, which is on): the hold
        // is not what keeps these VMs alive, the proposals' virt-handler is, and the preemption's
        // evacuation is asked for as for any other. Not held, and migrated within the grace.
        for vm in A4 {
            expect_not_held(&mut c, EVAC_PROPOSAL, r, vm, AT_ONCE, Some("critical-preemptor"), not_held);
            let rule = "not held; the proposals' virt-handler keeps the guest through SIGTERM, and the \
                        preemption's evacuation (gate on) migrates it two at a time (~64 s each)";
            expect_vm(&mut c, EVAC_PROPOSAL, r, vm, "migrated", rule);
            expect_time(&mut c, EVAC_PROPOSAL, r, vm, "migratedAt", 60.0, 200.0, rule);
        }
        expect_preemptor_wait(
            &mut c,
            EVAC_PROPOSAL,
            r,
            40.0,
            200.0,
            "the victims' pods are gone when their VMs have migrated away (virt-launcher exits)",
        );
    }
    c.finish();
}

#[test]
fn hold_taint_saved() {
    let mut c = Checks::new("hold-taint-saved");
    let reports = c.runs();
    let once = ["t01", "t02", "t03"];
    for (run, lo, hi) in [(ALONE_STOCK, 20.0, 35.0), (ALONE_PROPOSAL, 75.0, 90.0)] {
        let Some(r) = reports.get(run) else { continue };
        let rule = "the taint manager deletes (no eviction API); KubeVirt alone lets the VM stop";
        for vm in once {
            expect_vm(&mut c, run, r, vm, "shut down", rule);
            expect_time(&mut c, run, r, vm, "stoppedAt", lo, hi, rule);
        }
        let always =
            "runStrategy Always: the VM controller starts a stopped VM again, not on the tainted node01";
        expect_vm(&mut c, run, r, "always", "restarted", always);
        expect_node_after_not(&mut c, run, r, "always", "node01", always);
        expect_field(&mut c, run, r, &["migrations", "created"], 0, rule);
    }
    for run in [EVAC_STOCK, EVAC_PROPOSAL] {
        let Some(r) = reports.get(run) else { continue };
        let rule =
            "NoExecuteTaintEvictionLiveMigration: held from the deletion at 20 s; two 64 s migrations at a \
                    time end at ~84 and ~148 s, before the 320 s deadline";
        for vm in ["t01", "t02", "t03", "always"] {
            expect_vm(&mut c, run, r, vm, "migrated", rule);
            expect_time(&mut c, run, r, vm, "migratedAt", 60.0, 180.0, rule);
            expect_held(&mut c, run, r, vm, Some("migrated"), (18.0, 30.0), (60.0, 182.0), rule);
            expect_hold_ends_with_migration(&mut c, run, r, vm, rule);
        }
        expect_field(&mut c, run, r, &["migrations", "succeeded"], 4, rule);
        expect_field(&mut c, run, r, &["migrations", "failed"], 0, rule);
        expect_field(&mut c, run, r, &["vms", "shutDown"], 0, rule);
        expect_field(
            &mut c,
            run,
            r,
            &["vms", "restarted"],
            0,
            "a migrated VM never stops: nothing to restart",
        );
    }
    c.finish();
}

#[test]
fn hold_node_down() {
    let mut c = Checks::new("hold-node-down");
    let reports = c.runs();
    for run in RUNS {
        let Some(r) = reports.get(run) else { continue };
        let dead = "a node that dies takes its VMs with it at once; no kubelet runs a preStop hook there";
        for vm in ["d01", "d02"] {
            expect_vm(&mut c, run, r, vm, "shut down", dead);
            expect_time(&mut c, run, r, vm, "stoppedAt", 19.0, 22.0, dead);
        }
        expect_vm(&mut c, run, r, "by", "untouched", "node02 is not disrupted");
        if run.evac {
            // (Runs without evac are checked for holds by run_invariants.)
            expect_no_holds(&mut c, run, r, dead);
        }
        expect_field(
            &mut c,
            run,
            r,
            &["migrations", "created"],
            0,
            "a disruption on a node that is gone or not Ready is not taken (evac); KubeVirt has no cause; the \
             unreachable taint's 300 s toleration deletes the pods at ~320 s, and they stay Terminating",
        );
        expect_field(&mut c, run, r, &["vms", "shutDown"], 2, dead);
    }
    c.finish();
}

#[test]
fn hold_user_delete() {
    let mut c = Checks::new("hold-user-delete");
    let reports = c.runs();
    let not_taken =
        "a user's pod delete and a VMI deletion are not taken: answered at once, nothing migrates";
    for run in RUNS {
        let Some(r) = reports.get(run) else { continue };
        for vm in ["upod", "ualways", "uvmi"] {
            expect_not_held(&mut c, run, r, vm, AT_ONCE, None, not_taken);
        }
        expect_vm(
            &mut c,
            run,
            r,
            "upod",
            "shut down",
            "its launcher pod deleted: the VM stops (runStrategy Once)",
        );
        expect_vm(
            &mut c,
            run,
            r,
            "ualways",
            "restarted",
            "its launcher pod deleted: runStrategy Always starts it again",
        );
        let deletion = "a VMI with a deletionTimestamp: virt-handler shuts the domain down for the deletion \
                        (vm.go sync), whatever the virt-handler does at SIGTERM";
        expect_vm(&mut c, run, r, "uvmi", "shut down", deletion);
        expect_time(&mut c, run, r, "uvmi", "stoppedAt", 20.0, 35.0, deletion);
        expect_vm(&mut c, run, r, "by", "untouched", "nothing disrupts node02");
        expect_field(&mut c, run, r, &["migrations", "created"], 0, not_taken);
        expect_field(&mut c, run, r, &["vms", "shutDown"], 2, "upod and uvmi");
    }
    for (run, lo, hi, rule) in [
        (ALONE_STOCK, 20.0, 35.0, "stock: the guest is shut down ~1 s after SIGTERM, off 5 s later"),
        (ALONE_PROPOSAL, 75.0, 90.0, "proposal: SIGKILL at the end of the 60 s grace"),
        (EVAC_STOCK, 20.0, 35.0, "not held: SIGTERM at once; stock: shut down"),
        (
            EVAC_PROPOSAL,
            375.0,
            392.0,
            "not held, but a user's delete uses the pod's grace, which evac's launcher-hold raised to 360 s; the \
             proposal virt-handler keeps the guest until SIGKILL",
        ),
    ] {
        let Some(r) = reports.get(run) else { continue };
        expect_time(&mut c, run, r, "upod", "stoppedAt", lo, hi, rule);
    }
    c.finish();
}

#[test]
fn hold_endpoint_restart() {
    let mut c = Checks::new("hold-endpoint-restart");
    let reports = c.runs();
    let vms = ["r01", "r02", "r03", "r04", "r05"];
    for (run, lo, hi) in [(ALONE_STOCK, 20.0, 35.0), (ALONE_PROPOSAL, 75.0, 90.0)] {
        let Some(r) = reports.get(run) else { continue };
        let rule =
            "the taint manager deletes; KubeVirt alone lets the VMs stop (the hold endpoint's restart is \
                    evac's only)";
        for vm in vms {
            expect_vm(&mut c, run, r, vm, "shut down", rule);
            expect_time(&mut c, run, r, vm, "stoppedAt", lo, hi, rule);
        }
    }
    let reset = "the restart at 60 s resets every hold of node01: each hook ends then (not \"migrated\")";
    for run in [EVAC_STOCK, EVAC_PROPOSAL] {
        let Some(r) = reports.get(run) else { continue };
        for vm in vms {
            let first = holds_of(r, vm).first().cloned();
            let span = first.as_ref().and_then(hold_span);
            let cut = span.is_some_and(|(s, e)| (18.0..=30.0).contains(&s) && (59.0..=64.0).contains(&e));
            c.check(cut, || {
                format!(
                    "{}: VM {vm}: expected a hold from ~20 s cut at the reset (~60 s), got {first:?} (rule: {reset})",
                    run.label()
                )
            });
            c.check(first.as_ref().is_some_and(|h| h["reason"] != "migrated"), || {
                format!(
                    "{}: VM {vm}: expected the hold to end by the reset, got {first:?} (rule: {reset})",
                    run.label()
                )
            });
        }
    }
    if let Some(r) = reports.get(EVAC_STOCK) {
        let rule = "stock: at the reset's SIGTERM virt-handler ignores a VMI whose migration is Running \
                    (vm.go \"migration is in progress\"; virt-launcher's kill at 60 + 45 = 105 s comes after \
                    the ~84 s end); the three whose migration was not Running are shut down ~1 s later, as with \
                    KubeVirt alone";
        expect_outcome_count(&mut c, EVAC_STOCK, r, &vms, "migrated", 2, rule);
        expect_outcome_count(&mut c, EVAC_STOCK, r, &vms, "shut down", 3, rule);
        for vm in vms {
            match norm(&outcome(r, vm)).as_str() {
                "migrated" => expect_time(&mut c, EVAC_STOCK, r, vm, "migratedAt", 60.0, 105.0, rule),
                "shutdown" => expect_time(&mut c, EVAC_STOCK, r, vm, "stoppedAt", 60.0, 75.0, rule),
                _ => {}
            }
        }
        expect_field(&mut c, EVAC_STOCK, r, &["migrations", "succeeded"], 2, rule);
    }
    if let Some(r) = reports.get(EVAC_PROPOSAL) {
        let rule =
            "proposal: the reset's SIGTERM does not stop the guests (SIGKILL at ~380 s); evac's controller \
                    goes on: rounds end at ~84, ~148 and ~212 s";
        for vm in vms {
            expect_vm(&mut c, EVAC_PROPOSAL, r, vm, "migrated", rule);
            expect_time(&mut c, EVAC_PROPOSAL, r, vm, "migratedAt", 60.0, 250.0, rule);
        }
        expect_field(&mut c, EVAC_PROPOSAL, r, &["migrations", "succeeded"], 5, rule);
        expect_field(&mut c, EVAC_PROPOSAL, r, &["vms", "shutDown"], 0, rule);
    }
    c.finish();
}

/// Soft node pressure with evictionMaxPodGracePeriod 300: the grace the kubelet grants is long
/// enough for the hold to save the VM (its twin with 0 is `hold_pressure_maxgrace0`).
#[test]
fn hold_pressure_maxgrace300() {
    let scenario = "hold-pressure-maxgrace300";
    let alone_proposal_stop = (315.0, 335.0);
    let grace_rule =
        "a soft eviction's grace is min(evictionMaxPodGracePeriod 300, the pod's 630) = 300 s; the \
                      proposal virt-handler keeps the guest until SIGKILL at ~320 s";
    let mut c = Checks::new(scenario);
    let reports = c.runs();
    for run in RUNS {
        let Some(r) = reports.get(run) else { continue };
        expect_vm(
            &mut c,
            run,
            r,
            "p2",
            "untouched",
            "one eviction relieves node01 (10240Mi available after p1): the kubelet evicts only p1, the lowest \
             priority; evac's fewest VMs covering the 2476Mi gap are {p1}",
        );
    }
    if let Some(r) = reports.get(ALONE_STOCK) {
        let rule =
            "soft threshold with a 0 s soft grace: the kubelet stops p1 at once; stock: shut down at SIGTERM";
        expect_vm(&mut c, ALONE_STOCK, r, "p1", "shut down", rule);
        expect_time(&mut c, ALONE_STOCK, r, "p1", "stoppedAt", 20.0, 40.0, rule);
        expect_field(
            &mut c,
            ALONE_STOCK,
            r,
            &["migrations", "created"],
            0,
            "node pressure is no cause for KubeVirt",
        );
    }
    if let Some(r) = reports.get(ALONE_PROPOSAL) {
        expect_vm(&mut c, ALONE_PROPOSAL, r, "p1", "shut down", grace_rule);
        expect_time(
            &mut c,
            ALONE_PROPOSAL,
            r,
            "p1",
            "stoppedAt",
            alone_proposal_stop.0,
            alone_proposal_stop.1,
            grace_rule,
        );
        expect_field(
            &mut c,
            ALONE_PROPOSAL,
            r,
            &["migrations", "created"],
            0,
            "node pressure is no cause for KubeVirt",
        );
    }
    for run in [EVAC_STOCK, EVAC_PROPOSAL] {
        let Some(r) = reports.get(run) else { continue };
        let rule =
            "the kubelet's stop of p1 is held as node pressure (MemoryPressure); the preStop hook may last \
                    the kubelet's effective grace, evac's window 300 s; p1's ~241 s migration ends at ~261 s";
        expect_vm(&mut c, run, r, "p1", "migrated", rule);
        expect_time(&mut c, run, r, "p1", "migratedAt", 250.0, 300.0, rule);
        expect_held(&mut c, run, r, "p1", Some("migrated"), (18.0, 36.0), (250.0, 302.0), rule);
        expect_hold_ends_with_migration(&mut c, run, r, "p1", rule);
        expect_field(&mut c, run, r, &["migrations", "succeeded"], 1, rule);
        expect_field(&mut c, run, r, &["vms", "shutDown"], 0, rule);
    }
    c.finish();
}

#[test]
fn hold_pressure_maxgrace0() {
    let mut c = Checks::new("hold-pressure-maxgrace0");
    let reports = c.runs();
    let grace = "a soft eviction with evictionMaxPodGracePeriod 0 passes an override of 0; pod_workers.go \
                 calculateEffectiveGracePeriod takes it (overridden) and raises it to 1 s, so the kubelet's SIGKILL \
                 comes ~2 s after it begins, whatever the pod's own grace";
    for run in RUNS {
        let Some(r) = reports.get(run) else { continue };
        expect_vm(&mut c, run, r, "p2", "untouched", "the kubelet evicts only p1, the lowest priority");
        expect_vm(&mut c, run, r, "p1", "shut down", grace);
        expect_time(&mut c, run, r, "p1", "stoppedAt", 20.0, 26.0, grace);
        expect_field(&mut c, run, r, &["migrations", "succeeded"], 0, grace);
        expect_field(&mut c, run, r, &["vms", "shutDown"], 1, grace);
    }
    for run in [EVAC_STOCK, EVAC_PROPOSAL] {
        let Some(r) = reports.get(run) else { continue };
        let cut = "the kubelet cuts the preStop hook at the end of the 1 s grace: no hold can outlast it";
        expect_not_held(&mut c, run, r, "p1", 3.0, None, cut);
    }
    c.finish();
}

#[test]
fn hold_pressure_hard() {
    let mut c = Checks::new("hold-pressure-hard");
    let reports = c.runs();
    for run in [ALONE_STOCK, ALONE_PROPOSAL] {
        let Some(r) = reports.get(run) else { continue };
        let rule = "no threshold is met at 20 s; at 200 s the hard threshold evicts h1 (lowest priority) with a 1 s \
                    grace, then h2 once h1 is gone";
        expect_vm(&mut c, run, r, "h1", "shut down", rule);
        expect_time(&mut c, run, r, "h1", "stoppedAt", 200.0, 212.0, rule);
        expect_vm(&mut c, run, r, "h2", "shut down", rule);
        expect_time(&mut c, run, r, "h2", "stoppedAt", 200.0, 240.0, rule);
        expect_field(&mut c, run, r, &["migrations", "created"], 0, "node pressure is no cause for KubeVirt");
    }
    for run in [EVAC_STOCK, EVAC_PROPOSAL] {
        let Some(r) = reports.get(run) else { continue };
        let before = "at 20 s node01 is under evac's threshold + headroom (4524Mi) but over the kubelet's thresholds: \
                      evac moves the fewest VMs covering the 940Mi gap, {h1}, before the kubelet acts";
        expect_vm(&mut c, run, r, "h1", "migrated", before);
        expect_time(&mut c, run, r, "h1", "migratedAt", 20.0, 100.0, before);
        let hard = "under the hard threshold the kubelet gives h2 a 1 s grace: the preStop hook is cut after ~1 s, no \
                    window; h2's 128 s migration cannot help";
        expect_vm(&mut c, run, r, "h2", "shut down", hard);
        expect_time(&mut c, run, r, "h2", "stoppedAt", 200.0, 212.0, hard);
        expect_not_held(&mut c, run, r, "h2", 3.0, None, hard);
        expect_field(
            &mut c,
            run,
            r,
            &["migrations", "succeeded"],
            1,
            "only h1 moves, before the hard eviction",
        );
        expect_field(&mut c, run, r, &["vms", "shutDown"], 1, hard);
    }
    c.finish();
}

#[test]
fn hold_taint_toleration_window() {
    let mut c = Checks::new("hold-taint-toleration-window");
    let reports = c.runs();
    let ws = ["w01", "w02", "w03", "w04"];
    for run in RUNS {
        let Some(r) = reports.get(run) else { continue };
        let forever =
            "a toleration without tolerationSeconds tolerates the taint forever: never disrupted, never moved";
        expect_vm(&mut c, run, r, "forever", "untouched", forever);
        expect_not_held(&mut c, run, r, "forever", 0.0, None, forever);
    }
    for (run, lo, hi) in [(ALONE_STOCK, 220.0, 240.0), (ALONE_PROPOSAL, 275.0, 292.0)] {
        let Some(r) = reports.get(run) else { continue };
        let rule =
            "tolerationSeconds 200: the taint manager deletes at ~220 s; KubeVirt alone lets the VMs stop \
                    (stock ~226 s, proposal at the end of the 60 s grace, ~280 s)";
        for vm in ws {
            expect_vm(&mut c, run, r, vm, "shut down", rule);
            expect_time(&mut c, run, r, vm, "stoppedAt", lo, hi, rule);
        }
        expect_field(&mut c, run, r, &["migrations", "created"], 0, rule);
    }
    for run in [EVAC_STOCK, EVAC_PROPOSAL] {
        let Some(r) = reports.get(run) else { continue };
        let rule = "the taint is a cause from 20 s, with the toleration's end as deadline: round one (~20..~212 s) \
                    ends before the deletion, round two (~212..~404 s) is held from the deletion at ~220 s until it \
                    migrates";
        for vm in ws {
            expect_vm(&mut c, run, r, vm, "migrated", rule);
        }
        let early = ws
            .iter()
            .filter(|vm| vm_time(r, vm, "migratedAt").is_some_and(|t| (190.0..=230.0).contains(&t)))
            .count();
        let late: Vec<&str> = ws
            .iter()
            .copied()
            .filter(|vm| vm_time(r, vm, "migratedAt").is_some_and(|t| (380.0..=430.0).contains(&t)))
            .collect();
        c.check(early == 2 && late.len() == 2, || {
            let times: Vec<String> =
                ws.iter().map(|vm| format!("{vm}: {:?}", vm_time(r, vm, "migratedAt"))).collect();
            format!(
                "{}: expected two migrations done at 190..230 s and two at 380..430 s, got {} (rule: {rule})",
                run.label(),
                times.join(", ")
            )
        });
        for vm in late {
            expect_held(&mut c, run, r, vm, Some("migrated"), (215.0, 232.0), (380.0, 432.0), rule);
            expect_hold_ends_with_migration(&mut c, run, r, vm, rule);
        }
        expect_field(&mut c, run, r, &["migrations", "succeeded"], 4, rule);
        expect_field(&mut c, run, r, &["vms", "shutDown"], 0, rule);
    }
    c.finish();
}
