//! Effects: what a decision asks its host to do. A policy never writes to the cluster; it returns
//! effects, and the host (server or controller) carries them out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod writes;

pub use writes::{Access, EffectType, UnknownEffectType};

/// A namespaced object named by an effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub struct ObjectRef {
    /// The namespace the object lives in.
    pub namespace: String,
    /// The object's name in that namespace.
    pub name: String,
}

impl ObjectRef {
    /// The object `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), name: name.into() }
    }
}

impl core::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Who or what asked for an evacuation, when the mark records it. API evictions other than the
/// descheduler's leave it unset (KubeVirt's own marks carry no source).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvacuationSource {
    /// The descheduler (the Eviction carried `requested-by: sigs.k8s.io/descheduler`).
    Descheduler,
    /// Scheduler preemption (`DisruptionTarget` reason `PreemptionByScheduler`).
    Preemption,
    /// The taint manager (`DisruptionTarget` reason `DeletionByTaintManager`).
    NoexecuteTaint,
    /// Node memory pressure, seen before or when the kubelet evicts (`TerminationByKubelet`).
    NodePressure,
}

impl EvacuationSource {
    /// The source's value in [`EVICTION_SOURCE_ANNOTATION`], e.g. `noexecute-taint`; `descheduler`
    /// is KubeVirt's own value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Descheduler => "descheduler",
            Self::Preemption => "preemption",
            Self::NoexecuteTaint => "noexecute-taint",
            Self::NodePressure => "node-pressure",
        }
    }

    /// Whether the mark is evac's own, for a cause that can go away by itself (preemption, a
    /// `NoExecute` taint, node pressure): evac calls such a mark off when its cause is gone, or
    /// gives it up after repeated failures. Marks an API eviction set (the descheduler's
    /// included) last until the VM has left or the evacuation is cancelled: their requester was
    /// told the VM is leaving.
    pub fn ends_by_itself(self) -> bool {
        !matches!(self, Self::Descheduler)
    }

    /// The source an [`EVICTION_SOURCE_ANNOTATION`] value names; `None` for a value evac does not write.
    pub fn parse(value: &str) -> Option<Self> {
        [Self::Descheduler, Self::Preemption, Self::NoexecuteTaint, Self::NodePressure]
            .into_iter()
            .find(|s| s.as_str() == value)
    }
}

/// Why an evacuation migration was created: recorded on the migration in [`CAUSE_ANNOTATION`],
/// which both KubeVirt proposals leave as an open question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigrationCause {
    /// An API eviction (`kubectl drain`, ...) marked the VMI.
    ApiEviction,
    /// The descheduler's eviction marked the VMI.
    Descheduler,
    /// Scheduler preemption marked the VMI (`PreemptionByScheduler`).
    Preemption,
    /// The taint manager marked the VMI (`DeletionByTaintManager`: a `NoExecute` taint).
    NoexecuteTaint,
    /// Node memory pressure marked the VMI, ahead of or at the kubelet's eviction.
    NodePressure,
    /// The node carries KubeVirt's drain taint `kubevirt.io/drain:NoSchedule`.
    Drain,
}

impl MigrationCause {
    /// The cause's value in [`CAUSE_ANNOTATION`], e.g. `api-eviction`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApiEviction => "api-eviction",
            Self::Descheduler => "descheduler",
            Self::Preemption => "preemption",
            Self::NoexecuteTaint => "noexecute-taint",
            Self::NodePressure => "node-pressure",
            Self::Drain => "drain",
        }
    }
}

impl From<EvacuationSource> for MigrationCause {
    fn from(source: EvacuationSource) -> Self {
        match source {
            EvacuationSource::Descheduler => Self::Descheduler,
            EvacuationSource::Preemption => Self::Preemption,
            EvacuationSource::NoexecuteTaint => Self::NoexecuteTaint,
            EvacuationSource::NodePressure => Self::NodePressure,
        }
    }
}

