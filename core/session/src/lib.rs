//! # coxswain-session
//!
//! The sans-IO session layer between the core ([`coxswain_core::Machine`]) and a driver: what
//! every driver used to decide on its own, decided once, as types, with no IO, no clock and no
//! async.
//!
//! * **Group commit with rollback** ([`Session`]): inputs and host events are staged into a
//!   numbered batch; the driver appends its entries as one write; [`Session::persisted`]
//!   releases each member's effects and acknowledgement in input order, [`Session::failed`]
//!   takes the whole batch back so the machine is exactly as if none of it had been fed (S5
//!   extended to a failed persistence, through
//!   [`Machine::begin_batch`](coxswain_core::Machine::begin_batch)).
//! * **Deadlines as inputs**: the abort grace is the session's rule. The driver passes the time
//!   ([`Session::poll_timeout`], [`Session::handle_timeout`]).
//! * **One host-failure vocabulary** ([`HostFailure`]): panicked, raised, cancelled, abandoned,
//!   invalid answer, one `code` each in the log.
//! * **Admission** ([`Limits`], [`Refused`]): id and message sizes, the log's nesting depth, host
//!   events only inside their step; the S55 bound is the core's.
//! * **The agent loop** ([`AgentLoop`]): which commands make a batch, who waits for what, a
//!   refused host answer, the stop policy, the defaults ([`Options::DEFAULT`]) and the hooks a
//!   host did not write ([`Hooks`]): a driver in any language is an IO loop over it.
//! * **Resume** ([`ResumePlan`]): from a log's bytes or records, the torn tail to cut, the
//!   closers to write, the restored machine with the host's configuration and hash seed.
//!
//! Rule numbers (S1–S59) refer to the project's `SPEC.md`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod admission;
mod agent_loop;
mod batch;
mod failure;
mod hooks;
mod resume;
mod session;

pub use admission::{Limits, Refused};
pub use agent_loop::{AgentLoop, Command, Ending, Failure, HostReply, LogFailure, Output, Reply};
pub use batch::{Ack, Append, BatchMismatch, BatchNo, Failed, Release, Released, Ticket, Timeout};
pub use failure::HostFailure;
pub use hooks::{default_answer, pre_step_default, turn_stopping_default, Hooks};
pub use resume::{
    ByteRepair, RedeliveryTooLarge, ResumeError, ResumeOptions, ResumePlan, Resuming,
    MAX_REDELIVERY,
};
pub use session::{Options, Session};
