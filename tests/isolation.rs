//! Every evaluation sees a fresh guest: nothing one call leaves in a module's globals or memory
//! reaches the next, whether instances are reused (put back into their post-init state) or made
//! anew, sequentially, after failures and from many threads. And a `Policy` is safe to share.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use evac_e2e::*;
use evac_runtime::capabilities::{CapabilityError, HostCapabilities, KubernetesCapabilities};
use evac_runtime::wapc::{EngineOptions, EvalError, Policy, PolicyModule};
use serde_json::json;

/// What `count` answers on a fresh guest: the global (100), the data-segment word (1000), the
/// word wapc_init wrote (500) and an untouched word (0), each plus one.
const FRESH: [u32; 4] = [101, 1001, 501, 1];

/// Host capabilities that count the guest's `wapc_init`s (guest.wat reports each one).
#[derive(Default)]
struct InitCounter {
    inits: AtomicUsize,
}

impl HostCapabilities for InitCounter {
    fn call(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        _: &[u8],
    ) -> Result<Vec<u8>, CapabilityError> {
        if (binding, namespace, operation) == ("test", "init", "init") {
            self.inits.fetch_add(1, Ordering::SeqCst);
            return Ok(Vec::new());
        }
        Err(CapabilityError::UnknownCapability(format!("{binding}/{namespace}/{operation}")))
    }
}

fn counting_policy(module: PolicyModule) -> (Policy, Arc<InitCounter>) {
    let counter = Arc::new(InitCounter::default());
    (Policy::new(module, counter.clone()), counter)
}

fn counters(policy: &Policy) -> [u32; 4] {
    let answer = policy.call("count", b"").expect("count");
    assert_eq!(answer.len(), 16, "{answer:?}");
    std::array::from_fn(|i| u32::from_le_bytes(answer[i * 4..i * 4 + 4].try_into().unwrap()))
}

/// Whether the host can reuse instances here: it restores them with PAGEMAP_SCAN (Linux 6.7+)
/// and makes a new instance for every call where that is missing.
fn reuse_possible() -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut numbers = release.trim().split(['.', '-']).map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (6, 7)
}

#[test]
fn every_call_sees_the_post_init_state() {
    const CALLS: usize = 100;
    for reuse_instances in [true, false] {
        let engine = engine(EngineOptions { reuse_instances, ..EngineOptions::default() });
        let (policy, inits) = counting_policy(compile_wat(&engine, "guest.wat"));
        for call in 0..CALLS {
            assert_eq!(counters(&policy), FRESH, "reuse_instances: {reuse_instances}, call {call}");
        }
        // The counters prove isolation only if the reuse path really ran: count the instances.
        let inits = inits.inits.load(Ordering::SeqCst);
        if reuse_instances && reuse_possible() {
            assert_eq!(inits, 1, "sequential calls with reuse_instances should share one instance");
        } else {
            assert_eq!(inits, CALLS, "reuse_instances: {reuse_instances}: one instance per call");
        }
    }
}

#[test]
fn nothing_leaks_from_failed_or_growing_calls() {
    for reuse_instances in [true, false] {
        let engine = engine(EngineOptions {
            reuse_instances,
            timeout: Duration::from_millis(200),
            ..EngineOptions::default()
        });
        let policy = guest_policy(compile_wat(&engine, "guest.wat"));
        let case = |what: &str| format!("reuse_instances: {reuse_instances}, after {what}");
        assert_eq!(counters(&policy), FRESH, "{}", case("nothing"));
        for _ in 0..3 {
            assert!(matches!(policy.call("trap", b""), Err(EvalError::Trap(_))));
            assert_eq!(counters(&policy), FRESH, "{}", case("a trap"));
            assert!(matches!(policy.call("fail", b""), Err(EvalError::Guest(_))));
            assert_eq!(counters(&policy), FRESH, "{}", case("a guest error"));
            assert!(matches!(policy.call("oob", b""), Err(EvalError::Trap(_))));
            assert_eq!(counters(&policy), FRESH, "{}", case("an out-of-bounds answer"));
            assert!(matches!(policy.call("spin", b""), Err(EvalError::Timeout(_))));
            assert_eq!(counters(&policy), FRESH, "{}", case("a timeout"));
            // Memory grown by one call is not there for the next.
            assert_eq!(policy.call("more", b"").unwrap(), 3u32.to_le_bytes(), "{}", case("growing"));
            assert_eq!(policy.call("more", b"").unwrap(), 3u32.to_le_bytes(), "{}", case("growing twice"));
            assert_eq!(counters(&policy), FRESH, "{}", case("growing"));
            // A large payload written over the guest's memory is gone too.
            let big = vec![0xAB; 60 * 1024];
            assert_eq!(policy.call("echo", &big).unwrap(), big);
            assert_eq!(policy.call("echo", b"small").unwrap(), b"small", "{}", case("a large payload"));
            assert_eq!(counters(&policy), FRESH, "{}", case("a large payload"));
        }
    }
}

