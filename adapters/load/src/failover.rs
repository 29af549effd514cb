//! A measured fail-over on PostgreSQL, across processes: [`failover`] starts `W` worker
//! processes ([`serve_worker`], the same program re-executed), has them open `N` fresh sessions
//! (`load-<run>-<i>`, session `i` on worker `i % W`), delivers a follow-up to every session,
//! kills worker 0 with SIGKILL, sends a follow-up to each of its sessions, and times how long
//! each waits until a surviving worker — claiming the dead worker's sessions once its lease
//! ended ([`Worker::claim_expired_under`], this run's sessions only) — acknowledges it. Then it
//! stops the survivors (they release their sessions) and checks, in the database, that every
//! acknowledged delivery is in its session's log exactly once.
//!
//! The coordinator and its workers speak lines, one message each, words separated by spaces
//! (session and message ids hold none):
//!
//! * to a worker, on its stdin: `open SESSION` (take it now and serve it), `followup SESSION
//!   ID` (deliver a follow-up with message id `ID`); closing stdin stops the worker (it releases
//!   its sessions and ends its lease);
//! * from a worker, on its stdout: `opened SESSION`, `open-failed SESSION ERROR`, `claimed
//!   SESSION` (taken over from a dead worker), `acked ID`, `failed ID ERROR` (not delivered:
//!   the coordinator sends it again, to whichever worker serves the session then), and last
//!   `stats JSON` (what its store sent).

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use coxswain_core::Message;
use coxswain_postgres::{PgError, Store, StoreOptions, Worker};
use coxswain_tokio::{Agent, Options};
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command};
use tokio::sync::mpsc;

use crate::postgres::run_id;
use crate::workload::{LoadHost, Tally};
use crate::{LoadError, Turns, Workload};

mod worker;
pub use worker::serve_worker;

/// How often a worker reaps ended sessions and claims expired ones.
pub const CLAIM_TICK: Duration = Duration::from_millis(50);

/// The most sessions a worker claims per tick (a claim restores its batch at once).
pub const CLAIM_BATCH: usize = 250;

/// How long a worker waits for one delivery before it answers `failed`.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the survivors may take to shut down before they are killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long the coordinator waits, beyond four steps, for the last turns to end before it
/// stops the workers.
const SETTLE: Duration = Duration::from_millis(250);

/// How many lines of a worker's stderr an error quotes.
const STDERR_LINES: usize = 5;

/// The most sessions a fail-over run opens (the coordinator keeps a few words per session).
pub const MAX_SESSIONS: usize = 1_000_000;

/// The slot whose worker is killed.
const KILLED: usize = 0;

/// One worker process of a fail-over run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The database.
    pub url: String,
    /// The run's session prefix (`load-<run>-`): the only sessions the worker claims.
    pub prefix: String,
    /// The worker's owner id (unique per process).
    pub owner: String,
    /// Its lease.
    pub lease: Duration,
    /// The most sessions it claims per tick.
    pub claim: usize,
    /// How long each step of the scripted host takes.
    pub step: Duration,
}

impl WorkerConfig {
    /// The arguments that hand this configuration to a worker process (see [`Failover::command`]).
    pub fn to_args(&self) -> Vec<String> {
        vec![
            "--log".to_owned(),
            self.url.clone(),
            "--run".to_owned(),
            self.prefix.clone(),
            "--owner".to_owned(),
            self.owner.clone(),
            "--lease-ms".to_owned(),
            self.lease.as_millis().to_string(),
            "--claim".to_owned(),
            self.claim.to_string(),
            "--step-ms".to_owned(),
            self.step.as_millis().to_string(),
        ]
    }
}

/// A fail-over to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failover {
    /// The database (`postgres://…`).
    pub url: String,
    /// Worker processes (at least 2: one is killed, the others take over).
    pub workers: usize,
    /// Sessions, spread over the workers.
    pub sessions: usize,
    /// The workers' lease.
    pub lease: Duration,
    /// How long each step of the scripted host takes (a follow-up wakes a turn of one step).
    pub step: Duration,
    /// The worker process: a program and its first arguments, to which each worker's
    /// [`WorkerConfig::to_args`] are appended (`coxswain load-worker`).
    pub command: (PathBuf, Vec<String>),
}

