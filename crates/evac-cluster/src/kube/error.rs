//! Why the kube-rs back end cannot start (connecting, discovering, syncing) or lead (the Lease).
//! Each message says what failed and why, the cause's text from [`super::errors`].

use std::path::PathBuf;
use std::time::Duration;

/// Why a [`KubeCluster`](super::KubeCluster) cannot connect or get ready.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig given could not be read.
    #[error("cannot read kubeconfig {}: {why}", .path.display())]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// The kubeconfig given is not usable.
    #[error("invalid kubeconfig {}: {why}", .path.display())]
    InvalidKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// No kubeconfig was given and none could be inferred.
    #[error(
        "no Kubernetes client configuration: not running in a cluster, and no $KUBECONFIG or ~/.kube/config: {0}"
    )]
    NoConfiguration(String),
    /// The configuration does not make a client.
    #[error("cannot create a client for the Kubernetes API server {server}: {why}")]
    Client {
        /// The API server's URL.
        server: String,
        /// Why not.
        why: String,
    },
    /// A resource to watch is not served as asked.
    #[error("cannot watch {api_version} {kind} on the Kubernetes API server {server}: {why}")]
    Resource {
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
        /// The API server's URL.
        server: String,
        /// Why not.
        why: String,
    },
    /// The caches did not complete their initial lists in time.
    #[error(
        "the watch caches of {waiting} have not synced with the Kubernetes API server {server} within {timeout:?}"
    )]
    NotSynced {
        /// The caches still waiting, with their last watch error.
        waiting: String,
        /// The API server's URL.
        server: String,
        /// How long they had.
        timeout: Duration,
    },
}

/// Why a Lease candidate cannot run or could not take part in one round.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The settings break client-go's rules (`NewLeaderElector`).
    #[error("{0}")]
    Settings(String),
    /// The Lease could not be read.
    #[error("cannot read the lease: {0}")]
    Read(kube::Error),
    /// The Lease could not be created.
    #[error("cannot create the lease: {0}")]
    Create(kube::Error),
    /// The Lease could not be updated.
    #[error("cannot update the lease: {0}")]
    Update(kube::Error),
}
