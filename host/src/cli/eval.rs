use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::value::RawValue;

use super::read_input;
use evac_cluster::{MemoryStore, SystemClock};
use evac_runtime::capabilities::{CapabilityPatterns, KubernetesCapabilities};
use evac_runtime::kubewarden::{self, admission, metadata};
use evac_runtime::wapc::{EngineOptions, Policy, PolicyEngine};

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The policy module (.wasm).
    #[arg(long)]
    policy: PathBuf,
    /// An AdmissionReview (admission.k8s.io/v1) or a bare AdmissionRequest, as JSON; `-` for stdin.
    #[arg(long)]
    request: String,
    /// The policy settings: inline JSON (an object, or `null`), or a JSON/YAML file.
    #[arg(long)]
    settings: Option<String>,
    /// A v1 List (JSON or YAML) of the cluster objects the policy may read. Without it, every read
    /// is NotFound.
    #[arg(long)]
    context: Option<PathBuf>,
    /// Deadline of the evaluation, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Memory limit of the evaluation, in MiB.
    #[arg(long, default_value_t = 64)]
    memory_limit_mib: usize,
    /// The host capabilities the policy may call, as `hostCapabilities` patterns (`kubernetes/*`);
    /// all by default, as `kwctl run`; the flag without a value allows none.
    #[arg(long, num_args = 0.., default_values = ["*"])]
    allowed_host_capabilities: Vec<String>,
    /// Where compiled modules are cached, so the next run does not compile again: a directory
    /// only this user can write (created 0700; refused otherwise). Default:
    /// `$XDG_CACHE_HOME/evac` or `~/.cache/evac` when it can be used, else no cache.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
}

pub fn run(args: EvalArgs) -> Result<()> {
    let input = read_input(&args.request, "request")?;
    let request = admission::request_from_input(&input).context("invalid --request")?;
    let settings = load_settings(args.settings.as_deref())?;
    let context = match &args.context {
        Some(path) => MemoryStore::from_file(path)?,
        None => MemoryStore::new(Arc::new(SystemClock), 1),
    };

    let engine = PolicyEngine::new(EngineOptions {
        memory_limit: args.memory_limit_mib * 1024 * 1024,
        timeout: Duration::from_millis(args.timeout_ms),
        max_concurrent: 2,
        reuse_instances: true,
        cache_dir: args.cache_dir.clone().or_else(evac_runtime::wapc::usable_default_cache_dir),
        wall_clock: None,
    })?;
    let bytes = std::fs::read(&args.policy)
        .with_context(|| format!("cannot read policy module {}", args.policy.display()))?;
    let module = engine
        .compile(&bytes)
        .with_context(|| format!("cannot load policy module {}", args.policy.display()))?;
    // Like `kwctl run`: a module that declares its context-aware resources may read only those.
    let allowed = CapabilityPatterns::parse(&args.allowed_host_capabilities)
        .map_err(|e| anyhow::anyhow!("invalid --allowed-host-capabilities: {e}"))?;
    let mut capabilities = KubernetesCapabilities::new(Arc::new(context)).allowing(allowed);
    if let Some(metadata) = metadata::read(&bytes)? {
        capabilities = capabilities.granting(metadata.context_aware_resources);
    }
    let policy = Policy::new(module, Arc::new(capabilities));

    let verdict = kubewarden::validate_settings(&policy, &settings).context("validating the settings")?;
    if !verdict.valid {
        bail!("invalid settings: {}", verdict.message.unwrap_or_default());
    }
    let response = kubewarden::validate(&policy, &request, &settings).context("evaluating the request")?;
    println!("{}", serde_json::to_string(&Printed::from(response))?);
    Ok(())
}

/// The module's answer as `evac eval` prints it: one key style throughout (Kubernetes' camelCase,
/// as `kwctl run` prints an AdmissionResponse), where the waPC wire format has Kubewarden's
/// snake_case fields beside evac's camelCase effects; fields the answer leaves out are left out.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Printed {
    accepted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    warnings: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit_annotations: Option<std::collections::BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mutated_object: Option<serde_json::Value>,
    effects: Vec<evac_core::Effect>,
}

impl From<evac_core::PolicyResponse> for Printed {
    fn from(r: evac_core::PolicyResponse) -> Self {
        Self {
            accepted: r.accepted,
            message: r.message,
            code: r.code,
            warnings: r.warnings,
            audit_annotations: r.audit_annotations,
            mutated_object: r.mutated_object,
            effects: r.effects,
        }
    }
}

/// `--settings` as inline JSON, or a JSON or YAML file; `{}` without it.
fn load_settings(arg: Option<&str>) -> Result<Box<RawValue>> {
    let Some(arg) = arg else {
        return Ok(RawValue::from_string("{}".into())?);
    };
    let trimmed = arg.trim();
    // Inline JSON is an object, or `null` (no settings, as Kubewarden's `settings: null`).
    let value: serde_json::Value = if trimmed.starts_with('{') || trimmed == "null" {
        serde_json::from_str(arg).context("--settings is not valid JSON")?
    } else {
        let text =
            std::fs::read_to_string(arg).with_context(|| format!("cannot read the settings file {arg}"))?;
        serde_yaml::from_str(&text)
            .with_context(|| format!("the settings file {arg} is not valid JSON or YAML"))?
    };
    match value {
        // An empty settings file means no settings.
        serde_json::Value::Null => Ok(RawValue::from_string("{}".into())?),
        serde_json::Value::Object(_) => Ok(RawValue::from_string(serde_json::to_string(&value)?)?),
        _ => bail!("--settings must be a JSON or YAML object"),
    }
}
