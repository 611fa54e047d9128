//! KubeVirt's evacuation controller as shipped (v1.9), which the simulator's baseline runs:
//! `pkg/virt-controller/watch/drain/evacuation/evacuation.go` (`EvacuationController.sync`,
//! `vmisToMigrate`, `filterRunningNonMigratingVMIs`, `GenerateNewMigration`) and the migration
//! controller's back-off (`handleMigrationBackoff`).

use serde_json::Value;

use super::fixtures::*;
use evac_core::effect::{MigrationPriority as Priority, ObjectRef};
use evac_core::evacuation::{kubevirt_backoff_until, Flavor, Settings};
use evac_core::model::{Migration, Node};
use evac_core::trace::Trace;
use evac_core::{Effect, Verdict};

fn kubevirt_run(cluster: &TestCluster, node: &Value) -> Vec<Effect> {
    let text = node.to_string();
    let node: Node<'_> = serde_json::from_str(&text).unwrap();
    let decision =
        evacuate_as(Flavor::KubeVirt, &node, &Settings::default(), cluster, NOW, &mut Trace::off()).unwrap();
    assert_eq!(decision.verdict, Verdict::Allow);
    decision.effects.into_iter().filter(|e| matches!(e, Effect::CreateMigration { .. })).collect()
}

fn shipped(vmi: &str, priority: Priority) -> Effect {
    Effect::CreateMigration {
        vmi: ObjectRef::new(NS, vmi),
        node: NODE.into(),
        cause: None,
        priority: Some(priority),
    }
}

#[test]
fn a_lone_eviction_migrates_on_a_node_nobody_drains() {
    // KubeVirt never looks at the cordon: a marked VMI leaves whatever the node's state.
    let cluster =
        TestCluster::new([kubevirt(None, None)].into_iter().chain(Vm::new("web").marked().objects()));
    assert_eq!(kubevirt_run(&cluster, &node()), [shipped("web", Priority::SystemCritical)]);
    assert_eq!(kubevirt_run(&cluster, &cordoned()), [shipped("web", Priority::SystemCritical)]);
}

#[test]
fn every_candidate_at_once_without_a_cause() {
    // The parallel limits (1 here) are the migration controller's: v1.9 creates them all.
    let vms = ["a", "b", "c", "d"].map(|name| Vm::new(name).marked());
    let cluster =
        TestCluster::new([kubevirt(None, Some((1, 1)))].into_iter().chain(vms.iter().flat_map(Vm::objects)));
    assert_eq!(
        kubevirt_run(&cluster, &node()),
        ["a", "b", "c", "d"].map(|v| shipped(v, Priority::SystemCritical))
    );
}

#[test]
fn the_descheduler_gets_maintenance_priority() {
    let cluster = TestCluster::new(
        [kubevirt(None, None)].into_iter().chain(Vm::new("web").marked().source("descheduler").objects()),
    );
    assert_eq!(kubevirt_run(&cluster, &node()), [shipped("web", Priority::SystemMaintenance)]);
}

#[test]
fn candidates_per_strategy_as_kubevirt_filters_them() {
    // `VMIMigratableOnEviction`: External and None are never migrated by KubeVirt, only marked.
    let vms = [
        Vm::new("live"),
        Vm::new("if-possible").strategy(Some("LiveMigrateIfPossible")),
        Vm::new("if-possible-stuck").strategy(Some("LiveMigrateIfPossible")).migratable(false),
        Vm::new("external").strategy(Some("External")),
        Vm::new("none").strategy(Some("None")),
        Vm::new("unmigratable").migratable(false),
    ]
    .map(Vm::marked);
    let cluster =
        TestCluster::new([kubevirt(None, None)].into_iter().chain(vms.iter().flat_map(Vm::objects)));
    assert_eq!(
        kubevirt_run(&cluster, &node()),
        [shipped("if-possible", Priority::SystemCritical), shipped("live", Priority::SystemCritical)]
    );
}

