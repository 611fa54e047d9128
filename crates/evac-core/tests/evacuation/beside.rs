//! Beside KubeVirt's evacuation controller (`kubevirtEvacuationController`, the default): it
//! migrates every marked VMI at once, so evac creates no migration. It marks the VMIs it holds
//! requests for, in its order and within the limits, counts the marked VMIs KubeVirt is about to
//! migrate, records causes on the migrations KubeVirt creates, and calls its requests off.

use serde_json::{json, Value};

use super::cluster_of;
use super::fixtures::*;
use evac_core::effect::{EvacuationSource, MigrationCause as Cause, EVACUATION_REQUEST_ANNOTATION};
use evac_core::evacuation::Settings;
use evac_core::{Effect, ObjectRef};

/// A VMI evac holds a request for, from [`NODE`], for `source`.
fn requested(name: &'static str, source: &'static str) -> Vm {
    Vm::new(name).source(source)
}

fn request_json(vm: &Vm) -> Value {
    set(
        vm.json(),
        &format!("/metadata/annotations/{}", EVACUATION_REQUEST_ANNOTATION.replace('/', "~1")),
        json!(NODE),
    )
}

fn beside(cluster: &TestCluster, node: &Value) -> Vec<Effect> {
    decide_with(cluster, node, &Settings::default(), NOW)
}

fn mark(vmi: &str, source: EvacuationSource) -> Effect {
    Effect::MarkForEvacuation {
        vmi: ObjectRef::new(NS, vmi),
        node: NODE.into(),
        dry_run: false,
        source: Some(source),
    }
}

fn creations(effects: &[Effect]) -> usize {
    effects.iter().filter(|e| matches!(e, Effect::CreateMigration { .. })).count()
}

#[test]
fn the_default_is_beside_kubevirt() {
    assert!(Settings::default().kubevirt_evacuation_controller);
    let settings: Settings = serde_json::from_value(json!({})).unwrap();
    assert!(settings.kubevirt_evacuation_controller);
}

#[test]
fn a_request_is_marked_when_its_migration_may_start() {
    let vm = requested("web", "noexecute-taint");
    let node = tainted(node(), "example.com/broken", "NoExecute");
    let cluster = cluster_of([request_json(&vm), vm.pod()]);
    let effects = beside(&cluster, &node);
    assert_eq!(effects, [mark("web", EvacuationSource::NoexecuteTaint)]);
    // Carried out, it asks for nothing more: the mark is KubeVirt's to act on.
    let mut cluster = cluster;
    cluster.apply(&effects);
    let vmi = cluster.object("VirtualMachineInstance", NS, "web").unwrap();
    assert_eq!(vmi["status"]["evacuationNodeName"], NODE);
    assert!(vmi["metadata"]["annotations"].get(EVACUATION_REQUEST_ANNOTATION).is_none());
    let effects = beside(&cluster, &node);
    assert_eq!(creations(&effects), 0, "{effects:?}");
    assert!(!effects.iter().any(|e| matches!(e, Effect::MarkForEvacuation { .. })), "{effects:?}");
}

#[test]
fn marked_vmis_are_kubevirts_to_migrate() {
    // A drain's marks: KubeVirt's controller creates their migrations; evac creates none.
    let cluster =
        cluster_of(Vm::new("a").marked().objects().into_iter().chain(Vm::new("b").marked().objects()));
    let effects = beside(&cluster, &cordoned());
    assert_eq!(creations(&effects), 0, "{effects:?}");
    // The same cluster with evac creating: two migrations.
    let effects = decide_with(&cluster, &cordoned(), &creating(), NOW);
    assert_eq!(creations(&effects), 2, "{effects:?}");
}

#[test]
fn marked_vmis_kubevirt_is_about_to_migrate_take_the_room() {
    // Two outbound per node: one marked VMI without its migration yet and one running migration
    // leave no room for the request.
    let taint = tainted(node(), "example.com/broken", "NoExecute");
    let vm = requested("late", "noexecute-taint");
    let objects = [kubevirt(None, Some((5, 2))), request_json(&vm), vm.pod()]
        .into_iter()
        .chain(Vm::new("drained").marked().objects())
        .chain(Vm::new("moving").marked().objects())
        .chain([evacuation("kubevirt-evacuation-1", "moving", "Running", NODE, None)]);
    let effects = beside(&cluster_of(objects), &taint);
    assert!(!effects.iter().any(|e| matches!(e, Effect::MarkForEvacuation { .. })), "{effects:?}");
}

#[test]
fn the_soonest_deadline_is_marked_first() {
    let taint = tainted(node(), "example.com/broken", "NoExecute");
    let (late, soon) = (requested("late", "preemption"), requested("soon", "preemption"));
    let objects = vec![
        kubevirt(None, Some((5, 1))),
        request_json(&late),
        terminating(late.pod(), 600),
        request_json(&soon),
        terminating(soon.pod(), 120),
    ];
    let effects = beside(&cluster_of(objects), &taint);
    let marks: Vec<&Effect> =
        effects.iter().filter(|e| matches!(e, Effect::MarkForEvacuation { .. })).collect();
    // The sooner first; the later one is marked too, for KubeVirt's queue, which starts it once
    // the first ends (both take no time here), well before its deadline.
    assert_eq!(
        marks,
        [&mark("soon", EvacuationSource::Preemption), &mark("late", EvacuationSource::Preemption)]
    );
}

