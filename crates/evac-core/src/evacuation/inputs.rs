//! What the decision reads from the cluster, decoded, and what it derives from one VMI of it:
//! its deadline, its migration's settings and estimate.

use std::collections::BTreeMap;

use super::settings::Settings;
use super::Context;
use crate::cluster::{self, ClusterReader, ListResourcesAll, ReadError};
use crate::effect::{EvacuationSource, EVICTION_SOURCE_ANNOTATION};
use crate::estimate::{self, Estimate};
use crate::kubevirt::{DIRTY_RATE_ANNOTATION, LAUNCHER_SELECTOR, NODE_NAME_LABEL};
use crate::kubevirt::{MIGRATION_KIND, POD_KIND, VMI_KIND};
use crate::kubevirt_config::KubeVirtConfig;
use crate::migration_policy::{
    self, MigrationPolicy, MigrationSettings, MIGRATION_POLICY_API_VERSION, MIGRATION_POLICY_KIND,
};
use crate::model::{quantity, Migration, Node, Pod, Str, VirtualMachineInstance};
use crate::trace::Trace;

/// Labels by namespace name.
pub(super) type NamespaceLabels = BTreeMap<String, BTreeMap<Str<'static>, Str<'static>>>;

/// Everything the decision reads, decoded.
pub(super) struct Inputs<'i, 'a> {
    pub node: &'i Node<'a>,
    pub settings: &'i Settings,
    pub config: &'i KubeVirtConfig,
    pub vmis: &'i [VirtualMachineInstance<'a>],
    pub pods: &'i [Pod<'a>],
    pub migrations: &'i [Migration<'a>],
    /// KubeVirt's MigrationPolicies, which set some VMIs' bandwidth and timeouts.
    pub policies: &'i [MigrationPolicy<'a>],
    /// Labels of the namespaces the policies' namespace selectors look at.
    pub namespace_labels: &'i NamespaceLabels,
}

/// KubeVirt's configuration, noted with whose controller creates the migrations.
pub(super) fn read_config<C>(
    settings: &Settings,
    cluster: &C,
    cx: &mut Context<'_>,
) -> Result<KubeVirtConfig, ReadError>
where
    C: ClusterReader + ?Sized,
{
    let config = KubeVirtConfig::read(settings.kubevirt.as_ref(), cluster)?;
    let runs = cx.flavor.kubevirt_controller_runs(settings);
    cx.trace.note(|| {
        let bandwidth = match config.bandwidth_per_migration {
            Some(bytes) => format!("bandwidthPerMigration {bytes} bytes/s"),
            None => "bandwidthPerMigration unlimited".to_owned(),
        };
        format!(
            "KubeVirt: parallelMigrationsPerCluster {}, parallelOutboundMigrationsPerNode {}, {bandwidth}; \
             its evacuation controller {}",
            config.parallel_migrations_per_cluster,
            config.parallel_outbound_migrations_per_node,
            if runs { "runs" } else { "is off: evac creates the migrations" }
        )
    });
    Ok(config)
}

/// The node's VMIs and launcher pods and the cluster's migrations, as listed.
pub(super) struct Listed {
    vmis: Vec<u8>,
    pods: Vec<u8>,
    migrations: Vec<u8>,
}

/// [`Listed`], decoded.
pub(super) struct Objects<'a> {
    pub vmis: Vec<VirtualMachineInstance<'a>>,
    pub pods: Vec<Pod<'a>>,
    pub migrations: Vec<Migration<'a>>,
}

impl Listed {
    /// Lists the VMIs labelled for `node`, the launcher pods on it and every migration.
    pub fn read<C: ClusterReader + ?Sized>(cluster: &C, node: &str) -> Result<Self, ReadError> {
        let node_label = format!("{NODE_NAME_LABEL}={node}");
        let vmis = list(cluster, VMI_KIND.0, VMI_KIND.1, Some(&node_label), None)?;
        let on_node = format!("spec.nodeName={node}");
        let (pod_version, pod_kind) = crate::kubevirt::POD_KIND;
        let pods = list(cluster, pod_version, pod_kind, Some(LAUNCHER_SELECTOR), Some(&on_node))?;
        let migrations = list(cluster, MIGRATION_KIND.0, MIGRATION_KIND.1, None, None)?;
        Ok(Self { vmis, pods, migrations })
    }

