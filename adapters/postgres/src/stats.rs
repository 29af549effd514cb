//! [`StoreStats`]: what a [`Store`](crate::Store) sent to the database, counted as it sends it,
//! so that a load can report statements per second and show that leases cost one statement
//! per worker, not per session.

use std::sync::atomic::{AtomicU64, Ordering};

/// The statements a [`Store`](crate::Store) (and every log, worker and committer on it) sent
/// since it connected. Each count is one statement sent to the server, whatever its outcome;
/// a read back counts one for the length and one per page of records; the schema's migration
/// at connect is not counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreStats {
    /// Every statement.
    pub statements: u64,
    /// Of those, the ones that renewed a lease: a worker's one renewal for all its sessions, or
    /// a session's renewal of a lease of its own ([`Store::open`](crate::Store::open)). The
    /// statements that take sessions and start a worker's lease are not counted here.
    pub lease_renewals: u64,
    /// Of those, the appends: a session's own, or a worker's committer round (one statement
    /// for every session in it).
    pub appends: u64,
}

impl StoreStats {
    /// What was sent after `earlier` (a reading of the same store, or a sum of readings).
    pub fn since(self, earlier: StoreStats) -> StoreStats {
        StoreStats {
            statements: self.statements.saturating_sub(earlier.statements),
            lease_renewals: self.lease_renewals.saturating_sub(earlier.lease_renewals),
            appends: self.appends.saturating_sub(earlier.appends),
        }
    }
}

impl std::iter::Sum for StoreStats {
    /// What several stores sent, together.
    fn sum<I: Iterator<Item = StoreStats>>(stats: I) -> StoreStats {
        stats.fold(StoreStats::default(), |sum, stats| StoreStats {
            statements: sum.statements + stats.statements,
            lease_renewals: sum.lease_renewals + stats.lease_renewals,
            appends: sum.appends + stats.appends,
        })
    }
}

/// The kinds of statement [`Counters`] tells apart.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Sent {
    /// A statement that is neither of the others.
    Other,
    /// A lease renewal.
    Renewal,
    /// An append or a committer round.
    Append,
}

/// The shared counts behind [`StoreStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    statements: AtomicU64,
    lease_renewals: AtomicU64,
    appends: AtomicU64,
}

impl Counters {
    /// Counts one statement of kind `sent`.
    pub(crate) fn sent(&self, sent: Sent) {
        self.statements.fetch_add(1, Ordering::Relaxed);
        match sent {
            Sent::Other => {}
            Sent::Renewal => {
                self.lease_renewals.fetch_add(1, Ordering::Relaxed);
            }
            Sent::Append => {
                self.appends.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn get(&self) -> StoreStats {
        StoreStats {
            statements: self.statements.load(Ordering::Relaxed),
            lease_renewals: self.lease_renewals.load(Ordering::Relaxed),
            appends: self.appends.load(Ordering::Relaxed),
        }
    }
}
