//! evac's test kit, for tests only: [`TestCluster`], the one in-memory cluster of the tests,
//! and the tables of the admission decisions ([`eviction_cases`], [`disruption_cases`],
//! [`hold_cases`]), with the objects and requests they are built from. No product crate depends
//! on it; tests, benchmarks and fuzz harnesses do.
//!
//! A table is plain data: each [`Case`] has a name, the cluster's objects (and the reads that
//! fail), the AdmissionRequest, the policy's settings and the [`Expected`] answer, in the shape of
//! the policy's response (Kubewarden's ValidationResponse plus effects). A harness runs the cases
//! wherever the decision runs (natively on a [`TestCluster`], through the built wasm module on a
//! host's store, in a browser) and checks each answer with [`Expected::check`], or runs a whole
//! table with [`check_cases`]. The cases serialize to JSON for harnesses that receive them so.

mod cluster;
mod disruption;
mod eviction;
pub mod examples;
mod hold;
pub mod objects;
pub mod requests;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use cluster::{ReadFailure, TestCluster};
pub use disruption::{disruption_answer, disruption_cases};
pub use eviction::{eviction_answer, eviction_cases};
pub use hold::hold_cases;

use evac_core::{Effect, PolicyResponse};

/// The moment the tables' decisions are made at, in seconds since the Unix epoch
/// (`2026-11-21T09:45:00Z`): the clock a harness gives a module for rows that depend on it.
pub const TABLE_NOW: f64 = 1_795_254_300.0;

/// One row of a decision's table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Case {
    /// Unique in its table; harnesses name it when the answer is wrong.
    pub name: String,
    /// The cluster's objects, as the decision may read them.
    pub objects: Vec<Value>,
    /// The reads that fail (none: every read is answered from `objects`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<ReadFailure>,
    /// The AdmissionRequest (bare, as Kubewarden passes it to `validate`).
    pub request: Value,
    /// The policy's settings (`null` for the defaults).
    pub settings: Value,
    /// The answer.
    pub expected: Expected,
}

impl Case {
    /// A case with the default settings (`{}`) whose reads all succeed.
    pub fn new(name: impl Into<String>, objects: Vec<Value>, request: Value, expected: Expected) -> Self {
        Self {
            name: name.into(),
            objects,
            failures: Vec::new(),
            request,
            settings: serde_json::json!({}),
            expected,
        }
    }

    /// This case with these settings.
    pub fn with_settings(mut self, settings: Value) -> Self {
        self.settings = settings;
        self
    }

    /// This case with the reads `failure` names failing.
    pub fn with_failure(mut self, failure: ReadFailure) -> Self {
        self.failures.push(failure);
        self
    }
}

/// A text a case expects: exactly, or starting so (for texts that end in another library's
/// wording, which the case need not pin).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Text {
    /// Exactly this text.
    Exact(String),
    /// A text that starts with this.
    Prefix(String),
}

impl Text {
    /// Whether `text` is what is expected.
    pub fn matches(&self, text: &str) -> bool {
        match self {
            Self::Exact(exact) => text == exact,
            Self::Prefix(prefix) => text.starts_with(prefix.as_str()),
        }
    }
}

impl core::fmt::Display for Text {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Exact(exact) => write!(f, "{exact:?}"),
            Self::Prefix(prefix) => write!(f, "{prefix:?}..."),
        }
    }
}

/// The answer a case expects, as the policy answers: whether the request is accepted, the code
/// and message of a rejection, the warnings, the audit annotations and the effects, in order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expected {
    /// `accepted`.
    pub accepted: bool,
    /// `code`: the HTTP status of a rejection.
    #[serde(default)]
    pub code: Option<u16>,
    /// `message`: a rejection's reason.
    #[serde(default)]
    pub message: Option<Text>,
    /// `warnings`, in order; none expected: absent or empty.
    #[serde(default)]
    pub warnings: Vec<Text>,
    /// `audit_annotations`; none expected: absent or empty.
    #[serde(default)]
    pub audit_annotations: BTreeMap<String, String>,
    /// `effects`, exactly.
    #[serde(default)]
    pub effects: Vec<Effect>,
}

