//! Table-driven tests of the evacuation decision: which VMIs migrate (strategy, state, back-off,
//! parallel limits, order), with which cause and priority, which marks are called off, and the
//! descheduler's annotations; and that the decision asks for nothing more once carried out.

mod beside;
mod deadlines;
mod fixtures;
mod kubevirt;
mod queue;

use serde_json::{json, Value};

use self::fixtures::*;
use evac_core::effect::{
    EventReason, MigrationCause as Cause, EVICTION_IN_PROGRESS_ANNOTATION as IN_PROGRESS,
    REQUEST_EVICT_ONLY_ANNOTATION as EVICT_ONLY,
};
use evac_core::evacuation::*;
use evac_core::eviction::KubeVirtRef;
use evac_core::model::{AdmissionRequest, Node};
use evac_core::trace::Trace;
use evac_core::{Effect, ObjectRef};

/// Room for every migration a test asks for.
fn roomy() -> Value {
    kubevirt(None, Some((50, 50)))
}

/// The objects, and [`OTHER`]: a schedulable node the migrations can go to.
fn cluster_of(objects: impl IntoIterator<Item = Value>) -> TestCluster {
    TestCluster::new(objects.into_iter().chain([other_node(), idle_metrics(NODE), idle_metrics(OTHER)]))
}

#[test]
fn a_marked_vmi_migrates() {
    let cluster = cluster_of([kubevirt(None, None)].into_iter().chain(Vm::new("web").marked().objects()));
    let effects = run(&cluster, &cordoned());
    assert_eq!(effects, [drain("web")]);
    assert_eq!(
        serde_json::to_string(&effects[0]).unwrap(),
        r#"{"type":"CreateMigration","vmi":{"namespace":"default","name":"web"},"node":"node01","cause":"drain"}"#
    );
    // The KubeVirt CR, then the node's VMIs and launcher pods by selector, then every migration
    // and every MigrationPolicy (no namespace is read: no policy selects by namespace).
    assert_eq!(
        cluster.reads(),
        [
            "list KubeVirt",
            "list VirtualMachineInstance kubevirt.io/nodeName=node01",
            "list Pod kubevirt.io=virt-launcher spec.nodeName=node01",
            "list VirtualMachineInstanceMigration",
            "list MigrationPolicy",
            // Where it can go, with each node's memory in use: read only when a migration may start.
            "list Node",
            "get NodeMetrics node02",
        ]
    );
}

#[test]
fn the_drain_taint_migrates_vmis_that_live_migrate() {
    let vms = [
        Vm::new("a"),
        Vm::new("b").strategy(Some("LiveMigrateIfPossible")),
        Vm::new("c").strategy(Some("LiveMigrateIfPossible")).migratable(false),
        Vm::new("d").strategy(Some("External")),
        Vm::new("e").strategy(Some("None")),
        Vm::new("f").migratable(false),
        Vm::new("g").strategy(None),
    ];
    let cluster = cluster_of([roomy()].into_iter().chain(vms.iter().flat_map(Vm::objects)));
    assert_eq!(run(&cluster, &drained()), [drain("a"), drain("b")]);
    // virt-handler's taint alone (the node not cordoned) is a drain too.
    let tainted_only = tainted(node(), "kubevirt.io/drain", "NoSchedule");
    assert_eq!(run(&cluster, &tainted_only), [drain("a"), drain("b")]);
    // Without it, unmarked VMIs stay.
    assert_eq!(run(&cluster, &cordoned()), []);
}

