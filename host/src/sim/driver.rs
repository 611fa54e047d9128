//! Runs actors on the simulated clock as a discrete-event simulation: at each moment, actors
//! reconcile until the cluster stops changing; then the clock jumps to the earliest moment an
//! actor asked to act again. Hours of cluster time pass in the time the work itself takes.

use std::sync::Arc;
use std::time::Duration;

use super::actors::{Kubelet, MigrationController, TaintManager};
use super::error::ApiError;
use super::store::Store;

/// A component of the simulated cluster.
pub trait Actor: Send + Sync {
    fn name(&self) -> &'static str;
    /// Acts on the cluster at the clock's time; returns the (simulated, since the start) time it
    /// next needs to act, if any.
    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError>;
}

impl Actor for MigrationController {
    fn name(&self) -> &'static str {
        "migration-controller"
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        MigrationController::reconcile(self, store)
    }
}

impl Actor for Kubelet {
    fn name(&self) -> &'static str {
        "kubelet"
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        Kubelet::reconcile(self, store)
    }
}

impl Actor for TaintManager {
    fn name(&self) -> &'static str {
        "taint-manager"
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        TaintManager::reconcile(self, store)
    }
}

/// Rounds of reconciling at one moment before the cluster is taken as settled; actors that keep
/// changing it beyond this are reported instead of looping forever.
const MAX_ROUNDS: usize = 1000;

pub struct Simulation {
    store: Arc<Store>,
    actors: Vec<Box<dyn Actor>>,
}

impl Simulation {
    pub fn new(store: Arc<Store>, actors: Vec<Box<dyn Actor>>) -> Self {
        Self { store, actors }
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Runs until simulated time `until` (since the start), or until no actor has anything left
    /// to do before then; the clock ends at `until`.
    pub fn run_until(&self, until: Duration) -> Result<(), ApiError> {
        loop {
            let next = self.settle()?;
            let now = self.store.clock().elapsed();
            match next {
                Some(at) if at <= until && at > now => self.store.clock().advance(at - now),
                _ => {
                    if until > now {
                        self.store.clock().advance(until - now);
                        self.settle()?;
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Reconciles every actor until a round changes nothing; returns the earliest wake-up asked.
    fn settle(&self) -> Result<Option<Duration>, ApiError> {
        for _ in 0..MAX_ROUNDS {
            let before = self.store.revision();
            let mut next: Option<Duration> = None;
            for actor in &self.actors {
                if let Some(at) = actor.reconcile(&self.store)? {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
            if self.store.revision() == before {
                return Ok(next);
            }
        }
        let names: Vec<_> = self.actors.iter().map(|a| a.name()).collect();
        Err(ApiError {
            code: 500,
            reason: "InternalError",
            message: format!(
                "the actors {names:?} kept changing the cluster for {MAX_ROUNDS} rounds at one moment"
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sim::store::{Kind, Patch};
    use crate::sim::SimClock;

    #[test]
    fn actors_run_on_simulated_time() {
        let store = Arc::new(Store::new(Arc::new(SimClock::default()), 10_000));
        let node = |name: &str| json!({"metadata": {"name": name}});
        for name in ["n1", "n2"] {
            store.create(&Kind::new("v1", "Node"), "", node(name), false).unwrap();
        }
        let vmis = Kind::new("kubevirt.io/v1", "VirtualMachineInstance");
        let vmi = json!({"metadata": {"name": "vm"}, "spec": {"domain": {"memory": {"guest": "2Gi"}}},
                         "status": {"nodeName": "n1", "evacuationNodeName": "n1"}});
        store.create(&vmis, "default", vmi, false).unwrap();
        let migration = json!({"metadata": {"name": "m"}, "spec": {"vmiName": "vm"}});
        store.create(&crate::sim::actors::migration::migrations(), "default", migration, false).unwrap();
        // A pod that must leave n1 at once when the taint lands 10 s in.
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}});
        store.create(&Kind::new("v1", "Pod"), "default", pod, false).unwrap();

        let simulation = Simulation::new(
            Arc::clone(&store),
            vec![Box::new(MigrationController::default()), Box::new(TaintManager)],
        );
        simulation.run_until(Duration::from_secs(10)).unwrap();
        assert_eq!(store.clock().elapsed(), Duration::from_secs(10));
        let taint = json!({"key": "k", "effect": "NoExecute", "timeAdded": store.clock().timestamp()});
        store
            .patch(
                &Kind::new("v1", "Node"),
                "",
                "n1",
                &Patch::Merge(json!({"spec": {"taints": [taint]}})),
                false,
            )
            .unwrap();
        // 2 GiB at 64 MiB/s: the migration ends at 32 s; an hour of cluster time runs at once.
        simulation.run_until(Duration::from_secs(3600)).unwrap();
        assert_eq!(store.clock().elapsed(), Duration::from_secs(3600));
        assert_eq!(store.get(&vmis, "default", "vm").unwrap()["status"]["nodeName"], "n2");
        assert!(
            store.get(&Kind::new("v1", "Pod"), "default", "p").is_err(),
            "the taint manager evicted the pod"
        );
    }
}
