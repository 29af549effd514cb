//! The blocking [`FileLog`]: open, read back, repair, append, sync, resume. Every call does its
//! IO on the calling thread and returns; a runtime runs it where blocking is allowed (tokio's
//! blocking pool, a Python worker thread with the GIL released, libuv's thread pool).

use std::fs::File;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use coxswain_log::{encode, Entry, LineBuffer, Reader, Record, Tail, TornTail};
use coxswain_session::{ResumeOptions, ResumePlan, Resuming};

use crate::error::LogError;
use crate::file::{
    check_end, check_identity, check_prefix, cut_back, identity, open_locked, End, LogFile,
};

/// When a [`FileLog`] syncs on its own (an explicit [`sync`](FileLog::sync) always does). A
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
///
/// ```
/// use coxswain_file_log::SyncPolicy;
///
/// assert_eq!(SyncPolicy::ALL.map(SyncPolicy::as_str), ["every-append", "per-turn", "never"]);
/// assert_eq!("per-turn".parse(), Ok(SyncPolicy::PerTurn));
/// assert_eq!(
///     "always".parse::<SyncPolicy>().unwrap_err().to_string(),
///     "unknown sync policy `always`",
/// );
/// ```
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

impl SyncPolicy {
    /// Every policy, the default first.
    pub const ALL: [SyncPolicy; 3] = [
        SyncPolicy::EveryAppend,
        SyncPolicy::PerTurn,
        SyncPolicy::Never,
    ];

    /// The policy as every language spells it: `every-append`, `per-turn`, `never`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SyncPolicy::EveryAppend => "every-append",
            SyncPolicy::PerTurn => "per-turn",
            SyncPolicy::Never => "never",
        }
    }

    /// Whether an append of records that do (`ends_turn`) or do not end a turn syncs.
    pub const fn syncs(self, ends_turn: bool) -> bool {
        match self {
            SyncPolicy::EveryAppend => true,
            SyncPolicy::PerTurn => ends_turn,
            SyncPolicy::Never => false,
        }
    }
}

impl std::str::FromStr for SyncPolicy {
    type Err = coxswain_core::UnknownName;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        SyncPolicy::ALL
            .into_iter()
            .find(|policy| policy.as_str() == name)
            .ok_or_else(|| coxswain_core::UnknownName::new("sync policy", name))
    }
}

/// What a read back found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadBack {
    /// How many complete records were read (and handed to the visitor).
    pub records: usize,
    /// A torn final record, left out (S50); the tail repair drops it.
    pub torn: Option<TornTail>,
    /// The last record was whole but lacked its `\n` (a log written elsewhere); it was read, and
    /// the tail repair adds the `\n`.
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

/// How a read back says the log's tail must be repaired before the next append (S50).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TailFix {
    /// The log ends on a complete line.
    None,
    /// Cut the log to this length (a torn final record).
    Cut(u64),
    /// The last record lacks its `\n`.
    Terminate,
}

/// A read back in progress, fed the file's bytes in chunks by whoever reads them (a blocking
/// [`FileLog::read_back`], or an async driver that reads each chunk in a blocking task and
/// visits the records on its own task): the one place that turns a file log's bytes into
/// records and a [`TailFix`].
#[derive(Debug, Default)]
pub struct Reading {
    reader: Reader,
    lines: LineBuffer,
    offset: u64,
}

/// What [`Reading::advance`] did with a chunk.
#[derive(Debug)]
pub enum Advance {
    /// The read goes on from the next chunk.
    More(Reading),
    /// The read is over: what it found, and how it ended (for [`FileLog::read_ended`]).
    Done(ReadBack, ReadEnd),
}

/// How a [`Reading`] ended: give it to [`FileLog::read_ended`].
#[derive(Clone, Copy, Debug)]
pub struct ReadEnd {
    fix: TailFix,
    next_seq: u64,
    complete_len: u64,
    read_len: u64,
    stopped: bool,
}

impl ReadEnd {
    /// How the tail must be repaired before the next append.
    pub fn tail_fix(&self) -> TailFix {
        self.fix
    }

    /// The `seq` after the last complete record read.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
}

impl Reading {
    /// A read from the file's start.
    pub fn new() -> Self {
        Reading::default()
    }