/// What a fail-over measured.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct FailoverReport {
    /// The run's session prefix (`load-<run>-`).
    pub prefix: String,
    /// From starting the workers until every session was open and had acknowledged its first
    /// follow-up.
    pub warm: Duration,
    /// The sessions the killed worker served.
    pub killed_sessions: usize,
    /// The time from the kill until a survivor acknowledged the follow-up sent to each of
    /// them, sorted; one per session served again.
    pub served_again: Vec<Duration>,
    /// The median of `served_again`.
    pub p50: Duration,
    /// Its 99th percentile.
    pub p99: Duration,
    /// Its largest.
    pub max: Duration,
    /// The killed worker's sessions not served again within the lease + 60 s.
    pub unserved: usize,
    /// Deliveries acknowledged (the first follow-up to every session, then one to each of the
    /// killed worker's sessions).
    pub acknowledged: usize,
    /// Acknowledged deliveries that are not in their session's log.
    pub lost: usize,
    /// Acknowledged deliveries that are in it more than once.
    pub doubled: usize,
    /// Sessions the survivors took over (every claim, the killed worker's sessions among them).
    pub takeovers: usize,
}

/// What the coordinator hears.
enum Heard {
    Line(usize, String),
    Closed(usize),
}

/// A worker process, from the coordinator's side.
struct Process {
    child: Child,
    /// Its stdin's writer thread: dropping this closes the worker's stdin.
    stdin: Option<std::sync::mpsc::Sender<String>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    alive: bool,
}

impl Process {
    /// The last lines it wrote to stderr, joined.
    fn stderr(&self) -> String {
        let lines = self
            .stderr
            .lock()
            .map(|lines| lines.clone())
            .unwrap_or_default();
        Vec::from(lines).join(" | ")
    }
}

/// The coordinator's worker processes and what they said.
struct Processes {
    processes: Vec<Process>,
    heard: mpsc::UnboundedReceiver<Heard>,
    /// Lines to write to each worker, sent in one write each at the next [`Processes::flush`].
    queued: Vec<String>,
}

