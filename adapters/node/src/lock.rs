//! [`FileLock`]: the exclusive advisory lock (`flock`) the tokio adapter's `FileLog` holds on
//! its file, so a Node writer and a Rust writer (or two Node writers) never share a log.

use std::fs::File;

use napi_derive::napi;
use rustix::fs::{flock, FlockOperation};

/// An exclusive `flock` on a log file, held until [`release`](FileLock::release) (or until the
/// process exits). It is taken on a descriptor of its own, which conflicts with every other
/// `flock` on the file: the tokio adapter's `FileLog`, `coxswain run --log`, another `FileLock`.
#[napi]
pub struct FileLock {
    file: Option<File>,
}

#[napi]
impl FileLock {
    /// Locks the file at `path` (which must exist). Fails with a message starting `locked:` while
    /// another writer holds it.
    #[napi(factory)]
    pub fn acquire(path: String) -> napi::Result<FileLock> {
        let fail = |message: String| napi::Error::new(napi::Status::GenericFailure, message);
        let file = File::open(&path).map_err(|e| fail(format!("cannot open {path}: {e}")))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(FileLock { file: Some(file) }),
            Err(error) if error == rustix::io::Errno::WOULDBLOCK => Err(fail(format!(
                "locked: the log {path} is locked by another writer"
            ))),
            Err(error) => Err(fail(format!("cannot lock {path}: {error}"))),
        }
    }

    /// Releases the lock (closing its descriptor). Releasing twice does nothing.
    #[napi]
    pub fn release(&mut self) {
        self.file = None;
    }
}
