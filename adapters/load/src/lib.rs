//! # coxswain-load
//!
//! The load generator behind `coxswain load` and the durable-throughput bench (bench 8): agents on [`FileLog`]s (or sessions of one shared [`SegmentLog`]) on a disk the
//! user chooses, each fed by concurrent senders, and the fsync floor of that disk measured in
//! the same run.
//!
//! What a sender does is the run's [`Workload`]. The one there is, [`Workload::Replace`], makes
//! quiet deliveries that keep every list bounded: a sender's first message is an `inject` into
//! the next-step list, each later one `replace`s the sender's previous message in place. Every
//! call delivers one new message and writes one `agent/inbox/spliced` record, and no turn runs,
//! so what is timed is the durable path alone: the call, the core, the group's append and its
//! sync, the acknowledgement; and a list holds at most one message per sender, whatever the
//! run's length (injects alone would fill the list: `Options::max_pending`).
//!
//! A run lasts a [`Length`]: a number of messages per sender, or a duration. The floor is the
//! same bytes written and synced with no agent at all: one file, one `write` and one
//! `fdatasync` per group of `min(agents × senders, max_batch)` deliveries (the largest group
//! the load's concurrency allows), each delivery the run's average record size; it writes as
//! many groups as the run's deliveries fill (at least [`FLOOR_MIN_GROUPS`]), and stops early
//! once it has taken as long as the run.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coxswain_core::{Message, StepAnswer};

use coxswain_tokio::{
    Agent, AgentError, FileLog, Host, LogError, LogFile, OpenError, Options, SegmentLog,
    StepContext, SyncPolicy,
};

/// What every sender does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Workload {
    /// Quiet deliveries into the next-step list, each sender keeping one message pending: its
    /// first message is an `inject`, each later one `replace`s its previous message. One
    /// delivery and one `agent/inbox/spliced` record per call; no turn runs.
    #[default]
    Replace,
}

impl Workload {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Replace => "replace",
        }
    }
}

/// How long the senders go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// This many messages per sender.
    Messages(usize),
    /// Each sender starts deliveries until this long after the run began (a delivery under
    /// way then is finished and counted).
    Duration(Duration),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Load {
    /// The directory the logs go in (created if needed); `agent-N.jsonl` and `floor.bin` in it
    /// are replaced.
    pub dir: PathBuf,
    /// How many agents, each on its own log.
    pub agents: usize,
    /// Concurrent senders per agent, each sending one message after the other; at most
    /// [`Options::DEFAULT_MAX_PENDING`] (each keeps one message pending).
    pub senders: usize,
    /// How long every sender goes on.
    pub length: Length,
    /// What every sender does.
    pub workload: Workload,
    /// [`Options::max_batch`] (1: one append and one sync per input).
    pub max_batch: usize,
    /// The logs' sync policy (per-agent files only: a shared segment log syncs every commit).
    pub policy: SyncPolicy,
    /// One shared segment log (`segment.jsonl`, replaced) for every agent, each its own session,
    /// instead of a file per agent.
    pub shared: bool,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadReport {
    /// Acknowledged deliveries.
    pub deliveries: u64,
    /// From the first call to the last acknowledgement.
    pub elapsed: Duration,
    /// `deliveries / elapsed`.
    pub deliveries_per_s: f64,
    /// Median time from a call to its acknowledgement.
    pub p50: Duration,
    /// 99th percentile of the same.
    pub p99: Duration,
    /// Syncs the logs made during the run.
    pub syncs: u64,
    /// Bytes the logs hold.
    pub bytes: u64,
    /// The floor's group: deliveries per write and sync.
    pub floor_group: usize,
    /// Groups the floor wrote.
    pub floor_groups: usize,
    /// How long the floor took.
    pub floor_elapsed: Duration,
    /// Deliveries per second the raw file took in groups of `floor_group`.
    pub floor_per_s: f64,
}

/// How far a run is, for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    deliveries: AtomicU64,
    floor: AtomicBool,
}

impl Progress {
    /// Deliveries acknowledged so far.
    pub fn deliveries(&self) -> u64 {
        self.deliveries.load(Ordering::Relaxed)
    }

