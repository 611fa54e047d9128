//! Kubewarden's own hosts (`kwctl` and `policy-server` 1.36, from `../shared/kubewarden/` or
//! `$EVAC_KUBEWARDEN_DIR`) beside evac's (`evac eval`, `evac serve`), for the interoperability
//! tests: each host evaluates a request and reports a [`Verdict`], so the tests can ask for one
//! verdict per case. Kubewarden's hosts read the cluster through KUBECONFIG, as in a cluster;
//! evac's read the same objects from a context file.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::server::{spawn, wait_until_ok, Process};
use crate::{evac_bin, repo_root, test_data};

/// Where Kubewarden's `kwctl` and `policy-server` are, if they are; says so when they are not.
pub fn kubewarden_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("EVAC_KUBEWARDEN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/kubewarden"));
    let present = ["kwctl", "policy-server"].iter().all(|binary| dir.join(binary).is_file());
    if !present {
        eprintln!(
            "skipped: Kubewarden's kwctl and policy-server are not in {} (set EVAC_KUBEWARDEN_DIR)",
            dir.display()
        );
    }
    present.then_some(dir)
}

/// A Sigstore trust root (a CA and a log key whose private keys nobody kept) given to both
/// Kubewarden binaries: without one they fetch Sigstore's over the network at every start, which
/// costs about a second of retries where there is no network. No policy here is signed, so
/// nothing is verified against it.
pub fn sigstore_trust_config() -> PathBuf {
    test_data("kubewarden/sigstore-trust-config.json")
}

/// A verdict as every host reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Whether the request is allowed.
    pub allowed: bool,
    /// The status code of a refusal.
    pub code: Option<u64>,
    /// The refusal's message.
    pub message: String,
}

impl Verdict {
    /// From an AdmissionResponse (`allowed`, `status.code`, `status.message`).
    pub fn of_response(response: &Value) -> Result<Self, String> {
        let allowed = response["allowed"].as_bool().ok_or_else(|| format!("no allowed: {response}"))?;
        Ok(Self {
            allowed,
            code: if allowed { None } else { response["status"]["code"].as_u64() },
            message: response["status"]["message"].as_str().unwrap_or_default().to_owned(),
        })
    }

    /// From evac eval's PolicyResponse (`accepted`, `code`, `message`).
    pub fn of_policy_response(response: &Value) -> Result<Self, String> {
        let allowed = response["accepted"].as_bool().ok_or_else(|| format!("no accepted: {response}"))?;
        Ok(Self {
            allowed,
            code: if allowed { None } else { response["code"].as_u64() },
            message: response["message"].as_str().unwrap_or_default().to_owned(),
        })
    }
}

/// What a host is asked to evaluate.
pub struct Evaluation<'a> {
    /// The built module.
    pub module: &'a Path,
    /// An AdmissionReview, as a file.
    pub review: &'a Path,
    /// The policy's settings.
    pub settings: &'a Value,
    /// The module may call no host capability at all.
    pub refused: bool,
}

