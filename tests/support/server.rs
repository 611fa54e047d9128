//! Running `evac serve` (the built binary) for the server tests: a temporary directory with a
//! self-signed certificate, `policies.yml` and a context file; the process on free loopback
//! ports; an HTTPS client that trusts only that certificate.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::evac_bin;

/// A self-signed certificate for 127.0.0.1, as PEM: `(certificate, key)`.
pub fn self_signed() -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("certificate");
    (certified.cert.pem(), certified.signing_key.serialize_pem())
}

/// The addresses a server reported it listens on (its `listening:` line): name -> URL.
#[derive(Debug, Clone)]
pub struct Listening(std::collections::BTreeMap<String, String>);

impl Listening {
    /// The URL a server listens on for `what` (`admission`, `probes`, `api`, `metrics`).
    pub fn url(&self, what: &str) -> &str {
        self.0.get(what).unwrap_or_else(|| panic!("the server reported no {what} address: {:?}", self.0))
    }

    /// The port of that URL.
    pub fn port(&self, what: &str) -> u16 {
        let url = self.url(what);
        url.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no port in {url}"))
    }
}

/// Starts an `evac` server whose addresses are port 0, with standard error to `log`, and waits
/// (at most 60 s: a first start compiles modules) for the line it prints on standard output
/// with the ports the system gave it: no port is ever chosen before the server binds it.
pub fn spawn_listening(args: &[String], log: &Path) -> (Child, Listening) {
    use std::io::BufRead;
    let mut child = Command::new(evac_bin())
        .args(args)
        .env("EVAC_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("cannot start evac");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if let Some(addresses) = line.strip_prefix("listening: ") {
                let parsed = addresses
                    .split_whitespace()
                    .filter_map(|pair| pair.split_once('='))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                let _ = tx.send(parsed);
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(addresses) => (child, Listening(addresses)),
        Err(_) => {
            let _ = child.kill();
            panic!(
                "evac {} did not report its addresses:\n{}",
                args.join(" "),
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
    }
}

/// An `evac serve` process of a test, with its files and a client.
pub struct TestServer {
    child: Child,
    /// Its directory: policies.yml, the context, the certificates.
    pub dir: tempfile::TempDir,
    /// Its admission port.
    pub port: u16,
    /// Its probes' and metrics' port.
    pub probe_port: u16,
    /// A client that trusts its certificate.
    pub client: reqwest::Client,
    log: PathBuf,
}

/// What a server test starts with.
pub struct Setup<'a> {
    /// policies.yml's text.
    pub policies: &'a str,
    /// The cluster's objects, as a context file.
    pub context: Value,
    /// More arguments to `evac serve`.
    pub extra_args: &'a [&'a str],
}

impl TestServer {
    /// Starts `evac serve` over TLS and waits until it is ready (at most 60 s: the first start
    /// compiles the modules).
    pub fn start(setup: Setup<'_>) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = self_signed();
        write(dir.path(), "tls.crt", &cert);
        write(dir.path(), "tls.key", &key);
        write(dir.path(), "policies.yml", setup.policies);
        write(dir.path(), "context.json", &serde_json::to_string(&setup.context).unwrap());
        let log = dir.path().join("server.log");
        let p = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
        let mut args = vec![
            "serve".to_owned(),
            "--config".into(),
            p("policies.yml"),
            "--cert-file".into(),
            p("tls.crt"),
            "--key-file".into(),
            p("tls.key"),
            "--context".into(),
            p("context.json"),
            "--addr".into(),
            "127.0.0.1:0".into(),
            "--probe-addr".into(),
            "127.0.0.1:0".into(),
            "--cache-dir".into(),
            cache_dir().to_str().unwrap().to_owned(),
        ];
        args.extend(setup.extra_args.iter().map(|a| a.to_string()));
        let (child, listening) = spawn_listening(&args, &log);
        let (port, probe_port) = (listening.port("admission"), listening.port("probes"));
        let client = client_trusting(&cert);
        let mut server = Self { child, dir, port, probe_port, client, log };
        server.wait_ready(Duration::from_secs(60));
        server
    }

