//! What serde cannot check in a scenario: durations, quantities, names, references between
//! its parts ([`Scenario::check`]).

use std::collections::HashSet;

use super::{Action, Disruption, Scenario};

impl Scenario {
    /// Checks what serde cannot: durations, quantities, names, references between parts.
    pub fn check(&self) -> Result<(), String> {
        self.duration.duration("duration")?;
        let names = Names {
            nodes: self.node_names().into_iter().collect(),
            vms: self.vm_names().into_iter().collect(),
        };
        if names.nodes.is_empty() {
            return Err("cluster.nodes: the cluster needs at least one node".into());
        }
        self.check_node_groups()?;
        self.check_vm_groups(&names)?;
        self.check_budgets()?;
        self.check_migration_policies()?;
        self.check_kubevirt()?;
        self.check_kubelet()?;
        for (i, disruption) in self.disruptions.iter().enumerate() {
            check_disruption(&format!("disruptions[{i}]"), disruption, &names)?;
        }
        Ok(())
    }

    /// Each node group's memory and CPU.
    fn check_node_groups(&self) -> Result<(), String> {
        for (i, group) in self.cluster.nodes.iter().enumerate() {
            group.memory.bytes(&format!("cluster.nodes[{i}].memory"))?;
            if let Some(cpu) = &group.cpu {
                cpu.cores(&format!("cluster.nodes[{i}].cpu"))?;
            }
        }
        Ok(())
    }

    /// Each VM group: a name prefix used once per namespace, its quantities, its affinity and
    /// tolerations, the nodes it names.
    fn check_vm_groups(&self, names: &Names) -> Result<(), String> {
        let mut prefixes = HashSet::new();
        for (i, group) in self.cluster.vms.iter().enumerate() {
            let at = format!("cluster.vms[{i}]");
            if !prefixes.insert((&group.namespace, &group.name_prefix)) {
                return Err(format!(
                    "{at}.namePrefix: {:?} is used twice in {}",
                    group.name_prefix, group.namespace
                ));
            }
            group.memory.bytes(&format!("{at}.memory"))?;
            if let Some(rate) = &group.dirty_rate {
                rate.bytes(&format!("{at}.dirtyRate"))?;
            }
            group.guest_shutdown_ms(&format!("{at}.guestShutdown"))?;
            if let Some(cpu) = &group.cpu {
                cpu.cores(&format!("{at}.cpu"))?;
            }
            if let Some(affinity) = &group.affinity {
                check_affinity(&at, affinity)?;
            }
            for node in &group.nodes {
                names.node(&format!("{at}.nodes"), node)?;
            }
            for (j, toleration) in group.tolerations.iter().enumerate() {
                check_toleration(&format!("{at}.tolerations[{j}]"), toleration)?;
            }
        }
        Ok(())
    }

    /// Each PodDisruptionBudget: a name used once per namespace, a label selector, and exactly
    /// one of `minAvailable` and `maxUnavailable`, a number of pods or a percentage.
    fn check_budgets(&self) -> Result<(), String> {
        let mut budgets = HashSet::new();
        for (i, budget) in self.cluster.pod_disruption_budgets.iter().enumerate() {
            let at = format!("cluster.podDisruptionBudgets[{i}]");
            if !budgets.insert((&budget.namespace, &budget.name)) {
                return Err(format!("{at}.name: {:?} is used twice in {}", budget.name, budget.namespace));
            }
            evac_cluster::LabelSelector::from_object(&budget.selector)
                .map_err(|e| format!("{at}.selector: not a label selector ({e})"))?;
            let valid = |v: &serde_json::Value| {
                v.as_u64().is_some()
                    || v.as_str()
                        .is_some_and(|s| s.strip_suffix('%').is_some_and(|n| n.parse::<u32>().is_ok()))
            };
            match (&budget.min_available, &budget.max_unavailable) {
                (Some(v), None) | (None, Some(v)) if valid(v) => {}
                (Some(_), Some(_)) | (None, None) => {
                    return Err(format!("{at}: exactly one of minAvailable and maxUnavailable"));
                }
                _ => {
                    return Err(format!(
                        "{at}: minAvailable/maxUnavailable is a number of pods or a percentage like 50%"
                    ))
                }
            }
        }
        Ok(())
    }

    /// Each migration policy: a name used once, its bandwidth.
    fn check_migration_policies(&self) -> Result<(), String> {
        let mut policies = HashSet::new();
        for (i, policy) in self.cluster.migration_policies.iter().enumerate() {
            let at = format!("cluster.migrationPolicies[{i}]");
            if !policies.insert(&policy.name) {
                return Err(format!("{at}.name: {:?} is used twice", policy.name));
            }
            if let Some(bandwidth) = &policy.bandwidth_per_migration {
                bandwidth.bytes(&format!("{at}.bandwidthPerMigration"))?;
            }
        }
        Ok(())
    }

