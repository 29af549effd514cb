//! `coxswain._native.FileLog`: the one JSON-lines file log every runtime writes
//! ([`coxswain_file_log::FileLog`]: the lock, the regular-file check, the identity, length and
//! last-bytes checks around every append, the cut-back of a failed append, the sync policies and
//! the resume path), for `coxswain.log.FileLog` to wrap. Every call that does IO releases the
//! GIL (`Python::detach`), so the asyncio agent awaits it on a worker thread while its loop
//! runs; the log sits behind a `Mutex`, so any thread may call it.
//!
//! Its errors are the crate's [`LogError`]s, raised as the classes of `coxswain._errors` by
//! [`LogError::kind`] (never from an errno or a message): every one has `kind` (the Rust name)
//! and `path` (the file), and its message names the file.
//!
//! In a test build (the `faults` feature, `crate::faults`), the log's two file operations a test
//! replaces (`FileLog._write_all(fd, data)` and `coxswain._filelog._sync(fd)`) are handed in as
//! `hooks` by the wrapper: the log then calls them instead of writing or syncing itself; every
//! check and the cut-back stay the log's own. The extension a user installs has no hooks: it
//! refuses them (`InvalidInput`).

#[cfg(not(feature = "faults"))]
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(feature = "faults")]
use std::sync::Arc;
use std::sync::{Mutex, MutexGuard, PoisonError};

use coxswain_file_log::{FileLog, LogError, SyncPolicy};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::errors;
use crate::machine::NativeMachine;

/// Where the log's error classes live.
const ERRORS: &str = "coxswain._errors";

#[cfg(feature = "faults")]
use crate::faults::{HookedFile as Wrapped, Hooks};

/// The file the log writes: the plain [`File`] (a test build's lets a test's write and sync
/// stand in for the file's own, `crate::faults`).
#[cfg(not(feature = "faults"))]
type Wrapped = File;

/// The open log (`None` once closed).
type Slot = Option<FileLog<Wrapped>>;

/// A test's `(write, sync)` in place of the file's own (see the module docs).
type Given = Option<(Py<PyAny>, Py<PyAny>)>;

/// The file log (see the module docs).
#[pyclass(module = "coxswain._native", name = "FileLog", frozen)]
pub(crate) struct NativeFileLog {
    log: Mutex<Slot>,
    /// The hooks its file calls, when a test set them (a test build).
    #[cfg(feature = "faults")]
    hooks: Arc<Hooks>,
    /// The file (made absolute when opened).
    path: PathBuf,
    /// The log's `next_seq`, readable while an append runs on another thread.
    next_seq: AtomicU64,
    /// The policy.
    policy: SyncPolicy,
    /// An append failed indeterminately: the log takes no more (`failed`), and closing it
    /// releases the file without a last sync or check (that append's error said it all).
    failed: AtomicBool,
    /// The log was closed (read without its lock).
    released: AtomicBool,
}

/// The sync policy `sync` names (`every-append`, `per-turn`, `never`): `InvalidInput` naming
/// anything else.
fn policy(py: Python<'_>, sync: &Bound<'_, PyAny>) -> PyResult<SyncPolicy> {
    let named = match sync.cast::<PyString>() {
        Ok(name) => crate::json::text(name)?.parse::<SyncPolicy>().ok(),
        Err(_) => None,
    };
    named.ok_or_else(|| {
        let shown = sync
            .repr()
            .map(|repr| repr.to_string())
            .unwrap_or_else(|_| "?".into());
        errors::invalid_input(
            py,
            format!("unknown sync policy {shown}: it is `every-append`, `per-turn` or `never`"),
        )
    })
}

