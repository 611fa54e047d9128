//! Required pod anti-affinity (the `InterPodAffinity` filter), with the `kubernetes.io/hostname`
//! topology, the one KubeVirt's migration target pods carry (`createMigrationPodAntiAffinityRule`:
//! `kubevirt.io/created-by: <VMI uid>`). Other topologies are not modelled.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value};

use super::NodeState;
use crate::objects::Pod;

/// A label's values -> (node, pod) indexes into the reconcile's nodes.
type ByValue<'a> = HashMap<&'a str, Vec<(usize, usize)>>;

/// Where the placed pods with a label are, for the labels the pending pods' terms select by (the
/// first key of each term's `matchLabels`). kube-scheduler walks every node's pods once per
/// scheduling cycle to count the pods each incoming term matches (`interpodaffinity/filtering.go`,
/// `getIncomingAffinityAntiAffinityCounts`); the index gives the same nodes from the pods that
/// carry a term's first label, so that a cycle in a cluster of 10,000 pods reads a handful.
pub(super) struct LabelIndex<'a> {
    keys: BTreeSet<&'a str>,
    /// By key, then value.
    pods: HashMap<&'a str, ByValue<'a>>,
}

impl<'a> LabelIndex<'a> {
    /// An empty index of the labels the `pending` pods' terms select by.
    pub(super) fn for_pending(pending: &[Pod<'a>]) -> Self {
        let keys = pending
            .iter()
            .flat_map(|pod| pod.anti_affinity_on_hostname())
            .filter_map(|labels| labels.keys().next())
            .map(String::as_str)
            .collect();
        Self { keys, pods: HashMap::new() }
    }

    /// A pod placed on node `node`, the `index`th of its pods.
    pub(super) fn add(&mut self, node: usize, index: usize, pod: Pod<'a>) {
        for &key in &self.keys {
            if let Some(value) = pod.meta().label(key) {
                self.pods.entry(key).or_default().entry(value).or_default().push((node, index));
            }
        }
    }

    /// The placed pods labelled `key: value`; `None` when the index does not keep `key`.
    fn with(&self, key: &str, value: &str) -> Option<&[(usize, usize)]> {
        let values = self.keys.contains(key).then(|| self.pods.get(key))?;
        Some(values.and_then(|values| values.get(value)).map(Vec::as_slice).unwrap_or_default())
    }
}

/// The nodes `pod`'s required anti-affinity rules out: those running a pod (not finished) that
/// matches one of its terms' `matchLabels`.
pub(super) fn repelled_nodes(pod: Pod<'_>, nodes: &[NodeState], labels: &LabelIndex<'_>) -> HashSet<usize> {
    let mut repelled = HashSet::new();
    for term in pod.anti_affinity_on_hostname() {
        let matching = |placed: Pod<'_>| !placed.is_finished() && placed.matches(term);
        match first_label(term).and_then(|(key, value)| labels.with(key, value)) {
            Some(candidates) => repelled.extend(
                candidates
                    .iter()
                    .filter(|&&(node, index)| matching(nodes[node].pods[index].pod))
                    .map(|&(n, _)| n),
            ),
            // A term without labels selects every pod; one the index does not keep is read whole.
            None => repelled.extend(
                (0..nodes.len()).filter(|&i| nodes[i].pods.iter().any(|placed| matching(placed.pod))),
            ),
        }
    }
    repelled
}

/// A term's first label, when its value is a string (a pod matches a label whose value is not one
/// only by lacking the key, which the index cannot tell).
fn first_label(term: &Map<String, Value>) -> Option<(&str, &str)> {
    let (key, value) = term.iter().next()?;
    Some((key.as_str(), value.as_str()?))
}
