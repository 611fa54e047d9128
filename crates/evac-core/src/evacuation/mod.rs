//! The evacuation decision: what KubeVirt's evacuation controller and VMI controller do for the
//! VMIs of one node, as effects instead of writes.
//!
//! For each VMI on the node it decides whether to start an evacuation migration (marked for this
//! node or drain-tainted, migratable, not already migrating, not backing off, within the parallel
//! limits), whether the mark no longer applies, and how the descheduler's annotations on the
//! launcher pods must read. Run again on the state its effects produce, it asks for nothing more.

mod annotations;
mod history;
mod order;
mod queue;
mod release;
mod settings;

pub use history::{backoff_seconds, kubevirt_backoff_until, BACKOFF_MAX_SECONDS, BACKOFF_START_SECONDS};
pub use settings::{NodePressure, Settings, DEFAULT_ASSUMED_BANDWIDTH, DEFAULT_MAX_FAILED_EVACUATIONS};

use std::collections::{BTreeMap, HashSet};

use crate::cluster::{self, ClusterReader, ListResourcesAll, ReadError};
use crate::effect::{
    EvacuationSource, EventReason, MigrationCause, MigrationPriority, CAUSE_ANNOTATION,
    EVACUATION_REQUEST_ANNOTATION, EVICTION_SOURCE_ANNOTATION,
};
use crate::estimate::{self, Estimate};
use crate::kubevirt::DIRTY_RATE_ANNOTATION;
use crate::kubevirt_config::{KubeVirtConfig, KUBEVIRT_API_VERSION};
use crate::migration_policy::{
    self, MigrationPolicy, MigrationSettings, MIGRATION_POLICY_API_VERSION, MIGRATION_POLICY_KIND,
};
use crate::model::{
    quantity, AdmissionRequest, EvictionStrategy, Migration, Node, Pod, Str, VirtualMachineInstance,
};
use crate::placement::Placement;
use crate::trace::Trace;
use crate::{Decision, Effect, ObjectRef};

use history::{History, VmiKey};
use order::Candidate;

pub use crate::kubevirt::{LAUNCHER_SELECTOR, NODE_NAME_LABEL};

/// Why a request could not be decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// The request is not one this decision handles: a configuration error, not a verdict.
    BadRequest(String),
    /// Reading the cluster failed.
    Read(ReadError),
}

impl RequestError {
    /// The HTTP status a policy answers with: 400 for a bad request, 500 for a failed read.
    pub fn code(&self) -> u16 {
        match self {
            Self::BadRequest(_) => 400,
            Self::Read(_) => 500,
        }
    }
}

impl core::fmt::Display for RequestError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::BadRequest(message) => f.write_str(message),
            Self::Read(e) => write!(f, "cannot read the cluster: {e}"),
        }
    }
}

impl std::error::Error for RequestError {}

impl From<ReadError> for RequestError {
    fn from(e: ReadError) -> Self {
        Self::Read(e)
    }
}

/// Decides the node of an admission request on a Node (`request.object`).
pub fn decide_request<C>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
) -> Result<Decision, RequestError>
where
    C: ClusterReader + ?Sized,
{
    decide_request_traced(request, settings, cluster, now, &mut Trace::off())
}

/// [`decide_request`], recording its checks in order in `trace`: the node and what it carries,
/// each VMI's standing, the room the parallel limits leave, each candidate's migration, and the
/// answer last.
pub fn decide_request_traced<C>(
    request: &AdmissionRequest<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Result<Decision, RequestError>
where
    C: ClusterReader + ?Sized,
{
    let node = node_of(request).inspect_err(|error| {
        trace.note(|| format!("-> rejected ({}): {error}", error.code()));
    })?;
    trace.note(|| format!("node {} of {}", request.operation, node.metadata.name));
    // A failed read is noted, as the answer, by the decision itself.
    Ok(decide_traced_as(Flavor::Evac, &node, settings, cluster, now, trace)?)
}

/// The Node of a request, or why the request is not one this decision handles.
fn node_of<'a>(request: &AdmissionRequest<'a>) -> Result<Node<'a>, RequestError> {
    let kind = &request.kind;
    if kind.kind != "Node" || !kind.group.is_empty() {
        let operation =
            if request.operation.is_empty() { "<no operation>" } else { request.operation.as_str() };
        let got = match (kind.kind.is_empty(), kind.group.is_empty()) {
            (true, _) => "<no kind>".to_owned(),
            (false, true) => format!("{} {}", kind.version, kind.kind),
            (false, false) => format!("{}/{} {}", kind.group, kind.version, kind.kind),
        };
        return Err(RequestError::BadRequest(format!(
            "this policy only evaluates Node requests, got {operation} {got}"
        )));
    }
    let Some(object) = request.object.filter(|o| o.get() != "null") else {
        return Err(RequestError::BadRequest(format!(
            "the {} request of node {:?} carries no Node object",
            request.operation, request.name
        )));
    };
    let node: Node<'_> = serde_json::from_str(object.get()).map_err(|e| {
        RequestError::BadRequest(format!("cannot decode the Node: {}", crate::json_error_text(&e)))
    })?;
    if node.metadata.name.is_empty() {
        return Err(RequestError::BadRequest("the Node has no name".into()));
    }
    Ok(node)
}

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

