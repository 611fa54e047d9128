//! Where one VMI of the node stands: marked or requested, by what, with which launcher pods,
//! and whether a migration of it is under way.

use std::collections::HashMap;

use super::history::{History, VmiKey};
use crate::effect::{EvacuationSource, EVICTION_SOURCE_ANNOTATION};
use crate::model::{Migration, Pod, VirtualMachineInstance};

/// One VMI of the node, as the evacuation controller sees it.
pub(super) struct Standing<'i, 'a> {
    pub vmi: &'i VirtualMachineInstance<'a>,
    pub namespace: &'i str,
    pub name: &'i str,
    /// Its migrations so far.
    pub history: History,
    /// Its launcher pods on the node that have not completed.
    pub pods: Vec<&'i Pod<'a>>,
    /// One of its pods is being deleted.
    pub terminating: bool,
    /// Marked for evacuation from this node (`status.evacuationNodeName`).
    pub marked: bool,
    /// Beside KubeVirt's evacuation controller: not marked, but requested from this node.
    pub requested: bool,
    /// What asked for its evacuation (`kubevirt.io/eviction-source`).
    pub source: Option<EvacuationSource>,
    /// A migration of it is under way: an unfinished one, other than an evacuation migration from
    /// this node that has not started (KubeVirt's evacuation controller retries a failed one at
    /// once and holds it Pending in its back-off; calling the evacuation off deletes it).
    pub under_way: bool,
}

/// What the standings are read against: the node's launcher pods and the migrations' histories.
pub(super) struct Standings<'l, 'i, 'a> {
    node: &'i str,
    launchers: &'l [&'i Pod<'a>],
    histories: HashMap<VmiKey<'i>, History>,
    unfinished: HashMap<VmiKey<'i>, Vec<&'i Migration<'a>>>,
    /// Whether a request counts: beside KubeVirt's evacuation controller only.
    requests_count: bool,
}

impl<'l, 'i, 'a> Standings<'l, 'i, 'a> {
    /// `launchers`: the node's launcher pods that have not completed.
    pub fn new(
        node: &'i str,
        launchers: &'l [&'i Pod<'a>],
        migrations: &'i [Migration<'a>],
        requests_count: bool,
    ) -> Self {
        let histories = super::history::histories(migrations);
        let unfinished = super::history::unfinished(migrations);
        Self { node, launchers, histories, unfinished, requests_count }
    }

    /// Where `vmi` stands.
    pub fn of(&self, vmi: &'i VirtualMachineInstance<'a>) -> Standing<'i, 'a> {
        let (namespace, name) = (vmi.metadata.namespace.as_str(), vmi.metadata.name.as_str());
        let history = self.histories.get(&(namespace, name)).cloned().unwrap_or_default();
        let pods: Vec<&Pod<'_>> = self
            .launchers
            .iter()
            .copied()
            .filter(|p| p.metadata.namespace == namespace && p.domain().as_deref() == Some(name))
            .collect();
        let marked = vmi.status.evacuation_node_name == self.node;
        let of_vmi = self.unfinished.get(&(namespace, name)).map_or(&[][..], Vec::as_slice);
        let held = !of_vmi.is_empty()
            && of_vmi.iter().all(|m| m.is_unstarted() && m.evacuation_node().is_some_and(|n| n == self.node));
        Standing {
            vmi,
            namespace,
            name,
            under_way: history.active && !held,
            history,
            terminating: pods.iter().any(|p| p.is_terminating()),
            pods,
            marked,
            requested: self.requests_count && !marked && vmi.is_requested_from(self.node),
            source: vmi
                .metadata
                .annotation(EVICTION_SOURCE_ANNOTATION)
                .and_then(|s| EvacuationSource::parse(&s)),
        }
    }
}

impl<'i> Standing<'i, '_> {
    /// The VMI, as the effects name it.
    pub fn key(&self) -> VmiKey<'i> {
        (self.namespace, self.name)
    }

    /// Marked or requested: an evacuation is asked for.
    pub fn evacuating(&self) -> bool {
        self.marked || self.requested
    }

    /// The source, when it is one of evac's own evacuations' (whose cause can go away by itself).
    pub fn own(&self) -> Option<EvacuationSource> {
        self.source.filter(|s| s.ends_by_itself())
    }
}
