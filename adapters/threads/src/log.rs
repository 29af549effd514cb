//! The threads driver's durable log: the [`Log`] trait its driver thread appends through, and
//! the shared blocking file log ([`FileLog`], `coxswain-file-log`: the one every coxswain
//! runtime writes, with its lock, its tamper and truncation checks, its cut-back and its sync
//! policies), opened and resumed by [`open_log`].

use std::fs::File;
use std::path::Path;

use coxswain_log::Entry;
use coxswain_session::{RedeliveryTooLarge, ResumeOptions, ResumePlan};

pub use coxswain_file_log::{FileLog, LogError, LogFile, SyncPolicy};

/// Where a session's records go: [`append`](Log::append) makes one batch durable (as durable as
/// the log's sync policy says), or fails having left nothing of it, or not knowing
/// ([`LogError::Indeterminate`]: the agent stops; so does [`LogError::Fenced`]). The stop
/// policy is the session layer's, read from [`LogError::failure`].
pub trait Log: Send + 'static {
    /// Appends `entries` as one batch.
    ///
    /// # Errors
    ///
    /// As the trait says.
    fn append(&mut self, entries: &[Entry]) -> Result<(), LogError>;

    /// Makes everything appended so far durable, whatever the sync policy: the driver calls it
    /// once, when the agent ends, before it releases the log. Default: nothing to do (a log
    /// whose every append is durable).
    ///
    /// # Errors
    ///
    /// What the log's sync fails with ([`AgentError::FinalSync`](crate::AgentError::FinalSync)).
    fn sync(&mut self) -> Result<(), LogError> {
        Ok(())
    }
}

/// The shared file log, appended to on the driver thread: one write (and one `fdatasync`, as
/// its [`SyncPolicy`] says) per batch, every append checking the file first and after.
impl<F: LogFile> Log for FileLog<F> {
    fn append(&mut self, entries: &[Entry]) -> Result<(), LogError> {
        FileLog::append(self, entries).map(drop)
    }

    fn sync(&mut self) -> Result<(), LogError> {
        FileLog::sync(self)
    }
}

/// How [`open_log`] opens a [`FileLog`]: the resume options (the restored machine's config and
/// crash repair's redelivery allowance, S59) and the sync policy (default
/// [`SyncPolicy::EveryAppend`]). A [`Config`](coxswain_core::Config) or a [`ResumeOptions`]
/// converts into it.
///
/// ```
/// use coxswain_core::Config;
/// use coxswain_threads::{LogOptions, SyncPolicy};
///
/// let options = LogOptions::from(Config::new()).with_sync(SyncPolicy::PerTurn);
/// assert_eq!((options.sync, options.resume.redelivery), (SyncPolicy::PerTurn, 0));
/// ```
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct LogOptions {
    /// How the session is resumed.
    pub resume: ResumeOptions,
    /// When the log syncs on its own.
    pub sync: SyncPolicy,
}

impl LogOptions {
    /// These options with the sync policy `sync`.
    pub const fn with_sync(self, sync: SyncPolicy) -> Self {
        LogOptions { sync, ..self }
    }
}

impl From<ResumeOptions> for LogOptions {
    fn from(resume: ResumeOptions) -> Self {
        LogOptions {
            resume,
            sync: SyncPolicy::default(),
        }
    }
}

impl From<coxswain_core::Config> for LogOptions {
    fn from(config: coxswain_core::Config) -> Self {
        LogOptions::from(ResumeOptions::from(config))
    }
}

/// Why [`open_log`] failed: the redelivery allowance (S59), refused before anything was opened,
/// or the log's own failure ([`LogError`], naming the file).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The redelivery allowance is above [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY)
    /// (S59): refused before the log was opened (nothing read or written).
    #[error(transparent)]
    Redelivery(#[from] RedeliveryTooLarge),
    /// Opening, reading back, repairing or resuming the log failed.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// Opens (or creates) the file log at `path` and resumes the session it holds (S46–S50, S57,
/// S59) through the shared log's one resume path ([`FileLog::resume`]): the torn tail is cut,
/// the closers appended (S50), then the redelivery splices of the allowance (S59). Returns the
/// log and the plan (its restored machine; [`ResumePlan::redelivered`] says how many messages
/// are pending again). Hand both to [`Agent::start`](crate::Agent::start).
///
/// ```
/// use coxswain_core::Config;
/// use coxswain_threads::{open_log, LogOptions, OpenError, SyncPolicy};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("session.jsonl");
/// let options = LogOptions::from(Config::new()).with_sync(SyncPolicy::Never);
/// let (log, plan) = open_log(&path, options)?;
/// assert_eq!((plan.records, log.next_seq(), log.policy()), (0, 1, SyncPolicy::Never));
/// // The log is locked for its whole life: a second writer is refused, naming the file.
/// let locked = open_log(&path, Config::new()).unwrap_err();
/// assert!(matches!(&locked, OpenError::Log(error) if error.kind() == "locked"));
/// assert_eq!(
///     locked.to_string(),
///     format!("the log {} is locked by another writer", path.display()),
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`OpenError::Redelivery`] for an allowance above
/// [`MAX_REDELIVERY`](coxswain_session::MAX_REDELIVERY), before anything is opened; else
/// [`OpenError::Log`]: [`LogError::NotRegular`] for a FIFO, a directory or a socket (never
/// opened), [`LogError::Locked`], [`LogError::PermissionDenied`], [`LogError::Invalid`] or
/// [`LogError::Corrupt`] for a log the core does not accept (left as it was),
/// [`LogError::LineTooLong`], i/o errors.
pub fn open_log(
    path: impl AsRef<Path>,
    options: impl Into<LogOptions>,
) -> Result<(FileLog, ResumePlan), OpenError> {
    open_log_wrapped(path, options, std::convert::identity)
}

/// [`open_log`], every operation on the opened, locked file going through the [`LogFile`]
/// `wrap` returns ([`FileLog::open_wrapped`]: one that counts the syncs, or fails some as a
/// fault injector does).
///
/// # Errors
///
/// As [`open_log`].
pub fn open_log_wrapped<F: LogFile>(
    path: impl AsRef<Path>,
    options: impl Into<LogOptions>,
    wrap: impl FnOnce(File) -> F,
) -> Result<(FileLog<F>, ResumePlan), OpenError> {
    let LogOptions { resume, sync } = options.into();
    // The session layer owns the bound; `with_redelivery` does not check it: checked here,
    // before the file is opened (S59).
    let resume = resume.try_with_redelivery(resume.redelivery)?;
    let mut log = FileLog::open_wrapped(path, sync, wrap)?;
    let plan = log.resume(resume)?;
    Ok((log, plan))
}
