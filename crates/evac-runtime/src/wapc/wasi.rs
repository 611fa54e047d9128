//! WASI preview 1 for policies, answered in the host without any I/O: the clock (the engine's,
//! which a simulation sets), random bytes, empty arguments and environment, standard output and
//! error kept in memory (bounded; a panicking Rust policy writes its message there), no preopened
//! directories. Every other preview 1 function a module imports answers `ENOSYS`.
//!
//! Why not wasmtime-wasi's preview 1: its synchronous functions run its asynchronous ones on a
//! Tokio runtime of its own, which panics ("Cannot start a runtime from within a runtime") when
//! the evaluation runs on a thread of the server's or the controller's runtime, so any policy that
//! writes to stderr (every Rust policy that panics) took the process down; and its `poll_oneoff`
//! sleeps in the host, where the evaluation's epoch deadline cannot interrupt it. Here no host
//! call blocks, so the deadline holds, and nothing a policy calls can fail the host.

use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use wasmtime::{Caller, Extern, Linker, Module, Result, Val, ValType};

use super::abi::GuestState;
use super::engine::WallClock;

/// The module name of WASI preview 1 imports.
pub(crate) const MODULE: &str = "wasi_snapshot_preview1";

/// The most buffers one `fd_write` takes (WASI's `IOV_MAX`).
const IOV_MAX: u32 = 1024;

/// Output kept per instance from stdout and stderr together; the rest is counted, not kept.
pub(crate) const OUTPUT_LIMIT: usize = 4096;

/// WASI errno values (`wasi_snapshot_preview1` `errno`).
mod errno {
    pub const SUCCESS: i32 = 0;
    pub const BADF: i32 = 8;
    pub const FAULT: i32 = 21;
    pub const INVAL: i32 = 28;
    pub const NOSYS: i32 = 52;
}

/// The WASI state of one instance.
#[derive(Debug, Default)]
pub(crate) struct WasiState {
    /// The clock policies read; `None`: the host's.
    pub(crate) clock: Option<WallClock>,
    /// What the guest wrote to stdout and stderr, up to [`OUTPUT_LIMIT`] bytes.
    pub(crate) output: Vec<u8>,
}

impl WasiState {
    pub(crate) fn new(clock: Option<WallClock>) -> Self {
        Self { clock, output: Vec::new() }
    }

    /// What the guest wrote, on one line of at most 300 characters, for an error message (a
    /// panicking Rust policy writes where and why); `None` when it wrote nothing.
    pub(crate) fn summary(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.output);
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE"))
            .collect();
        if lines.is_empty() {
            return None;
        }
        let line = lines.join(" ");
        Some(match line.char_indices().nth(300) {
            Some((cut, _)) => format!("{}...", &line[..cut]),
            None => line,
        })
    }

    fn realtime(&self) -> Duration {
        match &self.clock {
            Some(clock) => (clock.0)(),
            None => SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default(),
        }
    }

    fn monotonic(&self) -> Duration {
        match &self.clock {
            // A simulated clock only moves forward: it is its own monotonic clock.
            Some(clock) => (clock.0)(),
            None => {
                static START: OnceLock<Instant> = OnceLock::new();
                START.get_or_init(Instant::now).elapsed()
            }
        }
    }
}

fn memory_of(caller: &mut Caller<'_, GuestState>) -> Option<wasmtime::Memory> {
    caller.data().memory.or_else(|| match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Some(memory),
        _ => None,
    })
}

/// Writes `bytes` at `ptr` in the guest's memory; `false` when out of bounds.
fn put(caller: &mut Caller<'_, GuestState>, ptr: i32, bytes: &[u8]) -> bool {
    let Some(memory) = memory_of(caller) else { return false };
    memory.write(caller, ptr as u32 as usize, bytes).is_ok()
}

/// Reads `len` bytes at `ptr`; `None` when out of bounds.
fn get(caller: &mut Caller<'_, GuestState>, ptr: u32, len: u32) -> Option<Vec<u8>> {
    let memory = memory_of(caller)?;
    let data = memory.data(&*caller);
    data.get(ptr as usize..(ptr as usize).checked_add(len as usize)?).map(<[u8]>::to_vec)
}

