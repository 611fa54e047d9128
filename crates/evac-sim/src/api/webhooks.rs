//! Admission webhooks as kube-apiserver calls them: the validating and mutating webhook
//! configurations whose rules cover a request and whose match conditions hold, each called with
//! an AdmissionReview (in process, for a service the simulator answers itself, or by URL over
//! HTTPS), a failed call judged by the webhook's `failurePolicy`, and a denial worded as the API
//! server words it (`apiserver/pkg/admission/plugin/webhook/errors/statuserror.go` `ToStatusErr`).

use std::time::Duration;

use serde_json::{json, Value};

use super::virt_api;
use crate::store::{Kind, Store};
use crate::ApiError;

/// A service of the simulated cluster that answers admission webhooks in process (evac's policy
/// server in `evac demo`), registered with [`Store::register_service`].
pub trait WebhookService: Send + Sync {
    /// Answers an AdmissionReview sent to `path` (the webhook's `clientConfig.service.path`)
    /// with an AdmissionReview.
    fn review<'a>(
        &'a self,
        store: &'a Store,
        path: &'a str,
        review: &'a Value,
    ) -> futures::future::BoxFuture<'a, Result<Value, WebhookError>>;
}

/// A webhook call that brought no answer: the API server reports it as `failed calling webhook`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WebhookError(pub String);

impl From<String> for WebhookError {
    fn from(why: String) -> Self {
        Self(why)
    }
}

/// Which webhook configurations a request goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// `MutatingWebhookConfiguration`s: called first, in turn, each seeing the object as the
    /// ones before changed it.
    Mutating,
    /// `ValidatingWebhookConfiguration`s.
    Validating,
}

impl Admission {
    fn kind(self) -> Kind {
        match self {
            Self::Mutating => Kind::new("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
            Self::Validating => {
                Kind::new("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration")
            }
        }
    }
}

/// What a request is, for the webhooks' rules: `resource` is `pods` or `pods/eviction`.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The API group (`""` for the core group).
    pub group: &'a str,
    /// The resource and subresource, e.g. `pods/eviction`.
    pub resource: &'a str,
    /// `CREATE`, ...
    pub operation: &'a str,
    /// The object's name (empty for a CREATE that generates it).
    pub name: &'a str,
}

/// A webhook of a configuration.
pub struct Webhook {
    /// Its name, as denials quote it.
    pub name: String,
    url: Option<String>,
    /// `clientConfig.service`: namespace, name and path.
    service: Option<(String, String, String)>,
    // How a webhook by URL is called: read only where the simulator has an HTTP client.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    ca_bundle: Option<String>,
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    timeout: Duration,
    ignore_failures: bool,
}

/// The webhooks of `admission` whose rules cover `request` and whose match conditions hold, in
/// the order of their configurations' names.
pub fn matching(store: &Store, admission: Admission, request: &Request<'_>) -> Vec<Webhook> {
    let (configurations, _) = store.list(&admission.kind(), None, None, None);
    let mut webhooks = Vec::new();
    for configuration in configurations {
        for webhook in configuration.get("webhooks").and_then(Value::as_array).into_iter().flatten() {
            let rules = webhook.get("rules").and_then(Value::as_array).cloned().unwrap_or_default();
            if !rules.iter().any(|rule| covers(rule, request))
                || !match_conditions_hold(webhook, request.name)
            {
                continue;
            }
            let text = |pointer: &str| webhook.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
            let service = text("/clientConfig/service/namespace")
                .zip(text("/clientConfig/service/name"))
                .map(|(namespace, name)| {
                    (namespace, name, text("/clientConfig/service/path").unwrap_or_default())
                });
            webhooks.push(Webhook {
                name: text("/name").unwrap_or_default(),
                url: text("/clientConfig/url"),
                service,
                ca_bundle: text("/clientConfig/caBundle"),
                timeout: Duration::from_secs(
                    webhook.get("timeoutSeconds").and_then(Value::as_u64).unwrap_or(10),
                ),
                ignore_failures: text("/failurePolicy").as_deref() == Some("Ignore"),
            });
        }
    }
    webhooks
}