    /// Where the next chunk starts.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Feeds the next chunk (empty at the end of the file), handing each complete record to
    /// `visit`; `Break` when `visit` stopped the read.
    ///
    /// # Errors
    ///
    /// A corrupt record ([`LogError::Corrupt`]) or a line longer than
    /// [`MAX_LINE_BYTES`](coxswain_log::MAX_LINE_BYTES) ([`LogError::LineTooLong`]).
    pub fn feed(
        &mut self,
        chunk: &[u8],
        visit: &mut dyn FnMut(Record) -> ControlFlow<()>,
    ) -> Result<ControlFlow<()>, LogError> {
        self.offset += chunk.len() as u64;
        let reader = &mut self.reader;
        self.lines
            .feed(chunk, |line| Ok::<_, LogError>(visit(reader.line(line)?)))
    }

    /// Feeds the next `chunk` (empty at the end of the file, [`FileLog::read_chunk`]): the read
    /// goes on ([`Advance::More`]), or it is over (the end of the file, or `visit` stopped it):
    /// [`Advance::Done`] with what it found and how it ended, for [`FileLog::read_ended`].
    ///
    /// # Errors
    ///
    /// As [`feed`](Reading::feed).
    pub fn advance(
        mut self,
        chunk: &[u8],
        visit: &mut dyn FnMut(Record) -> ControlFlow<()>,
    ) -> Result<Advance, LogError> {
        if chunk.is_empty() {
            let (read, end) = self.finish(visit);
            return Ok(Advance::Done(read, end));
        }
        if self.feed(chunk, visit)?.is_break() {
            let (read, end) = self.stopped();
            return Ok(Advance::Done(read, end));
        }
        Ok(Advance::More(self))
    }

    /// The read stopped by its visitor: nothing is known of the tail.
    pub fn stopped(self) -> (ReadBack, ReadEnd) {
        let end = ReadEnd {
            fix: TailFix::None,
            next_seq: self.reader.next_seq(),
            complete_len: self.reader.complete_len(),
            read_len: self.offset,
            stopped: true,
        };
        (ReadBack::new(self.reader.records(), None), end)
    }

    /// The read reached the end of the file: reads the bytes after the last complete line (a
    /// whole unterminated record is handed to `visit`) and says how the tail is repaired.
    pub fn finish(
        mut self,
        visit: &mut dyn FnMut(Record) -> ControlFlow<()>,
    ) -> (ReadBack, ReadEnd) {
        let (torn, fix) = if self.lines.rest().is_empty() {
            (None, TailFix::None)
        } else {
            match self.reader.last(self.lines.rest()) {
                Tail::Torn(torn) => (Some(torn), TailFix::Cut(self.reader.complete_len())),
                Tail::Unterminated(record) => {
                    let _ = visit(record);
                    (None, TailFix::Terminate)
                }
            }
        };
        let read = ReadBack {
            records: self.reader.records(),
            torn,
            unterminated: fix == TailFix::Terminate,
        };
        let end = ReadEnd {
            fix,
            next_seq: self.reader.next_seq(),
            complete_len: self.reader.complete_len(),
            read_len: self.offset,
            stopped: false,
        };
        (read, end)
    }
}

/// The `seq` numbers of `len` records from `first` (never overflowing: saturating at
/// `u64::MAX`, which the encoder refuses, [`LogError::SeqExhausted`]).
pub fn seqs(first: u64, len: usize) -> impl Iterator<Item = u64> {
    (0..len as u64).map(move |offset| first.saturating_add(offset))
}

/// The buffer a [`FileLog`] keeps between appends; a larger batch's buffer is given back.
pub const KEPT_BUFFER: usize = 64 * 1024;

/// Empties an append buffer for the next batch, giving back what a large batch took beyond
/// [`KEPT_BUFFER`].
pub fn recycle(buffer: &mut Vec<u8>) {
    buffer.clear();
    if buffer.capacity() > KEPT_BUFFER {
        buffer.shrink_to(KEPT_BUFFER);
    }
}

/// How much of the file a read takes at a time.
pub const READ_CHUNK: usize = 1 << 20;

