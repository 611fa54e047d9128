//! Typed, read-only views of the objects the simulated API server stores, for its components.
//!
//! Each field is read in one place, by its Kubernetes name, and an absent field is `None` (never
//! an empty string that a misspelt path would also give). The views borrow the stored JSON: the
//! components read every object at every step, so nothing is decoded into new structures.

use serde_json::Value;

use crate::actors::quantity;

fn at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, key| value.get(key))
}

fn str_at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(object, path).and_then(Value::as_str)
}

/// `metadata`, common to every object.
#[derive(Debug, Clone, Copy)]
pub struct Meta<'a>(pub &'a Value);

impl<'a> Meta<'a> {
    /// `metadata.name`: the store names every object, so it is never absent.
    pub fn name(self) -> &'a str {
        str_at(self.0, &["metadata", "name"]).unwrap_or_default()
    }

    /// `metadata.namespace`: empty for cluster-scoped objects.
    pub fn namespace(self) -> &'a str {
        str_at(self.0, &["metadata", "namespace"]).unwrap_or_default()
    }

    /// `namespace/name`, as kubectl names objects.
    pub fn key(self) -> String {
        format!("{}/{}", self.namespace(), self.name())
    }

    /// `metadata.uid`.
    pub fn uid(self) -> &'a str {
        str_at(self.0, &["metadata", "uid"]).unwrap_or_default()
    }

    /// `metadata.resourceVersion`, as the number the store counts.
    pub fn resource_version(self) -> u64 {
        str_at(self.0, &["metadata", "resourceVersion"]).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// `metadata.creationTimestamp` (RFC 3339).
    pub fn creation_timestamp(self) -> Option<&'a str> {
        str_at(self.0, &["metadata", "creationTimestamp"])
    }

    /// `metadata.deletionGracePeriodSeconds`: the grace period its deletion was given.
    pub fn deletion_grace_period(self) -> Option<u64> {
        at(self.0, &["metadata", "deletionGracePeriodSeconds"]).and_then(Value::as_u64)
    }

    /// `metadata.deletionTimestamp`: the object is being deleted.
    pub fn deletion_timestamp(self) -> Option<&'a str> {
        str_at(self.0, &["metadata", "deletionTimestamp"])
    }

    /// An annotation's value.
    pub fn annotation(self, key: &str) -> Option<&'a str> {
        at(self.0, &["metadata", "annotations", key]).and_then(Value::as_str)
    }

    /// A label's value.
    pub fn label(self, key: &str) -> Option<&'a str> {
        at(self.0, &["metadata", "labels", key]).and_then(Value::as_str)
    }

    /// The labels, when there are any.
    pub fn labels(self) -> Option<&'a serde_json::Map<String, Value>> {
        at(self.0, &["metadata", "labels"]).and_then(Value::as_object)
    }

    /// The `ownerReferences` entry marked `controller: true`: (kind, name, uid).
    pub fn controller(self) -> Option<(&'a str, &'a str, &'a str)> {
        at(self.0, &["metadata", "ownerReferences"])?.as_array()?.iter().find_map(|owner| {
            (owner.get("controller").and_then(Value::as_bool) == Some(true)).then(|| {
                (
                    str_at(owner, &["kind"]).unwrap_or_default(),
                    str_at(owner, &["name"]).unwrap_or_default(),
                    str_at(owner, &["uid"]).unwrap_or_default(),
                )
            })
        })
    }
}

/// A status condition (`status.conditions[]`).
#[derive(Debug, Clone, Copy)]
pub struct Condition<'a>(pub &'a Value);

impl<'a> Condition<'a> {
    /// `type`.
    pub fn type_(self) -> &'a str {
        str_at(self.0, &["type"]).unwrap_or_default()
    }

    /// `status`: `True`, `False` or `Unknown`.
    pub fn status(self) -> &'a str {
        str_at(self.0, &["status"]).unwrap_or_default()
    }

    /// `reason`.
    pub fn reason(self) -> Option<&'a str> {
        str_at(self.0, &["reason"])
    }

    /// `message`.
    pub fn message(self) -> Option<&'a str> {
        str_at(self.0, &["message"])
    }
}