#[test]
fn marked_vmis_per_strategy_and_migratability() {
    // (VMI strategy, cluster-wide strategy, LiveMigratable, migrates)
    let rows: &[(Option<&'static str>, Option<&str>, bool, bool)] = &[
        (Some("LiveMigrate"), None, true, true),
        (Some("LiveMigrate"), None, false, false),
        (Some("LiveMigrateIfPossible"), None, true, true),
        (Some("LiveMigrateIfPossible"), None, false, false),
        // External: somebody else (capk) acts on the mark.
        (Some("External"), None, true, false),
        (Some("External"), None, false, false),
        (Some("None"), None, true, false),
        (None, None, true, false),
        (Some("Sideways"), None, true, false),
        // The cluster-wide strategy applies to VMIs without their own.
        (None, Some("LiveMigrate"), true, true),
        (None, Some("LiveMigrateIfPossible"), false, false),
        (None, Some("External"), true, false),
        (Some("None"), Some("LiveMigrate"), true, false),
        (Some("LiveMigrate"), Some("None"), true, true),
    ];
    for (strategy, cluster_wide, migratable, migrates) in rows {
        let vm = Vm::new("vm").strategy(*strategy).migratable(*migratable).marked();
        let cluster = cluster_of([kubevirt(*cluster_wide, None)].into_iter().chain(vm.objects()));
        let expected = if *migrates { vec![drain("vm")] } else { vec![] };
        let row = format!("VMI {strategy:?}, cluster {cluster_wide:?}, migratable {migratable}");
        assert_eq!(run(&cluster, &cordoned()), expected, "{row}");
    }
}

#[test]
fn only_running_vmis_that_are_not_being_deleted() {
    for phase in ["Pending", "Scheduling", "Scheduled", "Succeeded", "Failed", ""] {
        let vm = Vm { phase, ..Vm::new("vm").marked() };
        assert_eq!(run(&cluster_of(vm.objects()), &drained()), [], "phase {phase:?}");
    }
    let deleting = Vm { deleting: true, ..Vm::new("vm").marked() };
    assert_eq!(run(&cluster_of(deleting.objects()), &drained()), []);
    // A VMI elsewhere is not this node's, whatever its mark says.
    let moved = Vm { marked: Some(NODE), ..Vm::new("vm").on(OTHER) };
    assert_eq!(run(&cluster_of(moved.objects()), &drained()), []);
}

#[test]
fn a_vmi_already_migrating_is_left_alone() {
    let vm = Vm::new("vm").marked();
    for (phase, migrates) in [
        ("", false),
        ("Pending", false),
        ("Scheduling", false),
        ("PreparingTarget", false),
        ("Running", false),
        ("Succeeded", true),
        ("Failed", true),
    ] {
        let cluster = cluster_of(vm.objects().into_iter().chain([migration("m", "vm", phase)]));
        let expected = if migrates { vec![drain("vm")] } else { vec![] };
        assert_eq!(run(&cluster, &cordoned()), expected, "migration phase {phase:?}");
    }
    // A migration of a VMI of the same name in another namespace is another VMI's.
    let elsewhere = set(migration("m", "vm", "Running"), "/metadata/namespace", json!("other"));
    let cluster = cluster_of(vm.objects().into_iter().chain([elsewhere]));
    assert_eq!(run(&cluster, &cordoned()), [drain("vm")]);
}

#[test]
fn exactly_one_active_pod() {
    let vm = Vm::new("vm").marked();
    let second = |phase: &str| {
        let pod = set(vm.pod(), "/metadata/name", json!("virt-launcher-vm-second"));
        set(pod, "/status/phase", json!(phase))
    };
    let rows: Vec<(&str, Vec<Value>, bool)> = vec![
        ("one pod", vec![vm.pod()], true),
        ("no pod", vec![], false),
        ("a second running pod", vec![vm.pod(), second("Running")], false),
        ("a second pending pod", vec![vm.pod(), second("Pending")], false),
        ("a second terminating pod", vec![vm.pod(), terminating(second("Running"), 30)], false),
        ("a finished second pod", vec![vm.pod(), second("Succeeded")], true),
        ("a failed second pod", vec![vm.pod(), second("Failed")], true),
        // Its one pod being deleted: exactly when migrating matters.
        ("one terminating pod", vec![terminating(vm.pod(), 30)], true),
    ];
    for (row, pods, migrates) in rows {
        let cluster = cluster_of([vm.json()].into_iter().chain(pods));
        let expected = if migrates { vec![drain("vm")] } else { vec![] };
        assert_eq!(run(&cluster, &cordoned()), expected, "{row}");
    }
}

#[test]
fn backoff_seconds_double_up_to_kubevirts_320_seconds() {
    let waits: Vec<f64> = [1, 2, 3, 4, 5, 6, 40].into_iter().map(backoff_seconds).collect();
    assert_eq!(waits, [20.0, 40.0, 80.0, 160.0, 320.0, 320.0, 320.0]);
}

/// Failed evacuation migrations of `vm` from NODE, ended these many seconds from NOW.
fn failures(vm: &str, ended: &[i64]) -> Vec<Value> {
    ended
        .iter()
        .enumerate()
        .map(|(i, e)| evacuation(&format!("f{i}"), vm, "Failed", NODE, Some(*e)))
        .collect()
}

#[test]
fn back_off_after_failed_evacuations() {
    let succeeded = evacuation("ok", "vm", "Succeeded", OTHER, Some(-300));
    let user_failure = migration("user", "vm", "Failed");
    let undated = |created: i64| {
        let failure = evacuation("undated", "vm", "Failed", NODE, None);
        set(failure, "/metadata/creationTimestamp", json!(at(created)))
    };
    // (case, migrations, migrates now)
    let rows: Vec<(&str, Vec<Value>, bool)> = vec![
        ("1 failure, 19 s ago", failures("vm", &[-19]), false),
        ("1 failure, 20 s ago", failures("vm", &[-20]), true),
        ("3 failures, the last 79 s ago", failures("vm", &[-500, -400, -79]), false),
        ("3 failures, the last 80 s ago", failures("vm", &[-500, -400, -80]), true),
        ("4 failures, the last 159 s ago", failures("vm", &[-900, -800, -700, -159]), false),
        ("4 failures, the last 160 s ago", failures("vm", &[-900, -800, -700, -160]), true),
        (
            "a success resets the count",
            [failures("vm", &[-900, -800, -700]), vec![succeeded.clone()]].concat(),
            true,
        ),
        (
            "failures after the success count",
            [failures("vm", &[-900, -800, -30]), vec![succeeded]].concat(),
            true,
        ),
        ("a failed migration nobody evacuated", vec![user_failure], true),
        ("undated: its creation, long ago", vec![undated(-3600)], true),
        ("undated: its creation, just now", vec![undated(-10)], false),
        (
            "not dated at all: long past",
            vec![set(
                evacuation("never", "vm", "Failed", NODE, None),
                "/metadata/creationTimestamp",
                Value::Null,
            )],
            true,
        ),
        ("another VMI's failures", failures("other", &[-1]), true),
        // Failed before it started (no endTimestamp): KubeVirt counts from its Failed transition.
        (
            "failed before it started, 10 s ago",
            vec![set(
                evacuation("unstarted", "vm", "Failed", NODE, None),
                "/status/phaseTransitionTimestamps",
                json!([{"phase": "Pending", "phaseTransitionTimestamp": at(-3000)},
                       {"phase": "Failed", "phaseTransitionTimestamp": at(-10)}]),
            )],
            false,
        ),
    ];
    for (row, migrations, migrates) in rows {
        let cluster = cluster_of(Vm::new("vm").marked().objects().into_iter().chain(migrations));
        let expected = if migrates { vec![drain("vm")] } else { vec![] };
        assert_eq!(run(&cluster, &cordoned()), expected, "{row}");
    }
}

#[test]
fn the_back_off_is_capped_at_320_seconds() {
    // More failures than the default gives up after, so the mark stays.
    let settings = Settings { max_failed_evacuations: 10, ..creating() };
    for (last, migrates) in [(-319, false), (-320, true)] {
        let migrations = failures("vm", &[-5000, -4000, -3000, -2000, -1000, last]);
        let cluster = cluster_of(Vm::new("vm").marked().objects().into_iter().chain(migrations));
        let expected = if migrates { vec![drain("vm")] } else { vec![] };
        assert_eq!(decide_with(&cluster, &cordoned(), &settings, NOW), expected, "6 failures, last {last} s");
    }
}

#[test]
fn parallel_limits_count_active_migrations() {
    let vms = [Vm::new("a").marked(), Vm::new("b").marked(), Vm::new("c").marked()];
    let active_from = |name: &str, node: &str| evacuation(name, &format!("{name}-vm"), "Running", node, None);
    let by_source =
        set(migration("s", "s-vm", "Running"), "/status/migrationState", json!({"sourceNode": NODE}));
    // (case, KubeVirt CR limits, other migrations, migrated)
    let rows = vec![
        ("KubeVirt's defaults: 2 per node", None, vec![], vec!["a", "b"]),
        ("one outbound already", None, vec![active_from("x", NODE)], vec!["a"]),
        ("one outbound by its state", None, vec![by_source], vec!["a"]),
        ("two outbound already", None, vec![active_from("x", NODE), active_from("y", NODE)], vec![]),
        ("outbound from another node", None, vec![active_from("x", OTHER)], vec!["a", "b"]),
        (
            "finished ones do not count",
            None,
            vec![evacuation("x", "x-vm", "Succeeded", NODE, Some(-1))],
            vec!["a", "b"],
        ),
        ("3 per cluster", Some((3, 10)), vec![], vec!["a", "b", "c"]),
        (
            "3 per cluster, 2 elsewhere",
            Some((3, 10)),
            vec![active_from("x", OTHER), active_from("y", OTHER)],
            vec!["a"],
        ),
        (
            "3 per cluster, 3 elsewhere",
            Some((3, 10)),
            vec![active_from("x", OTHER), active_from("y", OTHER), active_from("z", OTHER)],
            vec![],
        ),
        ("over the limit", Some((1, 10)), vec![active_from("x", OTHER), active_from("y", OTHER)], vec![]),
        ("1 per node", Some((10, 1)), vec![], vec!["a"]),
    ];
    for (row, limits, migrations, migrated) in rows {
        let objects =
            [kubevirt(None, limits)].into_iter().chain(vms.iter().flat_map(Vm::objects)).chain(migrations);
        let expected: Vec<Effect> = migrated.into_iter().map(drain).collect();
        assert_eq!(run(&cluster_of(objects), &cordoned()), expected, "{row}");
    }
}

#[test]
fn settings_name_the_kubevirt_cr() {
    let named = set(kubevirt(None, Some((10, 1))), "/metadata/namespace", json!("virt"));
    let objects =
        [named].into_iter().chain(Vm::new("a").marked().objects()).chain(Vm::new("b").marked().objects());
    let cluster = cluster_of(objects);
    let settings = Settings {
        kubevirt: Some(KubeVirtRef { namespace: "virt".into(), name: "kubevirt".into() }),
        ..creating()
    };
    assert_eq!(decide_with(&cluster, &cordoned(), &settings, NOW), [drain("a")]);
    assert_eq!(cluster.reads()[0], "get KubeVirt virt/kubevirt");
}

#[test]
fn the_pod_deleted_soonest_goes_first() {
    let soon = Vm::new("soon").marked();
    let later = Vm::new("later").marked();
    let drain_only_soon = Vm::new("drain-only-soon");
    let objects = [
        vec![roomy()],
        Vm::new("marked").marked().objects().to_vec(),
        Vm::new("a-drain-only").objects().to_vec(),
        vec![soon.json(), terminating(soon.pod(), 10)],
        vec![later.json(), terminating(later.pod(), 60)],
        vec![drain_only_soon.json(), terminating(drain_only_soon.pod(), 30)],
    ]
    .concat();
    let cluster = cluster_of(objects);
    // Deadlines first (marked or not), then marked before the drain taint alone, then by name.
    let order = ["soon", "drain-only-soon", "later", "marked", "a-drain-only"];
    assert_eq!(run(&cluster, &drained()), order.map(drain));
}

#[test]
fn the_deadline_decides_who_gets_the_last_slot() {
    let first = Vm::new("zz").marked();
    let objects = [
        vec![kubevirt(None, Some((10, 1)))],
        Vm::new("aa").marked().objects().to_vec(),
        vec![first.json(), terminating(first.pod(), 5)],
    ]
    .concat();
    assert_eq!(run(&cluster_of(objects), &cordoned()), [drain("zz")]);
}

#[test]
fn causes() {
    let noexecute = tainted(node(), "node.kubernetes.io/unreachable", "NoExecute");
    let maintenance = tainted(node(), "example.com/maintenance", "NoSchedule");
    // (case, eviction source, node, pod being deleted, cause); evac sets no priority.
    let rows = vec![
        ("cordoned", None, cordoned(), false, Cause::Drain),
        ("drain taint", None, tainted(node(), "kubevirt.io/drain", "NoSchedule"), false, Cause::Drain),
        ("another NoSchedule taint", None, maintenance, false, Cause::ApiEviction),
        ("an eviction, pod deleted", None, node(), true, Cause::ApiEviction),
        ("an unknown source", Some("kubectl"), cordoned(), false, Cause::Drain),
        ("descheduler", Some("descheduler"), node(), false, Cause::Descheduler),
        ("descheduler, cordoned", Some("descheduler"), cordoned(), false, Cause::Descheduler),
        ("preemption", Some("preemption"), node(), true, Cause::Preemption),
        ("NoExecute taint", Some("noexecute-taint"), noexecute, false, Cause::NoexecuteTaint),
        ("memory pressure", Some("node-pressure"), pressured(true, None), false, Cause::NodePressure),
    ];
    for (row, source, node, deleted, cause) in rows {
        let mut vm = Vm::new("vm").marked();
        vm.source = source;
        let pod = if deleted { terminating(vm.pod(), 30) } else { vm.pod() };
        let cluster = cluster_of([vm.json(), pod]);
        assert_eq!(run(&cluster, &node), [migrate("vm", cause)], "{row}");
    }
}

#[test]
fn descheduler_annotations() {
    let steady = Vm::new("steady").marked();
    let objects = [
        vec![roomy()],
        // No annotation yet: request-evict-only.
        vec![
            Vm::new("fresh").json(),
            set(Vm::new("fresh").pod(), "/metadata/annotations", json!({"kubevirt.io/domain": "fresh"})),
        ],
        // Marked, no annotation yet: both, in one patch.
        vec![
            Vm::new("marked").marked().json(),
            set(Vm::new("marked").pod(), "/metadata/annotations", json!({"kubevirt.io/domain": "marked"})),
        ],
        // Marked and annotated: nothing to change.
        steady.objects().to_vec(),
        // Marked, annotated with another value.
        vec![
            Vm::new("other-value").marked().json(),
            set(
                Vm::new("other-value").marked().pod(),
                &format!("/metadata/annotations/{}", IN_PROGRESS.replace('/', "~1")),
                json!("false"),
            ),
        ],
        // Not marked (any more): the descheduler may evict it again.
        vec![
            Vm::new("given-up").json(),
            set(
                Vm::new("given-up").pod(),
                &format!("/metadata/annotations/{}", IN_PROGRESS.replace('/', "~1")),
                json!("true"),
            ),
        ],
        // A migration target here of a VMI marked for the other node: never in progress.
        vec![set(Vm::new("target").on(OTHER).marked().pod(), "/spec/nodeName", json!(NODE))],
        // A finished pod is never evicted again.
        vec![set(
            set(
                set(Vm::new("fresh").pod(), "/metadata/name", json!("virt-launcher-done")),
                "/status/phase",
                json!("Succeeded"),
            ),
            "/metadata/annotations",
            json!({"kubevirt.io/domain": "fresh"}),
        )],
    ]
    .concat();
    let cluster = cluster_of(objects);
    assert_eq!(
        run(&cluster, &cordoned()),
        [
            drain("marked"),
            drain("other-value"),
            drain("steady"),
            annotate("fresh", &[(EVICT_ONLY, Some(""))]),
            not_in_progress("given-up"),
            annotate("marked", &[(IN_PROGRESS, Some("true")), (EVICT_ONLY, Some(""))]),
            annotate("other-value", &[(IN_PROGRESS, Some("true"))]),
            not_in_progress("target"),
        ]
    );
    assert_eq!(
        serde_json::to_string(&not_in_progress("target")).unwrap(),
        r#"{"type":"AnnotatePod","pod":{"namespace":"default","name":"virt-launcher-target-x2kfq"},"annotations":{"descheduler.alpha.kubernetes.io/eviction-in-progress":null}}"#
    );
}

/// The event of a mark of evac's own given up after `failures` failed migrations.
fn given_up(vmi: &str, source: &str, failures: u32) -> Effect {
    Effect::RecordEvent {
        vmi: ObjectRef::new(NS, vmi),
        node: NODE.into(),
        reason: EventReason::EvacuationGivenUp,
        message: format!(
            "evac gave up evacuating the VMI from node {NODE} ({source}) after {failures} failed migrations \
             in a row: it stays on the node"
        ),
    }
}

#[test]
fn evacs_own_marks_are_given_up_after_failing_again_and_again() {
    // A NoExecute taint still there: the cause persists, only the failures end it.
    let node = || tainted(node(), "example.com/x", "NoExecute");
    let vm = Vm::new("vm").marked().source("noexecute-taint");
    let five = || failures("vm", &[-5000, -4000, -3000, -2000, -1000]);
    let with = |migrations: Vec<Value>| cluster_of(vm.objects().into_iter().chain(migrations));
    let given_up =
        |failures| vec![clear("vm"), given_up("vm", "noexecute-taint", failures), not_in_progress("vm")];
    let retry = || vec![migrate("vm", Cause::NoexecuteTaint)];
    // (case, migrations, settings' maxFailedEvacuations, effects)
    let rows: Vec<(&str, Vec<Value>, u32, Vec<Effect>)> = vec![
        ("5 failures", five(), 5, given_up(5)),
        ("4 failures: back off, retry", failures("vm", &[-4000, -3000, -2000, -1000]), 5, retry()),
        ("5 failures, migrating again", [five(), vec![migration("m", "vm", "Running")]].concat(), 5, vec![]),
        (
            "5 failures, a success, 1 failure",
            [five(), vec![evacuation("ok", "vm", "Succeeded", OTHER, Some(-900))], failures("vm", &[-10])]
                .concat(),
            5,
            vec![],
        ),
        ("2 failures, 2 allowed", failures("vm", &[-2000, -1000]), 2, given_up(2)),
    ];
    for (row, migrations, max, expected) in rows {
        let settings = Settings { max_failed_evacuations: max, ..creating() };
        assert_eq!(decide_with(&with(migrations), &node(), &settings, NOW), expected, "{row}");
    }
}

/// The requester of an API eviction was told the VM is leaving: its mark is never given up, and
/// the VMI retries with KubeVirt's back-off (20 s doubling, at most 320 s).
#[test]
fn an_api_evictions_mark_retries_for_ever() {
    for source in [None, Some("descheduler")] {
        let mut vm = Vm::new("vm").marked();
        vm.source = source;
        let ten: Vec<i64> = (1..=10).map(|i| -5000 + i * 400).collect();
        let expected = match source {
            None => drain("vm"),
            Some(_) => migrate("vm", Cause::Descheduler),
        };
        // The last of ten failures ended 1000 s ago: the 320 s back-off is over.
        let cluster = cluster_of(vm.objects().into_iter().chain(failures("vm", &ten)));
        assert_eq!(run(&cluster, &cordoned()), std::slice::from_ref(&expected), "{source:?}");
        // The last ended 319 s ago: still backing off, and the mark stays.
        let ending = |last: i64| ten.iter().map(|t| t - ten[9] + last).collect::<Vec<_>>();
        let cluster = cluster_of(vm.objects().into_iter().chain(failures("vm", &ending(-319))));
        assert_eq!(run(&cluster, &cordoned()), [], "{source:?}");
        let cluster = cluster_of(vm.objects().into_iter().chain(failures("vm", &ending(-320))));
        assert_eq!(run(&cluster, &cordoned()), [expected], "{source:?}");
    }
    // A drain taint alone has no mark to give up: it retries too.
    let cluster =
        cluster_of(Vm::new("vm").objects().into_iter().chain(failures("vm", &[-3000, -2000, -1000])));
    assert_eq!(run(&cluster, &drained()), [drain("vm")]);
}

/// KubeVirt keeps a mark until the VM has migrated, and so does evac for an API eviction's; evac's
/// own marks end with their cause (unless the pod is being deleted: then the VM must leave).
#[test]
fn marks_are_called_off_when_their_cause_is_gone() {
    let noexecute = || tainted(node(), "node.kubernetes.io/unreachable", "NoExecute");
    // (case, eviction source, node, pod being deleted, called off)
    let rows: Vec<(&str, Option<&'static str>, Value, bool, bool)> = vec![
        // An API eviction's mark: never, whatever the node (an uncordon mid-drain included).
        ("eviction, node schedulable", None, node(), false, false),
        ("eviction, pod being deleted", None, node(), true, false),
        ("eviction, cordoned", None, cordoned(), false, false),
        ("eviction, NoExecute taint", None, noexecute(), false, false),
        ("descheduler", Some("descheduler"), node(), false, false),
        ("descheduler, cordoned", Some("descheduler"), cordoned(), false, false),
        ("taint removed", Some("noexecute-taint"), node(), false, true),
        ("taint removed, node cordoned", Some("noexecute-taint"), cordoned(), false, true),
        ("taint still there", Some("noexecute-taint"), noexecute(), false, false),
        ("taint removed, pod being deleted", Some("noexecute-taint"), node(), true, false),
        ("memory pressure", Some("node-pressure"), pressured(true, None), false, false),
        // Without a figure (metrics-server restarted, a scrape failed), pressure is not known gone.
        ("pressure gone, no figure", Some("node-pressure"), pressured(false, None), false, false),
        // Marked under 4524Mi (3500Mi + 1Gi), released from 5548Mi (3500Mi + 2 × 1Gi).
        (
            "pressure gone, under the marking level",
            Some("node-pressure"),
            pressured(false, Some("4Gi")),
            false,
            false,
        ),
        (
            "pressure gone, within the hysteresis",
            Some("node-pressure"),
            pressured(false, Some("5Gi")),
            false,
            false,
        ),
        (
            "pressure gone, at the release level",
            Some("node-pressure"),
            pressured(false, Some("5548Mi")),
            false,
            true,
        ),
        (
            "pressure gone, pod being deleted",
            Some("node-pressure"),
            pressured(false, Some("6Gi")),
            true,
            false,
        ),
        ("preemption, pod kept", Some("preemption"), cordoned(), false, true),
        ("preemption, pod being deleted", Some("preemption"), node(), true, false),
    ];
    for (row, source, node, deleted, called_off) in rows {
        let mut vm = Vm::new("vm").marked();
        vm.source = source;
        let pod = if deleted { terminating(vm.pod(), 30) } else { vm.pod() };
        let effects = run(&cluster_of([vm.json(), pod]), &node);
        if called_off {
            assert_eq!(effects, [clear("vm"), not_in_progress("vm")], "{row}");
        } else {
            assert!(matches!(effects.as_slice(), [Effect::CreateMigration { .. }]), "{row}: {effects:?}");
        }
    }
    // Not while it migrates.
    let vm = Vm::new("vm").marked().source("preemption");
    let cluster = cluster_of(vm.objects().into_iter().chain([migration("m", "vm", "Running")]));
    assert_eq!(run(&cluster, &node()), []);
    // The levels are the nodePressure setting's: 4Gi + 2 × 1Gi = 6Gi.
    let settings = Settings {
        node_pressure: NodePressure { threshold: "4Gi".into(), headroom: "1Gi".into() },
        ..creating()
    };
    let vm = Vm::new("vm").marked().source("node-pressure");
    let effects = decide_with(&cluster_of(vm.objects()), &pressured(false, Some("5548Mi")), &settings, NOW);
    assert_eq!(effects, [migrate("vm", Cause::NodePressure)]);
    let effects = decide_with(&cluster_of(vm.objects()), &pressured(false, Some("6Gi")), &settings, NOW);
    assert_eq!(effects, [clear("vm"), not_in_progress("vm")]);
}

#[test]
fn carried_out_decisions_ask_for_nothing_more() {
    let given_up = Vm::new("given-up").marked().source("noexecute-taint");
    let bare = |vm: &Vm| set(vm.pod(), "/metadata/annotations", json!({"kubevirt.io/domain": vm.name}));
    let objects = [
        vec![roomy()],
        [Vm::new("a").marked(), Vm::new("b").marked().source("descheduler"), Vm::new("c"), given_up.clone()]
            .iter()
            .flat_map(|vm| [vm.json(), bare(vm)])
            .collect(),
        failures("given-up", &[-5000, -4000, -3000, -2000, -1000]),
    ]
    .concat();
    let mut cluster = cluster_of(objects);
    let noexecute = || tainted(cordoned(), "example.com/x", "NoExecute");
    let first = run(&cluster, &noexecute());
    assert_eq!(
        first,
        [
            drain("a"),
            migrate("b", Cause::Descheduler),
            clear("given-up"),
            self::given_up("given-up", "noexecute-taint", 5),
            annotate("a", &[(IN_PROGRESS, Some("true")), (EVICT_ONLY, Some(""))]),
            annotate("b", &[(IN_PROGRESS, Some("true")), (EVICT_ONLY, Some(""))]),
            annotate("c", &[(EVICT_ONLY, Some(""))]),
            annotate("given-up", &[(EVICT_ONLY, Some(""))]),
        ]
    );
    cluster.apply(&first);
    assert_eq!(run(&cluster, &noexecute()), [], "after the first decision was carried out");
    // Likewise on a drained node, where the migrations are of the drain.
    let mut cluster = cluster_of([vec![roomy()], Vm::new("x").objects().to_vec()].concat());
    let first = run(&cluster, &drained());
    assert_eq!(first, [drain("x")]);
    cluster.apply(&first);
    assert_eq!(run(&cluster, &drained()), []);
}

// --- Requests, errors, settings ----------------------------------------------------------------

fn node_request(kind: Value, operation: &str, object: Value) -> String {
    json!({"uid": "1", "kind": kind, "resource": {"group": "", "version": "v1", "resource": "nodes"},
           "name": NODE, "operation": operation, "object": object})
    .to_string()
}

/// evac's evacuation controller at [`NOW`], tracing into `trace`.
fn evac(trace: &mut Trace) -> Context<'_> {
    Context { flavor: Flavor::Evac, now: NOW, trace }
}

