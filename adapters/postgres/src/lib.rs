//! # coxswain-postgres
//!
//! A [`DurableLog`](coxswain_tokio::DurableLog) over PostgreSQL: many processes, one fenced
//! writer per session, leases renewed in the background and expiring by the database's clock,
//! fail-over by restore.
//!
//! * [`Store`]: a connection pool to one database; [`Store::connect`] migrates the schema
//!   ([`schema`]) and refuses a newer one.
//! * [`PgLog`]: one session's records; [`Store::open`] takes the session under a new epoch.
//!   Every append commits only while that epoch is still the session's, checked in the same
//!   transaction; a writer that was taken over gets
//!   [`LogError::Fenced`](coxswain_tokio::LogError::Fenced) and its agent stops.
//! * [`Worker`]: claims sessions whose lease expired, restores and serves them (crash repair,
//!   S50, writes its closers under the new epoch), releases them on shutdown. It holds one lease
//!   for all of its sessions (one statement per renewal, however many it serves), and its
//!   committer writes every waiting session's batch in one transaction, each session's epoch
//!   and length checked inside it (a fenced session fails alone). A session it takes over is
//!   repaired with the agents' redelivery allowance (S59) and sent `resume` (S57), so restored
//!   work runs without a caller ([`Worker::resume_after_takeover`]); [`Worker::fate`] answers
//!   what became of a message (S58) in any session, taking nothing over.
//! * [`Store::restore_read_only`] / [`Store::fate`]: a session's records restored read-only, as
//!   a takeover would restore them, without taking the session or writing anything.
//!
//! The fencing protocol:
//!
//! 1. A session row holds `(epoch, owner, lease_until, length)`; records are
//!    `(session, seq, epoch, type, data jsonb)`, primary key `(session, seq)`.
//! 2. Taking a session sets `epoch = epoch + 1, owner = me, lease_until = now() + lease` only
//!    where the lease expired (or nobody / I own it): the new epoch is mine.
//! 3. Each batch is one statement: `UPDATE sessions SET length = length + n WHERE session = s
//!    AND epoch = mine AND length = expected`, then insert the `n` records after the old
//!    length — committed together or not at all.
//! 4. Both the takeover and the append lock the session row, so they serialise; READ COMMITTED
//!    re-checks the epoch after waiting for the lock.
//! 5. No row updated: the writer is fenced, nothing was inserted, and it never appends again.
//! 6. A worker's sessions (schema version 2) have no lease of their own: they are live while
//!    the worker's row in `coxswain.workers` is, and free to take once it expired. A worker's
//!    round of appends is step 3 for every session in it, in one statement.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod committer;
mod error;
mod log;
mod redact;
pub mod schema;
mod stats;
mod store;
mod worker;

pub use error::PgError;
pub use log::PgLog;
pub use redact::redact;
pub use stats::StoreStats;
pub use store::{SessionInfo, Store, StoreOptions};
pub use worker::{Worker, WorkerError};
