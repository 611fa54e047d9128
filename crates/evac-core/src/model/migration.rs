//! `VirtualMachineInstanceMigration`: which VMIs are migrating, and how past evacuations ended.

use serde::{Deserialize, Serialize};

use super::{null_as_default, ObjectMeta, Str};

/// A `kubevirt.io/v1` VirtualMachineInstanceMigration.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Migration<'a> {
    /// `metadata`: an evacuation migration names its source node in `kubevirt.io/evacuationMigration`.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `spec`: which VMI migrates.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: MigrationSpec<'a>,
    /// `status`: how far the migration got.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: MigrationStatus<'a>,
}

/// A migration's `spec`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationSpec<'a> {
    /// `spec.vmiName`: the VMI to migrate, in the migration's namespace.
    #[serde(borrow)]
    pub vmi_name: Str<'a>,
    /// `spec.priority`: `system-critical`, `user-triggered` or `system-maintenance` (KubeVirt's
    /// migration queue takes the highest first); only virt-controller sets one.
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Str<'a>>,
}

/// A migration's `status`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationStatus<'a> {
    /// `status.phase`, e.g. `Pending`, `Running`, and finally `Succeeded` or `Failed`; empty until set.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub phase: Str<'a>,
    /// `status.migrationState`: where the migration ran from and when it ended.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub migration_state: MigrationState<'a>,
    /// `status.phaseTransitionTimestamps`: when the migration entered each phase. A migration
    /// that fails before it starts has no `migrationState.endTimestamp`, only this; KubeVirt's
    /// back-off counts from the `Failed` transition (`handleMigrationBackoff`).
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub phase_transition_timestamps: Vec<PhaseTransition<'a>>,
}

/// One entry of `status.phaseTransitionTimestamps`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PhaseTransition<'a> {
    /// The phase entered.
    #[serde(borrow)]
    pub phase: Str<'a>,
    /// When (RFC 3339).
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub phase_transition_timestamp: Option<Str<'a>>,
}

/// A migration's `status.migrationState`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationState<'a> {
    /// `sourceNode`: the node the VMI migrates away from.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub source_node: Str<'a>,
    /// `startTimestamp`: when the migration began sending the VM (RFC 3339); unset before.
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Str<'a>>,
    /// `endTimestamp`: when the migration ended (RFC 3339); unset while it runs.
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Str<'a>>,
}

impl Migration<'_> {
    /// Not finished: KubeVirt's `IsFinal` is Succeeded or Failed.
    pub fn is_active(&self) -> bool {
        !matches!(self.status.phase.as_str(), "Succeeded" | "Failed")
    }

    /// Not started yet: no phase, or `Pending` (KubeVirt holds a migration there for a free slot
    /// and for its evacuation back-off; a target pod it created meanwhile is deleted with the
    /// migration, `handlePreHandoffMigrationCancel`). Deleting one moves nothing.
    pub fn is_unstarted(&self) -> bool {
        matches!(self.status.phase.as_str(), "" | "Pending")
    }

    /// Whether the migration ended in phase `Failed`.
    pub fn is_failed(&self) -> bool {
        self.status.phase == "Failed"
    }

    /// When the migration ended, in seconds since the Unix epoch: when it entered its final phase
    /// (`Succeeded` or `Failed`), else `migrationState.endTimestamp`; `None` while it runs, or
    /// when neither says.
    pub fn ended_at(&self) -> Option<f64> {
        if self.is_active() {
            return None;
        }
        self.status
            .phase_transition_timestamps
            .iter()
            .rev()
            .filter(|t| t.phase == self.status.phase)
            .find_map(|t| t.phase_transition_timestamp.as_deref().and_then(super::time::unix_seconds))
            .or_else(|| {
                self.status.migration_state.end_timestamp.as_deref().and_then(super::time::unix_seconds)
            })
    }

    /// When the migration began sending the VM, in seconds since the Unix epoch.
    pub fn started_at(&self) -> Option<f64> {
        self.status.migration_state.start_timestamp.as_deref().and_then(super::time::unix_seconds)
    }

    /// The node an evacuation migration moves away from (`kubevirt.io/evacuationMigration`).
    pub fn evacuation_node(&self) -> Option<Str<'_>> {
        self.metadata.annotation(crate::effect::EVACUATION_MIGRATION_ANNOTATION)
    }
}
