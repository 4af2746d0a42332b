//! The broker's global allocator: jemalloc, except that very large requests are served
//! with `mmap(MAP_NORESERVE)`.
//!
//! Why jemalloc: the batch cache frees and reallocates its chunks (16 KiB to 1 MiB,
//! 4 KiB-aligned) continuously, hundreds of megabytes a minute. Under glibc's malloc
//! the live heap of a 10-minute soak was flat (cache plus indexes, measured with
//! heaptrack) while the resident size kept creeping up by 25-45 MiB: freed chunks left
//! holes its arenas neither reused nor returned. jemalloc keeps large allocations in
//! page-aligned size classes that are reused exactly, and returns unused pages to the
//! system after a few seconds, so the resident size follows the live heap. Its
//! background threads do that returning (`madvise`), not the shard threads' frees.
//!
//! Why the mapping: kafka-protocol decodes an array by first reserving room for the
//! element count the request claims (`Vec::with_capacity(n)`), before reading a single
//! element. A hostile request claiming two billion topics asks for ~150 GB; the
//! allocator refuses, and Rust aborts the process on allocation failure, so one
//! malformed request would kill the broker. A `MAP_NORESERVE` mapping of that size
//! succeeds without committing memory; decoding then fails on the missing bytes (each
//! element needs at least one byte of the request, which is bounded by
//! `max_request_bytes`), the vector is dropped, and the mapping is returned untouched.
//! Memory actually used stays bounded by what the request really contains.
//!
//! jemalloc's options are [`MALLOC_CONF`], which the `weir` binary exports for jemalloc to
//! read at its first allocation.

use std::alloc::{GlobalAlloc, Layout};

use tikv_jemallocator::Jemalloc as Heap;

/// A C string jemalloc reads as its options (the type of its `malloc_conf` symbol).
#[repr(transparent)]
pub struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a static, immutable, NUL-terminated string.
unsafe impl Sync for MallocConf {}

/// The broker's jemalloc options, exported as `_rjem_malloc_conf` by `main.rs` (the
/// `_RJEM_MALLOC_CONF` environment variable can still add to them).
///
/// `oversize_threshold:0`: by default jemalloc serves every allocation of 8 MiB or more
/// from an arena that returns its pages to the kernel as soon as they are freed. A fetch
/// answer is one such allocation (eight partitions of 1 MiB and more), so each answer
/// was built in freshly faulted, zeroed pages that were unmapped again once sent: a
/// third of the shard's time in a cold-start consume went to page faults, clearing pages
/// and unmapping them. Without the threshold those buffers come from the ordinary arenas
/// and their pages are reused while warm (jemalloc's background threads still return
/// pages unused for a few seconds). Measured: one consumer reading 3 GiB just written,
/// 239 -> 405 MB/s.
pub const MALLOC_CONF: MallocConf = MallocConf(c"oversize_threshold:0".as_ptr());

/// Allocations at least this large are mapped, not taken from the heap.
pub const MAPPED_BYTES_MIN: usize = 1 << 30;

/// See the module docs.
pub struct ReservingAllocator;

fn mapped(layout: Layout) -> bool {
    layout.size() >= MAPPED_BYTES_MIN && layout.align() <= 4096
}

// SAFETY: every pointer returned comes from jemalloc or from an anonymous mapping of at
// least `layout.size()` bytes, page-aligned (so aligned for any `align() <= 4096`), and
// each is released by the matching call chosen by the same `layout`.
unsafe impl GlobalAlloc for ReservingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !mapped(layout) {
            return Heap.alloc(layout);
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            layout.size(),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        );
        if p == libc::MAP_FAILED {
            std::ptr::null_mut()
        } else {
            p.cast()
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mapped(layout) {
            libc::munmap(ptr.cast(), layout.size());
        } else {
            Heap.dealloc(ptr, layout);
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            // Fresh anonymous mappings read as zeros.
            self.alloc(layout)
        } else {
            Heap.alloc_zeroed(layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if !mapped(layout) && !mapped(new_layout) {
            return Heap.realloc(ptr, layout, new_size);
        }
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new
    }
}
