//! Typed errors: one for rejected inputs, one for invalid logs.

use std::fmt;

use std::num::NonZeroUsize;

use crate::input::{Expect, Target};
use crate::message::MessageId;
use crate::output::{Outstanding, RequestKind};

/// Why an input was rejected. A rejected input changed nothing and emitted nothing (S5).
///
/// # Examples
///
/// ```
/// use coxswain_core::{Completion, Machine, Message, Rejected, RequestKind, StepAnswer};
///
/// let mut machine = Machine::new();
/// machine.inject(Message::user("c1", "notes"))?.persisted().for_each(drop);
/// let again = machine.inject(Message::user("c1", "notes")).err();
/// assert_eq!(again, Some(Rejected::AlreadyPending("c1".into())));
/// assert_eq!(again.map(|rejected| rejected.kind()), Some("already-pending"));
///
/// let early = machine.answer_step(StepAnswer::Completed).err(); // nothing is outstanding
/// assert_eq!(early, Some(Rejected::UnexpectedCompletion { answered: Completion::Answer(RequestKind::Step), outstanding: None }));
/// assert_eq!(machine.pending(coxswain_core::Target::NextStep).len(), 1); // nothing changed (S5)
/// # Ok::<(), Rejected>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejected {
    /// The id is already pending in NT or NS (S9, S13).
    #[error("message {} is already pending", .0.shown())]
    AlreadyPending(MessageId),
    /// The delivery memory holds the id: it left the lists lately, so this is a retry of a
    /// delivery already made (S51, S52).
    #[error("message {} was already delivered", .0.shown())]
    AlreadyDelivered(MessageId),
    /// The id is pending, or held by the delivery memory, for a *different* message (S56): a
    /// caller reused an id. Unlike the two rejections above this is not a retry, and never
    /// success.
    #[error("message id {} is already used by a different message", .0.shown())]
    Conflict(MessageId),
    /// The send's expected-turn guard does not hold (S54).
    #[error("the send expected {0}, which does not hold")]
    TurnMismatch(Expect),
    /// The list the delivery joins already holds the admission bound's number of items (S55).
    #[error("the {target} list is full ({max_pending} items pending)")]
    Full {
        /// The list the delivery would join (after S18's retargeting).
        target: Target,
        /// The bound (`Config::max_pending`).
        max_pending: NonZeroUsize,
    },
    /// The answer does not match the outstanding request, or `end_maintenance` came with no
    /// maintenance active (S4).
    #[error("unexpected completion: {answered} while {} is outstanding", OrNothing(.outstanding))]
    UnexpectedCompletion {
        /// What the input tried to complete.
        answered: Completion,
        /// What was actually outstanding.
        outstanding: Option<Outstanding>,
    },
    /// `begin_maintenance` while not idle (S43).
    #[error("busy: maintenance can only begin while idle")]
    Busy,
    /// The machine is disposed; it accepts no input (S45).
    #[error("the machine is disposed and accepts no input")]
    AfterDisposal,
    /// The previous input's outputs were not drained: a [`Transition`](crate::Transition) was
    /// dropped early. [`Machine::drain`](crate::Machine::drain) hands them out. A host error,
    /// never part of a conformance trace.
    #[error("the previous input's outputs were not drained")]
    Undrained,
}

impl Rejected {
    /// The rejection kind of the conformance trace format: `already-pending`,
    /// `already-delivered`, `conflict`, `turn-mismatch`, `full`, `unexpected-completion`, `busy`
    /// or `disposed` (and `undrained`, which no trace contains).
    pub fn kind(&self) -> &'static str {
        match self {
            Rejected::AlreadyPending(_) => "already-pending",
            Rejected::AlreadyDelivered(_) => "already-delivered",
            Rejected::Conflict(_) => "conflict",
            Rejected::TurnMismatch(_) => "turn-mismatch",
            Rejected::Full { .. } => "full",
            Rejected::UnexpectedCompletion { .. } => "unexpected-completion",
            Rejected::Busy => "busy",
            Rejected::AfterDisposal => "disposed",
            Rejected::Undrained => "undrained",
        }
    }
}

/// Why a batch call was refused ([`Machine::begin_batch`](crate::Machine::begin_batch) and its
/// two closers). A refused call changed nothing ([example](crate::Machine::begin_batch)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// `begin_batch` while a batch is open: close it first.
    #[error("a batch is already open")]
    AlreadyOpen,
    /// `commit_batch` or `roll_back_batch` with no batch open.
    #[error("no batch is open")]
    NotOpen,
    /// `begin_batch` while a dropped transition's outputs wait for
    /// [`Machine::drain`](crate::Machine::drain): they belong to no batch.
    #[error("the previous input's outputs were not drained")]
    Undrained,
}

impl BatchError {
    /// The refusal's kind: `already-open`, `not-open` or `undrained`.
    ///
    /// ```
    /// use coxswain_core::{BatchError, Machine};
    ///
    /// let mut machine = Machine::new();
    /// let refused = machine.commit_batch().unwrap_err();
    /// assert_eq!(refused, BatchError::NotOpen);
    /// assert_eq!(refused.kind(), "not-open");
    /// assert_eq!(refused.to_string(), "no batch is open");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            BatchError::AlreadyOpen => "already-open",
            BatchError::NotOpen => "not-open",
            BatchError::Undrained => "undrained",
        }
    }
}

