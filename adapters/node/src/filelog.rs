//! [`NativeFileLog`]: the one blocking file log of every coxswain runtime
//! ([`coxswain_file_log::FileLog`]), for `log.js`. Every call that does IO returns a Promise
//! from a napi [`AsyncTask`]: the log's work runs on libuv's thread pool, never on the
//! JavaScript thread. The log lives in an `Arc<Mutex<Option<FileLog>>>` each task locks (one
//! call at a time: `log.js` queues its calls, so the lock is never contended in practice);
//! `close` drops it, releasing the file and its `flock`, and a later call rejects with the
//! `closed` kind.
//!
//! A failure crosses as a rejection whose message is JSON text ([`reason`]): the error's
//! [`kind`](LogError::kind) (the one name every language gives it), its message (which names
//! the file), the file's path and the error's own fields. `errors.js` (`logError`) maps the
//! kind to its class; it never looks at an errno or at the message's text.

#[cfg(not(feature = "faults"))]
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use coxswain_binding_kit::options;
use coxswain_core::Machine;
use coxswain_file_log::{FileLog, LogError, SyncPolicy};
use napi::bindgen_prelude::{AsyncTask, Buffer};
use napi::{Env, Task};
use napi_derive::napi;
use serde_json::{json, Map, Value};

use crate::machine::NativeMachine;
use crate::wire;

#[cfg(feature = "faults")]
use crate::faults::{Faults, Wrapped};

/// The file the shipped addon's log writes: the plain [`File`] (a test build's wraps it to
/// inject faults, `crate::faults`).
#[cfg(not(feature = "faults"))]
type Wrapped = File;

/// The log a [`NativeFileLog`] holds: `None` once closed.
type Held = Arc<Mutex<Option<FileLog<Wrapped>>>>;

/// A log file opened by [`open_file_log`]: the shared Rust [`FileLog`] behind `log.js`'s
/// `FileLog`.
#[napi]
pub struct NativeFileLog {
    log: Held,
    /// The file's absolute path.
    path: String,
    /// The `seq` the next record takes, as the last call left it (read without the lock).
    next_seq: Arc<AtomicU64>,
    /// Whether an append was indeterminate: the log takes no more appends, closed or not.
    failed: Arc<AtomicBool>,
    /// The session a [`resume`](NativeFileLog::resume) restored, until its machine adopts it.
    resumed: Arc<Mutex<Option<Machine>>>,
    /// What the file's operations counted, and the faults a test asked for (a test build).
    #[cfg(feature = "faults")]
    pub(crate) faults: Arc<Faults>,
}

/// Opens (or creates) the log at `path` syncing as `sync` says (`every-append`, `per-turn`,
/// `never`), on libuv's pool: its `flock` taken, a path that names a FIFO, a directory, a
/// socket or a device refused before it is opened (`not-regular`). Resolves with the
/// [`NativeFileLog`].
#[napi]
pub fn open_file_log(path: String, sync: String) -> AsyncTask<Open> {
    AsyncTask::new(Open { path, sync })
}

/// What [`Open`] opened: the log, and (a test build) its faults.
#[cfg(feature = "faults")]
type Opened = (FileLog<Wrapped>, Arc<Faults>);
#[cfg(not(feature = "faults"))]
type Opened = (FileLog<Wrapped>, ());

/// The task of [`open_file_log`].
pub struct Open {
    path: String,
    sync: String,
}

