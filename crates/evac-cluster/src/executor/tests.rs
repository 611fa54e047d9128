use std::sync::{Arc, Mutex};

use evac_core::effect::{Access, EffectType, EvacuationSource, EventReason, MigrationCause, ObjectRef};
use futures::executor::block_on;
use serde_json::{json, Value};

use super::*;
use crate::MemoryStore;

fn cluster() -> (Arc<MemoryStore>, Executor) {
    let store = Arc::new(
        MemoryStore::from_objects([
            json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                   "metadata": {"name": "vm", "namespace": "ns", "uid": "uid-vm", "annotations": {"keep": "me"}},
                   "status": {"nodeName": "n1"}}),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "virt-launcher-vm-abcde", "namespace": "ns"}}),
            json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
                   "metadata": {"name": "kubevirt-evacuation-x1", "namespace": "other",
                                "annotations": {"kubevirt.io/evacuationMigration": "n1"}},
                   "spec": {"vmiName": "vm"}}),
        ])
        .unwrap(),
    );
    let executor = Executor::new(Arc::clone(&store) as _);
    (store, executor)
}

fn vmi(store: &MemoryStore) -> Value {
    (*store.get(&Kind::new("kubevirt.io/v1", "VirtualMachineInstance"), "ns", "vm").unwrap()).clone()
}

fn mark(dry_run: bool, name: &str, node: &str) -> Effect {
    Effect::MarkForEvacuation {
        vmi: ObjectRef::new("ns", name),
        node: node.into(),
        dry_run,
        source: Some(EvacuationSource::Descheduler),
    }
}

fn request(node: &str) -> Effect {
    Effect::RequestEvacuation {
        vmi: ObjectRef::new("ns", "vm"),
        node: node.into(),
        source: EvacuationSource::NoexecuteTaint,
    }
}

/// A request holds the evacuation without marking; the mark replaces it; a clear removes a
/// request for its node only, with the source.
#[test]
fn requests_are_held_marked_and_cleared() {
    let (store, executor) = cluster();
    block_on(executor.apply(&request("n1"))).unwrap();
    let requested = vmi(&store);
    assert_eq!(requested["status"].get("evacuationNodeName"), None, "a request is not a mark");
    let annotations = &requested["metadata"]["annotations"];
    assert_eq!(annotations["evac.kubevirt.io/evacuate-from"], "n1");
    assert_eq!(annotations["kubevirt.io/eviction-source"], "noexecute-taint");
    assert!(matches!(block_on(executor.apply(&clear("n2"))).unwrap(), Applied::Unneeded(_)));
    assert_eq!(vmi(&store)["metadata"]["annotations"]["evac.kubevirt.io/evacuate-from"], "n1");
    assert_eq!(block_on(executor.apply(&clear("n1"))).unwrap(), Applied::Written);
    assert_eq!(vmi(&store)["metadata"]["annotations"], json!({"keep": "me"}));

    block_on(executor.apply(&request("n1"))).unwrap();
    block_on(executor.apply(&mark(false, "vm", "n1"))).unwrap();
    let marked = vmi(&store);
    assert_eq!(marked["status"]["evacuationNodeName"], "n1");
    assert_eq!(marked["metadata"]["annotations"].get("evac.kubevirt.io/evacuate-from"), None);
}

/// A cause is recorded on a migration someone else created; a migration gone is no error.
#[test]
fn causes_are_recorded_on_migrations() {
    let (store, executor) = cluster();
    let annotate = |name: &str| Effect::AnnotateMigration {
        migration: ObjectRef::new("other", name),
        cause: MigrationCause::Drain,
    };
    assert_eq!(block_on(executor.apply(&annotate("kubevirt-evacuation-x1"))).unwrap(), Applied::Written);
    let kind = Kind::new("kubevirt.io/v1", "VirtualMachineInstanceMigration");
    let migration = store.get(&kind, "other", "kubevirt-evacuation-x1").unwrap();
    assert_eq!(
        migration["metadata"]["annotations"],
        json!({"kubevirt.io/evacuationMigration": "n1", "evac.kubevirt.io/cause": "drain"})
    );
    assert!(matches!(block_on(executor.apply(&annotate("gone"))).unwrap(), Applied::Unneeded(_)));
}

