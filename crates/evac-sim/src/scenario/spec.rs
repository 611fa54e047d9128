//! The scenario file format: a cluster (nodes, VMs with their strategies, sizes and
//! migratability, KubeVirt's settings), the disruptions to apply and when, and what to report.
//! Every field is checked: an unknown field, a bad duration or quantity, or a disruption naming a
//! node the cluster lacks is an error that names where it is.

use super::ScenarioError;
use std::time::Duration;

use serde::Deserialize;

use crate::actors::quantity;

mod check;

/// A scenario as its YAML file describes it ([`Scenario::parse`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// `name`: the scenario's title in reports and comparison lines.
    pub name: String,
    /// `description`: what the scenario shows, printed before its timeline and on its page.
    #[serde(default)]
    pub description: String,
    /// `label`: how reports and pages name a run of this scenario without evac, when that run
    /// is not plain KubeVirt (e.g. `naive descheduler` for the baseline of another scenario);
    /// unset: [`KUBEVIRT_ALONE`](super::html::KUBEVIRT_ALONE).
    #[serde(default)]
    pub label: Option<String>,
    /// `cluster`: the nodes, the VMs, and KubeVirt's and the kubelet's settings.
    pub cluster: Cluster,
    /// `disruptions`: what happens to the cluster, and when.
    #[serde(default, deserialize_with = "numbered")]
    pub disruptions: Vec<Disruption>,
    /// Simulated time to run for at most: the run ends earlier when nothing is left to happen.
    #[serde(default = "default_duration")]
    pub duration: Text,
    /// `report`: the sections of the final report to print (default: all).
    #[serde(default = "default_report")]
    pub report: Vec<Section>,
    /// The scenario `evac demo` compares this one's run with evac against (a file next to this
    /// one), when it is not this scenario run with KubeVirt alone.
    #[serde(default)]
    pub baseline: Option<String>,
}

impl Scenario {
    /// The name of a run of this scenario without evac: its `label`, or `KubeVirt alone`.
    pub fn kubevirt_label(&self) -> &str {
        self.label.as_deref().unwrap_or(super::html::KUBEVIRT_ALONE)
    }
}

fn default_duration() -> Text {
    Text("1h".into())
}

fn default_report() -> Vec<Section> {
    vec![Section::Timeline, Section::Vms, Section::Migrations, Section::Evictions]
}

/// A part of the final report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Section {
    /// What happened, as it happened.
    Timeline,
    /// Each VM that was disrupted, with its outcome and cause (and a count of the others).
    Vms,
    /// Migrations created, succeeded and failed; the most running at once per cluster and per node.
    Migrations,
    /// Evictions asked for, by each actor.
    Evictions,
}

/// A duration (`90s`, `5m`, `1h30m`) or quantity (`2Gi`) as written; checked by [`Scenario::check`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(transparent)]
pub struct Text(pub String);

impl Text {
    pub fn duration(&self, at: &str) -> Result<Duration, String> {
        humantime::parse_duration(&self.0).map_err(|e| format!("{at}: {:?} is not a duration ({e})", self.0))
    }

    /// CPU cores: a quantity like `2` or `500m`.
    pub fn cores(&self, at: &str) -> Result<f64, String> {
        quantity::bytes(&self.0)
            .filter(|c| *c >= 0.0)
            .ok_or_else(|| format!("{at}: {:?} is not a CPU quantity like 2 or 500m", self.0))
    }