impl Task for Open {
    type Output = Result<Opened, LogError>;
    type JsValue = NativeFileLog;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let Ok(policy) = self.sync.parse::<SyncPolicy>() else {
            // `log.js` checks the word first: this is only a backstop.
            return Err(napi::Error::from_reason(format!(
                "unknown sync policy `{}`",
                self.sync
            )));
        };
        #[cfg(feature = "faults")]
        {
            let faults = Arc::new(Faults::default());
            Ok(
                FileLog::open_wrapped(&self.path, policy, Faults::wrap(&faults))
                    .map(|log| (log, faults)),
            )
        }
        #[cfg(not(feature = "faults"))]
        Ok(FileLog::open(&self.path, policy).map(|log| (log, ())))
    }

    fn resolve(&mut self, _: Env, output: Self::Output) -> napi::Result<NativeFileLog> {
        #[cfg_attr(not(feature = "faults"), allow(clippy::let_unit_value))]
        let (log, faults) = output.map_err(|error| rejection(&error, Path::new(&self.path)))?;
        #[cfg(not(feature = "faults"))]
        let () = faults;
        Ok(NativeFileLog {
            path: log.path().display().to_string(),
            next_seq: Arc::new(AtomicU64::new(log.next_seq())),
            failed: Arc::default(),
            log: Arc::new(Mutex::new(Some(log))),
            resumed: Arc::default(),
            #[cfg(feature = "faults")]
            faults,
        })
    }
}

#[napi]
impl NativeFileLog {
    /// The file's absolute path.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.path.clone()
    }

    /// The `seq` the next appended record takes (1 before the log was read back).
    #[napi(getter)]
    pub fn next_seq(&self) -> i64 {
        i64::try_from(self.next_seq.load(Ordering::Acquire)).unwrap_or(i64::MAX)
    }

    /// Resumes the session the file holds (`FileLog::resume`, S46–S50, S57, S59), restored
    /// with `machine`'s delivery memory, admission bound and hash seed and crash repair's
    /// redelivery allowance `redelivery` (absent: 0). Resolves with JSON text: `{records, torn,
    /// unterminated, nextSeq, closers, redelivered, interrupted}` (`nextSeq` after the closers
    /// were appended); the restored machine waits here until [`NativeMachine::adopt_resumed`]
    /// takes it. A log it refuses is left as it was (`corrupt`, `invalid`, `line-too-long`).
    ///
    /// # Errors
    ///
    /// An allowance the session layer refuses (thrown at once, nothing read).
    #[napi]
    pub fn resume(
        &self,
        machine: &NativeMachine,
        redelivery: Option<i64>,
    ) -> napi::Result<AsyncTask<Resume>> {
        let allowance = i128::from(redelivery.unwrap_or(0));
        let options = options::resume_options(machine.core.borrow().machine.config(), allowance)
            .map_err(|why| napi::Error::from_reason(why.to_string()))?;
        Ok(AsyncTask::new(Resume {
            call: self.call(),
            options: Some(options),
            resumed: Arc::clone(&self.resumed),
        }))
    }

    /// Reads the log back and repairs its tail if that was not done (`FileLog::repair_tail`):
    /// appends go after a complete line. Resolves with the `seq` the next record takes.
    #[napi]
    pub fn prepare(&self) -> AsyncTask<Prepare> {
        AsyncTask::new(Prepare { call: self.call() })
    }

    /// Appends `count` records encoded as `lines`, numbered from `firstSeq` (the log's
    /// `nextSeq`: refused with the `encode` kind, nothing written, when another append came
    /// first or the lines are not `count` records), syncing as the policy says for a batch that
    /// does (`endsTurn`) or does not end a turn (`FileLog::append_encoded`). Resolves with the
    /// first record's `seq`.
    #[napi]
    pub fn append_encoded(
        &self,
        first_seq: i64,
        lines: Buffer,
        count: u32,
        ends_turn: bool,
    ) -> AsyncTask<Append> {
        AsyncTask::new(Append {
            call: self.call(),
            first_seq: u64::try_from(first_seq).unwrap_or(0),
            lines,
            count: count as usize,
            ends_turn,
        })
    }

    /// Makes everything appended durable and checks the file is still the log's
    /// (`FileLog::sync`).
    #[napi]
    pub fn sync(&self) -> AsyncTask<SyncTask> {
        AsyncTask::new(SyncTask { call: self.call() })
    }

    /// Closes the log: the file and its `flock` are released; every later call but `close`
    /// rejects with the `closed` kind.
    #[napi]
    pub fn close(&self) -> AsyncTask<Close> {
        AsyncTask::new(Close { call: self.call() })
    }

    fn call(&self) -> Call {
        Call {
            log: Arc::clone(&self.log),
            path: self.path.clone(),
            next_seq: Arc::clone(&self.next_seq),
            failed: Arc::clone(&self.failed),
        }
    }
}

