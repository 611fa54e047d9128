//! `evac hold`: the node-local hold endpoint. A DaemonSet's pod on every node (hostNetwork,
//! `127.0.0.1`) answers the `preStop` hooks `launcher-hold` gives launcher pods: each hook is a
//! long poll, `GET /hold/<namespace>/<vmi>/<container>`, answered when the hold should end, as the
//! `disruption-cause` policy decides ([`Holder`]): at once for a disruption evac does not take,
//! when the VM has left, when holding can no longer help, and at the latest when the pod's hold
//! window has passed. The kubelet takes any answer, or a broken connection, as the hook's end
//! (SIGTERM follows): the endpoint never holds blindly, and a restart of it ends its holds.
//!
//! It reads as virt-handler does, only its own node: its pods (`spec.nodeName`), the pods
//! nominated to it (preemptors), its VMIs (`kubevirt.io/nodeName`), its Node and NodeMetrics, and
//! the KubeVirt CR, each in a watch cache; it asks again at every change of them, and every few
//! seconds for time-bound ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use evac_cluster::kube::{KubeCluster, Watch};
use evac_cluster::{Kind, ListQuery, ObjectSource};
use evac_control::hold::{Holder, Verdict};
use evac_core::hold::{DEFAULT_WINDOW_SECONDS, HOLD_WINDOW_ANNOTATION};
use evac_core::kubevirt::{DOMAIN_ANNOTATION, LAUNCHER_SELECTOR, NODE_NAME_LABEL};
use evac_evaluator::metrics::HoldEndLabels;
use evac_evaluator::Metrics;
use serde_json::Value;

/// What `evac hold` watches on its node: what the hold decision reads there.
pub fn watches(node: &str) -> Vec<Watch> {
    let pod = Kind::new("v1", "Pod");
    vec![
        Watch::fields(pod.clone(), format!("spec.nodeName={node}")),
        Watch::fields(pod, format!("status.nominatedNodeName={node}")),
        Watch::labels(
            Kind::new("kubevirt.io/v1", "VirtualMachineInstance"),
            format!("{NODE_NAME_LABEL}={node}"),
        ),
        Watch::fields(Kind::new("v1", "Node"), format!("metadata.name={node}")),
        Watch::fields(Kind::new("metrics.k8s.io/v1beta1", "NodeMetrics"), format!("metadata.name={node}")),
        Watch::all(Kind::new("kubevirt.io/v1", "KubeVirt")),
    ]
}

/// The endpoint's state.
pub struct HoldServer {
    /// Asks the policy.
    pub holder: Holder,
    /// The node's objects.
    pub cluster: Arc<KubeCluster>,
    /// The node this endpoint runs on.
    pub node: String,
    /// How often a hold is asked about again without a change in the cluster (its time-bound
    /// ends: the window, the evacuation not taken up).
    pub recheck: Duration,
    /// The holds open now.
    pub holds: Holds,
}

/// The holds open now, for the gauges: when each began and its time-bound.
#[derive(Default)]
pub struct Holds {
    next: AtomicU64,
    open: Mutex<HashMap<u64, (Instant, Duration)>>,
}

/// The share of its time-bound after which a hold counts as near it.
const NEAR_BOUND: f64 = 0.8;

impl Holds {
    fn begin(&self, bound: Duration, metrics: Arc<Metrics>) -> OpenHold<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.open.lock().unwrap_or_else(PoisonError::into_inner).insert(id, (Instant::now(), bound));
        OpenHold { holds: self, id, metrics, ending: "dropped" }
    }

    /// Sets the gauges: holds open, and those that have used most of their time-bound.
    pub fn record(&self, metrics: &Metrics) {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let near = open
            .values()
            .filter(|(began, bound)| began.elapsed().as_secs_f64() >= bound.as_secs_f64() * NEAR_BOUND)
            .count();
        metrics.holds.set(open.len() as i64);
        metrics.holds_near_bound.set(near as i64);
    }
}

/// A hold open: counted as ended, by how, when dropped. A call the kubelet gives up (the grace
/// period ended) drops it without an ending: `dropped`.
struct OpenHold<'a> {
    holds: &'a Holds,
    id: u64,
    metrics: Arc<Metrics>,
    ending: &'static str,
}

