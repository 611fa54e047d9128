//! The waPC host with bad modules and misbehaving guests: each is refused or stopped with one
//! clear error, and the host (the same policy, the same engine) keeps working afterwards.
//! The guests are the WAT fixtures in `test_data/wat/`.

use std::time::{Duration, Instant};

use evac_e2e::*;
use evac_runtime::kubewarden;
use evac_runtime::wapc::{EngineOptions, EvalError, PolicyEngine};
use serde_json::json;

const MIB: usize = 1024 * 1024;

fn default_engine() -> PolicyEngine {
    engine(EngineOptions::default())
}

/// The error of compiling these bytes, with its causes.
fn compile_error(engine: &PolicyEngine, bytes: &[u8]) -> String {
    match engine.compile(bytes) {
        Ok(_) => panic!("compiled a module that should have been refused"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_minimal_guest_speaks_wapc() {
    let policy = guest_policy(compile_wat(&default_engine(), "guest.wat"));
    assert_eq!(policy.call("echo", b"hello, host").unwrap(), b"hello, host");
    assert_eq!(policy.call("echo", b"").unwrap(), b"");
    let big = vec![b'x'; 60 * 1024];
    assert_eq!(policy.call("echo", &big).unwrap(), big);
    match policy.call("nope", b"") {
        Err(EvalError::Guest(message)) => assert_eq!(message, "unknown operation"),
        other => panic!("{other:?}"),
    }
    match policy.call("fail", b"") {
        Err(e @ EvalError::Guest(_)) => {
            assert_eq!(e.to_string(), "the policy returned an error: guest says no")
        }
        other => panic!("{other:?}"),
    }
    match policy.call("zero", b"") {
        Err(EvalError::Guest(message)) => {
            assert!(message.contains("returned 0 without an error message"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn modules_that_are_not_wapc_policies_are_refused_at_load() {
    let engine = default_engine();
    let wasm = policy_bytes();
    let wat = wat_fixture;
    let cases: Vec<(&str, Vec<u8>, &[&str])> = vec![
        ("truncated module", wasm[..wasm.len() / 2].to_vec(), &["not a valid WebAssembly module"]),
        ("empty bytes", Vec::new(), &["not a WebAssembly module: it starts with neither"]),
        ("text that is not WAT", b"hello".to_vec(), &["not a WebAssembly module: it starts with neither"]),
        (
            "an ELF binary",
            b"\x7fELF\x02\x01\x01\0\0\0".to_vec(),
            &["not a WebAssembly module: it starts with neither"],
        ),
        (
            "WAT with a syntax error",
            b"(module (func $f (result i32) i32.const))".to_vec(),
            &["not a valid WebAssembly module"],
        ),
        (
            "no __guest_call",
            wat("no_guest_call.wat"),
            &["does not export `__guest_call`", "not a waPC policy"],
        ),
        ("no memory", wat("no_memory.wat"), &["exports no `memory`", "not a waPC policy"]),
        (
            "__guest_call of the wrong type",
            wat("wrong_signature.wat"),
            &["`__guest_call` has the wrong signature"],
        ),
        (
            "an unknown host function",
            wat("unknown_import.wat"),
            &["the module needs imports the evac host does not provide", "__launch_missiles"],
        ),
    ];
    for (case, bytes, expected) in cases {
        let error = compile_error(&engine, &bytes);
        // A file that is no module is not reported as the text parser's complaint.
        assert!(!error.contains("expected `(`"), "{case}: {error:?}");
        for text in expected {
            assert!(error.contains(text), "{case}: {error:?} does not say {text:?}");
        }
    }

    let missing = repo_root().join("tests/test_data/wat/missing.wasm");
    let error = format!("{:#}", engine.load(&missing).err().expect("a missing file loads"));
    assert!(error.contains("cannot read policy module") && error.contains("missing.wasm"), "{error}");

    // The engine is unharmed: the real module still loads and runs.
    let policy = policy_for(evac_cluster::MemoryStore::empty());
    assert_eq!(kubewarden::protocol_version(&policy).unwrap(), "v1");
    let module = engine.compile(&wasm).expect("the built module compiles");
    assert!(module.digest().starts_with("sha256:"));
    assert_eq!(module.size(), wasm.len());
}

/// `PolicyEngine::compile` is documented (and specified) to take a `.wasm` binary or `.wat` text.
#[test]
fn compile_accepts_wat_text() {
    let engine = default_engine();
    let text = test_data_text("wat/guest.wat");
    let module = engine.compile(text.as_bytes()).unwrap_or_else(|e| panic!("WAT text was refused: {e:#}"));
    assert_eq!(guest_policy(module).call("echo", b"wat").unwrap(), b"wat");
    // A WAT module that is not a waPC guest is refused for that reason, not as "not wasm".
    let error = compile_error(&engine, test_data_text("wat/no_guest_call.wat").as_bytes());
    assert!(error.contains("__guest_call"), "{error}");
}

#[test]
fn an_endless_loop_times_out_and_the_host_carries_on() {
    let timeout = Duration::from_millis(50);
    let engine = engine(EngineOptions { timeout, ..EngineOptions::default() });
    let policy = guest_policy(compile_wat(&engine, "guest.wat"));
    for _ in 0..3 {
        let started = Instant::now();
        let result = policy.call("spin", b"");
        let took = started.elapsed();
        match result {
            Err(e @ EvalError::Timeout(_)) => {
                assert!(matches!(e, EvalError::Timeout(t) if t == timeout));
                assert_eq!(e.to_string(), "the policy ran past its time limit of 50ms");
                assert_eq!(e.label(), "timeout");
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(took >= Duration::from_millis(45), "stopped before its deadline: {took:?}");
        assert!(took < Duration::from_secs(5), "stopped long after its deadline: {took:?}");
        // The same policy answers the next call.
        assert_eq!(policy.call("echo", b"still here").unwrap(), b"still here");
    }
    // So does another module of the same engine: the built pod-eviction module.
    let module = engine.load(&policy_path()).unwrap();
    let context = cluster([plain_pod(NS, "nginx")]);
    let pod_eviction = evac_runtime::wapc::Policy::new(
        module,
        std::sync::Arc::new(evac_runtime::capabilities::KubernetesCapabilities::new(std::sync::Arc::new(
            context,
        ))),
    );
    let response = validate(&pod_eviction, &eviction_request(NS, "nginx")).unwrap();
    check("after a timeout", &response, &Expect::Allow);
    // A busy guest within its deadline is not stopped.
    let relaxed = guest_policy(compile_wat(&default_engine(), "guest.wat"));
    assert_eq!(relaxed.call("busy", b"").unwrap(), b"done");
}

#[test]
fn an_endless_wapc_init_times_out() {
    let engine = engine(EngineOptions { timeout: Duration::from_millis(50), ..EngineOptions::default() });
    let policy = guest_policy(compile_wat(&engine, "init_spin.wat"));
    for _ in 0..2 {
        match policy.call("anything", b"") {
            Err(EvalError::Timeout(t)) => assert_eq!(t, Duration::from_millis(50)),
            other => panic!("expected a timeout, got {other:?}"),
        }
    }
}

#[test]
fn growing_past_the_memory_limit_is_a_memory_limit_error() {
    let engine = engine(EngineOptions { memory_limit: 4 * MIB, ..EngineOptions::default() });
    let policy = guest_policy(compile_wat(&engine, "guest.wat"));
    for _ in 0..2 {
        match policy.call("grow", b"") {
            Err(e @ EvalError::MemoryLimit(_)) => {
                assert!(matches!(e, EvalError::MemoryLimit(limit) if limit == 4 * MIB));
                assert_eq!(e.to_string(), "the policy exceeded its memory limit of 4 MiB");
                assert_eq!(e.label(), "memory_limit");
            }
            other => panic!("expected a memory limit error, got {other:?}"),
        }
        // Growing within the limit is fine, and the policy carries on.
        assert_eq!(policy.call("more", b"").unwrap(), 3u32.to_le_bytes());
        assert_eq!(policy.call("echo", b"ok").unwrap(), b"ok");
    }
}

#[test]
fn a_module_that_starts_above_the_memory_limit_is_refused() {
    // 8 MiB of initial memory under a 4 MiB limit: refused when it is loaded, not when it runs.
    let engine = engine(EngineOptions { memory_limit: 4 * MIB, ..EngineOptions::default() });
    let error = compile_error(&engine, &wat_fixture("big_memory.wat"));
    assert_eq!(error, "the module starts with 8192 KiB of memory, more than the memory limit of 4096 KiB");
    // Under the default limit it loads.
    default_engine().compile(&wat_fixture("big_memory.wat")).expect("8 MiB under 64 MiB");
}

#[test]
fn unreachable_is_a_trap_that_names_it() {
    let policy = guest_policy(compile_wat(&default_engine(), "guest.wat"));
    match policy.call("trap", b"") {
        Err(e @ EvalError::Trap(_)) => {
            let EvalError::Trap(message) = &e else { unreachable!() };
            assert!(message.contains("unreachable"), "{message}");
            assert!(message.contains("boom"), "the trap does not name its function: {message}");
            assert!(!message.contains('\n'), "{message}");
            assert!(e.to_string().starts_with("the policy trapped: "), "{e}");
            assert_eq!(e.label(), "trap");
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_eq!(policy.call("echo", b"after").unwrap(), b"after");
}

#[test]
fn an_answer_outside_guest_memory_is_a_trap() {
    let policy = guest_policy(compile_wat(&default_engine(), "guest.wat"));
    match policy.call("oob", b"") {
        Err(EvalError::Trap(message)) => assert!(message.contains("out-of-bounds"), "{message}"),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_eq!(policy.call("echo", b"after").unwrap(), b"after");
}

#[test]
fn answers_that_break_kubewardens_protocol_are_bad_responses() {
    let policy = guest_policy(compile_wat(&default_engine(), "guest.wat"));
    let request = eviction_request(NS, "nginx");
    match kubewarden::validate(&policy, &raw(&request), &raw(&json!({}))) {
        Err(e @ EvalError::BadResponse { .. }) => {
            let message = e.to_string();
            assert!(
                message.starts_with("the policy's answer is not a valid ValidationResponse: "),
                "{message}"
            );
            assert_eq!(e.label(), "bad_response");
        }
        other => panic!("expected a bad response, got {other:?}"),
    }
    // `protocol_version` is not an operation of this guest.
    match kubewarden::protocol_version(&policy) {
        Err(EvalError::Guest(message)) => assert_eq!(message, "unknown operation"),
        other => panic!("{other:?}"),
    }
}
