//! A fault-injecting in-memory [`DurableLog`]: the same JSON-lines bytes a `FileLog` writes,
//! with a page cache (written) and a platter (synced), and faults rolled from the seed: EIO and
//! ENOSPC on write and on sync, short writes that are cut back, torn writes whose cut-back fails
//! (an indeterminate append), latency spikes, and a crash at any of the append's await points
//! that keeps what was synced and a random prefix of what was not.

use std::io;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use coxswain_log::{encode, Entry, Record};
use coxswain_tokio::{DurableLog, LogBytes, LogError, ReadBack};
use tokio::sync::Notify;

use crate::faults::Tally;
use crate::rng::{Rng, SharedRng};

/// How often each log fault is rolled, per mille of appends (syncs for `sync_final`).
#[derive(Clone, Copy, Debug)]
pub struct LogFaults {
    /// A write fails with EIO before writing anything.
    pub write_eio: u64,
    /// A write fails with ENOSPC before writing anything.
    pub write_enospc: u64,
    /// A write stops part-way and fails; the cut-back succeeds.
    pub short_write: u64,
    /// A write stops part-way and fails; the cut-back fails too (indeterminate).
    pub torn_write: u64,
    /// The append's sync fails.
    pub sync_append: u64,
    /// A bare sync (the final one) fails.
    pub sync_final: u64,
    /// A latency spike of up to 2 s before the write.
    pub latency: u64,
    /// A crash at one of the append's three await points (before the write, between write and
    /// sync, after the sync).
    pub crash: u64,
    /// A deliberately broken log, to show the checker bites ([`Sabotage::None`] in earnest).
    pub sabotage: Sabotage,
}

/// A deliberate bug in the log, for the tests that show the checker catches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// An honest log.
    None,
    /// `append` returns `Ok` without syncing: acknowledged before durable.
    AckUnsynced,
    /// A write that fails with EIO keeps the batch anyway: reported failed, yet in the log.
    KeepFailedWrite,
}

impl LogFaults {
    /// The rates the CI seeds run with.
    pub const DEFAULT: LogFaults = LogFaults {
        write_eio: 3,
        write_enospc: 2,
        short_write: 3,
        torn_write: 3,
        sync_append: 3,
        sync_final: 50,
        latency: 40,
        crash: 9,
        sabotage: Sabotage::None,
    };
}

/// The simulated disk of one session: survives the crashes that end the runtimes.
#[derive(Debug, Default)]
struct State {
    /// What was written (the page cache), read back and repaired as a `MemoryLog` is.
    log: LogBytes,
    /// How much of it is on the platter.
    synced: usize,
    /// A write failed and its cut-back too (indeterminate): no more appends until re-opened.
    /// A failed write that was cut back leaves the log taking appends, as a `FileLog` does.
    failed: bool,
    /// The machine crashed: every IO from now on hangs (the runtime is about to be dropped).
    crashed: bool,
    /// Faults are rolled (off while an agent opens: the sim tests the driver, not recovery's
    /// own retries).
    armed: bool,
    /// The log's length each time an append returned (this life): the states a driver's
    /// machine can be in between its appends, which a `fate` answer must match (S58).
    marks: Vec<usize>,
    /// An append was indeterminate this life: the driver's machine may hold what the log lost.
    indeterminate: bool,
}

/// The disk, shared by the runner (which crashes it and reads it) and the [`SimLog`]s opened
/// on it.
#[derive(Clone, Debug)]
pub struct Disk {
    state: Arc<Mutex<State>>,
    crash: Arc<Notify>,
    rng: SharedRng,
    rates: LogFaults,
    tally: Tally,
}

