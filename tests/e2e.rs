//! evac's end-to-end tests: the built policy modules and the `evac` binary, run in-process by
//! evac's wasmtime host, against the embedded simulator and the processes' HTTP endpoints.
//!
//! One test binary: each file below is a module of it (`cargo test -p evac-e2e adversarial::`
//! runs one file's tests). The shared builders and fixtures are the `evac_e2e` library
//! (`support/`).

mod adversarial;
mod adversarial_hold;
mod cli;
mod control_drain;
mod control_gates;
mod control_monitor;
mod control_scenarios;
mod deploy;
mod disruption_cause;
mod evacuation;
mod examples;
mod fuzz_regressions;
mod hardening;
mod hold_endpoint;
mod isolation;
mod kubewarden;
mod kubewarden_tables;
mod launcher_hold;
mod leader_election;
mod metadata;
mod monitoring;
mod playground;
mod playground_tables;
mod pod_eviction;
mod release;
mod server;
mod server_effects;
mod server_swap;
mod sim_serve;
mod simulate;
mod wapc_host;
mod wasi;