#[pymethods]
impl NativeFileLog {
    /// Opens (or creates) the log at `path`, locked, syncing as `sync` says (`every-append`,
    /// `per-turn`, `never`; `InvalidInput` for anything else, before the path is looked at).
    /// Reads nothing. Raises the log errors (`NotRegularFile`, `LogLocked`, …).
    #[staticmethod]
    #[pyo3(signature = (path, sync = None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        sync: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<NativeFileLog> {
        let policy = match sync {
            Some(sync) => policy(py, sync)?,
            None => SyncPolicy::default(),
        };
        #[cfg(feature = "faults")]
        let hooks = Arc::new(Hooks::default());
        #[cfg(feature = "faults")]
        let opened = py.detach(|| FileLog::open_wrapped(&path, policy, Hooks::wrap(&hooks)));
        #[cfg(not(feature = "faults"))]
        let opened = py.detach(|| FileLog::open(&path, policy));
        let log = opened.map_err(|error| log_error(py, &error, &path))?;
        Ok(NativeFileLog {
            path: log.path().to_owned(),
            next_seq: AtomicU64::new(log.next_seq()),
            policy,
            #[cfg(feature = "faults")]
            hooks,
            failed: AtomicBool::new(false),
            released: AtomicBool::new(false),
            log: Mutex::new(Some(log)),
        })
    }

    /// Resumes the session the file holds (`coxswain_file_log::FileLog::resume`: read back
    /// through the session layer, restored with the host's delivery memory, S51, admission bound,
    /// S55, and hash seed, crash repair with the redelivery allowance, S59; only once accepted,
    /// the tail repaired and the closers appended, S50). Returns `(machine, records, torn,
    /// closers, interrupted, redelivered)`, `torn` the `(line, bytes)` of a torn final record
    /// dropped. A refused log (`CorruptLog`, `LineTooLong`) is left as it was.
    #[pyo3(signature = (delivery_memory, max_pending, hash_seed, redelivery, hooks = None))]
    #[allow(clippy::type_complexity)]
    fn resume(
        &self,
        py: Python<'_>,
        delivery_memory: usize,
        max_pending: Option<usize>,
        hash_seed: u64,
        redelivery: u64,
        hooks: Given,
    ) -> PyResult<(
        NativeMachine,
        usize,
        Option<(usize, usize)>,
        usize,
        Option<u64>,
        usize,
    )> {
        let options = crate::log::options(py, delivery_memory, max_pending, hash_seed, redelivery)?;
        let plan = self.run(py, hooks, |log| log.resume(options))?;
        Ok((
            NativeMachine {
                machine: plan.machine,
                messages: crate::typed::Messages::default(),
                undrained: None,
            },
            plan.records,
            plan.torn.map(|torn| (torn.line, torn.bytes)),
            plan.closers.len(),
            plan.interrupted,
            plan.redelivered,
        ))
    }

    /// Appends `count` records encoded as `data` (numbered from `next_seq`), syncing as the
    /// policy says for a batch that does (`ends_turn`) or does not end a turn; returns the first
    /// record's `seq`. Reads and repairs the log first if that was not done. `first_seq`: the
    /// `seq` the lines were numbered from, refused (`encode`, nothing written) unless it is the
    /// log's next (another append came first); `None`: the log's next, whatever it is. Lines that
    /// are not `count` records are refused the same way.
    #[pyo3(signature = (data, count, ends_turn = true, first_seq = None, hooks = None))]
    fn append_encoded(
        &self,
        py: Python<'_>,
        data: &[u8],
        count: usize,
        ends_turn: bool,
        first_seq: Option<u64>,
        hooks: Given,
    ) -> PyResult<u64> {
        self.run(py, hooks, |log| {
            log.repair_tail()?; // read back first if not yet: `next_seq` is the log's
            let first = first_seq.unwrap_or(log.next_seq());
            log.append_encoded(first, data, count, ends_turn)
        })
    }

    /// Makes everything appended durable, whatever the policy, and checks the file is still
    /// the log's and still ends as the log left it.
    #[pyo3(signature = (hooks = None))]
    fn sync(&self, py: Python<'_>, hooks: Given) -> PyResult<()> {
        self.run(py, hooks, FileLog::sync)
    }

    /// Syncs (as `sync`) and releases the file and its lock; raises as `sync` does, released
    /// all the same. After an indeterminate append it only releases them. Closing a closed log
    /// does nothing; any other call on it raises `closed`.
    #[pyo3(signature = (hooks = None))]
    fn close(&self, py: Python<'_>, hooks: Given) -> PyResult<()> {
        // The last sync and the release in one hold of the log's lock (no append between them),
        // the GIL released while it is waited for.
        let failed = self.failed.load(Ordering::Acquire);
        self.run_with(
            py,
            hooks,
            true,
            |log| if failed { Ok(()) } else { log.sync() },
        )
        .map(drop)
    }

    /// Whether the log was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// The `seq` the next appended record takes.
    #[getter]
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq.load(Ordering::Acquire)
    }

    /// The file's path, made absolute when opened.
    #[getter]
    fn path(&self) -> &Path {
        &self.path
    }

    /// The sync policy: `every-append`, `per-turn` or `never`.
    #[getter]
    fn sync_policy(&self) -> &'static str {
        self.policy.as_str()
    }
}