/// The JSON-lines log file every coxswain runtime writes: one `{seq, type, data}` record per
/// line, one append group per call, blocking (no runtime: run it where blocking is allowed).
///
/// * [`open`](FileLog::open) creates the file if needed, takes an exclusive advisory lock
///   (`flock`) on it for the log's whole life (a second writer, in any language, gets
///   [`LogError::Locked`]), and syncs its directory. It reads nothing. A path that names a FIFO,
///   a directory, a socket or a device is refused before it is opened
///   ([`LogError::NotRegular`]), and the opened file is checked again.
/// * [`read_back`](FileLog::read_back) streams the file through the log's own handle, one record
///   at a time (memory does not grow with the file, nor with a line: a line longer than
///   [`MAX_LINE_BYTES`](coxswain_log::MAX_LINE_BYTES) stops the read,
///   [`LogError::LineTooLong`]), and changes nothing; [`repair_tail`](FileLog::repair_tail)
///   then drops a torn tail (S50). [`resume`](FileLog::resume) does both and appends crash
///   repair's closers: the one way a runtime resumes a session from its file.
/// * [`append`](FileLog::append) writes one batch as one write (and one sync, as the
///   [`SyncPolicy`] says) and returns its first `seq`.
///
/// # What an append's result means
///
/// * `Ok`: the batch is in the log, as durable as the [`SyncPolicy`] makes it.
/// * [`LogError::Io`], [`LogError::StorageFull`], [`LogError::Replaced`],
///   [`LogError::Truncated`], [`LogError::Tampered`]: the batch is **not** in the log. A partial
///   write was cut back and the cut synced before the error was returned, so a retry cannot
///   deliver twice. The log takes appends again (each checks the file afresh).
/// * [`LogError::Indeterminate`]: the write failed *and* cutting it back failed (or would have
///   had to extend the file): the batch may or may not be in the log. The log takes no more
///   appends ([`LogError::Failed`]); re-open it and look before retrying.
/// * [`LogError::TooDeep`], [`LogError::Encode`], [`LogError::SeqExhausted`]: refused before
///   anything was written.
///
/// # What it checks of its file
///
/// Before every append it checks that the path still names its file and that the file still has
/// the length it left it at and still ends in the last 32 bytes it wrote (one `stat`, one
/// `fstat`, one `pread`: nothing is written to a file that is no longer the log's); after the
/// write and its sync, and before acknowledging, it checks the same of the new end; every
/// [`sync`](FileLog::sync) checks it too. So a file removed,
/// renamed or replaced ([`LogError::Replaced`]), cut in place (`logrotate`'s `copytruncate`,
/// `: > file`: [`LogError::Truncated`]), or appended to or overwritten at its end by a writer
/// that ignores the lock ([`LogError::Tampered`]) fails the append instead of acknowledging it.
/// An append refused before its write wrote nothing; one whose write the check after it refused
/// is cut back, to the acknowledged length and only if the file is at least that long and ends
/// as the log left it there ([`LogError::Indeterminate`] otherwise).
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
///
/// # Examples
///
/// ```
/// use coxswain_core::{Config, Machine, Message};
/// use coxswain_file_log::{FileLog, SyncPolicy};
/// use coxswain_log::Entry;
/// use coxswain_session::ResumeOptions;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("session.jsonl");
/// let mut log = FileLog::open(&path, SyncPolicy::EveryAppend)?;
/// let plan = log.resume(ResumeOptions::from(Config::new()))?; // a new session
/// assert_eq!((plan.records, plan.next_seq), (0, 1));
/// let mut machine = plan.machine;
/// let events = machine.followup(Message::user("m1", "hi"))?.events().to_vec();
/// let batch: Vec<Entry> = events.into_iter().map(Entry::Machine).collect();
/// assert_eq!(log.append(&batch)?, 1);
/// assert_eq!(log.next_seq(), 4);
/// drop(log);
///
/// // A second open resumes it: the turn that was running is closed as interrupted (S50).
/// let mut log = FileLog::open(&path, SyncPolicy::Never)?;
/// let plan = log.resume(ResumeOptions::from(Config::new()))?;
/// assert_eq!((plan.records, plan.interrupted, log.next_seq()), (3, Some(1), 5));
///
/// // Only a regular file is a log.
/// let refused = FileLog::open(dir.path(), SyncPolicy::EveryAppend).unwrap_err();
/// assert_eq!(refused.kind(), "not-regular");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct FileLog<F = File> {
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
    policy: SyncPolicy,
    next_seq: u64,
    read: ReadState,
    failed: bool,
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

