//! Kubewarden policy metadata (`metadata.yml`), and its place in a module: the custom section
//! `io.kubewarden.metadata`, written the way `kwctl annotate` writes it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use wasm_encoder::{CustomSection, RawSection};
use wasmparser::{Parser, Payload};

use crate::capabilities::ResourceGrant;

/// The custom section Kubewarden's tools read policy metadata from.
pub const METADATA_SECTION: &str = "io.kubewarden.metadata";

/// A policy's `metadata.yml`, as `kwctl annotate` embeds it and Kubewarden reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// The waPC protocol version the module speaks (`v1`); filled in from the module itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The admission requests the policy is for.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Free-form annotations (`io.kubewarden.policy.title`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Whether the policy may mutate requests (evac's never do).
    #[serde(default)]
    pub mutating: bool,
    /// Whether Kubewarden's audit scanner may evaluate the policy on existing objects.
    #[serde(default = "yes")]
    pub background_audit: bool,
    /// The resources the policy reads through host capabilities.
    #[serde(default)]
    pub context_aware_resources: BTreeSet<ResourceGrant>,
    /// How the module runs: `kubewarden-wapc`.
    #[serde(default = "wapc")]
    pub execution_mode: String,
    /// `kubernetes`: the policy evaluates Kubernetes admission requests.
    #[serde(default = "kubernetes")]
    pub policy_type: String,
    /// The oldest Kubewarden that can run the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_kubewarden_version: Option<String>,
}

fn yes() -> bool {
    true
}

fn wapc() -> String {
    "kubewarden-wapc".into()
}

fn kubernetes() -> String {
    "kubernetes".into()
}

/// An admission rule: which requests the policy is for.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    /// API groups (`""` for the core group).
    pub api_groups: Vec<String>,
    /// API versions (`v1`).
    pub api_versions: Vec<String>,
    /// Resources and subresources (`pods/eviction`).
    pub resources: Vec<String>,
    /// Operations (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`, `*`).
    pub operations: Vec<String>,
}

/// Why metadata cannot be read, embedded or accepted.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// `metadata.yml` does not parse.
    #[error("invalid policy metadata: {0}")]
    Yaml(serde_yaml::Error),
    /// It parses but `kwctl annotate` would refuse it (why).
    #[error("{0}")]
    Invalid(String),
    /// The module does not parse.
    #[error("not a valid WebAssembly module: {0}")]
    Module(wasmparser::BinaryReaderError),
    /// The module's metadata section is not metadata.
    #[error("the module's io.kubewarden.metadata section is not valid metadata: {0}")]
    Section(serde_json::Error),
    /// The metadata could not be written as JSON.
    #[error("cannot write the metadata as JSON: {0}")]
    Json(serde_json::Error),
}

fn invalid(why: String) -> Result<(), MetadataError> {
    Err(MetadataError::Invalid(why))
}

impl Metadata {
    /// Parses and checks a `metadata.yml`.
    pub fn from_yaml(text: &str) -> Result<Self, MetadataError> {
        let metadata: Self = serde_yaml::from_str(text).map_err(MetadataError::Yaml)?;
        metadata.validate()?;
        Ok(metadata)
    }

    /// The checks `kwctl annotate` makes.
    pub fn validate(&self) -> Result<(), MetadataError> {
        const MODES: [&str; 4] = ["kubewarden-wapc", "opa", "gatekeeper", "wasi"];
        if !MODES.contains(&self.execution_mode.as_str()) {
            return invalid(format!("executionMode {:?} is not one of {MODES:?}", self.execution_mode));
        }
        match self.policy_type.as_str() {
            "kubernetes" if self.rules.is_empty() => {
                return invalid("a kubernetes policy needs at least one rule".into());
            }
            "kubernetes" | "raw" => {}
            other => return invalid(format!("policyType {other:?} is not kubernetes or raw")),
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let empty = [
                ("apiGroups", rule.api_groups.is_empty()),
                ("apiVersions", rule.api_versions.is_empty()),
                ("resources", rule.resources.is_empty()),
                ("operations", rule.operations.is_empty()),
            ];
            if let Some((field, _)) = empty.iter().find(|(_, is_empty)| *is_empty) {
                return invalid(format!("rules[{i}].{field} is empty"));
            }
            for op in &rule.operations {
                if !["CREATE", "UPDATE", "DELETE", "CONNECT", "*"].contains(&op.as_str()) {
                    return invalid(format!(
                        "rules[{i}].operations: {op:?} is not CREATE, UPDATE, DELETE, CONNECT or *"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The module with its metadata section replaced by `metadata`.
pub fn embed(module: &[u8], metadata: &Metadata) -> Result<Vec<u8>, MetadataError> {
    let json = serde_json::to_vec(metadata).map_err(MetadataError::Json)?;
    let mut out = wasm_encoder::Module::new();
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.map_err(MetadataError::Module)?;
        if let Payload::CustomSection(section) = &payload {
            if section.name() == METADATA_SECTION {
                continue;
            }
        }
        if let Some((id, range)) = payload.as_section() {
            out.section(&RawSection { id, data: &module[range] });
        }
    }
    out.section(&CustomSection { name: METADATA_SECTION.into(), data: json.into() });
    Ok(out.finish())
}

/// The metadata embedded in a module, if any.
pub fn read(module: &[u8]) -> Result<Option<Metadata>, MetadataError> {
    for payload in Parser::new(0).parse_all(module) {
        if let Payload::CustomSection(section) = payload.map_err(MetadataError::Module)? {
            if section.name() == METADATA_SECTION {
                let metadata = serde_json::from_slice(section.data()).map_err(MetadataError::Section)?;
                return Ok(Some(metadata));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    const METADATA: &str = r#"
rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods/eviction"]
    operations: ["CREATE"]
mutating: false
contextAwareResources:
  - apiVersion: v1
    kind: Pod
annotations:
  io.kubewarden.policy.title: test
"#;

    #[test]
    fn embeds_and_reads_back() {
        let module = wat::parse_str(
            r#"(module (memory (export "memory") 1) (@custom "io.kubewarden.metadata" "old"))"#,
        )
        .unwrap();
        let metadata = Metadata::from_yaml(METADATA).unwrap();
        let annotated = embed(&module, &metadata).unwrap();
        assert_eq!(read(&annotated).unwrap(), Some(metadata.clone()));
        // Annotating again replaces the section instead of adding a second one.
        let twice = embed(&annotated, &metadata).unwrap();
        assert_eq!(twice.len(), annotated.len());
        wasmparser::validate(&twice).unwrap();
        let json: serde_json::Value = serde_json::to_value(&metadata).unwrap();
        assert_eq!(json["contextAwareResources"][0]["apiVersion"], "v1");
        assert_eq!(json["executionMode"], "kubewarden-wapc");
        assert_eq!(json["backgroundAudit"], true);
    }

    #[test]
    fn refuses_bad_metadata() {
        let err = |text: &str| format!("{:#}", Metadata::from_yaml(text).unwrap_err());
        assert!(err("rules: []").contains("at least one rule"));
        assert!(err(&METADATA.replace("CREATE", "EVICT")).contains("is not CREATE"));
        assert!(err("rules: []\nbogus: 1").contains("unknown field"));
    }
}
