//! Fault injection for a [`FileLog`](crate::FileLog) (tests only; not part of the stable API).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Fault injection for a [`FileLog`] (tests only; not part of the stable API): writes that fail
/// after a byte budget, syncs and truncations that fail. Clones share the switch.
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct Faults(pub(crate) Arc<FaultState>);

#[derive(Debug)]
pub(crate) struct FaultState {
    /// Bytes that may still be written; `u64::MAX`: no limit.
    budget: AtomicU64,
    /// How many of the next syncs fail.
    fail_syncs: AtomicUsize,
    fail_truncate: AtomicBool,
    /// The length the next write first sets the file to; `u64::MAX`: none.
    resize_before_write: AtomicU64,
    syncs: AtomicUsize,
}

impl Default for FaultState {
    fn default() -> Self {
        FaultState {
            budget: AtomicU64::new(u64::MAX),
            fail_syncs: AtomicUsize::new(0),
            fail_truncate: AtomicBool::new(false),
            resize_before_write: AtomicU64::new(u64::MAX),
            syncs: AtomicUsize::new(0),
        }
    }
}

impl Faults {
    /// From now on, writes fail once `bytes` more bytes were written (the write that crosses it
    /// writes its first bytes, then fails).
    pub fn fail_writes_after(&self, bytes: u64) {
        self.0.budget.store(bytes, Ordering::SeqCst);
    }

    /// The next `count` syncs fail (`usize::MAX`: all of them; 0: none).
    pub fn fail_syncs(&self, count: usize) {
        self.0.fail_syncs.store(count, Ordering::SeqCst);
    }

    /// Truncations (cutting a failed append back) fail (or work again).
    pub fn fail_truncates(&self, fail: bool) {
        self.0.fail_truncate.store(fail, Ordering::SeqCst);
    }

    /// The next write (once) first sets the file's length to `len` bytes: cuts it, or extends
    /// it with zeros, as another writer's truncation or append landing between the log's check
    /// of its file and its write would.
    pub fn resize_before_next_write(&self, len: u64) {
        self.0.resize_before_write.store(len, Ordering::SeqCst);
    }

    /// How many syncs the log attempted.
    pub fn syncs(&self) -> usize {
        self.0.syncs.load(Ordering::SeqCst)
    }
}

impl FaultState {
    pub(crate) fn take_budget(&self, want: usize) -> usize {
        let want = want as u64;
        let mut allowed = want;
        let _ = self
            .budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |budget| {
                if budget == u64::MAX {
                    return None;
                }
                allowed = want.min(budget);
                Some(budget - allowed)
            });
        allowed as usize
    }

    pub(crate) fn sync(&self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .fail_syncs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |count| match count {
                0 => None,
                usize::MAX => Some(usize::MAX),
                n => Some(n - 1),
            })
            .is_ok();
        if failing {
            return Err(io::Error::other("sync failed (injected)"));
        }
        Ok(())
    }

    /// The length to set the file to before this write, once
    /// ([`Faults::resize_before_next_write`]).
    pub(crate) fn resize_before_write(&self) -> Option<u64> {
        let len = self.resize_before_write.swap(u64::MAX, Ordering::SeqCst);
        (len != u64::MAX).then_some(len)
    }

    pub(crate) fn truncate(&self) -> io::Result<()> {
        if self.fail_truncate.load(Ordering::SeqCst) {
            return Err(io::Error::other("truncate failed (injected)"));
        }
        Ok(())
    }
}
