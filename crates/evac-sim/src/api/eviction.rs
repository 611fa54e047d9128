//! `POST .../pods/<name>/eviction` with the API server's semantics: the validating webhooks
//! registered for `pods/eviction` are called over HTTPS first (a denial comes back as
//! `admission webhook "<name>" denied the request: <message>` with the webhook's code), then the
//! pod's PodDisruptionBudget is checked (429 `Cannot evict pod as it would violate the pod's
//! disruption budget.`), then the pod is deleted (201).

use std::time::Duration;

use serde_json::{json, Value};

use super::virt_api;
use crate::actors::Evictor;
use crate::store::{Kind, Patch, Store};
use crate::ApiError;
use evac_cluster::LabelSelector;

const PDB_MESSAGE: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// Evicts a pod; the answer is the `Status` a successful eviction returns.
pub async fn evict(
    store: &Store,
    namespace: &str,
    name: &str,
    mut eviction: Value,
    dry_run: bool,
) -> Result<Value, ApiError> {
    // Clients may leave the type out (kube-rs does); the API server defaults it.
    match eviction.get("kind").and_then(Value::as_str) {
        None => {
            eviction["kind"] = json!("Eviction");
            eviction["apiVersion"] = json!("policy/v1");
        }
        Some("Eviction") => {}
        Some(other) => return Err(ApiError::bad_request(format!("expected an Eviction, got a {other}"))),
    }
    if eviction.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| n != name) {
        return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
    }
    let dry_run =
        dry_run || eviction.pointer("/deleteOptions/dryRun/0").and_then(Value::as_str) == Some("All");
    let pods = Kind::new("v1", "Pod");
    let pod = store.get(&pods, namespace, name)?;

    // Every matching webhook is called (each may act: KubeVirt's and evac's both mark the VMI),
    // and the first refusal answers, as kube-apiserver's validating dispatcher calls them all in
    // parallel and returns the first error (`k8s.io/apiserver/pkg/admission/plugin/webhook/
    // validating/dispatcher.go`, `Dispatch`: "just return the first one"); here, in the order of
    // the configurations' names.
    let mut refusal = None;
    for webhook in matching_webhooks(store, name) {
        if let Err(e) = admit(store, &webhook, namespace, name, &eviction, dry_run).await {
            refusal.get_or_insert(e);
        }
    }
    if let Some(refusal) = refusal {
        return Err(refusal);
    }
    check_disruption_budget(store, namespace, &pod, dry_run)?;
    let grace = eviction.pointer("/deleteOptions/gracePeriodSeconds").and_then(Value::as_u64);
    store.delete_gracefully(&pods, namespace, name, grace, dry_run)?;
    Ok(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}))
}

/// A webhook of a ValidatingWebhookConfiguration, with the configuration's name for messages.
struct Webhook {
    name: String,
    url: Option<String>,
    /// `clientConfig.service`: namespace, name.
    service: Option<(String, String)>,
    // How a webhook by URL is called: read only where the simulator has an HTTP client.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    ca_bundle: Option<String>,
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    timeout: Duration,
    ignore_failures: bool,
}