impl FileLog {
    /// Opens (or creates) the log at `path` (made absolute), syncing as `policy` says.
    ///
    /// # Errors
    ///
    /// [`LogError::Locked`] while another writer holds the file; [`LogError::NotRegular`] for a
    /// FIFO, a directory, a socket or a device; [`LogError::PermissionDenied`]; i/o errors
    /// naming the file.
    pub fn open(path: impl AsRef<Path>, policy: SyncPolicy) -> Result<FileLog, LogError> {
        FileLog::open_wrapped(path, policy, std::convert::identity)
    }
}

impl<F: LogFile> FileLog<F> {
    /// Opens (or creates) the log at `path` as [`open`](FileLog::open) does, then hands the
    /// opened, locked file to `wrap`: every later operation on it goes through the [`LogFile`]
    /// `wrap` returns (say, one that counts the syncs, or fails some as a fault injector does).
    ///
    /// # Errors
    ///
    /// As [`open`](FileLog::open).
    pub fn open_wrapped(
        path: impl AsRef<Path>,
        policy: SyncPolicy,
        wrap: impl FnOnce(File) -> F,
    ) -> Result<FileLog<F>, LogError> {
        let given = path.as_ref();
        let path = std::path::absolute(given).map_err(|error| LogError::at_path(given, error))?;
        let (file, meta) = open_locked(&path)?;
        Ok(FileLog {
            file: wrap(file),
            id: identity(&meta),
            end: End::unread(meta.len()),
            held: Held::Unknown,
            read_len: meta.len(),
            buffer: Vec::new(),
            policy,
            next_seq: 1,
            read: ReadState::Unread,
            failed: false,
            path,
        })
    }

    /// The file's path (made absolute when opened).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's sync policy.
    pub fn policy(&self) -> SyncPolicy {
        self.policy
    }

    /// The `seq` the next appended record takes (1 before the log was read back).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Whether the log was read back and its tail repaired: appends go after a complete line,
    /// and [`next_seq`](FileLog::next_seq) is the log's. An append made before reads and
    /// repairs first.
    pub fn is_ready(&self) -> bool {
        self.read == ReadState::Ready
    }

    /// The capacity of the append buffer kept between appends (at most [`KEPT_BUFFER`]).
    pub fn buffer_capacity(&self) -> usize {
        self.buffer.capacity()
    }

    /// Reads every complete record, in order, handing each to `visit` (which may stop the read
    /// with `Break`), and reports what follows the last complete record. Changes nothing: a torn
    /// tail is only dropped by [`repair_tail`](FileLog::repair_tail).
    ///
    /// # Errors
    ///
    /// A record that is corrupt before the end ([`LogError::Corrupt`], naming its line); a
    /// line too long; the file replaced; i/o errors.
    pub fn read_back(
        &mut self,
        visit: &mut dyn FnMut(Record) -> ControlFlow<()>,
    ) -> Result<ReadBack, LogError> {
        let mut reading = self.start_read()?;
        loop {
            let chunk = self.read_chunk(reading.offset())?;
            match reading
                .advance(&chunk, visit)
                .map_err(|error| error.in_file(&self.path))?
            {
                Advance::More(more) => reading = more,
                Advance::Done(read, end) => {
                    self.read_ended(end);
                    return Ok(read);
                }
            }
        }
    }

    /// Starts a read back in steps (for a caller that reads each chunk where blocking is allowed
    /// and visits the records elsewhere): checks that the path still names this log's file.
    /// Then [`read_chunk`](FileLog::read_chunk) at [`Reading::offset`], [`Reading::feed`], until
    /// a chunk is empty; then [`Reading::finish`] (or [`Reading::stopped`]) and
    /// [`read_ended`](FileLog::read_ended).
    ///
    /// # Errors
    ///
    /// [`LogError::Replaced`], i/o errors.
    pub fn start_read(&self) -> Result<Reading, LogError> {
        self.check_identity()?;
        Ok(Reading::new())
    }

