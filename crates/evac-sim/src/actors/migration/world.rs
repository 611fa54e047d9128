//! What one pass of the migration controller reads once: its informers' view of the migrations,
//! their VMIs and the VMIs' pods.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;

use super::{MIGRATION_JOB_LABEL, TARGET_POD_ANNOTATION};
use crate::kinds::{self, migrations};
use crate::objects::{Migration, Pod, Vmi};
use crate::store::Store;

/// What one pass reads once: every migration, the VMIs, the launcher pods by VMI.
pub(super) struct World {
    pub(super) migrations: Vec<Arc<Value>>,
    vmis: HashMap<String, Arc<Value>>,
    /// (namespace/VMI) -> its pods.
    pods: HashMap<String, Vec<Arc<Value>>>,
}

impl World {
    /// Reads the migrations, and the VMIs and pods of the unfinished ones: those of the VMIs'
    /// nodes, of the migrations' target nodes, and the unscheduled ones (the store indexes pods by
    /// node, so this stays cheap in a large cluster).
    pub(super) fn read(store: &Store) -> Self {
        let (migrations, _) = store.list(&migrations(), None, None, None);
        let mut vmis = HashMap::new();
        let mut nodes: BTreeSet<String> = BTreeSet::new();
        for migration in migrations.iter().map(|m| Migration(m)).filter(|m| !m.is_final()) {
            let key = format!("{}/{}", migration.meta().namespace(), migration.vmi_name());
            if let Ok(vmi) = store.get(&kinds::vmis(), migration.meta().namespace(), migration.vmi_name()) {
                nodes.extend(Vmi(&vmi).node_name().map(str::to_owned));
                vmis.insert(key, vmi);
            }
        }
        let mut pods: HashMap<String, Vec<Arc<Value>>> = HashMap::new();
        for migration in migrations.iter().map(|m| Migration(m)).filter(|m| !m.is_final()) {
            let Some(name) = migration.meta().annotation(TARGET_POD_ANNOTATION) else { continue };
            if let Ok(pod) = store.get(&kinds::pods(), migration.meta().namespace(), name) {
                // Pods of the VMI's node are read below.
                let key = format!("{}/{}", migration.meta().namespace(), migration.vmi_name());
                let on_vmis_node = vmis.get(&key).and_then(|v| Vmi(v).node_name()) == Pod(&pod).node_name();
                if !on_vmis_node {
                    pods.entry(key).or_default().push(pod);
                }
            }
        }
        if !vmis.is_empty() {
            for node in &nodes {
                let Ok(on_node) = evac_cluster::FieldSelector::parse(&format!("spec.nodeName={node}")) else {
                    continue;
                };
                let (found, _) = store.list(&kinds::pods(), None, None, Some(&on_node));
                for pod in found {
                    let Some(vmi) = Pod(&pod).vmi() else { continue };
                    let key = format!("{}/{vmi}", Pod(&pod).meta().namespace());
                    if vmis.contains_key(&key) {
                        pods.entry(key).or_default().push(pod);
                    }
                }
            }
        }
        Self { migrations, vmis, pods }
    }

    pub(super) fn vmi_of(&self, migration: Migration<'_>) -> Option<&Arc<Value>> {
        self.vmis.get(&format!("{}/{}", migration.meta().namespace(), migration.vmi_name()))
    }

    pub(super) fn pods_of(&self, migration: Migration<'_>) -> &[Arc<Value>] {
        self.pods
            .get(&format!("{}/{}", migration.meta().namespace(), migration.vmi_name()))
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// The migration's target pod, if it has one.
    pub(super) fn target_pod(&self, migration: Migration<'_>) -> Option<&Arc<Value>> {
        let uid = migration.meta().uid();
        self.pods_of(migration).iter().find(|p| Pod(p).meta().label(MIGRATION_JOB_LABEL) == Some(uid))
    }
}

/// Unfinished migrations per VMI (namespace/name): resource version and name of each.
pub(super) type Unfinished<'w> = BTreeMap<String, Vec<(u64, &'w str)>>;

/// Unfinished migrations per VMI, the oldest first: a later one fails (`canMigrateVMI`).
pub(super) fn unfinished_by_vmi(world: &World) -> Unfinished<'_> {
    let mut unfinished: Unfinished<'_> = BTreeMap::new();
    for migration in world.migrations.iter().map(|m| Migration(m)).filter(|m| !m.is_final()) {
        let key = format!("{}/{}", migration.meta().namespace(), migration.vmi_name());
        unfinished
            .entry(key)
            .or_default()
            .push((migration.meta().resource_version(), migration.meta().name()));
    }
    unfinished
}