#[test]
fn marks_are_never_called_off_and_failures_do_not_hold_it() {
    // Three failed evacuations: evac backs off (and would give up later); KubeVirt's evacuation
    // controller creates the next one at once, and its migration controller holds it Pending.
    let mut objects: Vec<Value> = vec![kubevirt(None, None)];
    objects.extend(Vm::new("web").marked().objects());
    for (i, ended) in [-100, -60, -10].into_iter().enumerate() {
        objects.push(evacuation(&format!("m{i}"), "web", "Failed", NODE, Some(ended)));
    }
    let cluster = TestCluster::new(objects);
    let text = node().to_string();
    let parsed: Node<'_> = serde_json::from_str(&text).unwrap();
    let effects =
        evacuate_as(Flavor::KubeVirt, &parsed, &Settings::default(), &cluster, NOW, &mut Trace::off())
            .unwrap()
            .effects;
    assert!(effects.iter().all(|e| !matches!(e, Effect::ClearEvacuation { .. })), "{effects:?}");
    assert_eq!(kubevirt_run(&cluster, &node()), [shipped("web", Priority::SystemCritical)]);
    assert!(run(&cluster, &cordoned()).is_empty(), "evac waits out its back-off");
}

/// An evacuation migration of `web`, created `created` seconds from NOW, ended `ended` seconds
/// from NOW if it ended.
fn created_evacuation(name: &str, phase: &str, created: i64, ended: Option<i64>) -> Value {
    let mut migration = evacuation(name, "web", phase, NODE, ended);
    migration["metadata"]["creationTimestamp"] = at(created).into();
    migration
}

fn backoff(of_vmi: &[Value], which: usize) -> Option<f64> {
    let texts: Vec<String> = of_vmi.iter().map(Value::to_string).collect();
    let migrations: Vec<Migration<'_>> = texts.iter().map(|t| serde_json::from_str(t).unwrap()).collect();
    kubevirt_backoff_until(&migrations[which], &migrations)
        .map(|until| until - NOW)
        .filter(|wait| *wait > 0.0)
}

#[test]
fn the_migration_controller_backs_off_the_newest_evacuation_after_failures() {
    let pending = created_evacuation("m9", "Pending", 0, None);
    // (earlier migrations as (phase, ended), wait left in seconds from NOW)
    type Earlier = &'static [(&'static str, i64)];
    let rows: &[(Earlier, Option<f64>)] = &[
        (&[], None),
        (&[("Failed", -5)], Some(15.0)),
        (&[("Failed", -30)], None),
        (&[("Failed", -50), ("Failed", -5)], Some(35.0)),
        (&[("Failed", -90), ("Failed", -50), ("Failed", -5)], Some(75.0)),
        // A success resets the chain: only the failures after it count.
        (&[("Failed", -90), ("Succeeded", -50), ("Failed", -5)], Some(15.0)),
        (&[("Failed", -90), ("Succeeded", -5)], None),
    ];
    for (earlier, wait) in rows {
        let mut of_vmi: Vec<Value> = earlier
            .iter()
            .enumerate()
            .map(|(i, (phase, ended))| created_evacuation(&format!("m{i}"), phase, ended - 30, Some(*ended)))
            .collect();
        of_vmi.push(pending.clone());
        let last = of_vmi.len() - 1;
        assert_eq!(backoff(&of_vmi, last), *wait, "{earlier:?}");
    }
    // A failed migration being deleted is not counted (the back-off counts from the newest one
    // ended, and only the failures still there double it).
    let mut deleted = created_evacuation("m1", "Failed", -35, Some(-5));
    deleted["metadata"]["deletionTimestamp"] = at(-1).into();
    let of_vmi = [created_evacuation("m0", "Failed", -80, Some(-50)), deleted, pending.clone()];
    assert_eq!(backoff(&of_vmi, 2), Some(15.0));
    // Nothing failed since the last success: no wait at all, not a wait already over.
    let texts: Vec<String> = [created_evacuation("m0", "Succeeded", -35, Some(-5)), pending.clone()]
        .iter()
        .map(Value::to_string)
        .collect();
    let migrations: Vec<Migration<'_>> = texts.iter().map(|t| serde_json::from_str(t).unwrap()).collect();
    assert_eq!(kubevirt_backoff_until(&migrations[1], &migrations), None);
    // Only the newest is held; a migration nobody marked as an evacuation never is.
    let of_vmi = [created_evacuation("m0", "Failed", -35, Some(-5)), pending.clone()];
    assert_eq!(backoff(&of_vmi, 0), None);
    let mut user = pending;
    user["metadata"]["annotations"] = serde_json::json!({});
    assert_eq!(backoff(&[of_vmi[0].clone(), user], 1), None);
}