    /// The objects listed, noted with how many there are.
    pub fn decode(&self, node: &Node<'_>, trace: &mut Trace) -> Result<Objects<'_>, ReadError> {
        let objects = Objects {
            vmis: cluster::decode_list(&self.vmis, VMI_KIND.1)?,
            pods: cluster::decode_list(&self.pods, POD_KIND.1)?,
            migrations: cluster::decode_list(&self.migrations, MIGRATION_KIND.1)?,
        };
        trace.note(|| {
            format!(
                "node {}{}: {} VMIs labelled for it, {} launcher pods on it; {} migrations in the cluster",
                node.metadata.name,
                if node.is_drain_tainted() { " (drain-tainted)" } else { "" },
                objects.vmis.len(),
                objects.pods.len(),
                objects.migrations.len()
            )
        });
        Ok(objects)
    }
}

/// The node, with the memory figures of its metrics when one of evac's own node-pressure
/// evacuations may have to be called off: only then is it read.
pub(super) fn with_pressure_figures<'a, C>(
    node: &Node<'a>,
    vmis: &[VirtualMachineInstance<'_>],
    cluster: &C,
    cx: &Context<'_>,
) -> Node<'a>
where
    C: ClusterReader + ?Sized,
{
    let mut node = node.clone();
    let pressure = EvacuationSource::NodePressure.as_str();
    if cx.flavor.is_evac()
        && vmis.iter().any(|v| v.metadata.annotation(EVICTION_SOURCE_ANNOTATION).as_deref() == Some(pressure))
    {
        crate::placement::read_working_sets(core::slice::from_mut(&mut node), cluster);
    }
    node
}

/// Lists every object of a kind, filtered as the selectors say.
pub(super) fn list<C: ClusterReader + ?Sized>(
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

/// Any object, for its labels.
#[derive(serde::Deserialize)]
struct Labelled<'a> {
    #[serde(borrow, default)]
    metadata: crate::model::ObjectMeta<'a>,
}

/// The MigrationPolicies, and the labels of the namespaces their namespace selectors need: read
/// only when some policy exists. A policy that cannot be read counts as none (the cluster's
/// settings stand), with a note in the trace.
pub(super) fn read_policies<'r, C>(
    cluster: &C,
    raw: &'r mut Vec<u8>,
    namespaces: impl Iterator<Item = String>,
    trace: &mut Trace,
) -> (Vec<MigrationPolicy<'r>>, NamespaceLabels)
where
    C: ClusterReader + ?Sized,
{
    let unread = |trace: &mut Trace, what: &str, message: &str| {
        trace
            .note(|| format!("MigrationPolicies {what} ({message}): the cluster's migration settings apply"));
        (Vec::new(), BTreeMap::new())
    };
    match list(cluster, MIGRATION_POLICY_API_VERSION, MIGRATION_POLICY_KIND, None, None) {
        Ok(read) => *raw = read,
        Err(e) => return unread(trace, "cannot be read", &e.message),
    }
    let policies = match cluster::decode_list::<MigrationPolicy<'_>>(raw, MIGRATION_POLICY_KIND) {
        Ok(policies) => policies,
        Err(e) => return unread(trace, "do not decode", &e.message),
    };
    let by_namespace =
        policies.iter().any(|p| p.spec.selectors.as_ref().is_some_and(|s| s.namespace_selector.is_some()));
    let labels = if by_namespace { namespace_labels(cluster, namespaces) } else { BTreeMap::new() };
    (policies, labels)
}

