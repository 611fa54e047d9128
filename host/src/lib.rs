//! evac: the host side. It runs evac's policy modules on wasmtime (the waPC host and Kubewarden's
//! protocol), answers their host-capability reads from a cluster back end, and carries out the
//! effects they return.

pub mod capabilities;
pub mod cli;
pub mod cluster;
pub mod control;
pub mod kubewarden;
pub mod server;
pub mod sim;
pub mod wapc;