/// `evac eval`, reading the cluster from `context`; the verdict and the whole PolicyResponse.
pub fn evac_eval(
    evaluation: &Evaluation<'_>,
    context: &Path,
    cache_dir: &Path,
) -> Result<(Verdict, Value), String> {
    let mut command = Command::new(evac_bin());
    command.args(["eval", "--policy"]).arg(evaluation.module).arg("--request").arg(evaluation.review);
    command.arg("--context").arg(context).arg("--cache-dir").arg(cache_dir);
    command.arg("--settings").arg(evaluation.settings.to_string());
    if evaluation.refused {
        command.arg("--allowed-host-capabilities");
    }
    let output = crate::command::output_within(&mut command, crate::command::COMMAND_LIMIT)?;
    if !output.status.success() {
        return Err(format!("evac eval failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    let response: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("evac eval: {e}: {}", String::from_utf8_lossy(&output.stdout)))?;
    Ok((Verdict::of_policy_response(&response)?, response))
}

/// `kwctl run`, reading the cluster through `kubeconfig`, with `home` as its home (its store
/// and wasmtime cache).
pub fn kwctl_run(
    kubewarden: &Path,
    home: &Path,
    kubeconfig: &Path,
    evaluation: &Evaluation<'_>,
) -> Result<Verdict, String> {
    Verdict::of_response(&kwctl_run_response(kubewarden, home, kubeconfig, evaluation)?)
}

/// [`kwctl_run`]'s whole AdmissionResponse (with a mutation's `patch`).
pub fn kwctl_run_response(
    kubewarden: &Path,
    home: &Path,
    kubeconfig: &Path,
    evaluation: &Evaluation<'_>,
) -> Result<Value, String> {
    let mut command = Command::new(kubewarden.join("kwctl"));
    command.env("KUBECONFIG", kubeconfig).env_remove("RUST_BACKTRACE").env("HOME", home);
    command.args(["run", "--allow-context-aware"]);
    if evaluation.refused {
        // Without a value, an empty allow-list; before another flag, so that it takes no value.
        command.arg("--allowed-host-capabilities");
    }
    command.arg("--sigstore-trust-config").arg(sigstore_trust_config());
    command.arg("--settings-json").arg(evaluation.settings.to_string());
    command.arg("--request-path").arg(evaluation.review);
    command.arg(format!("file://{}", evaluation.module.display()));
    let output = crate::command::output_within(&mut command, crate::command::COMMAND_LIMIT)?;
    if !output.status.success() {
        return Err(format!("kwctl run failed: {}", first_lines(&String::from_utf8_lossy(&output.stderr))));
    }
    serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("kwctl run: {e}: {}", String::from_utf8_lossy(&output.stdout)))
}

/// Kubewarden's error output without the log lines and backtraces around it.
fn first_lines(text: &str) -> String {
    text.lines()
        .filter(|line| line.starts_with("Error") || line.starts_with("Caused"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// POSTs an AdmissionReview to a server's `url`; the verdict of its answer.
pub async fn post_review(client: &reqwest::Client, url: &str, review: &Value) -> Result<Verdict, String> {
    Verdict::of_response(&post_review_response(client, url, review).await?)
}

/// [`post_review`]'s whole AdmissionResponse (with a mutation's `patch`).
pub async fn post_review_response(
    client: &reqwest::Client,
    url: &str,
    review: &Value,
) -> Result<Value, String> {
    let request = client.post(url).header("content-type", "application/json");
    let response = request.body(review.to_string()).send().await.map_err(|e| format!("{url}: {e}"))?;
    let status = response.status();
    let text = response.text().await.map_err(|e| format!("{url}: {e}"))?;
    if !status.is_success() {
        return Err(format!("{url}: HTTP {status}: {text}"));
    }
    let answer: Value = serde_json::from_str(&text).map_err(|e| format!("{url}: {e}: {text}"))?;
    Ok(answer["response"].clone())
}

/// A plain-HTTP client with a deadline, for the servers on loopback.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client")
}

/// A running `evac serve`, reading the cluster from a context file.
pub struct EvacServer {
    _process: Process,
    /// Its admission URL (`http://127.0.0.1:<port>`).
    pub url: String,
}

/// Starts `evac serve` on `policies` (plain HTTP, free ports) and waits until it is ready.
pub async fn start_evac_serve(dir: &Path, policies: &Path, context: &Path, cache_dir: &Path) -> EvacServer {
    let [policies, context, cache_dir] =
        [policies, context, cache_dir].map(|p| p.to_str().unwrap().to_owned());
    let mut args = vec!["serve", "--config", &policies, "--context", &context, "--insecure-http"];
    args.extend(["--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0", "--cache-dir", &cache_dir]);
    let log = dir.join("evac-serve.log");
    let (process, listening) = spawn(&args, &log);
    wait_until_ok(&format!("{}/readiness", listening.url("probes")), "evac serve", &log).await;
    EvacServer { _process: process, url: listening.url("admission").to_owned() }
}

/// A running simulated API server with fixed objects (no cluster component changes them).
pub struct SimulatedApi {
    _process: Process,
    /// The kubeconfig that reaches it.
    pub kubeconfig: PathBuf,
}

/// Serves the objects of `context` (a v1 List file) with `evac sim serve --no-components`.
pub async fn start_simulated_api(dir: &Path, context: &Path) -> SimulatedApi {
    let kubeconfig = dir.join("kubeconfig");
    let (kubeconfig_arg, context_arg) = (kubeconfig.to_str().unwrap(), context.to_str().unwrap());
    let args = ["sim", "serve", "--no-components", "--addr", "127.0.0.1:0"];
    let args = [&args[..], &["--kubeconfig", kubeconfig_arg, "--objects", context_arg]].concat();
    let log = dir.join("sim.log");
    let (process, listening) = spawn(&args, &log);
    wait_until_ok(&format!("{}/api", listening.url("api")), "the simulated API", &log).await;
    SimulatedApi { _process: process, kubeconfig }
}

/// A running Kubewarden policy-server.
pub struct PolicyServer {
    _process: Process,
    /// Its admission URL (`http://127.0.0.1:<port>`).
    pub url: String,
}

/// Starts Kubewarden's policy-server on `policies`, reading the cluster through `kubeconfig`,
/// and waits until it is ready. Its ports are picked free before it binds them (it cannot
/// report ports the system gave it), so a start that loses a port to another process is tried
/// again on others.
pub async fn start_policy_server(
    kubewarden: &Path,
    dir: &Path,
    kubeconfig: &Path,
    policies: &Path,
) -> PolicyServer {
    for _attempt in 0..3 {
        let host = loopback_address();
        let (port, probe) = (free_port(&host), free_port(&host));
        let (log, errors) = (dir.join("policy-server.log"), dir.join("policy-server.err"));
        let child = policy_server_command(kubewarden, dir, kubeconfig, policies, &host, (port, probe))
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&errors).unwrap())
            .spawn()
            .expect("cannot start policy-server");
        let mut process = Process(child);
        let readiness = format!("http://{host}:{probe}/readiness");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            // Ready, and its admission port answers (it binds that one last, and may lose it).
            let ready = reqwest::get(&readiness).await.is_ok_and(|r| r.status().is_success());
            if ready && tokio::net::TcpStream::connect((host.as_str(), port)).await.is_ok() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if process.0.try_wait().ok().flatten().is_none() {
                    return PolicyServer { _process: process, url: format!("http://{host}:{port}") };
                }
            }
            if process.0.try_wait().ok().flatten().is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "policy-server did not come up:\n{}",
                std::fs::read_to_string(&errors).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let output = [&log, &errors].map(|file| std::fs::read_to_string(file).unwrap_or_default()).join("\n");
        assert!(output.contains("Address already in use"), "policy-server exited:\n{output}");
    }
    panic!("policy-server found no free port in three attempts");
}

/// Kubewarden's policy-server on `policies`, reading the cluster through `kubeconfig`, its state
/// under `dir`, listening on `host` at `(port, readiness port)`.
fn policy_server_command(
    kubewarden: &Path,
    dir: &Path,
    kubeconfig: &Path,
    policies: &Path,
    host: &str,
    (port, probe): (u16, u16),
) -> Command {
    let mut command = Command::new(kubewarden.join("policy-server"));
    command.env("KUBECONFIG", kubeconfig).env_remove("RUST_BACKTRACE").env("HOME", dir);
    command.arg("--policies").arg(policies);
    command.args(["--addr", host, "--port", &port.to_string()]);
    command.args(["--readiness-probe-port", &probe.to_string()]);
    command.arg("--policies-download-dir").arg(dir.join("downloads"));
    command.arg("--sigstore-cache-dir").arg(dir.join("sigstore"));
    command.arg("--sigstore-trust-config").arg(sigstore_trust_config());
    command
}

/// A loopback address of its own for each policy-server (all of 127.0.0.0/8 is loopback): its
/// ports are picked before it binds them, and on an address nothing else uses, no other process
/// can take them in between, nor answer in its place.
fn loopback_address() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let pid = std::process::id();
    format!("127.{}.{}.{}", 1 + pid % 250, (n / 250) % 256, 1 + n % 250)
}

