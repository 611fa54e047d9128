//! The fuzz targets' inputs replayed on every test run: the seeds each target starts from and
//! every input fuzzing has found a fault with (`fuzz/regressions/<target>/`), through the same
//! functions the targets run (`fuzz/harness.rs`). `make fuzz` runs the targets themselves.

#[path = "../fuzz/harness.rs"]
mod harness;

use std::path::PathBuf;

/// The seed and regression inputs of `target`, by file name.
fn inputs(target: &str, seeds: &[&str]) -> Vec<(PathBuf, Vec<u8>)> {
    let root = evac_e2e::repo_root();
    let mut dirs: Vec<PathBuf> = seeds.iter().map(|dir| root.join(dir)).collect();
    dirs.push(root.join("fuzz/regressions").join(target));
    let mut inputs = Vec::new();
    for dir in dirs {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|name| name.to_string_lossy().starts_with('.')) {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            inputs.push((path, bytes));
        }
    }
    assert!(!inputs.is_empty(), "no inputs for {target}");
    inputs
}

fn replay(target: &str, seeds: &[&str], run: fn(&[u8])) {
    for (path, bytes) in inputs(target, seeds) {
        eprintln!("{target}: {}", path.display());
        run(&bytes);
    }
}

#[test]
fn admission_review() {
    replay("admission_review", &["examples/evictions/requests"], harness::admission_review);
}

#[test]
fn core_models() {
    replay("core_models", &["fuzz/seeds/core_models"], harness::core_models);
}

#[test]
fn quantity() {
    replay("quantity", &["fuzz/seeds/quantity"], harness::quantity);
}

#[test]
fn sim_api_request() {
    replay("sim_api_request", &["fuzz/seeds/sim_api_request"], harness::sim_api_request);
}
