//! What an agent's calls fail with, how its driver ends, and what a durable log fails with.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use coxswain_core::{Expect, MessageId, Rejected, Target};
use coxswain_log::{
    CorruptLine, EncodeError, LineTooLong, NotRegularFile, RepairError, ReservedType, TooDeep,
};
use coxswain_session::{LogFailure, Refused};

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

/// A durable log failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// Reading, writing or syncing failed. From an append: the batch is not in the log (a
    /// partial write was cut back and the cut synced).
    #[error("log i/o failed: {0}")]
    Io(Arc<io::Error>),
    /// An append failed and cutting it back failed too, or was not tried because the file is
    /// shorter than what the log holds (a cut-back never extends a file; `undo` is then a
    /// [`LogError::Truncated`]): the batch may or may not be in the log. A cause that is not an
    /// i/o error is the [`LogError`] itself inside the `io::Error`
    /// (`undo.get_ref().and_then(|e| e.downcast_ref::<LogError>())`).
    #[error("log i/o failed ({error}) and undoing the partial write failed too ({undo}): the batch may or may not be in the log")]
    Indeterminate {
        /// Why the append failed.
        error: Arc<io::Error>,
        /// Why cutting it back failed.
        undo: Arc<io::Error>,
    },
    /// A record before the end of the log is not a valid record.
    #[error("corrupt log: {0}")]
    Corrupt(#[from] CorruptLine),
    /// The log's path names something that is not a regular file (a FIFO, a directory, a
    /// socket, a device): refused at open, before anything was read or written.
    #[error(transparent)]
    NotRegular(#[from] NotRegularFile),
    /// A line of the log is longer than any record a session writes
    /// ([`MAX_LINE_BYTES`](coxswain_log::MAX_LINE_BYTES)): the read stopped there, having
    /// buffered no more than the limit of it. Nothing was changed.
    #[error("{}: {}", path.display(), LineTooLong { line: *line, max: *max })]
    LineTooLong {
        /// The file.
        path: PathBuf,
        /// The line's 1-based number.
        line: usize,
        /// The limit.
        max: usize,
    },
    /// A record could not be encoded (nothing was written).
    #[error("cannot encode a record: {0}")]
    Encode(String),
    /// A record nests deeper than a log line may (nothing was written).
    #[error("cannot write a record: {0}")]
    TooDeep(TooDeep),
    /// The next record would take `seq` `u64::MAX`, which nothing could follow (nothing was
    /// written).
    #[error("the log's `seq` is exhausted: no record may take u64::MAX")]
    SeqExhausted,
    /// An earlier append failed indeterminately; the log takes no more appends until it is
    /// re-opened.
    #[error("an earlier append may or may not be in the log; re-open the log")]
    Failed,
    /// Another writer holds the log (another `FileLog`, here or in another process, or an agent
    /// whose driver has not finished: await [`Agent::close`](crate::Agent::close) or
    /// [`Agent::finished`](crate::Agent::finished)).
    #[error("the log {path} is locked by another writer")]
    Locked {
        /// The file.
        path: PathBuf,
    },
    /// The file at the log's path is no longer the one this log writes: it was removed, renamed
    /// or replaced. What this log writes would be lost, so nothing more is acknowledged.
    #[error("the log file {path} was removed or replaced")]
    Replaced {
        /// The path.
        path: PathBuf,
    },
    /// The log's file is shorter than what this log wrote to it: it was cut in place (a
    /// `logrotate` with `copytruncate`, a `: > file`), so records acknowledged before may be
    /// gone. Nothing more is acknowledged. From an append: the batch is not in the log (nothing
    /// was written, or what was written was cut back).
    #[error(
        "the log file {path} was truncated: it holds {found} bytes where this log wrote {expected}"
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Its length as this log left it.
        expected: u64,
        /// Its length now.
        found: u64,
    },
    /// Another writer wrote to the log's file, ignoring its lock: the file is longer than what
    /// this log wrote (`found > expected`: appended to), or it does not end in the bytes this
    /// log wrote last (`found == expected`: overwritten at its end). Nothing more is
    /// acknowledged. From an append: the batch is not in the log (nothing was written, or what
    /// was written was cut back).
    #[error("the log file {path} was written by another writer: {}", tampered(*.expected, *.found))]
    Tampered {
        /// The file.
        path: PathBuf,
        /// Its length as this log left it.
        expected: u64,
        /// Its length now.
        found: u64,
    },
    /// The session is already open on this segment log (a session has one writer at a time:
    /// drop its [`SessionLog`](crate::SessionLog), or await its agent's close, first).
    #[error("session {session} is already open on this segment log")]
    SessionOpen {
        /// The session.
        session: String,
    },
    /// The segment log's writer stopped (its file may be in an unknown state after a failed
    /// cut-back, or was replaced, truncated or written by another writer); re-open the segment
    /// log.
    #[error("the segment log's writer stopped; re-open it")]
    WriterStopped,
    /// Another writer took the session over under a newer epoch (a shared log's fencing, e.g.
    /// PostgreSQL's): this writer's batch is not in the log, and this writer may never append
    /// again. The agent stops; the new owner's restore decides what the session holds.
    #[error("session {session}: fenced, epoch {epoch} was taken over by a newer writer; nothing more is appended by this writer")]
    Fenced {
        /// The session.
        session: String,
        /// The epoch this writer held.
        epoch: u64,
    },
}

