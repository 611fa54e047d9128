use std::sync::Arc;

use evac_core::effect::{EvacuationSource, MigrationCause, MigrationPriority, ObjectRef};
use futures::executor::block_on;
use serde_json::{json, Value};

use super::*;
use crate::MemoryStore;

fn cluster() -> (Arc<MemoryStore>, Executor) {
    let store = Arc::new(
        MemoryStore::from_objects([
            json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                   "metadata": {"name": "vm", "namespace": "ns", "annotations": {"keep": "me"}},
                   "status": {"nodeName": "n1"}}),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "virt-launcher-vm-abcde", "namespace": "ns"}}),
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
        Applied::Unneeded("the mark names no longer this node"),
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
        priority: MigrationPriority::SystemCritical,
    };
    block_on(executor.apply(&effect)).unwrap();
    let (migrations, _) =
        store.list(&Kind::new("kubevirt.io/v1", "VirtualMachineInstanceMigration"), Some("ns"), None, None);
    assert_eq!(migrations.len(), 1);
    let migration = &migrations[0];
    assert!(migration["metadata"]["name"].as_str().unwrap().starts_with("kubevirt-evacuation-"));
    assert_eq!(migration["metadata"]["annotations"]["kubevirt.io/evacuationMigration"], "n1");
    assert_eq!(migration["metadata"]["annotations"]["evac.kubevirt.io/cause"], "preemption");
    assert_eq!(migration["spec"], json!({"vmiName": "vm", "priority": "system-critical"}));
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