fn clear(node: &str) -> Effect {
    Effect::ClearEvacuation { vmi: ObjectRef::new("ns", "vm"), node: node.into() }
}

#[test]
fn marks_change_the_vmi_unless_dry_run() {
    let (store, executor) = cluster();
    assert_eq!(block_on(executor.apply(&mark(true, "vm", "n1"))).unwrap(), Applied::Written);
    assert_eq!(vmi(&store)["status"].get("evacuationNodeName"), None, "a dry run changes nothing");
    block_on(executor.apply(&mark(false, "vm", "n1"))).unwrap();
    let marked = vmi(&store);
    assert_eq!(marked["status"]["evacuationNodeName"], "n1");
    assert_eq!(marked["status"]["nodeName"], "n1");
    assert_eq!(marked["metadata"]["annotations"]["kubevirt.io/eviction-source"], "descheduler");
    assert_eq!(marked["metadata"]["annotations"]["keep"], "me");
    let err = block_on(executor.apply(&mark(false, "gone", "n1"))).unwrap_err();
    assert_eq!(err.effect, "MarkForEvacuation");
    assert_eq!(err.error.code, 404);
    assert_eq!(err.to_string(), r#"virtualmachineinstances.kubevirt.io "gone" not found"#);
}

#[test]
fn a_mark_is_cleared_only_while_it_names_the_node() {
    let (store, executor) = cluster();
    assert_eq!(
        block_on(executor.apply(&clear("n1"))).unwrap(),
        Applied::Unneeded("neither a mark nor a request names this node"),
        "no mark: nothing to clear"
    );
    block_on(executor.apply(&mark(false, "vm", "n2"))).unwrap();
    assert!(matches!(block_on(executor.apply(&clear("n1"))).unwrap(), Applied::Unneeded(_)));
    assert_eq!(vmi(&store)["status"]["evacuationNodeName"], "n2", "a mark for another node stays");
    assert_eq!(block_on(executor.apply(&clear("n2"))).unwrap(), Applied::Written);
    let cleared = vmi(&store);
    assert_eq!(cleared["status"].get("evacuationNodeName"), None);
    assert_eq!(cleared["metadata"]["annotations"].get("kubevirt.io/eviction-source"), None);
    assert_eq!(cleared["metadata"]["annotations"]["keep"], "me");
    let gone = Effect::ClearEvacuation { vmi: ObjectRef::new("ns", "gone"), node: "n1".into() };
    assert_eq!(block_on(executor.apply(&gone)).unwrap(), Applied::Unneeded("the VMI is gone"));
}

#[test]
fn migrations_are_created_as_kubevirt_creates_them_with_their_cause() {
    let (store, executor) = cluster();
    let effect = Effect::CreateMigration {
        vmi: ObjectRef::new("ns", "vm"),
        node: "n1".into(),
        cause: Some(MigrationCause::Preemption),
        priority: None,
    };
    block_on(executor.apply(&effect)).unwrap();
    let (migrations, _) =
        store.list(&Kind::new("kubevirt.io/v1", "VirtualMachineInstanceMigration"), Some("ns"), None, None);
    assert_eq!(migrations.len(), 1);
    let migration = &migrations[0];
    assert!(migration["metadata"]["name"].as_str().unwrap().starts_with("kubevirt-evacuation-"));
    assert_eq!(migration["metadata"]["annotations"]["kubevirt.io/evacuationMigration"], "n1");
    assert_eq!(migration["metadata"]["annotations"]["evac.kubevirt.io/cause"], "preemption");
    assert_eq!(
        migration["spec"],
        json!({"vmiName": "vm"}),
        "evac sets no priority: only virt-controller may"
    );
}

#[test]
fn pod_annotations_are_set_and_removed_in_one_patch() {
    let (store, executor) = cluster();
    let annotate = |annotations: &[(&str, Option<&str>)]| Effect::AnnotatePod {
        pod: ObjectRef::new("ns", "virt-launcher-vm-abcde"),
        annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.map(str::to_owned))).collect(),
    };
    block_on(executor.apply(&annotate(&[("a", Some("1")), ("b", Some(""))]))).unwrap();
    block_on(executor.apply(&annotate(&[("a", None)]))).unwrap();
    let pod = store.get(&Kind::new("v1", "Pod"), "ns", "virt-launcher-vm-abcde").unwrap();
    assert_eq!(pod["metadata"]["annotations"], json!({"b": ""}));
}

