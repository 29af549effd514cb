//! [`LogError`]: what a coxswain log fails with, one vocabulary for every log (this file log, the
//! tokio driver's segment log, PostgreSQL) and every language (the Python and Node bindings map
//! [`LogError::kind`] to their error classes). Every error of a file names the file.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coxswain_log::{CorruptLine, EncodeError, LineTooLong, NotRegularFile, RepairError, TooDeep};
use coxswain_session::LogFailure;

/// A durable log failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// Reading, writing or syncing failed. From an append: the batch is not in the log (a
    /// partial write was cut back and the cut synced). The OS error as it was (a full file
    /// system and a refused permission have variants of their own, naming the file).
    #[error("log i/o failed: {0}")]
    Io(Arc<io::Error>),
    /// The file system is full (`ENOSPC`, or a quota: `EDQUOT`): nothing of the append is in the
    /// log (it was cut back). Free space and send again.
    #[error("the log file {path} cannot grow: no space left on its file system")]
    StorageFull {
        /// The file.
        path: PathBuf,
    },
    /// The process may not open, write or lock the log's file, or sync its directory (`EACCES`,
    /// `EPERM`, a read-only file system): nothing was written.
    #[error("the log file {path}: permission denied ({error})")]
    PermissionDenied {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: Arc<io::Error>,
    },
    /// The log was closed: it takes no more appends or syncs.
    #[error("the log file {path} is closed")]
    Closed {
        /// The file.
        path: PathBuf,
    },
    /// The log's records are not a log the core accepts (S46, S47): a rule broken before its
    /// end, named by its line. Nothing was changed.
    #[error("{}: the log cannot be resumed: {error}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The line and the rule.
        error: RepairError,
    },
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
    /// A record before the end of the log is not a valid record (its line and what is wrong).
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
    /// Another writer holds the log (another `FileLog`, here or in another process, in any
    /// language, or an agent whose driver has not finished: close it first).
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
    /// drop its session log, or await its agent's close, first).
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
    /// The error's kind: the one name every language gives it (the Python and Node bindings map
    /// it to their error classes, never from an errno or a message): `io`, `storage-full`,
    /// `permission-denied`, `closed`, `invalid`, `indeterminate`, `corrupt`, `not-regular`,
    /// `line-too-long`, `encode`, `too-deep`, `seq-exhausted`, `failed`, `locked`, `replaced`,
    /// `truncated`, `tampered`, `session-open`, `writer-stopped`, `fenced`.
    ///
    /// ```
    /// use coxswain_file_log::LogError;
    /// use std::path::PathBuf;
    ///
    /// let error = LogError::Truncated { path: PathBuf::from("/logs/a.jsonl"), expected: 90, found: 0 };
    /// assert_eq!(error.kind(), "truncated");
    /// assert_eq!(
    ///     error.to_string(),
    ///     "the log file /logs/a.jsonl was truncated: it holds 0 bytes where this log wrote 90",
    /// );
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            LogError::Io(_) => "io",
            LogError::StorageFull { .. } => "storage-full",
            LogError::PermissionDenied { .. } => "permission-denied",
            LogError::Closed { .. } => "closed",
            LogError::Invalid { .. } => "invalid",
            LogError::Indeterminate { .. } => "indeterminate",
            LogError::Corrupt(_) => "corrupt",
            LogError::NotRegular(_) => "not-regular",
            LogError::LineTooLong { .. } => "line-too-long",
            LogError::Encode(_) => "encode",
            LogError::TooDeep(_) => "too-deep",
            LogError::SeqExhausted => "seq-exhausted",
            LogError::Failed => "failed",
            LogError::Locked { .. } => "locked",
            LogError::Replaced { .. } => "replaced",
            LogError::Truncated { .. } => "truncated",
            LogError::Tampered { .. } => "tampered",
            LogError::SessionOpen { .. } => "session-open",
            LogError::WriterStopped => "writer-stopped",
            LogError::Fenced { .. } => "fenced",
        }
    }

    /// The error of a file operation on the log at `path` failing with `error`: a full file
    /// system is [`LogError::StorageFull`], a refused permission [`LogError::PermissionDenied`],
    /// anything else [`LogError::Io`].
    pub fn at_path(path: &Path, error: io::Error) -> LogError {
        use rustix::io::Errno;
        let errno = error.raw_os_error().map(Errno::from_raw_os_error);
        if errno == Some(Errno::NOSPC) || errno == Some(Errno::DQUOT) {
            return LogError::StorageFull {
                path: path.to_owned(),
            };
        }
        if errno == Some(Errno::ACCESS) || errno == Some(Errno::PERM) || errno == Some(Errno::ROFS)
        {
            return LogError::PermissionDenied {
                path: path.to_owned(),
                error: Arc::new(error),
            };
        }
        LogError::Io(Arc::new(error))
    }

    /// This error as a file log at `path` returns it: an i/o error that is a full file system
    /// or a refused permission becomes [`LogError::StorageFull`] or
    /// [`LogError::PermissionDenied`] naming the file, and a line too long names the file.
    pub fn in_file(self, path: &Path) -> LogError {
        match self {
            LogError::Io(error) => match Arc::try_unwrap(error) {
                Ok(error) => LogError::at_path(path, error),
                Err(shared) => LogError::Io(shared),
            },
            LogError::LineTooLong { line, max, .. } => LogError::LineTooLong {
                path: path.to_owned(),
                line,
                max,
            },
            other => other,
        }
    }

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

impl From<EncodeError> for LogError {
    fn from(error: EncodeError) -> Self {
        match error {
            EncodeError::TooDeep(deep) => LogError::TooDeep(deep),
            EncodeError::SeqExhausted(_) => LogError::SeqExhausted,
            other => LogError::Encode(other.to_string()),
        }
    }
}
