//! Whose evacuation controller a decision is, and every place the two decide differently.

use super::blocker::Blocker;
use super::history::{History, Load};
use super::order::{self, Candidate};
use super::settings::Settings;
use crate::kubevirt_config::KubeVirtConfig;
use crate::model::Node;
use crate::{Effect, ObjectRef};

/// Whose evacuation controller the decision is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flavor {
    /// evac's: migrations within the parallel limits, soonest deadline first, with a back-off after
    /// failures and their cause recorded; marks called off when their cause is gone or after
    /// repeated failures.
    #[default]
    Evac,
    /// KubeVirt's as shipped (v1.9, `pkg/virt-controller/watch/drain/evacuation/evacuation.go`,
    /// `EvacuationController.sync`): a migration for every candidate at once (the migration
    /// controller applies the parallel limits, its priority queue and the back-off), no cause, and
    /// a mark that stays until the VM has migrated. It is what a cluster without evac does, for
    /// the simulator's baseline.
    KubeVirt,
}

impl Flavor {
    /// Whether this is evac's controller, with its requests, call-offs, deadlines and placement.
    pub(super) fn is_evac(self) -> bool {
        self == Self::Evac
    }

    /// Whether KubeVirt's evacuation controller runs beside the decision (and creates the
    /// migrations of marked VMIs).
    pub(super) fn kubevirt_controller_runs(self, settings: &Settings) -> bool {
        self == Self::KubeVirt || settings.kubevirt_evacuation_controller
    }

    /// evac beside KubeVirt's evacuation controller, which migrates every marked VMI at once: evac
    /// marks only when a migration of its own may start, and creates none.
    pub(super) fn marks_for_kubevirt(self, settings: &Settings) -> bool {
        self == Self::Evac && settings.kubevirt_evacuation_controller
    }

    /// Why a VMI otherwise fit to migrate waits, from its phase and its migrations' history:
    /// evac waits for the VMI to run and for its back-off; KubeVirt's controller creates the
    /// migration of any VMI not finished and its migration controller holds it Pending instead.
    pub(super) fn waits<'v>(self, phase: &'v str, history: &History, now: f64) -> Option<Blocker<'v>> {
        match self {
            Self::Evac if phase != "Running" => Some(Blocker::NotRunning(phase)),
            Self::Evac => match history.retry_at() {
                Some(at) if now >= at => None,
                Some(at) => Some(Blocker::BackingOff { seconds: at - now, failures: history.failures }),
                None => None,
            },
            Self::KubeVirt if matches!(phase, "Succeeded" | "Failed") => Some(Blocker::Finished(phase)),
            Self::KubeVirt => None,
        }
    }

    /// Puts the candidates in the order their migrations start in, and says how many may start:
    /// evac's order ([`order::prioritize`]) within the parallel limits; KubeVirt 1.9 creates them
    /// all, by name, and its migration controller holds them Pending for a slot.
    pub(super) fn order(
        self,
        candidates: &mut [Candidate<'_, '_>],
        load: Load,
        config: &KubeVirtConfig,
        now: f64,
    ) -> usize {
        match self {
            Self::Evac => {
                order::prioritize(candidates, now);
                let cluster = config.parallel_migrations_per_cluster.saturating_sub(load.cluster);
                let outbound = config.parallel_outbound_migrations_per_node.saturating_sub(load.outbound);
                cluster.min(outbound) as usize
            }
            Self::KubeVirt => {
                candidates.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));
                candidates.len()
            }
        }
    }

    /// The migration of a candidate that starts: only virt-controller may set a priority (virt-api
    /// refuses it from anyone else), so evac's carry their cause instead and are ordered by when
    /// evac creates them.
    pub(super) fn migration(self, candidate: &Candidate<'_, '_>, node: &Node<'_>) -> Effect {
        Effect::CreateMigration {
            vmi: ObjectRef::new(candidate.namespace, candidate.name),
            node: node.metadata.name.to_string(),
            cause: self.is_evac().then(|| super::cause(candidate.source, node)),
            priority: (self == Self::KubeVirt).then(|| super::priority(candidate.source)),
        }
    }
}
