//! Faults of a real log file: a [`LogFile`] wrapper ([`FaultyFile`]) that fails a
//! [`FileLog`]'s or a [`SegmentLog`]'s writes part-way, fails its syncs and its cuts, resizes
//! the file before a write as another writer would, holds its syncs, and counts them. The
//! tokio driver's tests inject the faults of a file through it (the shipped logs hold no fault
//! state: they reach their file only through the [`LogFile`] seam).

use std::fs::{File, Metadata};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use coxswain_tokio::{FileLog, LogError, LogFile, SegmentLog, SyncPolicy};

/// The switches of the faults of one log's file; clones share them. Every switch is off at
/// first: a [`FaultyFile`] whose switches are off does what the plain file does.
#[derive(Clone, Debug, Default)]
pub struct FileFaults(Arc<Switches>);

#[derive(Debug)]
struct Switches {
    /// Bytes that may still be written; `u64::MAX`: no limit.
    budget: AtomicU64,
    /// How many of the next syncs fail.
    fail_syncs: AtomicUsize,
    fail_truncate: AtomicBool,
    /// The length the next write first sets the file to; `u64::MAX`: none.
    resize_before_write: AtomicU64,
    /// The OS error a write over the budget fails with (`ENOSPC`, `EACCES`…); 0: an injected
    /// i/o error.
    errno: AtomicI32,
    /// Syncs wait while this is true.
    held: Mutex<bool>,
    released: Condvar,
    syncs: AtomicUsize,
    writes: AtomicUsize,
}

impl Default for Switches {
    fn default() -> Self {
        Switches {
            budget: AtomicU64::new(u64::MAX),
            fail_syncs: AtomicUsize::new(0),
            fail_truncate: AtomicBool::new(false),
            resize_before_write: AtomicU64::new(u64::MAX),
            errno: AtomicI32::new(0),
            held: Mutex::new(false),
            released: Condvar::new(),
            syncs: AtomicUsize::new(0),
            writes: AtomicUsize::new(0),
        }
    }
}

impl FileFaults {
    /// Switches that are all off.
    pub fn new() -> Self {
        FileFaults::default()
    }

    /// `file` with these faults: what [`FileLog::open_wrapped`] and
    /// [`SegmentLog::open_wrapped`] take to wrap the opened file.
    pub fn wrap(&self, file: File) -> FaultyFile {
        FaultyFile {
            file,
            faults: self.clone(),
        }
    }

    /// A [`FileLog`] at `path` syncing as `policy` says, its file under these faults.
    ///
    /// # Errors
    /// What [`FileLog::open_with`] fails with.
    pub async fn open_file_log(
        &self,
        path: impl AsRef<Path>,
        policy: SyncPolicy,
    ) -> Result<FileLog<FaultyFile>, LogError> {
        let faults = self.clone();
        FileLog::open_wrapped(path, policy, move |file| faults.wrap(file)).await
    }

    /// A [`SegmentLog`] at `path`, its file under these faults.
    ///
    /// # Errors
    /// What [`SegmentLog::open`] fails with.
    pub async fn open_segment_log(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<SegmentLog<FaultyFile>, LogError> {
        let faults = self.clone();
        SegmentLog::open_wrapped(path, move |file| faults.wrap(file)).await
    }

    /// From now on, writes fail once `bytes` more bytes were written (the write that crosses it
    /// writes its first bytes, then fails); `u64::MAX`: they no longer fail.
    pub fn fail_writes_after(&self, bytes: u64) {
        self.0.budget.store(bytes, Ordering::SeqCst);
    }

    /// A write over the budget ([`fail_writes_after`](FileFaults::fail_writes_after)) fails with
    /// the OS error `errno` (`ENOSPC`: a full file system; `EROFS`: a refused permission), or
    /// (`None`) with an injected i/o error.
    pub fn fail_writes_with(&self, errno: Option<i32>) {
        self.0.errno.store(errno.unwrap_or(0), Ordering::SeqCst);
    }

    /// The next `count` syncs fail (`usize::MAX`: all of them; 0: none).
    pub fn fail_syncs(&self, count: usize) {
        self.0.fail_syncs.store(count, Ordering::SeqCst);
    }

    /// Cuts of the file (a failed append's cut-back, a torn tail's repair) fail, or work again.
    pub fn fail_truncates(&self, fail: bool) {
        self.0.fail_truncate.store(fail, Ordering::SeqCst);
    }

    /// The next write (once) first sets the file's length to `len` bytes: cuts it, or extends
    /// it with zeros, as another writer's truncation or append landing between the log's check
    /// of its file and its write would.
    pub fn resize_before_next_write(&self, len: u64) {
        self.0.resize_before_write.store(len, Ordering::SeqCst);
    }

    /// Every sync waits (before it is counted) until the guard returned is dropped: a segment
    /// log's committer held in one commit's sync while batches gather for the next. (A test that
    /// fails meanwhile drops the guard as it unwinds, so the committer is not left waiting.)
    pub fn hold_syncs(&self) -> HeldSyncs {
        self.set_held(true);
        HeldSyncs(self.clone())
    }

    fn set_held(&self, held: bool) {
        *self.0.held.lock().unwrap_or_else(PoisonError::into_inner) = held;
        self.0.released.notify_all();
    }

    /// How many syncs the log attempted (a held one once it was released).
    pub fn syncs(&self) -> usize {
        self.0.syncs.load(Ordering::SeqCst)
    }

    /// How many writes the log attempted.
    pub fn writes(&self) -> usize {
        self.0.writes.load(Ordering::SeqCst)
    }

    /// How many of `want` bytes the write may write.
    fn take_budget(&self, want: usize) -> usize {
        let want = want as u64;
        let mut allowed = want;
        let _ = self
            .0
            .budget
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |budget| {
                if budget == u64::MAX {
                    return None;
                }
                allowed = want.min(budget);
                Some(budget - allowed)
            });
        allowed as usize
    }

