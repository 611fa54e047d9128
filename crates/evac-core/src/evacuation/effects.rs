//! The effects of a plan, in their order: the migrations that start (or the marks KubeVirt's
//! evacuation controller acts on), requests turned into marks, causes recorded, marks and stale
//! requests cleared, migrations deleted or requeued, holds ended, events, and the launcher pods'
//! annotations.

use super::annotations;
use super::call_off::release_ref;
use super::inputs::Inputs;
use super::order::Candidate;
use super::plan::Plan;
use super::queue::Outlook;
use super::start::{Starts, Turn};
use super::Context;
use crate::effect::EventReason;
use crate::model::Node;
use crate::placement::Placement;
use crate::{Decision, Effect, ObjectRef};

impl<'i, 'a> Plan<'i, 'a> {
    /// The effects: migrations started in order while there is room (evac's only where the VM
    /// has somewhere to go), marks called off, events, and the launcher pods' annotations.
    /// `outlook`: KubeVirt's queue, beside its evacuation controller when a VM of the node has a
    /// deadline: such a VM is marked beyond the room when the queue starts its migration in time,
    /// and migrations of VMs without a deadline ahead of it are requeued.
    pub fn effects(
        mut self,
        inputs: &Inputs<'i, 'a>,
        nodes: Option<&[Node<'_>]>,
        mut outlook: Option<&mut Outlook<'i, 'a>>,
        cx: &mut Context<'_>,
    ) -> Decision {
        let mut decision = Decision::allow();
        decision.effects = self.starts(inputs, nodes, outlook.as_deref_mut(), cx);
        decision.effects.append(&mut self.promotions);
        decision.effects.extend(self.causes.iter().map(|(namespace, name, cause)| {
            Effect::AnnotateMigration { migration: ObjectRef::new(*namespace, *name), cause: *cause }
        }));
        decision.effects.extend(self.clears_and_cancels(inputs.node));
        if let Some(outlook) = outlook {
            decision.effects.extend(outlook.requeue.iter().map(|migration| {
                let namespace = migration.metadata.namespace.as_str();
                Effect::CancelMigration {
                    vmi: ObjectRef::new(namespace, migration.spec.vmi_name.as_str()),
                    migration: ObjectRef::new(namespace, migration.metadata.name.as_str()),
                    node: migration.evacuation_node().map_or_else(String::new, |n| n.to_string()),
                    resource_version: migration.metadata.resource_version.to_string(),
                    requeue: true,
                }
            }));
        }
        decision.effects.append(&mut self.releases);
        decision.effects.append(&mut self.events);
        decision.effects.extend(self.launchers.iter().filter_map(|pod| {
            let vmi = pod.domain();
            let in_progress =
                vmi.is_some_and(|vmi| self.in_progress.contains(&(pod.metadata.namespace.as_str(), &*vmi)));
            annotations::annotate(pod, in_progress)
        }));
        decision
    }

    /// The candidates' turns in order ([`Starts`]): the effects of those that start; the events
    /// and hold releases of those that wait or are deferred go to the plan's.
    fn starts(
        &mut self,
        inputs: &Inputs<'i, 'a>,
        nodes: Option<&[Node<'_>]>,
        outlook: Option<&mut Outlook<'i, 'a>>,
        cx: &mut Context<'_>,
    ) -> Vec<Effect> {
        let node_name = inputs.node.metadata.name.as_str();
        let mut starts = Starts {
            room: self.room,
            started: 0,
            placement: nodes
                .map(|nodes| Placement::new(nodes, inputs.settings.pressure_levels().mark_below())),
            outlook,
            savable_waits: self.candidates.iter().any(|c| !c.hopeless(cx.now)),
        };
        let mut effects = Vec::new();
        for c in &self.candidates {
            match starts.turn(c, node_name, cx) {
                Turn::Start { .. } => effects.push(start(c, inputs, cx)),
                Turn::Wait { event } => {
                    cx.trace.note(|| format!("{}/{}: waits, no room left", c.namespace, c.name));
                    self.events.extend(event.map(|why| deferred(c, node_name, why)));
                }
                Turn::Defer { why, release, event } => {
                    cx.trace.note(|| format!("{}/{}: deferred, {why}", c.namespace, c.name));
                    if let (Some(pod), Some(release)) = (&c.held, release) {
                        self.releases.push(release_ref(pod, release));
                    }
                    if event {
                        self.events.push(deferred(c, node_name, why));
                    }
                }
            }
        }
        effects
    }

    /// Marks called off and stale requests cleared, and unstarted migrations of evacuations called
    /// off deleted, each in a stable order whatever order the cluster listed the VMIs in.
    fn clears_and_cancels(&mut self, node: &Node<'_>) -> Vec<Effect> {
        let node_name = node.metadata.name.as_str();
        self.clears.sort_unstable();
        self.stale.sort_unstable();
        self.cancels.sort_unstable_by(|a, b| (a.0, &a.1.metadata.name).cmp(&(b.0, &b.1.metadata.name)));
        let clears = self.clears.iter().map(|(namespace, name)| Effect::ClearEvacuation {
            vmi: ObjectRef::new(*namespace, *name),
            node: node_name.to_owned(),
        });
        let stale = self.stale.iter().map(|((namespace, name), node)| Effect::ClearEvacuation {
            vmi: ObjectRef::new(*namespace, *name),
            node: node.clone(),
        });
        let cancels = self.cancels.iter().map(|((namespace, vmi), migration)| Effect::CancelMigration {
            vmi: ObjectRef::new(*namespace, *vmi),
            migration: ObjectRef::new(*namespace, migration.metadata.name.as_str()),
            node: node_name.to_owned(),
            resource_version: migration.metadata.resource_version.to_string(),
            requeue: false,
        });
        clears.chain(stale).chain(cancels).collect()
    }
}

/// The start of a candidate's migration: beside KubeVirt's evacuation controller, the mark it
/// creates the migration for; otherwise the migration itself.
fn start(c: &Candidate<'_, '_>, inputs: &Inputs<'_, '_>, cx: &mut Context<'_>) -> Effect {
    let marks_for_kubevirt = cx.flavor.marks_for_kubevirt(inputs.settings);
    cx.trace.note(|| {
        let how = if marks_for_kubevirt {
            "mark it for KubeVirt's evacuation controller to migrate"
        } else {
            "start its migration"
        };
        format!("{}/{}: {how}", c.namespace, c.name)
    });
    if marks_for_kubevirt {
        Effect::MarkForEvacuation {
            vmi: ObjectRef::new(c.namespace, c.name),
            node: inputs.node.metadata.name.to_string(),
            dry_run: false,
            source: c.source,
        }
    } else {
        cx.flavor.migration(c, inputs.node)
    }
}

/// The event of a candidate not started, saying why.
fn deferred(c: &Candidate<'_, '_>, node: &str, why: String) -> Effect {
    Effect::RecordEvent {
        vmi: ObjectRef::new(c.namespace, c.name),
        node: node.to_owned(),
        reason: EventReason::EvacuationDeferred,
        message: format!("evac did not start the VMI's migration from node {node}: {why}"),
    }
}