fn conditions(object: &Value) -> impl Iterator<Item = Condition<'_>> {
    at(object, &["status", "conditions"]).and_then(Value::as_array).into_iter().flatten().map(Condition)
}

/// A `v1` Pod.
#[derive(Debug, Clone, Copy)]
pub struct Pod<'a>(pub &'a Value);

impl<'a> Pod<'a> {
    /// Its metadata.
    pub fn meta(self) -> Meta<'a> {
        Meta(self.0)
    }

    /// `spec.nodeName`: the node it is bound to.
    pub fn node_name(self) -> Option<&'a str> {
        str_at(self.0, &["spec", "nodeName"]).filter(|n| !n.is_empty())
    }

    /// `status.phase`.
    pub fn phase(self) -> Option<&'a str> {
        str_at(self.0, &["status", "phase"])
    }

    /// Succeeded or Failed: its containers will not run again.
    pub fn is_finished(self) -> bool {
        matches!(self.phase(), Some("Succeeded" | "Failed"))
    }

    /// Being deleted (`metadata.deletionTimestamp` set).
    pub fn is_terminating(self) -> bool {
        self.meta().deletion_timestamp().is_some()
    }

    /// The VMI a launcher pod runs: its `kubevirt.io/domain` annotation.
    pub fn vmi(self) -> Option<&'a str> {
        self.meta().annotation(evac_core::kubevirt::DOMAIN_ANNOTATION)
    }

    /// `spec.priority` (0 when unset, as without a PriorityClass).
    pub fn priority(self) -> i64 {
        at(self.0, &["spec", "priority"]).and_then(Value::as_i64).unwrap_or(0)
    }

    /// `spec.schedulerName`.
    pub fn scheduler_name(self) -> Option<&'a str> {
        str_at(self.0, &["spec", "schedulerName"]).filter(|n| !n.is_empty())
    }

    /// `spec.preemptionPolicy`: `Never` keeps a pod from preempting.
    pub fn preemption_policy(self) -> Option<&'a str> {
        str_at(self.0, &["spec", "preemptionPolicy"])
    }

    /// `status.nominatedNodeName`: where preemption made room for it.
    pub fn nominated_node_name(self) -> Option<&'a str> {
        str_at(self.0, &["status", "nominatedNodeName"]).filter(|n| !n.is_empty())
    }

    /// `spec.terminationGracePeriodSeconds`.
    pub fn termination_grace_period(self) -> Option<u64> {
        at(self.0, &["spec", "terminationGracePeriodSeconds"]).and_then(Value::as_u64)
    }

    /// `spec.nodeSelector`.
    pub fn node_selector(self) -> Option<&'a serde_json::Map<String, Value>> {
        at(self.0, &["spec", "nodeSelector"]).and_then(Value::as_object)
    }

    /// `f` of its `spec.nodeSelector` and `spec.affinity`, read as Kubernetes' node affinity
    /// reads them; a pod whose spec does not decode is placed nowhere.
    pub fn node_selection<T>(self, f: impl FnOnce(&evac_core::model::NodeSelection<'_>) -> T) -> T
    where
        T: Default,
    {
        let (selector, affinity) = (at(self.0, &["spec", "nodeSelector"]), at(self.0, &["spec", "affinity"]));
        if selector.is_none() && affinity.is_none() {
            return f(&evac_core::model::NodeSelection::default());
        }
        let text = serde_json::json!({"nodeSelector": selector, "affinity": affinity}).to_string();
        match serde_json::from_str::<evac_core::model::NodeSelection<'_>>(&text) {
            Ok(selection) => f(&selection),
            Err(_) => T::default(),
        }
    }

    /// `spec.tolerations`.
    pub fn tolerations(self) -> impl Iterator<Item = Toleration<'a>> {
        at(self.0, &["spec", "tolerations"]).and_then(Value::as_array).into_iter().flatten().map(Toleration)
    }

    /// Whether one of its tolerations tolerates the taint.
    pub fn tolerates(self, taint: Taint<'_>) -> bool {
        self.tolerations().any(|toleration| toleration.tolerates(taint))
    }

    /// The `matchLabels` of its required pod anti-affinity terms on `kubernetes.io/hostname`.
    pub fn anti_affinity_on_hostname(self) -> impl Iterator<Item = &'a serde_json::Map<String, Value>> {
        at(self.0, &["spec", "affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|term| str_at(term, &["topologyKey"]) == Some("kubernetes.io/hostname"))
            .filter_map(|term| at(term, &["labelSelector", "matchLabels"]).and_then(Value::as_object))
    }

    /// Whether its labels have every key and value of `match_labels`.
    pub fn matches(self, match_labels: &serde_json::Map<String, Value>) -> bool {
        match_labels.iter().all(|(key, value)| self.meta().label(key) == value.as_str())
    }

    /// Its containers' memory requests, summed, in bytes.
    pub fn container_memory_requests(self) -> f64 {
        self.container_requests("memory")
    }

    /// The CPU its containers request, in cores (`resources.requests.cpu`).
    pub fn container_cpu_requests(self) -> f64 {
        self.container_requests("cpu")
    }

    /// The sum of its containers' `resources.requests` of `resource`.
    fn container_requests(self, resource: &str) -> f64 {
        at(self.0, &["spec", "containers"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| str_at(c, &["resources", "requests", resource]).and_then(quantity::bytes))
            .sum()
    }

    /// Its conditions.
    pub fn conditions(self) -> impl Iterator<Item = Condition<'a>> {
        conditions(self.0)
    }

    /// The condition of a type.
    pub fn condition(self, type_: &str) -> Option<Condition<'a>> {
        self.conditions().find(|c| c.type_() == type_)
    }

    /// `status.message`.
    pub fn message(self) -> Option<&'a str> {
        str_at(self.0, &["status", "message"])
    }

    /// The `preStop` `httpGet` hooks of its containers on the node's loopback: (container, port,
    /// path). Another host or handler is none the simulator runs.
    pub fn loopback_pre_stop_hooks(self) -> Vec<(&'a str, u16, &'a str)> {
        at(self.0, &["spec", "containers"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| {
                let get = at(c, &["lifecycle", "preStop", "httpGet"])?;
                let host = str_at(get, &["host"]).unwrap_or("127.0.0.1");
                if host != "127.0.0.1" && host != "localhost" {
                    return None;
                }
                let port = at(get, &["port"]).and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok())?;
                Some((str_at(c, &["name"]).unwrap_or_default(), port, str_at(get, &["path"]).unwrap_or("/")))
            })
            .collect()
    }
}

