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
}

/// A migration's `status.migrationState`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationState<'a> {
    /// `sourceNode`: the node the VMI migrates away from.
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub source_node: Str<'a>,
    /// `endTimestamp`: when the migration ended (RFC 3339); unset while it runs.
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Str<'a>>,
}

impl Migration<'_> {
    /// Not finished: KubeVirt's `IsFinal` is Succeeded or Failed.
    pub fn is_active(&self) -> bool {
        !matches!(self.status.phase.as_str(), "Succeeded" | "Failed")
    }

    /// Not started yet: no phase, or `Pending` (KubeVirt has not created its target pod; it holds
    /// a migration there for a free slot and for its evacuation back-off). Deleting one moves
    /// nothing.
    pub fn is_unstarted(&self) -> bool {
        matches!(self.status.phase.as_str(), "" | "Pending")
    }

    /// Whether the migration ended in phase `Failed`.
    pub fn is_failed(&self) -> bool {
        self.status.phase == "Failed"
    }

    /// The node an evacuation migration moves away from (`kubevirt.io/evacuationMigration`).
    pub fn evacuation_node(&self) -> Option<Str<'_>> {
        self.metadata.annotation(crate::effect::EVACUATION_MIGRATION_ANNOTATION)
    }
}
