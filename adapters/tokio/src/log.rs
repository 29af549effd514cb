//! The durable log behind an agent: the [`DurableLog`] trait, the JSON-lines [`FileLog`] (the
//! embedded default) and the in-memory [`MemoryLog`].
//!
//! # What an append's result means
//!
//! * `Ok`: the batch is in the log, as durable as the [`SyncPolicy`] makes it.
//! * [`LogError::Io`] (and [`LogError::Replaced`], [`LogError::Truncated`],
//!   [`LogError::Tampered`]): the batch is **not** in the log. A partial write was cut back and
//!   the cut synced before the error was returned, so a retry cannot deliver twice.
//! * [`LogError::Indeterminate`]: the write failed *and* cutting it back failed (or would have
//!   had to extend the file): the batch may or may not be in the log. Re-open and look before
//!   retrying.
//!
//! What a file log checks of its file around every append: see [`FileLog`].
//! * [`LogError::TooDeep`], [`LogError::Encode`], [`LogError::SeqExhausted`]: refused before
//!   anything was written.

use std::fs::File;
use std::future::Future;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use coxswain_core::Event;

pub use crate::error::LogError;
use crate::file::{
    check_end, check_identity, check_prefix, cut_back, identity, open_locked, End, LogFile,
};
use coxswain_log::{encode, parse, CorruptLine, Entry, LineBuffer, Reader, Record, Tail, TornTail};

/// Where an agent's durable events go: an append-only sequence of records with contiguous `seq`.
///
/// The driver task is the log's only writer. It appends the durable events of a *group* of
/// inputs (every input already waiting, up to [`Options::max_batch`](crate::Options::max_batch),
/// host events included) as one batch, and acknowledges those inputs only once
/// [`append`](DurableLog::append) returned `Ok`. One call is one unit of durability: a log
/// should make it one write and one sync (a [`FileLog`]), or one transaction (a database log),
/// and must keep it all-or-nothing, since a failed append fails every input of the group.
///
/// Opening an agent calls [`read_back`](DurableLog::read_back), then — only if the records were
/// accepted — [`repair_tail`](DurableLog::repair_tail), then appends crash repair's closers: a
/// log that is rejected is left exactly as it was.
pub trait DurableLog: Send + 'static {
    /// Reads every complete record, in order, handing each to `visit` (which may stop the read
    /// with `Break`), and reports what follows the last complete record. Changes nothing: a torn
    /// tail is only dropped by [`repair_tail`](DurableLog::repair_tail). A record that is corrupt
    /// before the end is an error naming its line.
    fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> impl Future<Output = Result<ReadBack, LogError>> + Send;

    /// Makes the log end on a complete line after a [`read_back`](DurableLog::read_back) that
    /// was accepted: drops a torn tail (S50), or ends an unterminated final record with its
    /// `\n`; durable before it returns.
    fn repair_tail(&mut self) -> impl Future<Output = Result<(), LogError>> + Send;

    /// Appends `batch` in order, the records taking the next `seq` numbers, and returns the
    /// first one's `seq`. `Ok`: the batch is as durable as the log's policy makes it. `Err`: the
    /// batch is not in the log, except after [`LogError::Indeterminate`] (unknown). After a
    /// failed append that was cut back the log takes appends again (the next one checks the
    /// file afresh); after an indeterminate one it takes no more ([`LogError::Failed`]).
    fn append(&mut self, batch: &[Entry]) -> impl Future<Output = Result<u64, LogError>> + Send;

    /// Makes everything appended so far durable (fsync), whatever the policy.
    fn sync(&mut self) -> impl Future<Output = Result<(), LogError>> + Send;
}

/// What [`DurableLog::read_back`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadBack {
    /// How many complete records were read (and handed to the visitor).
    pub records: usize,
    /// A torn final record, left out (S50); [`DurableLog::repair_tail`] drops it.
    pub torn: Option<TornTail>,
    /// The last record was whole but lacked its `\n` (a log written elsewhere); it was read, and
    /// [`DurableLog::repair_tail`] adds the `\n`.
    pub unterminated: bool,
}

