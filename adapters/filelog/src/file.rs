//! What a log that writes a file does to it (this crate's [`FileLog`](crate::FileLog) and the
//! tokio driver's segment log alike): open it locked, check it is still the log's file and still
//! ends where and how the log left it, and cut a failed append back (never extending the file);
//! and [`LogFile`], the operations they do on the open file.

use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use coxswain_log::NotRegularFile;
use rustix::fs::{fcntl_getfl, fcntl_setfl, flock, FlockOperation, OFlags};

use crate::error::LogError;

/// The operations a [`FileLog`](crate::FileLog) and a segment log do on
/// their file once they opened it, took its lock and synced its directory: every write, read,
/// cut, sync and `fstat` of the log's file goes through here, its checks (length, last bytes,
/// identity) included.
///
/// [`File`] implements it, and is the default: a `FileLog` is a `FileLog<File>`, opened with
/// [`FileLog::open`](crate::FileLog::open). A wrapper that observes the operations or changes
/// their outcome (counts the syncs, slows them, fails them as a simulator injects faults) is
/// given the opened file by [`FileLog::open_wrapped`](crate::FileLog::open_wrapped) (or the
/// segment log's `open_wrapped`). The logs are generic over it
/// (static dispatch): the plain file costs nothing.
///
/// A wrapper keeps the file it was given open for as long as it lives (the log's lock is held
/// through it), and does each operation to that file or fails it: the logs' guarantees hold for
/// the outcomes it reports (an `Ok` from [`sync_data`](LogFile::sync_data) that did not sync
/// acknowledges what a power loss can take back).
pub trait LogFile: fmt::Debug + Send + Sync + 'static {
    /// Writes all of `bytes` at the end of the file (it is opened for appending), as
    /// `write_all` does: an error may leave some of them written (the log cuts a failed append
    /// back).
    fn append(&self, bytes: &[u8]) -> io::Result<()>;

    /// Reads up to `buf.len()` bytes from `offset` (`pread`): how many, 0 at the end of the file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// Sets the file's length (`ftruncate`): the logs only ever cut (a torn tail, a failed
    /// append).
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Makes the file's data and length durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;

    /// The file's metadata (`fstat`): its length, its link count, its device and inode.
    fn metadata(&self) -> io::Result<Metadata>;
}

impl LogFile for File {
    #[inline]
    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        let mut file = self;
        file.write_all(bytes)
    }

    #[inline]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }

    #[inline]
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }

    #[inline]
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }

    #[inline]
    fn metadata(&self) -> io::Result<Metadata> {
        File::metadata(self)
    }
}

/// Fills `buf` from `offset` of `file` (`pread` until it is full; an error at the end of the
/// file).
pub fn read_exact_at(file: &impl LogFile, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ))
            }
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// How many of the last bytes a log wrote it compares with the file's own before and after every
/// append: enough to hold the end of a record (its closing `}` and `\n`, and the data before).
pub const TAIL: usize = 32;

/// Opens (or creates) the log file for appending, takes its exclusive lock for the file's whole
/// life (`LogError::Locked` for a second writer) and syncs its directory entry (also when an
/// earlier run created the file and crashed before syncing it).
///
/// A path that names anything but a regular file (a FIFO, a directory, a socket, a device) is
/// refused with [`LogError::NotRegular`] before it is opened, and the opened file is checked
/// again (`fstat`): it is opened non-blocking, so a FIFO put in its place in between does not
/// block the open either.
pub fn open_locked(path: &Path) -> Result<(File, Metadata), LogError> {
    open_locked_unnamed(path).map_err(|error| error.in_file(path))
}

fn open_locked_unnamed(path: &Path) -> Result<(File, Metadata), LogError> {
    match std::fs::metadata(path) {
        Ok(meta) => NotRegularFile::check(path, meta.file_type())?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error.into()),
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .custom_flags(OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    NotRegularFile::check(path, file.metadata()?.file_type())?;
    // A regular file ignores O_NONBLOCK; it is cleared all the same.
    fcntl_getfl(&file)
        .and_then(|flags| fcntl_setfl(&file, flags - OFlags::NONBLOCK))
        .map_err(io::Error::from)?;
    if let Err(error) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
        return Err(if error == rustix::io::Errno::WOULDBLOCK {
            LogError::Locked {
                path: path.to_owned(),
            }
        } else {
            io::Error::from(error).into()
        });
    }
    File::open(parent_dir(path))?.sync_all()?;
    let meta = file.metadata()?;
    Ok((file, meta))
}

