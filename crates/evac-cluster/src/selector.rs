//! Kubernetes label and field selectors, for list queries.

use std::collections::BTreeMap;

use serde_json::Value;

/// A selector that does not parse, with Kubernetes' reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

impl From<SelectorError> for String {
    fn from(error: SelectorError) -> Self {
        error.0
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    Exists(String),
    NotExists(String),
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A label selector such as `app=web,tier!=cache,env in (prod,stage),!legacy`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector(Vec<LabelRequirement>);

impl LabelSelector {
    /// The value the selector requires of a label (`key=value`), if it requires one: what an
    /// index on that label can answer.
    pub fn required_value(&self, key: &str) -> Option<&str> {
        self.0.iter().find_map(|requirement| match requirement {
            LabelRequirement::Equals(k, value) if k == key => Some(value.as_str()),
            _ => None,
        })
    }

    /// Parses a label selector's text form.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_top_level(text) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            requirements.push(parse_label_requirement(part).map_err(SelectorError)?);
        }
        Ok(Self(requirements))
    }

    /// A structured selector (`metav1.LabelSelector`: `matchLabels` and `matchExpressions`), as
    /// PodDisruptionBudgets and workloads carry it.
    pub fn from_object(selector: &Value) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in selector.get("matchLabels").and_then(Value::as_object).into_iter().flatten() {
            let value =
                value.as_str().ok_or_else(|| SelectorError(format!("matchLabels[{key}] is not a string")))?;
            requirements.push(LabelRequirement::Equals(key.clone(), value.to_owned()));
        }
        for expression in selector.get("matchExpressions").and_then(Value::as_array).into_iter().flatten() {
            let key = expression.get("key").and_then(Value::as_str).unwrap_or_default().to_owned();
            let values: Vec<String> = expression
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| Some(v.as_str()?.to_owned()))
                .collect();
            requirements.push(match expression.get("operator").and_then(Value::as_str).unwrap_or_default() {
                "In" => LabelRequirement::In(key, values),
                "NotIn" => LabelRequirement::NotIn(key, values),
                "Exists" => LabelRequirement::Exists(key),
                "DoesNotExist" => LabelRequirement::NotExists(key),
                other => return Err(SelectorError(format!("unknown label selector operator {other:?}"))),
            });
        }
        Ok(Self(requirements))
    }

    /// Whether a set of labels satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            LabelRequirement::Exists(k) => labels.contains_key(k),
            LabelRequirement::NotExists(k) => !labels.contains_key(k),
            LabelRequirement::Equals(k, v) => labels.get(k) == Some(v),
            LabelRequirement::NotEquals(k, v) => labels.get(k) != Some(v),
            LabelRequirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            LabelRequirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        })
    }

    /// Matches an object's `metadata.labels`.
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = object["metadata"]["labels"]
            .as_object()
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
            .unwrap_or_default();
        self.matches(&labels)
    }
}

/// Splits on commas outside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_label_requirement(part: &str) -> Result<LabelRequirement, String> {
    let invalid = || format!("invalid label selector requirement {part:?}");
    if let Some(key) = part.strip_prefix('!') {
        return Ok(LabelRequirement::NotExists(key.trim().to_owned()));
    }
    if let Some((key, value)) = part.split_once("!=") {
        return Ok(LabelRequirement::NotEquals(key.trim().into(), value.trim().into()));
    }
    if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
        return Ok(LabelRequirement::Equals(key.trim().into(), value.trim().into()));
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words.as_slice() {
        let rest = rest.trim();
        let (negated, set) = if let Some(set) = rest.strip_prefix("notin") {
            (true, set)
        } else if let Some(set) = rest.strip_prefix("in") {
            (false, set)
        } else {
            return Err(invalid());
        };
        let set = set.trim().strip_prefix('(').and_then(|s| s.strip_suffix(')')).ok_or_else(invalid)?;
        let values = set.split(',').map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect();
        let key = (*key).to_owned();
        return Ok(if negated {
            LabelRequirement::NotIn(key, values)
        } else {
            LabelRequirement::In(key, values)
        });
    }
    if part.chars().all(|c| c.is_alphanumeric() || "-_./".contains(c)) {
        return Ok(LabelRequirement::Exists(part.to_owned()));
    }
    Err(invalid())
}