/// A `spec.taints[]` entry of a Node.
#[derive(Debug, Clone, Copy)]
pub struct Taint<'a>(pub &'a Value);

impl<'a> Taint<'a> {
    /// `key`.
    pub fn key(self) -> &'a str {
        str_at(self.0, &["key"]).unwrap_or_default()
    }

    /// `value`.
    pub fn value(self) -> &'a str {
        str_at(self.0, &["value"]).unwrap_or_default()
    }

    /// `effect`: `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub fn effect(self) -> &'a str {
        str_at(self.0, &["effect"]).unwrap_or_default()
    }

    /// `timeAdded` (NoExecute taints).
    pub fn time_added(self) -> Option<&'a str> {
        str_at(self.0, &["timeAdded"])
    }
}

/// A `spec.tolerations[]` entry of a Pod.
#[derive(Debug, Clone, Copy)]
pub struct Toleration<'a>(pub &'a Value);

impl<'a> Toleration<'a> {
    /// `key`; empty with `Exists`: every key.
    pub fn key(self) -> &'a str {
        str_at(self.0, &["key"]).unwrap_or_default()
    }

    /// `operator`: `Equal` (the default) or `Exists`.
    pub fn operator(self) -> &'a str {
        str_at(self.0, &["operator"]).unwrap_or("Equal")
    }

    /// `effect`; empty: every effect.
    pub fn effect(self) -> &'a str {
        str_at(self.0, &["effect"]).unwrap_or_default()
    }

    /// `tolerationSeconds`: how long a NoExecute taint is tolerated; `None`: for ever.
    pub fn seconds(self) -> Option<i64> {
        at(self.0, &["tolerationSeconds"]).and_then(Value::as_i64)
    }

    /// Kubernetes' `Toleration.ToleratesTaint` (`k8s.io/api/core/v1/toleration.go`): the
    /// effect and key match when the toleration leaves them empty or names the taint's; `Exists`
    /// takes any value, `Equal` the taint's.
    pub fn tolerates(self, taint: Taint<'_>) -> bool {
        (self.effect().is_empty() || self.effect() == taint.effect())
            && (self.key().is_empty() || self.key() == taint.key())
            && match self.operator() {
                "" | "Equal" => str_at(self.0, &["value"]).unwrap_or_default() == taint.value(),
                "Exists" => true,
                _ => false,
            }
    }
}

