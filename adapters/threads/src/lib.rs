//! # coxswain-threads
//!
//! A second driver for the coxswain core, on plain threads with blocking IO: proof that the
//! sans-IO session layer ([`coxswain_session::Session`]) carries every decision, so a driver
//! is a loop that moves bytes and time. One driver thread owns the session and the log; host
//! calls run on threads of their own and come back as answers. Inputs waiting together share
//! one append (group commit); a failed append fails only its batch (the session rolls the
//! machine back) and the agent goes on; only a log that cannot say what it holds
//! ([`LogError::Indeterminate`]) or a fenced one ([`LogError::Fenced`]) stops it.
//!
//! Its file log is the one every coxswain runtime writes ([`FileLog`], from `coxswain-file-log`,
//! re-exported with its [`LogError`] and [`SyncPolicy`]): locked, checked for a file replaced,
//! truncated or written by another writer around every append, a failed append cut back,
//! synced as its [`SyncPolicy`] says (and once more when the agent ends). [`open_log`] opens it
//! and resumes the session it holds (S50, S57, S59).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agent;
mod error;
mod host;
mod log;
mod recorder;

pub use agent::Agent;
pub use coxswain_session::Hooks;
pub use error::AgentError;
pub use host::Host;
pub use log::{
    open_log, open_log_wrapped, FileLog, Log, LogError, LogFile, LogOptions, OpenError, SyncPolicy,
};
pub use recorder::Recorder;
