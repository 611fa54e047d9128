//! Change feeds: how a controller learns what changed in the cluster since it last looked,
//! without listing everything again. The simulator's store answers from its history; the kube-rs
//! back end from its watch caches' change logs.

use std::sync::Arc;

use super::ReadError;

/// One change to an object: its state after the change (its last state for a deletion).
#[derive(Debug, Clone)]
pub struct Change {
    /// The object as JSON.
    pub object: Arc<[u8]>,
    /// Whether the change removed it.
    pub deleted: bool,
}

/// Where to resume a feed: an opaque position, or `None` to start from a full listing.
pub type Cursor = Option<u64>;

/// A source of changes, kind by kind, from a cursor.
pub trait ChangeFeed: Send + Sync {
    /// The changes to objects of a kind after `cursor`, in order, and the cursor to resume from.
    /// A `None` cursor, or one the feed no longer reaches back to, gets every current object as a
    /// change (a resync): a consumer must treat changes as "look at this object again", never
    /// as a complete diff.
    fn changes(&self, api_version: &str, kind: &str, cursor: Cursor)
        -> Result<(Vec<Change>, u64), ReadError>;
}
