//! # coxswain-load
//!
//! The load generator behind `coxswain load`, the durable-throughput bench (bench 8) and the
//! PostgreSQL figures: agents on a [`Target`] the user chooses — [`FileLog`]s on a disk, the
//! sessions of one shared [`SegmentLog`], or sessions served by [`Worker`]s on a PostgreSQL
//! database — each fed by concurrent senders, and the floor of that storage measured in the
//! same run.
//!
//! What a sender does is the run's [`Workload`]:
//!
//! * [`Workload::Replace`] makes quiet deliveries that keep every list bounded: a sender's
//!   first message is an `inject` into the next-step list, each later one `replace`s the
//!   sender's previous message in place. Every call delivers one new message and writes one
//!   `agent/inbox/spliced` record, and no turn runs, so what is timed is the durable path alone.
//! * [`Workload::Turns`] runs real turns: follow-ups that wake turns, served by a scripted host
//!   whose every step takes a set latency and records one `model/output` event; every so many
//!   calls a steer (joining the running turn's next step) and a cancel of the running turn
//!   (keeping the inbox). A turn claims one follow-up (S28), so a sender keeps at most one
//!   queued: while its previous follow-up still waits, the next `replace`s it in place (as a
//!   user edits a queued message); once a turn took it, the next is a new follow-up, and so is
//!   the first after a cancel (it wakes a turn for what the cancel parked). Lists stay bounded
//!   by the senders, however long the run; a delivery a full list refuses (S55) is sent again
//!   a moment later.
//!
//! [`failover`] measures a fail-over across processes instead: worker processes serve fresh
//! sessions, one is killed with SIGKILL, and the time until each of its sessions is served
//! again by a survivor is reported, with the acknowledged deliveries lost (`coxswain load
//! --failover`).
//!
//! A run lasts a [`Length`]: a number of calls per sender, or a duration. The floor is the same
//! rows with no agent at all. On files: the same bytes written and synced to one file, one
//! `write` and one `fdatasync` per group of `min(agents × senders, max_batch)` records (the
//! largest group the load's concurrency allows), each the run's average record size, at least
//! [`FLOOR_MIN_GROUPS`] groups and at most as many as the run wrote, stopping early once it
//! has taken as long as the run. On PostgreSQL: as many rows as the run wrote, of its average
//! size, by single-row `INSERT` transactions on `min(agents × senders, 64)` connections at once
//! into a table shaped as the records table (`coxswain_load.raw`), with the same early stop.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod failover;
mod files;
mod postgres;
mod workload;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coxswain_postgres::{PgError, StoreStats, WorkerError};
use coxswain_tokio::{AgentError, LogError, OpenError, Options, SyncPolicy};

#[cfg(doc)]
use coxswain_postgres::Worker;
#[cfg(doc)]
use coxswain_tokio::{FileLog, SegmentLog};

pub use files::floor;
pub use postgres::{FLOOR_MAX_CONNECTIONS, FLOOR_MIN_ROWS};
use workload::{Run, Tally};

/// What every sender does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Workload {
    /// Quiet deliveries into the next-step list, each sender keeping one message pending: its
    /// first message is an `inject`, each later one `replace`s its previous message. One
    /// delivery and one `agent/inbox/spliced` record per call; no turn runs.
    #[default]
    Replace,
    /// Follow-ups that wake turns, steers and cancels, served by a scripted host.
    Turns(Turns),
}

/// The turns workload's script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turns {
    /// How long each step of the scripted host takes (a cancel ends it early).
    pub step: Duration,
    /// Every this-many-th call of a sender is a steer instead of a follow-up (0: never).
    pub steer_every: usize,
    /// Every this-many-th call of a sender is a user cancel keeping the inbox, refused (and not
    /// counted) when no turn runs (0: never); it comes before a steer on the same count.
    pub cancel_every: usize,
}

impl Turns {
    /// 5 ms steps, a steer every 4th call, a cancel every 50th.
    pub const DEFAULT: Turns = Turns {
        step: Duration::from_millis(5),
        steer_every: 4,
        cancel_every: 50,
    };
}

impl Default for Turns {
    fn default() -> Self {
        Turns::DEFAULT
    }
}

impl Workload {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Replace => "replace",
            Workload::Turns(_) => "turns",
        }
    }
}

/// How long the senders go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// This many calls per sender.
    Messages(usize),
    /// Each sender starts calls until this long after the run began (a call under way then is
    /// finished and counted).
    Duration(Duration),
}