fn decide_text(text: &str, cluster: &TestCluster) -> Result<evac_core::Decision, RequestError> {
    let request: AdmissionRequest<'_> = serde_json::from_str(text).unwrap();
    let mut trace = Trace::on();
    let traced = decide_request(&request, &creating(), &cluster.clone(), &mut evac(&mut trace));
    let plain = decide_request(&request, &creating(), cluster, &mut evac(&mut Trace::off()));
    assert_eq!(traced, plain);
    let last = trace.steps().last().expect("a trace");
    let answers = trace.steps().iter().filter(|step| step.starts_with("->")).count();
    assert_eq!(answers, 1, "one answer, last: {:?}", trace.steps());
    match &plain {
        Ok(_) => assert!(last.starts_with("-> allow"), "{last}"),
        Err(e) => assert!(last.starts_with(&format!("-> rejected ({})", e.code())), "{last}"),
    }
    plain
}

/// A read that fails is the answer, once.
#[test]
fn a_failed_read_ends_the_trace_once() {
    let node_kind = json!({"group": "", "version": "v1", "kind": "Node"});
    let cluster =
        cluster_of(Vm::new("vm").marked().objects()).failing("Pod", "etcdserver: request timed out");
    let error = decide_text(&node_request(node_kind, "UPDATE", cordoned()), &cluster).unwrap_err();
    assert_eq!(error.code(), 500);
}