impl Drop for OpenHold<'_> {
    fn drop(&mut self) {
        self.holds.open.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
        self.metrics.holds_ended.get_or_create(&HoldEndLabels { ending: self.ending }).inc();
    }
}

/// The hold route.
pub fn router(server: Arc<HoldServer>) -> Router {
    Router::new()
        .route("/hold/{namespace}/{vmi}/{container}", get(hold))
        .fallback(|| async {
            (StatusCode::NOT_FOUND, "not found: hooks call GET /hold/<namespace>/<vmi>/<container>\n")
        })
        .with_state(server)
}

use crate::server::probes::text;

fn now_seconds() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// A hook's call: held until the policy ends the hold. Dropped by the kubelet (the grace period
/// ended), the future is dropped with it.
async fn hold(
    State(server): State<Arc<HoldServer>>,
    Path((namespace, vmi, container)): Path<(String, String, String)>,
) -> Response {
    let path = evac_core::hold::hook_path(&namespace, &vmi, &container);
    if evac_core::hold::parse_hook_path(&path).is_none() {
        return text(StatusCode::BAD_REQUEST, format!("not a hook's path: {path}"));
    }
    let started = now_seconds();
    let began = Instant::now();
    let mut changes = server.cluster.subscribe();
    let mut held: Option<OpenHold<'_>> = None;
    let end = |held: &mut Option<OpenHold<'_>>, ending| {
        if let Some(hold) = held {
            hold.ending = ending;
        }
    };
    loop {
        let Some(pod) = server.launcher_pod(&namespace, &vmi) else {
            // Gone while held: the kubelet ended it (its grace period), not the hold.
            end(&mut held, "dropped");
            return text(
                StatusCode::OK,
                format!("no launcher pod of {namespace}/{vmi} runs on {}", server.node),
            );
        };
        // However the policy answers, no hold outlives its pod's window (and a little more).
        let window = pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(HOLD_WINDOW_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(|w| w.parse().ok())
            .unwrap_or(DEFAULT_WINDOW_SECONDS);
        if began.elapsed() > Duration::from_secs(window) + server.recheck {
            end(&mut held, "window");
            return text(StatusCode::OK, format!("the hold window of {window} s has passed"));
        }
        match server.holder.ask(&pod.to_string(), started, &container).await {
            Verdict::Release(why) => {
                if held.is_some() {
                    tracing::info!(pod = %pod_key(&pod), held_s = began.elapsed().as_secs(), "hold ended: {why}");
                }
                // The policy ends a hold at its window itself: that is the bound reached.
                let bound = began.elapsed() >= Duration::from_secs(window);
                end(&mut held, if bound { "window" } else { "released" });
                return text(StatusCode::OK, why);
            }
            Verdict::Hold(message) => {
                if held.is_none() {
                    tracing::info!(pod = %pod_key(&pod), "holding: {message}");
                    let metrics = Arc::clone(server.holder.pipeline().metrics());
                    held = Some(server.holds.begin(Duration::from_secs(window), metrics));
                }
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { tokio::time::sleep(server.recheck).await },
            () = tokio::time::sleep(server.recheck) => {}
        }
    }
}

fn pod_key(pod: &Value) -> String {
    let text = |pointer: &str| pod.pointer(pointer).and_then(Value::as_str).unwrap_or_default();
    format!("{}/{}", text("/metadata/namespace"), text("/metadata/name"))
}

impl HoldServer {
    /// The launcher pod of VMI `namespace/vmi` on this node that is not finished, as the watch
    /// cache has it.
    fn launcher_pod(&self, namespace: &str, vmi: &str) -> Option<Value> {
        let field = format!("spec.nodeName={}", self.node);
        let query = ListQuery {
            namespace: Some(namespace),
            label_selector: Some(LAUNCHER_SELECTOR),
            field_selector: Some(&field),
        };
        let list = self.cluster.list("v1", "Pod", &query).ok()?;
        let list: Value = serde_json::from_slice(&list).ok()?;
        list.get("items")?
            .as_array()?
            .iter()
            .find(|pod| {
                let domain = pod.pointer("/metadata/annotations").and_then(|a| a.get(DOMAIN_ANNOTATION));
                let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
                domain.and_then(Value::as_str) == Some(vmi) && !matches!(phase, "Succeeded" | "Failed")
            })
            .cloned()
    }
}