/// An API eviction's mark (no source) removes a source an earlier mark left: the annotation
/// names the latest requester.
#[test]
fn a_mark_without_a_source_removes_the_annotation() {
    let (store, executor) = cluster();
    block_on(executor.apply(&mark(false, "vm", "n1"))).unwrap();
    let plain = Effect::MarkForEvacuation {
        vmi: ObjectRef::new("ns", "vm"),
        node: "n1".into(),
        dry_run: false,
        source: None,
    };
    block_on(executor.apply(&plain)).unwrap();
    let marked = vmi(&store);
    assert_eq!(marked["status"]["evacuationNodeName"], "n1");
    assert_eq!(marked["metadata"]["annotations"].get("kubevirt.io/eviction-source"), None);
    assert_eq!(marked["metadata"]["annotations"]["keep"], "me");
}

/// An event is a `v1` Event on the VMI, as client-go records one, written once: a name derived
/// from the VMI's uid, reason and node, a create refused with 409 for the same event, and no
/// write at all once the executor has recorded it.
#[test]
fn events_are_recorded_once_on_the_vmi() {
    let (store, executor) = cluster();
    let uid = vmi(&store)["metadata"]["uid"].as_str().unwrap().to_owned();
    let event = |node: &str| Effect::RecordEvent {
        vmi: ObjectRef::new("ns", "vm"),
        node: node.into(),
        reason: EventReason::EvacuationGivenUp,
        message: "gave up".into(),
    };
    assert_eq!(block_on(executor.apply(&event("n1"))).unwrap(), Applied::Written);
    let name = event_name("vm", &uid, EventReason::EvacuationGivenUp, "n1");
    assert!(name.starts_with("vm.") && name.len() == "vm.".len() + 16, "{name}");
    let events = Kind::new("v1", "Event");
    let recorded = store.get(&events, "ns", &name).unwrap();
    assert_eq!(recorded["involvedObject"]["kind"], "VirtualMachineInstance");
    assert_eq!(recorded["involvedObject"]["name"], "vm");
    assert_eq!(recorded["involvedObject"]["uid"], uid.as_str());
    assert_eq!(recorded["reason"], "EvacuationGivenUp");
    assert_eq!(recorded["message"], "gave up");
    assert_eq!(recorded["type"], "Warning");
    assert_eq!(recorded["source"]["component"], "evac");
    assert_eq!(recorded["count"], 1);
    assert!(recorded["firstTimestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
    // Again: remembered, nothing written.
    let revision = store.revision();
    assert_eq!(block_on(executor.apply(&event("n1"))).unwrap(), Applied::Unneeded("recorded already"));
    assert_eq!(store.revision(), revision);
    // Another executor (a restarted controller) is refused by the API server instead.
    let restarted = Executor::new(Arc::clone(&store) as _);
    assert_eq!(block_on(restarted.apply(&event("n1"))).unwrap(), Applied::Unneeded("recorded already"));
    // Another node is another event.
    assert_eq!(block_on(executor.apply(&event("n2"))).unwrap(), Applied::Written);
    // A VMI that is gone has nothing to record on.
    let gone = Effect::RecordEvent {
        vmi: ObjectRef::new("ns", "gone"),
        node: "n1".into(),
        reason: EventReason::EvacuationDeferred,
        message: "later".into(),
    };
    assert_eq!(block_on(executor.apply(&gone)).unwrap(), Applied::Unneeded("the VMI is gone"));
}

/// A store that records each write it passes on, as the RBAC access it needs.
struct Recording {
    inner: Arc<MemoryStore>,
    writes: Mutex<Vec<Access>>,
}

impl Recording {
    fn record(&self, verb: &'static str, kind: &Kind) {
        let group = kind.api_version.split_once('/').map_or("", |(group, _)| group);
        let resource = evac_core::cluster::resource_for_kind(&kind.kind);
        let known = EffectType::ALL.iter().flat_map(|t| t.writes().iter());
        let access = known
            .copied()
            .find(|a| a.verb == verb && a.group == group && a.resource == resource)
            .unwrap_or(Access { verb, group: "<unlisted>", resource: "<unlisted>" });
        self.writes.lock().unwrap().push(access);
    }
}

impl crate::ObjectSource for Recording {
    fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<[u8]>, evac_core::ReadError> {
        crate::ObjectSource::get(&*self.inner, api_version, kind, namespace, name)
    }

    fn list(
        &self,
        api_version: &str,
        kind: &str,
        query: &crate::ListQuery<'_>,
    ) -> Result<Vec<u8>, evac_core::ReadError> {
        crate::ObjectSource::list(&*self.inner, api_version, kind, query)
    }
}

impl ClusterStore for Recording {
    fn create<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        object: Value,
        dry_run: bool,
    ) -> futures::future::BoxFuture<'a, Result<(), ApiError>> {
        self.record("create", kind);
        ClusterStore::create(&*self.inner, kind, namespace, object, dry_run)
    }

    fn patch<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        patch: &'a Patch,
        dry_run: bool,
    ) -> futures::future::BoxFuture<'a, Result<(), ApiError>> {
        self.record("patch", kind);
        ClusterStore::patch(&*self.inner, kind, namespace, name, patch, dry_run)
    }

    fn delete<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        resource_version: Option<&'a str>,
    ) -> futures::future::BoxFuture<'a, Result<(), ApiError>> {
        self.record("delete", kind);
        ClusterStore::delete(&*self.inner, kind, namespace, name, resource_version)
    }
}

