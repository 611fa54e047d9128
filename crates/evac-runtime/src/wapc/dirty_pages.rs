//! Finding the pages of a linear memory that differ from their initial image, with Linux's
//! `PAGEMAP_SCAN` ioctl (kernel 6.7+), so a used instance can be put back into its post-init
//! state by copying only those pages.
//!
//! The criteria are wasmtime's own for resetting pooled memories, plus swapped-out pages: a page
//! needs a reset if it is in memory or swapped out, not the shared zero page and not backed by the
//! memory image file, i.e. a private page that was written at some point. Pages only ever read are
//! skipped.

// The instance reset reads the kernel's page map and drops pages: an ioctl and madvise.
#![allow(unsafe_code)]

use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::LazyLock;

const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PAGE_IS_FILE: u64 = 1 << 2;
const PAGE_IS_PRESENT: u64 = 1 << 3;
const PAGE_IS_SWAPPED: u64 = 1 << 4;
const PAGE_IS_PFNZERO: u64 = 1 << 5;

/// `struct pm_scan_arg` of `<linux/fs.h>`.
#[repr(C)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

/// `struct page_region` of `<linux/fs.h>`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `_IOWR('f', 16, struct pm_scan_arg)`.
const PAGEMAP_SCAN: libc::c_ulong = (3 << 30)
    | ((std::mem::size_of::<PmScanArg>() as libc::c_ulong) << 16)
    | ((b'f' as libc::c_ulong) << 8)
    | 16;

static PAGEMAP: LazyLock<Option<File>> = LazyLock::new(|| {
    let file = File::open("/proc/self/pagemap").ok()?;
    // Probe once, on a page of our own: kernels before 6.7 refuse the ioctl.
    let page = Box::new(Page([0; 4096]));
    let start = page.0.as_ptr() as usize;
    scan(&file, start..start + page.0.len(), DIRTY, &mut |_| {}).ok()?;
    Some(file)
});

#[repr(align(4096))]
struct Page([u8; 4096]);

/// Whether dirty-page scanning works on this kernel.
pub(crate) fn available() -> bool {
    PAGEMAP.is_some()
}

/// Calls `dirty` with every byte range (absolute addresses) of `[start, end)` that holds pages
/// changed from the memory image. `None` if scanning is not available.
pub(crate) fn for_each_dirty_range(memory: Range<usize>, dirty: &mut dyn FnMut(Range<usize>)) -> Option<()> {
    let file = PAGEMAP.as_ref()?;
    scan(file, memory, DIRTY, dirty).ok()
}

/// Unmaps the pages of `[start, end)` that are mapped to the shared zero page: pages that were read
/// but never written. They read as zero again when touched, so the guest sees no difference, and
/// later scans skip them (a scan costs per mapped page).
///
/// # Safety
/// The range must be private anonymous memory that nothing reads or writes during the call.
pub(crate) unsafe fn drop_zero_pages(memory: Range<usize>) -> Option<()> {
    let file = PAGEMAP.as_ref()?;
    let mut ranges = Vec::new();
    scan(file, memory, ZERO, &mut |range| ranges.push(range)).ok()?;
    for range in ranges {
        // SAFETY: per this function's contract; zero pages hold no data to lose.
        let rc = unsafe { libc::madvise(range.start as *mut libc::c_void, range.len(), libc::MADV_DONTNEED) };
        if rc != 0 {
            return None;
        }
    }
    Some(())
}

/// What a scan looks for: `(category_inverted, category_mask, category_anyof_mask)`.
type Criteria = (u64, u64, u64);

/// Pages changed from the image: written, neither the zero page nor the image file, and in memory
/// or swapped out (a swapped-out page holds data too).
const DIRTY: Criteria = (
    PAGE_IS_PFNZERO | PAGE_IS_FILE,
    PAGE_IS_WRITTEN | PAGE_IS_PFNZERO | PAGE_IS_FILE,
    PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
);

/// Pages mapped to the shared zero page.
const ZERO: Criteria = (0, PAGE_IS_PRESENT | PAGE_IS_PFNZERO, 0);

fn scan(
    file: &File,
    memory: Range<usize>,
    (category_inverted, category_mask, category_anyof_mask): Criteria,
    found: &mut dyn FnMut(Range<usize>),
) -> std::io::Result<()> {
    let mut regions = [PageRegion::default(); 64];
    let mut start = memory.start as u64;
    let end = memory.end as u64;
    loop {
        let mut arg = PmScanArg {
            size: std::mem::size_of::<PmScanArg>() as u64,
            flags: 0,
            start,
            end,
            walk_end: 0,
            vec: regions.as_mut_ptr() as u64,
            vec_len: regions.len() as u64,
            max_pages: 0,
            category_inverted,
            category_mask,
            category_anyof_mask,
            return_mask: 0,
        };
        // SAFETY: `arg` and `regions` are valid for the ioctl's reads and writes; the scanned range
        // is only inspected, never touched.
        let count = unsafe { libc::ioctl(file.as_raw_fd(), PAGEMAP_SCAN, &mut arg as *mut PmScanArg) };
        if count < 0 {
            return Err(std::io::Error::last_os_error());
        }
        for region in &regions[..count as usize] {
            found(region.start as usize..region.end as usize);
        }
        // The scan stops early when the region buffer is full; carry on from where it stopped.
        if arg.walk_end >= end || count == 0 && arg.walk_end <= start {
            return Ok(());
        }
        start = arg.walk_end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_written_pages_only() {
        if !available() {
            eprintln!("skipped: PAGEMAP_SCAN is not available on this kernel");
            return;
        }
        let page = 4096;
        // A fresh anonymous mapping: nothing present until touched.
        let len = 16 * page;
        // SAFETY: a private anonymous mapping owned by this test.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        } as usize;
        assert_ne!(base as *mut libc::c_void, libc::MAP_FAILED);
        // SAFETY: the mapping above is `len` bytes, readable and writable, and only this test uses it.
        let bytes = unsafe { std::slice::from_raw_parts_mut(base as *mut u8, len) };
        bytes[3 * page + 5] = 1;
        bytes[4 * page] = 1;
        let _ = std::hint::black_box(bytes[9 * page]); // read only: the zero page
        bytes[12 * page + 100] = 7;
        let pages = |r: Range<usize>| (r.start - base) / page..(r.end - base) / page;
        let mut found = Vec::new();
        for_each_dirty_range(base..base + len, &mut |r| found.push(pages(r))).unwrap();
        assert_eq!(found, vec![3..5, 12..13]);

        // The page only read maps the zero page; dropping it leaves the written ones.
        let mut zero = Vec::new();
        scan(PAGEMAP.as_ref().unwrap(), base..base + len, ZERO, &mut |r| zero.push(pages(r))).unwrap();
        assert_eq!(zero, vec![9..10]);
        // SAFETY: the test's own private anonymous mapping, not touched during the call.
        unsafe { drop_zero_pages(base..base + len) }.unwrap();
        let mut zero = Vec::new();
        scan(PAGEMAP.as_ref().unwrap(), base..base + len, ZERO, &mut |r| zero.push(pages(r))).unwrap();
        assert!(zero.is_empty());
        assert_eq!(bytes[9 * page], 0);
        assert_eq!(bytes[3 * page + 5], 1);
        // SAFETY: unmaps the mapping made above; `bytes` is not used after this.
        unsafe { libc::munmap(base as *mut libc::c_void, len) };
    }
}
