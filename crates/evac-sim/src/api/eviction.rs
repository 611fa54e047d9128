//! `POST .../pods/<name>/eviction` with the API server's semantics: the validating webhooks
//! registered for `pods/eviction` are called over HTTPS first (a denial comes back as
//! `admission webhook "<name>" denied the request: <message>` with the webhook's code), then the
//! pod's PodDisruptionBudget is checked (429 `Cannot evict pod as it would violate the pod's
//! disruption budget.`), then the pod is deleted (201).

use serde_json::{json, Value};

use super::webhooks::{self, Admission, Request, Webhook};
use crate::actors::Evictor;
use crate::store::{Kind, Store};
use crate::ApiError;
use evac_cluster::LabelSelector;
use evac_core::model::{eviction_admission_request, UserInfo};

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
    let request = Request { group: "", resource: "pods/eviction", operation: "CREATE", name };
    for webhook in webhooks::matching(store, Admission::Validating, &request) {
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

/// Calls one validating webhook with the eviction; a denial or (unless its failure policy is
/// Ignore) a failed call refuses the eviction, as the API server does.
async fn admit(
    store: &Store,
    webhook: &Webhook,
    namespace: &str,
    name: &str,
    eviction: &Value,
    dry_run: bool,
) -> Result<(), ApiError> {
    let user = UserInfo { username: "system:admin", groups: &["system:masters", "system:authenticated"] };
    let request =
        eviction_admission_request(&webhooks::uid(), namespace, name, user, eviction.clone(), dry_run);
    let review = webhooks::review(request);
    match webhooks::call(store, webhook, &review).await? {
        Some(response) => webhooks::denial(webhook, &response).map_or(Ok(()), Err),
        None => Ok(()),
    }
}

/// The PodDisruptionBudget check (`pkg/registry/core/pod/storage/eviction.go`, `Create`): a pod
/// that is finished, pending or already being deleted goes without one (`canIgnorePDB`); more than
/// one budget covering the pod is a 500; one with no disruption left refuses with 429
/// (`checkAndDecrement`). The budget's status is what the disruption controller
/// (`pkg/controller/disruption/disruption.go`, `trySync`) would compute at that moment: an integer
/// `minAvailable` is the desired healthy count, healthy being the covered pods that run and are
/// not being deleted (`countHealthyPods`); a `maxUnavailable` or a percentage needs the pods'
/// controller's scale, which a VMI (a launcher pod's controller) does not have, so the controller
/// fails safe to no disruption allowed (`failSafe`).
fn check_disruption_budget(
    store: &Store,
    namespace: &str,
    pod: &Value,
    _dry_run: bool,
) -> Result<(), ApiError> {
    let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
    if matches!(phase, "Succeeded" | "Failed" | "Pending")
        || pod.pointer("/metadata/deletionTimestamp").is_some()
    {
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
    let (desired, healthy) = budget_status(store, namespace, pdb);
    // Kubernetes puts "The disruption budget <name> needs <n> healthy pods and has <m> currently"
    // in the status's causes; the message is what kubectl prints.
    if healthy <= desired {
        return Err(ApiError { code: 429, reason: "TooManyRequests", message: PDB_MESSAGE.into() });
    }
    Ok(())
}

/// (desired healthy, currently healthy) of a budget, as the disruption controller computes them
/// for pods whose controller has no scale: `i64::MAX` desired when only a scale could say.
fn budget_status(store: &Store, namespace: &str, pdb: &Value) -> (i64, i64) {
    let (pods, _) = store.list(&Kind::new("v1", "Pod"), Some(namespace), None, None);
    let healthy = pods
        .iter()
        .filter(|p| selects(pdb, p))
        .filter(|p| p.pointer("/metadata/deletionTimestamp").is_none())
        .filter(|p| p.pointer("/status/phase").and_then(Value::as_str) == Some("Running"))
        .count() as i64;
    let desired = match pdb.pointer("/spec/minAvailable") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(i64::MAX),
        _ => i64::MAX,
    };
    (desired, healthy)
}

/// Whether a budget's `spec.selector` selects the pod. A budget without a valid selector selects
/// nothing.
fn selects(pdb: &Value, pod: &Value) -> bool {
    pdb.pointer("/spec/selector")
        .map(LabelSelector::from_object)
        .is_some_and(|selector| selector.is_ok_and(|selector| selector.matches_object(pod)))
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
