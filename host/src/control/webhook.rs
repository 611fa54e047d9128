//! evac's policy server answering the simulated cluster's webhooks in process: the admission
//! path of `evac serve` (module evaluation, effects, metrics), without the HTTPS in between.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use crate::server::admission::{self, Context};
use crate::server::registry::Registry;
use crate::sim::api::eviction::WebhookService;
use crate::sim::store::Store;

/// The service a scenario's webhook names to reach evac: namespace, name.
pub const SERVICE: (&str, &str) = ("evac", "evac-policy-server");

/// Answers a webhook with one policy of a registry, as `evac serve` answers `/validate/<id>`.
pub struct PolicyWebhook {
    pub registry: Arc<Registry>,
    pub policy: String,
    pub context: Context,
}

impl WebhookService for PolicyWebhook {
    fn review<'a>(&'a self, _store: &'a Store, review: &'a Value) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
            let parsed = admission::parse_review(&body).map_err(|e| e.0)?;
            let served = self
                .registry
                .current()
                .get(&self.policy)
                .cloned()
                .ok_or_else(|| format!("no policy {} is served", self.policy))?;
            let answer = admission::answer(&self.context, served, parsed).await;
            serde_json::to_value(&answer).map_err(|e| e.to_string())
        })
    }
}
