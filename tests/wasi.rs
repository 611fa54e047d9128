//! WASI as a policy sees it: the clock, random bytes and standard output and error, answered in
//! the host with no I/O; files, sockets and sleeps answer ENOSYS at once. Nothing a policy calls
//! can fail the host: not on a plain thread, not on a thread of a Tokio runtime (where
//! wasmtime-wasi's synchronous functions panicked), and a panicking policy's message ends up in
//! its trap's error.

use evac_e2e::*;
use evac_runtime::wapc::{EngineOptions, EvalError, Policy};

const ENOSYS: u32 = 52;

/// The errno (and the count written, for `write`) an operation of `wasi.wat` answers.
fn answer(policy: &Policy, operation: &str) -> Result<[u32; 2], EvalError> {
    let bytes = policy.call(operation, b"")?;
    assert_eq!(bytes.len(), 8, "{operation}: {bytes:?}");
    Ok([0, 1].map(|i| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap())))
}

fn trap(result: Result<[u32; 2], EvalError>) -> String {
    match result {
        Err(EvalError::Trap(message)) => message,
        other => panic!("expected a trap, got {other:?}"),
    }
}

/// Every operation of `wasi.wat`, twice over, on instances reused or not.
fn every_call_answers() {
    for reuse_instances in [true, false] {
        let engine = engine(EngineOptions { reuse_instances, ..EngineOptions::default() });
        let policy = guest_policy(compile_wat(&engine, "wasi.wat"));
        for round in 0..2 {
            let case = format!("reuse_instances: {reuse_instances}, round {round}");
            assert_eq!(answer(&policy, "write").unwrap(), [0, 5], "{case}: standard error takes the bytes");
            assert_eq!(answer(&policy, "stat").unwrap(), [0, 0], "{case}: standard output is there");
            assert_eq!(answer(&policy, "close").unwrap(), [ENOSYS, 0], "{case}: nothing to close");
            assert_eq!(answer(&policy, "open").unwrap(), [ENOSYS, 0], "{case}: no files");
            // The deadline holds for host calls: the host never sleeps for the guest.
            assert_eq!(answer(&policy, "zzz").unwrap(), [ENOSYS, 0], "{case}: no sleeping");
            let panic = trap(answer(&policy, "panic"));
            assert!(panic.contains("the policy wrote: panicked at policy.rs:7: boom"), "{case}: {panic}");
            // What an earlier call wrote is not part of a later call's error.
            assert_eq!(answer(&policy, "write").unwrap(), [0, 5], "{case}");
            let panic = trap(answer(&policy, "panic"));
            assert_eq!(panic.matches("boom").count(), 1, "{case}: {panic}");
            assert!(!panic.contains("hello"), "{case}: {panic}");
            // Asking more of the host than a guest could hold fails at once, allocating nothing.
            assert_eq!(answer(&policy, "random").unwrap(), [21, 0], "{case}: EFAULT");
            assert_eq!(answer(&policy, "vector").unwrap(), [28, 0], "{case}: EINVAL");
            let exit = trap(answer(&policy, "x"));
            assert!(exit.contains("the policy exited with status 3"), "{case}: {exit}");
        }
    }
}

#[test]
fn on_a_plain_thread() {
    every_call_answers();
}

#[tokio::test(flavor = "current_thread")]
async fn on_a_single_threaded_runtime() {
    every_call_answers();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_threaded_runtime() {
    every_call_answers();
}

/// The shipped policies import only what the host answers: a Rust policy's panic message, its
/// clock and its hash seeds work as they do under wasmtime-wasi.
#[test]
fn a_shipped_policy_links_and_answers_inside_a_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let policy = policy_for(example_cluster());
        let response = validate(&policy, &eviction_request(NS, "nginx-7c5ddbdf54-2xkqv")).unwrap();
        assert!(response.accepted, "{response:?}");
    });
}