impl ReadBack {
    /// What a log read back: how many complete records, and the torn tail it left out.
    pub fn new(records: usize, torn: Option<TornTail>) -> Self {
        ReadBack {
            records,
            torn,
            unterminated: false,
        }
    }
}

/// When a [`FileLog`] syncs on its own (an explicit [`sync`](DurableLog::sync) always does). A
/// sync is `fdatasync` (the data and the file's size, not its timestamps); with group commit one
/// sync covers a whole group of inputs.
///
/// | policy | a process crash (the OS survives) | a power loss or kernel crash |
/// | --- | --- | --- |
/// | `EveryAppend` | loses nothing acknowledged | loses nothing acknowledged |
/// | `PerTurn` | loses nothing acknowledged | may lose what was acknowledged since the last turn ended |
/// | `Never` | loses nothing acknowledged | may lose everything acknowledged since the agent opened |
///
/// Under every policy a crash inside an append loses only inputs that were never acknowledged
/// (a torn final line is dropped at the next open, S50). Under the lazy policies a power loss
/// can also take back acknowledged records: which of the unsynced bytes survive is up to the
/// file system (ext4 with `data=ordered` keeps a prefix of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncPolicy {
    /// After every append, before it returns: nothing is acknowledged that a power loss can
    /// take back. The default.
    #[default]
    EveryAppend,
    /// After an append that ends a turn (`turn/end`): deliveries in between are acknowledged once
    /// written to the OS (safe against a process crash, not a power loss).
    PerTurn,
    /// Never on its own; only on an explicit `sync` (an agent syncs when it ends): safe against
    /// a process crash, not a power loss.
    Never,
}

/// The buffer a [`FileLog`] keeps between appends; a larger batch's buffer is given back.
const KEPT_BUFFER: usize = 64 * 1024;

/// How much of the file a read takes at a time.
const READ_CHUNK: usize = 1 << 20;

/// The embedded default log: a JSON-lines file, one `{seq, type, data}` record per line.
///
/// * [`open`](FileLog::open) creates the file if needed, takes an exclusive advisory lock
///   (`flock`) on it for the log's whole life (a second writer gets [`LogError::Locked`]), and
///   syncs its directory (a relative path's too). It reads nothing. A path that names a FIFO, a
///   directory, a socket or a device is refused before it is opened ([`LogError::NotRegular`]).
/// * [`read_back`](DurableLog::read_back) streams the file through the log's own handle, one
///   record at a time (memory does not grow with the file, nor with a line: a line longer than
///   [`MAX_LINE_BYTES`](coxswain_log::MAX_LINE_BYTES) stops the read,
///   [`LogError::LineTooLong`]), and changes nothing;
///   [`repair_tail`](DurableLog::repair_tail) then drops a torn tail (S50).
/// * Every append and sync checks that the path still names the file this log writes
///   ([`LogError::Replaced`]) and that the file still has the length and the last bytes this log
///   left it with ([`LogError::Truncated`], [`LogError::Tampered`]); see below. A failed append
///   is cut back ([`DurableLog::append`]); the cut never extends the file.
///
/// # What it checks of its file
///
/// Before every append it checks that its file still has the length it left it at and still
/// ends in the last 32 bytes it wrote (one `fstat`, one `pread`); after the write and its sync,
/// and before acknowledging, it checks the same of the new end and that the path still names the
/// file (one `stat` more); every [`sync`](DurableLog::sync) checks it too. So a file removed,
/// renamed or replaced ([`LogError::Replaced`]), cut in place (`logrotate`'s `copytruncate`,
/// `: > file`: [`LogError::Truncated`]), or appended to or overwritten at its end by a writer
/// that ignores the lock ([`LogError::Tampered`]) fails the append instead of acknowledging it
/// (and every append after it, each checking afresh). An append refused before its write wrote
/// nothing; one whose write the check after it refused is cut back, to the acknowledged length
/// and only if the file is at least that long and ends as the log left it there
/// ([`LogError::Indeterminate`] otherwise). A [`SegmentLog`](crate::SegmentLog)'s committer
/// checks its file the same way.
///
/// Not detected: bytes overwritten in place before the last 32 the log wrote (the same length,
/// the same end), a change undone before the next check, and a change that lands after an
/// append's last check (the records it acknowledged are lost; the next append or sync reports
/// it).
///
/// # Its file operations
///
/// Once opened, every operation on the file (write, read, cut, sync, `fstat`) goes through `F`,
/// a [`LogFile`]: the plain [`File`] unless the log was opened with
/// [`open_wrapped`](FileLog::open_wrapped).
#[derive(Debug)]
pub struct FileLog<F = File> {
    path: PathBuf,
    /// The file and its write state; `None` while a blocking task holds it, or if that task was
    /// lost.
    io: Option<Box<FileIo<F>>>,
    policy: SyncPolicy,
    next_seq: u64,
    read: ReadState,
    failed: bool,
}