    /// A file of its directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The admission URL of a path.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    /// The server's log so far (stderr), for assertions and failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let url = format!("http://127.0.0.1:{}/readiness", self.probe_port);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("evac serve exited with {status} before it was ready:\n{}", self.log());
            }
            if get_status(&url).is_ok_and(|status| status == 200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "evac serve was not ready within {timeout:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The Prometheus text of `/metrics`.
    pub async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.probe_port);
        reqwest::get(&url).await.expect("metrics").text().await.expect("metrics text")
    }

    /// The process id, to read its descriptors and memory from `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// POSTs a body to `/validate/<policy>`: the status and the body (JSON when it is JSON).
    pub async fn post(&self, policy: &str, body: Vec<u8>) -> (u16, Value) {
        self.post_as(policy, body, Some("application/json")).await
    }

    /// [`post`](Self::post) with this `Content-Type` (none when `None`).
    pub async fn post_as(&self, policy: &str, body: Vec<u8>, content_type: Option<&str>) -> (u16, Value) {
        let mut request = self.client.post(self.url(&format!("/validate/{policy}")));
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let response = request
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("request failed: {e:?}\n{}", self.log()));
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// Sends an AdmissionReview and returns its `response` (the status must be 200).
    pub async fn review(&self, policy: &str, review: &Value) -> Value {
        let (status, body) = self.post(policy, serde_json::to_vec(review).unwrap()).await;
        assert_eq!(status, 200, "answer: {body}\n{}", self.log());
        body["response"].clone()
    }

    /// Sends SIGHUP (reload).
    pub fn hangup(&self) {
        hang_up(self.child.id());
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What pod-eviction may read, as a `policies.yml` entry's lines (after its `module`).
pub const POD_EVICTION_GRANTS: &str = "
  hostCapabilities: [kubernetes/*]
  contextAwareResources:
    - {apiVersion: v1, kind: Pod}
    - {apiVersion: kubevirt.io/v1, kind: VirtualMachineInstance}
    - {apiVersion: kubevirt.io/v1, kind: KubeVirt}";

/// One compile cache for all server tests, so each module compiles once per test run.
pub fn cache_dir() -> PathBuf {
    std::env::temp_dir().join(format!("evac-test-cache-{}", std::process::id()))
}

/// Writes a file of a test's directory.
pub fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("cannot write {name}: {e}"));
}

/// Replaces a file by writing a temporary one and renaming it over, as editors and Kubernetes
/// volumes do.
pub fn replace(path: &Path, bytes: &[u8]) {
    let temporary = path.with_extension("tmp-replace");
    std::fs::write(&temporary, bytes).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

/// An HTTPS client that trusts only `cert_pem`.
pub fn client_trusting(cert_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).expect("certificate"))
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

/// The status of a plain-HTTP GET, without an async runtime (readiness polling).
fn get_status(url: &str) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("http URL");
    let (host, path) = rest.split_once('/').expect("path");
    let mut stream = std::net::TcpStream::connect(host)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    write!(stream, "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok());
    status.ok_or_else(|| std::io::Error::other("no status line"))
}

/// A child process, killed when dropped (a failed assertion leaves no server behind).
pub struct Process(pub Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends SIGHUP (reload) to process `pid`.
pub fn hang_up(pid: u32) {
    let status = Command::new("kill").args(["-HUP", &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill -HUP {pid}");
}

/// Waits (up to 20 s) until the log file at `log` says `text`; fails with the log otherwise.
pub async fn wait_for_log(log: &Path, text: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let said = std::fs::read_to_string(log).unwrap_or_default();
        if said.contains(text) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{} never said {text:?}:\n{said}", log.display());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Starts `evac <args>` on port 0; its addresses come from the line it prints.
pub fn spawn(args: &[&str], log: &Path) -> (Process, Listening) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (child, listening) = spawn_listening(&args, log);
    (Process(child), listening)
}

/// Waits up to 60 s for `url` to answer with a success; fails with `what` and the log otherwise.
pub async fn wait_until_ok(url: &str, what: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !reqwest::get(url).await.is_ok_and(|r| r.status().is_success()) {
        assert!(
            Instant::now() < deadline,
            "{what} did not come up:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
