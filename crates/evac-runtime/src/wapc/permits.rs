//! Bounds on instances: how many evaluations run at once, and how many idle instances are kept.
//!
//! The pooling allocator has a fixed number of instance slots. Evaluations beyond
//! `max_concurrent` wait for a permit instead of failing, and idle instances (of all modules)
//! may only use the slots that in-flight evaluations cannot, so an evaluation always finds a slot.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub(crate) struct Permits {
    state: Mutex<State>,
    returned: Condvar,
    /// Slots idle instances may still take.
    idle_slots: AtomicUsize,
}

struct State {
    available: usize,
    /// Callers waiting for a permit: only then does a returned permit need a wake-up (a syscall).
    waiting: usize,
}

/// One evaluation's right to an instance slot; given back on drop.
pub(crate) struct Permit<'a>(&'a Permits);

impl Permits {
    pub(crate) fn new(in_flight: usize, idle: usize) -> Self {
        Self {
            state: Mutex::new(State { available: in_flight, waiting: 0 }),
            returned: Condvar::new(),
            idle_slots: AtomicUsize::new(idle),
        }
    }

    /// Waits until fewer than `max_concurrent` evaluations run, for at most `patience`: an
    /// evaluation's wait counts against its deadline, and the thread waiting (perhaps an async
    /// runtime's) is never held longer than that. `None` when no permit came in time.
    pub(crate) fn acquire(&self, patience: Duration) -> Option<Permit<'_>> {
        let until = Instant::now() + patience;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while state.available == 0 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            state.waiting += 1;
            state = self.returned.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
            state.waiting -= 1;
        }
        state.available -= 1;
        Some(Permit(self))
    }

    /// Takes a slot for an idle instance, if one is left.
    pub(crate) fn reserve_idle(&self) -> bool {
        self.idle_slots.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
    }

    pub(crate) fn release_idle(&self, count: usize) {
        self.idle_slots.fetch_add(count, Ordering::AcqRel);
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.available += 1;
        if state.waiting > 0 {
            self.0.returned.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_caller_waits_for_a_permit() {
        let permits = Arc::new(Permits::new(1, 1));
        let first = permits.acquire(Duration::from_secs(60)).expect("a permit");
        let waiting = {
            let permits = Arc::clone(&permits);
            std::thread::spawn(move || {
                let _second = permits.acquire(Duration::from_secs(60)).expect("a permit");
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiting.is_finished(), "the second caller must wait");
        drop(first);
        waiting.join().unwrap();
    }

    /// A caller waits no longer than its patience: then it has no permit, and the next caller
    /// gets the one given back.
    #[test]
    fn a_caller_waits_no_longer_than_its_patience() {
        let permits = Permits::new(1, 1);
        let first = permits.acquire(Duration::ZERO).expect("a free permit at once");
        assert!(permits.acquire(Duration::ZERO).is_none());
        assert!(permits.acquire(Duration::from_millis(20)).is_none());
        drop(first);
        assert!(permits.acquire(Duration::ZERO).is_some());
    }

    #[test]
    fn idle_slots_are_bounded() {
        let permits = Permits::new(1, 2);
        assert!(permits.reserve_idle() && permits.reserve_idle());
        assert!(!permits.reserve_idle());
        permits.release_idle(1);
        assert!(permits.reserve_idle());
    }
}