/// The trace of a node with one VMI that migrates, one backing off, one that does not migrate,
/// and one left alone: the limits, what the node carries, each VMI's standing, the room, the
/// order, the migration started, the answer.
#[test]
fn the_trace_says_what_each_vmi_does_and_why() {
    let mut objects = vec![kubevirt(None, Some((5, 2)))];
    objects.extend(Vm::new("web").marked().objects());
    objects.extend(Vm::new("db").marked().strategy(Some("None")).objects());
    objects.extend(Vm::new("idle").objects());
    objects.extend(Vm::new("retry").marked().objects());
    objects.extend(failures("retry", &[-10]));
    let cluster = cluster_of(objects);
    let text = cordoned().to_string();
    let node: Node<'_> = serde_json::from_str(&text).unwrap();
    let mut trace = evac_core::trace::Trace::on();
    evacuate_as(Flavor::Evac, &node, &creating(), &cluster, NOW, &mut trace).unwrap();
    let steps = trace.into_steps();
    let expected = [
        "KubeVirt: parallelMigrationsPerCluster 5, parallelOutboundMigrationsPerNode 2, bandwidthPerMigration unlimited; its evacuation controller is off: evac creates the migrations",
        "node node01: 4 VMIs labelled for it, 4 launcher pods on it; 1 migrations in the cluster",
        "default/db: marked for node01; does not migrate now: its eviction strategy (None) does not migrate",
        "default/idle: not marked; stays",
        "default/retry: marked for node01; does not migrate now: backing off for 10 s more after 1 failed migrations",
        "default/web: marked for node01; a candidate",
        "room for 2 more migrations: 0 of 5 running in the cluster, 0 of 2 from node01",
        "candidates in order: default/web",
        "default/web: start its migration",
        "-> allow, CreateMigration",
    ];
    assert_eq!(steps, expected, "{steps:#?}");
}