#[derive(Debug)]
struct FileIo<F> {
    file: F,
    path: PathBuf,
    /// The file's identity when opened: device and inode.
    id: (u64, u64),
    /// Where the log left the file: everything up to here is acknowledged (or read back).
    end: End,
    /// How much of `end` the file is held to.
    held: Held,
    /// The file's length when it was last read back (its tail is repaired against it).
    read_len: u64,
    buffer: Vec<u8>,
}

/// What the checks hold the file to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Held {
    /// Not repaired yet: the log's end is not known (only the path is checked).
    Unknown,
    /// The file ends exactly at the log's end.
    Exact,
    /// A failed cut-back may have left this log's own bytes after the end: the file holds the
    /// end and perhaps more.
    AtLeast,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadState {
    /// Not read yet: the first append reads (and repairs) first.
    Unread,
    /// Read, tail not yet repaired.
    Read(TailFix),
    /// The log ends on a complete line; appends go after `len`.
    Ready,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TailFix {
    None,
    /// Cut the file to this length.
    Cut(u64),
    /// The file's last record lacks its `\n`.
    Terminate,
}

impl FileLog {
    /// Opens (or creates) the log at `path` with the default [`SyncPolicy`].
    pub async fn open(path: impl AsRef<Path>) -> Result<FileLog, LogError> {
        FileLog::open_with(path, SyncPolicy::default()).await
    }

    /// Opens (or creates) the log at `path`, syncing as `policy` says. Fails with
    /// [`LogError::Locked`] while another writer holds the file.
    pub async fn open_with(
        path: impl AsRef<Path>,
        policy: SyncPolicy,
    ) -> Result<FileLog, LogError> {
        FileLog::open_wrapped(path, policy, std::convert::identity).await
    }
}

impl<F: LogFile> FileLog<F> {
    /// Opens (or creates) the log at `path` as [`open_with`](FileLog::open_with) does, then
    /// hands the opened, locked file to `wrap`: every later operation on it goes through the
    /// [`LogFile`] `wrap` returns (say, one that counts the syncs, or fails some as a fault
    /// injector does).
    pub async fn open_wrapped(
        path: impl AsRef<Path>,
        policy: SyncPolicy,
        wrap: impl FnOnce(File) -> F + Send + 'static,
    ) -> Result<FileLog<F>, LogError> {
        let path = std::path::absolute(path.as_ref())?;
        let io = blocking(move || FileIo::open(path, wrap)).await??;
        Ok(FileLog {
            path: io.path.clone(),
            io: Some(Box::new(io)),
            policy,
            next_seq: 1,
            read: ReadState::Unread,
            failed: false,
        })
    }

    /// The file's path (made absolute when opened).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The capacity of the append buffer kept between appends.
    #[cfg(test)]
    fn buffer_capacity(&self) -> usize {
        self.io.as_ref().map_or(0, |io| io.buffer.capacity())
    }

    /// Runs `f` on the file in a blocking task. A lost task (it cannot panic: no code in it
    /// does) leaves the log unusable.
    async fn with_io<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut FileIo<F>) -> T + Send + 'static,
    ) -> Result<T, LogError> {
        let Some(mut io) = self.io.take() else {
            return Err(LogError::Failed);
        };
        let (io, value) = blocking(move || {
            let value = f(&mut io);
            (io, value)
        })
        .await?;
        self.io = Some(io);
        Ok(value)
    }

    /// Reads (if not yet) and repairs the tail (if not yet): appends go after a complete line.
    async fn ensure_ready(&mut self) -> Result<(), LogError> {
        if self.read == ReadState::Unread {
            self.read_back(&mut |_| ControlFlow::Continue(())).await?;
        }
        if let ReadState::Read(fix) = self.read {
            self.with_io(move |io| io.repair_tail(fix)).await??;
            self.read = ReadState::Ready;
        }
        Ok(())
    }
}