/// Where the agents' logs are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Log files in a directory (created if needed).
    Files {
        /// The directory; `agent-N.jsonl`, `segment.jsonl` and `floor.bin` in it are replaced.
        dir: PathBuf,
        /// The logs' sync policy (per-agent files only: a shared segment log syncs every
        /// commit).
        policy: SyncPolicy,
        /// One shared segment log (`segment.jsonl`) for every agent, each its own session,
        /// instead of a file per agent.
        shared: bool,
    },
    /// Sessions on a PostgreSQL database, served by workers in this process, each with its own
    /// connection pool, lease and committer (as separate processes would be). Every run makes
    /// fresh sessions (`load-<run>-<i>`) and leaves them, released, in the database.
    Postgres {
        /// The connection string (`postgres://…`; several hosts and
        /// `target_session_attrs=read-write` find a replicated cluster's primary).
        url: String,
        /// How many workers serve the sessions (session `i` on worker `i % workers`).
        workers: usize,
    },
}

impl Target {
    /// Log files in `dir`, a file per agent, syncing every append.
    pub fn files(dir: impl Into<PathBuf>) -> Self {
        Target::Files {
            dir: dir.into(),
            policy: SyncPolicy::EveryAppend,
            shared: false,
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Load {
    /// Where the logs are.
    pub target: Target,
    /// How many agents (sessions), each on its own log.
    pub agents: usize,
    /// Concurrent senders per agent, each calling one call after the other; at most
    /// [`Options::DEFAULT_MAX_PENDING`] (with [`Workload::Replace`] each keeps one message
    /// pending).
    pub senders: usize,
    /// How long every sender goes on.
    pub length: Length,
    /// What every sender does.
    pub workload: Workload,
    /// [`Options::max_batch`] (1: one append and one sync per input).
    pub max_batch: usize,
}

/// What the statements of a PostgreSQL run were.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Statements {
    /// What every worker's store sent while the senders ran (opening the sessions and closing
    /// them is not counted).
    pub sent: StoreStats,
    /// `sent.statements / elapsed`.
    pub per_s: f64,
    /// `sent.lease_renewals / elapsed`: with worker leases, about `workers × 3 / lease`,
    /// whatever the number of sessions.
    pub lease_renewals_per_s: f64,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LoadReport {
    /// Acknowledged deliveries (follow-ups, steers, injects and replaces; not cancels).
    pub deliveries: u64,
    /// From the first call to the last acknowledgement.
    pub elapsed: Duration,
    /// `deliveries / elapsed`.
    pub deliveries_per_s: f64,
    /// Median time from a call to its acknowledgement.
    pub p50: Duration,
    /// 99th percentile of the same.
    pub p99: Duration,
    /// Turns begun.
    pub turns: u64,
    /// `turns / elapsed`.
    pub turns_per_s: f64,
    /// Steps run.
    pub steps: u64,
    /// Steers acknowledged (among the deliveries).
    pub steers: u64,
    /// Cancels the agents took.
    pub cancels: u64,
    /// Records the logs hold at the end (crash repair's and the closes' included).
    pub records: u64,
    /// Bytes the logs hold (on PostgreSQL: the records' `type` and `data` as text).
    pub bytes: u64,
    /// The syncs while the senders ran: on files, the `fdatasync`s; on PostgreSQL, the append
    /// statements (each a commit the server flushes).
    pub syncs: u64,
    /// On PostgreSQL, what the workers sent.
    pub statements: Option<Statements>,
    /// The floor's group: records per write and sync (on PostgreSQL 1: a transaction per row).
    pub floor_group: usize,
    /// Groups the floor wrote.
    pub floor_groups: usize,
    /// How many writers the floor ran at once (1 on files).
    pub floor_concurrency: usize,
    /// How long the floor took.
    pub floor_elapsed: Duration,
    /// Records per second the floor took.
    pub floor_per_s: f64,
}

/// How far a run is, for a progress display.
#[derive(Debug, Default)]
pub struct Progress {
    opened: AtomicU64,
    deliveries: AtomicU64,
    floor: AtomicBool,
}

impl Progress {
    /// Sessions opened so far (on PostgreSQL, before the senders start).
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Deliveries acknowledged so far.
    pub fn deliveries(&self) -> u64 {
        self.deliveries.load(Ordering::Relaxed)
    }

    /// Whether the senders are done and the floor is being measured.
    pub fn measuring_floor(&self) -> bool {
        self.floor.load(Ordering::Relaxed)
    }

    fn delivered(&self) {
        self.deliveries.fetch_add(1, Ordering::Relaxed);
    }

    fn opened_one(&self) {
        self.opened.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Agents, senders, workers, messages and the duration must each be at least 1 (a nonzero
    /// duration).
    #[error(
        "agents, senders, workers and messages must each be at least 1, and the duration above 0"
    )]
    Empty,
    /// More senders per agent than a list holds.
    #[error("{senders} senders per agent: at most {max} (each may keep one message pending)")]
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
    /// The database refused or failed.
    #[error("PostgreSQL: {0}")]
    Postgres(#[from] PgError),
    /// The floor's table could not be made, written or cleaned up.
    #[error("measuring the floor (table coxswain_load.raw): {0}")]
    Floor(PgError),
    /// A worker could not take or serve a session.
    #[error("a worker: {0}")]
    Worker(#[from] WorkerError),
    /// A delivery failed.
    #[error("a delivery failed: {0}")]
    Delivery(#[from] AgentError),
    /// A sender's previous message was no longer pending, so it could not be replaced.
    #[error("message `{0}` was no longer pending: nothing else may take it from the list")]
    NotPending(String),
    /// A worker process of a fail-over run could not be started.
    #[error("cannot start the worker process {program}: {error}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A worker process of a fail-over run failed (its last lines of stderr, if any, after).
    #[error("worker process {slot}: {what}{}", if stderr.is_empty() { String::new() } else { format!("; its stderr: {stderr}") })]
    WorkerProcess {
        /// Its slot (worker `i` serves sessions `i`, `i + W`, …).
        slot: usize,
        /// What went wrong.
        what: String,
        /// The last lines it wrote to stderr, joined with ` | `.
        stderr: String,
    },
    /// A fail-over run's workers did not get somewhere in time.
    #[error("the fail-over run timed out: {what}")]
    FailoverTimeout {
        /// What was still missing.
        what: String,
    },
    /// A fail-over needs two workers or more (one is killed), a session for each (at most
    /// [`failover::MAX_SESSIONS`]), and a lease.
    #[error("a fail-over needs at least 2 workers (one is killed), from one session per worker to {} sessions, and a lease above 0: {workers} workers, {sessions} sessions", failover::MAX_SESSIONS)]
    FailoverShape {
        /// The workers asked for.
        workers: usize,
        /// The sessions asked for.
        sessions: usize,
    },
    /// A sender task was lost.
    #[error("a sender task was lost: {0}")]
    Task(String),
}

/// The fewest groups the file floor writes, however short the run.
pub const FLOOR_MIN_GROUPS: usize = 200;

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LoadError + '_ {
    move |error| LoadError::Io {
        path: path.to_owned(),
        error,
    }
}

/// Runs `load`: opens the agents on fresh logs, lets every sender call (counting each
/// acknowledgement in `progress`), closes the agents, then measures the floor.
pub async fn run(load: &Load, progress: Arc<Progress>) -> Result<LoadReport, LoadError> {
    check(load)?;
    let tally = Arc::new(Tally::default());
    let run = |start| Run {
        workload: load.workload,
        length: load.length,
        start,
        progress: Arc::clone(&progress),
        tally: Arc::clone(&tally),
    };
    match &load.target {
        Target::Files {
            dir,
            policy,
            shared,
        } => {
            let files = files::open(load, dir, (*policy, *shared), &tally).await?;
            let (syncs_before, _) = files.counts.get();
            let start = Instant::now();
            let latencies = workload::send(&files.agents, load.senders, run(start)).await?;
            let elapsed = start.elapsed();
            let (syncs, _) = files.counts.get();
            let counts = files.counts.clone();
            let bytes = files.close().await?;
            let (_, records) = counts.get();
            progress.floor.store(true, Ordering::Relaxed);
            let mut report = measured(latencies, elapsed, &tally);
            report.records = records;
            report.bytes = bytes;
            report.syncs = syncs - syncs_before;
            report.floor_group = load
                .agents
                .saturating_mul(load.senders)
                .min(load.max_batch)
                .max(1);
            let record = (bytes / records.max(1)).max(1) as usize;
            let groups = (records as usize / report.floor_group).max(FLOOR_MIN_GROUPS);
            let path = dir.join("floor.bin");
            let group = report.floor_group;
            let task_path = path.clone();
            let (written, took) = tokio::task::spawn_blocking(move || {
                floor(&task_path, record, group, groups, elapsed)
            })
            .await
            .map_err(|error| LoadError::Task(error.to_string()))?
            .map_err(io_error(&path))?;
            report.floor_groups = written;
            report.floor_concurrency = 1;
            report.floor_elapsed = took;
            report.floor_per_s = (written * group) as f64 / took.as_secs_f64();
            Ok(report)
        }
        Target::Postgres { url, workers } => {
            let served = postgres::open(load, (url, *workers), &tally, &progress).await?;
            let before = served.stats();
            let start = Instant::now();
            let latencies = workload::send(&served.agents, load.senders, run(start)).await?;
            let elapsed = start.elapsed();
            let after = served.stats();
            let prefix = served.prefix.clone();
            let (records, bytes) = served.close().await?;
            progress.floor.store(true, Ordering::Relaxed);
            let mut report = measured(latencies, elapsed, &tally);
            let sent = after.since(before);
            let seconds = elapsed.as_secs_f64();
            report.statements = Some(Statements {
                sent,
                per_s: sent.statements as f64 / seconds,
                lease_renewals_per_s: sent.lease_renewals as f64 / seconds,
            });
            report.records = records;
            report.bytes = bytes;
            report.syncs = sent.appends;
            let record = (bytes / records.max(1)).max(1) as usize;
            let connections = load
                .agents
                .saturating_mul(load.senders)
                .min(FLOOR_MAX_CONNECTIONS);
            let (written, took) = postgres::floor(
                url,
                &prefix,
                (records as usize, record, connections),
                elapsed,
            )
            .await?;
            report.floor_group = 1;
            report.floor_groups = written;
            report.floor_concurrency = connections;
            report.floor_elapsed = took;
            report.floor_per_s = written as f64 / took.as_secs_f64();
            Ok(report)
        }
    }
}

/// Refuses a load with nothing to do, or more senders than a list holds.
fn check(load: &Load) -> Result<(), LoadError> {
    let empty = match load.length {
        Length::Messages(messages) => messages == 0,
        Length::Duration(duration) => duration.is_zero(),
    };
    let no_workers = matches!(load.target, Target::Postgres { workers: 0, .. });
    if load.agents == 0 || load.senders == 0 || empty || no_workers {
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

/// The report of what the senders measured, the storage's fields left to fill.
fn measured(mut latencies: Vec<Duration>, elapsed: Duration, tally: &Tally) -> LoadReport {
    latencies.sort_unstable();
    let deliveries = latencies.len() as u64;
    let percentile = |p: f64| {
        let index = ((latencies.len() as f64 * p).ceil() as usize).saturating_sub(1);
        latencies.get(index).copied().unwrap_or_default()
    };
    let seconds = elapsed.as_secs_f64();
    let turns = tally.turns.load(Ordering::Relaxed);
    LoadReport {
        deliveries,
        elapsed,
        deliveries_per_s: deliveries as f64 / seconds,
        p50: percentile(0.50),
        p99: percentile(0.99),
        turns,
        turns_per_s: turns as f64 / seconds,
        steps: tally.steps.load(Ordering::Relaxed),
        steers: tally.steers.load(Ordering::Relaxed),
        cancels: tally.cancels.load(Ordering::Relaxed),
        records: 0,
        bytes: 0,
        syncs: 0,
        statements: None,
        floor_group: 1,
        floor_groups: 0,
        floor_concurrency: 1,
        floor_elapsed: Duration::ZERO,
        floor_per_s: 0.0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use coxswain_tokio::{Agent, FileLog, Host, StepContext};

    fn load(dir: &Path, senders: usize, length: Length) -> Load {
        Load {
            target: Target::Files {
                dir: dir.to_owned(),
                policy: SyncPolicy::Never,
                shared: false,
            },
            agents: 1,
            senders,
            length,
            workload: Workload::Replace,
            max_batch: Options::DEFAULT_MAX_BATCH,
        }
    }

    struct Quiet;

    impl Host for Quiet {
        async fn step(&self, _cx: StepContext) -> coxswain_core::StepAnswer {
            coxswain_core::StepAnswer::Completed
        }
    }

    /// Agent 0 of a run in `dir`, opened again on its log.
    async fn reopen(dir: &Path) -> (Agent, coxswain_tokio::Recovery) {
        let log = FileLog::open(dir.join("agent-0.jsonl")).await.unwrap();
        Agent::open(Quiet, log).await.unwrap()
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
        let mut no_workers = load(&made, 1, Length::Messages(1));
        no_workers.target = Target::Postgres {
            url: "postgres://nowhere.invalid/db".to_owned(),
            workers: 0,
        };
        let error = run(&no_workers, Arc::default()).await;
        assert!(matches!(error, Err(LoadError::Empty)), "{error:?}");
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
            load.target = Target::Files {
                dir: dir.path().to_owned(),
                policy: SyncPolicy::EveryAppend,
                shared,
            };
            let report = run(&load, Arc::default()).await.unwrap();
            let expected = 3 * agents as u64;
            assert_eq!(
                (report.deliveries, report.syncs, report.records),
                (expected, expected, expected),
                "shared: {shared}"
            );
            assert_eq!(
                (report.turns, report.steps, report.statements),
                (0, 0, None)
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
        let (agent, recovery) = reopen(dir.path()).await;
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

    /// The turns workload runs turns: every call but the cancels is a delivery, the lists stay
    /// bounded, the host's steps record their output, and the cancels the agents took are
    /// counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_turns_workload_runs_turns_that_claim_every_delivery() {
        let dir = tempfile::tempdir().unwrap();
        let mut load = load(dir.path(), 4, Length::Messages(25));
        load.workload = Workload::Turns(Turns {
            step: Duration::from_millis(2),
            steer_every: 4,
            cancel_every: 10,
        });
        let report = run(&load, Arc::default()).await.unwrap();
        // 25 calls a sender: 2 cancels (the 10th and 20th), 6 steers (4, 8, 12, 16, 24; not
        // 20) and 17 follow-ups.
        assert_eq!(report.deliveries, 4 * 23);
        assert_eq!(report.steers, 4 * 5);
        assert!(
            report.turns >= 1 && report.steps >= report.turns,
            "{report:?}"
        );
        assert!(report.cancels <= 8, "{report:?}");
        assert!(report.turns_per_s > 0.0);
        let (agent, recovery) = reopen(dir.path()).await;
        assert_eq!(recovery.records as u64, report.records);
        // Each sender keeps at most one follow-up queued (replacing it while it waits), but for
        // those a cancel parked (turns claim them in order), and steers are claimed by every
        // next step: a list holds at most one item per sender and per cancel.
        let pending = agent.pending().await.unwrap();
        let bound = 4 + report.cancels as usize;
        assert!(
            pending.next_step.len() <= 4 && pending.next_turn.len() <= bound,
            "{pending:?}"
        );
        agent.close().await.unwrap();
        let text = std::fs::read_to_string(dir.path().join("agent-0.jsonl")).unwrap();
        // A step a cancel cut short records nothing.
        let outputs = text.matches("\"model/output\"").count() as u64;
        assert!(outputs <= report.steps, "{outputs}");
    }

    /// On PostgreSQL: sessions spread over workers, turns run, every delivery's record and the
    /// steps' outputs in the records table, the statements counted (the appends among them),
    /// and the raw-`INSERT` floor measured beside (a real throwaway cluster; skipped without
    /// the server binaries outside CI).
    #[test]
    fn a_postgres_load_runs_turns_on_workers_and_counts_its_statements() {
        let Some(cluster) = coxswain_postgres_tests::TempCluster::for_tests().unwrap() else {
            return;
        };
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let load = Load {
            target: Target::Postgres {
                url: cluster.url(),
                workers: 2,
            },
            agents: 4,
            senders: 2,
            length: Length::Messages(10),
            workload: Workload::Turns(Turns {
                step: Duration::from_millis(1),
                steer_every: 3,
                cancel_every: 0,
            }),
            max_batch: Options::DEFAULT_MAX_BATCH,
        };
        let progress = Arc::new(Progress::default());
        let report = runtime.block_on(run(&load, Arc::clone(&progress))).unwrap();
        assert_eq!(report.deliveries, 80);
        assert_eq!(progress.opened(), 4);
        assert_eq!(report.steers, 4 * 2 * 3);
        assert!(report.turns >= 4, "{report:?}");
        let statements = report.statements.unwrap();
        assert!(
            statements.sent.appends >= 1 && statements.sent.appends <= statements.sent.statements
        );
        assert_eq!(report.syncs, statements.sent.appends);
        let rows = cluster
            .psql("SELECT count(DISTINCT session) || '/' || count(*) FROM coxswain.records WHERE session LIKE 'load-%'")
            .unwrap();
        assert_eq!(rows, format!("4/{}", report.records));
        let outputs: u64 = cluster
            .psql("SELECT count(*) FROM coxswain.records WHERE type = 'model/output'")
            .unwrap()
            .parse()
            .unwrap();
        assert!(outputs >= 1 && outputs <= report.steps, "{outputs}");
        assert_eq!(report.floor_concurrency, 8);
        assert!(report.floor_groups >= FLOOR_MIN_ROWS && report.floor_per_s > 0.0);
        // The floor's rows were the run's own, and are gone.
        let raw = cluster
            .psql("SELECT count(*) FROM coxswain_load.raw")
            .unwrap();
        assert_eq!(raw, "0");
        // Every session was released by its worker's shutdown.
        let held = cluster
            .psql("SELECT count(*) FROM coxswain.sessions WHERE owner IS NOT NULL")
            .unwrap();
        assert_eq!(held, "0");
    }
}