impl NativeFileLog {
    /// [`append_encoded`](NativeFileLog::append_encoded) without hooks, for the session's
    /// in-line commit (the GIL released while it writes).
    pub(crate) fn append_lines(
        &self,
        py: Python<'_>,
        first_seq: u64,
        lines: &[u8],
        count: usize,
        ends_turn: bool,
    ) -> PyResult<u64> {
        self.run(py, None, |log| {
            log.append_encoded(first_seq, lines, count, ends_turn)
        })
    }

    fn slot(&self) -> MutexGuard<'_, Slot> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `body` on the open log with the GIL released (`closed` once it was closed), the
    /// file calling `hooks` meanwhile if given, then notes its `next_seq`; a failure raised as
    /// its class.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        hooks: Given,
        body: impl FnOnce(&mut FileLog<Wrapped>) -> Result<T, LogError> + Send,
    ) -> PyResult<T> {
        self.run_with(py, hooks, false, body)?.ok_or_else(|| {
            let closed = LogError::Closed {
                path: self.path.clone(),
            };
            log_error(py, &closed, &self.path)
        })
    }

    /// [`run`](NativeFileLog::run), and then (`release`) the log released, in the same hold of
    /// its lock; `None` when it was released already (`release`: nothing to do).
    fn run_with<T: Send>(
        &self,
        py: Python<'_>,
        hooks: Given,
        release: bool,
        body: impl FnOnce(&mut FileLog<Wrapped>) -> Result<T, LogError> + Send,
    ) -> PyResult<Option<T>> {
        #[cfg(not(feature = "faults"))]
        if hooks.is_some() {
            return Err(errors::invalid_input(
                py,
                "this build of coxswain has no fault hooks: a test replaced the log's write or \
                 sync, which only a test build (the `faults` feature) calls"
                    .to_owned(),
            ));
        }
        // The hooks are set and taken back while the log's lock is held (no other call can
        // see them), and dropped with the GIL held (they are Python objects).
        let (done, hooks) = py.detach(|| {
            let mut slot = self.slot();
            let Some(log) = slot.as_mut() else {
                if release {
                    return (Ok(None), hooks);
                }
                let closed = LogError::Closed {
                    path: self.path.clone(),
                };
                return (Err(closed), hooks);
            };
            #[cfg(feature = "faults")]
            let hooked = hooks.is_some();
            #[cfg(feature = "faults")]
            if hooked {
                self.hooks.put(hooks);
            }
            #[cfg(not(feature = "faults"))]
            drop(hooks);
            let done = body(log).map(Some);
            self.next_seq.store(log.next_seq(), Ordering::Release);
            if matches!(&done, Err(error) if error.is_indeterminate()) {
                self.failed.store(true, Ordering::Release);
            }
            if release {
                // Released whatever the body said: the file and its lock go now.
                drop(slot.take());
                self.released.store(true, Ordering::Release);
            }
            #[cfg(feature = "faults")]
            let hooks = if hooked { self.hooks.take() } else { None };
            #[cfg(not(feature = "faults"))]
            let hooks: Given = None;
            (done, hooks)
        });
        drop(hooks);
        done.map_err(|error| log_error(py, &error, &self.path))
    }
}

/// `error` as the exception of its kind ([`LogError::kind`]), from `coxswain._errors`: every
/// one has `kind` and `path` (the file; `log_path` where the error names none), and a message
/// naming the file (the Rust message, led by the path where it names none).
pub(crate) fn log_error(py: Python<'_>, error: &LogError, log_path: &Path) -> PyErr {
    match exception(py, error, log_path) {
        Ok(exception) => PyErr::from_value(exception),
        Err(failed) => failed,
    }
}

/// The file `error` names, if it names one.
fn named_path(error: &LogError) -> Option<&Path> {
    match error {
        LogError::StorageFull { path }
        | LogError::PermissionDenied { path, .. }
        | LogError::Closed { path }
        | LogError::Invalid { path, .. }
        | LogError::LineTooLong { path, .. }
        | LogError::Locked { path }
        | LogError::Replaced { path }
        | LogError::Truncated { path, .. }
        | LogError::Tampered { path, .. } => Some(path),
        LogError::NotRegular(refused) => Some(&refused.path),
        _ => None,
    }
}

/// The message of `error` on the file at `path`: its own, led by the path where it names none.
fn message(error: &dyn std::fmt::Display, path: &Path) -> String {
    let text = error.to_string();
    let shown = path.display().to_string();
    if text.contains(&shown) {
        text
    } else {
        format!("{shown}: {text}")
    }
}

