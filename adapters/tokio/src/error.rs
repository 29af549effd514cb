//! What an agent's calls fail with and how its driver ends. What a durable log fails with is
//! the shared file log's [`LogError`] (one vocabulary for every log and language).

use coxswain_core::{Expect, MessageId, Rejected, Target};
use coxswain_log::{RepairError, ReservedType, TooDeep};
use coxswain_session::Refused;

pub use coxswain_file_log::LogError;

use crate::options::InvalidOptions;
#[cfg(doc)]
use crate::{Agent, DurableLog, FileLog, Options};

/// Why a call on an [`Agent`] failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The core rejected the input; nothing changed (S5). The §12 rejections have variants of
    /// their own ([`Conflict`](AgentError::Conflict), [`TurnMismatch`](AgentError::TurnMismatch),
    /// [`Full`](AgentError::Full)), as [`AlreadyDelivered`](AgentError::AlreadyDelivered) has.
    #[error("rejected: {0}")]
    Rejected(#[from] Rejected),
    /// The delivery memory holds this id: the message was delivered before and has left the
    /// lists (claimed or removed), so this is a retry and it is not delivered again (S52).
    /// Nothing changed. Treat it as success, like `Rejected(AlreadyPending(..))`
    /// ([`was_delivered`](AgentError::was_delivered)).
    #[error("message {} was already delivered", .0.shown())]
    AlreadyDelivered(MessageId),
    /// The id is pending, or held by the delivery memory, for a *different* message (S56): the
    /// caller reused an id. Nothing changed, and the new message was not delivered: this is a
    /// caller bug, never success ([`was_delivered`](AgentError::was_delivered) is false).
    #[error("rejected: message id {} is already used by a different message", .0.shown())]
    Conflict(MessageId),
    /// A guarded send's expected-turn guard does not hold (S54): the turn it named has ended or
    /// was stopped ([`Agent::steer_expecting`]), or a turn started since the caller looked
    /// ([`Agent::followup_if_idle_after`]). Nothing changed.
    #[error("rejected: the send expected {0}, which does not hold")]
    TurnMismatch(Expect),
    /// The list the delivery joins (after S18's retargeting) already holds
    /// [`Options::max_pending`] items (S55); nothing changed.
    #[error("rejected: the {target} list is full ({max} items pending)")]
    Full {
        /// The full list: the one the core resolved the delivery to.
        target: Target,
        /// [`Options::max_pending`].
        max: usize,
    },
    /// Appending the batch this input joined failed and was cut back: the input is not in the
    /// log, and the agent is exactly as if it had never been sent (the session layer rolled the
    /// whole batch back). The agent goes on: send it again to deliver it once. After
    /// [`LogError::Replaced`], [`LogError::Truncated`] or [`LogError::Tampered`] the file was
    /// changed behind the agent's back, and every append fails until it is looked at. After
    /// [`LogError::Fenced`] the agent stopped: another writer owns the session.
    #[error("the input is not durable: {0}")]
    Persistence(LogError),
    /// Appending this input's durable events failed and undoing the partial write failed too
    /// (or would have had to extend a file found shorter than the log: see
    /// [`LogError::Indeterminate`]): the input may or may not be in the log, so the agent
    /// stopped (ended, and its log released, by the time this is returned): re-open it and look
    /// (its pending lists) before retrying.
    #[error(
        "the input may or may not be durable: {0}; the agent stopped, re-open it from the log"
    )]
    Indeterminate(LogError),
    /// The final sync failed when the agent ended: records acknowledged without a sync (the
    /// `PerTurn` and `Never` policies) may be lost.
    #[error("the final sync of the log failed: {0}")]
    FinalSync(LogError),
    /// A message or host event nests deeper than a log record can hold; nothing changed.
    #[error("rejected: {0}")]
    TooDeep(#[from] TooDeep),
    /// The agent stopped after an indeterminate append: re-open it from its log.
    #[error("the agent stopped after an indeterminate append; re-open it from the log")]
    Stopped,
    /// The agent was closed.
    #[error("the agent is closed")]
    Closed,
    /// A host event was recorded after its step was answered.
    #[error("the step is closed: host events go inside their step")]
    StepClosed,
    /// A host event used a type of the machine's own vocabulary.
    #[error(transparent)]
    Reserved(#[from] ReservedType),
    /// The maintenance job panicked (the maintenance ended all the same).
    #[error("the maintenance job panicked")]
    JobPanicked,
    /// The message's JSON encoding is larger than [`Options::max_message_bytes`]; nothing
    /// changed.
    #[error("rejected: message {} is {bytes} bytes encoded, above the limit of {max}", id.shown())]
    MessageTooLarge {
        /// The message.
        id: MessageId,
        /// Its encoded size.
        bytes: usize,
        /// [`Options::max_message_bytes`].
        max: usize,
    },
    /// A message id is longer than [`Options::max_id_bytes`]; nothing changed.
    #[error("rejected: a message id of {bytes} bytes is above the limit of {max}")]
    IdTooLong {
        /// The id's length in bytes.
        bytes: usize,
        /// [`Options::max_id_bytes`].
        max: usize,
    },
}

impl AgentError {
    /// The error of a core rejection: the §12 kinds and `already-delivered` as their own
    /// variants, every other kind as [`AgentError::Rejected`].
    pub(crate) fn rejected(rejected: Rejected) -> Self {
        match rejected {
            Rejected::AlreadyDelivered(id) => AgentError::AlreadyDelivered(id),
            Rejected::Conflict(id) => AgentError::Conflict(id),
            Rejected::TurnMismatch(expect) => AgentError::TurnMismatch(expect),
            Rejected::Full {
                target,
                max_pending,
            } => AgentError::Full {
                target,
                max: max_pending.get(),
            },
            other => AgentError::Rejected(other),
        }
    }

    /// The error of a session-layer refusal (admission or the core); nothing changed (S5).
    pub(crate) fn refused(refused: Refused) -> Self {
        match refused {
            Refused::Rejected(rejected) => AgentError::rejected(rejected),
            Refused::IdTooLong { bytes, max } => AgentError::IdTooLong { bytes, max },
            Refused::MessageTooLarge { id, bytes, max } => {
                AgentError::MessageTooLarge { id, bytes, max }
            }
            Refused::TooDeep(deep) => AgentError::TooDeep(deep),
            Refused::StepClosed { .. } => AgentError::StepClosed,
            // The driver settles every batch before it feeds the next input.
            _ => AgentError::Rejected(Rejected::Undrained),
        }
    }

    /// The error's kind: the one name every language gives it (the same string in the Python
    /// and Node bindings). A refusal's is its [`Refused::kind`] (the core's
    /// [`Rejected::kind`]: `already-pending`, `already-delivered`, `conflict`,
    /// `turn-mismatch`, `full`, `busy`, `disposed`…; `id-too-long`, `message-too-large`,
    /// `too-deep`, `step-closed`); the agent's own are `persistence`, `indeterminate`,
    /// `stopped` and `closed`; this driver's alone `final-sync`, `reserved` (a host event of
    /// the machine's own type) and `job-panicked`.
    pub fn kind(&self) -> &'static str {
        match self {
            AgentError::Rejected(rejected) => rejected.kind(),
            AgentError::AlreadyDelivered(_) => "already-delivered",
            AgentError::Conflict(_) => "conflict",
            AgentError::TurnMismatch(_) => "turn-mismatch",
            AgentError::Full { .. } => "full",
            AgentError::Persistence(_) => "persistence",
            AgentError::Indeterminate(_) => "indeterminate",
            AgentError::FinalSync(_) => "final-sync",
            AgentError::TooDeep(_) => "too-deep",
            AgentError::Stopped => "stopped",
            AgentError::Closed => "closed",
            AgentError::StepClosed => "step-closed",
            AgentError::Reserved(_) => "reserved",
            AgentError::JobPanicked => "job-panicked",
            AgentError::MessageTooLarge { .. } => "message-too-large",
            AgentError::IdTooLong { .. } => "id-too-long",
        }
    }

    /// Whether the error says the message was delivered already: `AlreadyDelivered`, or an id
    /// still pending (`Rejected(AlreadyPending)`) for the same message. A retry that gets either
    /// can stop retrying. A [`Conflict`](AgentError::Conflict) is not: the id belongs to another
    /// message, and this one was never delivered (S56).
    pub fn was_delivered(&self) -> bool {
        matches!(
            self,
            AgentError::AlreadyDelivered(_) | AgentError::Rejected(Rejected::AlreadyPending(_))
        )
    }
}