fn status(written: bool) -> i32 {
    if written {
        errno::SUCCESS
    } else {
        errno::FAULT
    }
}

/// Two zero counts: no arguments, no environment.
fn no_entries(mut caller: Caller<'_, GuestState>, count: i32, size: i32) -> i32 {
    status(put(&mut caller, count, &0u32.to_le_bytes()) && put(&mut caller, size, &0u32.to_le_bytes()))
}

fn fd_write(mut caller: Caller<'_, GuestState>, fd: i32, iovs: i32, iovs_len: i32, nwritten: i32) -> i32 {
    if fd != 1 && fd != 2 {
        return errno::BADF;
    }
    // WASI's IOV_MAX: a guest cannot keep the host looping (a host call is not interrupted by
    // the evaluation's deadline).
    let Ok(count @ 0..=IOV_MAX) = u32::try_from(iovs_len) else { return errno::INVAL };
    let mut total: u32 = 0;
    for i in 0..count {
        let Some(iov) = get(&mut caller, (iovs as u32).wrapping_add(i * 8), 8) else { return errno::FAULT };
        let ptr = u32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]);
        let len = u32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]);
        let room = OUTPUT_LIMIT.saturating_sub(caller.data().wasi.output.len()) as u32;
        let Some(bytes) = get(&mut caller, ptr, len.min(room)) else { return errno::FAULT };
        caller.data_mut().wasi.output.extend_from_slice(&bytes);
        total = total.saturating_add(len);
    }
    status(put(&mut caller, nwritten, &total.to_le_bytes()))
}

fn fd_fdstat_get(mut caller: Caller<'_, GuestState>, fd: i32, buf: i32) -> i32 {
    if !(0..=2).contains(&fd) {
        return errno::BADF;
    }
    // filetype character_device (2), no flags; rights: fd_write (1 << 6) on stdout and stderr.
    let mut stat = [0u8; 24];
    stat[0] = 2;
    let rights: u64 = if fd == 0 { 0 } else { 1 << 6 };
    stat[8..16].copy_from_slice(&rights.to_le_bytes());
    status(put(&mut caller, buf, &stat))
}

fn clock_res_get(mut caller: Caller<'_, GuestState>, id: i32, res: i32) -> i32 {
    let resolution: u64 = match id {
        0 => 1_000_000,
        1 => 1,
        _ => return errno::INVAL,
    };
    status(put(&mut caller, res, &resolution.to_le_bytes()))
}

fn clock_time_get(mut caller: Caller<'_, GuestState>, id: i32, _precision: i64, time: i32) -> i32 {
    let now = match id {
        0 => caller.data().wasi.realtime(),
        1 => caller.data().wasi.monotonic(),
        _ => return errno::INVAL,
    };
    let nanos = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
    status(put(&mut caller, time, &nanos.to_le_bytes()))
}

fn random_get(mut caller: Caller<'_, GuestState>, buf: i32, len: i32) -> i32 {
    // Filled in place: the host allocates nothing, whatever length the guest asks for.
    let Some(memory) = memory_of(&mut caller) else { return errno::FAULT };
    let start = buf as u32 as usize;
    let Some(target) = memory.data_mut(&mut caller).get_mut(start..start.saturating_add(len as u32 as usize))
    else {
        return errno::FAULT;
    };
    match getrandom::fill(target) {
        Ok(()) => errno::SUCCESS,
        Err(_) => errno::NOSYS,
    }
}

/// The policy asked to exit: the call ends here, as a trap that says so.
fn proc_exit(_: Caller<'_, GuestState>, code: i32) -> Result<()> {
    wasmtime::bail!("the policy exited with status {code}")
}

/// The preview 1 functions [`add_to_linker`] answers.
const ANSWERED: &[&str] = &[
    "args_sizes_get",
    "environ_sizes_get",
    "args_get",
    "environ_get",
    "fd_write",
    "fd_fdstat_get",
    "fd_prestat_get",
    "fd_prestat_dir_name",
    "clock_res_get",
    "clock_time_get",
    "random_get",
    "sched_yield",
    "proc_exit",
];