fn exception<'py>(
    py: Python<'py>,
    error: &LogError,
    log_path: &Path,
) -> PyResult<Bound<'py, PyAny>> {
    let path = named_path(error).unwrap_or(log_path);
    let text = message(error, path);
    let kind = error.kind();
    let module = py.import(ERRORS)?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("kind", kind)?;
    kwargs.set_item("path", path)?;
    let mut cause = None;
    let class = match error {
        LogError::NotRegular(refused) => {
            kwargs.set_item("file_type", refused.kind)?;
            "NotRegularFile"
        }
        LogError::Replaced { .. } => "LogReplaced",
        LogError::Truncated {
            expected, found, ..
        }
        | LogError::Tampered {
            expected, found, ..
        } => {
            kwargs.set_item("expected", expected)?;
            kwargs.set_item("found", found)?;
            if kind == "truncated" {
                "LogTruncated"
            } else {
                "LogTampered"
            }
        }
        LogError::Locked { .. } => "LogLocked",
        LogError::StorageFull { .. } => "LogStorageFull",
        LogError::PermissionDenied { .. } => "LogPermissionDenied",
        LogError::Indeterminate { error, undo } => {
            kwargs.set_item("indeterminate", true)?;
            kwargs.set_item("undo", io_exception(py, undo, path)?)?;
            cause = Some(io_exception(py, error, path)?);
            "LogError"
        }
        LogError::Io(io) => {
            cause = carried(py, io);
            "LogError"
        }
        LogError::LineTooLong { line, max, .. } => {
            let raised = module.getattr("LineTooLong")?.call1((path, *line, *max))?;
            raised.setattr("kind", kind)?;
            return Ok(raised);
        }
        LogError::Corrupt(error) => {
            return corrupt(&module, &text, error.line, kind, path);
        }
        LogError::Invalid { error, .. } => {
            return corrupt(&module, &text, error.line, kind, path);
        }
        LogError::TooDeep(deep) => {
            let raised = errors::too_deep(py, deep).value(py).clone().into_any();
            raised.setattr("kind", kind)?;
            raised.setattr("path", path.as_os_str())?;
            return Ok(raised);
        }
        LogError::Encode(_) => {
            let raised = module.getattr("EncodeError")?.call1((text,))?;
            raised.setattr("kind", kind)?;
            raised.setattr("path", path.as_os_str())?;
            return Ok(raised);
        }
        LogError::Fenced { .. } => {
            kwargs.set_item("fenced", true)?;
            "LogError"
        }
        _ => "LogError",
    };
    let raised = module.getattr(class)?.call((text,), Some(&kwargs))?;
    if let Some(cause) = cause {
        raised.setattr("__cause__", cause)?;
    }
    Ok(raised)
}

/// `CorruptLog` of a log the session cannot resume (`invalid`) or read (`corrupt`): the line.
fn corrupt<'py>(
    module: &Bound<'py, PyModule>,
    text: &str,
    line: usize,
    kind: &str,
    path: &Path,
) -> PyResult<Bound<'py, PyAny>> {
    let kwargs = PyDict::new(module.py());
    kwargs.set_item("kind", kind)?;
    kwargs.set_item("path", path)?;
    module
        .getattr("CorruptLog")?
        .call((text, line), Some(&kwargs))
}

/// The Python exception an i/o error carries whole (a test hook's), if it does.
#[cfg(feature = "faults")]
fn carried<'py>(py: Python<'py>, io: &io::Error) -> Option<Bound<'py, PyAny>> {
    crate::faults::carried(py, io)
}

/// Nothing carries a Python exception without the test build's hooks.
#[cfg(not(feature = "faults"))]
fn carried<'py>(_: Python<'py>, _: &io::Error) -> Option<Bound<'py, PyAny>> {
    None
}

/// What an indeterminate append's `error` or `undo` was, as an exception: a log error as its
/// class, a Python exception (a test hook's) as itself, an OS error as `LogError` (`io`)
/// naming the file.
fn io_exception<'py>(
    py: Python<'py>,
    io: &io::Error,
    log_path: &Path,
) -> PyResult<Bound<'py, PyAny>> {
    if let Some(error) = io.get_ref().and_then(|e| e.downcast_ref::<LogError>()) {
        return exception(py, error, log_path);
    }
    if let Some(raised) = carried(py, io) {
        return Ok(raised);
    }
    let path = log_path;
    let text = message(&format_args!("log i/o failed: {io}"), path);
    let kwargs = PyDict::new(py);
    kwargs.set_item("kind", "io")?;
    kwargs.set_item("path", path)?;
    py.import(ERRORS)?
        .getattr("LogError")?
        .call((text,), Some(&kwargs))
}