impl Processes {
    async fn start(failover: &Failover, prefix: &str) -> Result<Processes, LoadError> {
        let (tell, heard) = mpsc::unbounded_channel();
        let mut processes = Vec::with_capacity(failover.workers);
        for slot in 0..failover.workers {
            let config = WorkerConfig {
                url: failover.url.clone(),
                prefix: prefix.to_owned(),
                owner: format!("{prefix}w{slot}"),
                lease: failover.lease,
                claim: CLAIM_BATCH,
                step: failover.step,
            };
            let (program, first) = &failover.command;
            let mut child = Command::new(program)
                .args(first)
                .args(config.to_args())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|error| LoadError::Spawn {
                    program: program.clone(),
                    error,
                })?;
            let stdin = child.stdin.take().map(|mut pipe| {
                let (lines, to_write) = std::sync::mpsc::channel::<String>();
                std::thread::spawn(move || {
                    for lines in to_write {
                        if pipe.write_all(lines.as_bytes()).is_err() {
                            return;
                        }
                    }
                    // Dropping `pipe` closes the worker's stdin: it stops.
                });
                lines
            });
            if let Some(stdout) = child.stdout.take() {
                let tell = tell.clone();
                std::thread::spawn(move || {
                    for line in BufReader::new(stdout).lines() {
                        let Ok(line) = line else { break };
                        if tell.send(Heard::Line(slot, line)).is_err() {
                            return;
                        }
                    }
                    let _ = tell.send(Heard::Closed(slot));
                });
            }
            let stderr = Arc::new(Mutex::new(VecDeque::new()));
            if let Some(err) = child.stderr.take() {
                let kept = Arc::clone(&stderr);
                std::thread::spawn(move || {
                    for line in BufReader::new(err).lines() {
                        let Ok(line) = line else { break };
                        if let Ok(mut kept) = kept.lock() {
                            if kept.len() == STDERR_LINES {
                                kept.pop_front();
                            }
                            kept.push_back(line);
                        }
                    }
                });
            }
            processes.push(Process {
                child,
                stdin,
                stderr,
                alive: true,
            });
        }
        Ok(Processes {
            queued: vec![String::new(); processes.len()],
            processes,
            heard,
        })
    }

    fn queue(&mut self, slot: usize, line: &str) {
        if let Some(queued) = self.queued.get_mut(slot) {
            queued.push_str(line);
            queued.push('\n');
        }
    }

    /// Writes every queued line.
    async fn flush(&mut self) -> Result<(), LoadError> {
        for (slot, process) in self.processes.iter_mut().enumerate() {
            let lines = std::mem::take(&mut self.queued[slot]);
            if lines.is_empty() || !process.alive {
                continue;
            }
            if let Some(stdin) = process.stdin.as_ref() {
                if stdin.send(lines).is_err() {
                    return Err(LoadError::WorkerProcess {
                        slot,
                        what: "its stdin closed".to_owned(),
                        stderr: process.stderr(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The next thing heard, `None` once `deadline` passed. A worker that closes its stdout
    /// while it should be alive is an error.
    async fn next(&mut self, deadline: Instant) -> Result<Option<(usize, String)>, LoadError> {
        loop {
            let heard = tokio::time::timeout_at(deadline.into(), self.heard.recv()).await;
            match heard {
                Err(_) => return Ok(None),
                Ok(None) => {
                    return Err(LoadError::Task("the workers' readers ended".to_owned()));
                }
                Ok(Some(Heard::Line(slot, line))) => return Ok(Some((slot, line))),
                Ok(Some(Heard::Closed(slot))) => {
                    let Some(process) = self.processes.get_mut(slot) else {
                        continue;
                    };
                    if !process.alive {
                        continue;
                    }
                    let status = process.child.wait().map_or_else(
                        |error| format!("status unknown: {error}"),
                        |status| status.to_string(),
                    );
                    // Let its stderr reader take its last lines.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return Err(LoadError::WorkerProcess {
                        slot,
                        what: format!("exited ({status}) before the run ended"),
                        stderr: process.stderr(),
                    });
                }
            }
        }
    }

    /// Kills the worker in `slot` with SIGKILL and reaps it.
    async fn kill(&mut self, slot: usize) -> Result<(), LoadError> {
        let Some(process) = self.processes.get_mut(slot) else {
            return Ok(());
        };
        process.alive = false;
        process.stdin = None;
        // `Child::kill` is SIGKILL on Unix.
        process
            .child
            .kill()
            .map_err(|error| LoadError::WorkerProcess {
                slot,
                what: format!("SIGKILL failed ({error})"),
                stderr: String::new(),
            })?;
        let _ = process.child.wait();
        Ok(())
    }

    /// Closes every live worker's stdin and waits for each to exit (killing one that takes
    /// longer than [`STOP_TIMEOUT`]); the `stats` lines they printed.
    async fn stop(&mut self) -> Vec<serde_json::Value> {
        for process in &mut self.processes {
            process.stdin = None;
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        let mut stats = Vec::new();
        let mut open = self.processes.iter().filter(|p| p.alive).count();
        while open > 0 {
            let heard = tokio::time::timeout_at(deadline.into(), self.heard.recv()).await;
            match heard {
                Ok(Some(Heard::Line(_, line))) => {
                    if let Some(json) = line.strip_prefix("stats ") {
                        if let Ok(value) = serde_json::from_str(json) {
                            stats.push(value);
                        }
                    }
                }
                Ok(Some(Heard::Closed(slot))) => {
                    if self.processes.get(slot).is_some_and(|p| p.alive) {
                        open -= 1;
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        for process in &mut self.processes {
            if process.alive {
                let waited = Instant::now();
                while matches!(process.child.try_wait(), Ok(None))
                    && waited.elapsed() < Duration::from_secs(1)
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if matches!(process.child.try_wait(), Ok(None)) {
                    let _ = process.child.kill();
                }
                let _ = process.child.wait();
                process.alive = false;
            }
        }
        stats
    }
}

/// The `p`-th quantile of `sorted` (nearest rank).
fn quantile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1);
    sorted.get(index).copied().unwrap_or_default()
}

/// Refuses a fail-over that cannot run.
fn check(failover: &Failover) -> Result<(), LoadError> {
    if failover.workers < 2
        || failover.sessions < failover.workers
        || failover.sessions > MAX_SESSIONS
        || failover.lease.is_zero()
    {
        return Err(LoadError::FailoverShape {
            workers: failover.workers,
            sessions: failover.sessions,
        });
    }
    Ok(())
}

/// Runs the fail-over (see the module's documentation), reporting progress lines to
/// `progress` (`opened N`, `warm`, `killed`, `served N`).
pub async fn failover(
    failover: &Failover,
    progress: impl Fn(&str) + Send,
) -> Result<FailoverReport, LoadError> {
    check(failover)?;
    let prefix = format!("load-{}-", run_id());
    let mut options = StoreOptions::owned_by(format!("{prefix}client"));
    options.pool_size = 2;
    // Connecting migrates the schema once, before the workers start.
    let store = Store::connect(&failover.url, options).await?;
    let started = Instant::now();
    let mut processes = Processes::start(failover, &prefix).await?;
    let result = measure(failover, &prefix, &mut processes, started, &progress).await;
    let stats = processes.stop().await;
    let (served_again, unserved, acknowledged, warm, killed_sessions) = result?;
    // Every survivor printed its stats as it stopped (it released its sessions).
    if stats.len() + 1 < failover.workers {
        return Err(LoadError::FailoverTimeout {
            what: format!(
                "{} of {} surviving workers stopping",
                failover.workers - 1 - stats.len(),
                failover.workers - 1
            ),
        });
    }
    let (lost, doubled, takeovers) = check_logs(&store, &prefix, &acknowledged).await?;
    let mut sorted = served_again;
    sorted.sort_unstable();
    Ok(FailoverReport {
        prefix,
        warm,
        killed_sessions,
        p50: quantile(&sorted, 0.50),
        p99: quantile(&sorted, 0.99),
        max: sorted.last().copied().unwrap_or_default(),
        served_again: sorted,
        unserved,
        acknowledged: acknowledged.len(),
        lost,
        doubled,
        takeovers,
    })
}

/// Opens every session and sends it one follow-up (a turn of one step), until every one is
/// acknowledged.
async fn warm_up(
    sessions: &[String],
    index: &BTreeMap<&str, usize>,
    route: &[usize],
    processes: &mut Processes,
    progress: &(impl Fn(&str) + Send),
    acknowledged: &mut Vec<(String, String)>,
) -> Result<(), LoadError> {
    let deadline = Instant::now()
        + Duration::from_secs(120)
        + Duration::from_millis(20)
            .saturating_mul(u32::try_from(sessions.len()).unwrap_or(u32::MAX));
    for (i, session) in sessions.iter().enumerate() {
        processes.queue(route[i], &format!("open {session}"));
    }
    processes.flush().await?;
    let (mut to_open, mut to_ack) = (sessions.len(), sessions.len());
    while to_ack > 0 {
        let Some((slot, line)) = processes.next(deadline).await? else {
            return Err(LoadError::FailoverTimeout {
                what: format!(
                    "{to_open} of {} sessions not opened, {to_ack} first follow-ups not \
                     acknowledged",
                    sessions.len()
                ),
            });
        };
        let words: Vec<&str> = line.splitn(3, ' ').collect();
        match words[..] {
            ["opened", session] => {
                if let Some(&i) = index.get(session) {
                    to_open -= 1;
                    processes.queue(route[i], &format!("followup {session} w{i}"));
                    if to_open.is_multiple_of(1000) {
                        progress(&format!("opened {}", sessions.len() - to_open));
                    }
                }
            }
            ["open-failed", session, error] => {
                return Err(LoadError::WorkerProcess {
                    slot,
                    what: format!("opening {session} failed: {error}"),
                    stderr: String::new(),
                })
            }
            _ => {
                if let Some(i) = acked(&line, 'w') {
                    to_ack -= 1;
                    acknowledged.push((sessions[i].clone(), format!("w{i}")));
                } else if let Some(i) = failed(&line, 'w') {
                    // Not delivered (it changed nothing): again, a moment later.
                    tokio::time::sleep(CLAIM_TICK).await;
                    processes.queue(route[i], &format!("followup {} w{i}", sessions[i]));
                }
            }
        }
        processes.flush().await?;
    }
    Ok(())
}

/// What [`measure`] found: the served-again times, the unserved count, every acknowledged
/// `(session, id)`, the warm-up time, and the killed worker's session count.
type Measured = (Vec<Duration>, usize, Vec<(String, String)>, Duration, usize);

/// Opens and warms every session, kills worker 0, and times its sessions' follow-ups.
async fn measure(
    failover: &Failover,
    prefix: &str,
    processes: &mut Processes,
    started: Instant,
    progress: &(impl Fn(&str) + Send),
) -> Result<Measured, LoadError> {
    let sessions: Vec<String> = (0..failover.sessions)
        .map(|i| format!("{prefix}{i}"))
        .collect();
    let index: BTreeMap<&str, usize> = sessions
        .iter()
        .enumerate()
        .map(|(i, session)| (session.as_str(), i))
        .collect();
    // Where each session is served: its slot.
    let mut route: Vec<usize> = (0..sessions.len()).map(|i| i % failover.workers).collect();
    let mut acknowledged = Vec::with_capacity(sessions.len() * 2);

    // Open, then one follow-up each (a turn of one step), every one acknowledged.
    warm_up(
        &sessions,
        &index,
        &route,
        processes,
        progress,
        &mut acknowledged,
    )
    .await?;
    let warm = started.elapsed();
    progress("warm");

    // Kill worker 0; a follow-up to each of its sessions, sent to whichever survivor claims it.
    let killed: Vec<usize> = (0..sessions.len())
        .filter(|i| route[*i] == KILLED)
        .collect();
    let killed_at = Instant::now();
    processes.kill(KILLED).await?;
    progress("killed");
    let mut served: BTreeMap<usize, Duration> = BTreeMap::new();
    // Follow-ups waiting for a live route: not sent, or refused.
    let mut unsent: std::collections::BTreeSet<usize> = killed.iter().copied().collect();
    let deadline = killed_at + failover.lease + Duration::from_secs(60);
    let mut retry_at = Instant::now() + CLAIM_TICK;
    while served.len() < killed.len() {
        if Instant::now() >= retry_at {
            // Refused follow-ups whose session a live worker serves again: sent again.
            for &i in &unsent {
                if route[i] != KILLED {
                    processes.queue(route[i], &format!("followup {} f{i}", sessions[i]));
                }
            }
            unsent.retain(|&i| route[i] == KILLED);
            processes.flush().await?;
            retry_at = Instant::now() + CLAIM_TICK;
        }
        let Some((slot, line)) = processes.next(retry_at.min(deadline)).await? else {
            if Instant::now() >= deadline {
                break;
            }
            continue;
        };
        if let Some(session) = line.strip_prefix("claimed ") {
            if let Some(&i) = index.get(session) {
                route[i] = slot;
                if unsent.remove(&i) {
                    processes.queue(slot, &format!("followup {session} f{i}"));
                    processes.flush().await?;
                }
            }
        } else if let Some(i) = acked(&line, 'f') {
            if served.insert(i, killed_at.elapsed()).is_none() {
                acknowledged.push((sessions[i].clone(), format!("f{i}")));
                if served.len().is_multiple_of(500) {
                    progress(&format!("served {}", served.len()));
                }
            }
        } else if let Some(i) = failed(&line, 'f') {
            if !served.contains_key(&i) {
                unsent.insert(i);
            }
        }
    }
    // Let the turns the last follow-ups woke end before the workers stop (a worker stopping
    // leaves a running turn open, for the next open to close `interrupted`).
    tokio::time::sleep(failover.step.saturating_mul(4) + SETTLE).await;
    let unserved = killed.len() - served.len();
    Ok((
        served.into_values().collect(),
        unserved,
        acknowledged,
        warm,
        killed.len(),
    ))
}

/// `i` of `acked {kind}{i}`.
fn acked(line: &str, kind: char) -> Option<usize> {
    line.strip_prefix("acked ")?
        .strip_prefix(kind)?
        .parse()
        .ok()
}

/// `i` of `failed {kind}{i} …`.
fn failed(line: &str, kind: char) -> Option<usize> {
    line.strip_prefix("failed ")?
        .split(' ')
        .next()?
        .strip_prefix(kind)?
        .parse()
        .ok()
}

/// Reads the run's logs back: how many acknowledged deliveries are missing from their session's
/// log, how many are in it more than once, and how many takeovers the sessions saw (every epoch
/// after a session's first).
async fn check_logs(
    store: &Store,
    prefix: &str,
    acknowledged: &[(String, String)],
) -> Result<(usize, usize, usize), LoadError> {
    let client = store.client_for_tools().await?;
    let rows = client
        .query(
            "SELECT session, m->>'id', count(*) FROM coxswain.records,
                 jsonb_array_elements(data->'inserted') AS m
             WHERE type = 'agent/inbox/spliced' AND starts_with(session, $1) GROUP BY 1, 2",
            &[&prefix],
        )
        .await
        .map_err(PgError::from)?;
    let mut inserted: BTreeMap<(String, String), i64> = BTreeMap::new();
    for row in rows {
        let (session, id, count): (String, Option<String>, i64) =
            (row.get(0), row.get(1), row.get(2));
        if let Some(id) = id {
            inserted.insert((session, id), count);
        }
    }
    let (mut lost, mut doubled) = (0, 0);
    for key in acknowledged {
        match inserted.get(key) {
            None => lost += 1,
            Some(1) => {}
            Some(_) => doubled += 1,
        }
    }
    let takeovers: i64 = client
        .query_one(
            "SELECT coalesce(sum(epoch - 1), 0)::bigint FROM coxswain.sessions
             WHERE starts_with(session, $1)",
            &[&prefix],
        )
        .await
        .map_err(PgError::from)?
        .get(0);
    Ok((lost, doubled, takeovers.max(0) as usize))
}