#[test]
fn requests_carry_the_node() {
    let node_kind = json!({"group": "", "version": "v1", "kind": "Node"});
    let cluster = cluster_of(Vm::new("vm").marked().objects());
    let decision = decide_text(&node_request(node_kind.clone(), "UPDATE", cordoned()), &cluster).unwrap();
    assert_eq!(decision.effects, [drain("vm")]);
    assert!(decision.is_allowed());

    let pod_kind = json!({"group": "", "version": "v1", "kind": "Pod"});
    let eviction_kind = json!({"group": "policy", "version": "v1", "kind": "Eviction"});
    let rows = [
        (
            node_request(pod_kind, "UPDATE", Vm::new("vm").pod()),
            "this policy only evaluates Node requests, got UPDATE v1 Pod",
        ),
        (
            node_request(eviction_kind, "CREATE", json!({})),
            "this policy only evaluates Node requests, got CREATE policy/v1 Eviction",
        ),
        (
            node_request(json!({}), "UPDATE", node()),
            "this policy only evaluates Node requests, got UPDATE <no kind>",
        ),
        (
            node_request(node_kind.clone(), "DELETE", Value::Null),
            r#"the DELETE request of node "node01" carries no Node object"#,
        ),
        (node_request(node_kind.clone(), "UPDATE", json!({"metadata": {}})), "the Node has no name"),
    ];
    for (text, message) in rows {
        let err = decide_text(&text, &cluster).unwrap_err();
        assert_eq!((err.code(), err.to_string()), (400, message.to_owned()));
    }
    let err = decide_text(&node_request(node_kind.clone(), "UPDATE", json!({"metadata": "x"})), &cluster)
        .unwrap_err();
    assert!(err.to_string().starts_with("cannot decode the Node: "), "{err}");

    let failing = cluster_of([]).failing("VirtualMachineInstanceMigration", "connection refused");
    let err = decide_text(&node_request(node_kind, "UPDATE", node()), &failing).unwrap_err();
    assert_eq!(
        (err.code(), err.to_string()),
        (500, "cannot read the cluster: connection refused".to_owned())
    );
}

