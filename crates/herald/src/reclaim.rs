//! Giving jemalloc's cached memory back to the OS while the server is
//! quiet: the [`herald_server::reclaim::Reclaim`] hook of `herald serve`.
//!
//! Freed memory stays with jemalloc in two places (bench/RESULTS.md,
//! "Memory given back once traffic stops"): each thread's cache (tcache),
//! which only that thread can flush and only does when it allocates again,
//! and dirty pages of the arenas, which decay back to the OS over seconds.
//! [`request`] (the hook, called by the server's housekeeping while the
//! node is quiet) bumps an epoch; each runtime worker, the next time it
//! parks ([`on_park`], the runtime's `on_thread_park`), sees the new epoch,
//! flushes its own tcache into the arenas and purges every arena's unused
//! pages. Under load the hook is never called, so the allocator's fast path
//! is untouched; the check on each park is one atomic load.
//!
//! jemalloc's control interface is a C function taking raw pointers, so
//! this is the one place of the binary with `unsafe` (two calls with no
//! arguments to pass, on names that are static C strings).

use std::cell::Cell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};

static EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static SEEN: Cell<u64> = const { Cell::new(0) };
}

/// Asks every runtime worker to give its cached memory back when it next
/// parks.
pub fn request() {
    EPOCH.fetch_add(1, Ordering::Relaxed);
}

/// Called by each runtime worker as it parks: gives memory back once per
/// [`request`].
pub fn on_park() {
    let epoch = EPOCH.load(Ordering::Relaxed);
    SEEN.with(|seen| {
        if seen.get() != epoch {
            seen.set(epoch);
            give_back();
        }
    });
}

/// Flushes this thread's cache, then purges every arena. False if jemalloc
/// refused either (it does not, unless it is not the allocator).
fn give_back() -> bool {
    // MALLCTL_ARENAS_ALL is 4096 in jemalloc 5.
    control(c"thread.tcache.flush") & control(c"arena.4096.purge")
}

/// Runs a `mallctl` that reads and writes nothing.
#[allow(unsafe_code)]
fn control(name: &CStr) -> bool {
    // SAFETY: `name` is a NUL-terminated string that outlives the call, and
    // the two controls used here take no old or new value: every pointer
    // passed besides the name is null and the length zero, which is how
    // jemalloc's manual says to invoke them.
    let r = unsafe {
        tikv_jemalloc_sys::mallctl(
            name.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    r == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jemalloc_accepts_both_controls_and_a_park_gives_back_once_per_request() {
        // A cache with something in it, then given back.
        let v: Vec<Vec<u8>> = (0..1000).map(|i| vec![0u8; 16 + i % 512]).collect();
        drop(v);
        assert!(give_back());
        assert!(!control(c"no.such.control"));
        let before = EPOCH.load(Ordering::Relaxed);
        request();
        on_park();
        assert_eq!(SEEN.with(Cell::get), before + 1);
        on_park(); // nothing new asked: nothing done
        assert_eq!(SEEN.with(Cell::get), before + 1);
    }
}