/// The [`Effect::CancelMigration`] of the store's migration, at its current version.
fn cancel(store: &MemoryStore) -> Effect {
    let migration = store.get(&migration_kind(), "other", "kubevirt-evacuation-x1").unwrap();
    Effect::CancelMigration {
        vmi: ObjectRef::new("ns", "vm"),
        migration: ObjectRef::new("other", "kubevirt-evacuation-x1"),
        node: "n1".into(),
        resource_version: migration["metadata"]["resourceVersion"].as_str().unwrap().to_owned(),
        requeue: false,
    }
}

fn migration_kind() -> Kind {
    Kind::new("kubevirt.io/v1", "VirtualMachineInstanceMigration")
}

/// A migration is deleted only at the version decided on: one whose status moved on since
/// (KubeVirt scheduled it) stays; one already gone needs nothing.
#[test]
fn a_migration_is_cancelled_only_at_the_version_decided_on() {
    let (store, executor) = cluster();
    let stale = cancel(&store);
    let started = json!({"status": {"phase": "Scheduling"}});
    store.patch(&migration_kind(), "other", "kubevirt-evacuation-x1", &Patch::Merge(started), false).unwrap();
    assert_eq!(block_on(executor.apply(&stale)).unwrap(), Applied::Unneeded("the migration changed"));
    assert!(store.get(&migration_kind(), "other", "kubevirt-evacuation-x1").is_ok(), "a started one stays");

    let current = cancel(&store);
    assert_eq!(block_on(executor.apply(&current)).unwrap(), Applied::Written);
    assert!(store.get(&migration_kind(), "other", "kubevirt-evacuation-x1").is_err(), "deleted");
    assert_eq!(block_on(executor.apply(&current)).unwrap(), Applied::Unneeded("the migration is gone"));
}