/// The annotation on an evacuation migration that records its [`MigrationCause`].
pub const CAUSE_ANNOTATION: &str = "evac.kubevirt.io/cause";
/// KubeVirt's annotation on the migrations its evacuation controller creates: the source node.
pub const EVACUATION_MIGRATION_ANNOTATION: &str = "kubevirt.io/evacuationMigration";
/// The `generateName` of evacuation migrations, as KubeVirt's evacuation controller sets it.
pub const EVACUATION_MIGRATION_PREFIX: &str = "kubevirt-evacuation-";
/// The VMI annotation that holds an evacuation of evac's own until its migration's turn: the node
/// the VMI is to leave. Beside KubeVirt's evacuation controller (which migrates every marked VMI
/// at once), evac marks such a VMI only when its order and the parallel limits let its migration
/// start; the mark replaces the request.
pub const EVACUATION_REQUEST_ANNOTATION: &str = "evac.kubevirt.io/evacuate-from";
/// The VMI annotation that records who asked for an evacuation (KubeVirt sets it for the descheduler).
pub const EVICTION_SOURCE_ANNOTATION: &str = "kubevirt.io/eviction-source";
/// The descheduler's annotation: evict this pod only through the eviction API (KEP-1397).
pub const REQUEST_EVICT_ONLY_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/request-evict-only";
/// The descheduler's annotation: an eviction of this pod is in progress in the background.
pub const EVICTION_IN_PROGRESS_ANNOTATION: &str = "descheduler.alpha.kubernetes.io/eviction-in-progress";

/// A migration's priority (`spec.priority`, KubeVirt VEP #62).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigrationPriority {
    /// `system-critical`: the priority KubeVirt gives evacuation migrations; its migration queue starts
    /// them before lower priorities.
    SystemCritical,
    /// `system-maintenance`: the priority KubeVirt gives the descheduler's evacuation migrations,
    /// started after `system-critical` and `user-triggered` ones.
    SystemMaintenance,
}

impl MigrationPriority {
    /// The value of `spec.priority`, e.g. `system-critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SystemCritical => "system-critical",
            Self::SystemMaintenance => "system-maintenance",
        }
    }
}

