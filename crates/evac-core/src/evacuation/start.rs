//! Which candidates start, in their order: evac's only while there is room, in time, and where
//! the VM has somewhere to go; the others wait or are deferred, with an event saying why.

use super::order::Candidate;
use super::queue::Outlook;
use super::Context;
use crate::placement::Placement;

/// What becomes of one candidate.
pub(super) enum Turn {
    /// Its migration starts (or, beside KubeVirt's evacuation controller, it is marked);
    /// `within_room`: it takes one of the room's slots (a VM marked early for KubeVirt's queue
    /// does not).
    Start { within_room: bool },
    /// It waits for room, with the event of a hopeless VM that savable ones go before.
    Wait { event: Option<String> },
    /// It is not started now: why, for the trace and its event; the words its held pod's release
    /// carries, when the hold should end; whether the VMI gets the event.
    Defer { why: String, release: Option<String>, event: bool },
}

/// The candidates' turns, taken in order.
pub(super) struct Starts<'p, 'n, 'o, 'i, 'a> {
    /// How many migrations may start.
    pub room: usize,
    /// How many of the room's slots are taken so far.
    pub started: usize,
    /// Where VMs can go, when evac places its migrations.
    pub placement: Option<Placement<'p, 'n>>,
    /// KubeVirt's queue, beside its evacuation controller when a VM of the node has a deadline.
    pub outlook: Option<&'o mut Outlook<'i, 'a>>,
    /// Some candidate can still leave in time.
    pub savable_waits: bool,
}

impl Starts<'_, '_, '_, '_, '_> {
    /// The turn of the next candidate, in order.
    pub fn turn(&mut self, c: &Candidate<'_, '_>, node: &str, cx: &mut Context<'_>) -> Turn {
        let turn = self.too_late(c, cx).or_else(|| self.queued(c, cx)).or_else(|| self.placed(c, node));
        let turn = turn.unwrap_or(Turn::Start { within_room: self.started < self.room });
        if let Turn::Start { within_room: true } = turn {
            self.started += 1;
        }
        turn
    }

    /// Its pod's SIGTERM has come (a stock virt-handler is shutting the guest down): a migration
    /// started now saves nothing, whatever the bandwidth. With the bandwidth KubeVirt sets (the
    /// cluster's, or its MigrationPolicy's), the estimate is KubeVirt's own figure: a migration it
    /// says cannot end before its pod is deleted is not started at all. With an assumed bandwidth
    /// (KubeVirt's default is unlimited), it only goes after the savable ones.
    fn too_late(&self, c: &Candidate<'_, '_>, cx: &Context<'_>) -> Option<Turn> {
        let now = cx.now;
        if !cx.flavor.is_evac() {
            return None;
        }
        if c.deadline <= now {
            let why =
                "its pod's containers were told to stop (SIGTERM): its guest is shutting down".to_owned();
            return Some(Turn::Defer { why, release: None, event: true });
        }
        if c.bandwidth_known && c.deadline.is_finite() && c.hopeless(now) {
            // Holding its pod longer only keeps whoever disrupted it waiting.
            let why = format!("{}: it cannot leave in time", c.why_hopeless(now));
            return Some(Turn::Defer { why, release: Some(c.why_hopeless(now)), event: true });
        }
        None
    }

    /// Without room: beside KubeVirt's evacuation controller, a VM with a deadline is marked at
    /// once when KubeVirt's queue would start its migration in time for it; any other waits.
    fn queued(&mut self, c: &Candidate<'_, '_>, cx: &mut Context<'_>) -> Option<Turn> {
        let now = cx.now;
        let within_room = self.started < self.room;
        let queued = match self.outlook.as_deref_mut() {
            Some(outlook) if within_room || c.deadline.is_finite() => {
                Some(outlook.forecast.queue(c.estimate.seconds(), true))
            }
            _ => None,
        };
        match (within_room, queued) {
            (true, _) => None,
            (false, Some((start, end))) if end > c.deadline => {
                let why = format!(
                    "it would wait about {} s for a migration slot, then need about {} s, and its pod is \
                     deleted in {} s: it cannot leave in time",
                    (start - now).max(0.0).round(),
                    c.estimate.seconds().round(),
                    (c.deadline - now).max(0.0).round()
                );
                let known = c.bandwidth_known;
                Some(Turn::Defer { release: known.then(|| why.clone()), why, event: known })
            }
            (false, Some((start, _))) => {
                cx.trace.note(|| {
                    format!(
                        "{}/{}: no room now, but KubeVirt's queue starts it in about {} s and it ends before \
                         its deadline: mark it now",
                        c.namespace,
                        c.name,
                        (start - now).max(0.0).round()
                    )
                });
                None
            }
            // Only evac's own ordering skips anything; within the limits, nothing to say.
            (false, None) => Some(Turn::Wait {
                event: (cx.flavor.is_evac() && c.hopeless(now) && self.savable_waits).then(|| {
                    format!("{}, and VMs that can still leave in time go first", c.why_hopeless(now))
                }),
            }),
        }
    }

    /// Where the VM can go: no room on any node it may run on defers it.
    fn placed(&mut self, c: &Candidate<'_, '_>, node: &str) -> Option<Turn> {
        let placement = self.placement.as_mut()?;
        let why = placement.reserve(node, c.memory, c.tolerations, &c.selection).err()?.to_string();
        Some(Turn::Defer { release: Some(why.clone()), why, event: true })
    }
}
