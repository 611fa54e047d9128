//! The controller as an actor of the simulator: it runs at every round of a simulation, on the
//! simulated clock (policies read it through WASI), against the store as its cluster.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{Controller, Pass, RESYNC, WATCHED};
use crate::sim::error::ApiError;
use crate::sim::store::{Kind, Store};

pub struct ControllerActor {
    pub controller: Arc<Controller>,
    /// When the last resync ran, in simulated time.
    last_resync: Mutex<Option<Duration>>,
    /// Every pass, for reports and tests.
    passes: Mutex<Vec<Pass>>,
    /// When to restart, in simulated time, soonest last.
    restarts: Mutex<Vec<Duration>>,
}

impl ControllerActor {
    pub fn new(controller: Arc<Controller>) -> Self {
        Self {
            controller,
            last_resync: Mutex::default(),
            passes: Mutex::default(),
            restarts: Mutex::default(),
        }
    }

    /// Restarts the controller at these times (as a crash and a new pod would).
    pub fn restarting_at(self, mut at: Vec<Duration>) -> Self {
        at.sort_by(|a, b| b.cmp(a));
        *self.restarts.lock().unwrap_or_else(PoisonError::into_inner) = at;
        self
    }

    /// The next restart still to come.
    fn next_restart(&self) -> Option<Duration> {
        self.restarts.lock().unwrap_or_else(PoisonError::into_inner).last().copied()
    }

    pub fn passes(&self) -> Vec<Pass> {
        self.passes.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl crate::sim::Actor for ControllerActor {
    fn name(&self) -> &'static str {
        "evac-control"
    }

    fn watches(&self) -> Option<Vec<Kind>> {
        crate::sim::driver::kinds(&WATCHED)
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        let now = store.clock().elapsed();
        if self.next_restart().is_some_and(|at| at <= now) {
            self.restarts.lock().unwrap_or_else(PoisonError::into_inner).pop();
            self.controller.restart();
            *self.last_resync.lock().unwrap_or_else(PoisonError::into_inner) = None;
            tracing::info!(at = ?now, "evac control restarted");
        }
        let resync = {
            let mut last = self.last_resync.lock().unwrap_or_else(PoisonError::into_inner);
            let due = last.is_none_or(|at| now >= at + RESYNC);
            if due {
                *last = Some(now);
            }
            due
        };
        // The store answers every effect at once: the future is ready when polled.
        let pass = futures::executor::block_on(self.controller.reconcile(store, resync)).map_err(|e| {
            ApiError { code: 500, reason: "InternalError", message: format!("evac control: {e:#}") }
        })?;
        let next = (pass.pending_nodes > 0).then(|| {
            let last = self.last_resync.lock().unwrap_or_else(PoisonError::into_inner).unwrap_or(now);
            last + RESYNC
        });
        let next = match (next, self.next_restart()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.passes.lock().unwrap_or_else(PoisonError::into_inner).push(pass);
        Ok(next)
    }
}