/// The vocabulary of effects. Serialized with a `type` tag, e.g.
/// `{"type":"MarkForEvacuation","vmi":{...},"node":"n1","dryRun":false,"source":null}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type")]
pub enum Effect {
    /// Mark a VMI for evacuation: set `status.evacuationNodeName` to `node`, and the VMI
    /// annotation `kubevirt.io/eviction-source` to the source (`descheduler`, as KubeVirt writes
    /// it, or one of evac's causes), or remove it for an API eviction, so that the annotation
    /// always names the latest requester. A dry-run mark is carried out as a dry-run patch.
    #[serde(rename_all = "camelCase")]
    MarkForEvacuation {
        /// The VMI to mark.
        vmi: ObjectRef,
        /// The node the VMI is to leave: the new `status.evacuationNodeName`.
        node: String,
        /// The request was a dry run: the patch is sent with `dryRun: [All]` and changes nothing.
        dry_run: bool,
        /// Who asked, written to [`EVICTION_SOURCE_ANNOTATION`]; `None` (an API eviction other than
        /// the descheduler's) removes the annotation.
        source: Option<EvacuationSource>,
    },
    /// Create a `VirtualMachineInstanceMigration` of `vmi` away from `node`, as KubeVirt's
    /// evacuation controller does: generateName [`EVACUATION_MIGRATION_PREFIX`], annotations
    /// [`EVACUATION_MIGRATION_ANNOTATION`]` = node` and (evac's addition) [`CAUSE_ANNOTATION`]` =
    /// cause`, and `spec.priority` when one is given.
    #[serde(rename_all = "camelCase")]
    CreateMigration {
        /// The VMI to migrate: the migration's `spec.vmiName`, in the VMI's namespace.
        vmi: ObjectRef,
        /// The node it leaves: the value of [`EVACUATION_MIGRATION_ANNOTATION`].
        node: String,
        /// Why it leaves: the value of [`CAUSE_ANNOTATION`]; `None` (KubeVirt's own evacuation
        /// controller, which records no cause) writes no annotation.
        cause: Option<MigrationCause>,
        /// The migration's `spec.priority`: only KubeVirt's own evacuation controller sets one.
        /// virt-api's migration admitter refuses a priority from anyone but virt-controller's
        /// service account (`pkg/virt-api/webhooks/validating-webhook/admitters/
        /// migration-create-admitter.go`, `Admit`), so evac's migrations carry none and its
        /// order is the order it creates them in.
        #[serde(skip_serializing_if = "Option::is_none")]
        priority: Option<MigrationPriority>,
    },
    /// Hold an evacuation of evac's own for its turn: set [`EVACUATION_REQUEST_ANNOTATION`]` = node`
    /// and [`EVICTION_SOURCE_ANNOTATION`]` = source` on the VMI, without marking it (KubeVirt's
    /// evacuation controller would migrate a marked VMI at once). The evacuation decision marks
    /// it when its migration may start.
    #[serde(rename_all = "camelCase")]
    RequestEvacuation {
        /// The VMI to evacuate.
        vmi: ObjectRef,
        /// The node it is to leave.
        node: String,
        /// Who asked: evac's cause.
        source: EvacuationSource,
    },
    /// Record the cause of an evacuation migration someone else created (KubeVirt's evacuation
    /// controller): set [`CAUSE_ANNOTATION`] on it.
    #[serde(rename_all = "camelCase")]
    AnnotateMigration {
        /// The migration.
        migration: ObjectRef,
        /// Why its VMI leaves.
        cause: MigrationCause,
    },
    /// Delete an evacuation migration that has not started (phase empty or `Pending`: KubeVirt
    /// holds it there in its back-off, or for a free slot, and deletes a target pod it may have
    /// created, `handlePreHandoffMigrationCancel`), as `virtctl migrate-cancel` does: its
    /// evacuation was called off. Only the version decided on is deleted (a `resourceVersion`
    /// precondition): one whose status moved on since is decided again.
    #[serde(rename_all = "camelCase")]
    CancelMigration {
        /// The VMI the migration was to move.
        vmi: ObjectRef,
        /// The migration.
        migration: ObjectRef,
        /// The node it was to move its VMI away from.
        node: String,
        /// The migration's `resourceVersion` when it was decided on.
        resource_version: String,
        /// The evacuation goes on: the migration is deleted only so that KubeVirt's evacuation
        /// controller creates it again at once, behind the migrations of VMs whose pods have a
        /// deadline (`crate::evacuation` explains KubeVirt's queue). The VMI stays marked.
        #[serde(default, skip_serializing_if = "core::ops::Not::not")]
        requeue: bool,
    },
    /// Set (`Some`) or remove (`None`) annotations of a pod, as one merge patch.
    #[serde(rename_all = "camelCase")]
    AnnotatePod {
        /// The pod to annotate.
        pod: ObjectRef,
        /// Annotation keys, each with the value to set, or `None` to remove the annotation.
        annotations: BTreeMap<String, Option<String>>,
    },
    /// Clear a VMI's evacuation mark (`status.evacuationNodeName`, and the eviction-source
    /// annotation) if it still names `node`, and its evacuation request if that names `node`:
    /// the evacuation no longer applies.
    #[serde(rename_all = "camelCase")]
    ClearEvacuation {
        /// The VMI whose mark to clear.
        vmi: ObjectRef,
        /// The node the mark must still name; a mark for another node is left alone.
        node: String,
    },
    /// Record a `Warning` event on a VMI (`kubectl describe vmi` shows it): what evac decided not
    /// to do, and why. Recorded once per VMI, reason and node.
    #[serde(rename_all = "camelCase")]
    RecordEvent {
        /// The VMI the event is about.
        vmi: ObjectRef,
        /// The node the evacuation concerns.
        node: String,
        /// The event's `reason`.
        reason: EventReason,
        /// The event's `message`.
        message: String,
    },
}

