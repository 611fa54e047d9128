//! `evac serve` over real TLS on loopback: KubeVirt's decisions through HTTP, the webhook's
//! answers for bad input, failing policies that fail only their own requests, policy modes,
//! shadow versions, certificate reloads, and start-up errors.

use std::process::Command;
use std::time::{Duration, Instant};

use evac_e2e::server::{client_trusting, replace, self_signed, Setup, TestServer, POD_EVICTION_GRANTS};
use evac_e2e::*;
use serde_json::{json, Value};

fn example_context() -> Value {
    let text = std::fs::read_to_string(example("context.yaml")).expect("context");
    serde_yaml::from_str(&text).expect("context YAML")
}

fn example_review(name: &str) -> Value {
    let text = std::fs::read_to_string(example(&format!("requests/{name}"))).expect("request");
    serde_json::from_str(&text).expect("request JSON")
}

fn pod_eviction_policies(extra: &str) -> String {
    format!("pod-eviction:\n  module: {}\n  label: v1{POD_EVICTION_GRANTS}\n{extra}", policy_path().display())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn denial(response: &Value) -> (u64, String) {
    assert_eq!(response["allowed"], false, "{response}");
    (response["status"]["code"].as_u64().unwrap(), response["status"]["message"].as_str().unwrap().to_owned())
}

#[test]
fn kubevirt_decisions_over_https() {
    let server = TestServer::start(Setup {
        policies: &pod_eviction_policies(""),
        context: example_context(),
        extra_args: &[],
    });
    runtime().block_on(async {
        let triggered = |vmi: &str| format!("Eviction triggered evacuation of VMI \"default/{vmi}\"");
        // A dry run marks nothing: the drain that follows still triggers the evacuation.
        let cases: Vec<(&str, Option<(u64, String)>)> = vec![
            ("03-dry-run.json", Some((429, triggered("web-1")))),
            ("01-drain-live-migratable.json", Some((429, triggered("web-1")))),
            // web-1 is now marked: the descheduler's eviction finds the evacuation in progress.
            ("02-descheduler-live-migratable.json", Some((429, format!("Evacuation in progress: {}", triggered("web-1"))))),
            ("04-not-migratable.json", Some((429, "VMI gpu-1 is configured with an eviction strategy but is not live-migratable".into()))),
            ("05-if-possible-not-migratable.json", None),
            ("06-external.json", Some((429, triggered("capk-1")))),
            ("07-evacuation-in-progress.json", Some((429, format!("Evacuation in progress: {}", triggered("db-1"))))),
            ("08-strategy-none.json", None),
            ("09-target-pod.json", Some((429, "Eviction request for target Pod".into()))),
            ("10-hotplug-volume-pod.json", Some((429, "cannot evict hotplug pod: hp-volume-kq7zx associated with running vmi: web-1 in namespace default".into()))),
            ("11-plain-pod.json", None),
        ];
        for (name, expected) in cases {
            let mut review = example_review(name);
            let uid = format!("uid-{name}");
            review["request"]["uid"] = json!(uid);
            let response = server.review("pod-eviction", &review).await;
            assert_eq!(response["uid"], json!(uid), "{name}: the uid is echoed");
            match expected {
                None => assert_eq!(response["allowed"], true, "{name}: {response}"),
                Some(expected) => assert_eq!(denial(&response), expected, "{name}"),
            }
            let audit = &response["auditAnnotations"];
            assert!(audit["evac-policy-version"].as_str().unwrap().starts_with("v1@sha256:"), "{audit}");
            assert!(audit["evac-policy-digest"].as_str().unwrap().starts_with("sha256:"), "{audit}");
        }
        let metrics = server.metrics().await;
        assert!(metrics.contains(r#"evac_policy_effects_total{policy="pod-eviction",effect="MarkForEvacuation",result="applied"} 3"#), "{metrics}");
        assert!(metrics.contains("evac_policy_evaluation_duration_seconds_bucket"), "{metrics}");
        check_evaluation_metrics(&server, &metrics).await;
    });
}

/// What `kubevirt_decisions_over_https` evaluated, as the metrics show it: KubeVirt's 429 apart
/// from allowed requests by its `code`, versions joinable to `evac_policy_version_info`, only
/// `evac serve`'s families, and each format as the scraper asks.
async fn check_evaluation_metrics(server: &TestServer, metrics: &str) {
    let series = |code: u16| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("evac_policy_evaluations_total{") && l.contains(&format!(r#"code="{code}""#))
            })
            .unwrap_or_else(|| panic!("no evaluations with code {code}:\n{metrics}"))
    };
    let (allowed, evacuating) = (series(200), series(429));
    assert!(allowed.contains(r#"outcome="accepted""#) && allowed.ends_with(" 3"), "{allowed}");
    assert!(evacuating.contains(r#"outcome="rejected""#) && evacuating.ends_with(" 8"), "{evacuating}");
    let version =
        |line: &str| line.split(r#"version=""#).nth(1).and_then(|v| v.split('"').next()).map(str::to_owned);
    let evaluated = version(allowed).unwrap();
    assert!(evaluated.starts_with("v1@sha256:"), "{allowed}");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("evac_policy_version_info{") && version(l).as_ref() == Some(&evaluated)),
        "the evaluations' version {evaluated} is not in evac_policy_version_info:\n{metrics}"
    );
    for family in [
        "evac_build_info",
        "evac_admission_requests_refused",
        "process_cpu_seconds_total",
        "process_open_fds",
    ] {
        assert!(metrics.contains(&format!("# TYPE {family}")), "{family} missing:\n{metrics}");
    }
    for other in ["evac_controller_reconcile", "evac_leader_election", "evac_disruptions", "evac_holds"] {
        assert!(!metrics.contains(other), "evac serve exports {other}:\n{metrics}");
    }
    assert!(
        metrics.contains(&format!(r#"evac_build_info{{version="{}"}} 1"#, env!("CARGO_PKG_VERSION"))),
        "{metrics}"
    );
    // Prometheus asks for OpenMetrics first; a plain GET gets the text format.
    let url = format!("http://127.0.0.1:{}/metrics", server.probe_port);
    let client = reqwest::Client::new();
    let plain = client.get(&url).send().await.unwrap();
    assert_eq!(plain.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    let accept = "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
    let open = client.get(&url).header("accept", accept).send().await.unwrap();
    assert_eq!(open.headers()["content-type"], "application/openmetrics-text; version=1.0.0; charset=utf-8");
    let text = open.text().await.unwrap();
    assert!(text.ends_with("# EOF\n") && text.contains("# TYPE evac_policy_evaluations counter"), "{text}");
}

#[test]
fn bad_requests_are_refused_clearly() {
    let server = TestServer::start(Setup {
        policies: &pod_eviction_policies(""),
        context: example_context(),
        extra_args: &["--max-body-bytes", "65536"],
    });
    runtime().block_on(async {
        let (status, body) = server.post("pod-eviction", b"{not json".to_vec()).await;
        assert_eq!(status, 400);
        assert!(
            body.as_str().unwrap().starts_with("invalid AdmissionReview: key must be a string"),
            "{body}"
        );

        let (status, body) =
            server.post("pod-eviction", br#"{"kind":"Pod","apiVersion":"v1"}"#.to_vec()).await;
        assert_eq!(status, 400);
        assert!(body
            .as_str()
            .unwrap()
            .contains("expected apiVersion admission.k8s.io/v1 and kind AdmissionReview"));

        let mut big = example_review("11-plain-pod.json");
        big["request"]["object"]["metadata"]["annotations"] = json!({"padding": "x".repeat(100_000)});
        let (status, body) = server.post("pod-eviction", serde_json::to_vec(&big).unwrap()).await;
        assert_eq!(status, 400);
        assert!(body.as_str().unwrap().contains("larger than the limit of 65536 bytes"), "{body}");

        let (status, body) = server.post("no-such-policy", serde_json::to_vec(&big).unwrap()).await;
        assert_eq!(status, 404);
        assert!(body.as_str().unwrap().contains(r#"unknown policy "no-such-policy""#), "{body}");

        // A request the policy does not handle is the policy's error: a 500 denial, not a crash.
        let mut review = example_review("11-plain-pod.json");
        review["request"]["subResource"] = json!("status");
        let response = server.review("pod-eviction", &review).await;
        let (code, message) = denial(&response);
        assert_eq!(code, 500);
        assert!(
            message.contains("only evaluates pods/eviction CREATE requests, got CREATE pods/status"),
            "{message}"
        );

        // A body that is not said to be JSON is refused as Kubewarden's policy-server refuses it
        // (the API server always sends `application/json`); parameters and `+json` types are JSON.
        let plain = serde_json::to_vec(&example_review("11-plain-pod.json")).unwrap();
        for content_type in [None, Some("text/plain"), Some("application/x-www-form-urlencoded")] {
            let (status, body) = server.post_as("pod-eviction", plain.clone(), content_type).await;
            assert_eq!(status, 415, "{content_type:?}: {body}");
            assert_eq!(body, "Expected request with `Content-Type: application/json`\n", "{content_type:?}");
        }
        for content_type in
            ["application/json; charset=utf-8", "Application/JSON", "application/vnd.k8s+json"]
        {
            let (status, body) = server.post_as("pod-eviction", plain.clone(), Some(content_type)).await;
            assert_eq!(status, 200, "{content_type}: {body}");
        }

        // And the server still answers.
        let response = server.review("pod-eviction", &example_review("11-plain-pod.json")).await;
        assert_eq!(response["allowed"], true);
        let metrics = server.metrics().await;
        assert!(
            metrics.contains(r#"evac_admission_requests_refused_total{reason="unsupported_media_type"} 3"#),
            "{metrics}"
        );
        assert!(
            metrics.contains(r#"evac_admission_requests_refused_total{reason="bad_request"} 3"#),
            "{metrics}"
        );
        assert!(
            metrics.contains(r#"evac_admission_requests_refused_total{reason="unknown_policy"} 1"#),
            "{metrics}"
        );
    });
}

#[test]
fn a_failing_policy_fails_only_its_own_requests() {
    let policies = format!(
        "{}
spin:
  module: {}
  timeoutEvalMilliseconds: 100
hungry:
  module: {}
panics:
  module: {}
",
        pod_eviction_policies(""),
        test_data("wat/validate_forever.wat").display(),
        test_data("wat/validate_hungry.wat").display(),
        test_data("wat/panics.wat").display(),
    );
    let server = TestServer::start(Setup {
        policies: &policies,
        context: example_context(),
        extra_args: &["--memory-limit-mib", "16"],
    });
    runtime().block_on(async {
        let review = example_review("11-plain-pod.json");
        let started = Instant::now();
        let (spin, hungry, panics, healthy) = tokio::join!(
            server.review("spin", &review),
            server.review("hungry", &review),
            server.review("panics", &review),
            server.review("pod-eviction", &review),
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        let (code, message) = denial(&spin);
        assert_eq!(code, 500);
        assert!(
            message.contains(
                "policy spin failed to evaluate the request: the policy ran past its time limit of 100ms"
            ),
            "{message}"
        );
        let (code, message) = denial(&hungry);
        assert_eq!(code, 500);
        assert!(message.contains("exceeded its memory limit of 16 MiB"), "{message}");
        // A policy that panics, writing its message through WASI as Rust policies do, inside the
        // server's runtime: that request's 500, with the panic's text, and the server lives on.
        let (code, message) = denial(&panics);
        assert_eq!(code, 500);
        assert!(message.contains("the policy trapped"), "{message}");
        assert!(message.contains("the policy wrote: panicked at src/lib.rs:12:5: boom"), "{message}");
        assert_eq!(denial(&server.review("panics", &review).await).0, 500);
        assert_eq!(healthy["allowed"], true);
        // Clients can make a faulty policy fail at will: its warnings are rate-limited (one a
        // second, with the count held back), its faults all counted.
        for _ in 0..30 {
            assert_eq!(denial(&server.review("panics", &review).await).0, 500);
        }
        let warnings =
            server.log().lines().filter(|l| l.contains("evaluation failed") && l.contains("panics")).count();
        assert!((1..=5).contains(&warnings), "{warnings} warnings for 32 faults:\n{}", server.log());

        // Again, to see that nothing was left broken; the looping version now runs off the
        // connection threads.
        assert_eq!(denial(&server.review("spin", &review).await).0, 500);
        assert!(server.log().contains("moving this version to the blocking pool"), "{}", server.log());
        assert_eq!(server.review("pod-eviction", &review).await["allowed"], true);
        let metrics = server.metrics().await;
        assert!(
            metrics.contains(r#"evac_policy_faults_total{policy="spin",version="validate_forever@sha256:"#),
            "{metrics}"
        );
        assert!(
            metrics.lines().any(|l| l.contains(r#"policy="spin""#) && l.contains(r#"kind="timeout"} 2"#)),
            "{metrics}"
        );
        assert!(
            metrics
                .lines()
                .any(|l| l.contains(r#"policy="hungry""#) && l.contains(r#"kind="memory_limit"} 1"#)),
            "{metrics}"
        );
    });
}

#[test]
fn monitor_mode_records_but_allows() {
    let server = TestServer::start(Setup {
        policies: &pod_eviction_policies("  policyMode: monitor\n"),
        context: example_context(),
        extra_args: &[],
    });
    runtime().block_on(async {
        let response = server.review("pod-eviction", &example_review("04-not-migratable.json")).await;
        assert_eq!(response["allowed"], true, "{response}");
        let metrics = server.metrics().await;
        assert!(
            metrics.lines().any(|l| l.starts_with("evac_policy_evaluations_total")
                && l.contains(r#"outcome="rejected",code="429"} 1"#)),
            "{metrics}"
        );
        // Monitor mode carries out no effect: web-1 is not marked by this drain.
        let response = server.review("pod-eviction", &example_review("01-drain-live-migratable.json")).await;
        assert_eq!(response["allowed"], true);
        assert!(!metrics.contains("evac_policy_effects_total{"), "{metrics}");
    });
}

#[test]
fn shadow_versions_are_compared_without_changing_answers() {
    // The shadow reads a KubeVirt CR that does not exist: no cluster-wide strategy, so it allows
    // where the active version (cluster-wide LiveMigrate) denies.
    let mut context = example_context();
    context["items"].as_array_mut().unwrap().push(vmi(NS, "plain-1", None, true, NODE));
    context["items"].as_array_mut().unwrap().push(launcher_pod(NS, "plain-1", NODE));
    let policies = pod_eviction_policies(&format!(
        "  shadow:\n    module: {}\n    label: v2-candidate\n    settings: {{kubevirt: {{namespace: kubevirt, name: missing}}}}\n",
        policy_path().display()
    ));
    let server = TestServer::start(Setup { policies: &policies, context, extra_args: &[] });
    runtime().block_on(async {
        let mut review = admission_review(dry_run_request(&launcher_name("plain-1")));
        review["request"]["uid"] = json!("shadow-uid-1");
        let response = server.review("pod-eviction", &review).await;
        assert_eq!(denial(&response).0, 429, "the active version answers");
        let response = server
            .review("pod-eviction", &admission_review(eviction_request(NS, "nginx-7c5ddbdf54-2xkqv")))
            .await;
        assert_eq!(response["allowed"], true);
        // Shadow evaluations finish after the answers.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let metrics = server.metrics().await;
            let disagree = metrics.lines().any(|l| {
                l.contains("policy_shadow_comparisons_total")
                    && l.contains(r#"candidate="v2-candidate@sha256:"#)
                    && l.contains(r#"result="disagree"} 1"#)
            });
            let agree = metrics
                .lines()
                .any(|l| l.contains("policy_shadow_comparisons_total") && l.contains(r#"result="agree"} 1"#));
            if disagree && agree {
                break;
            }
            assert!(Instant::now() < deadline, "{metrics}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            server.log().contains("shadow-uid-1"),
            "disagreements are logged with the uid:\n{}",
            server.log()
        );
        assert!(metrics_has_version(&server.metrics().await, "shadow", "v2-candidate"));
    });
}

fn metrics_has_version(metrics: &str, role: &str, label: &str) -> bool {
    metrics.lines().any(|l| {
        l.starts_with("evac_policy_version_info")
            && l.contains(&format!(r#"role="{role}""#))
            && l.contains(&format!(r#"version="{label}@sha256:"#))
    })
}

fn dry_run_request(pod: &str) -> Value {
    with(eviction_request(NS, pod), "/dryRun", json!(true))
}

#[test]
fn certificates_are_reloaded_when_they_change() {
    let server = TestServer::start(Setup {
        policies: &pod_eviction_policies(""),
        context: example_context(),
        extra_args: &[],
    });
    let old = std::fs::read_to_string(server.path("tls.crt")).unwrap();
    let (cert, key) = self_signed();
    replace(&server.path("tls.key"), key.as_bytes());
    replace(&server.path("tls.crt"), cert.as_bytes());
    let fresh = client_trusting(&cert);
    runtime().block_on(async {
        let review = serde_json::to_vec(&example_review("11-plain-pod.json")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let request =
                fresh.post(server.url("/validate/pod-eviction")).header("content-type", "application/json");
            let sent = request.body(review.clone()).send().await;
            if sent.is_ok_and(|r| r.status() == 200) {
                break;
            }
            assert!(Instant::now() < deadline, "the new certificate was not served:\n{}", server.log());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // New connections from a client that trusts only the old certificate now fail.
        let stale = client_trusting(&old);
        assert!(stale.get(server.url("/")).send().await.is_err());
        assert!(server.metrics().await.contains(r#"evac_tls_reloads_total{result="applied"} 1"#));

        // SIGHUP reloads too (here: nothing changed, so nothing is swapped).
        server.hangup();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !server.log().contains("SIGHUP: reloading") {
            assert!(Instant::now() < deadline, "no reload on SIGHUP:\n{}", server.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    // Compiled modules were cached for the next start.
    let cached = std::fs::read_dir(evac_e2e::server::cache_dir()).unwrap();
    assert!(cached.filter_map(Result::ok).any(|e| e.path().extension().is_some_and(|x| x == "cwasm")));
}

#[test]
fn invalid_policies_are_start_up_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = self_signed();
    std::fs::write(dir.path().join("tls.crt"), cert).unwrap();
    std::fs::write(dir.path().join("tls.key"), key).unwrap();
    let run = |policies: &str| {
        std::fs::write(dir.path().join("policies.yml"), policies).unwrap();
        let output = Command::new(evac_bin())
            .args(["serve", "--config"])
            .arg(dir.path().join("policies.yml"))
            .args(["--insecure-http", "--context"])
            .arg(example("context.yaml"))
            .args(["--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0"])
            .output()
            .unwrap();
        assert!(!output.status.success());
        String::from_utf8(output.stderr).unwrap()
    };
    let module = policy_path().display().to_string();
    let err = run(&format!("pod-eviction:\n  module: {module}\n  settings: {{kubevirt: 7}}\n"));
    assert!(err.contains("policy pod-eviction: invalid settings: invalid type: integer `7`"), "{err}");
    assert!(!err.contains("invalid settings: invalid settings"), "{err}");
    let err = run("pod-eviction:\n  module: /nonexistent/policy.wasm\n");
    assert!(err.contains("policy pod-eviction: cannot read module /nonexistent/policy.wasm"), "{err}");
    let err = run(&format!("bad:\n  module: {}\n", test_data("wat/no_guest_call.wat").display()));
    assert!(err.contains("does not export `__guest_call`"), "{err}");
    let err = run(&format!("pod-eviction:\n  module: {module}\n  polcyMode: protect\n"));
    assert!(err.contains("unknown field `polcyMode`"), "{err}");
}

/// Connections that send nothing are closed at `--client-timeout-ms`; at `--max-connections`
/// a new one is served and the one idle longest is closed to make room; the probe port answers
/// all along.
#[test]
fn idle_and_excess_connections_are_closed() {
    use std::io::Read;
    use std::net::TcpStream;

    let server = TestServer::start(Setup {
        policies: &pod_eviction_policies(""),
        context: example_context(),
        extra_args: &["--max-connections", "4", "--client-timeout-ms", "3000"],
    });
    let connect = || {
        let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        stream
    };
    // Closed by the server: a read ends (no data), it does not wait out the 30 s.
    let closed = |mut stream: &TcpStream| {
        let mut byte = [0u8; 1];
        matches!(stream.read(&mut byte), Ok(0) | Err(_))
    };
    let open = |stream: &TcpStream| {
        stream.set_nonblocking(true).unwrap();
        let mut byte = [0u8; 1];
        let open = matches!((&*stream).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
        stream.set_nonblocking(false).unwrap();
        open
    };
    let idle: Vec<TcpStream> = (0..4).map(|_| connect()).collect();
    std::thread::sleep(Duration::from_millis(300));
    let fifth = connect();
    // One of the four is closed to make room for the fifth (the one accepted first: the admission
    // threads' listeners may accept in another order than the connects), and the other three
    // are still open (their time is not up).
    std::thread::sleep(Duration::from_millis(300));
    let still_open = idle.iter().filter(|stream| open(stream)).count();
    assert_eq!(still_open, 3, "one idle connection, and only one, makes room at the cap");
    assert!(open(&fifth), "the new connection is served");
    // The probe port answers meanwhile.
    runtime().block_on(async {
        let readiness =
            reqwest::get(format!("http://127.0.0.1:{}/readiness", server.probe_port)).await.unwrap();
        assert_eq!(readiness.status().as_u16(), 200);
    });
    // Then the client timeout closes them, and real requests are served.
    for stream in idle.iter().chain([&fifth]) {
        assert!(closed(stream), "an idle connection outlived the client timeout");
    }
    runtime().block_on(async {
        let response = server.review("pod-eviction", &example_review("11-plain-pod.json")).await;
        assert_eq!(response["allowed"], true);
    });
}
