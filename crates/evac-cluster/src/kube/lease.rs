//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection package
//! does it (k8s.io/client-go/tools/leaderelection/leaderelection.go: `tryAcquireOrRenew`,
//! `acquire`, `renew`, `release`; resourcelock/leaselock.go), so that of several `evac control`
//! replicas exactly one acts.
//!
//! - A candidate takes the Lease when nobody holds it, or when its record has not changed for
//!   the holder's `leaseDurationSeconds` *as this candidate observed it* (its own clock since it
//!   last saw the record change, never the holder's `renewTime`: clocks of two nodes may differ).
//! - Every write is an update of the object read, with its `resourceVersion`: of two candidates
//!   that saw the Lease expire, the API server lets one write and answers the other 409, so two
//!   never both hold it.
//! - The holder renews every retry period; when it has not renewed for the renew deadline
//!   (shorter than the lease duration) it has lost the Lease and must stop acting before anyone
//!   else may take it.
//! - A Lease that does not exist is created by the first candidate to try, held by it, as
//!   client-go's `tryAcquireOrRenew` does on NotFound (a create of an existing name is refused,
//!   409, so one candidate only). A Lease deleted while a leader holds it is therefore taken by
//!   whoever tries next, the leader included; if a follower is first, the leader sees another
//!   holder at its next renewal (one retry period later) and stops. Deleting a held Lease is a
//!   forced handover with up to one retry period of two leaders, as for every client-go
//!   controller: not something to do while a drain runs.
//! - A holder that stops releases the Lease (no holder, one-second duration), so a follower takes
//!   over at its next try instead of after a lease duration.

use std::time::{Duration, Instant};

use super::error::LeaseError;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::chrono::Utc;
use kube::api::{Api, PostParams};
use kube::Client;

/// Every call a candidate makes, for its RBAC Role (in the Lease's namespace only): it reads
/// the Lease, creates it when there is none, and writes it by update (never patch: the update
/// carries the version read).
pub const LEASE_ACCESS: [crate::Access; 3] = [
    crate::Access { verb: "get", group: "coordination.k8s.io", resource: "leases" },
    crate::Access { verb: "create", group: "coordination.k8s.io", resource: "leases" },
    crate::Access { verb: "update", group: "coordination.k8s.io", resource: "leases" },
];

/// client-go's `JitterFactor`: retries wait up to 20% longer, so candidates spread out.
const JITTER: f64 = 1.2;

