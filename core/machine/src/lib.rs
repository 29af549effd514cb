//! # coxswain-core
//!
//! The sans-IO state machine that owns how input reaches an LLM agent loop. For every message a
//! user or plugin delivers it decides which queue it joins (the next turn, or the next step of the
//! running turn), whether it makes the model run, when the running loop claims it, what a cancel
//! does to it, and which durable events record all of that — so that a crash, a resume or a port
//! to another language loses and duplicates nothing.
//!
//! The machine never does IO (S1): no async, no clock, no randomness, no files. The host feeds it
//! inputs ([`Machine::followup`], [`Machine::answer_step`], … or [`Machine::handle`]); each
//! accepted input returns a [`Transition`]: its durable [`Event`]s to append to the session log
//! as one batch, then — once the host says they are persisted — its [`Effect`]s: live
//! [`Notification`]s, the start of an [`Activity`], [`Request`]s for the host's asynchronous work
//! (the pre-step decision, the step, the turn-stopping hooks) and the [`Abort`] signal. A log
//! written from those events restores the machine ([`Machine::restore`], [`Restorer`]); a
//! [`Config`] chooses the delivery memory that makes retried deliveries harmless.
//!
//! Rule numbers (S1–S59, I1–I16) refer to the project's `SPEC.md`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Every fallible or panicking public function says when, under `# Errors` / `# Panics`.
#![warn(clippy::missing_errors_doc, clippy::missing_panics_doc)]

mod config;
mod error;
mod fate;
mod fingerprint;
mod hasher;
mod inbox;
mod input;
mod machine;
mod memory;
mod message;
mod output;
mod position;
mod restore;
mod transition;

pub use config::Config;
pub use error::{BatchError, Completion, InvalidLog, LogViolation, Rejected};
pub use fate::{Fate, TurnEndKind};
pub use inbox::Pending;
pub use input::{
    AnswerWord, CancelCause, Details, ErrorInfo, Expect, Input, MaintenanceInput, PreStepAnswer,
    Preset, StepAnswer, Target, TurnStoppingAnswer, UnknownName,
};
pub use machine::{Behaviour, Machine, RestorerBehaviour};
pub use message::{Batch, Message, MessageId, SharedMessage, ShownId, BATCH_INLINE};
pub use output::{
    Abort, Activity, Effect, Event, Notification, Output, Outstanding, Request, RequestKind,
    Splice, SpliceKind, SpliceOutcome, Status, TurnEndReason,
};
pub use position::{LogPosition, OpenTurn};
pub use restore::Restorer;
pub use transition::{Effects, Outputs, Transition};

/// Helpers shared by the unit tests.
#[cfg(test)]
mod test_support {
    use std::hash::{Hash, Hasher};

    /// The hash of `value` under std's default hasher: what a set of states (the model
    /// checker's dedup) sees of it.
    pub(crate) fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        value.hash(&mut hasher);
        hasher.finish()
    }
}
