//! Runs actors on the simulated clock as a discrete-event simulation: at each moment, actors
//! reconcile until the cluster stops changing; then the clock jumps to the earliest moment an
//! actor asked to act again. Hours of cluster time pass in the time the work itself takes.

use std::sync::Arc;
use std::time::Duration;

use super::actors::{Kubelet, MigrationController, TaintManager};
use crate::store::{Kind, Store};
use crate::ApiError;

/// A component of the simulated cluster.
pub trait Actor: Send + Sync {
    /// The component's name, e.g. `kubelet`, as errors name it.
    fn name(&self) -> &'static str;
    /// Acts on the cluster at the clock's time; returns the (simulated, since the start) time it
    /// next needs to act, if any.
    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError>;
    /// The kinds whose objects the actor reads, when it is a function of them and of the time
    /// it asked to act again: then it is not reconciled while none of them changed and that
    /// time has not come (an informer's resync, in effect). `None`: reconciled every round.
    fn watches(&self) -> Option<Vec<Kind>> {
        None
    }
}

/// What an actor last answered, and the revision of its watched kinds it saw.
#[derive(Debug, Clone, Copy, Default)]
struct Memo {
    seen: Option<u64>,
    next: Option<Duration>,
}

pub(crate) fn kinds(names: &[(&str, &str)]) -> Option<Vec<Kind>> {
    Some(names.iter().map(|(api_version, kind)| Kind::new(api_version, kind)).collect())
}

const NODES: (&str, &str) = ("v1", "Node");
const PODS: (&str, &str) = ("v1", "Pod");
const VMIS: (&str, &str) = ("kubevirt.io/v1", "VirtualMachineInstance");
const MIGRATIONS: (&str, &str) = ("kubevirt.io/v1", "VirtualMachineInstanceMigration");

impl Actor for MigrationController {
    fn name(&self) -> &'static str {
        "migration-controller"
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        MigrationController::reconcile(self, store)
    }

    fn watches(&self) -> Option<Vec<Kind>> {
        kinds(&[MIGRATIONS, VMIS, NODES, PODS])
    }
}

impl Actor for Kubelet {
    fn name(&self) -> &'static str {
        "kubelet"
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        Kubelet::reconcile(self, store)
    }

    /// A VMI's memory, which the kubelet reads too, does not change while it runs.
    fn watches(&self) -> Option<Vec<Kind>> {
        kinds(&[NODES, PODS])
    }
}

impl Actor for TaintManager {
    fn name(&self) -> &'static str {
        "taint-manager"
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        TaintManager::reconcile(self, store)
    }

    fn watches(&self) -> Option<Vec<Kind>> {
        kinds(&[NODES, PODS])
    }
}

/// An actor shared with whoever reads its state after the run (a drain's progress, the
/// descheduler's counters).
impl<A: Actor + ?Sized> Actor for Arc<A> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        (**self).reconcile(store)
    }

    fn watches(&self) -> Option<Vec<Kind>> {
        (**self).watches()
    }
}

/// An actor that joins the cluster at a given moment (a descheduler started mid-scenario).
pub struct StartingAt<A> {
    /// When the actor joins, in simulated time since the start.
    pub start: Duration,
    /// The actor, not reconciled before then.
    pub actor: A,
}

impl<A: Actor> Actor for StartingAt<A> {
    fn name(&self) -> &'static str {
        self.actor.name()
    }

    fn reconcile(&self, store: &Store) -> Result<Option<Duration>, ApiError> {
        if store.clock().elapsed() < self.start {
            return Ok(Some(self.start));
        }
        self.actor.reconcile(store)
    }

    fn watches(&self) -> Option<Vec<Kind>> {
        self.actor.watches()
    }
}

/// Rounds of reconciling at one moment before the cluster is taken as settled; actors that keep
/// changing it beyond this are reported instead of looping forever.
const MAX_ROUNDS: usize = 1000;

type Watching = (Box<dyn Actor>, Option<Vec<Kind>>);

/// The simulated cluster's store, and the actors that run on it.
pub struct Simulation {
    store: Arc<Store>,
    /// Each actor, with the kinds it watches.
    actors: Vec<Watching>,
    memos: std::sync::Mutex<Vec<Memo>>,
}

impl Simulation {
    /// A simulation of `actors` on `store`; each round reconciles them in this order.
    pub fn new(store: Arc<Store>, actors: Vec<Box<dyn Actor>>) -> Self {
        let memos = std::sync::Mutex::new(vec![Memo::default(); actors.len()]);
        let actors = actors
            .into_iter()
            .map(|actor| {
                let watches = actor.watches();
                (actor, watches)
            })
            .collect();
        Self { store, actors, memos }
    }

    /// The store the actors act on.
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

    /// Runs events up to simulated time `until`. Returns whether anything is still to happen
    /// after it: if not, the clock stays at the last event, so a caller can stop there.
    pub fn run_until_idle(&self, until: Duration) -> Result<bool, ApiError> {
        loop {
            let next = self.settle()?;
            let now = self.store.clock().elapsed();
            match next {
                Some(at) if at <= until => self.store.clock().advance(at.saturating_sub(now)),
                Some(_) => {
                    self.store.clock().advance(until.saturating_sub(now));
                    return Ok(true);
                }
                None => return Ok(false),
            }
        }
    }

