//! The durable log behind an agent: the [`DurableLog`] trait, the JSON-lines [`FileLog`] (the
//! embedded default) and the in-memory [`MemoryLog`].

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use coxswain_core::Event;
use coxswain_log::{encode, parse, CorruptLine, Entry, Record, TornTail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where an agent's durable events go: an append-only sequence of records with contiguous `seq`.
///
/// The driver task is the log's only writer. It appends the durable events of one input as one
/// batch and acknowledges the input only once [`append`](DurableLog::append) returned `Ok`; it
/// appends the host's own events (inside a step) the same way.
pub trait DurableLog: Send + 'static {
    /// Reads back every complete record, in order. A final record cut short by a crash (a torn
    /// tail, S50) is dropped from the log, so the next append starts on a fresh line, and
    /// reported. A record that is corrupt before the end is an error naming its line.
    fn read_back(&mut self) -> impl Future<Output = Result<ReadBack, LogError>> + Send;

    /// Appends `batch` in order, the records taking the next `seq` numbers, and returns the
    /// first one's `seq`. When it returns `Ok` the batch is as durable as the log's policy makes
    /// it; after an `Err` the log may hold part of the batch and takes no more appends.
    fn append(&mut self, batch: &[Entry]) -> impl Future<Output = Result<u64, LogError>> + Send;

    /// Makes everything appended so far durable (fsync), whatever the policy.
    fn sync(&mut self) -> impl Future<Output = Result<(), LogError>> + Send;
}

/// What [`DurableLog::read_back`] found.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct ReadBack {
    /// Every complete record, in order.
    pub records: Vec<Record>,
    /// The torn final record that was dropped, if any.
    pub torn: Option<TornTail>,
}

impl ReadBack {
    /// What a log read back: its complete records and the torn tail it dropped.
    pub fn new(records: Vec<Record>, torn: Option<TornTail>) -> Self {
        ReadBack { records, torn }
    }
}

/// A durable log failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// Reading, writing or syncing failed.
    #[error("log i/o failed: {0}")]
    Io(Arc<io::Error>),
    /// A record before the end of the log is not a valid record.
    #[error("corrupt log: {0}")]
    Corrupt(#[from] CorruptLine),
    /// A record could not be encoded.
    #[error("cannot encode a record: {0}")]
    Encode(String),
    /// An earlier append failed; the log takes no more appends until it is re-opened.
    #[error("an earlier append failed; re-open the log")]
    Failed,
}

impl From<io::Error> for LogError {
    fn from(error: io::Error) -> Self {
        LogError::Io(Arc::new(error))
    }
}

/// When a [`FileLog`] fsyncs on its own (an explicit [`sync`](DurableLog::sync) always does).
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
    /// Never on its own; only on an explicit `sync` (an agent syncs when it ends).
    Never,
}

/// The embedded default log: a JSON-lines file, one `{seq, type, data}` record per line.
///
/// [`open`](FileLog::open) creates the file if needed, reads it, rejects it if a line before the
/// end is corrupt (the file is left untouched), and cuts off a torn final line (S50). Only one
/// `FileLog` may write a file at a time.
#[derive(Debug)]
pub struct FileLog {
    path: PathBuf,
    file: tokio::fs::File,
    policy: SyncPolicy,
    next_seq: u64,
    /// What `open` read, handed out by the first `read_back`.
    opened: Option<ReadBack>,
    failed: bool,
    buffer: Vec<u8>,
}

impl FileLog {
    /// Opens (or creates) the log at `path` with the default [`SyncPolicy`].
    pub async fn open(path: impl AsRef<Path>) -> Result<FileLog, LogError> {
        FileLog::open_with(path, SyncPolicy::default()).await
    }