    pub fn bytes(&self, at: &str) -> Result<f64, String> {
        quantity::bytes(&self.0)
            .ok_or_else(|| format!("{at}: {:?} is not a quantity like 2Gi or 512Mi", self.0))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Cluster {
    pub nodes: Vec<NodeGroup>,
    #[serde(default)]
    pub vms: Vec<VmGroup>,
    #[serde(default)]
    pub kubevirt: KubeVirtSettings,
    #[serde(default)]
    pub kubelet: KubeletSettings,
    /// PodDisruptionBudgets over the VMs' launcher pods (selected by the labels the VM groups
    /// give their VMIs, which KubeVirt copies to the pods).
    #[serde(default)]
    pub pod_disruption_budgets: Vec<Budget>,
    /// KubeVirt MigrationPolicies (`migrations.kubevirt.io/v1alpha1`): the one that matches a
    /// VMI's labels (and its namespace's) sets its migrations' bandwidth and timeouts.
    #[serde(default)]
    pub migration_policies: Vec<PolicySpec>,
}

/// A MigrationPolicy: `selectors` and the settings it overrides, as KubeVirt writes them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicySpec {
    pub name: String,
    /// `virtualMachineInstanceSelector` and `namespaceSelector`, label maps.
    pub selectors: PolicySelectors,
    #[serde(default)]
    pub bandwidth_per_migration: Option<Text>,
    #[serde(default, rename = "completionTimeoutPerGiB")]
    pub completion_timeout_per_gib: Option<u64>,
    #[serde(default)]
    pub allow_post_copy: Option<bool>,
    #[serde(default)]
    pub allow_workload_disruption: Option<bool>,
    /// QEMU throttles a guest that dirties memory too fast (`evac_core::estimate::throttled`).
    #[serde(default)]
    pub allow_auto_converge: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicySelectors {
    #[serde(default)]
    pub virtual_machine_instance_selector: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    pub namespace_selector: Option<std::collections::BTreeMap<String, String>>,
}

/// A `policy/v1` PodDisruptionBudget.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Budget {
    pub name: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// `spec.selector`, a label selector (`matchLabels`, `matchExpressions`).
    pub selector: serde_json::Value,
    /// `spec.minAvailable`: a number of pods (or a percentage, which only a scalable controller
    /// gives a meaning to: none for launcher pods).
    #[serde(default)]
    pub min_available: Option<serde_json::Value>,
    /// `spec.maxUnavailable`: likewise.
    #[serde(default)]
    pub max_unavailable: Option<serde_json::Value>,
}

/// `count` nodes named `<namePrefix>NN` (zero-padded), or one node named `namePrefix` when count is 1.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeGroup {
    pub name_prefix: String,
    #[serde(default = "one")]
    pub count: usize,
    pub memory: Text,
    /// CPU cores the node offers pods (`status.allocatable.cpu`); unset: no limit.
    #[serde(default)]
    pub cpu: Option<Text>,
    /// Labels of each node of the group, beside `kubernetes.io/hostname`.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
}

