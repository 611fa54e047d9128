//! Which evacuations start when not all can: savable VMs before hopeless ones, and only where the
//! VM has somewhere to go.

use serde_json::{json, Value};

use super::cluster_of;
use super::fixtures::*;
use evac_core::effect::{EventReason, MigrationCause as Cause};
use evac_core::evacuation::{NodePressure, Settings};
use evac_core::{Effect, ObjectRef};

/// A VM of `memory` that dirties `dirty_rate` per second, marked by a preemption whose pod
/// deletion ends `deadline` seconds from now.
fn preempted(name: &'static str, memory: &str, dirty_rate: &str, deadline: i64) -> [Value; 2] {
    let vm = Vm::new(name).marked().source("preemption");
    let vmi = set(vm.json(), "/spec/domain/memory/guest", json!(memory));
    let vmi = set(vmi, "/metadata/annotations/evac.kubevirt.io~1dirty-rate", json!(dirty_rate));
    [vmi, terminating(vm.pod(), deadline)]
}

/// The KubeVirt CR of the scenario: 128Mi per migration, KubeVirt's limits (5 per cluster, 2
/// per node).
fn kubevirt_128mi() -> Value {
    set(kubevirt(None, None), "/spec/configuration/migrations", json!({"bandwidthPerMigration": "128Mi"}))
}

fn preemption(vmi: &str) -> Effect {
    migrate(vmi, Cause::Preemption)
}

fn deferred(vmi: &str, why: &str) -> Effect {
    Effect::RecordEvent {
        vmi: ObjectRef::new(NS, vmi),
        node: NODE.into(),
        reason: EventReason::EvacuationDeferred,
        message: format!("evac did not start the VMI's migration from node {NODE}: {why}"),
    }
}

fn only_migrations_and_events(effects: Vec<Effect>) -> Vec<Effect> {
    effects.into_iter().filter(|e| !matches!(e, Effect::AnnotatePod { .. })).collect()
}

/// The preemption of the issue: a 16Gi VM dirtying 104Mi/s needs 16384 / (128 - 104) ≈ 683 s,
/// its pod is deleted in 195 s; five 6Gi VMs need ≈ 58 s each. Two slots: the small ones take
/// them (a name sorting first does not help `big`); `big`, with the bandwidth KubeVirt sets,
/// is not started at all, and gets an event saying why.
#[test]
fn savable_vms_take_the_slots_of_hopeless_ones() {
    let objects = [
        vec![kubevirt_128mi()],
        preempted("big", "16Gi", "104Mi", 195).to_vec(),
        (1..=5).flat_map(|i| preempted(["s1", "s2", "s3", "s4", "s5"][i - 1], "6Gi", "22Mi", 195)).collect(),
    ]
    .concat();
    let effects = only_migrations_and_events(run(&cluster_of(objects), &node()));
    let why = "its migration needs about 683 s and its pod is deleted in 195 s: it cannot leave in time";
    assert_eq!(effects, [preemption("s1"), preemption("s2"), deferred("big", why)]);
    // Alone, it is not started either: the slot may be wanted by the next VM disrupted.
    let objects = [vec![kubevirt_128mi()], preempted("big", "16Gi", "104Mi", 195).to_vec()].concat();
    let effects = only_migrations_and_events(run(&cluster_of(objects), &node()));
    assert_eq!(effects, [deferred("big", why)]);
}

/// With an assumed bandwidth (KubeVirt's is unlimited), a hopeless migration goes after the
/// savable ones, and starts when no savable VM waits for a slot: the estimate may be wrong.
#[test]
fn with_an_assumed_bandwidth_a_hopeless_vm_only_waits() {
    let settings = Settings { assumed_bandwidth: "128Mi".into(), ..creating() };
    let small = |name| preempted(name, "6Gi", "22Mi", 195).to_vec();
    let objects = [
        vec![kubevirt(None, None)],
        preempted("big", "16Gi", "104Mi", 195).to_vec(),
        small("s1"),
        small("s2"),
    ]
    .concat();
    let effects = only_migrations_and_events(decide_with(&cluster_of(objects), &node(), &settings, NOW));
    let why = "its migration needs about 683 s and its pod is deleted in 195 s, and VMs that can still \
               leave in time go first";
    assert_eq!(effects, [preemption("s1"), preemption("s2"), deferred("big", why)]);
    let objects = [vec![kubevirt(None, None)], preempted("big", "16Gi", "104Mi", 195).to_vec()].concat();
    let effects = only_migrations_and_events(decide_with(&cluster_of(objects), &node(), &settings, NOW));
    assert_eq!(effects, [preemption("big")]);
}