impl LogError {
    /// True when the failed append may or may not be in the log ([`LogError::Indeterminate`]).
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, LogError::Indeterminate { .. })
    }

    /// True when a newer writer took the session over ([`LogError::Fenced`]).
    pub fn is_fenced(&self) -> bool {
        matches!(self, LogError::Fenced { .. })
    }

    /// How a failed append with this error failed, for the session layer's agent loop (which
    /// owns the stop policy, [`LogFailure::stops_the_agent`]): [`LogFailure::Indeterminate`]
    /// for [`LogError::Indeterminate`], [`LogFailure::Fenced`] for [`LogError::Fenced`], else
    /// [`LogFailure::Failed`] (not in the log).
    pub fn failure(&self) -> LogFailure {
        match self {
            LogError::Indeterminate { .. } => LogFailure::Indeterminate,
            LogError::Fenced { .. } => LogFailure::Fenced,
            _ => LogFailure::Failed,
        }
    }

    /// True when the agent writing this log must stop: the batch may or may not be in the log
    /// ([`LogError::Indeterminate`]), or another writer owns the session now
    /// ([`LogError::Fenced`]). After any other failed append the agent goes on. The session
    /// layer's policy ([`LogFailure::stops_the_agent`]) on [`failure`](LogError::failure).
    pub fn stops_the_agent(&self) -> bool {
        self.failure().stops_the_agent()
    }
}

/// What [`LogError::Tampered`] found.
fn tampered(expected: u64, found: u64) -> String {
    if found == expected {
        format!("its last bytes are not the ones this log wrote ({found} bytes)")
    } else {
        format!("it holds {found} bytes where this log wrote {expected}")
    }
}

impl From<io::Error> for LogError {
    fn from(error: io::Error) -> Self {
        LogError::Io(Arc::new(error))
    }
}

/// A reader's [`LineTooLong`], before the log names its path (the log fills it in).
impl From<LineTooLong> for LogError {
    fn from(long: LineTooLong) -> Self {
        LogError::LineTooLong {
            path: PathBuf::new(),
            line: long.line,
            max: long.max,
        }
    }
}

impl LogError {
    /// Names the log's file in a [`LogError::LineTooLong`].
    pub(crate) fn at(self, file: &std::path::Path) -> Self {
        match self {
            LogError::LineTooLong { line, max, .. } => LogError::LineTooLong {
                path: file.to_owned(),
                line,
                max,
            },
            other => other,
        }
    }
}

impl From<EncodeError> for LogError {
    fn from(error: EncodeError) -> Self {
        match error {
            EncodeError::TooDeep(deep) => LogError::TooDeep(deep),
            EncodeError::SeqExhausted(_) => LogError::SeqExhausted,
            other => LogError::Encode(other.to_string()),
        }
    }
}