    /// Whether the senders are done and the floor is being measured.
    pub fn measuring_floor(&self) -> bool {
        self.floor.load(Ordering::Relaxed)
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Agents, senders, messages and the duration must each be at least 1 (a nonzero duration).
    #[error("agents, senders and messages must each be at least 1, and the duration above 0")]
    Empty,
    /// More senders per agent than a list holds (each keeps one message pending).
    #[error("{senders} senders per agent: at most {max} (each keeps one message pending)")]
    Senders {
        /// The senders asked for.
        senders: usize,
        /// [`Options::DEFAULT_MAX_PENDING`].
        max: usize,
    },
    /// A file or directory could not be made, read or written.
    #[error("{path}: {error}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
    /// A log could not be opened.
    #[error("opening a log: {0}")]
    Log(#[from] LogError),
    /// An agent could not be opened.
    #[error("opening an agent: {0}")]
    Open(#[from] OpenError),
    /// A delivery failed.
    #[error("a delivery failed: {0}")]
    Delivery(#[from] AgentError),
    /// A sender's previous message was no longer pending, so it could not be replaced.
    #[error("message `{0}` was no longer pending: nothing else may take it from the list")]
    NotPending(String),
    /// A sender task was lost.
    #[error("a sender task was lost: {0}")]
    Task(String),
}

/// The fewest groups the floor writes, however short the run.
pub const FLOOR_MIN_GROUPS: usize = 200;

/// A host that never runs a turn (quiet deliveries wake nothing); a step would complete at once.
struct Quiet;

impl Host for Quiet {
    async fn step(&self, _cx: StepContext) -> StepAnswer {
        StepAnswer::Completed
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |error| LoadError::Io {
        path: path.to_owned(),
        error,
    }
}

/// One sender of agent `a`: delivers until its length is reached; the latency of every
/// delivery.
async fn sender(
    agent: Agent,
    (a, s): (usize, usize),
    load: (Workload, Length, Instant),
    progress: Arc<Progress>,
) -> Result<Vec<Duration>, LoadError> {
    let (workload, length, start) = load;
    let mut latencies = Vec::new();
    let mut m = 0usize;
    loop {
        let more = match length {
            Length::Messages(messages) => m < messages,
            Length::Duration(duration) => start.elapsed() < duration,
        };
        if !more {
            return Ok(latencies);
        }
        let message = Message::user(format!("a{a}s{s}m{m}"), "load");
        let sent = Instant::now();
        match workload {
            Workload::Replace if m == 0 => agent.inject(message).await?,
            Workload::Replace => {
                let previous = format!("a{a}s{s}m{}", m - 1);
                if !agent.replace(previous.clone(), message).await? {
                    return Err(LoadError::NotPending(previous));
                }
            }
        }
        latencies.push(sent.elapsed());
        progress.deliveries.fetch_add(1, Ordering::Relaxed);
        m += 1;
    }
}

/// Runs `load`: opens the agents on fresh logs, lets every sender deliver (counting each
/// acknowledgement in `progress`), closes the agents, then measures the floor.
pub async fn run(load: &Load, progress: Arc<Progress>) -> Result<LoadReport, LoadError> {
    check(load)?;
    std::fs::create_dir_all(&load.dir).map_err(io_error(&load.dir))?;
    let syncs = SyncCount::default();
    let (agents, segment, paths) = open_agents(load, &syncs).await?;
    let before = syncs.get();
    let start = Instant::now();
    let latencies = send(load, &agents, start, &progress).await?;
    let elapsed = start.elapsed();
    let syncs = syncs.get() - before;
    for agent in &agents {
        agent.close().await?;
    }
    drop(agents);
    drop(segment);
    progress.floor.store(true, Ordering::Relaxed);
    let mut bytes = 0;
    for path in &paths {
        bytes += std::fs::metadata(path).map_err(io_error(path))?.len();
    }
    let run = Measured {
        latencies,
        elapsed,
        syncs,
        bytes,
    };
    report(load, run).await
}

/// Refuses a load with nothing to do, or more senders than a list holds.
fn check(load: &Load) -> Result<(), LoadError> {
    let empty = match load.length {
        Length::Messages(messages) => messages == 0,
        Length::Duration(duration) => duration.is_zero(),
    };
    if load.agents == 0 || load.senders == 0 || empty {
        return Err(LoadError::Empty);
    }
    if load.senders > Options::DEFAULT_MAX_PENDING {
        return Err(LoadError::Senders {
            senders: load.senders,
            max: Options::DEFAULT_MAX_PENDING,
        });
    }
    Ok(())
}

/// The agents of `load` on fresh logs whose syncs `syncs` counts; the shared segment log (if
/// the load shares one) and the paths of the logs.
async fn open_agents(
    load: &Load,
    syncs: &SyncCount,
) -> Result<(Vec<Agent>, Option<SegmentLog<Counted>>, Vec<PathBuf>), LoadError> {
    let mut agents = Vec::with_capacity(load.agents);
    let mut paths = Vec::with_capacity(load.agents);
    let segment = if load.shared {
        let path = load.dir.join("segment.jsonl");
        remove(&path)?;
        let segment = SegmentLog::open_wrapped(&path, syncs.wrapper()).await?;
        paths.push(path);
        Some(segment)
    } else {
        None
    };
    for i in 0..load.agents {
        let mut options = Options::named(format!("load-{i}"));
        options.max_batch = load.max_batch;
        options.channel_capacity = options.channel_capacity.max(load.senders);
        let agent = match &segment {
            Some(segment) => {
                let log = segment.session(format!("agent-{i}"))?;
                Agent::open_with(options, Quiet, log).await?.0
            }
            None => {
                let path = load.dir.join(format!("agent-{i}.jsonl"));
                remove(&path)?;
                let log = FileLog::open_wrapped(&path, load.policy, syncs.wrapper()).await?;
                paths.push(path);
                Agent::open_with(options, Quiet, log).await?.0
            }
        };
        agents.push(agent);
    }
    Ok((agents, segment, paths))
}

/// Runs every sender of every agent to the end of the load; the latency of every delivery.
/// The first failure is the run's (the other senders are stopped).
async fn send(
    load: &Load,
    agents: &[Agent],
    start: Instant,
    progress: &Arc<Progress>,
) -> Result<Vec<Duration>, LoadError> {
    let mut tasks = tokio::task::JoinSet::new();
    for (a, agent) in agents.iter().enumerate() {
        for s in 0..load.senders {
            let run = (load.workload, load.length, start);
            tasks.spawn(sender(agent.clone(), (a, s), run, Arc::clone(progress)));
        }
    }
    let mut latencies = Vec::new();
    let mut failed = None;
    while let Some(done) = tasks.join_next().await {
        match done.map_err(|error| LoadError::Task(error.to_string())) {
            Ok(Ok(done)) => latencies.extend(done),
            Ok(Err(error)) | Err(error) => {
                tasks.abort_all();
                failed.get_or_insert(error);
            }
        }
    }
    match failed {
        Some(error) => Err(error),
        None => Ok(latencies),
    }
}

/// What the senders' part of a run measured.
struct Measured {
    latencies: Vec<Duration>,
    elapsed: Duration,
    syncs: u64,
    bytes: u64,
}

/// Measures the floor of `load` beside what its senders measured, and reports both.
async fn report(load: &Load, run: Measured) -> Result<LoadReport, LoadError> {
    let Measured {
        mut latencies,
        elapsed,
        syncs,
        bytes,
    } = run;
    latencies.sort_unstable();
    let deliveries = latencies.len() as u64;
    let percentile = |p: f64| {
        let index = ((latencies.len() as f64 * p).ceil() as usize).saturating_sub(1);
        latencies.get(index).copied().unwrap_or_default()
    };
    let (p50, p99) = (percentile(0.50), percentile(0.99));
    let floor_group = load
        .agents
        .saturating_mul(load.senders)
        .min(load.max_batch)
        .max(1);
    let record = (bytes / deliveries.max(1)).max(1) as usize;
    let floor_path = load.dir.join("floor.bin");
    let groups = (deliveries as usize / floor_group).max(FLOOR_MIN_GROUPS);
    let (floor_groups, floor_elapsed) = {
        let path = floor_path.clone();
        tokio::task::spawn_blocking(move || floor(&path, record, floor_group, groups, elapsed))
            .await
            .map_err(|error| LoadError::Task(error.to_string()))?
            .map_err(io_error(&floor_path))?
    };
    Ok(LoadReport {
        deliveries,
        elapsed,
        deliveries_per_s: deliveries as f64 / elapsed.as_secs_f64(),
        p50,
        p99,
        syncs,
        bytes,
        floor_group,
        floor_groups,
        floor_elapsed,
        floor_per_s: (floor_groups * floor_group) as f64 / floor_elapsed.as_secs_f64(),
    })
}

/// The syncs of every log of a run (the report's `syncs`), counted by the logs' files.
#[derive(Clone, Debug, Default)]
struct SyncCount(Arc<AtomicU64>);

impl SyncCount {
    /// What wraps a log's opened file so that its syncs are counted here.
    fn wrapper(&self) -> impl FnOnce(File) -> Counted + Send + 'static {
        let syncs = self.clone();
        move |file| Counted { file, syncs }
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A log's file that counts the syncs the log attempts and otherwise is the plain file.
#[derive(Debug)]
struct Counted {
    file: File,
    syncs: SyncCount,
}

impl LogFile for Counted {
    #[inline]
    fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
        self.file.append(bytes)
    }

    #[inline]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        LogFile::read_at(&self.file, buf, offset)
    }

    #[inline]
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.file.set_len(len)
    }

    #[inline]
    fn sync_data(&self) -> std::io::Result<()> {
        self.syncs.0.fetch_add(1, Ordering::Relaxed);
        self.file.sync_data()
    }

    #[inline]
    fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        self.file.metadata()
    }
}

/// Removes a log left by an earlier run.
fn remove(path: &Path) -> Result<(), LoadError> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io_error(path)(error)),
        _ => Ok(()),
    }
}