/// Decides the evacuations of `node` at `now` (seconds since the Unix epoch). The verdict is
/// always Allow: this decision only reports what should happen.
pub fn decide<C>(node: &Node<'_>, settings: &Settings, cluster: &C, now: f64) -> Result<Decision, ReadError>
where
    C: ClusterReader + ?Sized,
{
    decide_as(Flavor::Evac, node, settings, cluster, now)
}

/// [`decide`], as evac's or KubeVirt's evacuation controller decides.
pub fn decide_as<C>(
    flavor: Flavor,
    node: &Node<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
) -> Result<Decision, ReadError>
where
    C: ClusterReader + ?Sized,
{
    decide_traced_as(flavor, node, settings, cluster, now, &mut Trace::off())
}

/// [`decide_as`], recording its checks in order in `trace` (see [`decide_request_traced`]).
pub fn decide_traced_as<C>(
    flavor: Flavor,
    node: &Node<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Result<Decision, ReadError>
where
    C: ClusterReader + ?Sized,
{
    let result = decide_reading(flavor, node, settings, cluster, now, trace);
    match &result {
        Ok(decision) => trace.note(|| {
            let effects: Vec<&str> = decision.effects.iter().map(Effect::type_name).collect();
            match effects.as_slice() {
                [] => "-> allow, nothing to do".to_owned(),
                _ => format!("-> allow, {}", effects.join(", ")),
            }
        }),
        Err(error) => trace.note(|| format!("-> rejected (500): cannot read the cluster: {error}")),
    }
    result
}

fn decide_reading<C>(
    flavor: Flavor,
    node: &Node<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Result<Decision, ReadError>
where
    C: ClusterReader + ?Sized,
{
    let name = node.metadata.name.as_str();
    let config = KubeVirtConfig::read(settings.kubevirt.as_ref(), cluster)?;
    trace.note(|| {
        let bandwidth = match config.bandwidth_per_migration {
            Some(bytes) => format!("bandwidthPerMigration {bytes} bytes/s"),
            None => "bandwidthPerMigration unlimited".to_owned(),
        };
        format!(
            "KubeVirt: parallelMigrationsPerCluster {}, parallelOutboundMigrationsPerNode {}, {bandwidth}; \
             its evacuation controller {}",
            config.parallel_migrations_per_cluster,
            config.parallel_outbound_migrations_per_node,
            if flavor == Flavor::KubeVirt || settings.kubevirt_evacuation_controller {
                "runs"
            } else {
                "is off: evac creates the migrations"
            }
        )
    });
    let mut node = node.clone();
    let node_label = format!("{NODE_NAME_LABEL}={name}");
    let raw_vmis = list(cluster, KUBEVIRT_API_VERSION, "VirtualMachineInstance", Some(&node_label), None)?;
    let vmis = cluster::decode_list::<VirtualMachineInstance<'_>>(&raw_vmis, "VirtualMachineInstance")?;
    let on_node = format!("spec.nodeName={name}");
    let (pod_version, pod_kind) = crate::kubevirt::POD_KIND;
    let raw_pods = list(cluster, pod_version, pod_kind, Some(LAUNCHER_SELECTOR), Some(&on_node))?;
    let pods = cluster::decode_list::<Pod<'_>>(&raw_pods, "Pod")?;
    let raw_migrations = list(cluster, KUBEVIRT_API_VERSION, "VirtualMachineInstanceMigration", None, None)?;
    let migrations =
        cluster::decode_list::<Migration<'_>>(&raw_migrations, "VirtualMachineInstanceMigration")?;
    trace.note(|| {
        format!(
            "node {name}{}: {} VMIs labelled for it, {} launcher pods on it; {} migrations in the cluster",
            if node.is_drain_tainted() { " (drain-tainted)" } else { "" },
            vmis.len(),
            pods.len(),
            migrations.len()
        )
    });
    // Whether node pressure still holds is read only for a node-pressure evacuation of evac's own.
    let pressure_source = EvacuationSource::NodePressure.as_str();
    if flavor == Flavor::Evac
        && vmis
            .iter()
            .any(|v| v.metadata.annotation(EVICTION_SOURCE_ANNOTATION).as_deref() == Some(pressure_source))
    {
        crate::placement::read_working_sets(core::slice::from_mut(&mut node), cluster);
    }
    let node = &node;
    let mut raw_policies = Vec::new();
    let namespaces = vmis.iter().map(|v| v.metadata.namespace.to_string());
    let (policies, namespace_labels) = read_policies(cluster, &mut raw_policies, namespaces, trace);
    let inputs = Inputs {
        flavor,
        node,
        settings,
        config: &config,
        vmis: &vmis,
        pods: &pods,
        migrations: &migrations,
        policies: &policies,
        namespace_labels: &namespace_labels,
        now,
    };
    let mut plan = Plan::of(&inputs, trace);
    // Beside KubeVirt's evacuation controller, a VM with a deadline does not wait for evac's
    // room: KubeVirt's queue is foreseen, to mark it early enough (`queue`).
    let mut outlook =
        if flavor == Flavor::Evac && settings.kubevirt_evacuation_controller && plan.with_deadline(&inputs) {
            Some(queue_outlook(&inputs, cluster, trace))
        } else {
            None
        };
    let early = outlook.is_some() && plan.candidates.iter().any(|c| c.deadline.is_finite());
    // Where VMs can go is read only when one of evac's migrations may start: the node list is
    // the largest read there is.
    let raw_nodes = if flavor == Flavor::Evac && (plan.room > 0 || early) && !plan.candidates.is_empty() {
        Some(list(cluster, "v1", "Node", None, None)?)
    } else {
        None
    };
    let nodes = match &raw_nodes {
        Some(raw) => {
            let mut nodes = cluster::decode_list::<Node<'_>>(raw, "Node")?;
            crate::placement::read_working_sets(&mut nodes, cluster);
            Some(nodes)
        }
        None => None,
    };
    Ok(plan.decide(&inputs, nodes.as_deref(), outlook.as_mut(), trace))
}

/// When the VMI's VM must be gone, from its launcher pod on the node decided (the first by name
/// that has not completed, as [`Plan::of`] takes it): [`pod_deadline`].
fn deadline_of(inputs: &Inputs<'_, '_>, namespace: &str, name: &str) -> f64 {
    let launcher = inputs
        .pods
        .iter()
        .filter(|p| {
            p.metadata.namespace == namespace && p.domain().as_deref() == Some(name) && !p.is_completed()
        })
        .min_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    pod_deadline(launcher, inputs)
}

/// When a VM must be gone: its pod's SIGTERM (stock KubeVirt shuts the guest down then), or the
/// end of its grace period (the proposals' virt-handler); infinite without a pod being ended
/// ([`crate::hold::termination_deadline`]).
fn pod_deadline(pod: Option<&Pod<'_>>, inputs: &Inputs<'_, '_>) -> f64 {
    pod.map_or(f64::INFINITY, |p| crate::hold::termination_deadline(p, inputs.settings.virt_handler))
}

/// KubeVirt's queue of unfinished migrations, as [`queue::outlook`] needs it: how long each
/// holds its slot, from the VMI's memory. The VMIs of other nodes' migrations are read one by one,
/// only for the migrations that stay ahead (started ones, and pending ones of VMs that may have
/// a deadline); one that cannot be read counts as taking no time.
fn queue_outlook<'i, 'a, C>(inputs: &Inputs<'i, 'a>, cluster: &C, trace: &mut Trace) -> queue::Outlook<'i, 'a>
where
    C: ClusterReader + ?Sized,
{
    let node_name = inputs.node.metadata.name.as_str();
    let now = inputs.now;
    let mut entries = Vec::new();
    for migration in inputs.migrations.iter().filter(|m| m.is_active()) {
        let namespace = migration.metadata.namespace.as_str();
        let vmi_name = migration.spec.vmi_name.as_str();
        let local = inputs.vmis.iter().find(|v| {
            v.metadata.namespace == namespace
                && v.metadata.name == vmi_name
                && v.status.node_name == node_name
        });
        let from_node = migration.evacuation_node().is_some_and(|n| n == node_name)
            || migration.status.migration_state.source_node == node_name;
        let deadline = local.map_or(f64::INFINITY, |_| deadline_of(inputs, namespace, vmi_name));
        let waits_anyway =
            migration.is_unstarted() && deadline.is_infinite() && queue::without_deadline(migration);
        let full = if waits_anyway {
            0.0
        } else if let Some(vmi) = local {
            estimate(vmi, vmi.memory().unwrap_or(0.0), inputs).seconds()
        } else {
            let read = cluster.get_resource(&crate::cluster::GetResource {
                api_version: KUBEVIRT_API_VERSION.into(),
                kind: "VirtualMachineInstance".into(),
                name: vmi_name.into(),
                namespace: Some(namespace.into()),
                disable_cache: false,
            });
            let decoded = read
                .as_ref()
                .ok()
                .and_then(|raw| serde_json::from_slice::<VirtualMachineInstance<'_>>(raw).ok());
            match decoded {
                Some(vmi) => estimate(&vmi, vmi.memory().unwrap_or(0.0), inputs).seconds(),
                None => {
                    trace.note(|| {
                        format!(
                            "migration {namespace}/{}: its VMI cannot be read: counted as taking no time",
                            migration.metadata.name
                        )
                    });
                    0.0
                }
            }
        };
        let seconds = match migration.started_at() {
            Some(started) if !migration.is_unstarted() => (started + full - now).max(0.0),
            _ => full,
        };
        entries.push(queue::Entry { migration, seconds, from_node, deadline });
    }
    let outlook = queue::outlook(
        entries,
        inputs.config.parallel_migrations_per_cluster,
        inputs.config.parallel_outbound_migrations_per_node,
        now,
    );
    for migration in &outlook.requeue {
        trace.note(|| {
            format!(
                "migration {}/{} of {} has not started and its VM has no deadline: requeue it behind the VMs of {node_name} whose pods have one",
                migration.metadata.namespace, migration.metadata.name, migration.spec.vmi_name
            )
        });
    }
    outlook
}

fn list<C: ClusterReader + ?Sized>(
    cluster: &C,
    api_version: &str,
    kind: &str,
    label_selector: Option<&str>,
    field_selector: Option<&str>,
) -> Result<Vec<u8>, ReadError> {
    cluster.list_resources_all(&ListResourcesAll {
        api_version: api_version.into(),
        kind: kind.into(),
        label_selector: label_selector.map(Into::into),
        field_selector: field_selector.map(Into::into),
    })
}

/// Everything the decision reads, decoded.
struct Inputs<'i, 'a> {
    flavor: Flavor,
    node: &'i Node<'a>,
    settings: &'i Settings,
    config: &'i KubeVirtConfig,
    vmis: &'i [VirtualMachineInstance<'a>],
    pods: &'i [Pod<'a>],
    migrations: &'i [Migration<'a>],
    /// KubeVirt's MigrationPolicies, which set some VMIs' bandwidth and timeouts.
    policies: &'i [MigrationPolicy<'a>],
    /// Labels of the namespaces the policies' namespace selectors look at.
    namespace_labels: &'i BTreeMap<String, BTreeMap<Str<'static>, Str<'static>>>,
    now: f64,
}

