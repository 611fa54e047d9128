//! Why the evacuation controller would not migrate a VMI now.

use super::standing::Standing;
use super::Context;
use crate::kubevirt_config::KubeVirtConfig;
use crate::model::{EvictionStrategy, VirtualMachineInstance};

/// Why the evacuation controller would not migrate a VMI now (its words are only built for a
/// trace).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Blocker<'v> {
    BeingDeleted,
    Strategy(Option<&'v EvictionStrategy>),
    NotMigratable,
    Migrating,
    Pods(usize),
    NotRunning(&'v str),
    Finished(&'v str),
    BackingOff { seconds: f64, failures: u32 },
}

impl core::fmt::Display for Blocker<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::BeingDeleted => f.write_str("it is being deleted"),
            Self::Strategy(None) => f.write_str("it has no eviction strategy, which does not migrate"),
            Self::Strategy(Some(strategy)) => {
                write!(f, "its eviction strategy ({}) does not migrate", strategy.as_str())
            }
            Self::NotMigratable => f.write_str("it is not live-migratable"),
            Self::Migrating => f.write_str("a migration of it is under way"),
            Self::Pods(count) => write!(f, "{count} active launcher pods, not one"),
            Self::NotRunning("") => f.write_str("it has no phase yet, not Running"),
            Self::NotRunning(phase) => write!(f, "it is {phase}, not Running"),
            Self::Finished(phase) => write!(f, "it is {phase}"),
            Self::BackingOff { seconds, failures } => {
                write!(f, "backing off for {seconds:.0} s more after {failures} failed migrations")
            }
        }
    }
}

/// Why the evacuation controller would not migrate the VMI now, or `None` when it would, as
/// KubeVirt's `filterRunningNonMigratingVMIs` filters: not final, not being deleted,
/// live-migratable under a strategy that migrates (`VMIMigratableOnEviction`: not `None` nor
/// `External`), not migrating already, and with exactly one active pod (a second one means a
/// migration is under way). Only pods on this node are counted: an unfinished migration's target
/// pod elsewhere comes with an active migration, which is checked first. The phase and the
/// back-off are the flavour's ([`super::Flavor::waits`]).
pub(super) fn migration_blocker<'v>(
    standing: &Standing<'v, '_>,
    config: &'v KubeVirtConfig,
    cx: &Context<'_>,
) -> Option<Blocker<'v>> {
    let vmi: &'v VirtualMachineInstance<'_> = standing.vmi;
    let strategy = vmi.eviction_strategy(config.eviction_strategy.as_ref());
    if vmi.is_being_deleted() {
        return Some(Blocker::BeingDeleted);
    }
    if !matches!(strategy, Some(EvictionStrategy::LiveMigrate | EvictionStrategy::LiveMigrateIfPossible)) {
        return Some(Blocker::Strategy(strategy));
    }
    if !vmi.is_migratable() {
        return Some(Blocker::NotMigratable);
    }
    if standing.history.active {
        return Some(Blocker::Migrating);
    }
    if standing.pods.len() != 1 {
        return Some(Blocker::Pods(standing.pods.len()));
    }
    cx.flavor.waits(vmi.status.phase.as_str(), &standing.history, cx.now)
}
