//! What no client, API server outage or file beside the configuration can do to `evac serve` and
//! `evac control`: hold their connections, starve their probes, keep them unready after the API
//! server is back, or make them reload and log for ever. Each test holds a claim of
//! `docs/security.md`.

use std::io::Read;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use evac_e2e::server::{replace, spawn, wait_until_ok, Process, Setup, TestServer, POD_EVICTION_GRANTS};
use evac_e2e::*;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn pod_eviction_policies() -> String {
    format!("pod-eviction:\n  module: {}\n  label: v1{POD_EVICTION_GRANTS}\n", policy_path().display())
}

fn example_context() -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(example("context.yaml")).unwrap()).unwrap()
}

fn review_bytes() -> Vec<u8> {
    std::fs::read(example("requests/11-plain-pod.json")).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn server_with(extra_args: &[&str]) -> TestServer {
    TestServer::start(Setup { policies: &pod_eviction_policies(), context: example_context(), extra_args })
}

/// A TLS connection to the admission port, its handshake done, offering `alpn`.
async fn tls_connect(
    server: &TestServer,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls_pki_types::pem::PemObject;
    let pem = std::fs::read(server.path("tls.crt")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    connector.connect(name, tcp).await.expect("TLS handshake")
}

/// Whether the server closes `stream` within `within` (a read ends without data).
async fn closed_within<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, within: Duration) -> bool {
    let mut byte = [0u8; 1];
    matches!(tokio::time::timeout(within, stream.read(&mut byte)).await, Ok(Ok(0) | Err(_)))
}

/// A connection that completes its TLS handshake and then sends nothing is closed at the client
/// timeout; while such connections fill the server's allowance, real requests are served (the
/// one idle longest makes room).
#[test]
fn connections_that_never_speak_are_closed_and_hold_nothing() {
    let server = server_with(&["--max-connections", "8", "--client-timeout-ms", "1500"]);
    runtime().block_on(async {
        let mut silent = Vec::new();
        for alpn in [b"http/1.1".as_slice(), b"h2"].iter().cycle().take(8) {
            silent.push(tls_connect(&server, alpn).await);
        }
        // Every slot is held by a silent connection, and a real request is still answered.
        let (status, body) = server.post("pod-eviction", review_bytes()).await;
        assert_eq!(status, 200, "{body}");
        let started = Instant::now();
        for stream in &mut silent {
            assert!(
                closed_within(stream, Duration::from_secs(20)).await,
                "a silent connection was still open {:?} after it was made (client timeout 1.5 s)",
                started.elapsed()
            );
        }
    });
}

/// A request whose body never arrives is answered 408 at the client timeout, on HTTP/1.1 and on
/// HTTP/2, and gives its memory back.
#[test]
fn a_body_that_never_arrives_is_a_408_on_both_protocols() {
    let server = server_with(&["--client-timeout-ms", "1500"]);
    runtime().block_on(async {
        // HTTP/1.1: headers promise 100,000 bytes, 10 come.
        let mut stream = tls_connect(&server, b"http/1.1").await;
        let head = "POST /validate/pod-eviction HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                    Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"kind\":12";
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(20), async {
            let mut buffer = [0u8; 4096];
            while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => answer.extend_from_slice(&buffer[..n]),
                }
            }
        })
        .await;
        assert!(read.is_ok(), "no answer 20 s after a stalled HTTP/1.1 body");
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");

        // HTTP/2: a stream that sends 10 bytes and never ends.
        let stream = tls_connect(&server, b"h2").await;
        let (mut client, connection) = h2::client::handshake(stream).await.expect("HTTP/2 handshake");
        tokio::spawn(connection);
        let request = http::Request::post(server.url("/validate/pod-eviction"))
            .header("content-type", "application/json")
            .body(())
            .unwrap();
        let (response, mut body) = client.send_request(request, false).unwrap();
        body.send_data(bytes::Bytes::from_static(b"{\"kind\":12"), false).unwrap();
        let response = tokio::time::timeout(Duration::from_secs(20), response)
            .await
            .expect("no answer 20 s after a stalled HTTP/2 body")
            .unwrap();
        assert_eq!(response.status().as_u16(), 408);

        let metrics = server.metrics().await;
        assert!(
            metrics.contains(r#"evac_admission_requests_refused_total{reason="timeout"} 2"#),
            "{metrics}"
        );
    });
}

