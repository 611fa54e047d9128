//! `policies.yml`: Kubewarden's policy-server format (policy id -> `module`, `policyMode`,
//! `settings`, `contextAwareResources`, `hostCapabilities`, `timeoutEvalSeconds`, `message`,
//! `allowedToMutate`; kubewarden-controller `crates/policy-server/src/config.rs` `Policy`), with
//! evac's additions, which policy-server ignores: `timeoutEvalMilliseconds`, a version `label`, and
//! a `shadow` candidate. Unlike policy-server, evac refuses keys it does not know (a typo would
//! otherwise drop a setting silently).
//!
//! ```yaml
//! pod-eviction:
//!   module: file:///policies/pod-eviction.wasm
//!   label: v1.2.0
//!   policyMode: protect
//!   timeoutEvalMilliseconds: 250
//!   contextAwareResources:
//!     - {apiVersion: v1, kind: Pod}
//!   hostCapabilities: [kubernetes/*]
//!   settings: {}
//!   shadow:
//!     module: pod-eviction-next.wasm
//!     label: v1.3.0-rc.1
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use evac_runtime::capabilities::{CapabilityPatterns, ResourceGrant};

pub use crate::error::ConfigError;

/// Kubewarden's policy modes: `protect` answers with the verdict, `monitor` only records it and
/// allows the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyMode {
    /// The verdict stands and the effects are carried out.
    #[default]
    Protect,
    /// The verdict and effects are recorded; the request is allowed and nothing is carried out.
    Monitor,
}

impl PolicyMode {
    /// `protect` or `monitor`, as `policies.yml` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Protect => "protect",
            Self::Monitor => "monitor",
        }
    }
}

/// One policy of `policies.yml`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyEntry {
    /// `file:///abs/path.wasm`, or a path (relative ones are relative to `policies.yml`).
    pub module: String,
    /// `protect` (default) or `monitor`.
    #[serde(default)]
    pub policy_mode: PolicyMode,
    /// Whether the policy may change the object (a mutating policy): its mutation is answered as
    /// a JSON patch; without it, a mutation rejects the request, as Kubewarden's policy-server does.
    #[serde(default)]
    pub allowed_to_mutate: Option<bool>,
    /// The policy's settings, checked by its `validate_settings`.
    #[serde(default)]
    pub settings: Option<serde_json::Value>,
    /// The resources the policy may read through host capabilities.
    #[serde(default)]
    pub context_aware_resources: BTreeSet<ResourceGrant>,
    /// The host capabilities the policy may call (`kubernetes/*`, `kubernetes/get_resource`, `*`),
    /// checked and matched as Kubewarden 1.36 does; none when absent, as there.
    #[serde(default)]
    pub host_capabilities: Vec<String>,
    /// A denial's message instead of the policy's, which moves to the status' `details.causes`
    /// (Kubewarden's custom rejection message).
    #[serde(default)]
    pub message: Option<String>,
    /// The deadline of one evaluation in seconds (Kubewarden's field).
    #[serde(default)]
    pub timeout_eval_seconds: Option<u64>,
    /// evac: the deadline of one evaluation in milliseconds (wins over `timeoutEvalSeconds`).
    #[serde(default)]
    pub timeout_eval_milliseconds: Option<u64>,
    /// evac: a human label for this version, shown beside its digest in metrics and answers.
    #[serde(default)]
    pub label: Option<String>,
    /// evac: a candidate version evaluated on the same requests without affecting the answer.
    #[serde(default)]
    pub shadow: Option<ShadowEntry>,
}

/// A candidate version of a policy.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShadowEntry {
    /// The candidate's module, as `module` names the active one.
    pub module: String,
    /// The candidate's label.
    #[serde(default)]
    pub label: Option<String>,
    /// The candidate's settings; the active version's when absent.
    #[serde(default)]
    pub settings: Option<serde_json::Value>,
}

impl PolicyEntry {
    /// The host capabilities the policy may call, its `hostCapabilities` checked as Kubewarden
    /// checks them.
    pub fn capability_patterns(&self) -> Result<CapabilityPatterns, ConfigError> {
        CapabilityPatterns::parse(&self.host_capabilities).map_err(ConfigError::CapabilityPattern)
    }