impl<F: LogFile> DurableLog for FileLog<F> {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        // Read through this log's own handle, and only while the path still names it.
        self.with_io(|io| io.check_identity()).await??;
        let mut reader = Reader::new();
        let mut lines = LineBuffer::new();
        let mut offset = 0u64;
        loop {
            let chunk = self
                .with_io(move |io| io.read_chunk(offset))
                .await?
                .map_err(LogError::from)?;
            if chunk.is_empty() {
                break;
            }
            offset += chunk.len() as u64;
            let flow = lines
                .feed(&chunk, |line| Ok::<_, LogError>(visit(reader.line(line)?)))
                .map_err(|error| error.at(&self.path))?;
            if flow.is_break() {
                self.read = ReadState::Unread;
                return Ok(ReadBack::new(reader.records(), None));
            }
            tokio::task::yield_now().await;
        }
        let (torn, fix) = if lines.rest().is_empty() {
            (None, TailFix::None)
        } else {
            match reader.last(lines.rest()) {
                Tail::Torn(torn) => (Some(torn), TailFix::Cut(reader.complete_len())),
                Tail::Unterminated(record) => {
                    let _ = visit(record);
                    (None, TailFix::Terminate)
                }
            }
        };
        self.next_seq = reader.next_seq();
        self.read = ReadState::Read(fix);
        let complete = reader.complete_len();
        self.with_io(move |io| {
            io.end = End::unread(complete);
            io.held = Held::Unknown;
            io.read_len = offset;
        })
        .await?;
        Ok(ReadBack {
            records: reader.records(),
            torn,
            unterminated: fix == TailFix::Terminate,
        })
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        self.ensure_ready().await
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        if self.failed {
            return Err(LogError::Failed);
        }
        self.ensure_ready().await?;
        if batch.is_empty() {
            return Ok(self.next_seq);
        }
        let first = self.next_seq;
        let next = first
            .checked_add(batch.len() as u64)
            .ok_or(LogError::SeqExhausted)?;
        let Some(io) = self.io.as_mut() else {
            return Err(LogError::Failed);
        };
        io.buffer.clear();
        for (seq, entry) in seqs(first, batch.len()).zip(batch) {
            if let Err(error) = encode(seq, entry, &mut io.buffer) {
                io.buffer.clear();
                return Err(error.into());
            }
        }
        let sync = match self.policy {
            SyncPolicy::EveryAppend => true,
            SyncPolicy::PerTurn => batch
                .iter()
                .any(|entry| matches!(entry, Entry::Machine(Event::TurnEnd { .. }))),
            SyncPolicy::Never => false,
        };
        let written = self.with_io(move |io| io.append_buffer(sync)).await;
        match written {
            Ok(Ok(())) => {
                self.next_seq = next;
                Ok(first)
            }
            // Cut back cleanly: the file ends where it did, and the next append may go on.
            Ok(Err(error)) if !error.is_indeterminate() => Err(error),
            Ok(Err(error)) | Err(error) => {
                self.failed = true;
                Err(error)
            }
        }
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.with_io(|io| io.sync()).await?
    }
}

impl<F: LogFile> FileIo<F> {
    fn open(path: PathBuf, wrap: impl FnOnce(File) -> F) -> Result<FileIo<F>, LogError> {
        let (file, meta) = open_locked(&path)?;
        Ok(FileIo {
            file: wrap(file),
            path,
            id: identity(&meta),
            end: End::unread(meta.len()),
            held: Held::Unknown,
            read_len: meta.len(),
            buffer: Vec::new(),
        })
    }

