//! Beside KubeVirt's evacuation controller, VMs whose pods have a deadline and KubeVirt's queue of
//! pending migrations (`evacuation::queue`): one slot in the cluster, busy with a drain's migration
//! that ends in 126 s, and another drain migration pending.

use serde_json::{json, Value};

use super::cluster_of;
use super::fixtures::*;
use evac_core::effect::{EventReason, CAUSE_ANNOTATION, EVACUATION_REQUEST_ANNOTATION};
use evac_core::evacuation::Settings;
use evac_core::Effect;

const CAUSE: &str = "/metadata/annotations/evac.kubevirt.io~1cause";

/// A VM of `memory` (64Mi/s: 4Gi takes 64 s, 16Gi 256 s).
fn sized(vm: &Vm, memory: &str) -> Value {
    set(vm.json(), "/spec/domain/memory/guest", json!(memory))
}

/// One migration slot in the cluster, 64Mi/s each; a drain's migration of `d01` (8Gi, 128 s) on
/// the other node started 2 s ago, and `d02`'s waits behind it.
fn drain_ahead() -> Vec<Value> {
    let mut cr = kubevirt(None, Some((1, 2)));
    cr["spec"]["configuration"]["migrations"]["bandwidthPerMigration"] = json!("64Mi");
    let d01 = Vm::new("d01").on(OTHER).marked();
    let d02 = Vm::new("d02").on(OTHER).marked();
    let running = set(
        set(
            evacuation("kubevirt-evacuation-d01", "d01", "Running", OTHER, None),
            CAUSE,
            json!("api-eviction"),
        ),
        "/status/migrationState",
        json!({"sourceNode": OTHER, "startTimestamp": at(-2)}),
    );
    let waiting = pending("kubevirt-evacuation-d02", "d02", OTHER, "api-eviction", -2);
    vec![cr, sized(&d01, "8Gi"), sized(&d02, "8Gi"), running, waiting]
}

/// A pending evacuation migration of `vmi` from `node`, with its recorded cause, created
/// `created` seconds from NOW.
fn pending(name: &str, vmi: &str, node: &str, cause: &str, created: i64) -> Value {
    set(
        set(evacuation(name, vmi, "Pending", node, None), CAUSE, json!(cause)),
        "/metadata/creationTimestamp",
        json!(at(created)),
    )
}

/// `t1` (4Gi, 300 s to go) marked early, its migration pending since NOW.
fn t1_waiting() -> [Value; 3] {
    let [vmi, pod] = tainted_vm("t1", "4Gi", 300);
    let vmi = set(vmi, "/status/evacuationNodeName", json!(NODE));
    [vmi, pod, pending("kubevirt-evacuation-t1", "t1", NODE, "noexecute-taint", 0)]
}

fn cancels(effects: &[Effect]) -> usize {
    effects.iter().filter(|e| matches!(e, Effect::CancelMigration { .. })).count()
}

/// A VM of `memory` on [`NODE`] that evac holds a NoExecute-taint request for, its pod deleted
/// with `deadline` seconds to go.
fn tainted_vm(name: &'static str, memory: &str, deadline: i64) -> [Value; 2] {
    let vm = Vm::new(name).source("noexecute-taint");
    let vmi = set(
        sized(&vm, memory),
        &format!("/metadata/annotations/{}", EVACUATION_REQUEST_ANNOTATION.replace('/', "~1")),
        json!(NODE),
    );
    [vmi, terminating(vm.pod(), deadline)]
}

fn decide(objects: Vec<Value>) -> Vec<Effect> {
    let node = tainted(node(), "example.com/maint", "NoExecute");
    decide_with(&cluster_of(objects), &node, &Settings::default(), NOW)
}

fn marks(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::MarkForEvacuation { vmi, .. } => Some(vmi.name.clone()),
            _ => None,
        })
        .collect()
}

/// No room now, but the slot frees in 126 s: a 4Gi VM (64 s) with 300 s to go is marked at once,
/// for KubeVirt's queue; a 16Gi one (256 s) behind it would end at 446 s and is not, with an event
/// that says it would wait for a slot.
#[test]
fn a_vm_with_a_deadline_is_marked_when_the_queue_starts_it_in_time() {
    let objects: Vec<Value> = drain_ahead()
        .into_iter()
        .chain(tainted_vm("t1", "4Gi", 300))
        .chain(tainted_vm("t3", "16Gi", 300))
        .collect();
    let effects = decide(objects);
    assert_eq!(marks(&effects), ["t1"], "{effects:#?}");
    let deferred = effects.iter().find_map(|e| match e {
        Effect::RecordEvent { vmi, reason: EventReason::EvacuationDeferred, message, .. }
            if vmi.name == "t3" =>
        {
            Some(message.clone())
        }
        _ => None,
    });
    let deferred = deferred.expect("an event for t3");
    assert!(deferred.contains("would wait about 190 s for a migration slot"), "{deferred}");
    // Nothing is requeued before the VM's own migration waits behind the drain's.
    assert_eq!(cancels(&effects), 0, "{effects:#?}");
}

/// The early mark's migration waits behind the drain's pending one: that one is requeued (KubeVirt
/// creates it again, behind), and only that one; the running one is never touched.
#[test]
fn a_drains_pending_migration_is_requeued_behind_a_deadline() {
    let objects: Vec<Value> = drain_ahead().into_iter().chain(t1_waiting()).collect();
    let effects = decide(objects.clone());
    assert_eq!(cancels(&effects), 1, "{effects:#?}");
    let Some(Effect::CancelMigration { migration, node, requeue, vmi, .. }) =
        effects.iter().find(|e| matches!(e, Effect::CancelMigration { .. }))
    else {
        unreachable!()
    };
    assert_eq!(
        (migration.name.as_str(), vmi.name.as_str(), node.as_str(), *requeue),
        ("kubevirt-evacuation-d02", "d02", OTHER, true)
    );

    // Created again behind it, or in the same second (the queue's order within a second is not
    // known): nothing more to do.
    for created in [1, 0] {
        let again = pending("kubevirt-evacuation-d02b", "d02", OTHER, "api-eviction", created);
        let objects: Vec<Value> = objects
            .iter()
            .filter(|o| o["metadata"]["name"] != "kubevirt-evacuation-d02")
            .cloned()
            .chain([again])
            .collect();
        let effects = decide(objects);
        assert_eq!(cancels(&effects), 0, "created at {created}: {effects:#?}");
    }
}

/// A pending migration whose cause evac does not know, or one of a VM with a deadline of its own,
/// keeps its place.
#[test]
fn only_migrations_of_vms_without_a_deadline_are_requeued() {
    for cause in [None, Some("preemption")] {
        let mut objects = drain_ahead();
        let pending = &mut objects[4];
        match cause {
            Some(cause) => pending["metadata"]["annotations"][CAUSE_ANNOTATION] = json!(cause),
            None => {
                pending["metadata"]["annotations"].as_object_mut().unwrap().remove(CAUSE_ANNOTATION);
            }
        }
        objects.extend(t1_waiting());
        let effects = decide(objects);
        assert_eq!(cancels(&effects), 0, "{cause:?}: {effects:#?}");
    }
}
