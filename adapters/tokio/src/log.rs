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

pub use crate::error::LogError;
pub(crate) use coxswain_file_log::seqs;
use coxswain_file_log::{recycle, Advance, LogFile, Reading, TailFix};
pub use coxswain_file_log::{ReadBack, SyncPolicy};
use coxswain_log::{encode, parse, CorruptLine, Entry, Record};

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

/// The JSON-lines file log (`coxswain-file-log`'s [`FileLog`](coxswain_file_log::FileLog),
/// every runtime's one file log) on tokio: each call runs the blocking log on tokio's blocking
/// pool, and a read back visits its records on the calling task, one chunk read at a time.
///
/// Everything it checks of its file, what an append's result means and what it fails with are
/// the shared log's: see [`coxswain_file_log::FileLog`]. In short: [`open`](FileLog::open) locks
/// the file (`flock`; a second writer, in any language, gets [`LogError::Locked`]) and refuses
/// anything but a regular file ([`LogError::NotRegular`]); every append and sync checks that the
/// path still names the file ([`LogError::Replaced`]) and that the file still has the length and
/// last bytes this log left it with ([`LogError::Truncated`], [`LogError::Tampered`]); a failed
/// append is cut back, never extending the file ([`LogError::Indeterminate`] when it cannot be).
///
/// # Its file operations
///
/// Once opened, every operation on the file (write, read, cut, sync, `fstat`) goes through `F`,
/// a [`LogFile`]: the plain [`File`] unless the log was opened with
/// [`open_wrapped`](FileLog::open_wrapped).
#[derive(Debug)]
pub struct FileLog<F = File> {
    path: PathBuf,
    /// The blocking log; `None` while a blocking task holds it, or if that task was lost.
    log: Option<Box<coxswain_file_log::FileLog<F>>>,
    /// The append buffer, kept between appends.
    buffer: Vec<u8>,
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
        let path = path.as_ref().to_owned();
        let log = blocking(move || coxswain_file_log::FileLog::open_wrapped(path, policy, wrap))
            .await??;
        Ok(FileLog {
            path: log.path().to_owned(),
            log: Some(Box::new(log)),
            buffer: Vec::new(),
        })
    }

    /// The file's path (made absolute when opened).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The capacity of the append buffer kept between appends.
    #[cfg(test)]
    fn buffer_capacity(&self) -> usize {
        self.buffer.capacity()
    }

    /// The blocking log, when no blocking task holds it.
    fn log(&mut self) -> Result<&mut coxswain_file_log::FileLog<F>, LogError> {
        self.log.as_deref_mut().ok_or(LogError::Failed)
    }

    /// Runs `f` on the blocking log in a blocking task. A lost task (it cannot panic: no code
    /// in it does) leaves the log unusable.
    async fn with_log<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut coxswain_file_log::FileLog<F>) -> T + Send + 'static,
    ) -> Result<T, LogError> {
        let Some(mut log) = self.log.take() else {
            return Err(LogError::Failed);
        };
        let (log, value) = blocking(move || {
            let value = f(&mut log);
            (log, value)
        })
        .await?;
        self.log = Some(log);
        Ok(value)
    }
}

impl<F: LogFile> DurableLog for FileLog<F> {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        // Read through this log's own handle, and only while the path still names it.
        let mut reading = self.with_log(|log| log.start_read()).await??;
        loop {
            let offset = reading.offset();
            let chunk = self.with_log(move |log| log.read_chunk(offset)).await??;
            let visit: &mut dyn FnMut(Record) -> ControlFlow<()> = visit;
            match reading
                .advance(&chunk, visit)
                .map_err(|error| error.in_file(&self.path))?
            {
                Advance::More(more) => reading = more,
                Advance::Done(read, end) => {
                    self.log()?.read_ended(end);
                    return Ok(read);
                }
            }
            tokio::task::yield_now().await;
        }
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        // Appends are encoded from the log's `next_seq` once it was read back and repaired.
        if !self.log()?.is_ready() {
            self.with_log(|log| log.repair_tail()).await??;
        }
        Ok(())
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        self.repair_tail().await?;
        let first = self.log()?.next_seq();
        if batch.is_empty() {
            return Ok(first);
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        let encoded = seqs(first, batch.len())
            .zip(batch)
            .try_for_each(|(seq, entry)| encode(seq, entry, &mut buffer));
        if let Err(error) = encoded {
            recycle(&mut buffer);
            self.buffer = buffer;
            return Err(error.into());
        }
        let ends_turn = Entry::ends_turn(batch);
        let count = batch.len();
        let (mut buffer, written) = self
            .with_log(move |log| {
                let written = log.append_encoded(first, &buffer, count, ends_turn);
                (buffer, written)
            })
            .await?;
        recycle(&mut buffer);
        self.buffer = buffer;
        written
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.with_log(|log| log.sync()).await?
    }
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
        // The file log's own reading of the bytes (its line limit included).
        let visit: &mut dyn FnMut(Record) -> ControlFlow<()> = visit;
        let mut reading = Reading::new();
        if reading.feed(&self.bytes, visit)?.is_break() {
            return Ok(reading.stopped().0);
        }
        let (read, end) = reading.finish(visit);
        self.tail = Some((end.tail_fix(), end.next_seq()));
        Ok(read)
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
        // Encoded in place (no staging buffer growing from empty at every append); a record
        // refused cuts the batch's lines back, so the log is left as it was.
        let start = inner.bytes.len();
        for (seq, entry) in seqs(first, batch.len()).zip(batch) {
            if let Err(error) = encode(seq, entry, &mut inner.bytes) {
                inner.bytes.truncate(start);
                return Err(error.into());
            }
        }
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
    use coxswain_core::{Event, TurnEndReason};
    use coxswain_file_log::file::parent_dir;
    use coxswain_file_log::KEPT_BUFFER;
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

    /// A batch whose last record cannot be encoded is refused whole: the lines of the records
    /// before it are cut back (they are encoded in place), and the next append takes their
    /// `seq`s.
    #[tokio::test]
    async fn memory_log_refuses_a_batch_whole_when_a_record_does_not_encode() {
        let mut log = MemoryLog::new();
        log.append(&batch()[..1]).await.unwrap();
        let before = log.bytes();
        let mut deep = json!(1);
        for _ in 0..coxswain_log::MAX_DEPTH {
            deep = json!([deep]);
        }
        let mut refused = batch();
        refused.push(Entry::Host(HostEvent::new("deep", deep).unwrap()));
        let error = log.append(&refused).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "cannot write a record: the value nests {} levels deep; at most {} fit in a log record",
                coxswain_log::MAX_DEPTH + 1,
                coxswain_log::MAX_DEPTH
            )
        );
        assert_eq!(log.bytes(), before);
        assert_eq!(log.append(&batch()[1..]).await.unwrap(), 2);
        let seqs: Vec<_> = log.records().unwrap().iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [Some(1), Some(2), Some(3)]);
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