/// The labels of each namespace, read once each. A namespace that cannot be read has no labels:
/// only selectors without a namespace part match its VMIs.
fn namespace_labels<C>(cluster: &C, namespaces: impl Iterator<Item = String>) -> NamespaceLabels
where
    C: ClusterReader + ?Sized,
{
    let mut labels = BTreeMap::new();
    for namespace in namespaces {
        if labels.contains_key(&namespace) {
            continue;
        }
        let read = cluster::fetch(cluster, "v1", "Namespace", "", &namespace).ok();
        let meta = read.as_deref().and_then(|raw| serde_json::from_slice::<Labelled<'_>>(raw).ok());
        let owned = meta.map(|m| {
            m.metadata.labels.to_map().into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
        });
        labels.insert(namespace, owned.unwrap_or_default());
    }
    labels
}

impl<'i, 'a> Inputs<'i, 'a> {
    /// The VMIs on the node: the label selects them, but a VMI whose label lags behind a migration
    /// is not on it.
    pub fn vmis_on_node(&self) -> impl Iterator<Item = &'i VirtualMachineInstance<'a>> + '_ {
        self.vmis.iter().filter(|v| v.status.node_name == self.node.metadata.name)
    }

    /// The VMI a migration moves, if it is one of the node's.
    pub fn vmi_of(&self, migration: &Migration<'_>) -> Option<&'i VirtualMachineInstance<'a>> {
        self.vmis.iter().find(|v| {
            v.metadata.namespace == migration.metadata.namespace && v.metadata.name == migration.spec.vmi_name
        })
    }

    /// When the VMI's VM must be gone, from its launcher pod on the node decided (the first by
    /// name that has not completed, as the plan takes it): [`Inputs::pod_deadline`].
    pub fn deadline_of(&self, namespace: &str, name: &str) -> f64 {
        let launcher = self
            .pods
            .iter()
            .filter(|p| {
                p.metadata.namespace == namespace && p.domain().as_deref() == Some(name) && !p.is_completed()
            })
            .min_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        self.pod_deadline(launcher)
    }

    /// When a VM must be gone: its pod's SIGTERM (stock KubeVirt shuts the guest down then), or
    /// the end of its grace period (the proposals' virt-handler); infinite without a pod being
    /// ended ([`crate::hold::termination_deadline`]).
    pub fn pod_deadline(&self, pod: Option<&Pod<'_>>) -> f64 {
        pod.map_or(f64::INFINITY, |p| crate::hold::termination_deadline(p, self.settings.virt_handler))
    }

    /// How the VMI's migration would go, with the cluster's bandwidth (the assumed one when
    /// KubeVirt leaves it unlimited) and timeouts, and the dirty rate a monitoring agent publishes
    /// on the VMI.
    pub fn estimate(&self, vmi: &VirtualMachineInstance<'_>, memory: f64) -> Estimate {
        self.estimate_under(vmi, memory, &self.migration_settings(vmi))
    }

    /// [`Inputs::estimate`] with the VMI's migration settings already known.
    pub fn estimate_under(
        &self,
        vmi: &VirtualMachineInstance<'_>,
        memory: f64,
        settings: &MigrationSettings,
    ) -> Estimate {
        let dirty_rate =
            vmi.metadata.annotation(DIRTY_RATE_ANNOTATION).and_then(|q| quantity::bytes(&q)).unwrap_or(0.0);
        estimate::estimate(&settings.inputs(memory, dirty_rate, self.settings.assumed_bandwidth_bytes()))
    }

    /// The settings KubeVirt migrates the VMI with: the cluster's, under the MigrationPolicy that
    /// matches it ([`migration_policy::match_policy`]).
    pub fn migration_settings(&self, vmi: &VirtualMachineInstance<'_>) -> MigrationSettings {
        let no_labels = BTreeMap::new();
        let namespace_labels =
            self.namespace_labels.get(vmi.metadata.namespace.as_str()).unwrap_or(&no_labels);
        let policy =
            migration_policy::match_policy(self.policies, &vmi.metadata.labels.to_map(), namespace_labels);
        MigrationSettings::of(self.config, policy)
    }
}
