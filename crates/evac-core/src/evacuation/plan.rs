//! The decision in its phases: read, then for each VMI of the node its standing, its request's
//! follow-up, a call-off or what would migrate it; then the migrations KubeVirt's controller did
//! not say why they run and the unstarted ones of evacuations called off; then the room.

use std::collections::HashSet;

use super::call_off::{self, kubevirt_evacuates, CallOff};
use super::candidates;
use super::history::VmiKey;
use super::inputs::{self, Inputs, Listed};
use super::order::Candidate;
use super::outlook;
use super::requests::{self, FollowUp};
use super::room;
use super::settings::Settings;
use super::standing::Standings;
use super::Context;
use crate::cluster::{self, ClusterReader, ReadError};
use crate::effect::{EvacuationSource, MigrationCause, CAUSE_ANNOTATION, EVICTION_SOURCE_ANNOTATION};
use crate::kubevirt::NODE_KIND;
use crate::model::{Migration, Node, Pod};
use crate::trace::Trace;
use crate::{Decision, Effect};

/// Decides the evacuations of `node`: reads what they depend on, plans them, and notes the
/// answer last (a failed read is the answer too). The verdict is always Allow: this decision only
/// reports what should happen.
pub fn evacuate<C>(
    node: &Node<'_>,
    settings: &Settings,
    cluster: &C,
    cx: &mut Context<'_>,
) -> Result<Decision, ReadError>
where
    C: ClusterReader + ?Sized,
{
    let config = inputs::read_config(settings, cluster, cx).map_err(rejected(cx.trace))?;
    let listed = Listed::read(cluster, node.metadata.name.as_str()).map_err(rejected(cx.trace))?;
    let objects = listed.decode(node, cx.trace).map_err(rejected(cx.trace))?;
    let node = inputs::with_pressure_figures(node, &objects.vmis, cluster, cx);
    let mut raw_policies = Vec::new();
    let namespaces = objects.vmis.iter().map(|v| v.metadata.namespace.to_string());
    let (policies, namespace_labels) =
        inputs::read_policies(cluster, &mut raw_policies, namespaces, cx.trace);
    let inputs = Inputs {
        node: &node,
        settings,
        config: &config,
        vmis: &objects.vmis,
        pods: &objects.pods,
        migrations: &objects.migrations,
        policies: &policies,
        namespace_labels: &namespace_labels,
    };
    let plan = Plan::of(&inputs, cx);
    // Beside KubeVirt's evacuation controller, a VM with a deadline does not wait for evac's
    // room: KubeVirt's queue is foreseen, to mark it early enough (`queue`).
    let mut outlook = (cx.flavor.marks_for_kubevirt(settings) && plan.with_deadline(&inputs))
        .then(|| outlook::read(&inputs, cluster, cx));
    let raw_nodes = match plan.targets_needed(outlook.is_some(), cx) {
        true => {
            Some(inputs::list(cluster, NODE_KIND.0, NODE_KIND.1, None, None).map_err(rejected(cx.trace))?)
        }
        false => None,
    };
    let nodes =
        raw_nodes.as_deref().map(|raw| targets(raw, cluster)).transpose().map_err(rejected(cx.trace))?;
    let decision = plan.effects(&inputs, nodes.as_deref(), outlook.as_mut(), cx);
    cx.trace.note(|| {
        let effects: Vec<&str> = decision.effects.iter().map(Effect::type_name).collect();
        match effects.as_slice() {
            [] => "-> allow, nothing to do".to_owned(),
            _ => format!("-> allow, {}", effects.join(", ")),
        }
    });
    Ok(decision)
}

/// Notes a failed read as the answer.
fn rejected(trace: &mut Trace) -> impl FnOnce(ReadError) -> ReadError + '_ {
    move |error| {
        trace.note(|| format!("-> rejected (500): cannot read the cluster: {error}"));
        error
    }
}

