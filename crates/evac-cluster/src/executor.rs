//! The effect executor: what each effect writes, decided once for every back end.
//!
//! Each effect is one write (up to three for [`Effect::ClearEvacuation`]) that is safe to repeat:
//! marks and annotations are merge patches of fixed values, and a mark is cleared only while it
//! still names the node it was decided for, through a JSON patch whose `test` the API server
//! checks atomically (a newer mark for another node stays). A migration is deleted only at the
//! version decided on (a `resourceVersion` precondition), so one that has started since stays. An event has a name derived from
//! what it is about, so that recording it again is refused (409) instead of repeated, and the
//! executor remembers the events it recorded, so that a decision repeated every pass does not
//! write every pass.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use evac_core::effect::{
    EvacuationSource, EventReason, MigrationCause, MigrationPriority, ObjectRef, CAUSE_ANNOTATION,
    EVACUATION_MIGRATION_ANNOTATION, EVACUATION_MIGRATION_PREFIX, EVACUATION_REQUEST_ANNOTATION,
    EVICTION_SOURCE_ANNOTATION,
};
use evac_core::kubevirt::{EVENT_KIND, MIGRATION_KIND, POD_KIND, VMI_KIND};
use evac_core::Effect;
use serde_json::{json, Value};

use crate::{ApiError, ClusterStore, Kind, Patch};

/// Carries out effects on a [`ClusterStore`].
#[derive(Clone)]
pub struct Executor {
    store: Arc<dyn ClusterStore>,
    /// The events recorded (`namespace/name`), forgotten all at once when there are too many.
    recorded: Arc<Mutex<HashSet<String>>>,
    /// Whether a decision carried out on a VMI's behalf is told on it in an event (evac's
    /// hosts), or not (the simulator's model of KubeVirt, which records its own).
    tells: bool,
}

/// How many recorded events the executor remembers before it starts over: forgetting costs one
/// create refused with 409 per event.
const RECORDED_EVENTS_REMEMBERED: usize = 4096;
/// Who records evac's events (`source.component`, `reportingComponent`).
pub const EVENT_COMPONENT: &str = "evac";

/// What carrying out an effect did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The write was made (or checked, for a dry run).
    Written,
    /// Nothing was left to do; the reason says why (e.g. the mark names another node now).
    Unneeded(&'static str),
}

/// An effect the cluster refused, or that could not reach it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .error.message)]
pub struct EffectError {
    /// The effect's type (`MarkForEvacuation`, ...).
    pub effect: &'static str,
    /// The API server's answer.
    pub error: ApiError,
}

impl Executor {
    /// An executor writing to `store`.
    pub fn new(store: Arc<dyn ClusterStore>) -> Self {
        Self { store, recorded: Arc::default(), tells: true }
    }

    /// An executor that records no event for the decisions it carries out (only the events
    /// effects ask for): for the simulator's KubeVirt, whose controllers are not evac.
    pub fn untold(store: Arc<dyn ClusterStore>) -> Self {
        Self { tells: false, ..Self::new(store) }
    }

    /// The store effects are written to (and read from).
    pub fn store(&self) -> &Arc<dyn ClusterStore> {
        &self.store
    }