    /// The path still names this file, and the file is still linked.
    fn check_identity(&self) -> Result<(), LogError> {
        check_identity(&self.file, &self.path, self.id)
    }

    fn read_chunk(&self, offset: u64) -> io::Result<Vec<u8>> {
        let mut chunk = vec![0; READ_CHUNK];
        let mut filled = 0;
        while filled < chunk.len() {
            match self
                .file
                .read_at(&mut chunk[filled..], offset + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        chunk.truncate(filled);
        Ok(chunk)
    }

    /// Repairs the tail as the read back found it, once the file is checked to be as it was
    /// read (the same file, the same length), then learns the file's last bytes.
    fn repair_tail(&mut self, fix: TailFix) -> Result<(), LogError> {
        check_end(
            &self.file,
            &self.path,
            &End::unread(self.read_len),
            Some(self.id),
        )?;
        let len = match fix {
            TailFix::None => self.read_len,
            TailFix::Cut(len) => {
                self.file.set_len(len)?;
                self.file.sync_data()?;
                len
            }
            TailFix::Terminate => {
                self.file.append(b"\n")?;
                self.file.sync_data()?;
                self.read_len + 1
            }
        };
        self.end = End::read(&self.file, len)?;
        self.held = Held::Exact;
        Ok(())
    }

    /// The file still ends as this log left it (`end`), and (`named`) the path still names it.
    fn check_end(&self, end: &End, named: bool) -> Result<(), LogError> {
        let id = named.then_some(self.id);
        match self.held {
            Held::Unknown if named => self.check_identity(),
            Held::Unknown => Ok(()),
            Held::Exact => check_end(&self.file, &self.path, end, id),
            Held::AtLeast => check_prefix(&self.file, &self.path, end, id),
        }
    }

    /// Checks the file still ends as this log left it (nothing is written otherwise: the
    /// batch is not in the log), writes the encoded batch, syncs it if asked, and checks the
    /// file is still the log's and ends in the batch. On a failure after the write began the
    /// file is cut back to the last acknowledged length and the cut synced ([`cut_back`]).
    fn append_buffer(&mut self, sync: bool) -> Result<(), LogError> {
        let buffer = std::mem::take(&mut self.buffer);
        let result = self.write_checked(&buffer, sync);
        self.buffer = buffer;
        self.buffer.clear();
        if self.buffer.capacity() > KEPT_BUFFER {
            self.buffer.shrink_to(KEPT_BUFFER);
        }
        result
    }

    fn write_checked(&mut self, bytes: &[u8], sync: bool) -> Result<(), LogError> {
        self.check_end(&self.end, false)?;
        let after = self.end.after(bytes);
        match self.write_and_sync(bytes, sync, &after) {
            Ok(()) => {
                self.end = after;
                Ok(())
            }
            Err(error) => Err(self.undo(error)),
        }
    }

    fn write_and_sync(&self, bytes: &[u8], sync: bool, after: &End) -> Result<(), LogError> {
        self.file.append(bytes)?;
        if sync {
            self.file.sync_data()?;
        }
        self.check_end(after, true)
    }

    /// Cuts a failed append back to the acknowledged length and syncs the cut; if that failed,
    /// the file may hold this log's bytes after its end from now on.
    fn undo(&mut self, error: LogError) -> LogError {
        let error = cut_back(&self.file, &self.path, &self.end, error);
        if error.is_indeterminate() && self.held == Held::Exact {
            self.held = Held::AtLeast;
        }
        error
    }

    fn sync(&mut self) -> Result<(), LogError> {
        self.file.sync_data()?;
        self.check_end(&self.end, true)
    }
}

/// The `seq` numbers of `len` records from `first` (no overflow: the caller checked that
/// `first + len` fits).
pub(crate) fn seqs(first: u64, len: usize) -> impl Iterator<Item = u64> {
    (0..len as u64).map(move |offset| first.saturating_add(offset))
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, LogError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|error| LogError::from(io::Error::other(format!("log i/o task lost: {error}"))))
}

/// A log held in memory, as the same JSON-lines bytes a [`FileLog`] writes. Clones share the
/// bytes, so a test can keep one to look at (or cut, to simulate a crash) what an agent wrote.
#[derive(Clone, Debug, Default)]
pub struct MemoryLog {
    inner: Arc<Mutex<LogBytes>>,
}

/// The bytes of a JSON-lines log held in memory, with what reading it back found at its tail:
/// the read back and repair (S50) of [`MemoryLog`], public so a log that injects faults into
/// those bytes (the simulator's) reads and repairs exactly as [`MemoryLog`] and [`FileLog`] do.
#[derive(Debug, Default)]
pub struct LogBytes {
    bytes: Vec<u8>,
    /// Known once the bytes were read back and their tail repaired.
    next_seq: Option<u64>,
    /// What the last read back found after the last complete line.
    tail: Option<(TailFix, u64)>,
}

impl MemoryLog {
    /// An empty log.
    pub fn new() -> Self {
        MemoryLog::default()
    }

