//! Running the binaries a test drives (`evac eval`, `kwctl`) with a time limit: a host that hangs
//! fails its test with what it printed, instead of hanging the suite.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one run of a binary may take: far beyond a slow, cold run (compiling a module on a
/// loaded machine), so only a hang reaches it.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(300);

/// Runs `command` to its end, its output captured, or kills it after `limit`.
pub fn output_within(command: &mut Command, limit: Duration) -> Result<Output, String> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    // Read both pipes as the child writes, so that a full pipe never stalls it.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait().map_err(|e| format!("cannot wait for {program}: {e}"))? {
            Some(status) => break status,
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
                return Err(format!("{program} did not finish within {limit:?}; it printed: {stderr}"));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}