/// The nodes VMs could go to, with their memory figures.
fn targets<'r, C>(raw: &'r [u8], cluster: &C) -> Result<Vec<Node<'r>>, ReadError>
where
    C: ClusterReader + ?Sized,
{
    let mut nodes = cluster::decode_list::<Node<'_>>(raw, NODE_KIND.1)?;
    crate::placement::read_working_sets(&mut nodes, cluster);
    Ok(nodes)
}

/// The decision before the migrations are placed: what could start, what ends.
#[derive(Default)]
pub(super) struct Plan<'i, 'a> {
    /// The node's launcher pods that have not completed, by namespace and name.
    pub launchers: Vec<&'i Pod<'a>>,
    pub candidates: Vec<Candidate<'i, 'a>>,
    /// Marks called off: (namespace, name).
    pub clears: Vec<VmiKey<'i>>,
    /// Unstarted evacuation migrations of evac's own evacuations that were called off, to
    /// delete: (VMI, migration).
    pub cancels: Vec<(VmiKey<'i>, &'i Migration<'a>)>,
    /// Requests naming a node the VMI is no longer on: (VMI, that node).
    pub stale: Vec<(VmiKey<'i>, String)>,
    /// Requests turned into marks, when evac creates the migrations itself.
    pub promotions: Vec<Effect>,
    pub events: Vec<Effect>,
    /// VMIs marked for this node and not called off.
    pub in_progress: HashSet<VmiKey<'i>>,
    /// How many migrations may start.
    pub room: usize,
    /// Beside KubeVirt's evacuation controller: the causes to record on the migrations it
    /// created, (namespace, migration name, cause).
    pub causes: Vec<(&'i str, &'i str, MigrationCause)>,
    /// Holds to end: their evacuation was given up, cannot finish in time, or has nowhere to go.
    pub releases: Vec<Effect>,
}

impl<'i, 'a> Plan<'i, 'a> {
    /// The plan of the node: each VMI's phases in turn, then the migrations to mend, then the room.
    pub fn of(inputs: &Inputs<'i, 'a>, cx: &mut Context<'_>) -> Self {
        let node_name = inputs.node.metadata.name.as_str();
        let launchers = launchers(inputs);
        let requests_count = cx.flavor.marks_for_kubevirt(inputs.settings);
        let standings = Standings::new(node_name, &launchers, inputs.migrations, requests_count);
        let mut plan = Plan::default();
        // Marked VMIs KubeVirt's controller is about to migrate: they take room already.
        let mut kubevirt_starting = 0u32;
        for vmi in inputs.vmis_on_node() {
            let standing = standings.of(vmi);
            match requests::follow_up(&standing, node_name, requests_count, cx) {
                Some(FollowUp::Stale(node)) => plan.stale.push((standing.key(), node)),
                Some(FollowUp::Mark(mark)) => plan.promotions.push(mark),
                None => {}
            }
            if let Some(call_off) = call_off::call_off(&standing, inputs, cx) {
                plan.call_off(standing.key(), call_off);
                continue;
            }
            if standing.marked {
                plan.in_progress.insert(standing.key());
            }
            let consideration = candidates::consider(&standing, inputs, cx);
            kubevirt_starting += u32::from(consideration.kubevirt_starts);
            plan.candidates.extend(consideration.candidate);
        }
        drop(standings);
        plan.launchers = launchers;
        if cx.flavor.is_evac() {
            plan.mend_migrations(inputs, cx);
        }
        plan.room = room::room(&mut plan.candidates, inputs, kubevirt_starting, cx);
        plan
    }

    /// A mark called off: the waiting migration is deleted by a later pass, once the mark is seen
    /// gone ([`call_off::orphans`]): deleting it before would only have KubeVirt create another.
    fn call_off(&mut self, vmi: VmiKey<'i>, call_off: CallOff) {
        self.clears.push(vmi);
        if let CallOff::GivenUp { releases, event } = call_off {
            self.releases.extend(releases);
            self.events.push(event);
        }
    }

    /// evac's: the causes KubeVirt's evacuation controller did not record, and the unstarted
    /// migrations of evacuations called off, to delete.
    fn mend_migrations(&mut self, inputs: &Inputs<'i, 'a>, cx: &mut Context<'_>) {
        self.causes = uncaused(inputs, &self.clears);
        self.cancels = call_off::orphans(inputs);
        for (namespace, migration, cause) in &self.causes {
            cx.trace.note(|| {
                format!("migration {namespace}/{migration} has no cause: record {}", cause.as_str())
            });
        }
        for ((namespace, vmi), migration) in &self.cancels {
            cx.trace.note(|| {
                format!(
                    "migration {namespace}/{} of {vmi} has not started and its evacuation was called off: delete it",
                    migration.metadata.name
                )
            });
        }
    }

    /// Whether a VM of the node has a deadline and waits: a candidate, or the VMI of a pending
    /// evacuation migration from the node, whose pod is being deleted.
    fn with_deadline(&self, inputs: &Inputs<'i, 'a>) -> bool {
        let node_name = inputs.node.metadata.name.as_str();
        self.candidates.iter().any(|c| c.deadline.is_finite())
            || inputs.migrations.iter().any(|m| {
                m.is_unstarted()
                    && m.evacuation_node().is_some_and(|n| n == node_name)
                    && inputs.deadline_of(m.metadata.namespace.as_str(), m.spec.vmi_name.as_str()).is_finite()
            })
    }

    /// Whether where VMs can go must be read: only when one of evac's migrations may start (or a
    /// VM with a deadline may be marked early), the node list being the largest read there is.
    fn targets_needed(&self, queue_read: bool, cx: &Context<'_>) -> bool {
        let early = queue_read && self.candidates.iter().any(|c| c.deadline.is_finite());
        cx.flavor.is_evac() && (self.room > 0 || early) && !self.candidates.is_empty()
    }
}

/// The node's launcher pods that have not completed (finished pods are never evicted again:
/// neither counted nor annotated), by namespace and name.
fn launchers<'i, 'a>(inputs: &Inputs<'i, 'a>) -> Vec<&'i Pod<'a>> {
    let node_name = inputs.node.metadata.name.as_str();
    let mut launchers: Vec<&Pod<'_>> = inputs
        .pods
        .iter()
        .filter(|p| p.spec.node_name == node_name && p.is_virt_launcher() && !p.is_completed())
        .collect();
    launchers.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    launchers
}

/// The unfinished evacuation migrations from the node that someone else created without a cause
/// (KubeVirt's evacuation controller) for a VMI it still evacuates, with the cause their VMI's
/// mark records: whoever created a migration, it says why it runs.
/// The VMIs whose marks this decision clears are left out: their migration is about to go.
fn uncaused<'i>(inputs: &Inputs<'i, '_>, clears: &[VmiKey<'_>]) -> Vec<(&'i str, &'i str, MigrationCause)> {
    let node_name = inputs.node.metadata.name.as_str();
    let mut causes: Vec<_> = inputs
        .migrations
        .iter()
        .filter(|m| m.is_active() && m.evacuation_node().is_some_and(|n| n == node_name))
        .filter(|m| m.metadata.annotation(CAUSE_ANNOTATION).is_none())
        .filter_map(|m| {
            let namespace = m.metadata.namespace.as_str();
            let vmi = inputs.vmi_of(m).filter(|v| kubevirt_evacuates(v, inputs.node))?;
            if clears.contains(&(namespace, vmi.metadata.name.as_str())) {
                return None;
            }
            let source =
                vmi.metadata.annotation(EVICTION_SOURCE_ANNOTATION).and_then(|s| EvacuationSource::parse(&s));
            Some((namespace, m.metadata.name.as_str(), super::cause(source, inputs.node)))
        })
        .collect();
    causes.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    causes
}