fn one() -> usize {
    1
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VmGroup {
    pub name_prefix: String,
    #[serde(default = "one")]
    pub count: usize,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    pub memory: Text,
    /// The VMI's `spec.evictionStrategy`; unset: the cluster's.
    #[serde(default)]
    pub eviction_strategy: Option<Strategy>,
    #[serde(default = "yes")]
    pub migratable: bool,
    /// How fast the guest dirties memory, per second (e.g. `20Mi`).
    #[serde(default)]
    pub dirty_rate: Option<Text>,
    /// The VirtualMachine's `spec.runStrategy`: `Always`, a VM that stops (or whose VMI is
    /// deleted) is started again; `RerunOnFailure`, only one that failed (killed, not shut down);
    /// `Once` (default) and `Manual`, it stays stopped.
    #[serde(default)]
    pub run_strategy: RunStrategy,
    /// The VMI's `terminationGracePeriodSeconds` (KubeVirt's default: 30): how long the guest
    /// gets to shut down once asked. Its launcher pod's grace period is 30 s more
    /// (`services/template.go`).
    #[serde(default = "default_grace")]
    pub termination_grace_period_seconds: u64,
    /// How long the guest takes to power off once asked (ACPI or its agent), or `never` for a
    /// guest that ignores the request (killed at its grace period).
    #[serde(default = "default_guest_shutdown")]
    pub guest_shutdown: Text,
    #[serde(default)]
    pub priority: i64,
    /// Nodes to place the VMs on, round robin; unset: every node.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Launcher pods carry `descheduler.alpha.kubernetes.io/request-evict-only` (KubeVirt's
    /// descheduler contract).
    #[serde(default = "yes")]
    pub request_evict_only: bool,
    /// The launcher pods' `spec.tolerations`, as Kubernetes writes them (`key`, `operator`,
    /// `value`, `effect`, `tolerationSeconds`); KubeVirt copies the VMI's tolerations there.
    #[serde(default)]
    pub tolerations: Vec<serde_json::Value>,
    /// The VMI's `spec.nodeSelector`, copied to its launcher pods.
    #[serde(default)]
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// The VMI's `spec.affinity`, as Kubernetes writes it (`nodeAffinity`: only its required
    /// terms place pods here), copied to its launcher pods.
    #[serde(default)]
    pub affinity: Option<serde_json::Value>,
    /// CPU the VMI requests (`spec.domain.resources.requests.cpu`, e.g. `2` or `500m`), which its
    /// launcher pods request; unset: none.
    #[serde(default)]
    pub cpu: Option<Text>,
    /// The VMI's labels, which KubeVirt copies to its launcher pods.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The VM has a hotplugged volume: an attachment pod `hp-volume-*` beside its launcher pod,
    /// which KubeVirt's webhook keeps from eviction while the VM runs there.
    #[serde(default)]
    pub hotplug_volume: bool,
}

fn default_namespace() -> String {
    "default".into()
}

impl VmGroup {
    /// [`VmGroup::guest_shutdown`] in milliseconds, or `None` for `never`.
    pub fn guest_shutdown_ms(&self, at: &str) -> Result<Option<u128>, String> {
        if self.guest_shutdown.0 == "never" {
            return Ok(None);
        }
        self.guest_shutdown.duration(at).map(|d| Some(d.as_millis())).map_err(|e| format!("{e}, nor `never`"))
    }
}

fn yes() -> bool {
    true
}

fn default_grace() -> u64 {
    30
}

fn default_guest_shutdown() -> Text {
    Text("5s".into())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Strategy {
    None,
    LiveMigrate,
    LiveMigrateIfPossible,
    External,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::LiveMigrate => "LiveMigrate",
            Self::LiveMigrateIfPossible => "LiveMigrateIfPossible",
            Self::External => "External",
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum RunStrategy {
    Always,
    RerunOnFailure,
    #[default]
    Once,
    Manual,
}

impl RunStrategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::RerunOnFailure => "RerunOnFailure",
            Self::Once => "Once",
            Self::Manual => "Manual",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeVirtSettings {
    /// The cluster-wide `spec.configuration.evictionStrategy`.
    #[serde(default)]
    pub eviction_strategy: Option<Strategy>,
    /// KubeVirt's feature gates. Unset: none for KubeVirt alone; with evac, the three that turn
    /// preemption, NoExecute taints and node pressure into evacuations.
    #[serde(default)]
    pub feature_gates: Option<Vec<String>>,
    #[serde(default = "five")]
    pub parallel_migrations_per_cluster: usize,
    #[serde(default = "two")]
    pub parallel_outbound_migrations_per_node: usize,
    #[serde(default = "default_bandwidth")]
    pub bandwidth_per_migration: Text,
    #[serde(default = "default_timeout")]
    pub completion_timeout_per_gib: Text,
    /// What virt-handler does with a VM whose launcher pod gets SIGTERM: `stock` (KubeVirt as
    /// shipped: it shuts the guest down at once) or `proposal` (the node-pressure design and VEP
    /// 55: the guest runs until its pod's grace period ends).
    #[serde(default)]
    pub virt_handler: evac_core::hold::VirtHandler,
}

impl Default for KubeVirtSettings {
    fn default() -> Self {
        Self {
            eviction_strategy: None,
            feature_gates: None,
            parallel_migrations_per_cluster: five(),
            parallel_outbound_migrations_per_node: two(),
            bandwidth_per_migration: default_bandwidth(),
            completion_timeout_per_gib: default_timeout(),
            virt_handler: evac_core::hold::VirtHandler::default(),
        }
    }
}

fn five() -> usize {
    5
}

fn two() -> usize {
    2
}

fn default_bandwidth() -> Text {
    Text("64Mi".into())
}

fn default_timeout() -> Text {
    Text("150s".into())
}

/// The kubelet's memory eviction settings (`evictionSoft`, `evictionSoftGracePeriod`,
/// `evictionMaxPodGracePeriod`, `evictionHard` for `memory.available`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KubeletSettings {
    #[serde(default = "default_soft")]
    pub eviction_soft: Text,
    #[serde(default = "default_soft_grace")]
    pub eviction_soft_grace_period: Text,
    #[serde(default = "default_max_pod_grace")]
    pub eviction_max_pod_grace_period: Text,
    #[serde(default = "default_hard")]
    pub eviction_hard: Text,
}

impl Default for KubeletSettings {
    fn default() -> Self {
        Self {
            eviction_soft: default_soft(),
            eviction_soft_grace_period: default_soft_grace(),
            eviction_max_pod_grace_period: default_max_pod_grace(),
            eviction_hard: default_hard(),
        }
    }
}

fn default_soft() -> Text {
    Text("3500Mi".into())
}

fn default_soft_grace() -> Text {
    Text("5s".into())
}

fn default_max_pod_grace() -> Text {
    Text("300s".into())
}

fn default_hard() -> Text {
    Text("10Mi".into())
}

/// One disruption, applied `at` (simulated time since the start).
#[derive(Debug, Clone)]
pub struct Disruption {
    pub at: Text,
    pub action: Action,
}

/// What a disruption may be, in errors.
const DISRUPTIONS: &str = "drain, uncordon, taint, untaint, memoryPressure, preempt, descheduler, evict, deletePod, deleteVm, nodeDown, cancelEvacuation, restartEvacControl, restartEvacHold";

/// The disruptions, each error numbered with the disruption's place in the list (YAML's own
/// location points at the list).
fn numbered<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<Disruption>, D::Error> {
    use serde::de::Error;
    let raw = Vec::<serde_yaml::Value>::deserialize(deserializer)?;
    raw.into_iter()
        .enumerate()
        .map(|(i, value)| {
            Disruption::deserialize(value).map_err(|e| D::Error::custom(format!("disruptions[{i}]: {e}")))
        })
        .collect()
}

impl<'de> Deserialize<'de> for Disruption {
    /// `at` beside exactly one action. Written out rather than with `#[serde(flatten)]`, which
    /// cannot refuse unknown fields: every unknown field, at either level, is an error that names
    /// it and the valid ones.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut fields = serde_yaml::Mapping::deserialize(deserializer)?;
        let at = match fields.remove("at") {
            Some(at) => Text::deserialize(at).map_err(|e| D::Error::custom(format!("at: {e}")))?,
            None => Text("0s".into()),
        };
        let keys: Vec<String> = fields.keys().map(|k| k.as_str().unwrap_or("?").to_owned()).collect();
        if keys.len() != 1 {
            return Err(D::Error::custom(format!(
                "a disruption is `at` and one of {DISRUPTIONS}; found {}",
                if keys.is_empty() { "none".to_owned() } else { keys.join(", ") }
            )));
        }
        // serde_yaml reads an enum from a `Value` only as a tagged value (`!drain {...}`).
        let (_, value) = fields.into_iter().next().expect("one field, checked above");
        let tagged = serde_yaml::value::TaggedValue { tag: serde_yaml::value::Tag::new(&keys[0]), value };
        let action = Action::deserialize(serde_yaml::Value::Tagged(Box::new(tagged)))
            .map_err(|e| D::Error::custom(format!("{}: {e}", keys[0])))?;
        Ok(Self { at, action })
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub enum Action {
    /// `kubectl drain <node> --ignore-daemonsets --delete-emptydir-data`.
    Drain { node: String },
    /// `kubectl uncordon <node>`.
    Uncordon { node: String },
    /// A taint on a node (e.g. NoExecute, for the taint manager).
    Taint {
        node: String,
        key: String,
        #[serde(default)]
        value: String,
        effect: String,
    },
    /// `kubectl taint nodes <node> <key>:<effect>-`: the taint of that key (and effect, if given)
    /// is removed.
    Untaint {
        node: String,
        key: String,
        #[serde(default)]
        effect: Option<String>,
    },
    /// Memory the node's system uses besides its pods, so that it comes under memory pressure.
    MemoryPressure { node: String, used: Text },
    /// Pods of a higher priority than the VMs, that the scheduler must make room for.
    Preempt {
        #[serde(default = "one")]
        pods: usize,
        memory: Text,
        priority: i64,
        /// Pin the pods to this node (`nodeName` affinity); unset: the scheduler's choice.
        #[serde(default)]
        node: Option<String>,
    },
    /// A descheduler from this moment on.
    Descheduler(DeschedulerSpec),
    /// One eviction request for the VM's launcher pod, and no retry, as cluster-autoscaler's
    /// scale-down or `kubectl evict` sends it.
    Evict {
        vm: String,
        #[serde(default = "default_namespace")]
        namespace: String,
    },
    /// A user deletes the VM's launcher pod (`kubectl delete pod`, its own grace period).
    DeletePod {
        vm: String,
        #[serde(default = "default_namespace")]
        namespace: String,
    },
    /// The node dies: its kubelet and its VMs stop at once, and the node lifecycle controller
    /// marks it unreachable (Ready `Unknown`, the `node.kubernetes.io/unreachable` taints).
    NodeDown { node: String },
    /// The VM's VMI is deleted (its launcher pods go with it, as their owner is gone).
    DeleteVm {
        vm: String,
        #[serde(default = "default_namespace")]
        namespace: String,
    },
    /// `virtctl evacuate-cancel vmi <vm>` (KubeVirt's `evacuate/cancel`): refused while the node
    /// carries KubeVirt's drain taint.
    CancelEvacuation {
        vm: String,
        #[serde(default = "default_namespace")]
        namespace: String,
    },
    /// evac's controller restarts: it forgets all it knew and starts over from the cluster
    /// (with evac only; KubeVirt alone ignores it).
    RestartEvacControl {},
    /// evac's hold endpoint on a node restarts: the hooks waiting on it see their connection
    /// reset, which ends them (with evac only).
    RestartEvacHold { node: String },
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeschedulerSpec {
    /// KEP-1397: requests answered with 429 "Eviction triggered evacuation" are evictions in
    /// background. false: today's descheduler, which counts them as failures.
    #[serde(default = "yes")]
    pub evictions_in_background: bool,
    #[serde(default = "default_interval")]
    pub interval: Text,
    #[serde(default)]
    pub max_per_node: Option<usize>,
    #[serde(default)]
    pub max_per_namespace: Option<usize>,
    #[serde(default)]
    pub max_total: Option<usize>,
    #[serde(default = "default_ttl")]
    pub in_progress_ttl: Text,
    /// LowNodeUtilization thresholds, percent of memory.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    #[serde(default = "default_target")]
    pub target_threshold: f64,
}

fn default_interval() -> Text {
    Text("60s".into())
}

fn default_ttl() -> Text {
    Text("10m".into())
}

fn default_threshold() -> f64 {
    20.0
}

fn default_target() -> f64 {
    50.0
}

impl Scenario {
    /// Parses a scenario file's text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Self, ScenarioError> {
        let scenario: Self =
            serde_yaml::from_str(text).map_err(|e| ScenarioError::Invalid(format!("{file}: {e}")))?;
        scenario.check().map_err(|e| ScenarioError::Invalid(format!("{file}: {e}")))?;
        Ok(scenario)
    }

    /// When evac's hold endpoint restarts on which node (`restartEvacHold`), in simulated time.
    pub fn hold_endpoint_restarts(&self) -> Result<Vec<(String, Duration)>, String> {
        let mut restarts = Vec::new();
        for (i, disruption) in self.disruptions.iter().enumerate() {
            if let Action::RestartEvacHold { node } = &disruption.action {
                restarts.push((node.clone(), disruption.at.duration(&format!("disruptions[{i}].at"))?));
            }
        }
        Ok(restarts)
    }

    /// The node names, in order.
    pub fn node_names(&self) -> Vec<String> {
        self.cluster.nodes.iter().flat_map(|group| group_names(&group.name_prefix, group.count)).collect()
    }

    /// The VMs: (namespace, name) of each, group by group, as the cluster is built.
    pub fn vm_names(&self) -> Vec<(String, String)> {
        self.cluster
            .vms
            .iter()
            .flat_map(|group| {
                group_names(&group.name_prefix, group.count).map(|name| (group.namespace.clone(), name))
            })
            .collect()
    }
}

/// A group's names: its prefix alone for a group of one, else the prefix and a number of at least
/// two digits (`node01`).
pub(super) fn group_names(prefix: &str, count: usize) -> impl Iterator<Item = String> + '_ {
    let width = count.to_string().len().max(2);
    (1..=count).map(move |i| if count == 1 { prefix.to_owned() } else { format!("{prefix}{i:0width$}") })
}