/// The decision before the migrations are placed: what could start, what ends.
struct Plan<'i, 'a> {
    launchers: Vec<&'i Pod<'a>>,
    candidates: Vec<Candidate<'i, 'a>>,
    /// Marks called off: (namespace, name).
    clears: Vec<VmiKey<'i>>,
    /// Unstarted evacuation migrations of evac's own evacuations that were called off, to
    /// delete: (VMI, migration).
    cancels: Vec<(VmiKey<'i>, &'i Migration<'a>)>,
    /// Requests naming a node the VMI is no longer on: (VMI, that node).
    stale: Vec<(VmiKey<'i>, String)>,
    /// Requests turned into marks, when evac creates the migrations itself.
    promotions: Vec<Effect>,
    events: Vec<Effect>,
    /// VMIs marked for this node and not called off.
    in_progress: HashSet<VmiKey<'i>>,
    /// How many migrations may start.
    room: usize,
    /// Beside KubeVirt's evacuation controller: the causes to record on the migrations it
    /// created, (namespace, migration name, cause).
    causes: Vec<(&'i str, &'i str, MigrationCause)>,
    /// Holds to end: their evacuation was given up, cannot finish in time, or has nowhere to go.
    releases: Vec<Effect>,
}

impl<'i, 'a> Plan<'i, 'a> {
    fn of(inputs: &Inputs<'i, 'a>, trace: &mut Trace) -> Self {
        let node = inputs.node;
        let node_name = node.metadata.name.as_str();
        let histories = history::histories(inputs.migrations);
        let unfinished = history::unfinished(inputs.migrations);
        let no_history = History::default();
        let levels = inputs.settings.pressure_levels();
        // Finished pods are never evicted again: neither counted nor annotated.
        let mut launchers: Vec<&Pod<'_>> = inputs
            .pods
            .iter()
            .filter(|p| p.spec.node_name == node_name && p.is_virt_launcher() && !p.is_completed())
            .collect();
        launchers.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
        });

        let mut plan = Plan {
            launchers: Vec::new(),
            candidates: Vec::new(),
            clears: Vec::new(),
            cancels: Vec::new(),
            stale: Vec::new(),
            promotions: Vec::new(),
            events: Vec::new(),
            in_progress: HashSet::new(),
            room: 0,
            causes: Vec::new(),
            releases: Vec::new(),
        };
        // Beside KubeVirt's evacuation controller, which migrates every marked VMI at once, evac
        // marks only when a migration of its own may start, and creates none.
        let beside = inputs.flavor == Flavor::Evac && inputs.settings.kubevirt_evacuation_controller;
        // Marked VMIs KubeVirt's controller is about to migrate: they take room already.
        let mut kubevirt_starting = 0u32;
        // The label selects the VMIs on the node; a VMI whose label lags behind a migration is not.
        for vmi in inputs.vmis.iter().filter(|v| v.status.node_name == node_name) {
            let (namespace, name) = (vmi.metadata.namespace.as_str(), vmi.metadata.name.as_str());
            let history = histories.get(&(namespace, name)).unwrap_or(&no_history);
            let pods: Vec<&Pod<'_>> = launchers
                .iter()
                .copied()
                .filter(|p| p.metadata.namespace == namespace && p.domain().as_deref() == Some(name))
                .collect();
            let terminating = pods.iter().any(|p| p.is_terminating());
            let marked = vmi.status.evacuation_node_name == node_name;
            let requested = beside && !marked && vmi.is_requested_from(node_name);
            let source =
                vmi.metadata.annotation(EVICTION_SOURCE_ANNOTATION).and_then(|s| EvacuationSource::parse(&s));
            if inputs.flavor == Flavor::Evac && !marked {
                let request = vmi.metadata.annotation(EVACUATION_REQUEST_ANNOTATION);
                match request.as_deref() {
                    // The VM left the node its request names some other way (a user's migration,
                    // the drain taint, an API eviction's mark KubeVirt acted on): the request is
                    // done with. The eviction source goes with it, unless a mark for this node
                    // (KubeVirt's, for an API eviction) holds it; see `marked` above.
                    Some(other) if other != node_name => {
                        trace.note(|| {
                            format!("{namespace}/{name}: its request names {other}, a node it left: clear it")
                        });
                        plan.stale.push(((namespace, name), other.to_owned()));
                    }
                    // Held for KubeVirt's evacuation controller, which is not running: evac
                    // migrates marked VMIs itself, so the request becomes the mark the
                    // disruption decision sets in that mode.
                    Some(_) if !beside => {
                        if let Some(source) = source.filter(|s| s.ends_by_itself()) {
                            trace.note(|| {
                                format!(
                                    "{namespace}/{name}: requested from {node_name} ({}) with KubeVirt's \
                                     evacuation controller off: mark it",
                                    source.as_str()
                                )
                            });
                            plan.promotions.push(Effect::MarkForEvacuation {
                                vmi: ObjectRef::new(namespace, name),
                                node: node_name.to_owned(),
                                dry_run: false,
                                source: Some(source),
                            });
                        }
                    }
                    _ => {}
                }
            }
            // A migration under way is left to finish: KubeVirt clears the mark when it succeeds.
            // KubeVirt never calls a mark off itself; evac only its own (see `release`). An
            // evacuation migration from this node that has not started (KubeVirt's evacuation
            // controller retries a failed one at once and holds it Pending in its back-off) is
            // not under way: calling the evacuation off deletes it.
            let own = source.filter(|s| s.ends_by_itself());
            let evacuating = marked || requested;
            let of_vmi = unfinished.get(&(namespace, name)).map_or(&[][..], Vec::as_slice);
            let held = !of_vmi.is_empty()
                && of_vmi
                    .iter()
                    .all(|m| m.is_unstarted() && m.evacuation_node().is_some_and(|n| n == node_name));
            let under_way = history.active && !held;
            // On a drain-tainted node KubeVirt migrates every VMI, marked or not: nothing to call off.
            let drained = node.is_drain_tainted();
            if let (Flavor::Evac, true, false, false, Some(own)) =
                (inputs.flavor, evacuating, under_way, drained, own)
            {
                // The waiting migration is deleted by a later pass, once the mark is seen gone
                // (`orphans`): deleting it before would only have KubeVirt create another.
                let call_off = |plan: &mut Plan<'i, 'a>| plan.clears.push((namespace, name));
                if history.failures >= inputs.settings.max_failed_evacuations {
                    trace.note(|| {
                        format!(
                            "{namespace}/{name}: {} failed migrations in a row: give up, call the mark off",
                            history.failures
                        )
                    });
                    call_off(&mut plan);
                    plan.releases.extend(
                        pods.iter()
                            .filter(|p| holds(p))
                            .map(|p| release(p, format!("{} failed migrations in a row", history.failures))),
                    );
                    plan.events.push(Effect::RecordEvent {
                        vmi: ObjectRef::new(namespace, name),
                        node: node_name.to_owned(),
                        reason: EventReason::EvacuationGivenUp,
                        message: format!(
                            "evac gave up evacuating the VMI from node {node_name} ({}) after {} failed \
                             migrations in a row: it stays on the node",
                            own.as_str(),
                            history.failures
                        ),
                    });
                    continue;
                }
                if release::cause_gone(own, node, terminating, levels) {
                    trace.note(|| {
                        format!("{namespace}/{name}: its cause ({}) is gone: call the mark off", own.as_str())
                    });
                    call_off(&mut plan);
                    continue;
                }
            }
            if marked {
                plan.in_progress.insert((namespace, name));
            }
            let wanted = if beside { requested } else { marked || node.is_drain_tainted() };
            // Beside evac, KubeVirt's evacuation controller migrates what it evacuates itself.
            let kubevirt_moves = beside && (marked || node.is_drain_tainted());
            let blocker = migration_blocker(vmi, inputs, history, &pods);
            let migrates = (wanted || kubevirt_moves) && blocker.is_none();
            trace.note(|| {
                let standing = if marked {
                    format!("marked for {node_name}")
                } else if requested {
                    format!("requested from {node_name}")
                } else if node.is_drain_tainted() {
                    "on a drain-tainted node".to_owned()
                } else {
                    "not marked".to_owned()
                };
                let what = match (&blocker, wanted, kubevirt_moves) {
                    (_, false, false) => "stays".to_owned(),
                    (Some(why), _, _) => format!("does not migrate now: {why}"),
                    (None, false, true) => "KubeVirt's evacuation controller migrates it".to_owned(),
                    (None, true, _) => "a candidate".to_owned(),
                };
                format!("{namespace}/{name}: {standing}; {what}")
            });
            if kubevirt_moves && migrates {
                kubevirt_starting += 1;
            }
            if wanted && migrates {
                let pod = pods.first();
                let deadline = pod_deadline(pod.copied(), inputs);
                let memory = vmi.memory().unwrap_or(0.0);
                let migration = migration_settings(vmi, inputs);
                plan.candidates.push(Candidate {
                    deadline,
                    held: pod
                        .filter(|p| holds(p))
                        .map(|p| ObjectRef::new(p.metadata.namespace.as_str(), p.metadata.name.as_str())),
                    marked: evacuating,
                    namespace,
                    name,
                    source,
                    memory,
                    tolerations: &vmi.spec.tolerations,
                    selection: vmi.node_selection(),
                    estimate: estimate_under(vmi, memory, &migration, inputs),
                    bandwidth_known: migration.bandwidth.is_some(),
                });
            }
        }
        plan.launchers = launchers;
        if inputs.flavor == Flavor::Evac {
            plan.causes = uncaused(inputs, &plan.clears);
            plan.cancels = orphans(inputs);
            for (namespace, migration, cause) in &plan.causes {
                trace.note(|| {
                    format!("migration {namespace}/{migration} has no cause: record {}", cause.as_str())
                });
            }
            for ((namespace, vmi), migration) in &plan.cancels {
                trace.note(|| {
                    format!(
                        "migration {namespace}/{} of {vmi} has not started and its evacuation was called off: delete it",
                        migration.metadata.name
                    )
                });
            }
        }
        let mut load = history::load(inputs.migrations, node_name);
        load.cluster += kubevirt_starting;
        load.outbound += kubevirt_starting;
        let room =
            match inputs.flavor {
                Flavor::Evac => {
                    order::prioritize(&mut plan.candidates, inputs.now);
                    inputs.config.parallel_migrations_per_cluster.saturating_sub(load.cluster).min(
                        inputs.config.parallel_outbound_migrations_per_node.saturating_sub(load.outbound),
                    ) as usize
                }
                // KubeVirt 1.9 creates them all, by name; its migration controller holds them Pending
                // for a slot.
                Flavor::KubeVirt => {
                    plan.candidates.sort_by(|a, b| (a.namespace, a.name).cmp(&(b.namespace, b.name)));
                    plan.candidates.len()
                }
            };
        plan.room = room;
        trace.note(|| match inputs.flavor {
            Flavor::Evac => format!(
                "room for {room} more migrations: {} of {} running in the cluster, {} of {} from {node_name}{}",
                load.cluster,
                inputs.config.parallel_migrations_per_cluster,
                load.outbound,
                inputs.config.parallel_outbound_migrations_per_node,
                if kubevirt_starting > 0 {
                    format!(" (with {kubevirt_starting} KubeVirt is about to start)")
                } else {
                    String::new()
                }
            ),
            Flavor::KubeVirt => "KubeVirt creates a migration for every candidate; its migration controller holds them to the limits".to_owned(),
        });
        if !plan.candidates.is_empty() {
            trace.note(|| {
                let order: Vec<String> =
                    plan.candidates.iter().map(|c| format!("{}/{}", c.namespace, c.name)).collect();
                format!("candidates in order: {}", order.join(", "))
            });
        }
        plan
    }