/// The fsync floor: up to `groups` times, one `write` of `group` records of `record` bytes to a
/// fresh file at `path`, then one `fdatasync`, stopping early once `budget` has passed and at
/// least [`FLOOR_MIN_GROUPS`] groups were written. The groups written and the time they took.
/// Removes the file afterwards.
pub fn floor(
    path: &Path,
    record: usize,
    group: usize,
    groups: usize,
    budget: Duration,
) -> std::io::Result<(usize, Duration)> {
    let mut line = vec![b'x'; record.max(1)];
    if let Some(last) = line.last_mut() {
        *last = b'\n';
    }
    let chunk = line.repeat(group.max(1));
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let start = Instant::now();
    let mut written = 0;
    while written < groups.max(1) {
        file.write_all(&chunk)?;
        file.sync_data()?;
        written += 1;
        if written >= FLOOR_MIN_GROUPS && start.elapsed() >= budget {
            break;
        }
    }
    let elapsed = start.elapsed();
    drop(file);
    std::fs::remove_file(path)?;
    Ok((written, elapsed))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn load(dir: &Path, senders: usize, length: Length) -> Load {
        Load {
            dir: dir.to_owned(),
            agents: 1,
            senders,
            length,
            workload: Workload::Replace,
            max_batch: Options::DEFAULT_MAX_BATCH,
            policy: SyncPolicy::Never,
            shared: false,
        }
    }

    #[tokio::test]
    async fn empty_lengths_and_too_many_senders_are_refused_before_anything_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("never");
        for (senders, length) in [
            (0, Length::Messages(1)),
            (1, Length::Messages(0)),
            (1, Length::Duration(Duration::ZERO)),
        ] {
            let error = run(&load(&made, senders, length), Arc::default()).await;
            assert!(matches!(error, Err(LoadError::Empty)), "{error:?}");
        }
        let error = run(&load(&made, 10_001, Length::Messages(1)), Arc::default()).await;
        assert!(matches!(
            error,
            Err(LoadError::Senders {
                senders: 10_001,
                max: 10_000
            })
        ));
        assert!(!made.exists());
    }

    /// The report counts the syncs of the senders' deliveries alone (not the opens' nor the
    /// closes'): one per delivery with one sender per agent, `max_batch` 1 and a sync every
    /// append, on two agents' files and on a segment log with one session (two sessions could
    /// share a commit).
    #[tokio::test]
    async fn the_report_counts_one_sync_per_unbatched_delivery() {
        for (agents, shared) in [(2, false), (1, true)] {
            let dir = tempfile::tempdir().unwrap();
            let mut load = load(dir.path(), 1, Length::Messages(3));
            load.agents = agents;
            load.max_batch = 1;
            load.policy = SyncPolicy::EveryAppend;
            load.shared = shared;
            let report = run(&load, Arc::default()).await.unwrap();
            let expected = 3 * agents as u64;
            assert_eq!(
                (report.deliveries, report.syncs),
                (expected, expected),
                "shared: {shared}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_load_past_max_pending_keeps_one_message_per_sender_pending() {
        let dir = tempfile::tempdir().unwrap();
        // 2 × 6,000 deliveries to one agent: injects alone would stop at 10,000.
        let report = run(
            &load(dir.path(), 2, Length::Messages(6_000)),
            Arc::default(),
        )
        .await
        .unwrap();
        assert_eq!(report.deliveries, 12_000);
        let (agent, recovery) = Agent::open(
            Quiet,
            FileLog::open(dir.path().join("agent-0.jsonl"))
                .await
                .unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(recovery.records, 12_000);
        let pending = agent.pending().await.unwrap();
        let mut ids: Vec<&str> = pending
            .next_step
            .iter()
            .map(|item| item.message().id().as_str())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, ["a0s0m5999", "a0s1m5999"]);
        assert!(pending.next_turn.is_empty());
        agent.close().await.unwrap();
    }
}