/// The reasons of the events evac records: the three a policy decides to record
/// ([`Effect::RecordEvent`]), and those its host records on the VMI for each decision it carries
/// out (`Normal` events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
pub enum EventReason {
    /// An evacuation of evac's own was given up after repeated failed migrations: the mark is
    /// cleared and the VM stays where it is.
    EvacuationGivenUp,
    /// An evacuation migration was not started now: it cannot finish before the VM's pod is
    /// deleted while others can, or no other node has room for the VM.
    EvacuationDeferred,
    /// evac holds an evacuation of its own for its turn ([`Effect::RequestEvacuation`]).
    EvacuationRequested,
    /// evac marked the VMI for evacuation ([`Effect::MarkForEvacuation`]).
    EvacuationMarked,
    /// evac created the VMI's evacuation migration ([`Effect::CreateMigration`]).
    EvacuationMigrationCreated,
    /// evac called the VMI's evacuation off ([`Effect::ClearEvacuation`]).
    EvacuationCalledOff,
    /// evac deleted the VMI's evacuation migration before it started ([`Effect::CancelMigration`]).
    EvacuationMigrationCancelled,
    /// evac deleted the VMI's evacuation migration before it started so that KubeVirt creates it
    /// again behind migrations of VMs with a deadline ([`Effect::CancelMigration`] `requeue`).
    EvacuationMigrationRequeued,
    /// A disruption evac would have turned into a migration is left to KubeVirt because its
    /// feature gate is off: the VM shuts down with its pod.
    DisruptionLeftToKubeVirt,
    /// evac's hold endpoint holds a launcher pod's termination while its VM migrates away (on the
    /// pod).
    TerminationHeld,
    /// evac's hold endpoint ended the hold of a launcher pod's termination (on the pod).
    TerminationReleased,
}

impl EventReason {
    /// The event's `reason`, e.g. `EvacuationGivenUp`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::EvacuationGivenUp => "EvacuationGivenUp",
            Self::EvacuationDeferred => "EvacuationDeferred",
            Self::EvacuationRequested => "EvacuationRequested",
            Self::EvacuationMarked => "EvacuationMarked",
            Self::EvacuationMigrationCreated => "EvacuationMigrationCreated",
            Self::EvacuationCalledOff => "EvacuationCalledOff",
            Self::EvacuationMigrationCancelled => "EvacuationMigrationCancelled",
            Self::EvacuationMigrationRequeued => "EvacuationMigrationRequeued",
            Self::DisruptionLeftToKubeVirt => "DisruptionLeftToKubeVirt",
            Self::TerminationHeld => "TerminationHeld",
            Self::TerminationReleased => "TerminationReleased",
        }
    }

    /// The event's `type`: `Warning` for what evac did not do, `Normal` for what it did.
    pub fn event_type(self) -> &'static str {
        match self {
            Self::EvacuationGivenUp | Self::EvacuationDeferred | Self::DisruptionLeftToKubeVirt => "Warning",
            _ => "Normal",
        }
    }
}

impl Effect {
    /// The effect's type, as its `type` tag names it.
    pub fn type_name(&self) -> &'static str {
        self.effect_type().as_str()
    }
}

/// Every field any effect has: decoding through this flat record is a single pass over the JSON,
/// where serde's tagged-enum decoding would buffer each effect first.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EffectRecord {
    #[serde(rename = "type")]
    type_: String,
    vmi: Option<ObjectRef>,
    node: Option<String>,
    dry_run: Option<bool>,
    #[serde(default)]
    source: Option<EvacuationSource>,
    cause: Option<MigrationCause>,
    priority: Option<MigrationPriority>,
    pod: Option<ObjectRef>,
    migration: Option<ObjectRef>,
    resource_version: Option<String>,
    requeue: Option<bool>,
    annotations: Option<BTreeMap<String, Option<String>>>,
    reason: Option<EventReason>,
    message: Option<String>,
}

