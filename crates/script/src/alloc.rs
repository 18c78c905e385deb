//! The allocator a shard's QuickJS runtime allocates through: Rust's global
//! allocator with a small header, counting the bytes live.
//!
//! Why: a per-table memory cap needs to know what each call allocated, and
//! QuickJS keeps its own count (`malloc_size`) where no cheap call reads it
//! (`JS_ComputeMemoryUsage` walks the whole heap). Counting here costs one
//! relaxed add per allocation; [`Counter::live`] is then read before and
//! after each call. The count is the usable size plus QuickJS's own
//! per-allocation overhead (8 bytes), the same sum QuickJS compares with
//! the limit set by `JS_SetMemoryLimit`, so a limit computed from it is
//! exact.

#![allow(unsafe_code)]

use rquickjs::allocator::Allocator;
use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// QuickJS adds this to every allocation's usable size in its own count.
const OVERHEAD: usize = 8;
const ALIGN: usize = 16;
/// The header before each block: its usable size (padded to the alignment).
const HEADER: usize = 16;

/// Bytes live in one runtime, as QuickJS counts them.
#[derive(Debug, Default)]
pub(crate) struct Counter(AtomicUsize);

impl Counter {
    pub(crate) fn live(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// See the module's doc.
pub(crate) struct Counting(pub(crate) Arc<Counter>);

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size.checked_add(HEADER)?, ALIGN).ok()
}

fn round(size: usize) -> Option<usize> {
    Some(size.checked_add(ALIGN - 1)? / ALIGN * ALIGN)
}

impl Counting {
    fn add(&self, size: usize) {
        self.0 .0.fetch_add(size + OVERHEAD, Ordering::Relaxed);
    }

    fn sub(&self, size: usize) {
        self.0 .0.fetch_sub(size + OVERHEAD, Ordering::Relaxed);
    }

    fn allocate(&mut self, size: usize, zeroed: bool) -> *mut u8 {
        let Some(size) = round(size.max(1)) else {
            return std::ptr::null_mut();
        };
        let Some(l) = layout(size) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `l` has a non-zero size (at least HEADER).
        let p = unsafe {
            if zeroed {
                alloc_zeroed(l)
            } else {
                alloc(l)
            }
        };
        if p.is_null() {
            return p;
        }
        self.add(size);
        // SAFETY: `p` is valid for HEADER + size bytes, aligned to 16.
        unsafe {
            p.cast::<usize>().write(size);
            p.add(HEADER)
        }
    }
}

// SAFETY: every block returned is aligned to 16 (≥ usize) and at least the
// size asked; `dealloc`, `realloc` and `usable_size` are only given blocks
// this allocator returned (QuickJS's contract), whose header holds the
// usable size that the layout was made from.
unsafe impl Allocator for Counting {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        self.allocate(size, false)
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        match count.checked_mul(size) {
            Some(total) => self.allocate(total, true),
            None => std::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: `ptr` came from `allocate`, HEADER bytes after its block.
        let (base, size) = unsafe {
            let base = ptr.sub(HEADER);
            (base, base.cast::<usize>().read())
        };
        self.sub(size);
        if let Some(l) = layout(size) {
            // SAFETY: the block was allocated with this very layout.
            unsafe { dealloc(base, l) };
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.allocate(new_size, false);
        }
        let (Some(new), true) = (round(new_size.max(1)), new_size > 0) else {
            // SAFETY: forwarded contract.
            unsafe { self.dealloc(ptr) };
            return std::ptr::null_mut();
        };
        let Some(new_layout) = layout(new) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `ptr` came from `allocate`; its header holds its size, and
        // the old layout is rebuilt from it exactly.
        unsafe {
            let base = ptr.sub(HEADER);
            let old = base.cast::<usize>().read();
            let Some(old_layout) = layout(old) else {
                return std::ptr::null_mut();
            };
            let p = realloc(base, old_layout, new_layout.size());
            if p.is_null() {
                return p;
            }
            self.sub(old);
            self.add(new);
            p.cast::<usize>().write(new);
            p.add(HEADER)
        }
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        if ptr.is_null() {
            return 0;
        }
        // SAFETY: `ptr` came from `allocate`.
        unsafe { ptr.sub(HEADER).cast::<usize>().read() }
    }
}
