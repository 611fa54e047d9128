//! `evac control`: the controller is `evac-control`'s; the binary adds leadership among replicas.

pub mod leadership;

pub use evac_control::*;
