//! Which `evac control` replica acts: the holder of a Lease ([`LeaderElector`]). Followers keep
//! their watch caches and modules warm and act only once they lead; a leader that cannot renew
//! stops (the process exits, and its Deployment starts it again as a follower), and one that is
//! told to stop releases the Lease first, so a follower takes over at its next try.

use std::time::Duration;

use evac_cluster::kube::LeaderElector;
use evac_evaluator::metrics::LeaderLabels;
use evac_evaluator::Metrics;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The Lease held, renewed in the background.
pub struct Leadership {
    /// Ends with why the Lease was lost, or with `None` once released.
    renewal: JoinHandle<Option<String>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Leadership {
    /// Waits until `elector` holds its Lease (counted in `evac_leader_election_master_status`),
    /// then renews it in the background.
    pub async fn acquire(mut elector: LeaderElector, metrics: &Metrics) -> Self {
        let gauge =
            metrics.leader.get_or_create(&LeaderLabels { name: elector.settings().name.clone() }).clone();
        gauge.set(0);
        elector.acquire().await;
        gauge.set(1);
        let (stop, stopped) = oneshot::channel();
        let renewal = tokio::spawn(async move {
            let lost = tokio::select! {
                why = elector.renew_until_lost() => Some(why),
                _ = stopped => {
                    elector.release().await;
                    None
                }
            };
            gauge.set(0);
            lost
        });
        Self { renewal, stop: Some(stop) }
    }

    /// Resolves when the Lease is lost, with why: from then on this process must not act.
    pub async fn lost(&mut self) -> String {
        match (&mut self.renewal).await {
            Ok(Some(why)) => why,
            Ok(None) => "the lease was released".to_owned(),
            Err(e) => format!("the lease renewal stopped: {e}"),
        }
    }

    /// Releases the Lease (waiting at most `timeout` for the API server).
    pub async fn release(mut self, timeout: Duration) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = tokio::time::timeout(timeout, &mut self.renewal).await;
    }
}
