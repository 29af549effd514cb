//! The file targets: an agent per [`FileLog`], or every agent a session of one shared
//! [`SegmentLog`]; the syncs and records their files saw, and the fsync floor of the disk.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coxswain_tokio::{Agent, FileLog, LogFile, Options, SegmentLog, SyncPolicy};

use crate::workload::{LoadHost, Tally};
use crate::{io_error, Load, LoadError, FLOOR_MIN_GROUPS};

/// The agents of a file target, and what their files count.
pub(crate) struct Files {
    pub(crate) agents: Vec<Agent>,
    /// Kept open for as long as its sessions' agents run.
    segment: Option<SegmentLog<Counted>>,
    pub(crate) paths: Vec<PathBuf>,
    pub(crate) counts: FileCounts,
}

/// Opens the agents of `load` on fresh logs in `dir` (replacing an earlier run's).
pub(crate) async fn open(
    load: &Load,
    dir: &Path,
    (policy, shared): (SyncPolicy, bool),
    tally: &Arc<Tally>,
) -> Result<Files, LoadError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let counts = FileCounts::default();
    let mut agents = Vec::with_capacity(load.agents);
    let mut paths = Vec::with_capacity(load.agents);
    let segment = if shared {
        let path = dir.join("segment.jsonl");
        remove(&path)?;
        let segment = SegmentLog::open_wrapped(&path, counts.wrapper()).await?;
        paths.push(path);
        Some(segment)
    } else {
        None
    };
    for i in 0..load.agents {
        let options = agent_options(load, i);
        let host = LoadHost::new(load.workload, tally);
        let agent = match &segment {
            Some(segment) => {
                let log = segment.session(format!("agent-{i}"))?;
                Agent::open_with(options, host, log).await?.0
            }
            None => {
                let path = dir.join(format!("agent-{i}.jsonl"));
                remove(&path)?;
                let log = FileLog::open_wrapped(&path, policy, counts.wrapper()).await?;
                paths.push(path);
                Agent::open_with(options, host, log).await?.0
            }
        };
        agents.push(agent);
    }
    Ok(Files {
        agents,
        segment,
        paths,
        counts,
    })
}

impl Files {
    /// Closes every agent and the shared log; the bytes the logs hold.
    pub(crate) async fn close(self) -> Result<u64, LoadError> {
        for agent in &self.agents {
            agent.close().await?;
        }
        drop(self.agents);
        drop(self.segment);
        let mut bytes = 0;
        for path in &self.paths {
            bytes += std::fs::metadata(path).map_err(io_error(path))?.len();
        }
        Ok(bytes)
    }
}

/// The options of agent `i` of `load`.
pub(crate) fn agent_options(load: &Load, i: usize) -> Options {
    let mut options = Options::named(format!("load-{i}"));
    options.max_batch = load.max_batch;
    options.channel_capacity = options.channel_capacity.max(load.senders);
    options
}

/// The syncs and records (lines) every log file of a run saw.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileCounts {
    syncs: Arc<AtomicU64>,
    records: Arc<AtomicU64>,
}

impl FileCounts {
    /// What wraps a log's opened file so that it is counted here.
    fn wrapper(&self) -> impl FnOnce(File) -> Counted + Send + 'static {
        let counts = self.clone();
        move |file| Counted { file, counts }
    }

    /// Syncs and records so far.
    pub(crate) fn get(&self) -> (u64, u64) {
        (
            self.syncs.load(Ordering::Relaxed),
            self.records.load(Ordering::Relaxed),
        )
    }
}

/// A log's file that counts the syncs the log attempts and the lines it appends, and
/// otherwise is the plain file.
#[derive(Debug)]
struct Counted {
    file: File,
    counts: FileCounts,
}

impl LogFile for Counted {
    #[inline]
    fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
        let lines = bytes.iter().filter(|&&byte| byte == b'\n').count();
        self.counts
            .records
            .fetch_add(lines as u64, Ordering::Relaxed);
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
        self.counts.syncs.fetch_add(1, Ordering::Relaxed);
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
