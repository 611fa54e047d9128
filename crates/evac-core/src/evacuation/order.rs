//! Which evacuations start first: as many VMs as possible must leave before their pods are
//! deleted. A pod being deleted has a deadline (its `deletionTimestamp`: the deletion's time
//! plus its grace period); a migration is estimated from the VM's memory, its dirty rate and the
//! bandwidth ([`crate::estimate`]).
//!
//! Savable VMs go first, the soonest deadline first and, among equal deadlines, the quickest
//! migration first (which finishes the most of them in the time there is); VMs without a
//! deadline follow, marked before drain-tainted, the descheduler's last, by name. A migration that cannot finish before
//! its deadline (or that KubeVirt would abort) is hopeless: it starts only when no savable VM
//! waits for the slot, and otherwise the VMI gets an event saying why it did not. When KubeVirt
//! sets the bandwidth, a migration estimated to end after its pod's deadline is not started at
//! all: the slot it would hold is worth more to the next VM to be disrupted.

use core::cmp::Ordering;

use crate::effect::EvacuationSource;
use crate::estimate::Estimate;
use crate::model::{NodeSelection, Toleration};

/// A VMI that should start an evacuation migration now, room permitting.
pub(super) struct Candidate<'i, 'a> {
    /// When its VM must be gone (its pod's SIGTERM under a stock virt-handler), infinite when
    /// nothing ends its pod ([`crate::hold::termination_deadline`]).
    pub deadline: f64,
    /// Its launcher pod, when that pod's termination is held: the hold ends when its migration
    /// cannot help.
    pub held: Option<crate::ObjectRef>,
    /// Marked for this node (rather than only on a drain-tainted node).
    pub marked: bool,
    pub namespace: &'i str,
    pub name: &'i str,
    pub source: Option<EvacuationSource>,
    /// The guest's memory in bytes.
    pub memory: f64,
    /// Where its pods may be scheduled.
    pub tolerations: &'i [Toleration<'a>],
    /// Which nodes' labels its pods need (node selector, required node affinity).
    pub selection: NodeSelection<'a>,
    pub estimate: Estimate,
    /// The estimate's bandwidth is KubeVirt's (the cluster's or a MigrationPolicy's), not
    /// assumed.
    pub bandwidth_known: bool,
}

impl Candidate<'_, '_> {
    /// Whether its migration cannot end with the VM on the target before its deadline.
    pub fn hopeless(&self, now: f64) -> bool {
        !self.estimate.completes() || now + self.estimate.seconds() > self.deadline
    }

    /// Why a hopeless migration was not started, for its event.
    pub fn why_hopeless(&self, now: f64) -> String {
        let left = (self.deadline - now).max(0.0).round();
        match self.estimate {
            Estimate::Completes(seconds) => {
                format!("its migration needs about {} s and its pod is deleted in {left} s", seconds.round())
            }
            Estimate::TimesOut(seconds) => format!(
                "its migration would not complete before KubeVirt's completion timeout ({} s)",
                seconds.round()
            ),
            Estimate::NeverConverges(_) => {
                "its guest writes to memory as fast as the migration sends it: the migration cannot converge"
                    .to_owned()
            }
        }
    }
}

/// Sorts candidates into the order their migrations start in.
pub(super) fn prioritize(candidates: &mut [Candidate<'_, '_>], now: f64) {
    candidates.sort_by(|a, b| compare(a, b, now));
}

fn rebalancing(c: &Candidate<'_, '_>) -> bool {
    c.source == Some(EvacuationSource::Descheduler)
}

fn compare(a: &Candidate<'_, '_>, b: &Candidate<'_, '_>, now: f64) -> Ordering {
    // Among deadlines, the quickest first; without one, the duration does not matter.
    let quickness = |c: &Candidate<'_, '_>| if c.deadline.is_finite() { c.estimate.seconds() } else { 0.0 };
    a.hopeless(now)
        .cmp(&b.hopeless(now))
        .then(a.deadline.total_cmp(&b.deadline))
        .then(quickness(a).total_cmp(&quickness(b)))
        .then(b.marked.cmp(&a.marked))
        // The descheduler's rebalancing after VMs that lose their node: what KubeVirt's
        // `system-maintenance` priority means, which evac's migrations cannot carry.
        .then(rebalancing(a).cmp(&rebalancing(b)))
        .then((a.namespace, a.name).cmp(&(b.namespace, b.name)))
}
