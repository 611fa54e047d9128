//! The waPC protocol, host side: the functions a guest imports from module `wapc`, and the state
//! one evaluation keeps in its store.
//!
//! A call goes: host calls `__guest_call(op_len, msg_len)`; the guest fetches operation and payload
//! with `__guest_request`, may call `__host_call` (answered through `__host_response[_len]` or
//! `__host_error[_len]`), and ends with `__guest_response` or `__guest_error`.

use std::sync::Arc;

use wasmtime::{bail, format_err, Result};
use wasmtime::{Caller, Linker, Memory, ResourceLimiter};

use super::error::MemoryLimitExceeded;
use super::wasi::WasiState;
use crate::capabilities::HostCapabilities;

/// Everything one evaluation's store holds.
pub(crate) struct GuestState {
    pub(crate) wasi: WasiState,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) memory: Option<Memory>,
    pub(crate) capabilities: Arc<dyn HostCapabilities>,
    pub(crate) call: CallState,
}

/// The in-flight waPC call.
#[derive(Default)]
pub(crate) struct CallState {
    pub(crate) operation: Vec<u8>,
    pub(crate) payload: Vec<u8>,
    pub(crate) response: Option<Vec<u8>>,
    pub(crate) error: Option<Vec<u8>>,
    pub(crate) host_response: Option<Vec<u8>>,
    pub(crate) host_error: Option<Vec<u8>>,
}

/// Caps linear memory growth; a refused growth traps with [`MemoryLimitExceeded`].
pub(crate) struct MemoryLimiter {
    pub(crate) limit: usize,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> Result<bool> {
        if desired > self.limit {
            return Err(wasmtime::Error::new(MemoryLimitExceeded));
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> Result<bool> {
        Ok(desired <= 100_000)
    }
}

fn memory(caller: &Caller<'_, GuestState>) -> Result<Memory> {
    caller.data().memory.ok_or_else(|| format_err!("the module exports no memory"))
}

/// A guest buffer, bounds-checked.
fn slice(data: &[u8], ptr: i32, len: i32) -> Result<&[u8]> {
    let (start, len) = (ptr as u32 as usize, len as u32 as usize);
    match data.get(start..start.saturating_add(len)) {
        Some(bytes) => Ok(bytes),
        None => bail!("the guest passed an out-of-bounds buffer ({len} bytes at {start})"),
    }
}

fn read(caller: &Caller<'_, GuestState>, ptr: i32, len: i32) -> Result<Vec<u8>> {
    Ok(slice(memory(caller)?.data(caller), ptr, len)?.to_vec())
}

fn write(caller: &mut Caller<'_, GuestState>, ptr: i32, bytes: &[u8]) -> Result<()> {
    let memory = memory(caller)?;
    memory
        .write(caller, ptr as u32 as usize, bytes)
        .map_err(|_| format_err!("the guest passed an out-of-bounds buffer ({} bytes at {ptr})", bytes.len()))
}

fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// waPC's `__guest_request`: writes the call's operation and payload into the guest's buffers.
fn guest_request(mut caller: Caller<'_, GuestState>, op_ptr: i32, ptr: i32) -> Result<()> {
    let operation = std::mem::take(&mut caller.data_mut().call.operation);
    let payload = std::mem::take(&mut caller.data_mut().call.payload);
    let written = write(&mut caller, op_ptr, &operation).and_then(|()| write(&mut caller, ptr, &payload));
    let call = &mut caller.data_mut().call;
    call.operation = operation;
    call.payload = payload;
    written
}

/// waPC's `__host_call`: a host capability called with the guest's binding, namespace, operation
/// and payload, read in place (no copy leaves guest memory); 1 with a response, 0 with an error.
#[allow(clippy::too_many_arguments)] // waPC's signature.
fn host_call(
    mut caller: Caller<'_, GuestState>,
    bd_ptr: i32,
    bd_len: i32,
    ns_ptr: i32,
    ns_len: i32,
    op_ptr: i32,
    op_len: i32,
    ptr: i32,
    len: i32,
) -> Result<i32> {
    let capabilities = Arc::clone(&caller.data().capabilities);
    let data = memory(&caller)?.data(&caller);
    let text = |ptr, len| std::str::from_utf8(slice(data, ptr, len)?).map_err(|e| format_err!("{e}"));
    let (binding, namespace, operation) =
        (text(bd_ptr, bd_len)?, text(ns_ptr, ns_len)?, text(op_ptr, op_len)?);
    let answer = capabilities.call(binding, namespace, operation, slice(data, ptr, len)?);
    let call = &mut caller.data_mut().call;
    match answer {
        Ok(response) => {
            call.host_response = Some(response);
            call.host_error = None;
            Ok(1)
        }
        Err(error) => {
            // The waPC boundary: only the error's text reaches the guest.
            call.host_response = None;
            call.host_error = Some(error.to_string().into_bytes());
            Ok(0)
        }
    }
}

/// Adds WASI preview 1 (evac's, [`super::wasi`]) and the waPC host functions to a linker.
pub(crate) fn add_to_linker(linker: &mut Linker<GuestState>) -> Result<()> {
    super::wasi::add_to_linker(linker)?;

    linker.func_wrap("wapc", "__guest_request", guest_request)?;
    linker.func_wrap(
        "wapc",
        "__guest_response",
        |mut caller: Caller<'_, GuestState>, ptr: i32, len: i32| {
            let bytes = read(&caller, ptr, len)?;
            caller.data_mut().call.response = Some(bytes);
            Ok(())
        },
    )?;
    linker.func_wrap("wapc", "__guest_error", |mut caller: Caller<'_, GuestState>, ptr: i32, len: i32| {
        let bytes = read(&caller, ptr, len)?;
        caller.data_mut().call.error = Some(bytes);
        Ok(())
    })?;
    linker.func_wrap("wapc", "__host_call", host_call)?;
    linker.func_wrap("wapc", "__host_response_len", |caller: Caller<'_, GuestState>| -> i32 {
        caller.data().call.host_response.as_ref().map_or(0, |r| r.len() as i32)
    })?;
    linker.func_wrap("wapc", "__host_response", |mut caller: Caller<'_, GuestState>, ptr: i32| {
        let response = caller.data_mut().call.host_response.take().unwrap_or_default();
        write(&mut caller, ptr, &response)
    })?;
    linker.func_wrap("wapc", "__host_error_len", |caller: Caller<'_, GuestState>| -> i32 {
        caller.data().call.host_error.as_ref().map_or(0, |r| r.len() as i32)
    })?;
    linker.func_wrap("wapc", "__host_error", |mut caller: Caller<'_, GuestState>, ptr: i32| {
        let error = caller.data_mut().call.host_error.take().unwrap_or_default();
        write(&mut caller, ptr, &error)
    })?;
    linker.func_wrap("wapc", "__console_log", |caller: Caller<'_, GuestState>, ptr: i32, len: i32| {
        let line = utf8(read(&caller, ptr, len)?);
        tracing::info!(target: "evac::policy", "{line}");
        Ok(())
    })?;
    Ok(())
}
