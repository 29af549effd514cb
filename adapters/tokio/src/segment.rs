//! One shared segment log per process: the records of many sessions in one append-only
//! JSON-lines file, one sync for many sessions (group commit across sessions).
//!
//! Each line is the ordinary record plus its session:
//! `{"seq":…,"session":"…","type":…,"data":…}`, `seq` per session and contiguous within it
//! ([`coxswain_log::SegmentReader`]).
//!
//! * [`SegmentLog::open`] creates the file if needed, takes an exclusive `flock` on it for the
//!   life of the segment log (a second opener, here or in another process, gets
//!   [`LogError::Locked`]), syncs its directory, and reads the whole file once to build an
//!   index: every session's records (their byte offsets) and next `seq`. A corrupt line
//!   rejects the open; a torn final line is left in place (the file is not changed) until a
//!   session's [`repair_tail`](DurableLog::repair_tail) or the first append cuts it.
//! * [`SegmentLog::session`] hands out a [`SessionLog`], a [`DurableLog`] reading back exactly
//!   its session's records through the index. A session is open at most once at a time
//!   ([`LogError::SessionOpen`]).
//! * One committer thread owns the writes: it takes every batch waiting from every session,
//!   checks that the file still has the length and the last bytes it left it with, writes the
//!   batches as one `write`, makes them durable with one `fdatasync`, checks that the path still
//!   names the file and that the file ends in what it wrote, and only then answers each batch.
//!   If the write or the sync fails, the file is cut back to its last durable length (the cut
//!   synced, and never extending the file) and **every** batch of that commit fails
//!   ([`LogError::Io`]; each session takes appends again, as a [`FileLog`](crate::FileLog)
//!   after a failed append that was cut back); if the cut-back fails too (or the file is
//!   shorter than the durable length), every batch of the commit is
//!   [`LogError::Indeterminate`] and the writer stops ([`LogError::WriterStopped`] from then
//!   on). A file removed, renamed or replaced ([`LogError::Replaced`]), cut in place
//!   ([`LogError::Truncated`]) or written by another writer ([`LogError::Tampered`]) fails the
//!   commit's batches and stops the writer too (what [`FileLog`](crate::FileLog) says is and is
//!   not detected holds here).
//!
//! Every commit syncs (the [`SyncPolicy::EveryAppend`](crate::SyncPolicy::EveryAppend)
//! contract): nothing is acknowledged that a power loss can take back.
//!
//! Once opened, every operation on the file goes through a [`LogFile`]: the plain [`File`]
//! unless the segment log was opened with [`SegmentLog::open_wrapped`].

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use coxswain_log::{
    encode_in_session, CorruptLine, Entry, LineBuffer, Problem, Reader, Record, SegmentReader,
    SegmentTail, SESSION_KEY,
};
use tokio::sync::oneshot;

use crate::log::{blocking, seqs};
use crate::{DurableLog, LogError, ReadBack};
use coxswain_file_log::file::{
    check_end, check_identity, cut_back, identity, open_locked, read_exact_at, End, LogFile,
};
use coxswain_file_log::{repair_tail, TailFix};

/// How much of the file a read at open takes at a time.
const READ_CHUNK: usize = 1 << 20;

/// The most batches one commit takes (the rest wait for the next).
const MAX_COMMIT: usize = 4096;

/// Lines a session's read back reads per blocking task.
const READ_LINES: usize = 1024;

/// The buffer the committer keeps between commits; a larger one's is given back.
const KEPT_BUFFER: usize = 1 << 20;

/// A shared segment log: one file, one writer, many sessions. Clones share it; the file is
/// unlocked once the last clone and the last [`SessionLog`] are dropped. Its file operations go
/// through `F` (see [`LogFile`]).
#[derive(Debug)]
pub struct SegmentLog<F = File> {
    shared: Arc<Shared<F>>,
}

impl<F> Clone for SegmentLog<F> {
    fn clone(&self) -> Self {
        SegmentLog {
            shared: Arc::clone(&self.shared),
        }
    }
}

