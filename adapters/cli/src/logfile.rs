//! Reading a log file, as every command that reads one does (`verify`, `view`, `log copy`, `run`'s
//! read-back): a path that is not a regular file is refused before it is opened (a FIFO would
//! block the read for ever), and the read stops at the first line longer than any record a
//! session writes ([`MAX_LINE_BYTES`]), holding no more than the limit of it.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use coxswain_log::{read_log, LineTooLong, NotRegularFile, ReadLogError, MAX_LINE_BYTES};

/// Why a log file could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The path names a FIFO, a directory, a socket or a device.
    NotRegular(NotRegularFile),
    /// A line is longer than [`MAX_LINE_BYTES`].
    TooLong { path: PathBuf, error: LineTooLong },
    /// Opening or reading failed.
    Io { path: PathBuf, error: io::Error },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotRegular(error) => error.fmt(f),
            ReadError::TooLong { path, error } => write!(f, "{}: {error}", path.display()),
            ReadError::Io { path, error } => write!(f, "cannot read {}: {error}", path.display()),
        }
    }
}

/// Checks that `path` names a regular file, without opening it.
pub(crate) fn check_regular(path: &Path) -> Result<(), ReadError> {
    let io = |error| ReadError::Io {
        path: path.to_owned(),
        error,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    NotRegularFile::check(path, meta.file_type()).map_err(ReadError::NotRegular)
}

/// Opens `path` for reading once it is known to name a regular file (checked again on the
/// opened file).
pub(crate) fn open_regular(path: &Path) -> Result<File, ReadError> {
    check_regular(path)?;
    let io = |error| ReadError::Io {
        path: path.to_owned(),
        error,
    };
    let file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    NotRegularFile::check(path, meta.file_type()).map_err(ReadError::NotRegular)?;
    Ok(file)
}

/// Reads the whole log at `path`: a regular file whose lines are each at most
/// [`MAX_LINE_BYTES`] long.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, ReadError> {
    let file = open_regular(path)?;
    read_log(file, MAX_LINE_BYTES).map_err(|error| match error {
        ReadLogError::TooLong(error) => ReadError::TooLong {
            path: path.to_owned(),
            error,
        },
        ReadLogError::Io(error) => ReadError::Io {
            path: path.to_owned(),
            error,
        },
        other => ReadError::Io {
            path: path.to_owned(),
            error: io::Error::other(other),
        },
    })
}