impl NativeFileLog {
    /// The machine the last [`resume`](NativeFileLog::resume) restored, taken (once).
    pub(crate) fn take_resumed(&self) -> Option<Machine> {
        lock(&self.resumed).take()
    }
}

/// What every task of a [`NativeFileLog`] holds: the log, its path, its `seq` mirror, whether
/// it failed.
struct Call {
    log: Held,
    path: String,
    next_seq: Arc<AtomicU64>,
    failed: Arc<AtomicBool>,
}

impl Call {
    /// Runs `op` on the open log (on libuv's pool), then mirrors its next `seq`. Once the log
    /// was closed: `failed` if an append of it was indeterminate (it never took appends again),
    /// else `closed`.
    fn with<T>(
        &self,
        op: impl FnOnce(&mut FileLog<Wrapped>) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        let mut held = lock(&self.log);
        let Some(log) = held.as_mut() else {
            if self.failed.load(Ordering::Acquire) {
                return Err(LogError::Failed);
            }
            return Err(LogError::Closed {
                path: self.path.clone().into(),
            });
        };
        let result = op(log);
        self.next_seq.store(log.next_seq(), Ordering::Release);
        if matches!(&result, Err(error) if error.is_indeterminate()) {
            self.failed.store(true, Ordering::Release);
        }
        result
    }

    /// The rejection of `error`, or the value.
    fn settle<T>(&self, output: Result<T, LogError>) -> napi::Result<T> {
        output.map_err(|error| rejection(&error, Path::new(&self.path)))
    }
}

/// The task of [`NativeFileLog::resume`].
pub struct Resume {
    call: Call,
    options: Option<coxswain_session::ResumeOptions>,
    resumed: Arc<Mutex<Option<Machine>>>,
}

impl Task for Resume {
    type Output = Result<String, LogError>;
    type JsValue = String;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let Some(options) = self.options.take() else {
            return Err(napi::Error::from_reason("the resume task ran twice"));
        };
        let resumed = &self.resumed;
        Ok(self.call.with(|log| {
            let plan = log.resume(options)?;
            let reply = json!({
                "records": plan.records,
                "torn": plan.torn.map(|t| json!({ "line": t.line, "bytes": t.bytes })),
                "unterminated": plan.terminate,
                "nextSeq": log.next_seq(),
                "closers": plan.closers.len(),
                "redelivered": plan.redelivered,
                "interrupted": plan.interrupted,
            });
            *lock(resumed) = Some(plan.machine);
            Ok(wire::text(&reply))
        }))
    }

    fn resolve(&mut self, _: Env, output: Self::Output) -> napi::Result<String> {
        self.call.settle(output)
    }
}

/// The task of [`NativeFileLog::prepare`].
pub struct Prepare {
    call: Call,
}

impl Task for Prepare {
    type Output = Result<u64, LogError>;
    type JsValue = i64;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(self.call.with(|log| {
            log.repair_tail()?;
            Ok(log.next_seq())
        }))
    }

    fn resolve(&mut self, _: Env, output: Self::Output) -> napi::Result<i64> {
        self.call.settle(output).map(seq)
    }
}

/// The task of [`NativeFileLog::append_encoded`].
pub struct Append {
    call: Call,
    lines: Buffer,
    count: usize,
    ends_turn: bool,
    first_seq: u64,
}

impl Task for Append {
    type Output = Result<u64, LogError>;
    type JsValue = i64;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let (lines, count, ends_turn) = (&self.lines[..], self.count, self.ends_turn);
        let first_seq = self.first_seq;
        Ok(self
            .call
            .with(|log| log.append_encoded(first_seq, lines, count, ends_turn)))
    }

    fn resolve(&mut self, _: Env, output: Self::Output) -> napi::Result<i64> {
        self.call.settle(output).map(seq)
    }
}

/// The task of [`NativeFileLog::sync`].
pub struct SyncTask {
    call: Call,
}

impl Task for SyncTask {
    type Output = Result<(), LogError>;
    type JsValue = ();