    /// Carries out one effect. A dry-run effect is carried out as a dry-run write.
    pub async fn apply(&self, effect: &Effect) -> Result<Applied, EffectError> {
        let fail = |error| EffectError { effect: effect.type_name(), error };
        let vmis = Kind::new(VMI_KIND.0, VMI_KIND.1);
        match effect {
            Effect::MarkForEvacuation { vmi, node, dry_run, source } => {
                let patch = Patch::Merge(evacuation_patch(node, *source));
                self.store.patch(&vmis, &vmi.namespace, &vmi.name, &patch, *dry_run).await.map_err(fail)?;
                if !*dry_run {
                    let why = source.map_or_else(|| "an eviction".to_owned(), |s| s.as_str().to_owned());
                    let message = format!("evac marked the VMI for evacuation from node {node} ({why})");
                    self.tell(vmi, node, EventReason::EvacuationMarked, &message).await;
                }
            }
            Effect::CreateMigration { vmi, node, cause, priority } => {
                let migrations = Kind::new(MIGRATION_KIND.0, MIGRATION_KIND.1);
                let migration = evacuation_migration(&vmi.name, node, *cause, *priority);
                self.store.create(&migrations, &vmi.namespace, migration, false).await.map_err(fail)?;
                let message = match cause {
                    Some(cause) => format!(
                        "evac created the VMI's evacuation migration from node {node} ({})",
                        cause.as_str()
                    ),
                    None => format!("evac created the VMI's evacuation migration from node {node}"),
                };
                self.tell(vmi, node, EventReason::EvacuationMigrationCreated, &message).await;
            }
            Effect::AnnotatePod { pod, annotations } => {
                let pods = Kind::new(POD_KIND.0, POD_KIND.1);
                let patch = Patch::Merge(annotations_patch(annotations));
                self.store.patch(&pods, &pod.namespace, &pod.name, &patch, false).await.map_err(fail)?;
            }
            Effect::RequestEvacuation { vmi, node, source } => {
                let patch = Patch::Merge(json!({"metadata": {"annotations": {
                    EVACUATION_REQUEST_ANNOTATION: node,
                    EVICTION_SOURCE_ANNOTATION: source.as_str(),
                }}}));
                self.store.patch(&vmis, &vmi.namespace, &vmi.name, &patch, false).await.map_err(fail)?;
                let message = format!(
                    "evac holds an evacuation of the VMI from node {node} ({}) until its migration may start",
                    source.as_str()
                );
                self.tell(vmi, node, EventReason::EvacuationRequested, &message).await;
            }
            Effect::AnnotateMigration { migration, cause } => {
                let migrations = Kind::new(MIGRATION_KIND.0, MIGRATION_KIND.1);
                let patch =
                    Patch::Merge(json!({"metadata": {"annotations": {CAUSE_ANNOTATION: cause.as_str()}}}));
                match self
                    .store
                    .patch(&migrations, &migration.namespace, &migration.name, &patch, false)
                    .await
                {
                    Ok(()) => {}
                    Err(e) if e.code == 404 => return Ok(Applied::Unneeded("the migration is gone")),
                    Err(e) => return Err(fail(e)),
                }
            }
            Effect::CancelMigration { vmi, migration, node, resource_version, requeue } => {
                return self
                    .cancel_migration(vmi, migration, node, resource_version, *requeue)
                    .await
                    .map_err(fail);
            }
            Effect::ClearEvacuation { vmi, node } => {
                return self.clear_evacuation(vmi, node).await.map_err(fail);
            }
            Effect::RecordEvent { vmi, node, reason, message } => {
                return self.record_event(vmi, node, *reason, message).await.map_err(fail);
            }
        }
        Ok(Applied::Written)
    }

    /// Deletes an evacuation migration that has not started, only while it is as decided (its
    /// `resourceVersion`), and says why on the VMI.
    async fn cancel_migration(
        &self,
        vmi: &ObjectRef,
        migration: &ObjectRef,
        node: &str,
        resource_version: &str,
        requeue: bool,
    ) -> Result<Applied, ApiError> {
        let migrations = Kind::new(MIGRATION_KIND.0, MIGRATION_KIND.1);
        let deleted = self
            .store
            .delete(&migrations, &migration.namespace, &migration.name, Some(resource_version))
            .await;
        match deleted {
            Ok(()) => {}
            Err(e) if e.code == 404 => return Ok(Applied::Unneeded("the migration is gone")),
            // The precondition failed: it moved on (started, or ended) since the decision, which
            // the next one sees.
            Err(e) if e.code == 409 => return Ok(Applied::Unneeded("the migration changed")),
            Err(e) => return Err(e),
        }
        let (reason, why) = if requeue {
            (
                EventReason::EvacuationMigrationRequeued,
                ", so that migrations of VMs whose pods are being deleted go first: KubeVirt's \
                 evacuation controller creates it again, behind them",
            )
        } else {
            (EventReason::EvacuationMigrationCancelled, ": the evacuation was called off")
        };
        let message = format!(
            "evac deleted the VMI's evacuation migration {} from node {node} before it started{why}",
            migration.name
        );
        self.tell(vmi, node, reason, &message).await;
        Ok(Applied::Written)
    }