    /// Waits while syncs are held, counts this one, and fails it if it is to fail.
    fn sync(&self) -> io::Result<()> {
        let mut held = self.0.held.lock().unwrap_or_else(PoisonError::into_inner);
        while *held {
            held = self
                .0
                .released
                .wait(held)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(held);
        self.0.syncs.fetch_add(1, Ordering::SeqCst);
        let failing = self
            .0
            .fail_syncs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |count| match count {
                0 => None,
                usize::MAX => Some(usize::MAX),
                n => Some(n - 1),
            })
            .is_ok();
        if failing {
            return Err(io::Error::other("sync failed (injected)"));
        }
        Ok(())
    }

    /// The length to set the file to before this write, once
    /// ([`FileFaults::resize_before_next_write`]).
    fn resize_before_write(&self) -> Option<u64> {
        let len = self.0.resize_before_write.swap(u64::MAX, Ordering::SeqCst);
        (len != u64::MAX).then_some(len)
    }

    fn truncate(&self) -> io::Result<()> {
        if self.0.fail_truncate.load(Ordering::SeqCst) {
            return Err(io::Error::other("truncate failed (injected)"));
        }
        Ok(())
    }
}

/// Syncs held ([`FileFaults::hold_syncs`]) until this is dropped.
#[derive(Debug)]
#[must_use = "the syncs are released when this is dropped"]
pub struct HeldSyncs(FileFaults);

impl Drop for HeldSyncs {
    fn drop(&mut self) {
        self.0.set_held(false);
    }
}

/// A log's file under [`FileFaults`]: its writes within the byte budget (after the resize, if
/// one is due), its cuts and syncs failing when switched to; reads and `fstat` as the file's.
#[derive(Debug)]
pub struct FaultyFile {
    file: File,
    faults: FileFaults,
}

impl LogFile for FaultyFile {
    #[inline]
    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        self.faults.0.writes.fetch_add(1, Ordering::SeqCst);
        if let Some(len) = self.faults.resize_before_write() {
            self.file.set_len(len)?;
        }
        let allowed = self.faults.take_budget(bytes.len());
        LogFile::append(&self.file, &bytes[..allowed])?;
        if allowed < bytes.len() {
            return Err(match self.faults.0.errno.load(Ordering::SeqCst) {
                0 => io::Error::other("write failed (injected)"),
                errno => io::Error::from_raw_os_error(errno),
            });
        }
        Ok(())
    }

    #[inline]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        LogFile::read_at(&self.file, buf, offset)
    }

    #[inline]
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.faults.truncate()?;
        self.file.set_len(len)
    }

    #[inline]
    fn sync_data(&self) -> io::Result<()> {
        self.faults.sync()?;
        self.file.sync_data()
    }

    #[inline]
    fn metadata(&self) -> io::Result<Metadata> {
        self.file.metadata()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Each switch bites on a plain file: the budget cuts a write and fails it, a failing sync
    /// and cut fail (counted), the resize lands before the next write only.
    #[test]
    fn each_switch_changes_what_the_file_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let open = || {
            std::fs::OpenOptions::new()
                .read(true)
                .append(true)
                .create(true)
                .open(&path)
                .unwrap()
        };
        let faults = FileFaults::new();
        let file = faults.wrap(open());
        file.append(b"abc").unwrap();
        faults.fail_writes_after(2);
        let error = file.append(b"defg").unwrap_err();
        assert_eq!(error.to_string(), "write failed (injected)");
        assert_eq!(std::fs::read(&path).unwrap(), b"abcde");
        assert_eq!(
            file.append(b"h").unwrap_err().to_string(),
            "write failed (injected)"
        );
        faults.fail_writes_after(u64::MAX);
        faults.fail_syncs(1);
        assert_eq!(
            file.sync_data().unwrap_err().to_string(),
            "sync failed (injected)"
        );
        file.sync_data().unwrap();
        assert_eq!(faults.syncs(), 2);
        faults.fail_truncates(true);
        assert_eq!(
            file.set_len(1).unwrap_err().to_string(),
            "truncate failed (injected)"
        );
        faults.fail_truncates(false);
        file.set_len(1).unwrap();
        faults.resize_before_next_write(3);
        file.append(b"x").unwrap();
        file.append(b"y").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"a\0\0xy");
        assert_eq!(file.metadata().unwrap().len(), 5);
        let mut two = [0; 2];
        assert_eq!(file.read_at(&mut two, 3).unwrap(), 2);
        assert_eq!(&two, b"xy");
    }

    /// A held sync waits, uncounted, until the guard is dropped.
    #[test]
    fn a_held_sync_waits_for_the_guard() {
        let dir = tempfile::tempdir().unwrap();
        let faults = FileFaults::new();
        let file = faults.wrap(File::create(dir.path().join("f")).unwrap());
        let held = faults.hold_syncs();
        let syncing = std::thread::spawn(move || file.sync_data());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!syncing.is_finished());
        assert_eq!(faults.syncs(), 0);
        drop(held);
        syncing.join().unwrap().unwrap();
        assert_eq!(faults.syncs(), 1);
    }
}
