//! The simulator's clock: simulated time, which actors advance as fast as they like (a drain that
//! takes an hour of cluster time runs in seconds), and from which objects get their timestamps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

/// Simulated time: a start, and how far the simulation has got since.
#[derive(Debug)]
pub struct SimClock {
    start: DateTime<Utc>,
    elapsed_ms: AtomicU64,
}

impl SimClock {
    /// A clock that starts at `start`.
    pub fn starting_at(start: DateTime<Utc>) -> Self {
        Self { start, elapsed_ms: AtomicU64::new(0) }
    }

    /// Simulated time since the start.
    pub fn elapsed(&self) -> Duration {
        Duration::from_millis(self.elapsed_ms.load(Ordering::Acquire))
    }

    /// Moves time forward (never backward).
    pub fn advance(&self, by: Duration) {
        self.elapsed_ms.fetch_add(u64::try_from(by.as_millis()).unwrap_or(u64::MAX), Ordering::AcqRel);
    }

    /// The simulated time now.
    pub fn now(&self) -> DateTime<Utc> {
        self.start + self.elapsed()
    }

    /// `now` since the Unix epoch: what a policy reads as the wall clock (WASI `clock_time_get`
    /// in a module), zero before the epoch.
    pub fn since_epoch(&self) -> Duration {
        (self.now() - DateTime::UNIX_EPOCH).to_std().unwrap_or(Duration::ZERO)
    }

    /// `now` as Kubernetes writes timestamps (`2026-11-21T09:40:00Z`).
    pub fn timestamp(&self) -> String {
        self.now().to_rfc3339_opts(SecondsFormat::Secs, true)
    }
}

/// Objects the simulated API server stores get their timestamps from simulated time.
impl evac_cluster::Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        SimClock::now(self)
    }
}

impl Default for SimClock {
    /// Starts now, on a whole second: timestamps have whole seconds, so times read back from
    /// them (a taint's `timeAdded`) agree with the clock.
    fn default() -> Self {
        use chrono::SubsecRound;
        Self::starting_at(Utc::now().trunc_subsecs(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_and_formats_like_kubernetes() {
        let start = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z").unwrap().with_timezone(&Utc);
        let clock = SimClock::starting_at(start);
        clock.advance(Duration::from_secs(90));
        assert_eq!(clock.elapsed(), Duration::from_secs(90));
        assert_eq!(clock.timestamp(), "2026-01-01T00:01:30Z");
    }
}