/// Among equal deadlines the quickest first; a sooner deadline first whatever its duration; a
/// migration KubeVirt would abort (completion timeout, or no convergence) is hopeless even
/// without a deadline, and goes after every savable one (KubeVirt alone would try it too).
#[test]
fn sooner_deadlines_then_quicker_migrations() {
    let objects = [
        vec![set(
            kubevirt_128mi(),
            "/spec/configuration/migrations/parallelOutboundMigrationsPerNode",
            json!(10),
        )],
        preempted("a-slow", "8Gi", "0", 600).to_vec(),
        preempted("b-quick", "1Gi", "0", 600).to_vec(),
        preempted("c-soon", "8Gi", "0", 300).to_vec(),
        stuck_without_deadline(),
        Vm::new("e-drain").marked().objects().to_vec(),
    ]
    .concat();
    let effects = only_migrations_and_events(run(&cluster_of(objects), &node()));
    assert_eq!(
        effects,
        [
            preemption("c-soon"),
            preemption("b-quick"),
            preemption("a-slow"),
            migrate("e-drain", Cause::ApiEviction),
            migrate("d-stuck", Cause::ApiEviction),
        ]
    );
}

/// A 1Gi VM dirtying memory as fast as the bandwidth, marked by an API eviction (no deadline).
fn stuck_without_deadline() -> Vec<Value> {
    let vm = Vm::new("d-stuck").marked();
    let vmi = set(vm.json(), "/spec/domain/memory/guest", json!("1Gi"));
    vec![set(vmi, "/metadata/annotations/evac.kubevirt.io~1dirty-rate", json!("128Mi")), vm.pod()]
}

/// The scenario of a drain whose only target would fall under the kubelet's soft threshold: a
/// 13Gi VM, another node with 19Gi available, a threshold of 8Gi and a headroom of 1Gi. Moving
/// it would leave 6Gi: the kubelet would evict the next pod there. With 30Gi available it goes.
#[test]
fn no_migration_onto_a_node_it_would_put_under_pressure() {
    let settings = Settings {
        node_pressure: NodePressure { threshold: "8Gi".into(), headroom: "1Gi".into() },
        ..creating()
    };
    let vm = Vm::new("a").marked();
    let vmi = set(vm.json(), "/spec/domain/memory/guest", json!("13Gi"));
    let with_room = |available: &str| {
        let other = with_available(other_node(), available);
        TestCluster::new([kubevirt(None, None), vmi.clone(), vm.pod(), other, idle_metrics(OTHER)])
    };
    let effects = only_migrations_and_events(decide_with(&with_room("19Gi"), &cordoned(), &settings, NOW));
    let why = "no other node has room for its 13Gi: the best would keep 6Gi available, under the \
               node-pressure level of 9Gi";
    assert_eq!(effects, [deferred("a", why)]);
    let effects = only_migrations_and_events(decide_with(&with_room("30Gi"), &cordoned(), &settings, NOW));
    assert_eq!(effects, [drain("a")]);
}

