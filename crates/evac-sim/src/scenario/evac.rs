//! How evac joins a scenario's cluster, through the interfaces a real install gives it: a webhook
//! service that the cluster's `pods/eviction` webhook names, and components that act on the
//! cluster (its controller). The scenarios know nothing of how evac works: whoever runs them
//! plugs an [`Evac`] in (`crate::with_evac`, feature `evac`, with the policies run the caller's
//! way).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::report::ControllerStats;
use super::spec::Scenario;
use super::ScenarioError;
use crate::{Actor, Store};

/// The service a scenario's eviction webhook names to reach evac's policy server: namespace,
/// name. evac registers its webhook service under it ([`Store::register_service`]).
pub const SERVICE: (&str, &str) = ("evac", "evac-policy-server");
/// The path of evac's pod-eviction policy on its server.
pub const WEBHOOK_PATH: &str = "/validate/pod-eviction";

/// How a scenario runs: with KubeVirt alone (the baseline), or with evac.
#[derive(Clone, Default)]
pub enum Mode {
    /// KubeVirt as shipped, nothing else.
    #[default]
    KubeVirt,
    /// evac, as its host starts it.
    Evac(Arc<dyn Evac>),
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::KubeVirt => "KubeVirt",
            Self::Evac(_) => "Evac",
        })
    }
}

/// evac, as a host starts it in a simulated cluster.
pub trait Evac: Send + Sync {
    /// Starts evac in `store`'s cluster: registers its webhook service under [`SERVICE`] and
    /// returns its running parts. `restarts`: when its controller restarts (forgets everything it
    /// knew), in simulated time since the start.
    fn start(
        &self,
        store: &Arc<Store>,
        scenario: &Scenario,
        restarts: Vec<Duration>,
    ) -> Result<Box<dyn EvacRun>, ScenarioError>;

    /// Whether evac replaces KubeVirt's eviction webhook and evacuation controller (an option: a
    /// real KubeVirt keeps both on, and evac runs beside them).
    fn replaces_kubevirt(&self) -> bool;
}

/// evac running in a simulated cluster.
pub trait EvacRun: Send + Sync {
    /// Its components, to run as the cluster's actors.
    fn actors(&self) -> Vec<Box<dyn Actor>>;
    /// What its controller did, for the report.
    fn controller_stats(&self) -> ControllerStats;
    /// Every effect its policies returned, by `<policy> <effect> <outcome>` (`applied`,
    /// `monitored`, ...): in monitor mode, what evac would have done.
    fn effects(&self) -> BTreeMap<String, usize>;
}
