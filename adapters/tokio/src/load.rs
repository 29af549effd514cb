//! The load generator behind `coxswain load` and the durable-throughput bench (not part of the
//! stable API): agents on [`FileLog`]s (or sessions of one shared [`SegmentLog`]) on a disk the
//! user chooses, each fed by concurrent senders, and the fsync floor of that disk measured in
//! the same run.
//!
//! Every delivery is an `inject` (a quiet send: one `agent/inbox/spliced` record, no turn), so
//! what is timed is the durable path alone: the call, the core, the group's append and its sync,
//! the acknowledgement. The floor is the same bytes written and synced with no agent at all:
//! one file, one `write` and one `fdatasync` per group of `min(agents × senders, max_batch)`
//! deliveries (the largest group the load's concurrency allows), each delivery the run's
//! average record size.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coxswain_core::{Message, StepAnswer};

use crate::{
    Agent, AgentError, FileLog, Host, LogError, OpenError, Options, SegmentLog, StepContext,
};
use crate::{Faults, SyncPolicy};

/// What to run.
#[derive(Clone, Debug)]
pub struct Load {
    /// The directory the logs go in (created if needed); `agent-N.jsonl` and `floor.bin` in it
    /// are replaced.
    pub dir: PathBuf,
    /// How many agents, each on its own log.
    pub agents: usize,
    /// Concurrent senders per agent, each sending one message after the other.
    pub senders: usize,
    /// Messages per sender.
    pub messages: usize,
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
    /// Deliveries per second the raw file took in groups of `floor_group`.
    pub floor_per_s: f64,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Agents, senders and messages must each be at least 1.
    #[error("agents, senders and messages must each be at least 1")]
    Empty,
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
    /// A sender task was lost.
    #[error("a sender task was lost: {0}")]
    Task(String),
}

/// A host that never runs a turn (injects wake nothing); a step would complete at once.
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

/// Runs `load`: opens the agents on fresh logs, lets every sender deliver its messages (adding
/// one to `progress` per acknowledgement), closes the agents, then measures the floor.
pub async fn run(load: &Load, progress: Arc<AtomicU64>) -> Result<LoadReport, LoadError> {
    if load.agents == 0 || load.senders == 0 || load.messages == 0 {
        return Err(LoadError::Empty);
    }
    std::fs::create_dir_all(&load.dir).map_err(io_error(&load.dir))?;
    let mut agents = Vec::with_capacity(load.agents);
    let mut faults: Vec<Faults> = Vec::with_capacity(load.agents);
    let mut paths = Vec::with_capacity(load.agents);
    let segment = if load.shared {
        let path = load.dir.join("segment.jsonl");
        remove(&path)?;
        let segment = SegmentLog::open(&path).await?;
        faults.push(segment.faults());
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
                let log = FileLog::open_with(&path, load.policy).await?;
                faults.push(log.faults());
                paths.push(path);
                Agent::open_with(options, Quiet, log).await?.0
            }
        };
        agents.push(agent);
    }
    let before: u64 = faults.iter().map(|f| f.syncs() as u64).sum();
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (a, agent) in agents.iter().enumerate() {
        for s in 0..load.senders {
            let agent = agent.clone();
            let messages = load.messages;
            let progress = Arc::clone(&progress);
            tasks.spawn(async move {
                let mut latencies = Vec::with_capacity(messages);
                for m in 0..messages {
                    let message = Message::user(format!("a{a}s{s}m{m}"), "load");
                    let sent = Instant::now();
                    agent.inject(message).await?;
                    latencies.push(sent.elapsed());
                    progress.fetch_add(1, Ordering::Relaxed);
                }
                Ok::<_, AgentError>(latencies)
            });
        }
    }
    let mut latencies = Vec::with_capacity(load.agents * load.senders * load.messages);
    while let Some(done) = tasks.join_next().await {
        let done = done.map_err(|error| LoadError::Task(error.to_string()))?;
        latencies.extend(done?);
    }
    let elapsed = start.elapsed();
    let syncs: u64 = faults.iter().map(|f| f.syncs() as u64).sum::<u64>() - before;
    for agent in &agents {
        agent.close().await?;
    }
    drop(agents);
    drop(segment);
    let mut bytes = 0;
    for path in &paths {
        bytes += std::fs::metadata(path).map_err(io_error(path))?.len();
    }
    latencies.sort_unstable();
    let deliveries = latencies.len() as u64;
    let percentile = |p: f64| {
        let index = ((latencies.len() as f64 * p).ceil() as usize).saturating_sub(1);
        latencies.get(index).copied().unwrap_or_default()
    };
    let (p50, p99) = (percentile(0.50), percentile(0.99));
    let floor_group = (load.agents * load.senders).min(load.max_batch).max(1);
    let record = (bytes / deliveries.max(1)).max(1) as usize;
    let floor_path = load.dir.join("floor.bin");
    // As many groups as the run's deliveries make, at most 20k and at least 200.
    let groups = (deliveries as usize / floor_group).clamp(200, 20_000);
    let floor_per_s = {
        let path = floor_path.clone();
        tokio::task::spawn_blocking(move || floor(&path, record, floor_group, groups))
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
        floor_per_s,
    })
}

/// Removes a log left by an earlier run.
fn remove(path: &Path) -> Result<(), LoadError> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io_error(path)(error)),
        _ => Ok(()),
    }
}

/// The fsync floor: `groups` times, one `write` of `group` records of `record` bytes to a fresh
/// file at `path`, then one `fdatasync`; records per second. Removes the file afterwards.
pub fn floor(path: &Path, record: usize, group: usize, groups: usize) -> std::io::Result<f64> {
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
    for _ in 0..groups {
        file.write_all(&chunk)?;
        file.sync_data()?;
    }
    let elapsed = start.elapsed();
    drop(file);
    std::fs::remove_file(path)?;
    Ok((groups * group.max(1)) as f64 / elapsed.as_secs_f64())
}