fn free_port(host: &str) -> u16 {
    std::net::TcpListener::bind((host, 0)).unwrap().local_addr().unwrap().port()
}

/// Runs `command` until it exits (at most 60 s); its standard error when it failed, `Ok` when it
/// is still running at the deadline or exited with success.
fn exit_error(mut command: Command, dir: &Path, name: &str) -> Result<(), String> {
    let errors = dir.join(format!("{name}.refusal.err"));
    let child = command
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errors).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
    let mut process = Process(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(status) = process.0.try_wait().unwrap() {
            let errors = std::fs::read_to_string(&errors).unwrap_or_default();
            return if status.success() { Ok(()) } else { Err(errors) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Starts `evac serve` on `policies`, expecting it to refuse them: the error it exits with.
pub fn evac_serve_refusal(
    dir: &Path,
    policies: &Path,
    context: &Path,
    cache_dir: &Path,
) -> Result<(), String> {
    let mut command = Command::new(evac_bin());
    command.arg("serve").arg("--config").arg(policies).arg("--context").arg(context);
    command.args(["--insecure-http", "--addr", "127.0.0.1:0", "--probe-addr", "127.0.0.1:0"]);
    command.arg("--cache-dir").arg(cache_dir);
    exit_error(command, dir, "evac-serve")
}

/// Starts Kubewarden's policy-server on `policies`, expecting it to refuse them: the error it
/// exits with.
pub fn policy_server_refusal(
    kubewarden: &Path,
    dir: &Path,
    kubeconfig: &Path,
    policies: &Path,
) -> Result<(), String> {
    let host = loopback_address();
    let ports = (free_port(&host), free_port(&host));
    let command = policy_server_command(kubewarden, dir, kubeconfig, policies, &host, ports);
    exit_error(command, dir, "policy-server")
}
