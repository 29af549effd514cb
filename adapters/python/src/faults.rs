//! A test build's fault hooks (the `faults` feature: never in the extension a user installs):
//! a test replaces the log's write or sync (`FileLog._write_all(fd, data)`,
//! `coxswain._filelog._sync(fd)`, the Python spelling of [`LogFile::append`] and
//! [`LogFile::sync_data`]), and the log calls them (taking the GIL) instead of its own; every
//! check and the cut-back stay the log's.

use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use coxswain_file_log::LogFile;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A test's `(write, sync)` in place of the file's own.
type Given = Option<(Py<PyAny>, Py<PyAny>)>;

/// The Python write and sync a test put in place of the log's own (`None`: the file's own).
#[derive(Debug, Default)]
pub(crate) struct Hooks {
    /// Whether `calls` holds hooks (read without taking the lock on every file operation).
    set: AtomicBool,
    /// `(write, sync)`.
    calls: Mutex<Option<(Py<PyAny>, Py<PyAny>)>>,
}

impl Hooks {
    /// The hooks, if set.
    fn calls(&self) -> MutexGuard<'_, Option<(Py<PyAny>, Py<PyAny>)>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets `given` for the file's operations from now on.
    pub(crate) fn put(&self, given: Given) {
        *self.calls() = given;
        self.set.store(true, Ordering::Release);
    }

    /// Takes the hooks back (drop them with the GIL held: they are Python objects).
    pub(crate) fn take(&self) -> Given {
        self.set.store(false, Ordering::Release);
        self.calls().take()
    }
}

/// The log's file: the plain [`File`], or (while hooks are set) the Python hooks' write and sync.
#[derive(Debug)]
pub(crate) struct HookedFile {
    file: File,
    hooks: Arc<Hooks>,
}

impl HookedFile {
    /// Calls the write hook (`data`) or the sync hook (`None`) if hooks are set: `None` when
    /// they are not.
    fn call(&self, data: Option<&[u8]>) -> Option<io::Result<()>> {
        if !self.hooks.set.load(Ordering::Acquire) {
            return None;
        }
        let calls = self.hooks.calls();
        let (write, sync) = calls.as_ref()?;
        let fd = self.file.as_raw_fd();
        Some(Python::attach(|py| {
            let called = match data {
                Some(data) => write.call1(py, (fd, PyBytes::new(py, data))),
                None => sync.call1(py, (fd,)),
            };
            called.map(drop).map_err(|error| io_error(py, error))
        }))
    }
}

/// A Python exception as an `io::Error`: an `OSError` with an errno is that OS error (so a full
/// disk is `storage-full`, a refused permission `permission-denied`); anything else is carried
/// whole (the cause of the log error it becomes).
fn io_error(py: Python<'_>, error: PyErr) -> io::Error {
    let errno = error
        .value(py)
        .getattr(pyo3::intern!(py, "errno"))
        .and_then(|errno| errno.extract::<i32>());
    match errno {
        Ok(errno) if error.is_instance_of::<pyo3::exceptions::PyOSError>(py) => {
            io::Error::from_raw_os_error(errno)
        }
        _ => {
            let text = error
                .value(py)
                .str()
                .map(|text| text.to_string())
                .unwrap_or_else(|_| error.to_string());
            io::Error::other(Raised { error, text })
        }
    }
}

/// A Python exception carried whole inside an `io::Error`, shown as Python's `str` shows it.
#[derive(Debug)]
struct Raised {
    error: PyErr,
    text: String,
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Raised {}

impl LogFile for HookedFile {
    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        match self.call(Some(bytes)) {
            Some(done) => done,
            None => LogFile::append(&self.file, bytes),
        }
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        LogFile::read_at(&self.file, buf, offset)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        LogFile::set_len(&self.file, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        match self.call(None) {
            Some(done) => done,
            None => LogFile::sync_data(&self.file),
        }
    }

    fn metadata(&self) -> io::Result<Metadata> {
        LogFile::metadata(&self.file)
    }
}

impl Hooks {
    /// The opened file, calling `hooks` while a test set them.
    pub(crate) fn wrap(hooks: &Arc<Hooks>) -> impl FnOnce(File) -> HookedFile {
        let hooks = Arc::clone(hooks);
        move |file| HookedFile { file, hooks }
    }
}

/// The Python exception an i/o error carries whole (a test hook's), if it does.
pub(crate) fn carried<'py>(py: Python<'py>, io: &io::Error) -> Option<Bound<'py, PyAny>> {
    io.get_ref()?
        .downcast_ref::<Raised>()
        .map(|raised| raised.error.value(py).clone().into_any())
}
