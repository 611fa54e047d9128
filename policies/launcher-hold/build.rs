//! A policy needs a small stack: 64 KiB instead of Rust's default 1 MiB for wasm. The linear
//! memory shrinks accordingly, and the host scans and restores less of it between evaluations.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=-zstack-size=65536");
    }
}