/// Every effect type writes exactly what [`Effect::writes`] lists for it, which is what `deploy/`
/// grants: a write the table lacks would be refused by RBAC in a cluster.
#[test]
fn every_effect_writes_what_the_rbac_table_lists() {
    let pod = ObjectRef::new("ns", "virt-launcher-vm-abcde");
    let effects = [
        mark(false, "vm", "n1"),
        Effect::CreateMigration {
            vmi: ObjectRef::new("ns", "vm"),
            node: "n1".into(),
            cause: Some(MigrationCause::Drain),
            priority: None,
        },
        Effect::AnnotatePod {
            pod,
            annotations: [("a".to_owned(), Some("b".to_owned()))].into_iter().collect(),
        },
        clear("n1"),
        request("n1"),
        Effect::AnnotateMigration {
            migration: ObjectRef::new("other", "kubevirt-evacuation-x1"),
            cause: MigrationCause::ApiEviction,
        },
        Effect::RecordEvent {
            vmi: ObjectRef::new("ns", "vm"),
            node: "n1".into(),
            reason: EventReason::EvacuationGivenUp,
            message: "gave up".into(),
        },
        cancel(&cluster().0),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for effect in effects {
        let (store, marker) = cluster();
        if matches!(effect, Effect::ClearEvacuation { .. }) {
            // Something to clear.
            block_on(marker.apply(&mark(false, "vm", "n1"))).unwrap();
        }
        let recording = Arc::new(Recording { inner: store, writes: Mutex::default() });
        let executor = Executor::new(Arc::clone(&recording) as _);
        block_on(executor.apply(&effect)).unwrap();
        let mut writes = recording.writes.lock().unwrap().clone();
        writes.dedup();
        assert_eq!(writes, effect.writes(), "{}", effect.type_name());
        seen.insert(effect.type_name());
    }
    assert_eq!(seen.len(), EffectType::ALL.len(), "every effect type is tried");
}

/// Every decision carried out on a VMI's behalf is told on it in a `Normal` event, once; the
/// simulator's KubeVirt (an untold executor) records none.
#[test]
fn decisions_carried_out_are_told_in_events() {
    let events = |store: &MemoryStore| {
        let (events, _) = store.list(&Kind::new("v1", "Event"), Some("ns"), None, None);
        events
            .iter()
            .map(|e| (e["type"].clone(), e["reason"].clone(), e["message"].clone()))
            .collect::<Vec<_>>()
    };
    let (store, executor) = cluster();
    block_on(executor.apply(&request("n1"))).unwrap();
    block_on(executor.apply(&request("n1"))).unwrap();
    assert_eq!(
        events(&store),
        [(
            json!("Normal"),
            json!("EvacuationRequested"),
            json!("evac holds an evacuation of the VMI from node n1 (noexecute-taint) until its migration may start")
        )]
    );
    block_on(executor.apply(&clear("n1"))).unwrap();
    assert!(events(&store).iter().any(|(_, reason, _)| reason == "EvacuationCalledOff"));
    // A dry-run mark changes nothing and tells nothing.
    block_on(executor.apply(&mark(true, "vm", "n1"))).unwrap();
    assert!(!events(&store).iter().any(|(_, reason, _)| reason == "EvacuationMarked"));

    let (store, _) = cluster();
    let untold = Executor::untold(Arc::clone(&store) as _);
    block_on(untold.apply(&mark(false, "vm", "n1"))).unwrap();
    assert_eq!(events(&store), []);
}
