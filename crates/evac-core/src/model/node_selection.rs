//! Where a pod may be scheduled by its node's labels: `spec.nodeSelector` and the required part of
//! `spec.affinity.nodeAffinity`. KubeVirt copies both from the VMI to its launcher pods
//! (`pkg/virt-controller/services/template.go`), so they bound where a migration can take a VM.
//!
//! Matching follows Kubernetes' `component-helpers/scheduling/corev1/nodeaffinity`: the node
//! selector's pairs must all be labels of the node; of the required terms (`nodeSelectorTerms`,
//! ORed) one must match, a term matching when all its `matchExpressions` (on labels) and
//! `matchFields` (only `metadata.name`) hold; a term with neither matches nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{null_as_default, Str};

/// A pod's or VMI's scheduling constraints on node labels.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelection<'a> {
    /// `spec.nodeSelector`.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<Str<'a>, Str<'a>>,
    /// `spec.affinity`: only its node affinity's required terms matter here.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity<'a>>,
}

/// `spec.affinity`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Affinity<'a> {
    /// `nodeAffinity`.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinity<'a>>,
}

/// `spec.affinity.nodeAffinity`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeAffinity<'a> {
    /// `requiredDuringSchedulingIgnoredDuringExecution`: the scheduler places the pod only where
    /// it holds.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<NodeSelector<'a>>,
}

/// A `NodeSelector`: terms, ORed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelector<'a> {
    /// `nodeSelectorTerms`.
    #[serde(borrow, deserialize_with = "null_as_default")]
    pub node_selector_terms: Vec<NodeSelectorTerm<'a>>,
}

/// A `NodeSelectorTerm`: requirements, ANDed.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NodeSelectorTerm<'a> {
    /// `matchExpressions`, on the node's labels.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<Requirement<'a>>,
    /// `matchFields`, on the node's fields (Kubernetes supports `metadata.name` only).
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub match_fields: Vec<Requirement<'a>>,
}

/// A `NodeSelectorRequirement`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Requirement<'a> {
    /// `key`.
    #[serde(borrow)]
    pub key: Str<'a>,
    /// `operator`: `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt` or `Lt`.
    #[serde(borrow)]
    pub operator: Str<'a>,
    /// `values`.
    #[serde(borrow, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Str<'a>>,
}

impl Requirement<'_> {
    /// Whether a node whose value for the key is `value` (`None`: it has none) meets it. An
    /// unknown operator, or `Gt`/`Lt` with a value that is not an integer, meets nothing.
    fn holds(&self, value: Option<&str>) -> bool {
        let values = || self.values.iter().map(|v| v.as_str());
        let number = |text: &str| text.parse::<i64>().ok();
        match self.operator.as_str() {
            "In" => value.is_some_and(|v| values().any(|x| x == v)),
            "NotIn" => value.is_none_or(|v| values().all(|x| x != v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            "Gt" | "Lt" => {
                let (Some(have), [bound]) = (value.and_then(number), self.values.as_slice()) else {
                    return false;
                };
                let Some(bound) = number(bound) else { return false };
                if self.operator.as_str() == "Gt" {
                    have > bound
                } else {
                    have < bound
                }
            }
            _ => false,
        }
    }
}

impl NodeSelection<'_> {
    /// Whether a node named `name`, whose labels `label` looks up, is one the pod may go to.
    pub fn admits<'l>(&self, name: &str, label: impl Fn(&str) -> Option<Str<'l>>) -> bool {
        let selected =
            self.node_selector.iter().all(|(k, v)| label(k).is_some_and(|l| l.as_str() == v.as_str()));
        let required = self
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref());
        selected
            && required.is_none_or(|selector| {
                selector.node_selector_terms.iter().any(|term| {
                    (!term.match_expressions.is_empty() || !term.match_fields.is_empty())
                        && term.match_expressions.iter().all(|r| r.holds(label(&r.key).as_deref()))
                        && term
                            .match_fields
                            .iter()
                            .all(|r| r.key.as_str() == "metadata.name" && r.holds(Some(name)))
                })
            })
    }

    /// Whether it constrains nothing.
    pub fn is_empty(&self) -> bool {
        self.node_selector.is_empty() && self.affinity.as_ref().is_none_or(|a| a.node_affinity.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selection(json: serde_json::Value) -> NodeSelection<'static> {
        let text: &'static str = Box::leak(json.to_string().into_boxed_str());
        serde_json::from_str(text).unwrap()
    }

    fn admits(selection: &NodeSelection<'_>, name: &str, labels: &[(&str, &str)]) -> bool {
        let labels: Vec<(String, String)> =
            labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        selection.admits(name, |key| {
            labels.iter().find(|(k, _)| k == key).map(|(_, v)| Str(std::borrow::Cow::Owned(v.clone())))
        })
    }

    #[test]
    fn the_node_selector_needs_every_label() {
        let s = selection(serde_json::json!({"nodeSelector": {"zone": "a", "disk": "ssd"}}));
        assert!(admits(&s, "n", &[("zone", "a"), ("disk", "ssd"), ("x", "y")]));
        assert!(!admits(&s, "n", &[("zone", "a")]));
        assert!(!admits(&s, "n", &[("zone", "b"), ("disk", "ssd")]));
        assert!(admits(&selection(serde_json::json!({})), "n", &[]));
    }

    /// (term, labels, name, admitted): each operator as Kubernetes' nodeaffinity reads it.
    #[test]
    fn required_terms_follow_kubernetes_operators() {
        let term = |expressions: serde_json::Value| {
            selection(
                serde_json::json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [expressions]}}}}),
            )
        };
        type Labels = &'static [(&'static str, &'static str)];
        let rows: [(serde_json::Value, Labels, bool); 12] = [
            (
                serde_json::json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}),
                &[("zone", "b")],
                true,
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}),
                &[],
                false,
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
                &[],
                true,
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}),
                &[("zone", "a")],
                false,
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}),
                &[("gpu", "")],
                true,
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}),
                &[("gpu", "")],
                false,
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}),
                &[("cores", "16")],
                true,
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]}),
                &[("cores", "16")],
                false,
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["x"]}]}),
                &[("cores", "16")],
                false,
            ),
            (
                serde_json::json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}),
                &[],
                true,
            ),
            (
                serde_json::json!({"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n"]}]}),
                &[],
                false,
            ),
            // An empty term matches nothing.
            (serde_json::json!({}), &[("zone", "a")], false),
        ];
        for (expressions, labels, admitted) in rows {
            assert_eq!(
                admits(&term(expressions.clone()), "n", labels),
                admitted,
                "{expressions} on {labels:?}"
            );
        }
    }

    #[test]
    fn terms_are_ored() {
        let s = selection(
            serde_json::json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}}}}),
        );
        assert!(admits(&s, "n", &[("zone", "b")]));
        assert!(!admits(&s, "n", &[("zone", "c")]));
    }
}