/// A `v1` Node.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a>(pub &'a Value);

impl<'a> Node<'a> {
    /// Its metadata.
    pub fn meta(self) -> Meta<'a> {
        Meta(self.0)
    }

    /// Its name.
    pub fn name(self) -> &'a str {
        self.meta().name()
    }

    /// `spec.unschedulable`: cordoned.
    pub fn unschedulable(self) -> bool {
        at(self.0, &["spec", "unschedulable"]).and_then(Value::as_bool).unwrap_or(false)
    }

    /// `spec.taints`.
    pub fn taints(self) -> impl Iterator<Item = Taint<'a>> {
        at(self.0, &["spec", "taints"]).and_then(Value::as_array).into_iter().flatten().map(Taint)
    }

    /// `status.capacity.memory`, in bytes.
    pub fn capacity_memory(self) -> Option<f64> {
        str_at(self.0, &["status", "capacity", "memory"]).and_then(quantity::bytes)
    }

    /// `status.allocatable.memory`, in bytes.
    pub fn allocatable_memory(self) -> Option<f64> {
        str_at(self.0, &["status", "allocatable", "memory"]).and_then(quantity::bytes)
    }

    /// `status.allocatable.cpu` (else `status.capacity.cpu`), in cores.
    pub fn allocatable_cpu(self) -> Option<f64> {
        str_at(self.0, &["status", "allocatable", "cpu"])
            .or_else(|| str_at(self.0, &["status", "capacity", "cpu"]))
            .and_then(quantity::bytes)
    }

    /// The condition of a type.
    pub fn condition(self, type_: &str) -> Option<Condition<'a>> {
        conditions(self.0).find(|c| c.type_() == type_)
    }
}

/// A `kubevirt.io/v1` VirtualMachineInstance.
#[derive(Debug, Clone, Copy)]
pub struct Vmi<'a>(pub &'a Value);