/// The identity of a file: its device and inode.
#[inline]
pub fn identity(meta: &Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// The path still names this file (same device and inode), and the file is still linked.
pub fn check_identity(file: &impl LogFile, path: &Path, id: (u64, u64)) -> Result<(), LogError> {
    check_named(&file.metadata()?, path, id)
}

/// The file of `meta` is still linked and the path still names it.
fn check_named(meta: &Metadata, path: &Path, id: (u64, u64)) -> Result<(), LogError> {
    let replaced = || LogError::Replaced {
        path: PathBuf::from(path),
    };
    if meta.nlink() == 0 {
        return Err(replaced());
    }
    match std::fs::metadata(path) {
        Ok(there) if identity(&there) == id => Ok(()),
        Ok(_) => Err(replaced()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Err(replaced()),
        Err(error) => Err(error.into()),
    }
}

/// Where and how a log left its file: the length of what it wrote (or read back and repaired)
/// and the last bytes of it. Everything up to `len` is acknowledged, or was read back.
#[derive(Clone, Copy, Debug)]
pub struct End {
    /// The file's length as the log left it.
    pub len: u64,
    /// The last `tail_len` bytes before `len`.
    tail: [u8; TAIL],
    tail_len: usize,
}

impl End {
    /// The end of a file of `len` bytes whose last bytes are not known yet (before a read back).
    #[inline]
    pub fn unread(len: u64) -> End {
        End {
            len,
            tail: [0; TAIL],
            tail_len: 0,
        }
    }

    /// The end of `file` at `len`, its last bytes read from the file (after a read back and
    /// repair: the file's current length).
    pub fn read(file: &impl LogFile, len: u64) -> io::Result<End> {
        let mut end = End::unread(len);
        end.tail_len = usize::try_from(len.min(TAIL as u64)).unwrap_or(TAIL);
        read_exact_at(
            file,
            &mut end.tail[..end.tail_len],
            len - end.tail_len as u64,
        )?;
        Ok(end)
    }

    /// The end once `bytes` were appended after this one.
    #[inline]
    pub fn after(&self, bytes: &[u8]) -> End {
        let mut end = *self;
        end.len = self.len + bytes.len() as u64;
        if bytes.len() >= TAIL {
            end.tail.copy_from_slice(&bytes[bytes.len() - TAIL..]);
            end.tail_len = TAIL;
        } else {
            // Keep the last bytes of the old tail that still fit before the new ones.
            let keep = self.tail_len.min(TAIL - bytes.len());
            let mut tail = [0; TAIL];
            tail[..keep].copy_from_slice(&self.tail[self.tail_len - keep..self.tail_len]);
            tail[keep..keep + bytes.len()].copy_from_slice(bytes);
            end.tail = tail;
            end.tail_len = keep + bytes.len();
        }
        end
    }

    #[inline]
    fn tail(&self) -> &[u8] {
        &self.tail[..self.tail_len]
    }
}

/// The file still ends where and how the log left it: as long as `end` (shorter:
/// [`LogError::Truncated`]; longer: [`LogError::Tampered`]) and ending in the bytes the log wrote
/// last ([`LogError::Tampered`] at the same length). One `fstat` and one `pread` of at most
/// [`TAIL`] bytes. With `named`, also that the path still names this file
/// ([`LogError::Replaced`]: one `stat` more).
///
/// What this cannot see: bytes overwritten in place before the last [`TAIL`] (the same length,
/// the same last bytes), and a change made and undone between two checks.
pub fn check_end(
    file: &impl LogFile,
    path: &Path,
    end: &End,
    named: Option<(u64, u64)>,
) -> Result<(), LogError> {
    check(file, path, end, named, false)
}

/// As [`check_end`], but the file may be longer than `end` (after a failed cut-back this log's
/// own bytes may follow it): it must hold `end` itself, its bytes before `len` ending as the log
/// wrote them.
pub fn check_prefix(
    file: &impl LogFile,
    path: &Path,
    end: &End,
    named: Option<(u64, u64)>,
) -> Result<(), LogError> {
    check(file, path, end, named, true)
}

fn check(
    file: &impl LogFile,
    path: &Path,
    end: &End,
    named: Option<(u64, u64)>,
    longer: bool,
) -> Result<(), LogError> {
    let meta = file.metadata()?;
    if let Some(id) = named {
        check_named(&meta, path, id)?;
    }
    let found = meta.len();
    if found < end.len {
        return Err(LogError::Truncated {
            path: path.to_owned(),
            expected: end.len,
            found,
        });
    }
    let tampered = || LogError::Tampered {
        path: path.to_owned(),
        expected: end.len,
        found,
    };
    if found > end.len && !longer {
        return Err(tampered());
    }
    let mut last = [0; TAIL];
    let last = &mut last[..end.tail_len];
    read_exact_at(file, last, end.len - end.tail_len as u64)?;
    if last != end.tail() {
        return Err(tampered());
    }
    Ok(())
}

/// Cuts a failed append back to `end` (what the log held before it) and syncs the cut, then
/// says what the failure means ([`after_cut_back`]). The cut never extends the file: a file
/// found shorter than `end` is left as it is, and the append is
/// [`LogError::Indeterminate`] (its `undo` a [`LogError::Truncated`]); so is a cut after which
/// the file does not end in the log's last bytes (its `undo` a [`LogError::Tampered`]).
pub fn cut_back(file: &impl LogFile, path: &Path, end: &End, error: LogError) -> LogError {
    let undone = (|| {
        let found = file.metadata()?.len();
        if found < end.len {
            return Err(LogError::Truncated {
                path: path.to_owned(),
                expected: end.len,
                found,
            });
        }
        file.set_len(end.len)?;
        file.sync_data()?;
        check_end(file, path, end, None)
    })();
    after_cut_back(undone, error)
}

/// What a failed append becomes once its cut-back was tried (`undone`): the append's own error
/// if the cut-back and its sync succeeded (the input is not in the log), `Indeterminate` if they
/// failed. A write to a file that is no longer the log's stays `Replaced`: the log never had it.
pub fn after_cut_back(undone: Result<(), LogError>, error: LogError) -> LogError {
    match (undone, error) {
        (_, replaced @ LogError::Replaced { .. }) => replaced,
        (Ok(()), error) => error,
        (Err(undo), error) => LogError::Indeterminate {
            error: as_io(error),
            undo: as_io(undo),
        },
    }
}

/// A log error as the `io::Error` an [`LogError::Indeterminate`] holds: an i/o error as it is,
/// any other wrapped whole (`get_ref()` and `downcast_ref::<LogError>()` give it back).
fn as_io(error: LogError) -> Arc<io::Error> {
    match error {
        LogError::Io(error) => error,
        other => Arc::new(io::Error::other(other)),
    }
}

/// The directory a log file lives in: `.` for a bare file name.
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}