impl Expected {
    /// Accepted, without effects, warnings or annotations.
    pub fn allow() -> Self {
        Self {
            accepted: true,
            code: None,
            message: None,
            warnings: Vec::new(),
            audit_annotations: BTreeMap::new(),
            effects: Vec::new(),
        }
    }

    /// Rejected with `code` and exactly `message`.
    pub fn reject(code: u16, message: impl Into<String>) -> Self {
        Self {
            accepted: false,
            code: Some(code),
            message: Some(Text::Exact(message.into())),
            ..Self::allow()
        }
    }

    /// Rejected with `code` and a message that starts with `prefix`.
    pub fn reject_starting(code: u16, prefix: impl Into<String>) -> Self {
        Self { message: Some(Text::Prefix(prefix.into())), ..Self::reject(code, "") }
    }

    /// This answer with one more effect.
    pub fn with_effect(mut self, effect: Effect) -> Self {
        self.effects.push(effect);
        self
    }

    /// This answer with these effects.
    pub fn with_effects(mut self, effects: impl IntoIterator<Item = Effect>) -> Self {
        self.effects.extend(effects);
        self
    }

    /// This answer with one more audit annotation.
    pub fn with_audit_annotation(mut self, key: &str, value: &str) -> Self {
        self.audit_annotations.insert(key.into(), value.into());
        self
    }

    /// This answer with one more warning.
    pub fn with_warning(mut self, warning: Text) -> Self {
        self.warnings.push(warning);
        self
    }

    /// Checks a policy's answer: `Err` says every field that differs.
    pub fn check(&self, response: &PolicyResponse) -> Result<(), String> {
        let mut wrong = Vec::new();
        if response.accepted != self.accepted {
            wrong.push(format!("accepted is {}, expected {}", response.accepted, self.accepted));
        }
        if response.code != self.code {
            wrong.push(format!("code is {:?}, expected {:?}", response.code, self.code));
        }
        let message_matches = match (&self.message, &response.message) {
            (None, None) => true,
            (Some(expected), Some(message)) => expected.matches(message),
            _ => false,
        };
        if !message_matches {
            let expected = self.message.as_ref().map(Text::to_string);
            wrong.push(format!(
                "message is {:?}, expected {}",
                response.message,
                expected.as_deref().unwrap_or("none")
            ));
        }
        let warnings = response.warnings.as_deref().unwrap_or_default();
        let warnings_match = warnings.len() == self.warnings.len()
            && self.warnings.iter().zip(warnings).all(|(expected, warning)| expected.matches(warning));
        if !warnings_match {
            let expected: Vec<String> = self.warnings.iter().map(Text::to_string).collect();
            wrong.push(format!("warnings are {warnings:?}, expected [{}]", expected.join(", ")));
        }
        let annotations = response.audit_annotations.clone().unwrap_or_default();
        if annotations != self.audit_annotations {
            wrong.push(format!(
                "audit annotations are {annotations:?}, expected {:?}",
                self.audit_annotations
            ));
        }
        if response.effects != self.effects {
            wrong.push(format!("effects are {:?}, expected {:?}", response.effects, self.effects));
        }
        if let Some(object) = &response.mutated_object {
            wrong.push(format!("a validating policy mutated the object: {object}"));
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
        }
    }
}