/// Where and how to elect a leader (kube-controller-manager's `--leader-elect-*` flags).
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This candidate, unique among them (the holder's name in the Lease).
    pub identity: String,
    /// How long followers wait, from when they saw the Lease last change, before taking it.
    pub lease_duration: Duration,
    /// How long the holder keeps acting without a successful renewal.
    pub renew_deadline: Duration,
    /// Time between tries to take or renew the Lease.
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// client-go's defaults: 15 s, 10 s, 2 s.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// client-go's checks (`NewLeaderElector`): the holder must give up before followers may
    /// take over, and must have tried to renew more than once by then.
    pub fn validate(&self) -> Result<(), LeaseError> {
        let refuse = |why: String| Err(LeaseError::Settings(why));
        if self.identity.is_empty() {
            return refuse("the leader election identity is empty".into());
        }
        if self.retry_period.is_zero() {
            return refuse("the leader election retry period must be positive".into());
        }
        if self.lease_duration <= self.renew_deadline {
            return refuse(format!(
                "the lease duration ({:?}) must be longer than the renew deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.renew_deadline.as_secs_f64() <= JITTER * self.retry_period.as_secs_f64() {
            return refuse(format!(
                "the renew deadline ({:?}) must be longer than {JITTER} x the retry period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        if self.lease_duration.as_secs() < 1 || self.lease_duration.subsec_nanos() != 0 {
            return refuse(format!(
                "the lease duration is whole seconds, at least 1 (leaseDurationSeconds), got {:?}",
                self.lease_duration
            ));
        }
        Ok(())
    }

    /// `<namespace>/<name>`, for messages.
    pub fn lease(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The Lease record as last seen, and when this candidate saw it change.
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// One candidate for a Lease.
pub struct LeaderElector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Option<Observed>,
    /// When this candidate last took or renewed the Lease.
    renewed: Option<Instant>,
}

impl LeaderElector {
    /// A candidate with these settings, checked.
    pub fn new(client: Client, settings: LeaseSettings) -> Result<Self, LeaseError> {
        settings.validate()?;
        let api = Api::namespaced(client, &settings.namespace);
        Ok(Self { api, settings, observed: None, renewed: None })
    }

    /// The settings.
    pub fn settings(&self) -> &LeaseSettings {
        &self.settings
    }

    /// Tries every retry period (with jitter) until this candidate holds the Lease.
    pub async fn acquire(&mut self) {
        let mut logged_holder = String::new();
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.settings.lease(), identity = %self.settings.identity, "became the leader");
                    return;
                }
                Ok(false) => {
                    let holder = self.holder();
                    if holder != logged_holder {
                        tracing::info!(lease = %self.settings.lease(), %holder, "following the leader");
                        logged_holder = holder;
                    }
                }
                Err(e) => tracing::warn!(lease = %self.settings.lease(), "cannot take the lease: {e:#}"),
            }
            tokio::time::sleep(jittered(self.settings.retry_period)).await;
        }
    }

    /// Renews the Lease every retry period; returns when it could not for the renew deadline
    /// (counted from when the last successful renewal was sent), or at once when another holds
    /// it: from then on this candidate must not act as the leader. As client-go's renew loop, it
    /// never runs past the deadline: sleeps and tries are cut at it.
    pub async fn renew_until_lost(&mut self) -> String {
        loop {
            let deadline = self.renewed.unwrap_or_else(Instant::now) + self.settings.renew_deadline;
            let lost = |elector: &Self, why: &str| {
                format!(
                    "lost the lease {}: not renewed for {:?} ({why})",
                    elector.settings.lease(),
                    elector.settings.renew_deadline
                )
            };
            let pause = self.settings.retry_period.min(deadline.saturating_duration_since(Instant::now()));
            tokio::time::sleep(pause).await;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return lost(self, "no try left");
            }
            let why = match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => continue,
                Ok(Ok(false)) => {
                    let holder = self.holder();
                    if !holder.is_empty() && holder != self.settings.identity {
                        return format!("lost the lease {}: it is held by {holder:?}", self.settings.lease());
                    }
                    // A conflict with an edit of the Lease by someone else: try again.
                    "the lease changed while it was renewed".to_owned()
                }
                Ok(Err(e)) => format!("{e:#}"),
                Err(_) => "the API server did not answer in time".to_owned(),
            };
            if Instant::now() >= deadline {
                return lost(self, &why);
            }
            tracing::warn!(lease = %self.settings.lease(), "cannot renew the lease: {why}");
        }
    }

    /// Gives the Lease up, if this candidate holds it, so that a follower takes it at once.
    pub async fn release(&mut self) {
        let Some(observed) = &self.observed else { return };
        if observed.spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return;
        }
        // A write of ours still in flight (a renewal cut short) may make the first try conflict:
        // read again and retry while the Lease is still ours, as client-go's tryRelease does.
        for _ in 0..3 {
            let Ok(Some(mut lease)) = self.api.get_opt(&self.settings.name).await else { break };
            let spec = lease.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
                break;
            }
            let now = MicroTime(Utc::now());
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
            match self.api.replace(&self.settings.name, &PostParams::default(), &lease).await {
                Ok(_) => {
                    tracing::info!(lease = %self.settings.lease(), "released the lease");
                    break;
                }
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(e) => {
                    tracing::warn!(lease = %self.settings.lease(), "cannot release the lease: {e}");
                    break;
                }
            }
        }
        self.renewed = None;
    }

    /// The holder as last seen (empty: none).
    pub fn holder(&self) -> String {
        self.observed.as_ref().and_then(|o| o.spec.holder_identity.clone()).unwrap_or_default()
    }

    /// One try to take or renew the Lease: whether this candidate holds it now. client-go's
    /// `tryAcquireOrRenew`.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaseError> {
        let now = MicroTime(Utc::now());
        let duration = i32::try_from(self.settings.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let me = self.settings.identity.clone();
        let sent = Instant::now();
        let lease = self.api.get_opt(&self.settings.name).await.map_err(LeaseError::Read)?;
        let Some(mut lease) = lease else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.settings.name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => Ok(self.took(created, sent)),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(LeaseError::Create(e)),
            };
        };

        let spec = lease.spec.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|o| o.spec != spec) {
            self.observed = Some(Observed { spec: spec.clone(), at: Instant::now() });
        }
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let held_for = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
        let observed_at = self.observed.as_ref().map_or_else(Instant::now, |o| o.at);
        if !holder.is_empty() && holder != me && observed_at.elapsed() < held_for {
            return Ok(false);
        }

        let leading = holder == me;
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(me),
            lease_duration_seconds: Some(duration),
            acquire_time: if leading { spec.acquire_time.clone() } else { Some(now.clone()) },
            renew_time: Some(now),
            lease_transitions: Some(if leading { transitions } else { transitions + 1 }),
            ..spec
        });
        // The object read carries its resourceVersion: a write by anyone since is a conflict.
        match self.api.replace(&self.settings.name, &PostParams::default(), &lease).await {
            Ok(updated) => Ok(self.took(updated, sent)),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(LeaseError::Update(e)),
        }
    }

    /// Records a Lease this candidate wrote: it holds it.
    /// Records a Lease this candidate wrote, its read having been sent at `sent`: it holds it,
    /// renewed as of `sent` (followers' clocks started no earlier than that).
    fn took(&mut self, lease: Lease, sent: Instant) -> bool {
        self.observed = Some(Observed { spec: lease.spec.unwrap_or_default(), at: Instant::now() });
        self.renewed = Some(sent);
        true
    }
}

/// `period`, lengthened by up to [`JITTER`] - 1 of itself.
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + (JITTER - 1.0) * fastrand::f64())
}
