//! Builders of the objects the evacuation tests put in their [`TestCluster`], and of the effects
//! they expect.

use serde_json::{json, Value};

pub use evac_testkit::TestCluster;

use evac_core::cluster::{ClusterReader, ReadError};
use evac_core::effect::{
    MigrationCause, EVACUATION_MIGRATION_ANNOTATION, EVICTION_IN_PROGRESS_ANNOTATION,
    EVICTION_SOURCE_ANNOTATION, REQUEST_EVICT_ONLY_ANNOTATION,
};
use evac_core::evacuation::{evacuate, Context, Flavor, Settings};
use evac_core::model::Node;
use evac_core::trace::Trace;
use evac_core::{Decision, Effect, ObjectRef, Verdict};

pub const NS: &str = "default";
pub const NODE: &str = "node01";
pub const OTHER: &str = "node02";
/// The decisions' clock: 2027-01-15T08:00:00Z.
pub const NOW: f64 = 1_800_000_000.0;

/// `NOW + offset` seconds as a Kubernetes timestamp.
pub fn at(offset: i64) -> String {
    let time = chrono::DateTime::from_timestamp(NOW as i64 + offset, 0).expect("a valid time");
    time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `value` with the field at JSON pointer `pointer` set (objects on the way are created).
pub fn set(mut value: Value, pointer: &str, new: Value) -> Value {
    let mut target = &mut value;
    for token in pointer.split('/').skip(1).map(|t| t.replace("~1", "/")) {
        if !target.is_object() {
            *target = json!({});
        }
        target = target.as_object_mut().unwrap().entry(token).or_insert(Value::Null);
    }
    *target = new;
    value
}

/// [`evacuate`] as `flavor` decides, at `now`, recording its steps in `trace`.
pub fn evacuate_as<C: ClusterReader + ?Sized>(
    flavor: Flavor,
    node: &Node<'_>,
    settings: &Settings,
    cluster: &C,
    now: f64,
    trace: &mut Trace,
) -> Result<Decision, ReadError> {
    evacuate(node, settings, cluster, &mut Context { flavor, now, trace })
}

/// Decides `node` at `now`; the verdict must be Allow.
pub fn decide_with(cluster: &TestCluster, node: &Value, settings: &Settings, now: f64) -> Vec<Effect> {
    let text = node.to_string();
    let node: Node<'_> = serde_json::from_str(&text).unwrap();
    // The trace decides nothing: on every test's cluster the traced decision is the decision (on
    // a copy, so that the reads a test checks are the plain decision's), and it ends with the
    // answer, naming every effect.
    let mut trace = Trace::on();
    let traced = evacuate_as(Flavor::Evac, &node, settings, &cluster.clone(), now, &mut trace);
    let decision = evacuate_as(Flavor::Evac, &node, settings, cluster, now, &mut Trace::off())
        .expect("the cluster reads");
    assert_eq!(traced.as_ref(), Ok(&decision));
    let last = trace.steps().last().expect("a trace").clone();
    assert!(last.starts_with("-> allow"), "{last}");
    for effect in &decision.effects {
        assert!(last.contains(effect.type_name()), "{last}");
        // Every effect but the descheduler's pod annotations has a step that says why.
        let about = match effect {
            Effect::CreateMigration { vmi, .. }
            | Effect::MarkForEvacuation { vmi, .. }
            | Effect::ClearEvacuation { vmi, .. }
            | Effect::RecordEvent { vmi, .. } => format!("{}/{}", vmi.namespace, vmi.name),
            Effect::CancelMigration { migration, .. } | Effect::AnnotateMigration { migration, .. } => {
                format!("migration {}/{}", migration.namespace, migration.name)
            }
            _ => continue,
        };
        assert!(
            trace.steps().iter().any(|step| step.contains(&about)),
            "no step about {about}: {:#?}",
            trace.steps()
        );
    }
    assert_eq!(decision.verdict, Verdict::Allow);
    decision.effects
}

/// Decides `node` with the default settings at [`NOW`].
/// The settings of evac creating the migrations itself (KubeVirt's evacuation controller off),
/// which most tests decide with: what evac's own evacuation controller does.
pub fn creating() -> Settings {
    Settings { kubevirt_evacuation_controller: false, ..Settings::default() }
}

pub fn run(cluster: &TestCluster, node: &Value) -> Vec<Effect> {
    decide_with(cluster, node, &creating(), NOW)
}

// --- Nodes -----------------------------------------------------------------------------------

/// A schedulable, untainted node.
pub fn node() -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}, "spec": {},
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
}