/// However many idle connections clients leave on the probe port, `/readiness` and `/liveness`
/// answer at once: the one idle longest is closed for each new one.
#[test]
fn probes_answer_whatever_idles_on_their_port() {
    let server = server_with(&[]);
    let idle: Vec<TcpStream> =
        (0..200).map(|_| TcpStream::connect(("127.0.0.1", server.probe_port)).unwrap()).collect();
    runtime().block_on(async {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
        for probe in ["readiness", "liveness", "metrics"] {
            let url = format!("http://127.0.0.1:{}/{probe}", server.probe_port);
            let answer = client.get(&url).send().await;
            assert!(
                answer.as_ref().is_ok_and(|r| r.status() == 200),
                "{probe} beside 200 idle sockets: {answer:?}"
            );
        }
    });
    // At most the port's allowance stays open.
    let open = idle.iter().filter(|stream| still_open(stream)).count();
    assert!(open <= 64, "{open} idle probe connections kept open");
}

/// Whether the server has not closed `stream` (a read would block).
fn still_open(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let open = matches!((&*stream).read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    open
}

/// The descriptors a process has open.
fn descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |dir| dir.count())
}

/// With a refused `policies.yml` and a file beside it that keeps changing (a log), the refusal
/// is logged and counted once; an edit of the file itself, or SIGHUP, is the next refusal.
#[test]
fn a_refused_configuration_is_reported_once_whatever_changes_beside_it() {
    let server = server_with(&[]);
    replace(&server.path("policies.yml"), b"pod-eviction: [\n");
    let refused = r#"evac_policy_swaps_total{policy="*",result="refused"}"#;
    let rt = runtime();
    let count = |server: &TestServer| rt.block_on(async { metric(&server.metrics().await, refused) });
    let beside = server.path("evac.log");
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut written = 0;
    while Instant::now() < deadline {
        std::fs::write(&beside, format!("line {written}\n")).unwrap();
        written += 1;
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(count(&server), 1.0, "{written} writes beside it:\n{}", server.log());
    assert_eq!(server.log().matches("policies file refused").count(), 1, "{}", server.log());
    server.hangup();
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(&server) < 2.0 {
        assert!(Instant::now() < deadline, "SIGHUP did not reload:\n{}", server.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // And the policies served all along.
    rt.block_on(async {
        let (status, body) = server.post("pod-eviction", review_bytes()).await;
        assert_eq!(status, 200, "{body}");
    });
}

/// The value of a metric line (`name{labels} value`), 0 when absent.
fn metric(metrics: &str, series: &str) -> f64 {
    metrics.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0.0)
}

/// `evac sim serve` on the example cluster, writing its kubeconfig into `dir`.
async fn start_sim(dir: &std::path::Path) -> (Process, String) {
    start_sim_with(dir, &[]).await
}

/// [`start_sim`] with more arguments.
async fn start_sim_with(dir: &std::path::Path, extra: &[&str]) -> (Process, String) {
    let kubeconfig = dir.join("kubeconfig");
    let objects = example("context.yaml");
    let args = ["sim", "serve", "--addr", "127.0.0.1:0", "--kubeconfig", kubeconfig.to_str().unwrap()];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--objects", objects.to_str().unwrap()]);
    args.extend(extra);
    let (api, listening) = spawn(&args, &dir.join("sim.log"));
    let url = listening.url("api").to_owned();
    wait_until_ok(&format!("{url}/api"), "the simulated API", &dir.join("sim.log")).await;
    (api, url)
}

/// `examples/control/policies.yml` with absolute module paths, written into `dir`.
fn control_policies(dir: &std::path::Path) -> std::path::PathBuf {
    let example = repo_root().join("examples/control/policies.yml");
    let dist = repo_root().join("dist/");
    let text = std::fs::read_to_string(example).unwrap().replace("../../dist/", dist.to_str().unwrap());
    let path = dir.join("policies.yml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `evac control`: a refused `policies.yml` (YAML that does not parse, an unknown `policyMode`)
/// is counted and logged once per content, at one level; 300 idle connections to its metrics port
/// do not take its descriptors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evac_control_reports_each_refusal_once_and_keeps_its_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, _) = start_sim(dir.path()).await;
    let policies = control_policies(dir.path());
    let log = dir.path().join("control.log");
    let (p, k) = (policies.to_str().unwrap(), dir.path().join("kubeconfig"));
    let cache = evac_e2e::server::cache_dir();
    let args = ["control", "--metrics-addr", "127.0.0.1:0", "--leader-elect=false", "--policies", p];
    let mut args: Vec<&str> = args.to_vec();
    args.extend(["--kubeconfig", k.to_str().unwrap(), "--cache-dir", cache.to_str().unwrap()]);
    let (control, listening) = spawn(&args, &log);
    let metrics_url = format!("{}/metrics", listening.url("metrics"));
    wait_until_ok(&metrics_url, "evac control", &log).await;
    // At start, which disruptions it acts on: one line per feature gate, as the CR has it.
    let started = std::fs::read_to_string(&log).unwrap();
    for gate in [
        "PreemptionEvictionLiveMigration",
        "NoExecuteTaintEvictionLiveMigration",
        "NodePressureEvictionLiveMigration",
    ] {
        let line = started.lines().find(|l| l.contains(&format!("feature gate {gate} is")));
        assert!(line.is_some(), "no start-up line for {gate}:\n{started}");
    }
    // Its probes (a Deployment's readiness and liveness), and its own families only.
    for probe in ["readiness", "liveness"] {
        let url = format!("{}/{probe}", listening.url("metrics"));
        wait_until_ok(&url, "evac control's probe", &log).await;
    }
    let text = reqwest::get(&metrics_url).await.unwrap().text().await.unwrap();
    for family in [
        "evac_controller_reconcile_duration_seconds",
        "evac_disruptions_total",
        "evac_evacuations_pending",
        "process_resident_memory_bytes",
    ] {
        assert!(text.contains(&format!("# TYPE {family}")), "{family} missing:\n{text}");
    }
    for other in ["evac_admission_requests_refused", "evac_tls_reloads", "evac_holds"] {
        assert!(!text.contains(other), "evac control exports {other}:\n{text}");
    }
    let refused = r#"evac_policy_swaps_total{policy="*",result="refused"}"#;
    let count =
        || async { metric(&reqwest::get(&metrics_url).await.unwrap().text().await.unwrap(), refused) };
    let original = std::fs::read_to_string(&policies).unwrap();
    let contents = [
        "pod-eviction: [\n".to_owned(),
        original.replacen("  module:", "  policyMode: enforce\n  module:", 1),
    ];
    for (n, content) in contents.iter().enumerate() {
        // Replaced whole, as editors and ConfigMap volumes do (a truncating write can be read half done).
        replace(&policies, content.as_bytes());
        let deadline = Instant::now() + Duration::from_secs(10);
        while count().await < (n + 1) as f64 {
            let log = std::fs::read_to_string(&log).unwrap();
            assert!(Instant::now() < deadline, "refusal {} not counted:\n{log}", n + 1);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(count().await, 2.0);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("refused") || l.contains("reload")).collect();
    assert_eq!(lines.len(), 2, "one line per refused content:\n{}", lines.join("\n"));
    assert!(lines[0].contains("ERROR") && lines[1].contains("ERROR"), "{lines:?}");
    assert!(lines[1].contains("unknown variant `enforce`"), "{lines:?}");

    // Idle scrapers cannot take every descriptor.
    let port = listening.port("metrics");
    let before = descriptors(control.0.id());
    let idle: Vec<TcpStream> = (0..300).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = descriptors(control.0.id()).saturating_sub(before);
    assert!(held <= 70, "300 idle connections hold {held} descriptors");
    let answer = reqwest::get(&metrics_url).await;
    assert!(answer.is_ok_and(|r| r.status() == 200), "metrics beside 300 idle sockets");
    drop(idle);
}

/// A TCP proxy between the hosts and the simulated API server that can cut every connection and
/// refuse new ones: the API server's outage, as a network partition sees it.
struct FaultProxy {
    down: Arc<AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
    port: u16,
}

impl FaultProxy {
    /// While down, `silent: false` closes every connection and refuses new ones (the API server
    /// gone); `silent: true` keeps them open and forwards nothing, for ever for those open at the
    /// cut (a partition, a load balancer's failover: connections that die without a word).
    async fn start(upstream: std::net::SocketAddr, silent: bool) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let down = Arc::new(AtomicBool::new(false));
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let (accepting, cuts) = (Arc::clone(&down), cut.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else { continue };
                if accepting.load(Ordering::SeqCst) {
                    if silent {
                        tokio::spawn(hold_for_ever(client));
                    }
                    continue;
                }
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else { return };
                    let was_cut = tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => false,
                        _ = cut.changed() => true,
                    };
                    if was_cut && silent {
                        hold_for_ever((client, server)).await;
                    }
                });
            }
        });
        Self { down, cut, port }
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
        if down {
            self.cut.send_modify(|n| *n += 1);
        }
    }
}