    /// Why every read of the policy will be refused, if it will: it lists resources to read but
    /// its `hostCapabilities` allow no `kubernetes` read (Kubewarden's default is none, so a file
    /// written before the field existed reads nothing). Loading it is allowed, as by policy-server.
    pub fn reads_refused(&self) -> Option<String> {
        let allowed = self.capability_patterns().ok()?;
        let reads = ["get_resource", "list_resources_all", "list_resources_by_namespace"];
        let can_read = reads.iter().any(|operation| allowed.allows(&format!("kubernetes/{operation}")));
        (!self.context_aware_resources.is_empty() && !can_read).then(|| {
            "its contextAwareResources list what it reads, but its hostCapabilities allow no kubernetes/* \
             call: every read will be refused (add hostCapabilities: [kubernetes/*])"
                .to_owned()
        })
    }

    /// The deadline of one evaluation, if the entry sets one.
    pub fn timeout(&self) -> Option<Duration> {
        match (self.timeout_eval_milliseconds, self.timeout_eval_seconds) {
            (Some(ms), _) => Some(Duration::from_millis(ms)),
            (None, Some(s)) => Some(Duration::from_secs(s)),
            (None, None) => None,
        }
    }
}

/// A parsed `policies.yml`: policy id -> entry, and the directory module paths are relative to.
#[derive(Debug, Clone, PartialEq)]
pub struct PoliciesFile {
    /// The file's directory: relative module paths start there.
    pub base_dir: PathBuf,
    /// The policies, by id.
    pub policies: BTreeMap<String, PolicyEntry>,
}

impl PoliciesFile {
    /// Reads and checks a `policies.yml`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| ConfigError::Read { path: path.to_owned(), error })?;
        let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Self::parse(&text, base_dir)
            .map_err(|e| ConfigError::Invalid { path: path.to_owned(), error: Box::new(e) })
    }

    /// Parses and checks the text of a `policies.yml` whose modules are relative to `base_dir`.
    pub fn parse(text: &str, base_dir: PathBuf) -> Result<Self, ConfigError> {
        let raw: BTreeMap<String, serde_yaml::Value> = match serde_yaml::from_str(text) {
            Ok(Some(raw)) => raw,
            Ok(None) => return Err(ConfigError::Empty),
            Err(e) => return Err(ConfigError::NotAMap(e)),
        };
        let mut policies = BTreeMap::new();
        for (id, value) in raw {
            check_id(&id)?;
            if value.get("policies").is_some() {
                return Err(ConfigError::PolicyGroup.in_policy(&id));
            }
            let entry: PolicyEntry =
                serde_yaml::from_value(value).map_err(|e| ConfigError::Entry(e).in_policy(&id))?;
            check_entry(&entry).map_err(|e| e.in_policy(&id))?;
            if let Some(why) = entry.reads_refused() {
                tracing::warn!(policy = %id, "{why}");
            }
            policies.insert(id, entry);
        }
        Ok(Self { base_dir, policies })
    }

    /// The file a module reference names.
    pub fn module_path(&self, reference: &str) -> Result<PathBuf, ConfigError> {
        module_path(reference, &self.base_dir)
    }
}

fn check_id(id: &str) -> Result<(), ConfigError> {
    let valid = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !valid {
        return Err(ConfigError::InvalidId(id.to_owned()));
    }
    Ok(())
}

fn check_entry(entry: &PolicyEntry) -> Result<(), ConfigError> {
    let shadow_settings = entry.shadow.as_ref().and_then(|s| s.settings.as_ref());
    for settings in [entry.settings.as_ref(), shadow_settings].into_iter().flatten() {
        if !settings.is_object() && !settings.is_null() {
            return Err(ConfigError::SettingsNotAMap(settings.clone()));
        }
    }
    entry.capability_patterns()?;
    if entry.timeout() == Some(Duration::ZERO) {
        return Err(ConfigError::ZeroTimeout);
    }
    Ok(())
}