/// What an input tried to complete (for [`Rejected::UnexpectedCompletion`]): an answer to a
/// request of one [`RequestKind`], or `end_maintenance`.
///
/// ```
/// use coxswain_core::{Completion, RequestKind};
///
/// assert_eq!(Completion::Answer(RequestKind::TurnStopping).to_string(), "a turnStopping answer");
/// assert_eq!(Completion::EndMaintenance.to_string(), "endMaintenance");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Completion {
    /// An answer to a request of this kind (S4).
    Answer(RequestKind),
    /// `end_maintenance` (S43).
    EndMaintenance,
}

impl fmt::Display for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Completion::Answer(kind) => write!(f, "a {kind} answer"),
            Completion::EndMaintenance => f.write_str("endMaintenance"),
        }
    }
}

/// What was outstanding, or `nothing`, in [`Rejected::UnexpectedCompletion`]'s text.
struct OrNothing<'a>(&'a Option<Outstanding>);

impl fmt::Display for OrNothing<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(outstanding) => outstanding.fmt(f),
            None => f.write_str("nothing"),
        }
    }
}

/// A durable log the machine cannot be restored from (S46, S47). Nothing was restored.
///
/// # Examples
///
/// ```
/// use coxswain_core::{InvalidLog, LogViolation, Machine};
/// use serde_json::json;
///
/// let log = [
///     json!({"type": "model/output", "data": "fine"}),
///     json!({"type": "turn/start", "data": {"turn": -1}}),
/// ];
/// let error = Machine::restore(&log, 0).unwrap_err();
/// assert_eq!(error, InvalidLog { index: 1, violation: LogViolation::TurnWithoutNumber });
/// assert_eq!(
///     error.to_string(),
///     "invalid log: event 1: `turn/start` without an integer `turn` in [0, 2^53 - 2] (S46)"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("invalid log: event {index}: {violation}")]
pub struct InvalidLog {
    /// The 0-based position of the offending event in the log.
    pub index: usize,
    /// The rule it breaks.
    pub violation: LogViolation,
}

/// The rule an invalid log breaks (S46) ([example](InvalidLog#examples)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum LogViolation {
    /// The event has no string `type`.
    #[error("no string `type` (S46)")]
    MissingType,
    /// A `turn/start` has no integer `turn` in `[0, 2^53 − 2]` (the next turn must stay a
    /// JSON-safe integer, S46).
    #[error("`turn/start` without an integer `turn` in [0, 2^53 - 2] (S46)")]
    TurnWithoutNumber,
    /// A replayed splice has no valid `target`.
    #[error("splice without a valid `target` (S46)")]
    SpliceTarget,
    /// A replayed splice's `start` is not an integer in `0..=len`.
    #[error("splice `start` is not an integer in range (S11, S46)")]
    SpliceStart,
    /// A replayed splice's `removedCount` is not an integer with `start + removedCount <= len`.
    #[error("splice `removedCount` is not an integer in range (S11, S46)")]
    SpliceRemovedCount,
    /// A replayed splice's `inserted` is not a list of messages with string ids.
    #[error("splice `inserted` is not a list of messages with string ids (S46)")]
    SpliceInserted,
    /// A replayed splice has `wakeup` present but not `true`.
    #[error("splice `wakeup` present but not `true` (S10, S46)")]
    SpliceWakeup,
    /// A replayed splice would make an id pending twice.
    #[error("splice makes {} pending twice (S13, S46)", .0.shown())]
    AlreadyPending(MessageId),
    /// The log ends inside the turn this event opened: run crash repair first (S50).
    #[error("the log ends inside the turn this event opened; run crash repair first (S46, S50)")]
    OpenTurn,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_errors_have_one_kind_each() {
        let kinds = [
            BatchError::AlreadyOpen,
            BatchError::NotOpen,
            BatchError::Undrained,
        ]
        .map(|error| error.kind());
        assert_eq!(kinds, ["already-open", "not-open", "undrained"]);
    }

    #[test]
    fn errors_read_well() {
        assert_eq!(
            Rejected::AlreadyPending("a".into()).to_string(),
            "message `a` is already pending"
        );
        assert_eq!(
            Rejected::UnexpectedCompletion {
                answered: Completion::Answer(RequestKind::Step),
                outstanding: Some(Outstanding::PreStep { turn: 2, step: 1 }),
            }
            .to_string(),
            "unexpected completion: a step answer while preStep (turn 2, step 1) is outstanding"
        );
        assert_eq!(
            Rejected::UnexpectedCompletion {
                answered: Completion::Answer(RequestKind::PreStep),
                outstanding: Some(Outstanding::Step { turn: 2, step: 1 }),
            }
            .to_string(),
            "unexpected completion: a preStep answer while step (turn 2, step 1) is outstanding"
        );
        assert_eq!(
            Rejected::UnexpectedCompletion {
                answered: Completion::EndMaintenance,
                outstanding: Some(Outstanding::TurnStopping { turn: 4 }),
            }
            .to_string(),
            "unexpected completion: endMaintenance while turnStopping (turn 4) is outstanding"
        );
        assert_eq!(
            Rejected::UnexpectedCompletion {
                answered: Completion::Answer(RequestKind::TurnStopping),
                outstanding: None,
            }
            .to_string(),
            "unexpected completion: a turnStopping answer while nothing is outstanding"
        );
        assert_eq!(
            InvalidLog {
                index: 3,
                violation: LogViolation::SpliceStart
            }
            .to_string(),
            "invalid log: event 3: splice `start` is not an integer in range (S11, S46)"
        );
    }
}