/// Keeps what it is given (open sockets) until the test ends.
async fn hold_for_ever<T>(held: T) {
    std::future::pending::<()>().await;
    drop(held);
}

/// `evac sim serve` (with `sim_args`), a [`FaultProxy`] before it, and `evac serve` of
/// pod-eviction reading the cluster through the proxy, ready: the API's URL, the proxy, the
/// server, its addresses and its log.
async fn serve_behind_proxy(
    dir: &std::path::Path,
    silent: bool,
    sim_args: &[&str],
) -> (Process, String, FaultProxy, Process, evac_e2e::server::Listening, std::path::PathBuf) {
    let (api, url) = start_sim_with(dir, sim_args).await;
    let upstream: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    let proxy = FaultProxy::start(upstream, silent).await;
    let kubeconfig = dir.join("kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig)
        .unwrap()
        .replace(&url, &format!("http://127.0.0.1:{}", proxy.port));
    std::fs::write(&kubeconfig, text).unwrap();
    let policies = format!("pod-eviction:\n  module: {}{POD_EVICTION_GRANTS}\n", policy_path().display());
    std::fs::write(dir.join("policies.yml"), policies).unwrap();
    let p = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (config, kubeconfig) = (p("policies.yml"), p("kubeconfig"));
    let mut args = vec!["serve", "--config", &config, "--kubeconfig", &kubeconfig, "--insecure-http"];
    args.extend([
        "--addr",
        "127.0.0.1:0",
        "--probe-addr",
        "127.0.0.1:0",
        "--max-cache-staleness-seconds",
        "10",
    ]);
    let log = dir.join("server.log");
    let (server, listening) = spawn(&args, &log);
    wait_until_ok(&format!("{}/readiness", listening.url("probes")), "evac serve", &log).await;
    (api, url, proxy, server, listening, log)
}

/// After an API server outage longer than the staleness bound, `evac serve` is ready again
/// within seconds of the API server's return, though nothing changed in the cluster meanwhile
/// (its watches resume with nothing to tell).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_returns_within_seconds_of_the_api_server() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, _, proxy, _server, listening, log) = serve_behind_proxy(dir.path(), false, &[]).await;
    let readiness = format!("{}/readiness", listening.url("probes"));
    let status = || async { reqwest::get(&readiness).await.map(|r| r.status().as_u16()).unwrap_or(0) };

    // The outage: long enough for readiness to fail, then some more.
    proxy.set_down(true);
    let deadline = Instant::now() + Duration::from_secs(30);
    while status().await != 503 {
        assert!(Instant::now() < deadline, "still ready 30 s into the outage");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    proxy.set_down(false);
    let back = Instant::now();
    while status().await != 200 {
        assert!(
            back.elapsed() < Duration::from_secs(15),
            "not ready 15 s after the API server came back:\n{}",
            std::fs::read_to_string(&log).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("ready again {:.1} s after the API server came back", back.elapsed().as_secs_f64());
}

/// A process's resident memory now and at its peak, in MiB (`/proc/<pid>/status`).
fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// 64 concurrent 3 MB reviews (the API server's largest objects, a burst from a drain of big
/// pods) stay well under the deployment's 512Mi limit, and the memory they took is given back.
#[test]
fn a_burst_of_large_reviews_stays_under_the_memory_limit_and_is_given_back() {
    let server = server_with(&[]);
    let mut review: Value = serde_json::from_slice(&review_bytes()).unwrap();
    review["request"]["object"]["metadata"]["annotations"] =
        serde_json::json!({"padding": "x".repeat(3 * 1024 * 1024)});
    let body = serde_json::to_vec(&review).unwrap();
    let (idle, _) = memory_mib(server.pid());
    runtime().block_on(async {
        for _ in 0..2 {
            let requests = (0..64).map(|_| server.post("pod-eviction", body.clone()));
            for (status, answer) in futures::future::join_all(requests).await {
                assert_eq!(status, 200, "{answer}");
            }
        }
    });
    let (_, peak) = memory_mib(server.pid());
    std::thread::sleep(Duration::from_secs(3));
    let (after, _) = memory_mib(server.pid());
    println!("resident memory: {idle:.0} MiB idle, {peak:.0} MiB at the peak, {after:.0} MiB 3 s after");
    // Before the body budget and the give-back: 415 MiB at the peak, 320 MiB kept.
    assert!(peak <= 320.0, "{peak:.0} MiB at the peak");
    assert!(after <= 128.0, "{after:.0} MiB kept after the burst");
}

/// A partition: every connection to the API server dies without a word (the fault proxy keeps
/// them open and forwards nothing). Once the API server answers again, `evac serve`'s caches
/// follow the cluster again, though their watches' old connections never end: a VMI marked
/// during the partition's end is seen within seconds, not after the client's read timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_on_connections_dead_without_a_word_start_over() {
    let dir = tempfile::tempdir().unwrap();
    let (_api, url, proxy, _server, listening, log) =
        serve_behind_proxy(dir.path(), true, &["--no-components"]).await;
    let readiness = format!("{}/readiness", listening.url("probes"));
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let status = || async { client.get(&readiness).send().await.map(|r| r.status().as_u16()).unwrap_or(0) };

    proxy.set_down(true);
    let deadline = Instant::now() + Duration::from_secs(40);
    while status().await != 503 {
        assert!(Instant::now() < deadline, "still ready 40 s into the partition");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    proxy.set_down(false);
    // The mark, written straight to the API server (not through the partition).
    let mark = serde_json::json!({"status": {"evacuationNodeName": NODE}});
    let vmi = format!("{url}/apis/kubevirt.io/v1/namespaces/{NS}/virtualmachineinstances/web-1");
    let written = client
        .patch(&vmi)
        .header("content-type", "application/merge-patch+json")
        .body(mark.to_string())
        .send()
        .await
        .unwrap();
    assert!(written.status().is_success(), "{}", written.text().await.unwrap());
    let back = Instant::now();
    let review = admission_review(eviction_request(NS, "virt-launcher-web-1-8xk2p"));
    let admission = format!("{}/validate/pod-eviction", listening.url("admission"));
    loop {
        let mut dry_run = review.clone();
        dry_run["request"]["dryRun"] = serde_json::json!(true);
        let answer = client
            .post(&admission)
            .header("content-type", "application/json")
            .body(dry_run.to_string())
            .send()
            .await;
        let message = match answer {
            Ok(answer) => answer.text().await.map_err(|e| e.to_string()).and_then(|text| {
                let value: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
                Ok(value["response"]["status"]["message"].clone())
            }),
            Err(e) => Err(e.to_string()),
        };
        if message.as_ref().is_ok_and(|m| m.as_str().is_some_and(|m| m.starts_with("Evacuation in progress")))
        {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(30),
            "the mark was not seen 30 s after the partition ended ({message:?}):\n{}",
            std::fs::read_to_string(&log).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!("the mark seen {:.1} s after the partition ended", back.elapsed().as_secs_f64());
}
