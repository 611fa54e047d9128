//! The memory request bodies may take at once: each admission request reserves its body's
//! declared length (the largest accepted when it declares none, as HTTP/2 and chunked bodies may
//! not) before the body is read, and keeps it until it is answered, covering the decoded review
//! and the evaluation as well as the bytes. A burst of large reviews then waits here, within its
//! client's deadline, instead of growing the process past its memory limit. When a burst of
//! them has ended (nothing reserved, after at least `TRIM_AFTER` was), the memory it took is
//! given back to the system.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Bytes reserved since the last give-back above which the end of a burst gives memory back.
const TRIM_AFTER: usize = 1024 * 1024;

/// Reservations are counted in KiB, so that a semaphore's `u32` permits cover any budget.
const UNIT: usize = 1024;

/// A budget of body bytes held at once.
pub struct BodyBudget {
    shared: Arc<Shared>,
    capacity: usize,
}

struct Shared {
    permits: Arc<Semaphore>,
    units: usize,
    /// Units reserved since memory was last given back.
    since_trim: AtomicUsize,
}

/// Bytes reserved for one request, given back when dropped.
pub struct Reserved(#[allow(dead_code)] OwnedSemaphorePermit);

impl BodyBudget {
    pub fn new(capacity: usize) -> Self {
        let units = capacity.div_ceil(UNIT).clamp(1, Semaphore::MAX_PERMITS);
        let shared =
            Shared { permits: Arc::new(Semaphore::new(units)), units, since_trim: AtomicUsize::new(0) };
        Self { shared: Arc::new(shared), capacity: units * UNIT }
    }

    /// The budget, in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Waits until `bytes` (at most the whole budget) are free and reserves them. `None` only if
    /// the budget was closed, which it never is.
    pub async fn reserve(&self, bytes: usize) -> Option<Reserved> {
        let units = bytes.div_ceil(UNIT).clamp(1, self.capacity / UNIT);
        let units = u32::try_from(units).unwrap_or(u32::MAX);
        let permit = Arc::clone(&self.shared.permits).acquire_many_owned(units).await.ok()?;
        self.shared.since_trim.fetch_add(units as usize, Ordering::AcqRel);
        Some(Reserved(permit))
    }

    /// Gives memory back after each burst, until the task is dropped: checked every `every`,
    /// once nothing is reserved (so that what the burst's requests held around their bodies is
    /// free too).
    pub async fn give_back_after_bursts(&self, every: std::time::Duration) {
        let shared = &self.shared;
        loop {
            tokio::time::sleep(every).await;
            if shared.permits.available_permits() == shared.units
                && shared.since_trim.load(Ordering::Acquire) >= TRIM_AFTER / UNIT
            {
                shared.since_trim.store(0, Ordering::Release);
                let _ = tokio::task::spawn_blocking(super::give_back::free_pages).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reservation_waits_until_the_bytes_are_given_back() {
        let budget = BodyBudget::new(4 * UNIT);
        let first = budget.reserve(3 * UNIT).await.unwrap();
        let waiting = budget.reserve(2 * UNIT);
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending(), "2 KiB do not fit beside 3 of 4");
        drop(first);
        assert!(waiting.await.is_some());
        // More than the whole budget takes the whole budget, rather than waiting for ever.
        assert!(budget.reserve(100 * UNIT).await.is_some());
    }
}
