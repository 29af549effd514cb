//! The blocking durable log: one write and one `fdatasync` per batch; a failed append is cut
//! back to where it began before the error is returned, so the batch is not in the log.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use coxswain_log::{encode, read_log, Entry, NotRegularFile, ReadLogError, MAX_LINE_BYTES};
use coxswain_session::{LogFailure, RedeliveryTooLarge, ResumeError, ResumeOptions, ResumePlan};

/// Why the log failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// Writing or syncing failed and the write was cut back: the batch is not in the log.
    #[error("log i/o failed: {0}")]
    Io(#[from] std::io::Error),
    /// The write failed and cutting it back failed too: the batch may or may not be in the
    /// log. Re-open it.
    #[error("log i/o failed ({error}) and undoing the partial write failed ({undo})")]
    Indeterminate {
        /// Why the append failed.
        error: std::io::Error,
        /// Why the cut-back failed.
        undo: std::io::Error,
    },
    /// A record could not be encoded (nothing was written).
    #[error("a record cannot be encoded: {0}")]
    Encode(#[from] coxswain_log::EncodeError),
    /// The stored log cannot be resumed (nothing was changed).
    #[error("the log cannot be resumed: {0}")]
    Resume(#[from] ResumeError),
    /// The redelivery allowance is above
    /// [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY) (S59): refused before the log was
    /// opened (nothing read or written).
    #[error(transparent)]
    Redelivery(#[from] RedeliveryTooLarge),
    /// The log's path names something that is not a regular file (a FIFO, a directory, a
    /// socket, a device): refused before it was opened.
    #[error(transparent)]
    NotRegular(#[from] NotRegularFile),
    /// A line of the log is longer than any record a session writes
    /// ([`MAX_LINE_BYTES`](coxswain_log::MAX_LINE_BYTES)): the read stopped there, having held no
    /// more than the limit of it. Nothing was changed.
    #[error("{}: {error}", path.display())]
    LineTooLong {
        /// The file.
        path: PathBuf,
        /// The line and the limit.
        error: coxswain_log::LineTooLong,
    },
    /// The path no longer names the log's file (removed, renamed or replaced): nothing was
    /// written, and every append fails so until the log is looked at.
    #[error("the log file was removed or replaced; nothing was written")]
    Replaced,
    /// Another writer owns the session (a [`Log`] of your own that fences, like a lease): nothing
    /// was written, and the agent stops.
    #[error("another writer owns the session: {0}")]
    Fenced(String),
}

impl LogError {
    /// How the agent loop reads this failure (its stop policy,
    /// [`LogFailure::stops_the_agent`]): indeterminate and fenced stop the agent.
    pub fn failure(&self) -> LogFailure {
        match self {
            LogError::Indeterminate { .. } => LogFailure::Indeterminate,
            LogError::Fenced(_) => LogFailure::Fenced,
            _ => LogFailure::Failed,
        }
    }
}

/// Where a session's records go: [`append`](Log::append) makes one batch durable, or fails
/// having left nothing of it ([`LogError::Io`]) or not knowing ([`LogError::Indeterminate`]).
pub trait Log: Send + 'static {
    /// Appends `entries` as one batch.
    ///
    /// # Errors
    ///
    /// As the trait says.
    fn append(&mut self, entries: &[Entry]) -> Result<(), LogError>;
}

/// A JSON-lines file log (the format of `coxswain-log`, the tokio adapter's `FileLog`'s).
#[derive(Debug)]
pub struct FileLog {
    file: File,
    path: PathBuf,
    len: u64,
    next_seq: u64,
    buffer: Vec<u8>,
}

impl FileLog {
    /// Opens (or creates) the log at `path` and plans its resume with `options` (a bare
    /// [`Config`](coxswain_core::Config) is redelivery allowance 0): the torn tail is cut, the
    /// closers appended (S50), then the redelivery splices of the allowance (S59). Returns the
    /// log and the plan (its restored machine; [`ResumePlan::redelivered`] says how many
    /// messages are pending again).
    ///
    /// # Errors
    ///
    /// [`LogError::Redelivery`] for an allowance above
    /// [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY), before anything is opened;
    /// [`LogError::Resume`] for a log the core does not accept (left as it was); I/O errors.
    pub fn open(
        path: impl AsRef<Path>,
        options: impl Into<ResumeOptions>,
    ) -> Result<(FileLog, ResumePlan), LogError> {
        let options = options.into();
        // The session layer owns the bound: checked again here, since `with_redelivery` is not.
        let options = options.try_with_redelivery(options.redelivery)?;
        let path = path.as_ref();
        // Never open a FIFO (it would block): look first, and check the opened file again.
        match std::fs::metadata(path) {
            Ok(meta) => NotRegularFile::check(path, meta.file_type())?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(error.into()),
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)?;
        NotRegularFile::check(path, file.metadata()?.file_type())?;
        let bytes = read_log(&mut file, MAX_LINE_BYTES).map_err(|error| match error {
            ReadLogError::TooLong(error) => LogError::LineTooLong {
                path: path.to_owned(),
                error,
            },
            ReadLogError::Io(error) => LogError::Io(error),
            other => LogError::Io(std::io::Error::other(other)),
        })?;
        let plan = ResumePlan::from_bytes(&bytes, options)?;
        // The session layer's repair, carried out: cut the torn tail, then append (S50, S59).
        let repair = plan.byte_repair()?;
        let mut len = bytes.len() as u64;
        if let Some(cut) = repair.cut_to {
            file.set_len(cut)?;
            len = cut;
        }
        file.write_all(&repair.append)?;
        file.sync_data()?;
        let log = FileLog {
            file,
            path: path.to_path_buf(),
            len: len + repair.append.len() as u64,
            next_seq: repair.next_seq,
            buffer: Vec::new(),
        };
        Ok((log, plan))
    }
}

impl Log for FileLog {
    fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
        if entries.is_empty() {
            return Ok(());
        }
        // The path still names the open file, and the file is still linked: else nothing.
        let (open, named) = (self.file.metadata()?, std::fs::metadata(&self.path));
        if !named.is_ok_and(|named| (named.dev(), named.ino()) == (open.dev(), open.ino()))
            || open.nlink() == 0
        {
            return Err(LogError::Replaced);
        }
        self.buffer.clear();
        for (seq, entry) in (self.next_seq..).zip(entries) {
            encode(seq, entry, &mut self.buffer)?;
        }
        let written = self
            .file
            .write_all(&self.buffer)
            .and_then(|()| self.file.sync_data());
        if let Err(error) = written {
            // Cut back to where the batch began, and make the cut durable.
            return match self
                .file
                .set_len(self.len)
                .and_then(|()| self.file.sync_data())
            {
                Ok(()) => Err(LogError::Io(error)),
                Err(undo) => Err(LogError::Indeterminate { error, undo }),
            };
        }
        self.len += self.buffer.len() as u64;
        self.next_seq += entries.len() as u64;
        Ok(())
    }
}