/// Whether a rule covers the request (`apiGroups`, `apiVersions: v1`, `operations`, `resources`
/// with their wildcards).
fn covers(rule: &Value, request: &Request<'_>) -> bool {
    let has = |field: &str, wanted: &[&str]| {
        rule.get(field)
            .and_then(Value::as_array)
            .is_some_and(|values| values.iter().filter_map(Value::as_str).any(|v| wanted.contains(&v)))
    };
    let (resource, sub) = request.resource.split_once('/').unwrap_or((request.resource, ""));
    let resources: Vec<String> = if sub.is_empty() {
        vec![resource.to_owned(), "*".to_owned()]
    } else {
        vec![request.resource.to_owned(), format!("{resource}/*"), "*/*".to_owned(), format!("*/{sub}")]
    };
    let resources: Vec<&str> = resources.iter().map(String::as_str).collect();
    has("apiGroups", &[request.group, "*"])
        && has("apiVersions", &["v1", "*"])
        && has("operations", &[request.operation, "*"])
        && has("resources", &resources)
}

/// The match conditions the simulator evaluates: disjunctions of `request.name.startsWith('…')`
/// (evac's eviction webhook) or `object.metadata.name.startsWith("…")` (KubeVirt's: an Eviction's
/// name is its pod's). A condition in any other form is taken to hold, so the webhook is called
/// (the cautious side: a webhook is never skipped by mistake).
fn match_conditions_hold(webhook: &Value, name: &str) -> bool {
    webhook.get("matchConditions").and_then(Value::as_array).into_iter().flatten().all(|condition| {
        let expression = condition.get("expression").and_then(Value::as_str).unwrap_or_default();
        let prefixes: Option<Vec<&str>> = expression
            .split("||")
            .map(|term| {
                let term = term.trim();
                let call = term
                    .strip_prefix("request.name.startsWith(")
                    .or_else(|| term.strip_prefix("object.metadata.name.startsWith("))?;
                let inner = call.strip_suffix(')')?.trim();
                inner
                    .strip_prefix('\'')
                    .and_then(|quoted| quoted.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"')?.strip_suffix('"'))
            })
            .collect();
        match prefixes {
            Some(prefixes) => prefixes.iter().any(|p| name.starts_with(p)),
            None => true,
        }
    })
}

/// Calls one webhook with `review`: its `response`, or `None` for a failed call its failure
/// policy ignores; a failed call it does not ignore is the API server's 500.
pub async fn call(store: &Store, webhook: &Webhook, review: &Value) -> Result<Option<Value>, ApiError> {
    let in_process = webhook.service.as_ref().and_then(|(ns, name, _)| store.service(ns, name));
    let virt_api = webhook
        .service
        .as_ref()
        .is_some_and(|(ns, name, _)| (ns.as_str(), name.as_str()) == virt_api::SERVICE);
    let path = webhook.service.as_ref().map_or("", |(_, _, path)| path.as_str());
    let answer = match in_process {
        Some(service) => service.review(store, path, review).await,
        None if virt_api => virt_api::review(store, review).await,
        None => by_url(webhook, review).await.map_err(WebhookError),
    };
    match answer {
        Ok(answer) => Ok(Some(answer["response"].clone())),
        Err(e) if webhook.ignore_failures => {
            tracing::warn!(webhook = %webhook.name, "ignoring a failed webhook call: {e}");
            Ok(None)
        }
        Err(e) => Err(ApiError {
            code: 500,
            reason: "InternalError",
            message: format!("Internal error occurred: failed calling webhook \"{}\": {e}", webhook.name),
        }),
    }
}

/// A webhook's refusal, as the API server words it; `None` when the response allows.
pub fn denial(webhook: &Webhook, response: &Value) -> Option<ApiError> {
    if response["allowed"].as_bool() == Some(true) {
        return None;
    }
    let denied_by = format!("admission webhook \"{}\" denied the request", webhook.name);
    let message = response.pointer("/status/message").and_then(Value::as_str).filter(|m| !m.is_empty());
    let reason = response.pointer("/status/reason").and_then(Value::as_str).filter(|r| !r.is_empty());
    let code = response.pointer("/status/code").and_then(Value::as_u64).filter(|c| *c >= 400).unwrap_or(400);
    Some(ApiError {
        code: u16::try_from(code).unwrap_or(400),
        reason: if code == 429 { "TooManyRequests" } else { "" },
        message: match (message, reason) {
            (Some(message), _) => format!("{denied_by}: {message}"),
            (None, Some(reason)) => format!("{denied_by}: {reason}"),
            (None, None) => format!("{denied_by} without explanation"),
        },
    })
}

/// An AdmissionReview of an `admission.k8s.io/v1` request, as kube-apiserver sends it.
pub fn review(request: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// A request uid, unique in the process.
pub fn uid() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("5e1c0000-0000-4000-8000-{:012x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Calls a webhook by its URL over HTTPS, trusting its `caBundle` only.
#[cfg(feature = "http")]
async fn by_url(webhook: &Webhook, review: &Value) -> Result<Value, String> {
    use base64::Engine as _;
    let url = webhook
        .url
        .as_deref()
        .ok_or("the simulator calls webhooks by clientConfig.url (or a service it answers in process), which this one lacks")?;
    let mut client = reqwest::Client::builder().timeout(webhook.timeout).tls_built_in_root_certs(false);
    if let Some(bundle) = &webhook.ca_bundle {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(bundle)
            .map_err(|e| format!("invalid caBundle: {e}"))?;
        for cert in
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| format!("invalid caBundle: {e}"))?
        {
            client = client.add_root_certificate(cert);
        }
    }
    let client = client.build().map_err(|e| e.to_string())?;
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(review.to_string())
        .send()
        .await
        .map_err(|e| format!("Post \"{url}\": {e}"))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("the server responded with {status}: {}", String::from_utf8_lossy(&body).trim()));
    }
    serde_json::from_slice(&body).map_err(|e| format!("the response is not an AdmissionReview: {e}"))
}

