//! The coxswain JSON-lines file log, written once for every runtime: a blocking, runtime-free
//! [`FileLog`] that does one append group per call. The tokio and threads drivers use it
//! directly (tokio on its blocking pool), the Python binding with the GIL released on a worker
//! thread, the Node binding on libuv's thread pool. Its durability rules live here alone: the
//! lock, the regular-file check, the identity, length and last-bytes checks around every append,
//! the cut-back of a failed append, the sync policies, and the one resume path
//! ([`FileLog::resume`]). Its errors ([`LogError`]) are the one vocabulary every language maps,
//! by [`LogError::kind`], each naming the file.
//!
//! The record format is `coxswain-log`'s; what the records mean is the session layer's
//! (`coxswain-session`): this crate only moves bytes.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod error;
pub mod file;
mod log;

pub use error::LogError;
pub use file::LogFile;
pub use log::{
    recycle, repair_tail, seqs, Advance, FileLog, ReadBack, ReadEnd, Reading, SyncPolicy, TailFix,
    KEPT_BUFFER, READ_CHUNK,
};
