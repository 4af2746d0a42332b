//! The broker's global allocator: the system allocator, except that very large requests
//! are served with `mmap(MAP_NORESERVE)`.
//!
//! Why: kafka-protocol decodes an array by first reserving room for the element count
//! the request claims (`Vec::with_capacity(n)`), before reading a single element. A
//! hostile request claiming two billion topics asks for ~150 GB; the system allocator
//! refuses, and Rust aborts the process on allocation failure, so one malformed request
//! would kill the broker. A `MAP_NORESERVE` mapping of that size succeeds without
//! committing memory; decoding then fails on the missing bytes (each element needs at
//! least one byte of the request, which is bounded by `max_request_bytes`), the vector
//! is dropped, and the mapping is returned untouched. Memory actually used stays bounded
//! by what the request really contains.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations at least this large are mapped, not taken from the heap.
pub const MAPPED_BYTES_MIN: usize = 1 << 30;

/// See the module docs.
pub struct ReservingAllocator;

fn mapped(layout: Layout) -> bool {
    layout.size() >= MAPPED_BYTES_MIN && layout.align() <= 4096
}

// SAFETY: every pointer returned comes from `System` or from an anonymous mapping of at
// least `layout.size()` bytes, page-aligned (so aligned for any `align() <= 4096`), and
// each is released by the matching call chosen by the same `layout`.
unsafe impl GlobalAlloc for ReservingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !mapped(layout) {
            return System.alloc(layout);
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
            System.dealloc(ptr, layout);
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            // Fresh anonymous mappings read as zeros.
            self.alloc(layout)
        } else {
            System.alloc_zeroed(layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if !mapped(layout) && !mapped(new_layout) {
            return System.realloc(ptr, layout, new_size);
        }
        let new = self.alloc(new_layout);
        if !new.is_null() {
            std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
            self.dealloc(ptr, layout);
        }
        new
    }
}