/// A field selector such as `spec.nodeName=node01,status.phase!=Succeeded`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses a field selector's text form (`spec.nodeName=node01,status.phase!=Failed`).
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (p, true, v)
            } else {
                return Err(SelectorError(format!(
                    "invalid field selector requirement {part:?}: expected field=value or field!=value"
                )));
            };
            terms.push((path.trim().to_owned(), equal, value.trim().to_owned()));
        }
        Ok(Self(terms))
    }

    /// An absent field reads as the empty string, as in Kubernetes.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let field = path.split('.').try_fold(object, |v, key| v.get(key));
            let matches = match field {
                Some(Value::String(s)) => s == value,
                Some(Value::Null) | None => value.is_empty(),
                Some(other) => value.as_str() == other.to_string().as_str(),
            };
            matches == *equal
        })
    }

    /// The field paths it names.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(path, _, _)| path.as_str())
    }

    /// The node, when the selector is exactly `spec.nodeName=<node>` (what kubelets and drains
    /// ask for, and what the API server indexes).
    pub fn node_name(&self) -> Option<&str> {
        match self.0.as_slice() {
            [(path, true, node)] if path == "spec.nodeName" => Some(node),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn structured_selectors_match_like_their_text_form() {
        let selector = LabelSelector::from_object(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "Exists"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
            ],
        }))
        .unwrap();
        let object = |labels: serde_json::Value| json!({"metadata": {"labels": labels}});
        assert!(selector.matches_object(&object(json!({"app": "web", "tier": "edge", "zone": "a"}))));
        assert!(!selector.matches_object(&object(json!({"app": "web", "tier": "back", "zone": "a"}))));
        assert!(!selector
            .matches_object(&object(json!({"app": "web", "tier": "edge", "zone": "a", "legacy": "y"}))));
        assert!(!selector.matches_object(&object(json!({"app": "web", "tier": "edge"}))));
        assert!(!selector
            .matches_object(&object(json!({"app": "web", "tier": "edge", "zone": "a", "env": "dev"}))));
        let text = LabelSelector::parse("app=web,tier in (front,edge),!legacy,zone,env notin (dev)").unwrap();
        assert_eq!(selector, text);
        let err =
            LabelSelector::from_object(&json!({"matchExpressions": [{"key": "a", "operator": "Near"}]}));
        assert_eq!(err.unwrap_err().to_string(), r#"unknown label selector operator "Near""#);
    }

    #[test]
    fn label_selectors() {
        let pod = json!({"metadata": {"labels": {"app": "web", "env": "prod"}}});
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app=web,env=prod", true),
            ("app=web,env=dev", false),
            ("env in (prod, stage)", true),
            ("env notin (prod)", false),
            ("tier notin (cache)", true),
            ("app", true),
            ("!app", false),
            ("!legacy", true),
        ];
        for (text, expected) in cases {
            let selector = LabelSelector::parse(text).unwrap();
            assert_eq!(selector.matches_object(&pod), expected, "{text}");
        }
        assert!(LabelSelector::parse("env in prod").is_err());
    }

    #[test]
    fn field_selectors() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "node01"}, "status": {"phase": "Running"}});
        let cases = [
            ("spec.nodeName=node01", true),
            ("spec.nodeName!=node01", false),
            ("spec.nodeName=node01,status.phase=Running", true),
            ("metadata.namespace=", true),
            ("status.phase!=Succeeded", true),
        ];
        for (text, expected) in cases {
            assert_eq!(FieldSelector::parse(text).unwrap().matches_object(&pod), expected, "{text}");
        }
        assert!(FieldSelector::parse("spec.nodeName").is_err());
    }
}