    /// Up to [`READ_CHUNK`] bytes of the file from `offset` (empty at its end).
    ///
    /// # Errors
    ///
    /// I/O errors naming the file.
    pub fn read_chunk(&self, offset: u64) -> Result<Vec<u8>, LogError> {
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
                Err(error) => return Err(LogError::at_path(&self.path, error)),
            }
        }
        chunk.truncate(filled);
        Ok(chunk)
    }

    /// Takes in how a read back in steps ended: the next `seq`, and (unless the visitor stopped
    /// it) how the tail is repaired before the next append.
    pub fn read_ended(&mut self, end: ReadEnd) {
        if end.stopped {
            self.read = ReadState::Unread;
            return;
        }
        self.next_seq = end.next_seq;
        self.read = ReadState::Read(end.fix);
        self.end = End::unread(end.complete_len);
        self.held = Held::Unknown;
        self.read_len = end.read_len;
    }

    /// Makes the log end on a complete line after a read back that was accepted: drops a torn
    /// tail (S50), or ends an unterminated final record with its `\n`; durable before it
    /// returns. Reads the log back first if that was not done.
    ///
    /// # Errors
    ///
    /// The file replaced, truncated or written since it was read; i/o errors.
    pub fn repair_tail(&mut self) -> Result<(), LogError> {
        if self.read == ReadState::Unread {
            self.read_back(&mut |_| ControlFlow::Continue(()))?;
        }
        if let ReadState::Read(fix) = self.read {
            self.repair(fix)
                .map_err(|error| error.in_file(&self.path))?;
            self.read = ReadState::Ready;
        }
        Ok(())
    }

    /// Resumes the session the file holds (S46–S50, S57, S59): reads it back through the
    /// session layer's [`Resuming`] (the machine restored with `options`' config, crash repair
    /// with its redelivery allowance), and only if that was accepted repairs the tail and
    /// appends the closers (one batch, synced). A log that is refused is left exactly as it was.
    ///
    /// # Errors
    ///
    /// [`LogError::Invalid`] for records the core does not accept (naming the line);
    /// [`LogError::Corrupt`]; what [`read_back`](FileLog::read_back),
    /// [`repair_tail`](FileLog::repair_tail) and [`append`](FileLog::append) fail with.
    pub fn resume(&mut self, options: ResumeOptions) -> Result<ResumePlan, LogError> {
        let mut resuming = Resuming::with_options(options);
        let read = self.read_back(&mut |record| resuming.offer(&record))?;
        let mut plan = resuming.finish_read().map_err(|error| LogError::Invalid {
            path: self.path.clone(),
            error,
        })?;
        plan.torn = read.torn;
        plan.terminate = read.unterminated;
        self.repair_tail()?;
        plan.next_seq = self.next_seq;
        if !plan.closers.is_empty() {
            let closers: Vec<Entry> = plan.closers.iter().cloned().map(Entry::Machine).collect();
            self.append_synced(&closers, true)?;
        }
        Ok(plan)
    }

    /// Appends `batch` in order, the records taking the next `seq` numbers, and returns the
    /// first one's `seq` (see [What an append's result means](FileLog#what-an-appends-result-means)).
    /// Reads and repairs the log first if that was not done.
    ///
    /// # Errors
    ///
    /// As the type's docs say.
    pub fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        self.append_synced(batch, self.policy.syncs(Entry::ends_turn(batch)))
    }

    fn append_synced(&mut self, batch: &[Entry], sync: bool) -> Result<u64, LogError> {
        self.ready_to_append()?;
        let mut buffer = std::mem::take(&mut self.buffer);
        let encoded = seqs(self.next_seq, batch.len())
            .zip(batch)
            .try_for_each(|(seq, entry)| encode(seq, entry, &mut buffer));
        let result = match encoded {
            Ok(()) => self.write_lines(&buffer, batch.len(), sync),
            Err(error) => Err(error.into()),
        };
        recycle(&mut buffer);
        self.buffer = buffer;
        result
    }

    /// Appends `count` records already encoded as `lines`, numbered from `first_seq` (a
    /// binding's session seals its batch as these bytes, [`encode`](coxswain_log::encode)d from
    /// the log's [`next_seq`](FileLog::next_seq)), syncing as the policy says for a batch that
    /// does (`ends_turn`) or does not end a turn. Returns `first_seq`. Reads and repairs the log
    /// first if that was not done.
    ///
    /// # Errors
    ///
    /// As [`append`](FileLog::append); and, before anything is written,
    /// [`LogError::Encode`] when `first_seq` is not the log's next `seq` (another append came
    /// first: the lines would duplicate its numbers) or `lines` is not `count` lines each ending
    /// in `\n`.
    pub fn append_encoded(
        &mut self,
        first_seq: u64,
        lines: &[u8],
        count: usize,
        ends_turn: bool,
    ) -> Result<u64, LogError> {
        self.ready_to_append()?;
        if first_seq != self.next_seq {
            return Err(LogError::Encode(format!(
                "the lines are numbered from seq {first_seq}, but the log's next record is seq {}: nothing written",
                self.next_seq
            )));
        }
        let found = lines.iter().filter(|&&byte| byte == b'\n').count();
        if found != count || lines.last().is_some_and(|&last| last != b'\n') {
            return Err(LogError::Encode(format!(
                "{} bytes of lines holding {found} complete lines are not {count} records: nothing written",
                lines.len()
            )));
        }
        self.write_lines(lines, count, self.policy.syncs(ends_turn))
    }

    fn ready_to_append(&mut self) -> Result<(), LogError> {
        if self.failed {
            return Err(LogError::Failed);
        }
        self.repair_tail()
    }

    /// Writes the `lines` of `count` records; an empty batch writes nothing.
    fn write_lines(&mut self, lines: &[u8], count: usize, sync: bool) -> Result<u64, LogError> {
        let first = self.next_seq;
        if count == 0 {
            return Ok(first);
        }
        let next = first
            .checked_add(count as u64)
            .ok_or(LogError::SeqExhausted)?;
        match self.write_checked(lines, sync) {
            Ok(()) => {
                self.next_seq = next;
                Ok(first)
            }
            Err(error) => {
                let error = error.in_file(&self.path);
                if error.is_indeterminate() {
                    self.failed = true;
                }
                Err(error)
            }
        }
    }

    /// Makes everything appended so far durable (`fdatasync`), whatever the policy, and checks
    /// the file is still the log's and still ends as the log left it.
    ///
    /// # Errors
    ///
    /// The file replaced, truncated or written by another writer; i/o errors.
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.file
            .sync_data()
            .map_err(|error| LogError::at_path(&self.path, error))?;
        self.check_end(&self.end, true)
            .map_err(|error| error.in_file(&self.path))
    }

    /// The path still names this file, and the file is still linked.
    fn check_identity(&self) -> Result<(), LogError> {
        check_identity(&self.file, &self.path, self.id).map_err(|error| error.in_file(&self.path))
    }

    /// Repairs the tail as the read back found it, once the file is checked to be as it was
    /// read (the same file, the same length), then learns the file's last bytes.
    fn repair(&mut self, fix: TailFix) -> Result<(), LogError> {
        self.end = repair_tail(&self.file, &self.path, self.id, self.read_len, fix)?;
        self.held = Held::Exact;
        Ok(())
    }

    /// The file still ends as this log left it (`end`), and (`named`) the path still names it.
    fn check_end(&self, end: &End, named: bool) -> Result<(), LogError> {
        let id = named.then_some(self.id);
        match self.held {
            Held::Unknown if named => check_identity(&self.file, &self.path, self.id),
            Held::Unknown => Ok(()),
            Held::Exact => check_end(&self.file, &self.path, end, id),
            Held::AtLeast => check_prefix(&self.file, &self.path, end, id),
        }
    }

    /// Checks the file still ends as this log left it (nothing is written otherwise: the
    /// batch is not in the log), writes the encoded batch, syncs it if asked, and checks the
    /// file is still the log's and ends in the batch. On a failure after the write began the
    /// file is cut back to the last acknowledged length and the cut synced ([`cut_back`]).
    fn write_checked(&mut self, bytes: &[u8], sync: bool) -> Result<(), LogError> {
        // The path still names the file too: nothing is written to a file no longer the log's.
        self.check_end(&self.end, true)?;
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
}

/// Repairs a log file's tail as its read back found it (`fix`, S50), once the file is checked to
/// be as it was read (the path still names it, `id`, and it is `read_len` long), and syncs the
/// repair; returns the file's new end, its last bytes read (what the checks hold it to from
/// then on). The file log's and the segment log's one tail repair.
///
/// # Errors
///
/// The file replaced, truncated or written since it was read; i/o errors.
pub fn repair_tail(
    file: &impl LogFile,
    path: &Path,
    id: (u64, u64),
    read_len: u64,
    fix: TailFix,
) -> Result<End, LogError> {
    check_end(file, path, &End::unread(read_len), Some(id))?;
    let len = match fix {
        TailFix::None => read_len,
        TailFix::Cut(len) => {
            file.set_len(len)?;
            file.sync_data()?;
            len
        }
        TailFix::Terminate => {
            file.append(b"\n")?;
            file.sync_data()?;
            read_len + 1
        }
    };
    Ok(End::read(file, len)?)
}
