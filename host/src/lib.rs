//! evac: the `evac` binary's library: the command line, the policy server (`evac serve`), the
//! controller (`evac control`), the node-local hold endpoint (`evac hold`), and evac's place in the embedded simulator (`evac simulate`,
//! `evac demo`). The work is done by the crates under `crates/`: decisions in `evac-core`, the wasm
//! host in `evac-runtime`, the evaluation pipeline in `evac-evaluator`, clusters in `evac-cluster`,
//! and the simulated cluster in `evac-sim`.
//!
//! The host is where every layer meets and the only crate that uses `anyhow`: errors of the
//! library crates arrive typed and become the command line's messages here.

#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod cli;
pub mod control;
pub mod hold;
pub mod reload;
pub mod server;
pub mod simulation;