    /// Clears the mark, then the request, each only while it names this node, and the eviction
    /// source with them.
    async fn clear_evacuation(&self, vmi: &ObjectRef, node: &str) -> Result<Applied, ApiError> {
        let vmis = Kind::new(VMI_KIND.0, VMI_KIND.1);
        let mut cleared = false;
        for clear in [clear_evacuation_patch(node), clear_request_patch(node)] {
            match self.store.patch(&vmis, &vmi.namespace, &vmi.name, &Patch::Json(clear), false).await {
                Ok(()) => cleared = true,
                // 422: the test failed (none, or one for another node): not ours to clear.
                Err(e) if e.code == 422 => {}
                Err(e) if e.code == 404 => return Ok(Applied::Unneeded("the VMI is gone")),
                Err(e) => return Err(e),
            }
        }
        if !cleared {
            return Ok(Applied::Unneeded("neither a mark nor a request names this node"));
        }
        let source = Patch::Merge(json!({"metadata": {"annotations": {EVICTION_SOURCE_ANNOTATION: null}}}));
        self.store.patch(&vmis, &vmi.namespace, &vmi.name, &source, false).await?;
        let message =
            format!("evac called off the evacuation of the VMI from node {node}: its cause is gone");
        self.tell(vmi, node, EventReason::EvacuationCalledOff, &message).await;
        Ok(Applied::Written)
    }

    /// Records a `Normal` event on the VMI for a decision carried out, so that `kubectl describe
    /// vmi` tells what evac did. Best effort: a failed event is logged, the write it reports stands.
    async fn tell(&self, vmi: &ObjectRef, node: &str, reason: EventReason, message: &str) {
        if !self.tells {
            return;
        }
        if let Err(error) = self.record_event(vmi, node, reason, message).await {
            tracing::warn!(vmi = %vmi, reason = reason.as_str(), error = %error.message, "cannot record an event");
        }
    }

    /// Creates the event, once: the VMI's uid goes in `involvedObject` (`kubectl describe`
    /// selects events by it) and in the name.
    async fn record_event(
        &self,
        vmi: &ObjectRef,
        node: &str,
        reason: EventReason,
        message: &str,
    ) -> Result<Applied, ApiError> {
        self.record_on(VMI_KIND, vmi, node, reason, message).await
    }

    /// Records a `Normal` event on a pod (the hold endpoint's holds), once per pod, reason and
    /// `about`. Best effort, as [`Executor::apply`]'s own events: a failed one is logged.
    pub async fn tell_pod(&self, pod: &ObjectRef, about: &str, reason: EventReason, message: &str) {
        if let Err(error) = self.record_on(POD_KIND, pod, about, reason, message).await {
            tracing::warn!(pod = %pod, reason = reason.as_str(), error = %error.message, "cannot record an event");
        }
    }

