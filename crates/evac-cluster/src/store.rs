//! Writing cluster objects: the few writes effects need, as the API server takes them.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::{ApiError, Kind, ObjectSource};

/// A patch, in the two formats clients send for custom resources and core objects alike.
#[derive(Debug, Clone)]
pub enum Patch {
    /// `application/merge-patch+json` (RFC 7396).
    Merge(Value),
    /// `application/json-patch+json` (RFC 6902). Its `test` operations make a conditional write:
    /// the API server refuses the whole patch (422 Invalid) when one fails.
    Json(json_patch::Patch),
}

/// Reads and writes of a cluster back end. A back end implements only these; what each effect
/// writes is decided once, by the [`Executor`](crate::Executor).
///
/// Errors are the API server's (`metav1.Status`: code, reason, message), or the back end's own
/// failure to reach it shaped as one (503 ServiceUnavailable).
pub trait ClusterStore: ObjectSource {
    /// Now, as the API server writes timestamps (`2026-11-21T09:40:00Z`): the wall clock, or a
    /// simulation's.
    fn timestamp(&self) -> String {
        crate::clock::Clock::timestamp(&crate::SystemClock)
    }

    /// Creates an object (`metadata.generateName` names it). A dry run is checked, not stored.
    fn create<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        object: Value,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>>;

    /// Patches an object. A dry run is checked, not stored.
    fn patch<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        patch: &'a Patch,
        dry_run: bool,
    ) -> BoxFuture<'a, Result<(), ApiError>>;

    /// Deletes an object, only while it is at `resource_version` when one is given
    /// (`preconditions.resourceVersion`: 409 Conflict otherwise).
    fn delete<'a>(
        &'a self,
        kind: &'a Kind,
        namespace: &'a str,
        name: &'a str,
        resource_version: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(), ApiError>>;
}