    /// Whether a VM of the node has a deadline and waits: a candidate, or the VMI of a pending
    /// evacuation migration from the node, whose pod is being deleted.
    fn with_deadline(&self, inputs: &Inputs<'i, 'a>) -> bool {
        let node_name = inputs.node.metadata.name.as_str();
        self.candidates.iter().any(|c| c.deadline.is_finite())
            || inputs.migrations.iter().any(|m| {
                m.is_unstarted()
                    && m.evacuation_node().is_some_and(|n| n == node_name)
                    && deadline_of(inputs, m.metadata.namespace.as_str(), m.spec.vmi_name.as_str())
                        .is_finite()
            })
    }

    /// The effects: migrations started in order while there is room (evac's only where the VM
    /// has somewhere to go), marks called off, events, and the launcher pods' annotations.
    /// `outlook`: KubeVirt's queue, beside its evacuation controller when a VM of the node has a
    /// deadline: such a VM is marked beyond the room when the queue starts its migration in time,
    /// and migrations of VMs without a deadline ahead of it are requeued.
    fn decide(
        &mut self,
        inputs: &Inputs<'i, 'a>,
        nodes: Option<&[Node<'_>]>,
        mut outlook: Option<&mut queue::Outlook<'i, 'a>>,
        trace: &mut Trace,
    ) -> Decision {
        let node_name = inputs.node.metadata.name.as_str();
        let now = inputs.now;
        let mut placement =
            nodes.map(|nodes| Placement::new(nodes, inputs.settings.pressure_levels().mark_below()));
        let savable_waits = self.candidates.iter().any(|c| !c.hopeless(now));
        // Beside KubeVirt's evacuation controller, evac marks and KubeVirt creates the migration.
        let marks_for_kubevirt =
            inputs.settings.kubevirt_evacuation_controller && inputs.flavor == Flavor::Evac;
        let mut decision = Decision::allow();
        let mut started = 0;
        for c in &self.candidates {
            let deferred = |why: String| Effect::RecordEvent {
                vmi: ObjectRef::new(c.namespace, c.name),
                node: node_name.to_owned(),
                reason: EventReason::EvacuationDeferred,
                message: format!("evac did not start the VMI's migration from node {node_name}: {why}"),
            };
            // Its pod's SIGTERM has come (a stock virt-handler is shutting the guest down): a
            // migration started now saves nothing, whatever the bandwidth.
            if inputs.flavor == Flavor::Evac && c.deadline <= now {
                let why =
                    "its pod's containers were told to stop (SIGTERM): its guest is shutting down".to_owned();
                trace.note(|| format!("{}/{}: deferred, {why}", c.namespace, c.name));
                self.events.push(deferred(why));
                continue;
            }
            // With the bandwidth KubeVirt sets (the cluster's, or its MigrationPolicy's), the
            // estimate is KubeVirt's own figure: a migration it says cannot end before its pod is
            // deleted is not started at all. With an assumed bandwidth (KubeVirt's default is
            // unlimited), it only goes after the savable ones.
            let bandwidth_known = c.bandwidth_known;
            if inputs.flavor == Flavor::Evac && bandwidth_known && c.deadline.is_finite() && c.hopeless(now) {
                let why = format!("{}: it cannot leave in time", c.why_hopeless(now));
                trace.note(|| format!("{}/{}: deferred, {why}", c.namespace, c.name));
                if let Some(pod) = &c.held {
                    // Holding its pod longer only keeps whoever disrupted it waiting.
                    self.releases.push(release_ref(pod, c.why_hopeless(now)));
                }
                self.events.push(deferred(why));
                continue;
            }
            let within_room = started < self.room;
            // Beside KubeVirt's evacuation controller, a VM with a deadline is marked at once when
            // KubeVirt's queue would start its migration in time for it.
            let queued = match outlook.as_deref_mut() {
                Some(outlook) if within_room || c.deadline.is_finite() => {
                    Some(outlook.forecast.queue(c.estimate.seconds(), true))
                }
                _ => None,
            };
            if let (false, Some((start, end))) = (within_room, queued) {
                if end > c.deadline {
                    let why = format!(
                        "it would wait about {} s for a migration slot, then need about {} s, and its pod is \
                         deleted in {} s: it cannot leave in time",
                        (start - now).max(0.0).round(),
                        c.estimate.seconds().round(),
                        (c.deadline - now).max(0.0).round()
                    );
                    trace.note(|| format!("{}/{}: deferred, {why}", c.namespace, c.name));
                    if bandwidth_known {
                        if let Some(pod) = &c.held {
                            self.releases.push(release_ref(pod, why.clone()));
                        }
                        self.events.push(deferred(why));
                    }
                    continue;
                }
                trace.note(|| {
                    format!(
                        "{}/{}: no room now, but KubeVirt's queue starts it in about {} s and it ends before its \
                         deadline: mark it now",
                        c.namespace,
                        c.name,
                        (start - now).max(0.0).round()
                    )
                });
            } else if !within_room {
                trace.note(|| format!("{}/{}: waits, no room left", c.namespace, c.name));
                // Only evac's own ordering skips anything; within the limits, nothing to say.
                if inputs.flavor == Flavor::Evac && c.hopeless(now) && savable_waits {
                    self.events.push(deferred(format!(
                        "{}, and VMs that can still leave in time go first",
                        c.why_hopeless(now)
                    )));
                }
                continue;
            }
            if let Some(placement) = placement.as_mut() {
                if let Err(why) = placement.reserve(node_name, c.memory, c.tolerations, &c.selection) {
                    trace.note(|| format!("{}/{}: deferred, {why}", c.namespace, c.name));
                    if let Some(pod) = &c.held {
                        self.releases.push(release_ref(pod, why.to_string()));
                    }
                    self.events.push(deferred(why.to_string()));
                    continue;
                }
            }
            started += usize::from(within_room);
            trace.note(|| {
                let how = if marks_for_kubevirt {
                    "mark it for KubeVirt's evacuation controller to migrate"
                } else {
                    "start its migration"
                };
                format!("{}/{}: {how}", c.namespace, c.name)
            });
            let vmi = ObjectRef::new(c.namespace, c.name);
            decision.effects.push(if marks_for_kubevirt {
                // KubeVirt's evacuation controller creates the migration of a marked VMI.
                Effect::MarkForEvacuation {
                    vmi,
                    node: node_name.to_owned(),
                    dry_run: false,
                    source: c.source,
                }
            } else {
                Effect::CreateMigration {
                    vmi,
                    node: node_name.to_owned(),
                    cause: (inputs.flavor == Flavor::Evac).then(|| cause(c.source, inputs.node)),
                    // Only virt-controller may set a priority (virt-api refuses it from anyone
                    // else); evac orders its migrations by when it creates them.
                    priority: (inputs.flavor == Flavor::KubeVirt).then(|| priority(c.source)),
                }
            });
        }
        decision.effects.append(&mut self.promotions);
        decision.effects.extend(self.causes.iter().map(|(namespace, name, cause)| {
            Effect::AnnotateMigration { migration: ObjectRef::new(*namespace, *name), cause: *cause }
        }));
        // In a stable order, whatever order the cluster listed the VMIs in.
        self.clears.sort_unstable();
        decision.effects.extend(self.clears.iter().map(|(namespace, name)| Effect::ClearEvacuation {
            vmi: ObjectRef::new(*namespace, *name),
            node: node_name.to_owned(),
        }));
        self.stale.sort_unstable();
        decision.effects.extend(self.stale.iter().map(|((namespace, name), node)| Effect::ClearEvacuation {
            vmi: ObjectRef::new(*namespace, *name),
            node: node.clone(),
        }));
        self.cancels.sort_unstable_by(|a, b| (a.0, &a.1.metadata.name).cmp(&(b.0, &b.1.metadata.name)));
        decision.effects.extend(self.cancels.iter().map(|((namespace, vmi), migration)| {
            Effect::CancelMigration {
                vmi: ObjectRef::new(*namespace, *vmi),
                migration: ObjectRef::new(*namespace, migration.metadata.name.as_str()),
                node: node_name.to_owned(),
                resource_version: migration.metadata.resource_version.to_string(),
                requeue: false,
            }
        }));
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
}

/// How the VMI's migration would go, with the cluster's bandwidth (the assumed one when KubeVirt
/// leaves it unlimited) and timeouts, and the dirty rate a monitoring agent publishes on the VMI.
fn estimate(vmi: &VirtualMachineInstance<'_>, memory: f64, inputs: &Inputs<'_, '_>) -> Estimate {
    estimate_under(vmi, memory, &migration_settings(vmi, inputs), inputs)
}

/// [`estimate`] with the VMI's migration settings already known.
fn estimate_under(
    vmi: &VirtualMachineInstance<'_>,
    memory: f64,
    settings: &MigrationSettings,
    inputs: &Inputs<'_, '_>,
) -> Estimate {
    let dirty_rate =
        vmi.metadata.annotation(DIRTY_RATE_ANNOTATION).and_then(|q| quantity::bytes(&q)).unwrap_or(0.0);
    estimate::estimate(&settings.inputs(memory, dirty_rate, inputs.settings.assumed_bandwidth_bytes()))
}

/// The settings KubeVirt migrates the VMI with: the cluster's, under the MigrationPolicy that
/// matches it ([`migration_policy::match_policy`]).
fn migration_settings(vmi: &VirtualMachineInstance<'_>, inputs: &Inputs<'_, '_>) -> MigrationSettings {
    let no_labels = BTreeMap::new();
    let namespace_labels = inputs.namespace_labels.get(vmi.metadata.namespace.as_str()).unwrap_or(&no_labels);
    let policy =
        migration_policy::match_policy(inputs.policies, &vmi.metadata.labels.to_map(), namespace_labels);
    MigrationSettings::of(inputs.config, policy)
}

/// Any object, for its labels.
#[derive(serde::Deserialize)]
struct Labelled<'a> {
    #[serde(borrow, default)]
    metadata: crate::model::ObjectMeta<'a>,
}

/// The MigrationPolicies, and the labels of the namespaces their namespace selectors need: read
/// only when some policy exists. A policy that cannot be read counts as none (the cluster's
/// settings stand), with a note in the trace.
fn read_policies<'r, C>(
    cluster: &C,
    raw: &'r mut Vec<u8>,
    namespaces: impl Iterator<Item = String>,
    trace: &mut Trace,
) -> (Vec<MigrationPolicy<'r>>, BTreeMap<String, BTreeMap<Str<'static>, Str<'static>>>)
where
    C: ClusterReader + ?Sized,
{
    let mut labels = BTreeMap::new();
    match list(cluster, MIGRATION_POLICY_API_VERSION, MIGRATION_POLICY_KIND, None, None) {
        Ok(read) => *raw = read,
        Err(e) => {
            trace.note(|| {
                format!(
                    "MigrationPolicies cannot be read ({}): the cluster's migration settings apply",
                    e.message
                )
            });
            return (Vec::new(), labels);
        }
    }
    let policies = match cluster::decode_list::<MigrationPolicy<'_>>(raw, MIGRATION_POLICY_KIND) {
        Ok(policies) => policies,
        Err(e) => {
            trace.note(|| {
                format!(
                    "MigrationPolicies do not decode ({}): the cluster's migration settings apply",
                    e.message
                )
            });
            return (Vec::new(), labels);
        }
    };
    let by_namespace =
        policies.iter().any(|p| p.spec.selectors.as_ref().is_some_and(|s| s.namespace_selector.is_some()));
    if by_namespace {
        for namespace in namespaces {
            if labels.contains_key(&namespace) {
                continue;
            }
            // A namespace that cannot be read has no labels: only selectors without a namespace
            // part match its VMIs.
            let read = cluster::fetch(cluster, "v1", "Namespace", "", &namespace).ok();
            let meta = read.as_deref().and_then(|raw| serde_json::from_slice::<Labelled<'_>>(raw).ok());
            let owned = meta.map(|m| {
                m.metadata
                    .labels
                    .to_map()
                    .into_iter()
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect()
            });
            labels.insert(namespace, owned.unwrap_or_default());
        }
    }
    (policies, labels)
}

/// Why the evacuation controller would not migrate a VMI now (its words are only built for a
/// trace).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Blocker<'v> {
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
/// pod elsewhere comes with an active migration, which is checked first. evac's own flavour also
/// waits for the VMI to run and for its back-off; KubeVirt's migration controller holds the
/// migration Pending instead.
fn migration_blocker<'v>(
    vmi: &'v VirtualMachineInstance<'_>,
    inputs: &Inputs<'v, '_>,
    history: &History,
    pods: &[&Pod<'_>],
) -> Option<Blocker<'v>> {
    let strategy = vmi.eviction_strategy(inputs.config.eviction_strategy.as_ref());
    if vmi.is_being_deleted() {
        return Some(Blocker::BeingDeleted);
    }
    if !matches!(strategy, Some(EvictionStrategy::LiveMigrate | EvictionStrategy::LiveMigrateIfPossible)) {
        return Some(Blocker::Strategy(strategy));
    }
    if !vmi.is_migratable() {
        return Some(Blocker::NotMigratable);
    }
    if history.active {
        return Some(Blocker::Migrating);
    }
    if pods.len() != 1 {
        return Some(Blocker::Pods(pods.len()));
    }
    let phase = vmi.status.phase.as_str();
    match inputs.flavor {
        Flavor::Evac if phase != "Running" => Some(Blocker::NotRunning(phase)),
        Flavor::Evac => match history.retry_at() {
            Some(at) if inputs.now >= at => None,
            Some(at) => Some(Blocker::BackingOff { seconds: at - inputs.now, failures: history.failures }),
            None => None,
        },
        Flavor::KubeVirt if matches!(phase, "Succeeded" | "Failed") => Some(Blocker::Finished(phase)),
        Flavor::KubeVirt => None,
    }
}

