use serde::{Deserialize, Serialize};

use super::{null_as_default, ObjectMeta, Str};

/// A `policy/v1` Eviction: the object of a `pods/eviction` CREATE.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Eviction<'a> {
    /// `apiVersion`: `policy/v1`.
    #[serde(borrow)]
    pub api_version: Str<'a>,
    /// `kind`: `Eviction`.
    #[serde(borrow)]
    pub kind: Str<'a>,
    /// `metadata`: the pod's name and namespace, and the requester's annotations (e.g. `requested-by`).
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta<'a>,
    /// `deleteOptions`: how the pod is deleted if the eviction is granted.
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    pub delete_options: Option<DeleteOptions<'a>>,
}

/// An Eviction's `deleteOptions`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeleteOptions<'a> {
    /// `dryRun`: `["All"]` for a dry run; KubeVirt reads only the first entry.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<Str<'a>>,
    /// `gracePeriodSeconds`: replaces the pod's `terminationGracePeriodSeconds` when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_period_seconds: Option<i64>,
}

/// The annotation the descheduler puts on the Evictions it creates.
pub const REQUESTED_BY_ANNOTATION: &str = "requested-by";
/// Its value for the descheduler.
pub const DESCHEDULER_REQUESTER: &str = "sigs.k8s.io/descheduler";

impl Eviction<'_> {
    /// `deleteOptions.dryRun[0] == "All"`, as KubeVirt reads it.
    pub fn is_dry_run(&self) -> bool {
        self.delete_options.as_ref().and_then(|o| o.dry_run.first()).is_some_and(|d| d.as_str() == "All")
    }

    /// Whether the descheduler asked for this eviction.
    pub fn requested_by_descheduler(&self) -> bool {
        self.metadata.annotation(REQUESTED_BY_ANNOTATION).is_some_and(|by| by == DESCHEDULER_REQUESTER)
    }
}