    /// Creates an event about an object of `kind`, once: its uid goes in `involvedObject` and,
    /// with `about`, in the name.
    async fn record_on(
        &self,
        kind: (&str, &str),
        object: &ObjectRef,
        about: &str,
        reason: EventReason,
        message: &str,
    ) -> Result<Applied, ApiError> {
        let raw = match self.store.get(kind.0, kind.1, Some(&object.namespace), &object.name) {
            Ok(raw) => raw,
            Err(e) if e.is_not_found() => {
                return Ok(Applied::Unneeded(if kind == VMI_KIND {
                    "the VMI is gone"
                } else {
                    "the pod is gone"
                }))
            }
            // A read the store could not answer: the API server was unreachable.
            Err(e) => return Err(ApiError::unavailable(e.to_string())),
        };
        let uid = serde_json::from_slice::<Value>(&raw)
            .ok()
            .and_then(|v| v.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        let name = event_name(&object.name, &uid, reason, about);
        let key = format!("{}/{name}", object.namespace);
        if self.recorded.lock().unwrap_or_else(PoisonError::into_inner).contains(&key) {
            return Ok(Applied::Unneeded("recorded already"));
        }
        let event = event(kind, object, &uid, &name, reason, message, &self.store.timestamp());
        let events = Kind::new(EVENT_KIND.0, EVENT_KIND.1);
        let applied = match self.store.create(&events, &object.namespace, event, false).await {
            Ok(()) => Applied::Written,
            Err(e) if e.code == 409 => Applied::Unneeded("recorded already"),
            Err(e) => return Err(e),
        };
        let mut recorded = self.recorded.lock().unwrap_or_else(PoisonError::into_inner);
        if recorded.len() >= RECORDED_EVENTS_REMEMBERED {
            recorded.clear();
        }
        recorded.insert(key);
        Ok(applied)
    }
}

/// An event's name: the object's, and a hash of what the event is about (the object's uid, the
/// reason, the node for a VMI's), so that the same event is never recorded twice.
pub fn event_name(vmi: &str, uid: &str, reason: EventReason, node: &str) -> String {
    // FNV-1a: stable across builds and platforms, which the std hasher is not.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in [uid, reason.as_str(), node].join("\0").bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{vmi}.{hash:016x}")
}

/// The `v1` Event about an object of `kind`, as client-go's event recorder writes one.
fn event(
    kind: (&str, &str),
    object: &ObjectRef,
    uid: &str,
    name: &str,
    reason: EventReason,
    message: &str,
    now: &str,
) -> Value {
    json!({
        "apiVersion": EVENT_KIND.0,
        "kind": EVENT_KIND.1,
        "metadata": {"name": name, "namespace": object.namespace},
        "involvedObject": {
            "apiVersion": kind.0, "kind": kind.1,
            "namespace": object.namespace, "name": object.name, "uid": uid,
        },
        "reason": reason.as_str(),
        "message": message,
        "type": reason.event_type(),
        "source": {"component": EVENT_COMPONENT},
        "reportingComponent": EVENT_COMPONENT,
        "reportingInstance": EVENT_COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    })
}

/// The JSON merge patch that marks a VMI for evacuation: `status.evacuationNodeName`, and the
/// eviction-source annotation set to the mark's source (the descheduler, preemption, ...) or
/// removed (an API eviction's mark has none); an evacuation request is replaced by the mark. One
/// patch, so all land or none does.
pub fn evacuation_patch(node: &str, source: Option<EvacuationSource>) -> Value {
    json!({
        "status": {"evacuationNodeName": node},
        "metadata": {"annotations": {
            EVICTION_SOURCE_ANNOTATION: source.map(EvacuationSource::as_str),
            EVACUATION_REQUEST_ANNOTATION: null,
        }},
    })
}

/// The JSON patch that removes a VMI's evacuation request if, and only if, it names `node`.
fn clear_request_patch(node: &str) -> json_patch::Patch {
    let path = format!("/metadata/annotations/{}", EVACUATION_REQUEST_ANNOTATION.replace('/', "~1"));
    serde_json::from_value(json!([
        {"op": "test", "path": path, "value": node},
        {"op": "remove", "path": path},
    ]))
    .expect("a well-formed JSON patch")
}

/// The JSON patch that removes a VMI's mark if, and only if, it still names `node`.
fn clear_evacuation_patch(node: &str) -> json_patch::Patch {
    serde_json::from_value(json!([
        {"op": "test", "path": "/status/evacuationNodeName", "value": node},
        {"op": "remove", "path": "/status/evacuationNodeName"},
    ]))
    .expect("a well-formed JSON patch")
}

/// The JSON merge patch of an [`Effect::AnnotatePod`]: `null` removes an annotation.
fn annotations_patch(annotations: &BTreeMap<String, Option<String>>) -> Value {
    json!({"metadata": {"annotations": annotations}})
}

/// The `VirtualMachineInstanceMigration` of an [`Effect::CreateMigration`], as KubeVirt's
/// evacuation controller writes it (`pkg/virt-controller/watch/drain/evacuation`:
/// generateName `kubevirt-evacuation-`, annotation `kubevirt.io/evacuationMigration` naming the
/// node), plus evac's cause annotation and the priority, if any.
pub fn evacuation_migration(
    vmi: &str,
    node: &str,
    cause: Option<MigrationCause>,
    priority: Option<MigrationPriority>,
) -> Value {
    let mut migration = json!({
        "apiVersion": MIGRATION_KIND.0,
        "kind": MIGRATION_KIND.1,
        "metadata": {
            "generateName": EVACUATION_MIGRATION_PREFIX,
            "annotations": {EVACUATION_MIGRATION_ANNOTATION: node},
        },
        "spec": {"vmiName": vmi},
    });
    if let Some(priority) = priority {
        migration["spec"]["priority"] = json!(priority.as_str());
    }
    if let Some(cause) = cause {
        migration["metadata"]["annotations"][CAUSE_ANNOTATION] = json!(cause.as_str());
    }
    migration
}

#[cfg(test)]
mod tests;
