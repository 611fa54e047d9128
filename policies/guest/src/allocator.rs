//! The policy's allocator: a bump arena in static memory, with the system allocator behind it.
//!
//! evac runs every evaluation on an instance put back into its post-init state, arena included,
//! so nothing needs freeing within one evaluation: allocating is a pointer bump, freeing is free.
//! Arena pages never touched are never mapped, so an unused arena costs neither memory nor reset
//! time. Under a host that keeps one instance across evaluations without resetting it, the arena
//! fills once and every later allocation goes to the system allocator: slower, never wrong.

// An allocator is unsafe code by definition (`GlobalAlloc`); every block states its contract.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;

const ARENA_SIZE: usize = 64 * 1024;

/// A bump arena of 64 KiB in static memory, backed by the system allocator once full.
pub struct Arena {
    memory: UnsafeCell<[u8; ARENA_SIZE]>,
    /// Offset of the first free byte.
    next: UnsafeCell<usize>,
}

// SAFETY: on wasm32 without the `atomics` feature there is exactly one thread, so the arena is
// never reached from two threads at once. Elsewhere the arena is not `Sync` and cannot be a
// `#[global_allocator]`: nothing guards its `UnsafeCell`s against concurrent use.
#[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
unsafe impl Sync for Arena {}

impl Arena {
    /// An empty arena.
    pub const fn new() -> Self {
        Self { memory: UnsafeCell::new([0; ARENA_SIZE]), next: UnsafeCell::new(0) }
    }

    fn base(&self) -> usize {
        self.memory.get() as usize
    }

    fn contains(&self, ptr: *mut u8) -> bool {
        (self.base()..self.base() + ARENA_SIZE).contains(&(ptr as usize))
    }
}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: `alloc` returns blocks of at least the layout's size and alignment that do not overlap
// (a bump pointer, or the system allocator); `dealloc` returns system blocks to the system
// allocator and leaves arena blocks to the reset; `realloc` keeps the contents.
unsafe impl GlobalAlloc for Arena {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: single-threaded (see `Sync`); `next` is only touched here and in `realloc`.
        let next = unsafe { &mut *self.next.get() };
        let start = (self.base() + *next).next_multiple_of(layout.align());
        let end = start + layout.size();
        if end <= self.base() + ARENA_SIZE {
            *next = end - self.base();
            start as *mut u8
        } else {
            // SAFETY: forwarded with the caller's layout.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !self.contains(ptr) {
            // SAFETY: `ptr` came from `System.alloc` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Growing the newest allocation extends it in place: the common case of a Vec being filled.
        // SAFETY: single-threaded (see `Sync`).
        let next = unsafe { &mut *self.next.get() };
        let end = ptr as usize + layout.size();
        if self.contains(ptr)
            && end == self.base() + *next
            && ptr as usize + new_size <= self.base() + ARENA_SIZE
        {
            *next = ptr as usize + new_size - self.base();
            return ptr;
        }
        // SAFETY: the default reallocation: allocate, copy, free, with the caller's layouts.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bumps_then_falls_back() {
        let arena = Box::leak(Box::new(Arena::new()));
        // SAFETY: the layouts are valid, and each pointer is used with the layout it came from.
        unsafe {
            let a = arena.alloc(Layout::from_size_align(10, 8).unwrap());
            let b = arena.alloc(Layout::from_size_align(10, 8).unwrap());
            assert!(arena.contains(a) && arena.contains(b));
            assert_eq!(b as usize - a as usize, 16, "aligned bump");
            // Growing the newest allocation keeps its address.
            let grown = arena.realloc(b, Layout::from_size_align(10, 8).unwrap(), 100);
            assert_eq!(grown, b);
            // Growing an older one moves it and keeps its bytes.
            *a = 42;
            let moved = arena.realloc(a, Layout::from_size_align(10, 8).unwrap(), 20);
            assert_ne!(moved, a);
            assert_eq!(*moved, 42);
            // Past the arena, the system allocator answers.
            let big = arena.alloc(Layout::from_size_align(ARENA_SIZE, 8).unwrap());
            assert!(!big.is_null() && !arena.contains(big));
            arena.dealloc(big, Layout::from_size_align(ARENA_SIZE, 8).unwrap());
        }
    }
}
