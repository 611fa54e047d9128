//! A kubeconfig for a client of an API server on loopback.

/// A kubeconfig for a client of the API server at `server` (e.g. `http://127.0.0.1:6443`): one
/// cluster, one context, a user without credentials.
pub fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: evac-sim\n  cluster:\n    server: {server}\n\
         contexts:\n- name: evac-sim\n  context:\n    cluster: evac-sim\n    user: evac-sim\n\
         current-context: evac-sim\nusers:\n- name: evac-sim\n  user: {{}}\n"
    )
}