#[derive(Debug)]
struct Shared<F> {
    path: PathBuf,
    file: Arc<F>,
    id: (u64, u64),
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    committer: Mutex<Option<JoinHandle<()>>>,
    index: Arc<Mutex<Index>>,
}

#[derive(Debug, Default)]
struct Index {
    sessions: HashMap<String, SessionIndex>,
    open: HashSet<String>,
}

#[derive(Debug)]
struct SessionIndex {
    lines: Vec<Line>,
    next_seq: u64,
}

/// Where one record of a session is in the file.
#[derive(Clone, Copy, Debug)]
struct Line {
    offset: u64,
    /// Its bytes without the `\n`.
    len: u64,
    /// Its 1-based line number in the file.
    number: usize,
}

type Reply = oneshot::Sender<Result<(), LogError>>;

enum Job {
    Append {
        session: String,
        bytes: Vec<u8>,
        /// Each record's line length without its `\n`.
        lens: Vec<u64>,
        next_seq: u64,
        reply: Reply,
    },
    Repair(Reply),
    Sync(Reply),
}

impl Job {
    fn answer(self, result: Result<(), LogError>) {
        let reply = match self {
            Job::Append { reply, .. } | Job::Repair(reply) | Job::Sync(reply) => reply,
        };
        // The session may have stopped waiting; nothing to do then.
        let _ = reply.send(result);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SegmentLog {
    /// Opens (or creates) the segment log at `path` and indexes it. Fails with
    /// [`LogError::Locked`] while another writer holds the file, and with
    /// [`LogError::Corrupt`] (changing nothing) when a line before the end is not a record of
    /// a session.
    pub async fn open(path: impl AsRef<Path>) -> Result<SegmentLog, LogError> {
        SegmentLog::open_wrapped(path, std::convert::identity).await
    }
}

impl<F: LogFile> SegmentLog<F> {
    /// Opens (or creates) the segment log at `path` as [`open`](SegmentLog::open) does, but
    /// hands the opened, locked file to `wrap` first: every operation on it from then on (the
    /// read that indexes it included) goes through the [`LogFile`] `wrap` returns.
    pub async fn open_wrapped(
        path: impl AsRef<Path>,
        wrap: impl FnOnce(File) -> F + Send + 'static,
    ) -> Result<SegmentLog<F>, LogError> {
        let path = std::path::absolute(path.as_ref())?;
        let (committer, index) = blocking(move || Committer::open(path, wrap)).await??;
        let index = Arc::new(Mutex::new(index));
        let (tx, rx) = mpsc::channel();
        let shared = Shared {
            path: committer.path.clone(),
            file: Arc::clone(&committer.file),
            id: committer.id,
            jobs: Mutex::new(Some(tx)),
            committer: Mutex::new(None),
            index: Arc::clone(&index),
        };
        let mut committer = committer;
        committer.index = index;
        let handle = std::thread::Builder::new()
            .name("coxswain-segment".into())
            .spawn(move || committer.run(&rx))?;
        *lock(&shared.committer) = Some(handle);
        Ok(SegmentLog {
            shared: Arc::new(shared),
        })
    }

    /// The log of session `id`: its records read back from this file, its appends committed
    /// with every other session's. [`LogError::SessionOpen`] while `id` is open already.
    pub fn session(&self, id: impl Into<String>) -> Result<SessionLog<F>, LogError> {
        let session = id.into();
        let mut index = lock(&self.shared.index);
        if !index.open.insert(session.clone()) {
            return Err(LogError::SessionOpen { session });
        }
        let next_seq = index.sessions.get(&session).map_or(1, |s| s.next_seq);
        drop(index);
        Ok(SessionLog {
            shared: Arc::clone(&self.shared),
            session,
            next_seq,
            ready: false,
            failed: false,
        })
    }

    /// The sessions the file holds records of, sorted.
    pub fn sessions(&self) -> Vec<String> {
        let mut sessions: Vec<String> = lock(&self.shared.index).sessions.keys().cloned().collect();
        sessions.sort();
        sessions
    }

    /// The file's path (made absolute when opened).
    pub fn path(&self) -> &Path {
        &self.shared.path
    }
}

impl<F: LogFile> Shared<F> {
    async fn submit(&self, job: impl FnOnce(Reply) -> Job) -> Result<(), LogError> {
        let (reply, answer) = oneshot::channel();
        let sent = match lock(&self.jobs).as_ref() {
            Some(jobs) => jobs.send(job(reply)).is_ok(),
            None => false,
        };
        if !sent {
            return Err(LogError::WriterStopped);
        }
        answer.await.map_err(|_| LogError::WriterStopped)?
    }

    fn check_identity(&self) -> Result<(), LogError> {
        check_identity(&*self.file, &self.path, self.id)
    }
}

impl<F> Drop for Shared<F> {
    fn drop(&mut self) {
        // Closing the channel ends the committer; wait for it, so the lock is released when
        // the last handle is gone.
        drop(lock(&self.jobs).take());
        if let Some(handle) = lock(&self.committer).take() {
            let _ = handle.join();
        }
    }
}

/// One session's log in a [`SegmentLog`]: a [`DurableLog`] whose records are the lines of the
/// shared file that name this session. Dropping it frees the session for a next
/// [`SegmentLog::session`].
#[derive(Debug)]
pub struct SessionLog<F = File> {
    shared: Arc<Shared<F>>,
    session: String,
    next_seq: u64,
    ready: bool,
    failed: bool,
}

impl<F> SessionLog<F> {
    /// The session's id.
    pub fn session(&self) -> &str {
        &self.session
    }
}

impl<F> Drop for SessionLog<F> {
    fn drop(&mut self) {
        lock(&self.shared.index).open.remove(&self.session);
    }
}

impl<F: LogFile> DurableLog for SessionLog<F> {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        self.shared.check_identity()?;
        let lines = lock(&self.shared.index)
            .sessions
            .get(&self.session)
            .map(|s| s.lines.clone())
            .unwrap_or_default();
        let mut reader = Reader::new();
        for chunk in lines.chunks(READ_LINES) {
            let chunk = chunk.to_vec();
            let file = Arc::clone(&self.shared.file);
            let read = blocking(move || read_lines(&*file, &chunk)).await??;
            for (line, bytes) in read {
                let corrupt = |problem| CorruptLine {
                    line: line.number,
                    problem,
                };
                let mut record = reader
                    .line(&bytes)
                    .map_err(|error| corrupt(error.problem))?;
                record.line = line.number;
                match record.event.as_object_mut().map(|o| o.remove(SESSION_KEY)) {
                    Some(Some(serde_json::Value::String(s))) if s == self.session => {}
                    _ => return Err(corrupt(Problem::NoSession).into()),
                }
                if visit(record).is_break() {
                    return Ok(ReadBack::new(reader.records(), None));
                }
            }
            tokio::task::yield_now().await;
        }
        if reader.records() > 0 {
            self.next_seq = reader.next_seq();
        }
        Ok(ReadBack::new(reader.records(), None))
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        if !self.ready {
            self.shared.submit(Job::Repair).await?;
            self.ready = true;
        }
        Ok(())
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        if self.failed {
            return Err(LogError::Failed);
        }
        if batch.is_empty() {
            return Ok(self.next_seq);
        }
        let first = self.next_seq;
        let next = first
            .checked_add(batch.len() as u64)
            .ok_or(LogError::SeqExhausted)?;
        let mut bytes = Vec::new();
        let mut lens = Vec::with_capacity(batch.len());
        for (seq, entry) in seqs(first, batch.len()).zip(batch) {
            let start = bytes.len();
            encode_in_session(&self.session, seq, entry, &mut bytes)?;
            lens.push((bytes.len() - start - 1) as u64);
        }
        let session = self.session.clone();
        // An append also cuts a torn tail first (the committer does it before any write).
        let result = self
            .shared
            .submit(|reply| Job::Append {
                session,
                bytes,
                lens,
                next_seq: next,
                reply,
            })
            .await;
        match result {
            Ok(()) => {
                self.ready = true;
                self.next_seq = next;
                Ok(first)
            }
            Err(error) => {
                // A session's batch that was cut back leaves it writable; one that may or may
                // not be in the file, or a committer that stopped, does not.
                self.failed = error.is_indeterminate() || matches!(error, LogError::WriterStopped);
                Err(error)
            }
        }
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        self.shared.submit(Job::Sync).await
    }
}

fn read_lines(file: &impl LogFile, lines: &[Line]) -> io::Result<Vec<(Line, Vec<u8>)>> {
    lines
        .iter()
        .map(|line| {
            let len = usize::try_from(line.len).map_err(io::Error::other)?;
            let mut bytes = vec![0; len];
            read_exact_at(file, &mut bytes, line.offset)?;
            Ok((*line, bytes))
        })
        .collect()
}

/// The writer: owns the file's length and tail, and commits every waiting batch at once.
struct Committer<F> {
    file: Arc<F>,
    path: PathBuf,
    id: (u64, u64),
    /// Where the committer left the file: everything up to here is acknowledged or was read at
    /// open (its last bytes known once the tail is repaired).
    end: End,
    /// The file's length when it was read at open.
    read_len: u64,
    /// Lines up to `end`.
    lines: usize,
    fix: TailFix,
    /// The tail was repaired (at the first commit): `end` is known.
    repaired: bool,
    /// A cut-back failed (or the file was replaced, truncated or written by another writer):
    /// nothing more is written.
    stopped: bool,
    index: Arc<Mutex<Index>>,
    buffer: Vec<u8>,
}

impl<F: LogFile> Committer<F> {
    fn open(
        path: PathBuf,
        wrap: impl FnOnce(File) -> F,
    ) -> Result<(Committer<F>, Index), LogError> {
        let (file, meta) = open_locked(&path)?;
        let file = wrap(file);
        let (index, len, read_len, lines, fix) =
            scan(&file).map_err(|error| error.in_file(&path))?;
        Ok((
            Committer {
                file: Arc::new(file),
                path,
                id: identity(&meta),
                end: End::unread(len),
                read_len,
                lines,
                fix,
                repaired: false,
                stopped: false,
                index: Arc::default(),
                buffer: Vec::new(),
            },
            index,
        ))
    }

