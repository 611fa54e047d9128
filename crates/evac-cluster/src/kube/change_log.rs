//! A watch cache's change log: the [`ChangeFeed`](crate::ChangeFeed) of the kube-rs back
//! end, so that `evac control` reads only what changed since its last pass instead of every
//! object of every watched kind at every pass.
//!
//! Positions: every change gets the next number of one sequence that never goes back, and so does
//! every completed relist; a consumer's cursor is the position it has read up to. The log keeps
//! the last [`CAPACITY`] changes since the latest relist. A cursor it still covers gets the changes
//! after it; any other cursor (one from before the latest relist, one older than the log, one the
//! log never gave) gets a resync. A relist after a watch error may hide deletions and updates
//! that happened while the watch was down, so the changes since then cannot be given as a diff:
//! the sequence alone tells both facts, where an epoch would need a second number in the cursor.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::Change;

/// Changes kept: at a few KiB per object, tens of MiB at most, and far more changes than a
/// controller misses between two passes.
pub(super) const CAPACITY: usize = 50_000;

#[derive(Default)]
pub(super) struct ChangeLog {
    /// The changes since the latest relist, oldest first, with their positions (consecutive).
    entries: VecDeque<(u64, Change)>,
    /// The position of the latest change or relist.
    position: u64,
    /// The position of the latest relist: cursors before it must resync.
    relisted_at: u64,
}

impl ChangeLog {
    /// The position a consumer has read everything up to once it has the current contents.
    pub(super) fn position(&self) -> u64 {
        self.position
    }

    /// Appends a change; the oldest one goes when the log is full.
    pub(super) fn record(&mut self, object: Arc<[u8]>, deleted: bool) {
        self.position += 1;
        self.entries.push_back((self.position, Change { object, deleted }));
        if self.entries.len() > CAPACITY {
            self.entries.pop_front();
        }
    }

    /// A relist replaced the contents: every earlier cursor must resync.
    pub(super) fn relisted(&mut self) {
        self.position += 1;
        self.relisted_at = self.position;
        self.entries.clear();
    }

    /// The changes after `cursor`, in order; `None` when the log cannot tell them (a resync is due).
    pub(super) fn since(&self, cursor: u64) -> Option<Vec<Change>> {
        // The oldest position the log can resume from: the one just before its first entry.
        let oldest = self.entries.front().map_or(self.position, |(first, _)| first - 1);
        if cursor < self.relisted_at || cursor < oldest || cursor > self.position {
            return None;
        }
        let start = self.entries.partition_point(|(position, _)| *position <= cursor);
        Some(self.entries.range(start..).map(|(_, change)| change.clone()).collect())
    }
}