    /// Opens (or creates) the log at `path`, syncing as `policy` says.
    pub async fn open_with(
        path: impl AsRef<Path>,
        policy: SyncPolicy,
    ) -> Result<FileLog, LogError> {
        let path = path.as_ref().to_owned();
        let existed = tokio::fs::try_exists(&path).await?;
        let mut file = tokio::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .await?;
        if !existed {
            sync_parent_dir(&path).await?;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).await?;
        let (read, next_seq) = read_and_cut(&mut file, &bytes).await?;
        Ok(FileLog {
            path,
            file,
            policy,
            next_seq,
            opened: Some(read),
            failed: false,
            buffer: Vec::new(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn write_batch(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        self.buffer.clear();
        for (offset, entry) in batch.iter().enumerate() {
            encode(self.next_seq + offset as u64, entry, &mut self.buffer)
                .map_err(|error| LogError::Encode(error.to_string()))?;
        }
        self.file.write_all(&self.buffer).await?;
        self.file.flush().await?;
        let ends_turn = batch
            .iter()
            .any(|entry| matches!(entry, Entry::Machine(Event::TurnEnd { .. })));
        match self.policy {
            SyncPolicy::EveryAppend => self.file.sync_data().await?,
            SyncPolicy::PerTurn if ends_turn => self.file.sync_data().await?,
            SyncPolicy::PerTurn | SyncPolicy::Never => {}
        }
        let first = self.next_seq;
        self.next_seq += batch.len() as u64;
        Ok(first)
    }
}

impl DurableLog for FileLog {
    async fn read_back(&mut self) -> Result<ReadBack, LogError> {
        if let Some(read) = self.opened.take() {
            return Ok(read);
        }
        self.file.flush().await?;
        let bytes = tokio::fs::read(&self.path).await?;
        let (read, next_seq) = read_and_cut(&mut self.file, &bytes).await?;
        self.next_seq = next_seq;
        Ok(read)
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        if self.failed {
            return Err(LogError::Failed);
        }
        if batch.is_empty() {
            return Ok(self.next_seq);
        }
        let written = self.write_batch(batch).await;
        self.failed = written.is_err();
        written
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.file.flush().await?;
        self.file.sync_data().await?;
        Ok(())
    }
}

/// Parses a log file's bytes and cuts a torn tail off the file.
async fn read_and_cut(
    file: &mut tokio::fs::File,
    bytes: &[u8],
) -> Result<(ReadBack, u64), LogError> {
    let parsed = parse(bytes)?;
    if parsed.torn.is_some() {
        file.set_len(parsed.complete_len as u64).await?;
        file.sync_all().await?;
    }
    Ok((
        ReadBack {
            records: parsed.records,
            torn: parsed.torn,
        },
        parsed.next_seq,
    ))
}

/// A new file's directory entry must be durable too.
async fn sync_parent_dir(path: &Path) -> Result<(), LogError> {
    let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    let parent = parent.to_owned();
    let synced = tokio::task::spawn_blocking(move || std::fs::File::open(parent)?.sync_all())
        .await
        .map_err(|error| io::Error::other(error.to_string()))?;
    Ok(synced?)
}

/// A log held in memory, as the same JSON-lines bytes a [`FileLog`] writes. Clones share the
/// bytes, so a test can keep one to look at (or cut, to simulate a crash) what an agent wrote.
#[derive(Clone, Debug, Default)]
pub struct MemoryLog {
    inner: Arc<Mutex<MemoryInner>>,
}

#[derive(Debug, Default)]
struct MemoryInner {
    bytes: Vec<u8>,
    /// Known once the bytes were parsed (a log made from bytes is parsed lazily).
    next_seq: Option<u64>,
}

impl MemoryLog {
    /// An empty log.
    pub fn new() -> Self {
        MemoryLog::default()
    }

    /// A log holding `bytes` (say, a crash image: a log cut anywhere).
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        MemoryLog {
            inner: Arc::new(Mutex::new(MemoryInner {
                bytes,
                next_seq: None,
            })),
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

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoryInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MemoryInner {
    fn read_and_cut(&mut self) -> Result<ReadBack, LogError> {
        let parsed = parse(&self.bytes)?;
        self.bytes.truncate(parsed.complete_len);
        self.next_seq = Some(parsed.next_seq);
        Ok(ReadBack {
            records: parsed.records,
            torn: parsed.torn,
        })
    }
}

impl DurableLog for MemoryLog {
    async fn read_back(&mut self) -> Result<ReadBack, LogError> {
        self.lock().read_and_cut()
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        let mut inner = self.lock();
        let first = match inner.next_seq {
            Some(seq) => seq,
            None => {
                inner.read_and_cut()?;
                inner.next_seq.unwrap_or(1)
            }
        };
        let mut lines = Vec::new();
        for (offset, entry) in batch.iter().enumerate() {
            encode(first + offset as u64, entry, &mut lines)
                .map_err(|error| LogError::Encode(error.to_string()))?;
        }
        inner.bytes.extend_from_slice(&lines);
        inner.next_seq = Some(first + batch.len() as u64);
        Ok(first)
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::TurnEndReason;
    use coxswain_log::HostEvent;
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

    #[tokio::test]
    async fn file_log_appends_with_contiguous_seq_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut log = FileLog::open(&path).await.unwrap();
        assert_eq!(log.read_back().await.unwrap(), ReadBack::default());
        assert_eq!(log.append(&batch()).await.unwrap(), 1);
        assert_eq!(log.append(&batch()[..1]).await.unwrap(), 4);
        let read = log.read_back().await.unwrap();
        let seqs: Vec<_> = read.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![Some(1), Some(2), Some(3), Some(4)]);
        drop(log);
        let mut log = FileLog::open(&path).await.unwrap();
        assert_eq!(log.read_back().await.unwrap().records.len(), 4);
        assert_eq!(log.append(&batch()).await.unwrap(), 5);
    }

    #[tokio::test]
    async fn s50_file_log_cuts_a_torn_tail_and_appends_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.jsonl");
        let mut log = FileLog::open(&path).await.unwrap();
        log.append(&batch()).await.unwrap();
        drop(log);
        let bytes = std::fs::read(&path).unwrap();
        let cut = bytes.len() - 7;
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let mut log = FileLog::open_with(&path, SyncPolicy::Never).await.unwrap();
        let read = log.read_back().await.unwrap();
        assert_eq!(read.records.len(), 2);
        let torn = read.torn.unwrap();
        assert_eq!(torn.line, 3);
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
        let error = FileLog::open(&path).await.unwrap_err();
        assert!(
            matches!(&error, LogError::Corrupt(CorruptLine { line: 2, .. })),
            "{error}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), content);
    }

    #[tokio::test]
    async fn memory_log_reads_like_a_file() {
        let mut log = MemoryLog::new();
        let view = log.clone();
        log.append(&batch()).await.unwrap();
        let mut bytes = view.bytes();
        bytes.truncate(bytes.len() - 3);
        let mut crashed = MemoryLog::from_bytes(bytes);
        let read = crashed.read_back().await.unwrap();
        assert_eq!(read.records.len(), 2);
        assert_eq!(read.torn.map(|t| t.line), Some(3));
        assert_eq!(crashed.append(&batch()[2..]).await.unwrap(), 3);
        assert_eq!(crashed.records().unwrap().len(), 3);
    }
}