/// Resolves `file://` URLs and paths. Registry (`registry://`) and HTTP URLs are refused: modules
/// reach the server as files (a volume, an image layer), so a rollout never waits on a download.
pub fn module_path(reference: &str, base_dir: &Path) -> Result<PathBuf, ConfigError> {
    let path = match reference.split_once("://") {
        None => reference,
        Some(("file", path)) => path,
        Some((scheme, _)) => {
            return Err(ConfigError::UnsupportedScheme {
                reference: reference.to_owned(),
                scheme: scheme.to_owned(),
            })
        }
    };
    if path.is_empty() {
        return Err(ConfigError::NoPath(reference.to_owned()));
    }
    let path = Path::new(path);
    Ok(if path.is_absolute() { path.to_path_buf() } else { base_dir.join(path) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<PoliciesFile, ConfigError> {
        PoliciesFile::parse(text, PathBuf::from("/etc/evac"))
    }

    #[test]
    fn reads_kubewarden_entries_and_evac_additions() {
        let file = parse(
            r#"
pod-eviction:
  module: file:///policies/pod-eviction.wasm
  policyMode: monitor
  allowedToMutate: false
  contextAwareResources:
    - apiVersion: v1
      kind: Pod
  settings: {kubevirt: {namespace: kubevirt, name: kubevirt}}
  timeoutEvalSeconds: 2
  label: v1
  shadow:
    module: next.wasm
    label: v2
"#,
        )
        .unwrap();
        let entry = &file.policies["pod-eviction"];
        assert_eq!(entry.policy_mode, PolicyMode::Monitor);
        assert_eq!(entry.timeout(), Some(Duration::from_secs(2)));
        assert_eq!(entry.context_aware_resources.len(), 1);
        assert_eq!(file.module_path(&entry.module).unwrap(), PathBuf::from("/policies/pod-eviction.wasm"));
        let shadow = entry.shadow.as_ref().unwrap();
        assert_eq!(file.module_path(&shadow.module).unwrap(), PathBuf::from("/etc/evac/next.wasm"));
    }

    #[test]
    fn host_capabilities_and_message_as_kubewarden_reads_them() {
        let file = parse(
            "p: {module: a.wasm, hostCapabilities: [kubernetes/get_resource, 'oci/*'], message: ask the VM team}",
        )
        .unwrap();
        let entry = &file.policies["p"];
        assert_eq!(entry.host_capabilities, ["kubernetes/get_resource", "oci/*"]);
        assert_eq!(entry.message.as_deref(), Some("ask the VM team"));
        assert!(parse("p: {module: a.wasm}").unwrap().policies["p"].host_capabilities.is_empty());
        let reads = |text: &str| parse(text).unwrap().policies["p"].reads_refused();
        let kinds = "contextAwareResources: [{apiVersion: v1, kind: Pod}]";
        assert!(reads(&format!("p: {{module: a.wasm, {kinds}}}")).unwrap().contains("hostCapabilities"));
        assert!(reads(&format!("p: {{module: a.wasm, hostCapabilities: ['oci/*'], {kinds}}}")).is_some());
        assert_eq!(
            reads(&format!("p: {{module: a.wasm, hostCapabilities: [kubernetes/get_resource], {kinds}}}")),
            None
        );
        assert_eq!(reads("p: {module: a.wasm}"), None);
        let err =
            format!("{:#}", parse("p: {module: a.wasm, hostCapabilities: [kubernetes/foo]}").unwrap_err());
        assert!(
            err.contains(r#"policy p: invalid hostCapabilities pattern: invalid pattern "kubernetes/foo": unknown segment "foo""#),
            "{err}"
        );
    }

    #[test]
    fn milliseconds_win_over_seconds() {
        let file = parse("p: {module: a.wasm, timeoutEvalSeconds: 3, timeoutEvalMilliseconds: 150}").unwrap();
        assert_eq!(file.policies["p"].timeout(), Some(Duration::from_millis(150)));
    }

    #[test]
    fn refuses_what_it_cannot_serve_clearly() {
        let err = |text: &str| format!("{:#}", parse(text).unwrap_err());
        assert!(err("").contains("the file is empty"));
        assert!(err("- a").contains("expected a map of policy ids"));
        assert!(err("p: {module: a.wasm, polcyMode: protect}").contains("unknown field `polcyMode`"));
        assert!(err("p: {module: a.wasm, policyMode: enforce}").contains("unknown variant `enforce`"));
        assert!(err("p: {settings: {}}").contains("missing field `module`"));
        assert!(err("p: {module: a.wasm, settings: [1]}").contains("settings must be a map"));
        assert!(err("p: {module: a.wasm, timeoutEvalMilliseconds: 0}").contains("more than zero"));
        assert!(err("a/b: {module: a.wasm}").contains("invalid policy id"));
        assert!(
            err("g: {policies: {}, expression: x, message: m}").contains("policy groups are not supported")
        );
        let file = parse("p: {module: registry://ghcr.io/x/y:v1}").unwrap();
        let module = &file.policies["p"].module;
        assert!(format!("{:#}", file.module_path(module).unwrap_err()).contains("registry:// modules"));
    }
}