    /// A log holding `bytes` (say, a crash image: a log cut anywhere).
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        MemoryLog {
            inner: Arc::new(Mutex::new(LogBytes::new(bytes))),
        }
    }

    /// A copy of the log's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.lock().bytes.clone()
    }

    /// The complete records of the log.
    pub fn records(&self) -> Result<Vec<Record>, CorruptLine> {
        parse(&self.lock().bytes).map(|parsed| parsed.records)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogBytes> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl LogBytes {
    /// A log holding `bytes`, not yet read back.
    pub fn new(bytes: Vec<u8>) -> Self {
        LogBytes {
            bytes,
            next_seq: None,
            tail: None,
        }
    }

    /// The log's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The log's bytes, to write or cut them (a fault injector's short or torn write).
    pub fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Records that an append ended with `next` as the next `seq`.
    pub fn appended(&mut self, next: u64) {
        self.next_seq = Some(next);
    }

    /// Forgets the tail and the next `seq`, as a re-open does: the next
    /// [`repair`](LogBytes::repair) reads the bytes back first.
    pub fn reopen(&mut self) {
        self.tail = None;
        self.next_seq = None;
    }

    /// Reads every complete record, in order, handing each to `visit` (which may stop the
    /// read), and remembers how the tail must be fixed; changes no byte
    /// ([`DurableLog::read_back`]).
    ///
    /// # Errors
    /// A record before the end that is not a valid record ([`LogError::Corrupt`]).
    pub fn read(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        let mut reader = Reader::new();
        let mut rest: &[u8] = &self.bytes;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            let record = reader.line(&rest[..end])?;
            rest = &rest[end + 1..];
            if visit(record).is_break() {
                return Ok(ReadBack::new(reader.records(), None));
            }
        }
        let (torn, fix) = if rest.is_empty() {
            (None, TailFix::None)
        } else {
            match reader.last(rest) {
                Tail::Torn(torn) => (Some(torn), TailFix::Cut(reader.complete_len())),
                Tail::Unterminated(record) => {
                    let _ = visit(record);
                    (None, TailFix::Terminate)
                }
            }
        };
        self.tail = Some((fix, reader.next_seq()));
        Ok(ReadBack {
            records: reader.records(),
            torn,
            unterminated: fix == TailFix::Terminate,
        })
    }

    /// Makes the bytes end on a complete line (drops a torn tail, or ends an unterminated last
    /// record with its `\n`, S50) and returns the next `seq`; reads the bytes back first when
    /// that was not done since the last re-open.
    ///
    /// # Errors
    /// A corrupt record ([`LogError::Corrupt`]).
    pub fn repair(&mut self) -> Result<u64, LogError> {
        if let Some(next) = self.next_seq {
            return Ok(next);
        }
        if self.tail.is_none() {
            self.read(&mut |_| ControlFlow::Continue(()))?;
        }
        let Some((fix, next)) = self.tail.take() else {
            return Err(LogError::Failed);
        };
        match fix {
            TailFix::None => {}
            TailFix::Cut(len) => self.bytes.truncate(len as usize),
            TailFix::Terminate => self.bytes.push(b'\n'),
        }
        self.next_seq = Some(next);
        Ok(next)
    }
}