/// [`OTHER`]: schedulable, untainted, with no memory figure (room for any VM).
pub fn other_node() -> Value {
    set(node(), "/metadata/name", json!(OTHER))
}

/// `kubectl cordon`.
pub fn cordoned() -> Value {
    set(node(), "/spec/unschedulable", json!(true))
}

pub fn tainted(node: Value, key: &str, effect: &str) -> Value {
    let mut taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    taints.push(json!({"key": key, "effect": effect}));
    set(node, "/spec/taints", json!(taints))
}

/// Being drained: cordoned, and virt-handler's drain taint.
pub fn drained() -> Value {
    tainted(cordoned(), "kubevirt.io/drain", "NoSchedule")
}

/// Under memory pressure, with `available` memory when given: the node's capacity, of which its
/// NodeMetrics ([`idle_metrics`], in every test cluster) say nothing is in use.
pub fn pressured(pressure: bool, available: Option<&str>) -> Value {
    let mut node = set(
        node(),
        "/status/conditions",
        json!([{"type": "MemoryPressure", "status": if pressure { "True" } else { "False" }}]),
    );
    if let Some(available) = available {
        node = with_available(node, available);
    }
    node
}

/// `node` with `available` memory: its capacity, all of it free by its [`idle_metrics`].
pub fn with_available(node: Value, available: &str) -> Value {
    set(node, "/status/capacity", json!({"memory": available}))
}

/// metrics-server's NodeMetrics of `node` with no memory in use: the node's whole capacity is
/// available.
pub fn idle_metrics(node: &str) -> Value {
    json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetrics", "metadata": {"name": node},
           "timestamp": at(-10), "window": "10s", "usage": {"cpu": "0", "memory": "0"}})
}

// --- KubeVirt objects ------------------------------------------------------------------------

/// A VMI on [`NODE`], running, live-migratable, `LiveMigrate`, not marked.
#[derive(Debug, Clone)]
pub struct Vm {
    pub name: &'static str,
    pub node: &'static str,
    pub strategy: Option<&'static str>,
    pub migratable: bool,
    pub marked: Option<&'static str>,
    pub source: Option<&'static str>,
    pub phase: &'static str,
    pub deleting: bool,
}

impl Vm {
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            node: NODE,
            strategy: Some("LiveMigrate"),
            migratable: true,
            marked: None,
            source: None,
            phase: "Running",
            deleting: false,
        }
    }

    /// Marked for evacuation from the node it runs on.
    pub fn marked(mut self) -> Self {
        self.marked = Some(self.node);
        self
    }

    pub fn source(mut self, source: &'static str) -> Self {
        self.source = Some(source);
        self
    }

    pub fn strategy(mut self, strategy: Option<&'static str>) -> Self {
        self.strategy = strategy;
        self
    }

    pub fn migratable(mut self, migratable: bool) -> Self {
        self.migratable = migratable;
        self
    }

    pub fn on(mut self, node: &'static str) -> Self {
        self.node = node;
        self
    }

    pub fn json(&self) -> Value {
        let mut vmi = json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": self.name, "namespace": NS, "labels": {"kubevirt.io/nodeName": self.node},
                         "annotations": {}},
            "spec": {"domain": {"devices": {}}},
            "status": {"nodeName": self.node, "phase": self.phase, "conditions": [
                {"type": "LiveMigratable", "status": if self.migratable { "True" } else { "False" }},
            ]}
        });
        if let Some(strategy) = self.strategy {
            vmi["spec"]["evictionStrategy"] = json!(strategy);
        }
        if let Some(node) = self.marked {
            vmi["status"]["evacuationNodeName"] = json!(node);
        }
        if let Some(source) = self.source {
            vmi["metadata"]["annotations"][EVICTION_SOURCE_ANNOTATION] = json!(source);
        }
        if self.deleting {
            vmi["metadata"]["deletionTimestamp"] = json!(at(-1));
        }
        vmi
    }

    /// Its running launcher pod, annotated as the decision leaves it: `request-evict-only`, and
    /// `eviction-in-progress` while marked for its node.
    pub fn pod(&self) -> Value {
        let mut annotations = json!({"kubevirt.io/domain": self.name, REQUEST_EVICT_ONLY_ANNOTATION: ""});
        if self.marked == Some(self.node) {
            annotations[EVICTION_IN_PROGRESS_ANNOTATION] = json!("true");
        }
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(self.name), "namespace": NS,
                         "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": self.name},
                         "annotations": annotations},
            "spec": {"nodeName": self.node, "terminationGracePeriodSeconds": 30},
            "status": {"phase": "Running"}
        })
    }

    /// The VMI and its pod.
    pub fn objects(&self) -> [Value; 2] {
        [self.json(), self.pod()]
    }
}