#[test]
fn kubevirts_migrations_get_their_cause() {
    let drained = Vm::new("drained").marked();
    let tainted_vm = Vm::new("tainted").marked().source("noexecute-taint");
    let objects = [drained.json(), drained.pod(), tainted_vm.json(), tainted_vm.pod()].into_iter().chain([
        evacuation("kubevirt-evacuation-a", "drained", "Pending", NODE, None),
        evacuation("kubevirt-evacuation-b", "tainted", "Running", NODE, None),
        // Recorded already, or finished: left alone.
        set(
            evacuation("kubevirt-evacuation-c", "drained", "Failed", NODE, Some(-60)),
            "/metadata/annotations/evac.kubevirt.io~1cause",
            json!("drain"),
        ),
    ]);
    let mut cluster = cluster_of(objects);
    let node = tainted(cordoned(), "example.com/broken", "NoExecute");
    let effects = beside(&cluster, &node);
    let annotate =
        |name: &str, cause| Effect::AnnotateMigration { migration: ObjectRef::new(NS, name), cause };
    let causes: Vec<&Effect> =
        effects.iter().filter(|e| matches!(e, Effect::AnnotateMigration { .. })).collect();
    assert_eq!(
        causes,
        [
            &annotate("kubevirt-evacuation-a", Cause::Drain),
            &annotate("kubevirt-evacuation-b", Cause::NoexecuteTaint)
        ]
    );
    cluster.apply(&effects);
    let effects = beside(&cluster, &node);
    assert!(!effects.iter().any(|e| matches!(e, Effect::AnnotateMigration { .. })), "{effects:?}");
}

#[test]
fn a_request_whose_cause_is_gone_is_called_off() {
    // The NoExecute taint went before the pod was deleted: the request goes, nothing migrates.
    let vm = requested("web", "noexecute-taint");
    let mut cluster = cluster_of([request_json(&vm), vm.pod()]);
    let effects = beside(&cluster, &node());
    assert_eq!(effects, [clear("web")]);
    cluster.apply(&effects);
    let vmi = cluster.object("VirtualMachineInstance", NS, "web").unwrap();
    assert_eq!(vmi["metadata"]["annotations"], json!({}));
    assert_eq!(beside(&cluster, &node()), []);
}

/// KubeVirt's evacuation controller retries a failed migration at once, and its migration
/// controller holds the retry Pending in its back-off: that retry is not under way. evac's own
/// evacuation is still given up after repeated failures, and called off when its cause is gone;
/// once the mark is seen gone, the retry, which has not started, is deleted (before, KubeVirt
/// would only create another). One that has started is left to finish.
#[test]
fn a_pending_retry_does_not_keep_an_evacuation_going() {
    let vm = Vm::new("vm").marked().source("noexecute-taint");
    let failed = |ended: &[i64]| -> Vec<Value> {
        ended
            .iter()
            .enumerate()
            .map(|(i, e)| evacuation(&format!("kubevirt-evacuation-f{i}"), "vm", "Failed", NODE, Some(*e)))
            .collect()
    };
    // KubeVirt's retry, created as the failure was seen: no cause recorded yet.
    let retry = |phase: &str| {
        let retry = evacuation("kubevirt-evacuation-retry", "vm", phase, NODE, None);
        set(retry, "/metadata/resourceVersion", json!("7"))
    };
    let cancel = Effect::CancelMigration {
        vmi: ObjectRef::new(NS, "vm"),
        migration: ObjectRef::new(NS, "kubevirt-evacuation-retry"),
        node: NODE.into(),
        resource_version: "7".into(),
        requeue: false,
    };
    let taint = || tainted(node(), "example.com/broken", "NoExecute");
    let cancels =
        |effects: &[Effect]| effects.iter().filter(|e| matches!(e, Effect::CancelMigration { .. })).count();
    let clears = |effects: &[Effect]| effects.contains(&clear("vm"));
    let with = |migrations: Vec<Value>| cluster_of(vm.objects().into_iter().chain(migrations));

    // Five failures, the taint still there: given up; the retry is neither annotated nor deleted
    // while the mark stands, and is deleted by the next decision.
    let mut cluster = with([failed(&[-500, -400, -300, -200, -100]), vec![retry("Pending")]].concat());
    let effects = beside(&cluster, &taint());
    assert!(clears(&effects) && cancels(&effects) == 0, "{effects:?}");
    assert!(!effects.iter().any(|e| matches!(e, Effect::AnnotateMigration { .. })), "{effects:?}");
    cluster.apply(&effects);
    assert_eq!(beside(&cluster, &taint()), std::slice::from_ref(&cancel));
    cluster.apply(std::slice::from_ref(&cancel));
    assert!(cluster.object("VirtualMachineInstanceMigration", NS, "kubevirt-evacuation-retry").is_none());
    assert_eq!(beside(&cluster, &taint()), [], "nothing more");

    // The taint gone after one failure: called off, then the retry deleted.
    let mut cluster = with([failed(&[-10]), vec![retry("Pending")]].concat());
    let effects = beside(&cluster, &node());
    assert_eq!(effects, [clear("vm"), not_in_progress("vm")]);
    cluster.apply(&effects);
    assert_eq!(beside(&cluster, &node()), std::slice::from_ref(&cancel));

    // One failure, the taint still there: KubeVirt retries after its back-off.
    let effects = beside(&with([failed(&[-10]), vec![retry("Pending")]].concat()), &taint());
    assert!(!clears(&effects) && cancels(&effects) == 0, "{effects:?}");

    // A retry under way is left to finish, mark and all.
    for phase in ["Scheduling", "Running"] {
        let effects = beside(&with([failed(&[-10]), vec![retry(phase)]].concat()), &node());
        assert!(!clears(&effects) && cancels(&effects) == 0, "{phase}: {effects:?}");
    }

    // On a drain-tainted node KubeVirt migrates every VMI, marked or not: nothing is called off,
    // and an unmarked VMI's migration stays.
    let drained = || tainted(node(), "kubevirt.io/drain", "NoSchedule");
    let effects = beside(&with([failed(&[-10]), vec![retry("Pending")]].concat()), &drained());
    assert!(!clears(&effects) && cancels(&effects) == 0, "{effects:?}");
    let unmarked =
        cluster_of([Vm::new("vm").json(), Vm::new("vm").pod()].into_iter().chain([retry("Pending")]));
    assert_eq!(cancels(&beside(&unmarked, &drained())), 0);

    // An API eviction's mark is never called off, and a migration of one whose mark a user
    // cancelled runs, as with KubeVirt alone.
    let drain_mark = cluster_of(Vm::new("vm").marked().objects().into_iter().chain([retry("Pending")]));
    let effects = beside(&drain_mark, &node());
    assert!(!clears(&effects) && cancels(&effects) == 0, "{effects:?}");
    let user_cancelled =
        set(retry("Pending"), "/metadata/annotations/evac.kubevirt.io~1cause", json!("drain"));
    let cluster = cluster_of([Vm::new("vm").json(), Vm::new("vm").pod(), user_cancelled]);
    assert_eq!(cancels(&beside(&cluster, &node())), 0);
}