/// The webhooks whose rules cover `pods/eviction` CREATE and whose match conditions hold.
fn matching_webhooks(store: &Store, pod: &str) -> Vec<Webhook> {
    let kind = Kind::new("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration");
    let (configurations, _) = store.list(&kind, None, None, None);
    let mut webhooks = Vec::new();
    for configuration in configurations {
        for webhook in configuration.get("webhooks").and_then(Value::as_array).into_iter().flatten() {
            let rules = webhook.get("rules").and_then(Value::as_array).cloned().unwrap_or_default();
            if !rules.iter().any(covers_pod_eviction) || !match_conditions_hold(webhook, pod) {
                continue;
            }
            let text = |pointer: &str| webhook.pointer(pointer).and_then(Value::as_str).map(str::to_owned);
            webhooks.push(Webhook {
                name: text("/name").unwrap_or_default(),
                url: text("/clientConfig/url"),
                service: text("/clientConfig/service/namespace").zip(text("/clientConfig/service/name")),
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

fn covers_pod_eviction(rule: &Value) -> bool {
    let has = |field: &str, wanted: &[&str]| {
        rule.get(field)
            .and_then(Value::as_array)
            .is_some_and(|values| values.iter().filter_map(Value::as_str).any(|v| wanted.contains(&v)))
    };
    has("apiGroups", &["", "*"])
        && has("apiVersions", &["v1", "*"])
        && has("operations", &["CREATE", "*"])
        && has("resources", &["pods/eviction", "pods/*", "*/*", "*/eviction"])
}

/// The match conditions the simulator evaluates: disjunctions of `request.name.startsWith('…')`,
/// the form evac's own webhook uses. A condition in any other form is taken to hold, so the
/// webhook is called (the cautious side: a webhook is never skipped by mistake).
fn match_conditions_hold(webhook: &Value, name: &str) -> bool {
    webhook.get("matchConditions").and_then(Value::as_array).into_iter().flatten().all(|condition| {
        let expression = condition.get("expression").and_then(Value::as_str).unwrap_or_default();
        let prefixes: Option<Vec<&str>> = expression
            .split("||")
            .map(|term| {
                let term = term.trim();
                let inner = term.strip_prefix("request.name.startsWith(")?.strip_suffix(')')?.trim();
                inner
                    .strip_prefix('\'')?
                    .strip_suffix('\'')
                    .or_else(|| inner.strip_prefix('"')?.strip_suffix('"'))
            })
            .collect();
        match prefixes {
            Some(prefixes) => prefixes.iter().any(|p| name.starts_with(p)),
            None => true,
        }
    })
}

/// A service of the simulated cluster that answers admission webhooks in process (evac's policy
/// server in `evac demo`), registered with [`Store::register_service`].
pub trait WebhookService: Send + Sync {
    /// Answers an AdmissionReview with an AdmissionReview.
    fn review<'a>(
        &'a self,
        store: &'a Store,
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

/// Calls one webhook; a denial or (unless its failure policy is Ignore) a failed call refuses
/// the eviction, as the API server does.
async fn admit(
    store: &Store,
    webhook: &Webhook,
    namespace: &str,
    name: &str,
    eviction: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uuid_like(),
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "requestKind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "eviction",
            "name": name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
            "object": eviction,
            "oldObject": null,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }
    });
    let in_process = webhook.service.as_ref().and_then(|(ns, name)| store.service(ns, name));
    let virt_api =
        webhook.service.as_ref().is_some_and(|(ns, name)| (ns.as_str(), name.as_str()) == virt_api::SERVICE);
    let answer = match in_process {
        Some(service) => service.review(store, &review).await,
        None if virt_api => virt_api::review(store, &review).await,
        None => call(webhook, &review).await.map_err(WebhookError),
    };
    let answer = match answer {
        Ok(answer) => answer,
        Err(e) if webhook.ignore_failures => {
            tracing::warn!(webhook = %webhook.name, "ignoring a failed webhook call: {e}");
            return Ok(());
        }
        Err(e) => {
            return Err(ApiError {
                code: 500,
                reason: "InternalError",
                message: format!("Internal error occurred: failed calling webhook \"{}\": {e}", webhook.name),
            })
        }
    };
    let response = &answer["response"];
    if response["allowed"].as_bool() == Some(true) {
        return Ok(());
    }
    let denied_by = format!("admission webhook \"{}\" denied the request", webhook.name);
    let message = response.pointer("/status/message").and_then(Value::as_str).filter(|m| !m.is_empty());
    let reason = response.pointer("/status/reason").and_then(Value::as_str).filter(|r| !r.is_empty());
    let code = response.pointer("/status/code").and_then(Value::as_u64).filter(|c| *c >= 400).unwrap_or(400);
    Err(ApiError {
        code: u16::try_from(code).unwrap_or(400),
        reason: if code == 429 { "TooManyRequests" } else { "" },
        message: match (message, reason) {
            (Some(message), _) => format!("{denied_by}: {message}"),
            (None, Some(reason)) => format!("{denied_by}: {reason}"),
            (None, None) => format!("{denied_by} without explanation"),
        },
    })
}

/// Calls a webhook by its URL over HTTPS, trusting its `caBundle` only.
#[cfg(feature = "http")]
async fn call(webhook: &Webhook, review: &Value) -> Result<Value, String> {
    use base64::Engine as _;
    let url = webhook
        .url
        .as_deref()
        .ok_or("the simulator calls webhooks by clientConfig.url (or KubeVirt's virt-api service), which this one lacks")?;
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
async fn call(webhook: &Webhook, _review: &Value) -> Result<Value, String> {
    let url = webhook.url.as_deref().unwrap_or("(no url)");
    Err(format!("Post \"{url}\": this simulator was built without HTTP (feature `http`) and calls in-process webhooks only"))
}

/// The PodDisruptionBudget check: a running pod covered by a budget with no disruption left is
/// refused with 429; an allowed eviction uses one up (until the budget's controller recomputes).
fn check_disruption_budget(
    store: &Store,
    namespace: &str,
    pod: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
    if matches!(phase, "Succeeded" | "Failed" | "Pending") {
        return Ok(());
    }
    let budgets = Kind::new("policy/v1", "PodDisruptionBudget");
    let (all, _) = store.list(&budgets, Some(namespace), None, None);
    let covering: Vec<_> = all.iter().filter(|pdb| selects(pdb, pod)).collect();
    let pdb = match covering.as_slice() {
        [] => return Ok(()),
        [pdb] => pdb,
        _ => {
            return Err(ApiError {
                code: 500,
                reason: "InternalError",
                message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
            })
        }
    };
    let allowed = pdb.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0);
    if allowed < 1 {
        return Err(ApiError { code: 429, reason: "TooManyRequests", message: PDB_MESSAGE.into() });
    }
    let name = pdb.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let patch = Patch::Merge(json!({"status": {"disruptionsAllowed": allowed - 1}}));
    store.patch(&budgets, namespace, name, &patch, dry_run).map(|_| ())
}

/// Whether a budget's `spec.selector` selects the pod. A budget without a valid selector selects
/// nothing.
fn selects(pdb: &Value, pod: &Value) -> bool {
    pdb.pointer("/spec/selector")
        .map(LabelSelector::from_object)
        .is_some_and(|selector| selector.is_ok_and(|selector| selector.matches_object(pod)))
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("5e1c0000-0000-4000-8000-{:012x}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Evictions for actors (`kubectl drain`, the descheduler): the API's `pods/eviction` path, called
/// synchronously from the simulation's thread, with a record of every request and its answer.
pub struct ApiEvictor {
    /// Runs the webhook calls (HTTPS with the `http` feature).
    #[cfg(feature = "http")]
    runtime: tokio::runtime::Runtime,
    record: std::sync::Mutex<Vec<EvictionRecord>>,
}

/// One eviction request, as the simulation's report counts them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EvictionRecord {
    /// Simulated time, in milliseconds since the start.
    pub at_ms: u64,
    /// Who asked: the actor's requester name, e.g. `kubectl-drain`, `descheduler`.
    pub requester: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The VMI a launcher pod runs ("" for other pods).
    pub vmi: String,
    /// 201, or the refusal's code.
    pub code: u16,
    /// The refusal's message ("" for a 201).
    pub message: String,
}

impl ApiEvictor {
    /// Must be used outside an async runtime (with the `http` feature it runs its own, for the
    /// webhook calls).
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            #[cfg(feature = "http")]
            runtime: tokio::runtime::Builder::new_current_thread().enable_all().build()?,
            record: Default::default(),
        })
    }

    /// Drives one eviction to its answer on the simulation's thread.
    #[cfg(feature = "http")]
    fn complete(
        &self,
        eviction: impl std::future::Future<Output = Result<Value, ApiError>>,
    ) -> Result<Value, ApiError> {
        self.runtime.block_on(eviction)
    }

    /// Without `http` every webhook is served in process, over the store, and answers at once: an
    /// eviction is complete at its first poll (no runtime needed, none available in a browser).
    #[cfg(not(feature = "http"))]
    fn complete(
        &self,
        eviction: impl std::future::Future<Output = Result<Value, ApiError>>,
    ) -> Result<Value, ApiError> {
        futures::FutureExt::now_or_never(Box::pin(eviction)).unwrap_or_else(|| {
            Err(ApiError {
                code: 500,
                reason: "InternalError",
                message: "an in-process webhook did not answer at once".into(),
            })
        })
    }

    /// Every request so far, in the order made.
    pub fn record(&self) -> Vec<EvictionRecord> {
        self.record_from(0)
    }

    /// The records from index `from` on.
    pub fn record_from(&self, from: usize) -> Vec<EvictionRecord> {
        let record = self.record.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        record.get(from..).map(<[EvictionRecord]>::to_vec).unwrap_or_default()
    }
}

impl Evictor for ApiEvictor {
    fn evict(&self, store: &Store, namespace: &str, pod: &str, requester: &str) -> Result<(), ApiError> {
        let vmi = store
            .get(&Kind::new("v1", "Pod"), namespace, pod)
            .ok()
            .and_then(|p| {
                p.pointer("/metadata/annotations/kubevirt.io~1domain")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        let mut eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                                  "metadata": {"name": pod, "namespace": namespace}});
        // The descheduler says who it is, as KubeVirt's descheduler contract reads it.
        if requester == "descheduler" {
            eviction["metadata"]["annotations"] = json!({"requested-by": "sigs.k8s.io/descheduler"});
        }
        let result = self.complete(evict(store, namespace, pod, eviction, false));
        let (code, message) = match &result {
            Ok(_) => (201, String::new()),
            Err(e) => (e.code, e.message.clone()),
        };
        let at_ms = u64::try_from(store.clock().elapsed().as_millis()).unwrap_or(u64::MAX);
        self.record.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(EvictionRecord {
            at_ms,
            requester: requester.to_owned(),
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
            vmi,
            code,
            message,
        });
        result.map(|_| ())
    }
}
