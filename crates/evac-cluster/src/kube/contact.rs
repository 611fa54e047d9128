//! When the API server last answered: a watch cache can only be as current as its connection, and
//! a hung API server (accepting connections, answering nothing) leaves every watch open and silent,
//! with no error for minutes. A small request on a timer tells the two apart. (An API server that
//! answers but cannot reach etcd fails its watches instead, which the caches count themselves.)

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::Client;
use tokio::sync::Notify;

/// How often the API server is asked for `/livez`: readable by every client (RBAC's
/// `system:public-info-viewer`), and in API Priority and Fairness' exempt `probes` flow schema,
/// so a busy API server does not shed it before real requests.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// How long one probe may take before it counts as unanswered.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The time of the API server's last answer, and a signal for its return after a silence.
pub(super) struct Contact {
    last: Mutex<Instant>,
    /// Woken when a probe is answered after one was not.
    back: Notify,
}

impl Contact {
    /// Connecting counts as an answer: the caller has just completed discovery.
    pub(super) fn new() -> Self {
        Self { last: Mutex::new(Instant::now()), back: Notify::new() }
    }

    /// How long since the API server last answered.
    pub(super) fn silent_for(&self) -> Duration {
        self.last.lock().unwrap_or_else(PoisonError::into_inner).elapsed()
    }

    /// Resolves the next time the API server answers after a probe it did not answer: a watch
    /// waiting to retry then retries at once.
    pub(super) async fn back(&self) {
        self.back.notified().await;
    }

    fn answered(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    /// Probes until the task is aborted.
    pub(super) async fn probe(self: std::sync::Arc<Self>, client: Client, server: String) {
        let mut unanswered = false;
        loop {
            tokio::time::sleep(PROBE_INTERVAL).await;
            let request = http::Request::get("/livez").body(Vec::new()).expect("a valid request");
            match tokio::time::timeout(PROBE_TIMEOUT, client.request_text(request)).await {
                Ok(Ok(_)) => {
                    self.answered();
                    if std::mem::take(&mut unanswered) {
                        tracing::info!(%server, "the API server answers again");
                        self.back.notify_waiters();
                    }
                }
                Ok(Err(error)) => {
                    unanswered = true;
                    tracing::debug!(%server, %error, "the API server did not answer /livez");
                }
                Err(_) => {
                    unanswered = true;
                    tracing::debug!(%server, timeout = ?PROBE_TIMEOUT, "the API server did not answer /livez in time")
                }
            }
        }
    }
}