/// Adds the preview 1 functions evac answers ([`ANSWERED`]) to a linker.
pub(crate) fn add_to_linker(linker: &mut Linker<GuestState>) -> Result<()> {
    linker.func_wrap(MODULE, "args_sizes_get", no_entries)?;
    linker.func_wrap(MODULE, "environ_sizes_get", no_entries)?;
    linker.func_wrap(MODULE, "args_get", |_: Caller<'_, GuestState>, _: i32, _: i32| errno::SUCCESS)?;
    linker.func_wrap(MODULE, "environ_get", |_: Caller<'_, GuestState>, _: i32, _: i32| errno::SUCCESS)?;
    linker.func_wrap(MODULE, "fd_write", fd_write)?;
    linker.func_wrap(MODULE, "fd_fdstat_get", fd_fdstat_get)?;
    // No preopened directories: the first descriptor asked about ends the guest's scan.
    linker.func_wrap(MODULE, "fd_prestat_get", |_: Caller<'_, GuestState>, _: i32, _: i32| errno::BADF)?;
    linker.func_wrap(
        MODULE,
        "fd_prestat_dir_name",
        |_: Caller<'_, GuestState>, _: i32, _: i32, _: i32| errno::BADF,
    )?;
    linker.func_wrap(MODULE, "clock_res_get", clock_res_get)?;
    linker.func_wrap(MODULE, "clock_time_get", clock_time_get)?;
    linker.func_wrap(MODULE, "random_get", random_get)?;
    linker.func_wrap(MODULE, "sched_yield", |_: Caller<'_, GuestState>| errno::SUCCESS)?;
    linker.func_wrap(MODULE, "proc_exit", proc_exit)?;
    Ok(())
}

/// Answers every other preview 1 function `module` imports with `ENOSYS` (files, sockets,
/// `poll_oneoff`, ...): the module links, and a call fails at once instead of touching the host
/// or sleeping. An import of another shape than WASI's (no single `i32` result) traps when called.
pub(crate) fn stub_the_rest(linker: &mut Linker<GuestState>, module: &Module) -> Result<()> {
    let mut stubbed = std::collections::HashSet::new();
    for import in module.imports().filter(|i| i.module() == MODULE) {
        let Some(ty) = import.ty().func().cloned() else { continue };
        if ANSWERED.contains(&import.name()) || !stubbed.insert(import.name()) {
            continue;
        }
        let name = import.name().to_owned();
        let returns_errno = matches!(ty.results().collect::<Vec<_>>().as_slice(), [ValType::I32]);
        linker.func_new(MODULE, import.name(), ty, move |_, _, results: &mut [Val]| {
            if returns_errno {
                results[0] = Val::I32(errno::NOSYS);
                Ok(())
            } else {
                wasmtime::bail!("the policy called WASI {name}, which evac does not provide")
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_summary_is_one_bounded_line() {
        let mut wasi = WasiState::new(None);
        assert_eq!(wasi.summary(), None);
        wasi.output =
            b"\npanicked at src/lib.rs:1:2:\n  boom  \nnote: run with `RUST_BACKTRACE=1` to see\n".to_vec();
        assert_eq!(wasi.summary().as_deref(), Some("panicked at src/lib.rs:1:2: boom"));
        wasi.output = "é".repeat(400).into_bytes();
        let summary = wasi.summary().unwrap();
        assert_eq!(summary.chars().count(), 303, "{summary}");
        assert!(summary.ends_with("é..."));
    }

    #[test]
    fn the_clock_is_the_engines_when_it_has_one() {
        let clock = WallClock(std::sync::Arc::new(|| Duration::from_secs(1_700_000_000)));
        let wasi = WasiState::new(Some(clock));
        assert_eq!(wasi.realtime(), Duration::from_secs(1_700_000_000));
        assert_eq!(wasi.monotonic(), Duration::from_secs(1_700_000_000));
        let host = WasiState::new(None);
        assert!(host.realtime() > Duration::from_secs(1_700_000_000));
    }
}