/// The VMI a migration moves, if it is one of the node's.
fn vmi_of<'i, 'a>(
    inputs: &Inputs<'i, 'a>,
    migration: &Migration<'_>,
) -> Option<&'i VirtualMachineInstance<'a>> {
    inputs.vmis.iter().find(|v| {
        v.metadata.namespace == migration.metadata.namespace && v.metadata.name == migration.spec.vmi_name
    })
}

/// Whether KubeVirt's evacuation controller still wants the VMI to leave the node: marked for
/// it, or on a drain-tainted node (`vmisToMigrate`).
fn kubevirt_evacuates(vmi: &VirtualMachineInstance<'_>, node: &Node<'_>) -> bool {
    vmi.status.evacuation_node_name == node.metadata.name || node.is_drain_tainted()
}

/// The evacuation migrations from the node that have not started, of evac's own evacuations that
/// were called off: the VMI is neither marked for the node nor requested from it, the node is not
/// drain-tainted, and the migration names one of evac's own causes, or none yet (KubeVirt retried
/// just as the mark went, before evac recorded the cause). Deleted, as `virtctl migrate-cancel`
/// deletes a migration, they move nothing; KubeVirt deletes a target pod it may have created
/// already (`handlePreHandoffMigrationCancel`). An API eviction's migration is never one: its mark
/// is never called off, and a user's `evacuate-cancel` leaves it to run, as KubeVirt does.
fn orphans<'i, 'a>(inputs: &Inputs<'i, 'a>) -> Vec<(VmiKey<'i>, &'i Migration<'a>)> {
    let node = inputs.node;
    let own = [MigrationCause::Preemption, MigrationCause::NoexecuteTaint, MigrationCause::NodePressure];
    inputs
        .migrations
        .iter()
        .filter(|m| m.is_unstarted() && m.metadata.deletion_timestamp.is_none())
        .filter(|m| m.evacuation_node().is_some_and(|n| n == node.metadata.name))
        .filter(|m| {
            m.metadata.annotation(CAUSE_ANNOTATION).is_none_or(|c| own.iter().any(|o| o.as_str() == &*c))
        })
        .filter_map(|m| {
            let vmi = vmi_of(inputs, m)?;
            let wanted = kubevirt_evacuates(vmi, node) || vmi.is_requested_from(&node.metadata.name);
            (!wanted).then_some(((vmi.metadata.namespace.as_str(), vmi.metadata.name.as_str()), m))
        })
        .collect()
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
            let vmi = vmi_of(inputs, m).filter(|v| kubevirt_evacuates(v, inputs.node))?;
            if clears.contains(&(namespace, vmi.metadata.name.as_str())) {
                return None;
            }
            let source =
                vmi.metadata.annotation(EVICTION_SOURCE_ANNOTATION).and_then(|s| EvacuationSource::parse(&s));
            Some((namespace, m.metadata.name.as_str(), cause(source, inputs.node)))
        })
        .collect();
    causes.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    causes
}