pub fn pod_name(vmi: &str) -> String {
    format!("virt-launcher-{vmi}-x2kfq")
}

/// Being deleted: the API server set `deletionTimestamp` to `NOW + in_seconds`.
pub fn terminating(pod: Value, in_seconds: i64) -> Value {
    set(pod, "/metadata/deletionTimestamp", json!(at(in_seconds)))
}

/// A migration of `vmi` that nobody marked as an evacuation.
pub fn migration(name: &str, vmi: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name, "namespace": NS, "creationTimestamp": at(-3600)},
        "spec": {"vmiName": vmi},
        "status": {"phase": phase}
    })
}

/// An evacuation migration of `vmi` from `node`, ended `ended` seconds from NOW when given.
pub fn evacuation(name: &str, vmi: &str, phase: &str, node: &str, ended: Option<i64>) -> Value {
    let mut migration = migration(name, vmi, phase);
    migration["metadata"]["annotations"] = json!({EVACUATION_MIGRATION_ANNOTATION: node});
    if let Some(ended) = ended {
        migration["status"]["migrationState"] = json!({"sourceNode": node, "endTimestamp": at(ended)});
    }
    migration
}

/// The KubeVirt CR with these parallel limits (per cluster, outbound per node).
pub fn kubevirt(strategy: Option<&str>, limits: Option<(u32, u32)>) -> Value {
    let mut cr = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {"configuration": {}}
    });
    if let Some(strategy) = strategy {
        cr["spec"]["configuration"]["evictionStrategy"] = json!(strategy);
    }
    if let Some((cluster, node)) = limits {
        cr["spec"]["configuration"]["migrations"] =
            json!({"parallelMigrationsPerCluster": cluster, "parallelOutboundMigrationsPerNode": node});
    }
    cr
}

// --- Expected effects ------------------------------------------------------------------------

pub fn migrate(vmi: &str, cause: MigrationCause) -> Effect {
    Effect::CreateMigration {
        vmi: ObjectRef::new(NS, vmi),
        node: NODE.into(),
        cause: Some(cause),
        priority: None,
    }
}

/// The migration of a drain: cause `drain`.
pub fn drain(vmi: &str) -> Effect {
    migrate(vmi, MigrationCause::Drain)
}

pub fn clear(vmi: &str) -> Effect {
    Effect::ClearEvacuation { vmi: ObjectRef::new(NS, vmi), node: NODE.into() }
}

/// An AnnotatePod of `vmi`'s launcher pod.
pub fn annotate(vmi: &str, changes: &[(&str, Option<&str>)]) -> Effect {
    Effect::AnnotatePod {
        pod: ObjectRef::new(NS, pod_name(vmi)),
        annotations: changes.iter().map(|(k, v)| (k.to_string(), v.map(str::to_owned))).collect(),
    }
}

/// The removal of `eviction-in-progress` from `vmi`'s pod.
pub fn not_in_progress(vmi: &str) -> Effect {
    annotate(vmi, &[(EVICTION_IN_PROGRESS_ANNOTATION, None)])
}