/// A node the scheduler would not put the pod on is no target: cordoned, or tainted without a
/// toleration in the VMI's spec (which KubeVirt copies to its pods).
#[test]
fn targets_must_accept_the_pod() {
    let dedicated = || tainted(other_node(), "dedicated", "NoSchedule");
    let tolerating = |vm: &Vm| {
        set(
            vm.json(),
            "/spec/tolerations",
            json!([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]),
        )
    };
    let vm = Vm::new("a").marked();
    let nowhere =
        "no other node accepts it (cordoned, tainted without a toleration, or outside its node selector \
                   or required node affinity)";
    let zone_b =
        || set(other_node(), "/metadata/labels", json!({"zone": "b", "kubernetes.io/hostname": OTHER}));
    let selecting = |path: &str, value: Value| set(vm.json(), path, value);
    let in_zone = |zone: &str| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}]}}})
    };
    let rows: Vec<(&str, Value, Value, Vec<Effect>)> = vec![
        (
            "cordoned",
            vm.json(),
            set(other_node(), "/spec/unschedulable", json!(true)),
            vec![deferred("a", nowhere)],
        ),
        ("tainted", vm.json(), dedicated(), vec![deferred("a", nowhere)]),
        ("tainted, tolerated", tolerating(&vm), dedicated(), vec![drain("a")]),
        (
            "NoExecute, tolerated only for NoSchedule",
            tolerating(&vm),
            tainted(other_node(), "dedicated", "NoExecute"),
            vec![deferred("a", nowhere)],
        ),
        ("PreferNoSchedule", vm.json(), tainted(other_node(), "x", "PreferNoSchedule"), vec![drain("a")]),
        // KubeVirt copies the VMI's node selector and affinity to the target pod.
        (
            "node selector met",
            selecting("/spec/nodeSelector", json!({"zone": "b"})),
            zone_b(),
            vec![drain("a")],
        ),
        (
            "node selector unmet",
            selecting("/spec/nodeSelector", json!({"zone": "a"})),
            zone_b(),
            vec![deferred("a", nowhere)],
        ),
        ("required affinity met", selecting("/spec/affinity", in_zone("b")), zone_b(), vec![drain("a")]),
        (
            "required affinity unmet",
            selecting("/spec/affinity", in_zone("a")),
            zone_b(),
            vec![deferred("a", nowhere)],
        ),
    ];
    for (row, vmi, other, expected) in rows {
        let cluster = TestCluster::new([kubevirt(None, None), vmi, vm.pod(), other]);
        assert_eq!(only_migrations_and_events(run(&cluster, &cordoned())), expected, "{row}");
    }
}

/// The hopeless VM's event says savable VMs go first only when one does wait: with every
/// candidate hopeless, the one that gets no slot waits for a slot like any other.
#[test]
fn hopeless_vms_hear_of_savable_ones_only_when_one_waits() {
    let settings = Settings { assumed_bandwidth: "128Mi".into(), ..creating() };
    let one_slot = set(
        kubevirt(None, None),
        "/spec/configuration/migrations",
        json!({"parallelOutboundMigrationsPerNode": 1}),
    );
    let objects = [
        vec![one_slot],
        preempted("big-1", "16Gi", "104Mi", 195).to_vec(),
        preempted("big-2", "16Gi", "104Mi", 195).to_vec(),
    ]
    .concat();
    let effects = only_migrations_and_events(decide_with(&cluster_of(objects), &node(), &settings, NOW));
    assert_eq!(effects, [preemption("big-1")]);
}

/// Where VMs can go (the node list, the largest read) is read only when a migration may start.
#[test]
fn no_room_no_node_list() {
    let full = set(
        kubevirt(None, None),
        "/spec/configuration/migrations",
        json!({"parallelMigrationsPerCluster": 0}),
    );
    let cluster = cluster_of([full].into_iter().chain(Vm::new("web").marked().objects()));
    assert_eq!(only_migrations_and_events(run(&cluster, &node())), []);
    assert!(!cluster.reads().iter().any(|r| r.starts_with("list Node")), "{:?}", cluster.reads());
}

/// A migration that ends exactly at its pod's deadline makes it: 1Gi at 128Mi/s takes 8 s.
#[test]
fn ending_at_the_deadline_is_in_time() {
    let objects = [vec![kubevirt_128mi()], preempted("exact", "1Gi", "0", 8).to_vec()].concat();
    let effects = only_migrations_and_events(run(&cluster_of(objects), &node()));
    assert_eq!(effects, [preemption("exact")]);
    let objects = [vec![kubevirt_128mi()], preempted("late", "1Gi", "0", 7).to_vec()].concat();
    let effects = only_migrations_and_events(run(&cluster_of(objects), &node()));
    let why = "its migration needs about 8 s and its pod is deleted in 7 s: it cannot leave in time";
    assert_eq!(effects, [deferred("late", why)]);
}