/// The JSON file `test_data/<name>` of the crate at `manifest_dir` (its
/// `env!("CARGO_MANIFEST_DIR")`): a policy crate's fixtures.
pub fn test_data(manifest_dir: &str, name: &str) -> Value {
    let path = format!("{manifest_dir}/test_data/{name}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs every case of `table` through `answer` (the decision as a harness runs it; `Err` for no
/// answer at all) and checks it; panics naming every case whose answer is wrong, or that panicked.
pub fn check_cases<F>(table: &str, cases: &[Case], mut answer: F)
where
    F: FnMut(&Case) -> Result<PolicyResponse, String>,
{
    assert!(!cases.is_empty(), "the {table} table has no cases");
    let mut failed = Vec::new();
    for case in cases {
        let outcome = match catch_unwind(AssertUnwindSafe(|| answer(case))) {
            Ok(Ok(response)) => case.expected.check(&response),
            Ok(Err(error)) => Err(format!("no answer: {error}")),
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(format!("panicked: {why}"))
            }
        };
        if let Err(why) = outcome {
            failed.push(format!("{}: {why}", case.name));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of the {} cases of the {table} table failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
}

/// Decodes settings as a policy does: `null` (or absent) is the defaults.
fn settings<S: serde::de::DeserializeOwned + Default>(settings: &Value) -> Result<S, String> {
    serde_json::from_value::<Option<S>>(settings.clone())
        .map(Option::unwrap_or_default)
        .map_err(|e| format!("the case's settings do not decode: {e}"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use evac_core::ObjectRef;

    #[test]
    fn case_names_are_unique_and_cases_serialize() {
        // The tables' sizes: a change is deliberate.
        for (table, cases, size) in
            [("eviction", eviction_cases(), 240), ("disruption", disruption_cases(), 2287)]
        {
            assert_eq!(cases.len(), size, "{table}");
            let mut names = BTreeSet::new();
            for case in &cases {
                assert!(names.insert(case.name.as_str()), "{table}: two cases named {:?}", case.name);
                let json = serde_json::to_value(case).unwrap();
                assert_eq!(&serde_json::from_value::<Case>(json).unwrap(), case, "{}", case.name);
            }
        }
    }

    #[test]
    fn answers_are_checked_field_by_field() {
        let effect = Effect::ClearEvacuation { vmi: ObjectRef::new("default", "vm"), node: "n".into() };
        let denied =
            PolicyResponse::from(evac_core::Decision::deny("no: because").with_effect(effect.clone()));
        assert_eq!(Expected::reject(429, "no: because").with_effect(effect.clone()).check(&denied), Ok(()));
        assert_eq!(Expected::reject_starting(429, "no:").with_effect(effect.clone()).check(&denied), Ok(()));
        let error = Expected::allow().check(&denied).unwrap_err();
        for field in ["accepted is false", "code is Some(429)", "message is", "effects are"] {
            assert!(error.contains(field), "{error}");
        }
        let warned = PolicyResponse {
            warnings: Some(vec!["careful".into()]),
            ..PolicyResponse::from(evac_core::Decision::allow())
        };
        assert!(Expected::allow().check(&warned).unwrap_err().starts_with("warnings are"));
        assert_eq!(Expected::allow().with_warning(Text::Prefix("care".into())).check(&warned), Ok(()));
        let annotated = PolicyResponse::from(evac_core::Decision::allow().with_audit_annotation("k", "v"));
        assert!(Expected::allow().check(&annotated).unwrap_err().starts_with("audit annotations"));
        assert_eq!(Expected::allow().with_audit_annotation("k", "v").check(&annotated), Ok(()));
    }

    #[test]
    fn failing_cases_are_named() {
        let cases = eviction_cases();
        let result = catch_unwind(|| {
            check_cases("eviction", &cases[..2], |case| {
                if case.name == cases[1].name {
                    Err("boom".into())
                } else {
                    eviction_answer(case, &TestCluster::for_case(case))
                }
            })
        });
        let panic = result.unwrap_err();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(message.starts_with("1 of the 2 cases of the eviction table failed"), "{message}");
        assert!(message.contains(&format!("{}: no answer: boom", cases[1].name)), "{message}");
    }
}
