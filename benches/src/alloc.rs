//! A counting global allocator, for the allocation test and the memory report.
//!
//! A binary opts in with
//! `#[global_allocator] static ALLOC: Counting = Counting::new();` and reads [`Counting::snapshot`]
//! before and after the region it measures. Counters are per thread: a region is measured on the thread that runs it.
#![allow(unsafe_code)] // `GlobalAlloc` is an unsafe trait; the impl only forwards to `System`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting calls and bytes of the calling thread.
///
/// Counts are per thread, so a test harness, a runtime or another test allocating on its own
/// threads does not disturb the region measured.
#[derive(Debug, Default)]
pub struct Counting;

thread_local! {
    // Const-initialised and without a destructor: reading them never allocates.
    static COUNTS: Cell<Snapshot> = const { Cell::new(Snapshot::ZERO) };
}

fn record(update: impl FnOnce(&mut Snapshot)) {
    // `try_with`: a thread being torn down may still free memory.
    let _ = COUNTS.try_with(|counts| {
        let mut now = counts.get();
        update(&mut now);
        counts.set(now);
    });
}

/// The counters at one moment. Subtract two snapshots to measure a region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// `alloc` and `alloc_zeroed` calls.
    pub allocations: u64,
    /// `realloc` calls.
    pub reallocations: u64,
    /// `dealloc` calls.
    pub deallocations: u64,
    /// Bytes handed out (a `realloc` counts its new size).
    pub allocated_bytes: u64,
    /// Bytes given back (a `realloc` counts its old size).
    pub freed_bytes: u64,
}

impl Snapshot {
    const ZERO: Snapshot = Snapshot {
        allocations: 0,
        reallocations: 0,
        deallocations: 0,
        allocated_bytes: 0,
        freed_bytes: 0,
    };

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            allocations: self.allocations - earlier.allocations,
            reallocations: self.reallocations - earlier.reallocations,
            deallocations: self.deallocations - earlier.deallocations,
            allocated_bytes: self.allocated_bytes - earlier.allocated_bytes,
            freed_bytes: self.freed_bytes - earlier.freed_bytes,
        }
    }

    /// Bytes still held that were allocated in the region (may be negative: freed earlier ones).
    pub fn net_bytes(&self) -> i64 {
        self.allocated_bytes as i64 - self.freed_bytes as i64
    }
}

impl Counting {
    /// The allocator (counters live per thread).
    pub const fn new() -> Self {
        Counting
    }

    /// This thread's counters now.
    pub fn snapshot(&self) -> Snapshot {
        COUNTS.try_with(Cell::get).unwrap_or_default()
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so `System`'s
// guarantees carry over; the counters are const-initialised thread locals and never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(|c| {
            c.allocations += 1;
            c.allocated_bytes += layout.size() as u64;
        });
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(|c| {
            c.allocations += 1;
            c.allocated_bytes += layout.size() as u64;
        });
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        record(|c| {
            c.deallocations += 1;
            c.freed_bytes += layout.size() as u64;
        });
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(|c| {
            c.reallocations += 1;
            c.freed_bytes += layout.size() as u64;
            c.allocated_bytes += new_size as u64;
        });
        // SAFETY: forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