impl DurableLog for MemoryLog {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        // Parse a copy, so the visitor does not run under the lock.
        let bytes = self.bytes();
        let mut copy = LogBytes::new(bytes);
        let read = copy.read(visit)?;
        let mut inner = self.lock();
        inner.tail = copy.tail;
        inner.next_seq = None;
        Ok(read)
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        self.lock().repair().map(drop)
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        let mut inner = self.lock();
        let first = inner.repair()?;
        let next = first
            .checked_add(batch.len() as u64)
            .ok_or(LogError::SeqExhausted)?;
        let mut lines = Vec::new();
        for (seq, entry) in seqs(first, batch.len()).zip(batch) {
            encode(seq, entry, &mut lines)?;
        }
        inner.bytes.extend_from_slice(&lines);
        inner.appended(next);
        Ok(first)
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::parent_dir;
    use coxswain_core::TurnEndReason;
    use coxswain_log::{HostEvent, Problem};
    use serde_json::json;

    fn batch() -> Vec<Entry> {
        vec![
            Entry::Machine(Event::TurnStart { turn: 1 }),
            Entry::Host(HostEvent::new("model/output", json!("hi")).unwrap()),
            Entry::Machine(Event::TurnEnd {
                turn: 1,
                reason: TurnEndReason::Completed,
            }),
        ]
    }

    async fn read_all(log: &mut impl DurableLog) -> Result<(Vec<Record>, ReadBack), LogError> {
        let mut records = Vec::new();
        let read = log
            .read_back(&mut |record| {
                records.push(record);
                ControlFlow::Continue(())
            })
            .await?;
        Ok((records, read))
    }

