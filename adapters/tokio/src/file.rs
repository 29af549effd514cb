//! What a `FileLog` and a `SegmentLog` do to their file alike: open it locked, check it is still
//! the log's file, write within the fault budget, and classify a failed cut-back.

use std::fs::{File, Metadata};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{flock, FlockOperation};

use crate::log::{parent_dir, FaultState};
use crate::LogError;

/// Opens (or creates) the log file for appending, takes its exclusive lock for the file's whole
/// life (`LogError::Locked` for a second writer) and syncs its directory entry (also when an
/// earlier run created the file and crashed before syncing it).
pub(crate) fn open_locked(path: &Path) -> Result<(File, Metadata), LogError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
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
pub(crate) fn identity(meta: &Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// The path still names this file (same device and inode), and the file is still linked.
pub(crate) fn check_identity(file: &File, path: &Path, id: (u64, u64)) -> Result<(), LogError> {
    let replaced = || LogError::Replaced {
        path: PathBuf::from(path),
    };
    if file.metadata()?.nlink() == 0 {
        return Err(replaced());
    }
    match std::fs::metadata(path) {
        Ok(there) if identity(&there) == id => Ok(()),
        Ok(_) => Err(replaced()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Err(replaced()),
        Err(error) => Err(error.into()),
    }
}

/// Writes `bytes` at the end of `file`, within the fault budget (tests fail a write part-way).
pub(crate) fn write_budgeted(file: &File, faults: &FaultState, bytes: &[u8]) -> io::Result<()> {
    let allowed = faults.take_budget(bytes.len());
    let mut file = file;
    file.write_all(&bytes[..allowed])?;
    if allowed < bytes.len() {
        return Err(io::Error::other("write failed (injected)"));
    }
    Ok(())
}

/// What a failed append becomes once its cut-back was tried (`undone`): the append's own error
/// if the cut-back and its sync succeeded (the input is not in the log), `Indeterminate` if they
/// failed. A write to a file that is no longer the log's stays `Replaced`: the log never had it.
pub(crate) fn after_cut_back(undone: io::Result<()>, error: LogError) -> LogError {
    match (undone, error) {
        (_, replaced @ LogError::Replaced { .. }) => replaced,
        (Ok(()), error) => error,
        (Err(undo), LogError::Io(error)) => LogError::Indeterminate {
            error,
            undo: Arc::new(undo),
        },
        (Err(undo), other) => LogError::Indeterminate {
            error: Arc::new(io::Error::other(other.to_string())),
            undo: Arc::new(undo),
        },
    }
}