/// A request outlives nothing: once the VM is on another node (moved by a user's migration, the
/// drain taint, or an API eviction's mark KubeVirt acted on), the request naming the node it left
/// is withdrawn by the decision of the node it is on now.
#[test]
fn a_request_for_a_node_the_vm_left_is_withdrawn() {
    let vm = requested("web", "noexecute-taint");
    let moved = set(
        set(request_json(&vm), "/status/nodeName", json!(OTHER)),
        "/metadata/labels/kubevirt.io~1nodeName",
        json!(OTHER),
    );
    let pod = set(vm.pod(), "/spec/nodeName", json!(OTHER));
    let other = set(node(), "/metadata/name", json!(OTHER));
    let mut cluster = cluster_of([moved.clone(), pod.clone()]);
    let withdraw = Effect::ClearEvacuation { vmi: ObjectRef::new(NS, "web"), node: NODE.into() };
    for settings in [Settings::default(), creating()] {
        assert_eq!(decide_with(&cluster, &other, &settings, NOW), std::slice::from_ref(&withdraw));
    }
    cluster.apply(&[withdraw]);
    let vmi = cluster.object("VirtualMachineInstance", NS, "web").unwrap();
    assert_eq!(vmi["metadata"]["annotations"], json!({}), "the request and its source are gone");
    assert_eq!(beside(&cluster, &other), []);
    // Marked for the node it is on now (the descheduler's eviction, marked by KubeVirt): left for
    // the mark to end, after which the request is withdrawn as above.
    let marked = set(moved, "/status/evacuationNodeName", json!(OTHER));
    let marked = set(marked, "/metadata/annotations/kubevirt.io~1eviction-source", json!("descheduler"));
    let effects = beside(&cluster_of([marked, pod]), &other);
    assert!(!effects.iter().any(|e| matches!(e, Effect::ClearEvacuation { .. })), "{effects:?}");
}

/// With `kubevirtEvacuationController` switched off, nothing acts on requests held for KubeVirt's
/// evacuation controller: evac marks their VMIs, as its disruption decision does in that mode, and
/// migrates them itself.
#[test]
fn requests_become_marks_when_evac_creates_the_migrations() {
    let vm = requested("web", "noexecute-taint");
    let taint = tainted(node(), "example.com/broken", "NoExecute");
    let mut cluster = cluster_of([request_json(&vm), vm.pod()]);
    let effects = decide_with(&cluster, &taint, &creating(), NOW);
    assert_eq!(effects, [mark("web", EvacuationSource::NoexecuteTaint)]);
    cluster.apply(&effects);
    let effects = decide_with(&cluster, &taint, &creating(), NOW);
    assert_eq!(creations(&effects), 1, "{effects:?}");
}