    #[tokio::test]
    async fn file_log_appends_with_contiguous_seq_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut log = FileLog::open(&path).await.unwrap();
        assert_eq!(read_all(&mut log).await.unwrap().1, ReadBack::default());
        log.repair_tail().await.unwrap();
        assert_eq!(log.append(&batch()).await.unwrap(), 1);
        assert_eq!(log.append(&batch()[..1]).await.unwrap(), 4);
        let (records, _) = read_all(&mut log).await.unwrap();
        let seqs: Vec<_> = records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![Some(1), Some(2), Some(3), Some(4)]);
        drop(log);
        let mut log = FileLog::open(&path).await.unwrap();
        assert_eq!(read_all(&mut log).await.unwrap().1.records, 4);
        assert_eq!(log.append(&batch()).await.unwrap(), 5);
    }

    #[tokio::test]
    async fn s50_file_log_cuts_a_torn_tail_only_at_repair_and_appends_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut log = FileLog::open(&path).await.unwrap();
        log.append(&batch()).await.unwrap();
        drop(log);
        let bytes = std::fs::read(&path).unwrap();
        let cut = bytes.len() - 7;
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let mut log = FileLog::open_with(&path, SyncPolicy::Never).await.unwrap();
        let (records, read) = read_all(&mut log).await.unwrap();
        assert_eq!(records.len(), 2);
        let torn = read.torn.unwrap();
        assert_eq!(torn.line, 3);
        // Reading changed nothing; repairing cuts.
        assert_eq!(std::fs::read(&path).unwrap().len(), cut);
        log.repair_tail().await.unwrap();
        let complete = std::fs::read(&path).unwrap();
        assert_eq!(complete.len(), cut - torn.bytes);
        assert_eq!(log.append(&batch()[2..]).await.unwrap(), 3);
        log.sync().await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(text.lines().all(|line| line.starts_with("{\"seq\":")));
    }

    #[tokio::test]
    async fn a_corrupt_file_is_rejected_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let content = b"{\"seq\":1,\"type\":\"x\"}\nnot json\n{\"seq\":3,\"type\":\"x\"}\n{\"se";
        std::fs::write(&path, content).unwrap();
        let mut log = FileLog::open(&path).await.unwrap();
        let error = read_all(&mut log).await.unwrap_err();
        assert!(
            matches!(&error, LogError::Corrupt(CorruptLine { line: 2, .. })),
            "{error}"
        );
        assert!(matches!(
            log.append(&batch()).await,
            Err(LogError::Corrupt(CorruptLine { line: 2, .. }))
        ));
        assert_eq!(std::fs::read(&path).unwrap(), content);
    }

    /// Item 6: a bare relative path's directory is `.`, and it is synced.
    #[test]
    fn a_bare_file_name_lives_in_the_current_directory() {
        assert_eq!(parent_dir(Path::new("session.jsonl")), Path::new("."));
        assert_eq!(
            parent_dir(Path::new("logs/session.jsonl")),
            Path::new("logs")
        );
        assert_eq!(parent_dir(Path::new("/session.jsonl")), Path::new("/"));
    }

    /// Item 6: the path is made absolute when opened, so the directory synced is the real one.
    #[tokio::test]
    async fn a_relative_path_is_made_absolute() {
        let log = FileLog::open(Path::new("target-relative-test.jsonl")).await;
        let log = log.unwrap();
        assert!(log.path().is_absolute());
        assert_eq!(
            parent_dir(log.path()),
            std::env::current_dir().unwrap().as_path()
        );
        let path = log.path().to_owned();
        drop(log);
        std::fs::remove_file(path).unwrap();
    }

    /// Item 10: the append buffer gives back the capacity of a large batch.
    #[tokio::test]
    async fn the_buffer_does_not_keep_a_large_batch() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = FileLog::open(dir.path().join("a.jsonl")).await.unwrap();
        let big = HostEvent::new("x", json!("y".repeat(1 << 20))).unwrap();
        log.append(&[Entry::Host(big)]).await.unwrap();
        assert!(
            log.buffer_capacity() <= KEPT_BUFFER,
            "{}",
            log.buffer_capacity()
        );
        log.append(&batch()).await.unwrap();
        assert!(log.buffer_capacity() <= KEPT_BUFFER);
    }

    /// Item 10: a log at `seq` u64::MAX - 1 takes one more record, then refuses, typed.
    #[tokio::test]
    async fn an_exhausted_seq_is_refused_not_duplicated() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        std::fs::write(
            &path,
            format!("{{\"seq\":{},\"type\":\"x\"}}\n", u64::MAX - 2),
        )
        .unwrap();
        let mut log = FileLog::open(&path).await.unwrap();
        assert_eq!(log.append(&batch()[..1]).await.unwrap(), u64::MAX - 1);
        assert!(matches!(
            log.append(&batch()[..1]).await,
            Err(LogError::SeqExhausted)
        ));
        let max = format!("{{\"seq\":{},\"type\":\"x\"}}\n", u64::MAX);
        std::fs::write(dir.path().join("b.jsonl"), &max).unwrap();
        let mut log = FileLog::open(dir.path().join("b.jsonl")).await.unwrap();
        assert!(matches!(
            read_all(&mut log).await,
            Err(LogError::Corrupt(CorruptLine {
                line: 1,
                problem: Problem::SeqExhausted
            }))
        ));
        let mut memory = MemoryLog::from_bytes(max.into_bytes());
        assert!(matches!(
            memory.append(&batch()).await,
            Err(LogError::Corrupt(CorruptLine {
                problem: Problem::SeqExhausted,
                ..
            }))
        ));
    }

    #[tokio::test]
    async fn memory_log_reads_like_a_file() {
        let mut log = MemoryLog::new();
        let view = log.clone();
        log.append(&batch()).await.unwrap();
        let mut bytes = view.bytes();
        bytes.truncate(bytes.len() - 3);
        let mut crashed = MemoryLog::from_bytes(bytes);
        let (records, read) = read_all(&mut crashed).await.unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(read.torn.map(|t| t.line), Some(3));
        crashed.repair_tail().await.unwrap();
        assert_eq!(crashed.append(&batch()[2..]).await.unwrap(), 3);
        assert_eq!(crashed.records().unwrap().len(), 3);
    }
}