    fn compute(&mut self) -> napi::Result<Self::Output> {
        Ok(self.call.with(FileLog::sync))
    }

    fn resolve(&mut self, _: Env, output: Self::Output) -> napi::Result<()> {
        self.call.settle(output)
    }
}

/// The task of [`NativeFileLog::close`].
pub struct Close {
    call: Call,
}

impl Task for Close {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> napi::Result<()> {
        // Dropping the log closes its file, which releases the `flock`. Closing twice does
        // nothing.
        drop(lock(&self.call.log).take());
        Ok(())
    }

    fn resolve(&mut self, _: Env, (): ()) -> napi::Result<()> {
        Ok(())
    }
}

/// A `seq` as JavaScript's number takes it.
fn seq(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// Locks a mutex, a poisoned one too (a panic cannot leave a log half-updated here: every
/// change of the log's state is made after its IO returned).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The rejection of a log error: a napi error whose message is the JSON text of [`reason`].
fn rejection(error: &LogError, path: &Path) -> napi::Error {
    napi::Error::from_reason(wire::text(&reason(error, path)))
}

/// A log error as JavaScript takes it: `{kind, message, path, …}` with the fields of its kind
/// (`expected` and `found` of `truncated` and `tampered`, `line` of `corrupt`, `invalid` and
/// `line-too-long`, `max` of `line-too-long`, `fileType` of `not-regular`, `error` and `undo`
/// (each such a reason, or `{kind: "io", message}`) of `indeterminate`). `path` is the file
/// the error names, else the log's own.
pub(crate) fn reason(error: &LogError, log_path: &Path) -> Value {
    let mut fields = Map::new();
    let mut path = None;
    match error {
        LogError::StorageFull { path: at }
        | LogError::PermissionDenied { path: at, .. }
        | LogError::Closed { path: at }
        | LogError::Locked { path: at }
        | LogError::Replaced { path: at } => path = Some(at.clone()),
        LogError::Invalid { path: at, error } => {
            path = Some(at.clone());
            fields.insert("line".into(), json!(error.line));
        }
        LogError::Corrupt(error) => {
            fields.insert("line".into(), json!(error.line));
        }
        LogError::NotRegular(not) => {
            path = Some(not.path.clone());
            fields.insert("fileType".into(), json!(not.kind));
        }
        LogError::LineTooLong {
            path: at,
            line,
            max,
        } => {
            path = Some(at.clone());
            fields.insert("line".into(), json!(line));
            fields.insert("max".into(), json!(max));
        }
        LogError::Truncated {
            path: at,
            expected,
            found,
        }
        | LogError::Tampered {
            path: at,
            expected,
            found,
        } => {
            path = Some(at.clone());
            fields.insert("expected".into(), json!(expected));
            fields.insert("found".into(), json!(found));
        }
        LogError::Indeterminate { error, undo } => {
            fields.insert("error".into(), io_reason(error, log_path));
            fields.insert("undo".into(), io_reason(undo, log_path));
        }
        LogError::TooDeep(deep) => {
            fields.insert("depth".into(), json!(deep.depth));
            fields.insert("max".into(), json!(deep.max));
            fields.insert("detail".into(), json!(deep.to_string()));
        }
        _ => {}
    }
    let path = path.filter(|path| !path.as_os_str().is_empty());
    let path = path.as_deref().unwrap_or(log_path);
    fields.insert("kind".into(), json!(error.kind()));
    fields.insert("message".into(), json!(error.to_string()));
    fields.insert("path".into(), json!(path.display().to_string()));
    Value::Object(fields)
}

/// The reason of an i/o error inside an indeterminate one: the log error it wraps, if any, else
/// `{kind: "io", message}` (the OS's words, or the injected fault's).
fn io_reason(error: &io::Error, log_path: &Path) -> Value {
    if let Some(inner) = error.get_ref().and_then(|e| e.downcast_ref::<LogError>()) {
        return reason(inner, log_path);
    }
    json!({ "kind": "io", "message": error.to_string(), "path": log_path.display().to_string() })
}