/// Why an evacuation migration from `node` runs: the source recorded on its VMI
/// (`kubevirt.io/eviction-source`); without one, a drain when the node is cordoned or
/// drain-tainted, else an API eviction.
pub fn cause(source: Option<EvacuationSource>, node: &Node<'_>) -> MigrationCause {
    match source {
        Some(source) => source.into(),
        None if node.spec.unschedulable || node.is_drain_tainted() => MigrationCause::Drain,
        None => MigrationCause::ApiEviction,
    }
}

/// KubeVirt's priorities (`GenerateNewMigration`): the descheduler's rebalancing can wait for
/// maintenance; everything else is losing its node.
fn priority(source: Option<EvacuationSource>) -> MigrationPriority {
    match source {
        Some(EvacuationSource::Descheduler) => MigrationPriority::SystemMaintenance,
        _ => MigrationPriority::SystemCritical,
    }
}

/// Whether a launcher pod's termination is held now: a hold began, and nothing ended it yet.
fn holds(pod: &Pod<'_>) -> bool {
    pod.metadata.annotation(crate::hold::HELD_SINCE_ANNOTATION).is_some()
        && pod.metadata.annotation(crate::hold::HOLD_RELEASE_ANNOTATION).is_none()
}

/// Ends the hold of a launcher pod, saying why: the hold endpoint answers the kubelet then.
fn release(pod: &Pod<'_>, why: String) -> Effect {
    release_ref(&ObjectRef::new(pod.metadata.namespace.as_str(), pod.metadata.name.as_str()), why)
}

fn release_ref(pod: &ObjectRef, why: String) -> Effect {
    Effect::AnnotatePod {
        pod: pod.clone(),
        annotations: std::collections::BTreeMap::from([(
            crate::hold::HOLD_RELEASE_ANNOTATION.to_owned(),
            Some(why),
        )]),
    }
}