#[test]
fn read_errors_propagate() {
    for kind in ["KubeVirt", "VirtualMachineInstance", "Pod", "VirtualMachineInstanceMigration"] {
        let cluster =
            cluster_of(Vm::new("vm").marked().objects()).failing(kind, "etcdserver: request timed out");
        let text = cordoned().to_string();
        let node: Node<'_> = serde_json::from_str(&text).unwrap();
        let err =
            evacuate_as(Flavor::Evac, &node, &creating(), &cluster, NOW, &mut Trace::off()).unwrap_err();
        assert_eq!(err.message, "etcdserver: request timed out", "{kind}");
    }
}

#[test]
fn settings() {
    let defaults: Settings = serde_json::from_str("{}").unwrap();
    assert_eq!(defaults, Settings::default());
    assert_eq!(defaults.max_failed_evacuations, 5);
    assert_eq!(defaults.node_pressure, NodePressure::default());
    assert_eq!(defaults.assumed_bandwidth_bytes(), 64.0 * 1024.0 * 1024.0);
    assert!(defaults.validate().is_ok());

    let full: Settings = serde_json::from_value(json!({
        "kubevirt": {"namespace": "kubevirt", "name": "kubevirt"},
        "maxFailedEvacuations": 3,
        "nodePressure": {"threshold": "8Gi", "headroom": "2Gi"},
        "assumedBandwidth": "1Gi",
    }))
    .unwrap();
    assert_eq!(full.max_failed_evacuations, 3);
    assert_eq!(full.pressure_levels().release_from(), 12.0 * 1024.0 * 1024.0 * 1024.0);
    assert_eq!(full.assumed_bandwidth_bytes(), 1024.0 * 1024.0 * 1024.0);
    assert!(full.validate().is_ok());

    let invalid = |value: Value| serde_json::from_value::<Settings>(value).unwrap().validate().unwrap_err();
    assert_eq!(invalid(json!({"maxFailedEvacuations": 0})), "maxFailedEvacuations must be greater than 0");
    assert_eq!(
        invalid(json!({"nodePressure": {"headroom": "lots"}})),
        r#"nodePressure.headroom: "lots" is not a memory quantity (e.g. 3500Mi)"#
    );
    for bandwidth in ["fast", "0", "-1Mi"] {
        assert_eq!(
            invalid(json!({"assumedBandwidth": bandwidth})),
            format!("assumedBandwidth: {bandwidth:?} is not a positive quantity (e.g. 64Mi)").as_str()
        );
        // Unvalidated, such a setting falls back to the default.
        let unvalidated: Settings = serde_json::from_value(json!({"assumedBandwidth": bandwidth})).unwrap();
        assert_eq!(unvalidated.assumed_bandwidth_bytes(), 64.0 * 1024.0 * 1024.0, "{bandwidth}");
    }
    // An error compares equal to its own text only.
    assert!(invalid(json!({"maxFailedEvacuations": 0})) != "something else");
    // The setting it replaced is refused by name, not ignored.
    assert!(serde_json::from_value::<Settings>(json!({"nodePressureRelease": "2Gi"})).is_err());
    assert_eq!(
        invalid(json!({"kubevirt": {"namespace": "", "name": "kubevirt"}})),
        "kubevirt: both namespace and name must be set"
    );
    assert!(serde_json::from_value::<Settings>(json!({"max_failed_evacuations": 3})).is_err());
    assert!(serde_json::from_value::<Settings>(json!({"maxFailedEvacuations": -1})).is_err());
}