impl<'de> Deserialize<'de> for Effect {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let record = EffectRecord::deserialize(deserializer)?;
        let missing =
            |field: &'static str| D::Error::custom(format!("{} effect without `{field}`", record.type_));
        match record.type_.as_str() {
            "MarkForEvacuation" => Ok(Effect::MarkForEvacuation {
                vmi: record.vmi.clone().ok_or_else(|| missing("vmi"))?,
                node: record.node.clone().ok_or_else(|| missing("node"))?,
                dry_run: record.dry_run.ok_or_else(|| missing("dryRun"))?,
                source: record.source,
            }),
            "CreateMigration" => Ok(Effect::CreateMigration {
                vmi: record.vmi.clone().ok_or_else(|| missing("vmi"))?,
                node: record.node.clone().ok_or_else(|| missing("node"))?,
                cause: record.cause,
                priority: record.priority,
            }),
            "RequestEvacuation" => Ok(Effect::RequestEvacuation {
                vmi: record.vmi.clone().ok_or_else(|| missing("vmi"))?,
                node: record.node.clone().ok_or_else(|| missing("node"))?,
                source: record.source.ok_or_else(|| missing("source"))?,
            }),
            "AnnotateMigration" => Ok(Effect::AnnotateMigration {
                migration: record.migration.clone().ok_or_else(|| missing("migration"))?,
                cause: record.cause.ok_or_else(|| missing("cause"))?,
            }),
            "CancelMigration" => Ok(Effect::CancelMigration {
                vmi: record.vmi.clone().ok_or_else(|| missing("vmi"))?,
                migration: record.migration.clone().ok_or_else(|| missing("migration"))?,
                node: record.node.clone().ok_or_else(|| missing("node"))?,
                resource_version: record
                    .resource_version
                    .clone()
                    .ok_or_else(|| missing("resourceVersion"))?,
                requeue: record.requeue.unwrap_or(false),
            }),
            "AnnotatePod" => Ok(Effect::AnnotatePod {
                pod: record.pod.clone().ok_or_else(|| missing("pod"))?,
                annotations: record.annotations.clone().ok_or_else(|| missing("annotations"))?,
            }),
            "ClearEvacuation" => Ok(Effect::ClearEvacuation {
                vmi: record.vmi.clone().ok_or_else(|| missing("vmi"))?,
                node: record.node.clone().ok_or_else(|| missing("node"))?,
            }),
            "RecordEvent" => Ok(Effect::RecordEvent {
                vmi: record.vmi.clone().ok_or_else(|| missing("vmi"))?,
                node: record.node.clone().ok_or_else(|| missing("node"))?,
                reason: record.reason.ok_or_else(|| missing("reason"))?,
                message: record.message.clone().ok_or_else(|| missing("message"))?,
            }),
            other => Err(D::Error::custom(format!("unknown effect type {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_round_trip() {
        let effect = Effect::MarkForEvacuation {
            vmi: ObjectRef::new("default", "vm"),
            node: "node01".into(),
            dry_run: true,
            source: Some(EvacuationSource::Descheduler),
        };
        let json = serde_json::to_string(&effect).unwrap();
        assert_eq!(serde_json::from_str::<Effect>(&json).unwrap(), effect);
        let effects = [
            Effect::CreateMigration {
                vmi: ObjectRef::new("default", "vm"),
                node: "node01".into(),
                cause: Some(MigrationCause::Preemption),
                priority: None,
            },
            Effect::CreateMigration {
                vmi: ObjectRef::new("default", "vm"),
                node: "node01".into(),
                cause: None,
                priority: Some(MigrationPriority::SystemMaintenance),
            },
            Effect::AnnotatePod {
                pod: ObjectRef::new("default", "virt-launcher-vm-abcde"),
                annotations: [(EVICTION_IN_PROGRESS_ANNOTATION.to_owned(), None)].into(),
            },
            Effect::ClearEvacuation { vmi: ObjectRef::new("default", "vm"), node: "node01".into() },
            Effect::RequestEvacuation {
                vmi: ObjectRef::new("default", "vm"),
                node: "node01".into(),
                source: EvacuationSource::NodePressure,
            },
            Effect::AnnotateMigration {
                migration: ObjectRef::new("default", "kubevirt-evacuation-x1"),
                cause: MigrationCause::ApiEviction,
            },
            Effect::CancelMigration {
                vmi: ObjectRef::new("default", "vm"),
                migration: ObjectRef::new("default", "kubevirt-evacuation-x1"),
                node: "node01".into(),
                resource_version: "42".into(),
                requeue: false,
            },
            Effect::CancelMigration {
                vmi: ObjectRef::new("default", "vm"),
                migration: ObjectRef::new("default", "kubevirt-evacuation-x2"),
                node: "node01".into(),
                resource_version: "43".into(),
                requeue: true,
            },
            Effect::RecordEvent {
                vmi: ObjectRef::new("default", "vm"),
                node: "node01".into(),
                reason: EventReason::EvacuationGivenUp,
                message: "gave up".into(),
            },
        ];
        for effect in effects {
            let json = serde_json::to_string(&effect).unwrap();
            assert!(json.contains(&format!(r#""type":"{}""#, effect.type_name())), "{json}");
            assert_eq!(serde_json::from_str::<Effect>(&json).unwrap(), effect);
        }
    }

    /// Event reasons are their wire names.
    #[test]
    fn event_reasons_are_their_names() {
        let warnings = [EventReason::EvacuationGivenUp, EventReason::EvacuationDeferred];
        let normal = [
            EventReason::EvacuationRequested,
            EventReason::EvacuationMarked,
            EventReason::EvacuationMigrationCreated,
            EventReason::EvacuationCalledOff,
            EventReason::EvacuationMigrationCancelled,
            EventReason::EvacuationMigrationRequeued,
        ];
        for reason in warnings.into_iter().chain(normal) {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
        assert!(warnings.iter().all(|r| r.event_type() == "Warning"));
        assert!(normal.iter().all(|r| r.event_type() == "Normal"));
    }

    /// Only the descheduler's marks are an API eviction's; evac's own causes end by themselves.
    #[test]
    fn only_evacs_own_sources_end_by_themselves() {
        assert!(!EvacuationSource::Descheduler.ends_by_itself());
        for source in
            [EvacuationSource::Preemption, EvacuationSource::NoexecuteTaint, EvacuationSource::NodePressure]
        {
            assert!(source.ends_by_itself(), "{source:?}");
        }
    }

    #[test]
    fn sources_read_back_from_their_annotation_values() {
        for source in [
            EvacuationSource::Descheduler,
            EvacuationSource::Preemption,
            EvacuationSource::NoexecuteTaint,
            EvacuationSource::NodePressure,
        ] {
            assert_eq!(EvacuationSource::parse(source.as_str()), Some(source));
            assert_eq!(serde_json::to_value(source).unwrap(), source.as_str());
        }
        assert_eq!(EvacuationSource::parse("kubectl"), None);
    }

    /// The values of the cause annotation on evacuation migrations: what reports and tools read
    /// back. Each is also the cause's wire form in a `CreateMigration` effect.
    #[test]
    fn migration_causes_read_as_kebab_case() {
        let all = [
            (MigrationCause::ApiEviction, "api-eviction"),
            (MigrationCause::Descheduler, "descheduler"),
            (MigrationCause::Preemption, "preemption"),
            (MigrationCause::NoexecuteTaint, "noexecute-taint"),
            (MigrationCause::NodePressure, "node-pressure"),
            (MigrationCause::Drain, "drain"),
        ];
        for (cause, text) in all {
            assert_eq!(cause.as_str(), text);
            assert_eq!(serde_json::to_value(cause).unwrap(), text);
        }
    }

    /// A mark's source becomes the cause of the migration it leads to.
    #[test]
    fn sources_become_causes_of_their_own_name() {
        let all = [
            (EvacuationSource::Descheduler, MigrationCause::Descheduler),
            (EvacuationSource::Preemption, MigrationCause::Preemption),
            (EvacuationSource::NoexecuteTaint, MigrationCause::NoexecuteTaint),
            (EvacuationSource::NodePressure, MigrationCause::NodePressure),
        ];
        for (source, cause) in all {
            assert_eq!(MigrationCause::from(source), cause);
            assert_eq!(cause.as_str(), source.as_str());
        }
    }

    /// KubeVirt's migration priorities (VEP #62), as `spec.priority` spells them.
    #[test]
    fn priorities_are_kubevirts_values() {
        for (priority, text) in [
            (MigrationPriority::SystemCritical, "system-critical"),
            (MigrationPriority::SystemMaintenance, "system-maintenance"),
        ] {
            assert_eq!(priority.as_str(), text);
            assert_eq!(serde_json::to_value(priority).unwrap(), text);
        }
    }

    #[test]
    fn type_names_are_the_type_tags() {
        let vmi = || ObjectRef::new("default", "vm");
        let effects = [
            (
                Effect::MarkForEvacuation { vmi: vmi(), node: "n".into(), dry_run: false, source: None },
                "MarkForEvacuation",
            ),
            (
                Effect::CreateMigration {
                    vmi: vmi(),
                    node: "n".into(),
                    cause: Some(MigrationCause::Drain),
                    priority: None,
                },
                "CreateMigration",
            ),
            (
                Effect::RequestEvacuation {
                    vmi: vmi(),
                    node: "n".into(),
                    source: EvacuationSource::NoexecuteTaint,
                },
                "RequestEvacuation",
            ),
            (
                Effect::AnnotateMigration { migration: vmi(), cause: MigrationCause::Drain },
                "AnnotateMigration",
            ),
            (
                Effect::CancelMigration {
                    vmi: vmi(),
                    migration: vmi(),
                    node: "n".into(),
                    resource_version: "1".into(),
                    requeue: false,
                },
                "CancelMigration",
            ),
            (Effect::AnnotatePod { pod: vmi(), annotations: BTreeMap::new() }, "AnnotatePod"),
            (Effect::ClearEvacuation { vmi: vmi(), node: "n".into() }, "ClearEvacuation"),
            (
                Effect::RecordEvent {
                    vmi: vmi(),
                    node: "n".into(),
                    reason: EventReason::EvacuationDeferred,
                    message: "later".into(),
                },
                "RecordEvent",
            ),
        ];
        for (effect, name) in effects {
            assert_eq!(effect.type_name(), name);
            assert_eq!(serde_json::to_value(&effect).unwrap()["type"], name);
        }
    }

    /// Objects read as `namespace/name` in messages and logs, as kubectl names them.
    #[test]
    fn object_refs_display_as_namespace_slash_name() {
        assert_eq!(ObjectRef::new("default", "vm-cirros").to_string(), "default/vm-cirros");
    }

    #[test]
    fn malformed_effects_are_refused_clearly() {
        let err = serde_json::from_str::<Effect>(r#"{"type":"MarkForEvacuation","node":"n","dryRun":false}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("MarkForEvacuation effect without `vmi`"), "{err}");
        let err = serde_json::from_str::<Effect>(r#"{"type":"Explode"}"#).unwrap_err().to_string();
        assert!(err.contains(r#"unknown effect type "Explode""#), "{err}");
    }
}
