use std::sync::Arc;

use serde_json::json;

use super::*;

fn store() -> MemoryStore {
    MemoryStore::new(Arc::new(crate::SystemClock), 100)
}

fn pods() -> Kind {
    Kind::new("v1", "Pod")
}

fn pod(name: &str, node: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": "web"}}, "spec": {"nodeName": node}})
}

#[test]
fn creation_assigns_what_the_server_owns() {
    let store = store();
    let created = store.create(&pods(), "default", pod("a", "n1"), false).unwrap();
    assert_eq!(created["apiVersion"], "v1");
    assert_eq!(created["kind"], "Pod");
    assert_eq!(created["metadata"]["namespace"], "default");
    assert_eq!(created["metadata"]["resourceVersion"], "2");
    assert!(created["metadata"]["uid"].as_str().unwrap().len() == 36);
    assert!(created["metadata"]["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    let err = store.create(&pods(), "default", pod("a", "n1"), false).unwrap_err();
    assert_eq!((err.code, err.reason), (409, "AlreadyExists"));
    assert_eq!(err.message, r#"pods "a" already exists"#);

    let generated = store
        .create(&pods(), "default", json!({"metadata": {"generateName": "virt-launcher-vm-"}}), false)
        .unwrap();
    let name = generated["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("virt-launcher-vm-") && name.len() == "virt-launcher-vm-".len() + 5, "{name}");
    let err = store.create(&pods(), "default", json!({"metadata": {}}), false).unwrap_err();
    assert_eq!(err.code, 422);
}

#[test]
fn stale_updates_conflict() {
    let store = store();
    let created = store.create(&pods(), "default", pod("a", "n1"), false).unwrap();
    let mut first = (*created).clone();
    first["spec"]["nodeName"] = json!("n2");
    let updated = store.update(&pods(), "default", first, false).unwrap();
    assert_eq!(updated["metadata"]["resourceVersion"], "3");
    assert_eq!(updated["metadata"]["uid"], created["metadata"]["uid"]);

    // Based on the version before that update: 409, nothing changes.
    let mut stale = (*created).clone();
    stale["spec"]["nodeName"] = json!("n3");
    let err = store.update(&pods(), "default", stale, false).unwrap_err();
    assert_eq!((err.code, err.reason), (409, "Conflict"));
    assert!(err
        .message
        .starts_with(r#"Operation cannot be fulfilled on pods "a": the object has been modified"#));
    assert_eq!(store.get(&pods(), "default", "a").unwrap()["spec"]["nodeName"], "n2");
}

#[test]
fn patches_merge_or_apply_and_check_versions() {
    let store = store();
    store.create(&pods(), "default", pod("a", "n1"), false).unwrap();
    let merged = store
        .patch(
            &pods(),
            "default",
            "a",
            &Patch::Merge(json!({"metadata": {"annotations": {"x": "y"}}})),
            false,
        )
        .unwrap();
    assert_eq!(merged["metadata"]["annotations"]["x"], "y");
    assert_eq!(merged["metadata"]["labels"]["app"], "web");
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/status", "value": {"phase": "Running"}}]))
            .unwrap();
    let patched = store.patch(&pods(), "default", "a", &Patch::Json(ops), false).unwrap();
    assert_eq!(patched["status"]["phase"], "Running");
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/spec/nodeName", "value": "other"}])).unwrap();
    assert_eq!(store.patch(&pods(), "default", "a", &Patch::Json(ops), false).unwrap_err().code, 422);
    // A resourceVersion in a patch is a precondition.
    let stale = Patch::Merge(json!({"metadata": {"resourceVersion": "2"}, "spec": {"nodeName": "n9"}}));
    assert_eq!(store.patch(&pods(), "default", "a", &stale, false).unwrap_err().code, 409);
    assert_eq!(store.patch(&pods(), "default", "gone", &stale, false).unwrap_err().code, 404);
}

#[test]
fn dry_runs_change_nothing() {
    let store = store();
    store.create(&pods(), "default", pod("a", "n1"), true).unwrap();
    assert_eq!(store.get(&pods(), "default", "a").unwrap_err().code, 404);
    store.create(&pods(), "default", pod("a", "n1"), false).unwrap();
    let revision = store.revision();
    store.patch(&pods(), "default", "a", &Patch::Merge(json!({"spec": {"nodeName": "n2"}})), true).unwrap();
    store.delete(&pods(), "default", "a", true).unwrap();
    assert_eq!(store.revision(), revision);
    assert_eq!(store.get(&pods(), "default", "a").unwrap()["spec"]["nodeName"], "n1");
}

#[test]
fn lists_filter_by_namespace_and_selectors() {
    let store = store();
    store.create(&pods(), "a", pod("p1", "n1"), false).unwrap();
    store.create(&pods(), "b", pod("p2", "n2"), false).unwrap();
    store.create(&pods(), "b", json!({"metadata": {"name": "p3", "labels": {"app": "db"}}}), false).unwrap();
    let names = |items: Vec<Arc<Value>>| -> Vec<String> {
        items.iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names(store.list(&pods(), None, None, None).0), ["p1", "p2", "p3"]);
    assert_eq!(names(store.list(&pods(), Some("b"), None, None).0), ["p2", "p3"]);
    let web = LabelSelector::parse("app=web").unwrap();
    assert_eq!(names(store.list(&pods(), None, Some(&web), None).0), ["p1", "p2"]);
    let on_n2 = FieldSelector::parse("spec.nodeName=n2").unwrap();
    assert_eq!(names(store.list(&pods(), None, None, Some(&on_n2)).0), ["p2"]);
    assert_eq!(store.list(&pods(), None, None, None).1, store.revision());
}

#[test]
fn watches_replay_in_order_from_a_revision() {
    let store = MemoryStore::new(Arc::new(crate::SystemClock), 4);
    let start = store.revision();
    store.create(&pods(), "default", pod("a", "n1"), false).unwrap();
    store
        .create(
            &Kind::new("kubevirt.io/v1", "VirtualMachineInstance"),
            "default",
            json!({"metadata": {"name": "vm"}}),
            false,
        )
        .unwrap();
    store.patch(&pods(), "default", "a", &Patch::Merge(json!({"spec": {"nodeName": "n2"}})), false).unwrap();
    let deleted = store.delete(&pods(), "default", "a", false).unwrap();
    let (events, revision) = store.events_since(&pods(), start).unwrap();
    assert_eq!(revision, store.revision());
    let seen: Vec<_> = events.iter().map(|e| (e.type_, e.revision)).collect();
    assert_eq!(seen, [(EventType::Added, 2), (EventType::Modified, 4), (EventType::Deleted, 5)]);
    assert_eq!(events[2].object["metadata"]["resourceVersion"], "5");
    assert_eq!(deleted["metadata"]["resourceVersion"], "4");
    // Resuming from the middle gives the rest.
    assert_eq!(store.events_since(&pods(), 4).unwrap().0.len(), 1);
    // History is bounded: older revisions are gone (410), as in etcd after compaction.
    store.create(&pods(), "default", pod("b", "n1"), false).unwrap();
    store.create(&pods(), "default", pod("c", "n1"), false).unwrap();
    let err = store.events_since(&pods(), start).unwrap_err();
    assert_eq!((err.code, err.reason), (410, "Expired"));
    #[cfg(feature = "watch")]
    assert_eq!(*store.subscribe().borrow(), store.revision());
}

#[test]
fn errors_are_kubernetes_status_objects() {
    let err = store().get(&Kind::new("kubevirt.io/v1", "VirtualMachineInstance"), "ns", "vm").unwrap_err();
    let status = err.status();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 404);
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["message"], r#"virtualmachineinstances.kubevirt.io "vm" not found"#);
}

#[test]
fn the_node_index_agrees_with_a_full_scan() {
    let store = store();
    let names = |items: Vec<Arc<Value>>| -> Vec<String> {
        items.iter().map(|o| format!("{}/{}", o["metadata"]["namespace"], o["metadata"]["name"])).collect()
    };
    let check = |step: &str| {
        let (all, _) = store.list(&pods(), None, None, None);
        for node in ["n1", "n2", "n3"] {
            let scanned: Vec<Arc<Value>> =
                all.iter().filter(|p| p["spec"]["nodeName"] == node).cloned().collect();
            let selector = FieldSelector::parse(&format!("spec.nodeName={node}")).unwrap();
            let (indexed, revision) = store.list(&pods(), None, None, Some(&selector));
            assert_eq!(names(indexed), names(scanned.clone()), "{step}: {node}");
            assert_eq!(revision, store.revision());
            let in_b: Vec<Arc<Value>> =
                scanned.iter().filter(|p| p["metadata"]["namespace"] == "b").cloned().collect();
            assert_eq!(
                names(store.list(&pods(), Some("b"), None, Some(&selector)).0),
                names(in_b),
                "{step}: {node} in b"
            );
            let web = LabelSelector::parse("app=web").unwrap();
            let web_pods: Vec<Arc<Value>> =
                scanned.iter().filter(|p| p["metadata"]["labels"]["app"] == "web").cloned().collect();
            assert_eq!(
                names(store.list(&pods(), None, Some(&web), Some(&selector)).0),
                names(web_pods),
                "{step}: {node} web"
            );
        }
    };
    store.create(&pods(), "a", pod("p1", "n1"), false).unwrap();
    store.create(&pods(), "b", pod("p2", "n1"), false).unwrap();
    store.create(&pods(), "b", pod("p3", "n2"), false).unwrap();
    store
        .create(
            &pods(),
            "a",
            json!({"metadata": {"name": "p4", "labels": {"app": "db"}}, "spec": {"nodeName": "n1"}}),
            false,
        )
        .unwrap();
    store.create(&pods(), "a", json!({"metadata": {"name": "unbound"}}), false).unwrap();
    check("created");
    assert_eq!(
        store.list(&pods(), None, None, Some(&FieldSelector::parse("spec.nodeName=n1").unwrap())).0.len(),
        3
    );

    store.patch(&pods(), "b", "p2", &Patch::Merge(json!({"spec": {"nodeName": "n2"}})), false).unwrap();
    check("moved by a patch");
    store.patch(&pods(), "a", "unbound", &Patch::Merge(json!({"spec": {"nodeName": "n3"}})), false).unwrap();
    check("bound");
    store
        .patch(&pods(), "a", "p1", &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})), false)
        .unwrap();
    check("patched in place");
    store.delete(&pods(), "b", "p3", false).unwrap();
    check("deleted");
    store.create(&pods(), "b", pod("p3", "n3"), false).unwrap();
    check("recreated elsewhere");
}

#[test]
fn kind_revisions_move_only_with_their_kind() {
    let store = store();
    let vmis = Kind::new("kubevirt.io/v1", "VirtualMachineInstance");
    assert_eq!(store.revision_of(&[pods()]), 0);
    store.create(&pods(), "default", pod("a", "n1"), false).unwrap();
    let pods_at = store.revision();
    assert_eq!(store.revision_of(&[pods()]), pods_at);
    assert_eq!(store.revision_of(std::slice::from_ref(&vmis)), 0);

    store.create(&vmis, "default", json!({"metadata": {"name": "vm"}}), false).unwrap();
    let vmis_at = store.revision();
    assert_eq!(store.revision_of(&[pods()]), pods_at, "a VMI changed, not a pod");
    assert_eq!(store.revision_of(std::slice::from_ref(&vmis)), vmis_at);
    assert_eq!(store.revision_of(&[pods(), vmis.clone()]), vmis_at);

    // Dry runs and failed writes move nothing.
    store.patch(&pods(), "default", "a", &Patch::Merge(json!({"spec": {"nodeName": "n2"}})), true).unwrap();
    assert!(store.patch(&pods(), "default", "b", &Patch::Merge(json!({})), false).is_err());
    assert_eq!(store.revision_of(&[pods()]), pods_at);

    store.patch(&pods(), "default", "a", &Patch::Merge(json!({"spec": {"nodeName": "n2"}})), false).unwrap();
    let pods_at = store.revision();
    assert_eq!(store.revision_of(&[pods()]), pods_at);
    assert_eq!(store.revision_of(std::slice::from_ref(&vmis)), vmis_at);

    store.delete(&vmis, "default", "vm", false).unwrap();
    assert_eq!(store.revision_of(std::slice::from_ref(&vmis)), store.revision());
    assert_eq!(store.revision_of(&[pods()]), pods_at);
    assert_eq!(store.revision_of(&[pods(), vmis]), store.revision());
}