    /// Runs on wall-clock time, `speed` times faster than real time, until `stop` is set: for a
    /// simulated cluster that clients change while it runs (`evac sim serve`). Actors reconcile
    /// whenever the cluster changed or one of them is due, and at least every 100 ms.
    pub fn run_realtime(&self, speed: f64, stop: &std::sync::atomic::AtomicBool) -> Result<(), ApiError> {
        use std::sync::atomic::Ordering;
        const TICK: Duration = Duration::from_millis(100);
        let started = std::time::Instant::now();
        let base = self.store.clock().elapsed();
        let mut seen = None;
        let mut due: Option<Duration> = None;
        while !stop.load(Ordering::Relaxed) {
            let target = base + started.elapsed().mul_f64(speed);
            let now = self.store.clock().elapsed();
            if target > now {
                self.store.clock().advance(target - now);
            }
            let now = self.store.clock().elapsed();
            let revision = self.store.revision();
            if seen != Some(revision) || due.is_some_and(|at| at <= now) {
                due = self.settle()?;
                seen = Some(self.store.revision());
            }
            // Sleep until the next actor is due, but wake for clients' changes within a tick.
            let wait = due.map_or(TICK, |at| at.saturating_sub(now).div_f64(speed).min(TICK));
            std::thread::sleep(wait.max(Duration::from_millis(1)));
        }
        Ok(())
    }

    /// Reconciles every actor until a round changes nothing; returns the earliest wake-up asked.
    fn settle(&self) -> Result<Option<Duration>, ApiError> {
        let mut memos = self.memos.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for _ in 0..MAX_ROUNDS {
            let before = self.store.revision();
            let now = self.store.clock().elapsed();
            let mut next: Option<Duration> = None;
            for ((actor, watches), memo) in self.actors.iter().zip(memos.iter_mut()) {
                let seen = watches.as_deref().map(|kinds| self.store.revision_of(kinds));
                let unchanged = seen.is_some() && memo.seen == seen && memo.next.is_none_or(|at| at > now);
                if !unchanged {
                    memo.next = actor.reconcile(&self.store)?;
                    // What it saw is what it read: its own writes wake it once more.
                    memo.seen = seen;
                }
                if let Some(at) = memo.next {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
            if self.store.revision() == before {
                return Ok(next);
            }
        }
        let names: Vec<_> = self.actors.iter().map(|(a, _)| a.name()).collect();
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
    use crate::store::Kind;
    use crate::SimClock;

    #[test]
    fn actors_run_on_simulated_time() {
        let store = Arc::new(Store::new(Arc::new(SimClock::default()), 10_000));
        let node = |name: &str| json!({"metadata": {"name": name}});
        for name in ["n1", "n2"] {
            store.create(&Kind::new("v1", "Node"), "", node(name), false).unwrap();
        }
        let vmis = Kind::new("kubevirt.io/v1", "VirtualMachineInstance");
        let vmi = json!({"metadata": {"name": "vm"}, "spec": {"domain": {"memory": {"guest": "2Gi"}}},
                         "status": {"nodeName": "n1", "evacuationNodeName": "n1", "phase": "Running"}});
        let uid = store.create(&vmis, "default", vmi, false).unwrap()["metadata"]["uid"].clone();
        // The VM's launcher pod, which tolerates the taint below.
        let launcher = json!({"metadata": {"name": "virt-launcher-vm-x", "annotations": {"kubevirt.io/domain": "vm"},
                                           "labels": {"kubevirt.io/created-by": uid}},
                              "spec": {"nodeName": "n1", "tolerations": [{"key": "k", "operator": "Exists"}]},
                              "status": {"phase": "Running"}});
        store.create(&Kind::new("v1", "Pod"), "default", launcher, false).unwrap();
        let migration = json!({"metadata": {"name": "m"}, "spec": {"vmiName": "vm"}});
        store.create(&crate::kinds::migrations(), "default", migration, false).unwrap();
        // A pod that must leave n1 at once when the taint lands 10 s in.
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}});
        store.create(&Kind::new("v1", "Pod"), "default", pod, false).unwrap();

        let simulation = Simulation::new(
            Arc::clone(&store),
            vec![
                Box::new(crate::actors::Scheduler),
                Box::new(MigrationController::default()),
                Box::new(TaintManager::default()),
                Box::new(Kubelet::default()),
            ],
        );
        simulation.run_until(Duration::from_secs(10)).unwrap();
        assert_eq!(store.clock().elapsed(), Duration::from_secs(10));
        let taint = json!({"key": "k", "effect": "NoExecute", "timeAdded": store.clock().timestamp()});
        store.set_node_taints("n1", &[taint]).unwrap();
        // 2 GiB at 64 MiB/s: the migration ends at 32 s; an hour of cluster time runs at once.
        simulation.run_until(Duration::from_secs(3600)).unwrap();
        assert_eq!(store.clock().elapsed(), Duration::from_secs(3600));
        assert_eq!(store.get(&vmis, "default", "vm").unwrap()["status"]["nodeName"], "n2");
        assert!(
            store.get(&Kind::new("v1", "Pod"), "default", "p").is_err(),
            "the taint manager evicted the pod, and its kubelet removed it after its grace period"
        );
    }
}
