//! Leader election on a Lease ([`evac_cluster::kube::LeaderElector`]) against the simulated API
//! server in-process: one holder at a time, a follower's own wait before it takes an expired
//! Lease, optimistic concurrency between candidates that both see it free, and a holder that
//! gives up when it cannot renew.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use evac_cluster::kube::{KubeCluster, LeaderElector, LeaseSettings};
use serde_json::Value;

/// The simulated API on loopback; while `hung` is set, every request hangs unanswered.
struct Api {
    cluster: KubeCluster,
    store: Arc<evac_sim::Store>,
    hung: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

async fn api() -> Api {
    let store = Arc::new(evac_sim::Store::new(Arc::new(evac_sim::SimClock::default()), 1000));
    let hung = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&hung);
    let router = evac_sim::api::router(Arc::clone(&store)).layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let hung = flag.load(Ordering::SeqCst);
            async move {
                if hung {
                    std::future::pending::<()>().await;
                }
                next.run(request).await
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, evac_sim::kubeconfig(&url)).unwrap();
    let cluster = KubeCluster::connect(Some(&kubeconfig), &[]).await.unwrap();
    Api { cluster, store, hung, _dir: dir }
}

impl Api {
    fn candidate(&self, identity: &str, lease: f64, renew: f64, retry: f64) -> LeaderElector {
        let settings = LeaseSettings {
            lease_duration: Duration::from_secs_f64(lease),
            renew_deadline: Duration::from_secs_f64(renew),
            retry_period: Duration::from_secs_f64(retry),
            ..LeaseSettings::new("default", "evac-control", identity)
        };
        self.cluster.leader_elector(settings).unwrap()
    }

    fn lease(&self) -> Value {
        let kind = evac_cluster::Kind::new("coordination.k8s.io/v1", "Lease");
        let lease = self.store.memory().get(&kind, "default", "evac-control").expect("the lease");
        Value::clone(&lease)
    }
}

#[tokio::test]
async fn one_holder_at_a_time_and_a_release_frees_the_lease_at_once() {
    let api = api().await;
    let (mut a, mut b) = (api.candidate("a", 15.0, 10.0, 2.0), api.candidate("b", 15.0, 10.0, 2.0));
    assert!(a.try_acquire_or_renew().await.unwrap(), "a creates the lease");
    assert!(!b.try_acquire_or_renew().await.unwrap(), "b follows");
    assert_eq!(b.holder(), "a");
    assert!(a.try_acquire_or_renew().await.unwrap(), "a renews");
    let lease = api.lease();
    assert_eq!(lease["spec"]["holderIdentity"], "a");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(lease["spec"]["leaseTransitions"], 0);

    a.release().await;
    assert_eq!(api.lease()["spec"].get("holderIdentity"), None, "released: {}", api.lease());
    assert!(b.try_acquire_or_renew().await.unwrap(), "b takes a released lease at once");
    assert!(!a.try_acquire_or_renew().await.unwrap(), "a follows now");
    assert_eq!(api.lease()["spec"]["leaseTransitions"], 1);
}

/// A follower measures a holder's silence on its own clock, from when it saw the Lease last
/// change: it takes the Lease one lease duration after that, not before.
#[tokio::test]
async fn a_follower_takes_a_silent_lease_after_one_duration_of_its_own() {
    let api = api().await;
    let (mut a, mut b) = (api.candidate("a", 2.0, 1.0, 0.2), api.candidate("b", 2.0, 1.0, 0.2));
    assert!(a.try_acquire_or_renew().await.unwrap());
    assert!(!b.try_acquire_or_renew().await.unwrap(), "held and fresh");
    // b's clock starts when its read returned: no earlier than now.
    let seen = Instant::now();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(!b.try_acquire_or_renew().await.unwrap(), "b has seen it unchanged for less than 2 s");
    tokio::time::sleep(Duration::from_secs(2).saturating_sub(seen.elapsed()) + Duration::from_millis(100))
        .await;
    assert!(b.try_acquire_or_renew().await.unwrap(), "silent for a lease duration: b takes it");
    assert_eq!(api.lease()["spec"]["holderIdentity"], "b");
    assert!(!a.try_acquire_or_renew().await.unwrap(), "a sees b hold it");
}

/// Candidates that all see the Lease free write it with the version they read: the API server
/// lets one write, and the others get a conflict. Never two holders.
#[tokio::test]
async fn candidates_that_see_the_lease_free_at_once_get_one_holder() {
    let api = api().await;
    let mut candidates: Vec<LeaderElector> =
        ["a", "b", "c"].iter().map(|id| api.candidate(id, 15.0, 10.0, 2.0)).collect();
    for round in 0..20 {
        let [a, b, c] = &mut candidates[..] else { unreachable!() };
        let (x, y, z) =
            tokio::join!(a.try_acquire_or_renew(), b.try_acquire_or_renew(), c.try_acquire_or_renew());
        let won: Vec<bool> = [x, y, z].into_iter().map(Result::unwrap).collect();
        assert_eq!(won.iter().filter(|w| **w).count(), 1, "round {round}: {won:?}");
        let winner = won.iter().position(|w| *w).unwrap();
        candidates[winner].release().await;
    }
}

/// A holder whose API server stops answering keeps acting until its renew deadline, no longer:
/// it has given up before any follower could take the Lease (one lease duration).
#[tokio::test]
async fn a_holder_that_cannot_renew_gives_up_at_its_renew_deadline() {
    let api = api().await;
    let mut a = api.candidate("a", 3.0, 1.0, 0.2);
    assert!(a.try_acquire_or_renew().await.unwrap());
    api.hung.store(true, Ordering::SeqCst);
    let hung = Instant::now();
    let why = a.renew_until_lost().await;
    let gave_up = hung.elapsed();
    assert!(why.contains("lost the lease default/evac-control"), "{why}");
    assert!(gave_up >= Duration::from_millis(800), "gave up after {gave_up:?}, before its deadline");
    assert!(gave_up < Duration::from_secs(3), "still acting after {gave_up:?}: a follower may lead by then");
}

#[test]
fn settings_follow_client_gos_rules() {
    let settings = |lease: u64, renew: f64, retry: f64| LeaseSettings {
        lease_duration: Duration::from_secs(lease),
        renew_deadline: Duration::from_secs_f64(renew),
        retry_period: Duration::from_secs_f64(retry),
        ..LeaseSettings::new("default", "evac-control", "a")
    };
    assert!(settings(15, 10.0, 2.0).validate().is_ok());
    let error = |s: LeaseSettings| s.validate().unwrap_err().to_string();
    assert!(error(settings(10, 10.0, 2.0)).contains("must be longer than the renew deadline"));
    assert!(error(settings(15, 2.0, 2.0)).contains("must be longer than 1.2 x the retry period"));
    assert!(error(settings(15, 10.0, 0.0)).contains("retry period must be positive"));
    let nobody = LeaseSettings { identity: String::new(), ..settings(15, 10.0, 2.0) };
    assert!(error(nobody).contains("identity is empty"));
}