    /// KubeVirt's migration settings.
    fn check_kubevirt(&self) -> Result<(), String> {
        let kubevirt = &self.cluster.kubevirt;
        kubevirt.bandwidth_per_migration.bytes("cluster.kubevirt.bandwidthPerMigration")?;
        kubevirt.completion_timeout_per_gib.duration("cluster.kubevirt.completionTimeoutPerGiB")?;
        if kubevirt.parallel_migrations_per_cluster == 0
            || kubevirt.parallel_outbound_migrations_per_node == 0
        {
            return Err("cluster.kubevirt: the parallel migration limits must be at least 1".into());
        }
        Ok(())
    }

    /// The kubelets' eviction settings.
    fn check_kubelet(&self) -> Result<(), String> {
        let kubelet = &self.cluster.kubelet;
        kubelet.eviction_soft.bytes("cluster.kubelet.evictionSoft")?;
        kubelet.eviction_hard.bytes("cluster.kubelet.evictionHard")?;
        kubelet.eviction_soft_grace_period.duration("cluster.kubelet.evictionSoftGracePeriod")?;
        kubelet.eviction_max_pod_grace_period.duration("cluster.kubelet.evictionMaxPodGracePeriod")?;
        Ok(())
    }
}

/// The cluster's nodes and VMs, for checking the references to them.
struct Names {
    nodes: HashSet<String>,
    /// (namespace, name).
    vms: HashSet<(String, String)>,
}

impl Names {
    /// Whether the cluster has this node; `at` names the field in the error.
    fn node(&self, at: &str, node: &str) -> Result<(), String> {
        if self.nodes.contains(node) {
            Ok(())
        } else {
            Err(format!("{at}: the cluster has no node {node:?}"))
        }
    }

    /// Whether the cluster has this VM; `at` names the field in the error.
    fn vm(&self, at: &str, namespace: &str, vm: &str) -> Result<(), String> {
        if self.vms.contains(&(namespace.to_owned(), vm.to_owned())) {
            Ok(())
        } else {
            Err(format!("{at}: the cluster has no VM {namespace}/{vm}"))
        }
    }
}

/// A VM group's affinity: a Kubernetes affinity, as an object.
fn check_affinity(at: &str, affinity: &serde_json::Value) -> Result<(), String> {
    let text = affinity.to_string();
    serde_json::from_str::<evac_core::model::Affinity<'_>>(&text)
        .map_err(|e| format!("{at}.affinity: not a Kubernetes affinity ({e})"))?;
    if !affinity.is_object() {
        return Err(format!("{at}.affinity: expected an object with nodeAffinity"));
    }
    Ok(())
}

/// A VM group's toleration: an object whose operator is `Equal` (the default) or `Exists`.
fn check_toleration(at: &str, toleration: &serde_json::Value) -> Result<(), String> {
    let operator = toleration.get("operator").and_then(serde_json::Value::as_str).unwrap_or("Equal");
    if !toleration.is_object() || !matches!(operator, "Equal" | "Exists") {
        return Err(format!(
            "{at}: expected a toleration (key, operator Equal or Exists, value, effect, tolerationSeconds)"
        ));
    }
    Ok(())
}

/// A disruption at `at`: its time, the nodes and VMs it names, its action's own fields.
fn check_disruption(at: &str, disruption: &Disruption, names: &Names) -> Result<(), String> {
    disruption.at.duration(&format!("{at}.at"))?;
    match &disruption.action {
        Action::Drain { node }
        | Action::Uncordon { node }
        | Action::RestartEvacHold { node }
        | Action::NodeDown { node }
        | Action::Untaint { node, .. } => names.node(at, node)?,
        Action::Taint { node, effect, .. } => {
            names.node(at, node)?;
            if !matches!(effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
                return Err(format!(
                    "{at}.taint.effect: {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute"
                ));
            }
        }
        Action::MemoryPressure { node, used } => {
            names.node(at, node)?;
            used.bytes(&format!("{at}.memoryPressure.used"))?;
        }
        Action::Preempt { memory, node, .. } => {
            memory.bytes(&format!("{at}.preempt.memory"))?;
            if let Some(node) = node {
                names.node(at, node)?;
            }
        }
        Action::Descheduler(spec) => {
            spec.interval.duration(&format!("{at}.descheduler.interval"))?;
            spec.in_progress_ttl.duration(&format!("{at}.descheduler.inProgressTtl"))?;
            if !(0.0..=100.0).contains(&spec.threshold)
                || !(spec.threshold..=100.0).contains(&spec.target_threshold)
            {
                return Err(format!(
                    "{at}.descheduler: thresholds must satisfy 0 <= threshold <= targetThreshold <= 100"
                ));
            }
        }
        Action::Evict { vm, namespace }
        | Action::DeletePod { vm, namespace }
        | Action::DeleteVm { vm, namespace }
        | Action::CancelEvacuation { vm, namespace } => names.vm(at, namespace, vm)?,
        Action::RestartEvacControl {} => {}
    }
    Ok(())
}