/// Without an HTTP client (the simulator built without `http`, as in a browser), only webhooks
/// served in process answer; a webhook by URL fails as an unreachable one does.
#[cfg(not(feature = "http"))]
async fn by_url(webhook: &Webhook, _review: &Value) -> Result<Value, String> {
    let url = webhook.url.as_deref().unwrap_or("(no url)");
    Err(format!("Post \"{url}\": this simulator was built without HTTP (feature `http`) and calls in-process webhooks only"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::match_conditions_hold;

    /// evac's form and KubeVirt's, with either quote; a form the simulator does not read holds.
    #[test]
    fn match_conditions_on_the_name() {
        let webhook =
            |expression: &str| json!({"matchConditions": [{"name": "c", "expression": expression}]});
        let rows = [
            (
                "request.name.startsWith('virt-launcher-') || request.name.startsWith('hp-volume-')",
                "hp-volume-x",
                true,
            ),
            (
                "request.name.startsWith('virt-launcher-') || request.name.startsWith('hp-volume-')",
                "web-1",
                false,
            ),
            ("object.metadata.name.startsWith(\"virt-launcher\")", "virt-launcher-vm-x", true),
            ("object.metadata.name.startsWith(\"virt-launcher\")", "hp-volume-x", false),
            ("object.metadata.name.startsWith(\"hp-volume-\")", "hp-volume-x", true),
            ("has(object.metadata.labels)", "anything", true),
        ];
        for (expression, name, holds) in rows {
            assert_eq!(match_conditions_hold(&webhook(expression), name), holds, "{expression} on {name}");
        }
    }
}