    fn run(mut self, jobs: &mpsc::Receiver<Job>) {
        while let Ok(first) = jobs.recv() {
            let mut commit = vec![first];
            while commit.len() < MAX_COMMIT {
                match jobs.try_recv() {
                    Ok(job) => commit.push(job),
                    Err(_) => break,
                }
            }
            self.commit(commit);
        }
    }

    fn commit(&mut self, jobs: Vec<Job>) {
        if self.stopped {
            return answer_all(jobs, &LogError::WriterStopped);
        }
        if let Err(error) = self.repair_tail() {
            if stops(&error) {
                self.stopped = true;
            }
            return answer_all(jobs, &error);
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        let mut sync = false;
        for job in &jobs {
            match job {
                Job::Append { bytes, .. } => buffer.extend_from_slice(bytes),
                Job::Sync(_) => sync = true,
                Job::Repair(_) => {}
            }
        }
        let result = if buffer.is_empty() && !sync {
            Ok(self.end)
        } else {
            self.write_checked(&buffer)
        };
        self.buffer = buffer;
        self.buffer.clear();
        if self.buffer.capacity() > KEPT_BUFFER {
            self.buffer.shrink_to(KEPT_BUFFER);
        }
        match result {
            Ok(after) => {
                self.index_commit(&jobs);
                self.end = after;
                for job in jobs {
                    job.answer(Ok(()));
                }
            }
            Err(error) => {
                if stops(&error) {
                    self.stopped = true;
                }
                answer_all(jobs, &error);
            }
        }
    }

    /// Records where the committed lines are, and each session's next `seq`.
    fn index_commit(&mut self, jobs: &[Job]) {
        let mut index = lock(&self.index);
        let mut offset = self.end.len;
        for job in jobs {
            let Job::Append {
                session,
                lens,
                next_seq,
                ..
            } = job
            else {
                continue;
            };
            let entry = index
                .sessions
                .entry(session.clone())
                .or_insert_with(|| SessionIndex {
                    lines: Vec::new(),
                    next_seq: 1,
                });
            for &len in lens {
                self.lines += 1;
                entry.lines.push(Line {
                    offset,
                    len,
                    number: self.lines,
                });
                offset += len + 1;
            }
            entry.next_seq = *next_seq;
        }
    }

    /// At the first commit: checks the file is as it was read at open (the same file, the same
    /// length), repairs its tail, and learns its last bytes.
    fn repair_tail(&mut self) -> Result<(), LogError> {
        if self.repaired {
            return Ok(());
        }
        self.end = repair_tail(&*self.file, &self.path, self.id, self.read_len, self.fix)?;
        self.fix = TailFix::None;
        self.repaired = true;
        Ok(())
    }

    /// Checks the file still ends as the committer left it (nothing is written otherwise),
    /// writes and syncs `bytes`, checks the file is still the log's and ends in them; a failure
    /// after the write began is cut back ([`cut_back`]). The new end.
    fn write_checked(&self, bytes: &[u8]) -> Result<End, LogError> {
        check_end(&*self.file, &self.path, &self.end, None)?;
        let after = self.end.after(bytes);
        match self.write_and_sync(bytes, &after) {
            Ok(()) => Ok(after),
            Err(error) => Err(cut_back(&*self.file, &self.path, &self.end, error)),
        }
    }

    fn write_and_sync(&self, bytes: &[u8], after: &End) -> Result<(), LogError> {
        self.file.append(bytes)?;
        self.file.sync_data()?;
        check_end(&*self.file, &self.path, after, Some(self.id))
    }
}

/// A failure after which the committer writes nothing more: the file may be in an unknown
/// state, or is no longer (all) the log's.
fn stops(error: &LogError) -> bool {
    matches!(
        error,
        LogError::Indeterminate { .. }
            | LogError::Replaced { .. }
            | LogError::Truncated { .. }
            | LogError::Tampered { .. }
    )
}

fn answer_all(jobs: Vec<Job>, error: &LogError) {
    for job in jobs {
        job.answer(Err(error.clone()));
    }
}

/// Reads the whole file once: every session's lines and next `seq`, the length of what was read
/// as records, the length of what was read, the line count, and what its tail needs.
fn scan(file: &impl LogFile) -> Result<(Index, u64, u64, usize, TailFix), LogError> {
    let mut reader = SegmentReader::new();
    let mut index = Index::default();
    let mut note = |record: coxswain_log::SegmentRecord, terminated: bool| {
        let len = record.len - u64::from(terminated);
        index
            .sessions
            .entry(record.session)
            .or_insert_with(|| SessionIndex {
                lines: Vec::new(),
                next_seq: 1,
            })
            .lines
            .push(Line {
                offset: record.offset,
                len,
                number: record.record.line,
            });
    };
    let mut lines = LineBuffer::new();
    let mut offset = 0u64;
    let mut chunk = vec![0; READ_CHUNK];
    loop {
        let n = match file.read_at(&mut chunk, offset) {
            Ok(0) => break,
            Ok(n) => n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error.into()),
        };
        offset += n as u64;
        // The scan reads every line: it never breaks.
        let _: ControlFlow<()> = lines.feed(&chunk[..n], |line| {
            note(reader.line(line)?, true);
            Ok::<_, LogError>(ControlFlow::Continue(()))
        })?;
    }
    let fix = if lines.rest().is_empty() {
        TailFix::None
    } else {
        match reader.last(lines.rest()) {
            SegmentTail::Torn(_) => TailFix::Cut(reader.complete_len()),
            SegmentTail::Unterminated(record) => {
                note(record, false);
                TailFix::Terminate
            }
        }
    };
    for (session, next_seq) in reader.sessions() {
        if let Some(entry) = index.sessions.get_mut(session) {
            entry.next_seq = next_seq;
        }
    }
    Ok((index, reader.complete_len(), offset, reader.records(), fix))
}
