//! `VirtualMachineInstanceMigration`: which VMIs are migrating, and how past evacuations ended.

use serde::{Deserialize, Serialize};

use super::{null_as_default, ObjectMeta, Str};

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct Migration<'a> {
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub spec: MigrationSpec<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub status: MigrationStatus<'a>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationSpec<'a> {
    #[serde(borrow)]
    pub vmi_name: Str<'a>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationStatus<'a> {
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub phase: Str<'a>,
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub migration_state: MigrationState<'a>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MigrationState<'a> {
    #[serde(borrow, skip_serializing_if = "str::is_empty")]
    pub source_node: Str<'a>,
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub end_timestamp: Option<Str<'a>>,
}

impl Migration<'_> {
    /// Not finished: KubeVirt's `IsFinal` is Succeeded or Failed.
    pub fn is_active(&self) -> bool {
        !matches!(self.status.phase.as_str(), "Succeeded" | "Failed")
    }

    pub fn is_failed(&self) -> bool {
        self.status.phase == "Failed"
    }

    /// The node an evacuation migration moves away from (`kubevirt.io/evacuationMigration`).
    pub fn evacuation_node(&self) -> Option<Str<'_>> {
        self.metadata.annotation(crate::effect::EVACUATION_MIGRATION_ANNOTATION)
    }
}
