//! Where a store's timestamps come from: the wall clock, or a simulation's clock.

use chrono::{DateTime, SecondsFormat, Utc};

/// A source of the current time for the timestamps an API server writes.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;

    /// `now` as Kubernetes writes timestamps (`2026-11-21T09:40:00Z`).
    fn timestamp(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }
}

/// The host's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}