impl Disk {
    /// An empty disk rolling faults from `rng` at `rates`.
    pub fn new(rng: Rng, rates: LogFaults, tally: Tally) -> Self {
        Disk {
            state: Arc::default(),
            crash: Arc::new(Notify::new()),
            rng: SharedRng::new(rng),
            rates,
            tally,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A log on this disk (one writer at a time: the runner opens one per life).
    pub fn log(&self) -> SimLog {
        SimLog { disk: self.clone() }
    }

    /// Rolls faults from now on, or not.
    pub fn arm(&self, armed: bool) {
        self.lock().armed = armed;
    }

    /// Resolves once the log crashed the machine.
    pub async fn crashed(&self) {
        self.crash.notified().await;
    }

    /// The machine crashes now: IO hangs from here on (nothing more reaches the disk).
    pub fn crash_now(&self) {
        self.lock().crashed = true;
        self.crash.notify_one();
    }

    /// What survives a power cut: the synced bytes and a random prefix of the rest (possibly
    /// a torn line). The disk then holds exactly that, all of it synced, ready to be opened.
    pub fn power_cut(&self) {
        let mut state = self.lock();
        let unsynced = state.log.as_bytes().len() - state.synced;
        let kept = self.rng.with(|rng| rng.below(unsynced as u64 + 1)) as usize;
        let keep = state.synced + kept;
        state.log.bytes_mut().truncate(keep);
        state.synced = keep;
        state.log.reopen();
        state.failed = false;
        state.crashed = false;
        state.armed = false;
        state.marks.clear();
        state.indeterminate = false;
    }

    /// The log's length now, and how many appends have returned this life.
    pub fn position(&self) -> (usize, usize) {
        let state = self.lock();
        (state.log.as_bytes().len(), state.marks.len())
    }

    /// The log's lengths when the appends after the first `from` returned, and whether an
    /// append was indeterminate this life.
    pub fn marks_since(&self, from: usize) -> (Vec<usize>, bool) {
        let state = self.lock();
        let marks = state.marks.get(from..).unwrap_or_default().to_vec();
        (marks, state.indeterminate)
    }

    /// A copy of the bytes (what a re-open reads).
    pub fn bytes(&self) -> Vec<u8> {
        self.lock().log.as_bytes().to_vec()
    }

    fn roll(&self, per_mille: u64) -> bool {
        per_mille > 0 && self.rng.with(|rng| rng.chance(per_mille))
    }

    /// A crash at this await point, if rolled: never returns then.
    async fn maybe_crash(&self) {
        if self.lock().armed && self.roll(self.rates.crash / 3) {
            self.tally.note("crash-in-log");
            self.crash_now();
        }
        if self.lock().crashed {
            std::future::pending::<()>().await;
        }
    }
}

/// The [`DurableLog`] of a [`Disk`].
#[derive(Debug)]
pub struct SimLog {
    disk: Disk,
}

fn eio(what: &str) -> Arc<io::Error> {
    Arc::new(io::Error::other(format!("{what}: EIO (injected)")))
}

fn enospc() -> Arc<io::Error> {
    Arc::new(io::Error::new(
        io::ErrorKind::StorageFull,
        "write: ENOSPC (injected)",
    ))
}

impl State {
    /// Repairs the tail as a re-open does (S50); what the repair leaves is on the platter.
    fn repair(&mut self) -> Result<u64, LogError> {
        let next = self.log.repair()?;
        self.synced = self.log.as_bytes().len();
        Ok(next)
    }
}

impl SimLog {
    /// Notes where the log stands once an append returned.
    fn mark(&self, result: &Result<u64, LogError>) {
        let mut state = self.disk.lock();
        let len = state.log.as_bytes().len();
        state.marks.push(len);
        if matches!(result, Err(LogError::Indeterminate { .. })) {
            state.indeterminate = true;
        }
    }

    async fn write(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        let disk = &self.disk;
        let rates = disk.rates;
        if disk.lock().crashed {
            std::future::pending::<()>().await;
        }
        let (first, lines) = {
            let mut state = disk.lock();
            if state.failed {
                return Err(LogError::Failed);
            }
            let first = state.repair()?;
            first
                .checked_add(batch.len() as u64)
                .ok_or(LogError::SeqExhausted)?;
            let mut lines = Vec::new();
            for (seq, entry) in (first..).zip(batch) {
                encode(seq, entry, &mut lines)?;
            }
            (first, lines)
        };
        let armed = disk.lock().armed;
        if armed && disk.roll(rates.latency) {
            disk.tally.note("log-latency");
            let ms = disk.rng.with(|rng| rng.range(1, 2_000));
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        disk.maybe_crash().await;
        let armed = disk.lock().armed;
        if armed {
            if disk.roll(rates.write_eio) {
                disk.tally.note("write-eio");
                let mut state = disk.lock();
                if rates.sabotage == Sabotage::KeepFailedWrite {
                    state.log.bytes_mut().extend_from_slice(&lines);
                }
                return Err(LogError::Io(eio("write")));
            }
            if disk.roll(rates.write_enospc) {
                disk.tally.note("write-enospc");
                return Err(LogError::Io(enospc()));
            }
            if disk.roll(rates.short_write) {
                // Part of the batch reaches the page cache, then the write fails; the cut-back
                // succeeds and is synced: the batch is not in the log.
                disk.tally.note("short-write");
                let mut state = disk.lock();
                let before = state.log.as_bytes().len();
                let part = disk.rng.with(|rng| rng.below(lines.len() as u64)) as usize;
                state.log.bytes_mut().extend_from_slice(&lines[..part]);
                state.log.bytes_mut().truncate(before);
                state.synced = state.synced.min(before);
                return Err(LogError::Io(eio("short write")));
            }
            if disk.roll(rates.torn_write) {
                // Part of the batch stays written (maybe a torn line): indeterminate.
                disk.tally.note("torn-write");
                let mut state = disk.lock();
                state.failed = true;
                let part = disk.rng.with(|rng| rng.range(1, lines.len() as u64)) as usize;
                state.log.bytes_mut().extend_from_slice(&lines[..part]);
                return Err(LogError::Indeterminate {
                    error: eio("torn write"),
                    undo: eio("truncate"),
                });
            }
        }
        let before = {
            let mut state = disk.lock();
            let before = state.log.as_bytes().len();
            state.log.bytes_mut().extend_from_slice(&lines);
            before
        };
        disk.maybe_crash().await;
        if armed && disk.roll(rates.sync_append) {
            disk.tally.note("sync-eio-append");
            let mut state = disk.lock();
            // Either the cut-back works (not in the log) or it fails too (indeterminate).
            if disk.rng.with(|rng| rng.chance(500)) {
                state.log.bytes_mut().truncate(before);
                return Err(LogError::Io(eio("fdatasync")));
            }
            state.failed = true;
            return Err(LogError::Indeterminate {
                error: eio("fdatasync"),
                undo: eio("truncate"),
            });
        }
        {
            let mut state = disk.lock();
            if rates.sabotage != Sabotage::AckUnsynced {
                state.synced = state.log.as_bytes().len();
            }
            state.log.appended(first + batch.len() as u64);
        }
        disk.maybe_crash().await;
        Ok(first)
    }
}

impl DurableLog for SimLog {
    async fn read_back(
        &mut self,
        visit: &mut (dyn FnMut(Record) -> ControlFlow<()> + Send),
    ) -> Result<ReadBack, LogError> {
        let mut state = self.disk.lock();
        state.log.reopen();
        state.log.read(visit)
    }

    async fn repair_tail(&mut self) -> Result<(), LogError> {
        self.disk.lock().repair().map(drop)
    }

    async fn append(&mut self, batch: &[Entry]) -> Result<u64, LogError> {
        let result = self.write(batch).await;
        self.mark(&result);
        result
    }

    async fn sync(&mut self) -> Result<(), LogError> {
        let disk = &self.disk;
        if disk.lock().crashed {
            std::future::pending::<()>().await;
        }
        let armed = disk.lock().armed;
        if armed && disk.roll(disk.rates.sync_final) {
            disk.tally.note("sync-eio-final");
            return Err(LogError::Io(eio("fsync")));
        }
        let mut state = disk.lock();
        state.synced = state.log.as_bytes().len();
        Ok(())
    }
}