#[test]
fn every_thread_sees_fresh_state() {
    for reuse_instances in [true, false] {
        let engine = engine(EngineOptions { reuse_instances, ..EngineOptions::default() });
        let policy = guest_policy(compile_wat(&engine, "guest.wat"));
        std::thread::scope(|scope| {
            for thread in 0..4 {
                let policy = policy.clone();
                scope.spawn(move || {
                    for call in 0..200 {
                        assert_eq!(
                            counters(&policy),
                            FRESH,
                            "reuse {reuse_instances}, thread {thread}, call {call}"
                        );
                    }
                });
            }
        });
    }
}

#[test]
fn policies_sharing_a_module_keep_their_own_capabilities() {
    // One module, three policies over different clusters and grants: instances pass from one
    // policy to the next, and each call must read through its own policy's capabilities.
    let objects = |strategy: &str| {
        [launcher_pod(NS, "vm", NODE), vmi(NS, "vm", Some(strategy), true, NODE), kubevirt_cr(None)]
    };
    let migrate = policy_for(cluster(objects("LiveMigrate")));
    let keep = policy_for(cluster(objects("None")));
    let no_vmi_grant = policy_with(
        KubernetesCapabilities::new(Arc::new(cluster(objects("LiveMigrate")))).granting([grant("v1", "Pod")]),
    );
    let request = eviction_request(NS, &launcher_name("vm"));
    for round in 0..30 {
        let case = format!("round {round}");
        check(&case, &validate(&migrate, &request).unwrap(), &Expect::Triggered(mark(NS, "vm", NODE)));
        check(&case, &validate(&keep, &request).unwrap(), &Expect::Allow);
        let denied = validate(&no_vmi_grant, &request).unwrap();
        assert!(!denied.accepted, "{case}: {denied:?}");
        assert!(
            denied.message.as_deref().unwrap_or_default().contains("has not been granted access"),
            "{case}: {denied:?}"
        );
    }
}

#[test]
fn concurrent_evaluations_on_one_policy() {
    fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
    assert_shareable::<Policy>();

    let policy =
        policy_with(KubernetesCapabilities::new(Arc::new(example_cluster())).granting(metadata_grants()));
    let web = "virt-launcher-web-1-8xk2p";
    // A different answer per thread, so answers crossing between threads would show.
    let cases = [
        (eviction_request(NS, web), Expect::Triggered(mark(NS, "web-1", NODE))),
        (eviction_request(NS, "virt-launcher-gpu-1-q9v7d"), Expect::Deny(not_migratable_message("gpu-1"))),
        (eviction_request(NS, "nginx-7c5ddbdf54-2xkqv"), Expect::Allow),
        (
            with(eviction_request_with(NS, web, descheduler_eviction(NS, web)), "/dryRun", json!(true)),
            Expect::Triggered(mark_by_descheduler(NS, "web-1", NODE, true)),
        ),
    ];
    std::thread::scope(|scope| {
        for (thread, (request, expected)) in cases.iter().enumerate() {
            let policy = policy.clone();
            scope.spawn(move || {
                for call in 0..200 {
                    let response = validate(&policy, request)
                        .unwrap_or_else(|e| panic!("thread {thread}, call {call}: {e}"));
                    check(&format!("thread {thread}, call {call}"), &response, expected);
                }
            });
        }
    });
}

/// `EngineOptions::max_concurrent` is documented as "how many evaluations may be in flight at
/// once". More concurrent callers than that should wait their turn (or at worst get a clear
/// overload error); today each instantiates, and those past the pooling allocator's slots
/// (`max(4 * max_concurrent, 8)`) fail with `EvalError::Instantiate("maximum concurrent limit of
/// 8 for core instances reached")`.
#[test]
fn more_callers_than_max_concurrent_all_get_answers() {
    /// Initialisation takes 100 ms, so that the callers' instantiations overlap.
    struct SlowInit;
    impl HostCapabilities for SlowInit {
        fn call(&self, _: &str, _: &str, _: &str, _: &[u8]) -> Result<Vec<u8>, CapabilityError> {
            std::thread::sleep(Duration::from_millis(100));
            Ok(Vec::new())
        }
    }
    const CALLERS: usize = 12;
    let engine = engine(EngineOptions { max_concurrent: 1, ..EngineOptions::default() });
    let policy = Policy::new(compile_wat(&engine, "guest.wat"), Arc::new(SlowInit));
    let start = Barrier::new(CALLERS);
    let errors = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..CALLERS {
            scope.spawn(|| {
                start.wait();
                if let Err(e) = policy.call("echo", b"hi") {
                    errors.lock().unwrap().push(e.to_string());
                }
            });
        }
    });
    let errors = errors.into_inner().unwrap();
    assert!(errors.is_empty(), "{} of {CALLERS} calls failed, e.g. {:?}", errors.len(), errors.first());
}