impl<'a> Vmi<'a> {
    /// Its metadata.
    pub fn meta(self) -> Meta<'a> {
        Meta(self.0)
    }

    /// `status.nodeName`: where it runs.
    pub fn node_name(self) -> Option<&'a str> {
        str_at(self.0, &["status", "nodeName"]).filter(|n| !n.is_empty())
    }

    /// `status.phase`.
    pub fn phase(self) -> Option<&'a str> {
        str_at(self.0, &["status", "phase"])
    }

    /// Running.
    pub fn is_running(self) -> bool {
        self.phase() == Some("Running")
    }

    /// Succeeded or Failed (KubeVirt's `IsFinal`).
    pub fn is_final(self) -> bool {
        matches!(self.phase(), Some("Succeeded" | "Failed"))
    }

    /// The condition of a type.
    pub fn condition(self, type_: &str) -> Option<Condition<'a>> {
        conditions(self.0).find(|c| c.type_() == type_)
    }

    /// `status.evacuationNodeName`: marked to leave that node.
    pub fn evacuation_node_name(self) -> Option<&'a str> {
        str_at(self.0, &["status", "evacuationNodeName"]).filter(|n| !n.is_empty())
    }

    /// `status.reason`.
    pub fn reason(self) -> Option<&'a str> {
        str_at(self.0, &["status", "reason"])
    }

    /// `spec.terminationGracePeriodSeconds`: how long the guest gets to shut down once asked
    /// (KubeVirt's default, 30 s: `v1.DefaultGracePeriodSeconds`).
    pub fn grace_period(self) -> u64 {
        at(self.0, &["spec", "terminationGracePeriodSeconds"]).and_then(Value::as_u64).unwrap_or(30)
    }

    /// `spec.domain.memory.guest`, in bytes.
    pub fn guest_memory(self) -> Option<f64> {
        str_at(self.0, &["spec", "domain", "memory", "guest"]).and_then(quantity::bytes)
    }

    /// Its memory, in bytes: `spec.domain.memory.guest`, else the memory request, as KubeVirt
    /// sizes a migration (`getVMIMigrationDataSize`).
    pub fn memory(self) -> Option<f64> {
        self.guest_memory().or_else(|| {
            str_at(self.0, &["spec", "domain", "resources", "requests", "memory"]).and_then(quantity::bytes)
        })
    }
}

/// A `kubevirt.io/v1` VirtualMachineInstanceMigration.
#[derive(Debug, Clone, Copy)]
pub struct Migration<'a>(pub &'a Value);

impl<'a> Migration<'a> {
    /// Its metadata.
    pub fn meta(self) -> Meta<'a> {
        Meta(self.0)
    }

    /// `spec.vmiName`.
    pub fn vmi_name(self) -> &'a str {
        str_at(self.0, &["spec", "vmiName"]).unwrap_or_default()
    }

    /// `status.phase`; `None` until the migration controller first sees it.
    pub fn phase(self) -> Option<&'a str> {
        str_at(self.0, &["status", "phase"]).filter(|p| !p.is_empty())
    }

    /// Succeeded or Failed (KubeVirt's `IsFinal`).
    pub fn is_final(self) -> bool {
        matches!(self.phase(), Some("Succeeded" | "Failed"))
    }

    /// `spec.priority` (VEP 62).
    pub fn priority(self) -> Option<&'a str> {
        str_at(self.0, &["spec", "priority"])
    }

    /// `status.migrationState.sourceNode`.
    pub fn source_node(self) -> Option<&'a str> {
        str_at(self.0, &["status", "migrationState", "sourceNode"]).filter(|n| !n.is_empty())
    }

    /// `status.migrationState.targetNode`.
    pub fn target_node(self) -> Option<&'a str> {
        str_at(self.0, &["status", "migrationState", "targetNode"]).filter(|n| !n.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn absent_fields_are_none_not_empty() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": ""}});
        let pod = Pod(&pod);
        assert_eq!(pod.node_name(), None, "an empty nodeName is unbound");
        assert_eq!(pod.phase(), None);
        assert_eq!(pod.vmi(), None);
        assert_eq!(pod.meta().namespace(), "");
        assert!(!pod.is_terminating());
    }

    #[test]
    fn tolerations_follow_kubernetes() {
        let taint = json!({"key": "k", "value": "v", "effect": "NoExecute"});
        let taint = Taint(&taint);
        // (toleration, tolerates)
        let rows = [
            (json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"}), true),
            (json!({"key": "k", "value": "v"}), true),
            (json!({"key": "k", "value": "w"}), false),
            (json!({"key": "k", "operator": "Exists"}), true),
            (json!({"operator": "Exists"}), true),
            (json!({"key": "other", "operator": "Exists"}), false),
            (json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"}), false),
            (json!({"key": "k", "operator": "Sideways"}), false),
        ];
        for (toleration, expected) in rows {
            assert_eq!(Toleration(&toleration).tolerates(taint), expected, "{toleration}");
        }
    }
}
