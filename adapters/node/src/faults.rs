//! The faults a test injects into a [`NativeFileLog`]'s file, and what it counts: built only
//! with the `faults` feature (`npm run build:test`, what `npm test` runs against). The addon a
//! user installs (`npm run build`, the packed tarball's install) has none of it: its log writes
//! the plain [`File`].

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use coxswain_file_log::LogFile;
use napi_derive::napi;

use crate::filelog::{lock, NativeFileLog};

/// The shared log's file with the test's faults: what [`Faults::wrap`] makes of the opened file.
pub(crate) type Wrapped = Probe;

#[napi]
impl NativeFileLog {
    /// How many syncs (`fdatasync`) and writes the log did to its file: `[syncs, writes]` (for
    /// tests).
    #[napi]
    pub fn file_operations(&self) -> Vec<i64> {
        [&self.faults.syncs, &self.faults.writes]
            .map(|count| i64::try_from(count.load(Ordering::Relaxed)).unwrap_or(i64::MAX))
            .to_vec()
    }

    /// A test's fault: the next `count` syncs of the file fail (`sync failed (injected)`).
    #[napi]
    pub fn fail_syncs(&self, count: u32) {
        self.faults.fail_syncs.store(count, Ordering::Relaxed);
    }

    /// A test's fault: the log's next write fails with the OS error `errno` (say `ENOSPC`, 28),
    /// writing nothing.
    #[napi]
    pub fn fail_next_write(&self, errno: i32) {
        *lock(&self.faults.race) = Some(Race::Fail(errno));
        self.faults.armed.store(true, Ordering::Release);
    }

    /// A test's fault: another writer races the log's next write. The file is first cut to
    /// `truncate_to` bytes (through the log's own descriptor, as a `truncate` of the path
    /// would), then `budget` bytes of the write are written and it fails (`write failed
    /// (injected)`), or (`budget` absent) all of it is written.
    #[napi]
    pub fn race_next_write(&self, truncate_to: i64, budget: Option<i64>) {
        let race = Race::Cut {
            truncate_to: u64::try_from(truncate_to).unwrap_or(0),
            budget: budget.map(|n| usize::try_from(n).unwrap_or(0)),
        };
        *lock(&self.faults.race) = Some(race);
        self.faults.armed.store(true, Ordering::Release);
    }
}

/// The file a [`NativeFileLog`] writes, as the shared log's [`LogFile`]: the plain [`File`],
/// with its syncs and writes counted and the faults a test asks for ([`Faults`]). A log with no
/// fault armed does each operation straight to the file (an atomic load more).
#[derive(Debug)]
pub struct Probe {
    file: File,
    faults: Arc<Faults>,
}

/// What a [`Probe`] counts, and the faults a test armed.
#[derive(Debug, Default)]
pub struct Faults {
    syncs: AtomicU64,
    writes: AtomicU64,
    fail_syncs: AtomicU32,
    armed: AtomicBool,
    race: Mutex<Option<Race>>,
}

/// What happens to the log's next write: another writer races it
/// ([`NativeFileLog::race_next_write`]), or it fails ([`NativeFileLog::fail_next_write`]).
#[derive(Clone, Copy, Debug)]
enum Race {
    Cut {
        truncate_to: u64,
        budget: Option<usize>,
    },
    Fail(i32),
}

impl LogFile for Probe {
    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        self.faults.writes.fetch_add(1, Ordering::Relaxed);
        if self.faults.armed.swap(false, Ordering::AcqRel) {
            match lock(&self.faults.race).take() {
                Some(Race::Cut {
                    truncate_to,
                    budget,
                }) => {
                    self.file.set_len(truncate_to)?;
                    if let Some(budget) = budget {
                        self.file.append(&bytes[..budget.min(bytes.len())])?;
                        return Err(io::Error::other("write failed (injected)"));
                    }
                }
                Some(Race::Fail(errno)) => return Err(io::Error::from_raw_os_error(errno)),
                None => {}
            }
        }
        self.file.append(bytes)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        LogFile::set_len(&self.file, len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.faults.syncs.fetch_add(1, Ordering::Relaxed);
        let faults = &self.faults.fail_syncs;
        if faults.load(Ordering::Acquire) > 0
            && faults
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
                .is_ok()
        {
            return Err(io::Error::other("sync failed (injected)"));
        }
        LogFile::sync_data(&self.file)
    }

    fn metadata(&self) -> io::Result<std::fs::Metadata> {
        LogFile::metadata(&self.file)
    }
}

impl Faults {
    /// The opened file, wrapped to count and fail as `faults` says.
    pub(crate) fn wrap(faults: &Arc<Faults>) -> impl FnOnce(File) -> Probe {
        let faults = Arc::clone(faults);
        move |file| Probe { file, faults }
    }
}