/// How an agent's driver task ended.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Ending {
    /// The core emitted `disposed` (S45).
    Disposed,
    /// [`Agent::close`] was called, or every handle was dropped.
    Closed,
    /// An append failed and could not be cut back (the log may hold more than the agent knows),
    /// or another writer took the session over ([`LogError::Fenced`]).
    Stopped(LogError),
}

impl Ending {
    /// The ending's kind, as every language names it: `disposed`, `closed` or `stopped` (the
    /// session layer's [`Ending::kind`](coxswain_session::Ending::kind)).
    pub fn kind(&self) -> &'static str {
        match self {
            Ending::Disposed => "disposed",
            Ending::Closed => "closed",
            Ending::Stopped(_) => "stopped",
        }
    }

    /// What a call gets once the driver has ended this way.
    pub(crate) fn error(&self) -> AgentError {
        match self {
            Ending::Disposed => AgentError::Rejected(Rejected::AfterDisposal),
            Ending::Closed => AgentError::Closed,
            Ending::Stopped(_) => AgentError::Stopped,
        }
    }
}

/// An agent could not be opened on its log.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Reading or repairing the log failed (or a line is not a record).
    #[error(transparent)]
    Log(#[from] LogError),
    /// The log breaks a rule before its end; it names the line.
    #[error("the log cannot be repaired: {0}")]
    Corrupt(#[from] RepairError),
    /// The [`Options`] are out of bounds.
    #[error("invalid options: {0}")]
    Options(#[from] InvalidOptions),
    /// The `resume` sent at open ([`Options::resume_on_open`], S57) failed: the log was
    /// repaired, but the agent was closed again (open it again to retry).
    #[error("the resume sent at open failed: {0}")]
    Resume(AgentError),
}
