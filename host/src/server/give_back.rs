//! Giving a burst's memory back to the system. glibc's allocator keeps freed memory in its
//! per-thread arenas (a 64 MiB heap each) until `malloc_trim` asks it to return the free pages:
//! after 64 concurrent 3 MB reviews the process would otherwise stay near its peak for good
//! (docs/benchmarks.md, "Memory at the edges"). Other allocators return memory by themselves.

// `malloc_trim` is a C function; it only releases pages the allocator holds free.
#![allow(unsafe_code)]

/// Asks the allocator to return its free pages to the system. A few milliseconds with large
/// arenas: call it off the request path.
pub fn free_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointers and only unmaps memory no allocation uses.
    unsafe {
        libc::malloc_trim(0);
    }
}
