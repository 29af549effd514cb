//! `coxswain load --log PATH [--agents N] [--senders K] [--seconds S | --messages M]
//! [--workload W] [--shared] [--json]`: a load generator for the durable path on the user's own
//! disk. N agents (default 1), each on its own `FileLog` in the directory PATH (`agent-I.jsonl`,
//! replaced) — or, with `--shared`, each a session of one shared segment log
//! `PATH/segment.jsonl` (one sync for many sessions) — each fed by K concurrent senders
//! (default 64) delivering one message after the other for S seconds (default 5), or M messages
//! each. The workload (`replace`, the default and only one so far) keeps every list bounded:
//! a sender's first message is a quiet `inject` into the next-step list and each later one
//! `replace`s its previous message, so every call is one delivery and one durable record, no
//! turn runs, and a list holds at most one message per sender, however long the run.
//! Prints deliveries per second, the p50 and p99 time from a call to its acknowledgement, and
//! the fsync floor measured in the same run: records of the run's size written to one file with
//! one `write` + `fdatasync` per group of `min(N × K, --max-batch)` deliveries, as many as the
//! run wrote (at most as long as the run took). A progress bar shows on a terminal.
//! `--json` prints one object instead (`deliveries_per_s`, `p50_ms`, `p99_ms`, `floor_per_s`,
//! and the details). With `postgres://…`, `--workers W` workers in this process (each its own pool, lease and
//! committer) serve the sessions, and the floor is single-row `INSERT` transactions of the same rows.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use coxswain_load::failover::{serve_worker, Failover, FailoverReport, WorkerConfig};
use coxswain_load::{run, Length, Load, LoadReport, Progress, Target, Turns, Workload};
use coxswain_tokio::{Options, SyncPolicy};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

/// The default length of a run without `--messages`, in seconds: long enough for a stable
/// figure.
const DEFAULT_SECONDS: f64 = 5.0;

/// The longest `--seconds` (a day).
const MAX_SECONDS: f64 = 86_400.0;

/// The arguments of `coxswain load`.
#[derive(Args, Debug)]
pub(crate) struct LoadArgs {
    /// Where the logs go: a directory for the agents' JSON-lines logs (created if needed), or
    /// a `postgres://…` database whose sessions workers serve.
    #[arg(long)]
    log: String,
    /// Agents (sessions), each on its own log.
    #[arg(long, visible_alias = "sessions", default_value_t = 1)]
    agents: usize,
    /// Workers serving the sessions (PostgreSQL only): each its own pool, lease and committer.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Concurrent senders per agent (each keeps one message pending: at most 10000).
    #[arg(long, default_value_t = 64)]
    senders: usize,
    /// How long the senders go on, in seconds (unless --messages is given).
    #[arg(long, default_value_t = DEFAULT_SECONDS)]
    seconds: f64,
    /// Messages per sender: a fixed count instead of --seconds.
    #[arg(long, conflicts_with = "seconds")]
    messages: Option<usize>,
    /// What every sender does: `replace` injects one quiet message into the next-step list,
    /// then replaces it with each next one (one delivery and one record per call, no turn);
    /// `turns` sends follow-ups that wake turns of a scripted host, steers and cancels.
    #[arg(long, value_enum, default_value_t = WorkloadArg::Replace)]
    workload: WorkloadArg,
    /// With `--workload turns`: how long each step takes, in milliseconds.
    #[arg(long, default_value_t = 5)]
    step_ms: u64,
    /// With `--workload turns`: every this-many-th call is a steer (0: never).
    #[arg(long, default_value_t = 4)]
    steer_every: usize,
    /// With `--workload turns`: every this-many-th call is a cancel keeping the inbox (0: never).
    #[arg(long, default_value_t = 50)]
    cancel_every: usize,
    /// The most inputs per append (group commit); 1 appends and syncs once per input.
    #[arg(long, default_value_t = Options::DEFAULT_MAX_BATCH)]
    max_batch: usize,
    /// When the logs sync.
    #[arg(long, value_enum, default_value_t = Sync::EveryAppend)]
    sync: Sync,
    /// One shared segment log (`segment.jsonl` in the directory) for every agent, each its own
    /// session, instead of a file per agent (it syncs every commit: `--sync` does not apply).
    #[arg(long)]
    shared: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Measure a fail-over instead (a `postgres://…` database, `--workers` of at least 2): the
    /// workers run as processes of their own, every session gets a follow-up, worker 0 is
    /// killed with SIGKILL, and each of its sessions gets a follow-up that a surviving worker
    /// must acknowledge once it took the session over; prints p50/p99/max of that time and the
    /// acknowledged deliveries lost (exit status 1 unless 0 lost and every session served).
    #[arg(long, conflicts_with_all = [
        "senders", "seconds", "messages", "workload", "steer_every", "cancel_every",
        "max_batch", "sync", "shared",
    ])]
    failover: bool,
    /// With `--failover`: the workers' lease, in milliseconds.
    #[arg(long, requires = "failover", default_value_t = DEFAULT_FAILOVER_LEASE_MS)]
    lease_ms: u64,
}

/// The workers' lease of a fail-over run without `--lease-ms`.
const DEFAULT_FAILOVER_LEASE_MS: u64 = 1_500;

/// The longest `--lease-ms` (an hour).
const MAX_LEASE_MS: u64 = 3_600_000;

/// The arguments of the hidden `coxswain load-worker`: one worker process of
/// `coxswain load --failover`, which starts it (`coxswain_load::failover`).
#[derive(Args, Debug)]
pub(crate) struct WorkerArgs {
    /// The database.
    #[arg(long)]
    log: String,
    /// The run's session prefix: the only sessions this worker claims.
    #[arg(long)]
    run: String,
    /// This worker's owner id.
    #[arg(long)]
    owner: String,
    /// The lease, in milliseconds.
    #[arg(long)]
    lease_ms: u64,
    /// The most sessions claimed per tick.
    #[arg(long)]
    claim: usize,
    /// How long each step of the scripted host takes, in milliseconds.
    #[arg(long)]
    step_ms: u64,
}

/// `SyncPolicy` on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Sync {
    EveryAppend,
    PerTurn,
    Never,
}

/// `Workload` on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum WorkloadArg {
    Replace,
    Turns,
}

/// Why the arguments cannot run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Failover,
    LeaseMs,
    Postgres,
    Workers,
    Zero,
    Senders,
    Seconds,
    MaxBatch,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Failover => write!(
                f,
                "--failover needs a postgres:// database, --workers of at least 2 (one is \
                 killed, the others take its sessions over) and --sessions from --workers to \
                 {}",
                coxswain_load::failover::MAX_SESSIONS
            ),
            Refused::LeaseMs => write!(f, "--lease-ms must be within 1..={MAX_LEASE_MS}"),
            Refused::Postgres => write!(
                f,
                "--shared and --sync are for log files; a postgres:// database's sessions are \
                 written by their workers' committers"
            ),
            Refused::Workers => write!(
                f,
                "--workers is for a postgres:// database and must be at least 1"
            ),
            Refused::Zero => write!(f, "--agents, --senders and --messages must be at least 1"),
            Refused::Senders => write!(
                f,
                "--senders must be within 1..={} (each sender keeps one message pending)",
                Options::DEFAULT_MAX_PENDING
            ),
            Refused::Seconds => write!(f, "--seconds must be above 0 and at most {MAX_SECONDS}"),
            Refused::MaxBatch => write!(
                f,
                "--max-batch must be within 1..={}",
                Options::MAX_CAPACITY
            ),
        }
    }
}

impl LoadArgs {
    pub(crate) fn load(&self) -> Result<Load, Refused> {
        let postgres = self.log.starts_with("postgres://") || self.log.starts_with("postgresql://");
        if postgres && (self.shared || !matches!(self.sync, Sync::EveryAppend)) {
            return Err(Refused::Postgres);
        }
        if self.workers == 0 || (!postgres && self.workers != 1) {
            return Err(Refused::Workers);
        }
        if self.agents == 0 || self.senders == 0 || self.messages == Some(0) {
            return Err(Refused::Zero);
        }
        if self.senders > Options::DEFAULT_MAX_PENDING {
            return Err(Refused::Senders);
        }
        if !(1..=Options::MAX_CAPACITY).contains(&self.max_batch) {
            return Err(Refused::MaxBatch);
        }
        let length = match self.messages {
            Some(messages) => Length::Messages(messages),
            None if self.seconds > 0.0 && self.seconds <= MAX_SECONDS => {
                match Duration::try_from_secs_f64(self.seconds) {
                    Ok(duration) if !duration.is_zero() => Length::Duration(duration),
                    _ => return Err(Refused::Seconds),
                }
            }
            None => return Err(Refused::Seconds),
        };
        let target = if postgres {
            Target::Postgres {
                url: self.log.clone(),
                workers: self.workers,
            }
        } else {
            Target::Files {
                dir: PathBuf::from(&self.log),
                policy: match self.sync {
                    Sync::EveryAppend => SyncPolicy::EveryAppend,
                    Sync::PerTurn => SyncPolicy::PerTurn,
                    Sync::Never => SyncPolicy::Never,
                },
                shared: self.shared,
            }
        };
        Ok(Load {
            target,
            agents: self.agents,
            senders: self.senders,
            length,
            workload: match self.workload {
                WorkloadArg::Replace => Workload::Replace,
                WorkloadArg::Turns => Workload::Turns(Turns {
                    step: Duration::from_millis(self.step_ms),
                    steer_every: self.steer_every,
                    cancel_every: self.cancel_every,
                }),
            },
            max_batch: self.max_batch,
        })
    }
}

/// The progress bar: deliveries out of the total for a count, seconds for a duration.
fn progress_bar(load: &Load) -> ProgressBar {
    let (len, template) = match load.length {
        Length::Messages(messages) => (
            load.agents
                .saturating_mul(load.senders)
                .saturating_mul(messages) as u64,
            "  {bar:40} {pos}/{len} deliveries, {per_sec}, {msg}",
        ),
        Length::Duration(duration) => (duration.as_millis() as u64, "  {bar:40} {msg}"),
    };
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Moves the bar along until the run ends.
async fn tick(bar: ProgressBar, load: Load, progress: Arc<Progress>) {
    let start = Instant::now();
    loop {
        let done = progress.deliveries();
        match load.length {
            Length::Messages(_) => bar.set_position(done),
            Length::Duration(duration) => {
                let elapsed = start.elapsed().min(duration);
                bar.set_position(elapsed.as_millis() as u64);
                if !progress.measuring_floor() {
                    bar.set_message(format!(
                        "{:.1}/{} s, {done} deliveries, {:.0}/s",
                        elapsed.as_secs_f64(),
                        duration.as_secs_f64(),
                        done as f64 / elapsed.as_secs_f64().max(1e-3)
                    ));
                }
            }
        }
        if progress.measuring_floor() {
            bar.set_message(format!("{done} deliveries; measuring the floor"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl LoadArgs {
    /// The fail-over to measure, whose workers are `worker` (a program and its first
    /// arguments).
    pub(crate) fn failover(
        &self,
        worker: (PathBuf, Vec<String>),
    ) -> Result<coxswain_load::failover::Failover, Refused> {
        let postgres = self.log.starts_with("postgres://") || self.log.starts_with("postgresql://");
        if !postgres
            || self.workers < 2
            || self.agents < self.workers
            || self.agents > coxswain_load::failover::MAX_SESSIONS
        {
            return Err(Refused::Failover);
        }
        if !(1..=MAX_LEASE_MS).contains(&self.lease_ms) {
            return Err(Refused::LeaseMs);
        }
        Ok(coxswain_load::failover::Failover {
            url: self.log.clone(),
            workers: self.workers,
            sessions: self.agents,
            lease: Duration::from_millis(self.lease_ms),
            step: Duration::from_millis(self.step_ms),
            command: worker,
        })
    }
}

/// A runtime for a run, or the exit status of its failure.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("coxswain load: cannot start a runtime: {error}");
            ExitCode::FAILURE
        })
}

/// `coxswain load --failover`.
fn run_failover(args: &LoadArgs) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(error) => {
            eprintln!("coxswain load: cannot find this program to start its workers: {error}");
            return ExitCode::FAILURE;
        }
    };
    let failover = match args.failover((exe, vec!["load-worker".to_owned()])) {
        Ok(failover) => failover,
        Err(refused) => {
            eprintln!("coxswain load: {refused}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let result = runtime.block_on(coxswain_load::failover::failover(&failover, |step| {
        if terminal {
            eprintln!("  {step}");
        }
    }));
    match result {
        Ok(report) => {
            if args.json {
                println!("{}", failover_json(&failover, &report));
            } else {
                print_failover(&failover, &report);
            }
            if report.lost == 0 && report.doubled == 0 && report.unserved == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("coxswain load: {error}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn failover_json(failover: &Failover, report: &FailoverReport) -> serde_json::Value {
    json!({
        "sessions": failover.sessions,
        "workers": failover.workers,
        "lease_ms": failover.lease.as_millis() as u64,
        "warm_s": report.warm.as_secs_f64(),
        "killed_sessions": report.killed_sessions,
        "served_again": report.served_again.len(),
        "unserved": report.unserved,
        "p50_ms": ms(report.p50),
        "p99_ms": ms(report.p99),
        "max_ms": ms(report.max),
        "acknowledged": report.acknowledged,
        "lost": report.lost,
        "doubled": report.doubled,
        "takeovers": report.takeovers,
        "run": report.prefix,
    })
}

fn print_failover(failover: &Failover, report: &FailoverReport) {
    println!(
        "fail-over: {} sessions on {} worker processes, lease {} ms; opened and warm in {:.2} s",
        failover.sessions,
        failover.workers,
        failover.lease.as_millis(),
        report.warm.as_secs_f64()
    );
    println!(
        "  kill -9 of worker 0 serving {} sessions: {} served again by the survivors, {} not",
        report.killed_sessions,
        report.served_again.len(),
        report.unserved
    );
    println!(
        "  served again after p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms from the kill \
         (lease + 2 s = {} ms)",
        ms(report.p50),
        ms(report.p99),
        ms(report.max),
        failover.lease.as_millis() + 2_000
    );
    println!(
        "  {} deliveries acknowledged: {} lost, {} doubled; {} takeovers",
        report.acknowledged, report.lost, report.doubled, report.takeovers
    );
}

/// `coxswain load-worker`: one worker process of `coxswain load --failover`, on stdin and
/// stdout.
pub(crate) fn run_worker(args: &WorkerArgs) -> ExitCode {
    let config = WorkerConfig {
        url: args.log.clone(),
        prefix: args.run.clone(),
        owner: args.owner.clone(),
        lease: Duration::from_millis(args.lease_ms),
        claim: args.claim,
        step: Duration::from_millis(args.step_ms),
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let stdin = std::io::BufReader::new(std::io::stdin());
    match runtime.block_on(serve_worker(&config, stdin, std::io::stdout())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("coxswain load-worker {}: {error}", args.owner);
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn run_load(args: &LoadArgs) -> ExitCode {
    if args.failover {
        return run_failover(args);
    }
    let load = match args.load() {
        Ok(load) => load,
        Err(refused) => {
            eprintln!("coxswain load: {refused}");
            return ExitCode::from(2);
        }
    };
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let bar = progress_bar(&load);
    let progress = Arc::new(Progress::default());
    let result = runtime.block_on(async {
        let ticker = tokio::spawn(tick(bar.clone(), load.clone(), Arc::clone(&progress)));
        let result = run(&load, Arc::clone(&progress)).await;
        ticker.abort();
        result
    });
    bar.finish_and_clear();
    match result {
        Ok(report) => {
            if args.json {
                println!("{}", to_json(&load, &report));
            } else {
                print_text(&load, &report);
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("coxswain load: {error}");
            ExitCode::FAILURE
        }
    }
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

pub(crate) fn to_json(load: &Load, report: &LoadReport) -> serde_json::Value {
    let (messages, seconds) = match load.length {
        Length::Messages(messages) => (Some(messages), None),
        Length::Duration(duration) => (None, Some(duration.as_secs_f64())),
    };
    json!({
        "deliveries_per_s": report.deliveries_per_s,
        "p50_ms": ms(report.p50),
        "p99_ms": ms(report.p99),
        "floor_per_s": report.floor_per_s,
        "workload": load.workload.name(),
        "agents": load.agents,
        "senders": load.senders,
        "messages": messages,
        "seconds": seconds,
        "max_batch": load.max_batch,
        "shared": matches!(load.target, Target::Files { shared: true, .. }),
        "workers": match load.target {
            Target::Postgres { workers, .. } => Some(workers),
            _ => None,
        },
        "deliveries": report.deliveries,
        "turns": report.turns,
        "turns_per_s": report.turns_per_s,
        "steps": report.steps,
        "steers": report.steers,
        "cancels": report.cancels,
        "records": report.records,
        "statements": report.statements.map(|s| s.sent.statements),
        "statements_per_s": report.statements.map(|s| s.per_s),
        "lease_renewals": report.statements.map(|s| s.sent.lease_renewals),
        "lease_renewals_per_s": report.statements.map(|s| s.lease_renewals_per_s),
        "floor_concurrency": report.floor_concurrency,
        "elapsed_s": report.elapsed.as_secs_f64(),
        "syncs": report.syncs,
        "bytes": report.bytes,
        "floor_group": report.floor_group,
        "floor_groups": report.floor_groups,
        "floor_elapsed_s": report.floor_elapsed.as_secs_f64(),
    })
}

fn print_text(load: &Load, report: &LoadReport) {
    let length = match load.length {
        Length::Messages(messages) => format!("× {messages} calls"),
        Length::Duration(duration) => format!("for {} s", duration.as_secs_f64()),
    };
    let target = match &load.target {
        Target::Files { shared: true, .. } => "one shared segment log".to_owned(),
        Target::Files { .. } => "a log file each".to_owned(),
        Target::Postgres { workers, .. } => format!("PostgreSQL, {workers} workers"),
    };
    println!(
        "{} agents × {} senders {length} ({} workload, max batch {}, {target}): {} deliveries in {:.2} s",
        load.agents,
        load.senders,
        load.workload.name(),
        load.max_batch,
        report.deliveries,
        report.elapsed.as_secs_f64()
    );
    println!(
        "  {:.0} deliveries/s; acknowledged in p50 {:.3} ms, p99 {:.3} ms",
        report.deliveries_per_s,
        ms(report.p50),
        ms(report.p99)
    );
    if let Workload::Turns(_) = load.workload {
        println!(
            "  {} turns ({:.0}/s), {} steps, {} steers, {} cancels",
            report.turns, report.turns_per_s, report.steps, report.steers, report.cancels
        );
    }
    println!(
        "  {} syncs ({:.1} deliveries per sync), {} records, {} bytes ({} per record)",
        report.syncs,
        report.deliveries as f64 / report.syncs.max(1) as f64,
        report.records,
        report.bytes,
        report.bytes / report.records.max(1)
    );
    if let Some(statements) = report.statements {
        println!(
            "  {} statements ({:.0}/s), {} lease renewals ({:.2}/s)",
            statements.sent.statements,
            statements.per_s,
            statements.sent.lease_renewals,
            statements.lease_renewals_per_s
        );
    }
    let records_per_s = report.records as f64 / report.elapsed.as_secs_f64().max(1e-9);
    match load.target {
        Target::Postgres { .. } => println!(
            "  floor (the same rows, one INSERT transaction each on {} connections, {} rows in \
             {:.2} s): {:.0} rows/s; the run wrote {:.0} records/s, {:.0} % of it",
            report.floor_concurrency,
            report.floor_groups,
            report.floor_elapsed.as_secs_f64(),
            report.floor_per_s,
            records_per_s,
            100.0 * records_per_s / report.floor_per_s.max(1e-9)
        ),
        _ => println!(
            "  floor (the same record size, one write + fdatasync per {} records, {} groups in \
             {:.2} s): {:.0}/s; the run reached {:.0} % of it",
            report.floor_group,
            report.floor_groups,
            report.floor_elapsed.as_secs_f64(),
            report.floor_per_s,
            100.0 * report.deliveries_per_s / report.floor_per_s.max(1e-9)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    fn parse(args: &[&str]) -> LoadArgs {
        let mut all = vec!["load"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).unwrap().load
    }

    #[test]
    fn postgres_takes_workers_and_refuses_the_file_options() {
        let load = parse(&[
            "--log",
            "postgres://localhost/db",
            "--sessions",
            "2",
            "--workers",
            "3",
        ])
        .load()
        .unwrap();
        assert_eq!(
            load.target,
            Target::Postgres {
                url: "postgres://localhost/db".to_owned(),
                workers: 3
            }
        );
        assert_eq!(load.agents, 2);
        for extra in [&["--shared"][..], &["--sync", "never"][..]] {
            let mut args = vec!["--log", "postgres://localhost/db"];
            args.extend_from_slice(extra);
            assert_eq!(parse(&args).load().unwrap_err(), Refused::Postgres);
        }
        let args = parse(&["--log", "/tmp/x", "--workers", "2"]);
        assert_eq!(args.load().unwrap_err(), Refused::Workers);
        let args = parse(&["--log", "postgres://localhost/db", "--workers", "0"]);
        assert_eq!(args.load().unwrap_err(), Refused::Workers);
        // --lease-ms is --failover's alone; --failover takes none of the senders' flags.
        assert!(Cli::try_parse_from(["load", "--log", "x", "--lease-ms", "9"]).is_err());
        for extra in [
            "--seconds=1",
            "--messages=1",
            "--senders=1",
            "--workload=turns",
        ] {
            let both = Cli::try_parse_from(["load", "--log", "x", "--failover", extra]);
            assert!(both.is_err(), "{extra}");
        }
        let load = parse(&["--log", "/tmp/x", "--workload", "turns", "--step-ms", "7"])
            .load()
            .unwrap();
        assert_eq!(
            load.workload,
            Workload::Turns(Turns {
                step: Duration::from_millis(7),
                steer_every: 4,
                cancel_every: 50
            })
        );
    }

    #[test]
    fn a_failover_needs_postgres_two_workers_a_session_each_and_a_lease() {
        let worker = || (PathBuf::from("coxswain"), vec!["load-worker".to_owned()]);
        let failover = parse(&[
            "--log",
            "postgres://localhost/db",
            "--failover",
            "--workers",
            "3",
            "--sessions",
            "30",
        ])
        .failover(worker())
        .unwrap();
        assert_eq!(
            (
                failover.workers,
                failover.sessions,
                failover.lease,
                failover.step
            ),
            (
                3,
                30,
                Duration::from_millis(1_500),
                Duration::from_millis(5)
            )
        );
        for args in [
            &["--log", "/tmp/x", "--workers", "2", "--sessions", "2"][..],
            &[
                "--log",
                "postgres://h/db",
                "--workers",
                "1",
                "--sessions",
                "2",
            ][..],
            &[
                "--log",
                "postgres://h/db",
                "--workers",
                "3",
                "--sessions",
                "2",
            ][..],
            &[
                "--log",
                "postgres://h/db",
                "--workers",
                "3",
                "--sessions",
                "1000001",
            ][..],
        ] {
            let mut all = args.to_vec();
            all.push("--failover");
            assert_eq!(
                parse(&all).failover(worker()).unwrap_err(),
                Refused::Failover,
                "{args:?}"
            );
        }
        let args = parse(&[
            "--log",
            "postgres://h/db",
            "--failover",
            "--workers",
            "2",
            "--sessions",
            "2",
            "--lease-ms",
            "0",
        ]);
        assert_eq!(args.failover(worker()).unwrap_err(), Refused::LeaseMs);
        assert_eq!(
            Refused::Failover.to_string(),
            "--failover needs a postgres:// database, --workers of at least 2 (one is killed, the \
             others take its sessions over) and --sessions from --workers to 1000000"
        );
    }

    #[test]
    fn zero_counts_and_a_zero_batch_are_refused() {
        let args = parse(&["--log", "/tmp/x", "--senders", "0"]);
        assert_eq!(args.load().unwrap_err(), Refused::Zero);
        let args = parse(&["--log", "/tmp/x", "--messages", "0"]);
        assert_eq!(args.load().unwrap_err(), Refused::Zero);
        let args = parse(&["--log", "/tmp/x", "--max-batch", "0"]);
        assert_eq!(args.load().unwrap_err(), Refused::MaxBatch);
        let load = parse(&["--log", "/tmp/x", "--agents", "3", "--messages", "5"])
            .load()
            .unwrap();
        assert_eq!((load.agents, load.senders), (3, 64));
        assert_eq!(load.length, Length::Messages(5));
        assert_eq!(load.workload, Workload::Replace);
        assert_eq!(load.max_batch, 64);
        assert_eq!(load.target, Target::files("/tmp/x"));
    }

    #[test]
    fn the_defaults_run_for_five_seconds_and_bad_durations_are_refused() {
        let load = parse(&["--log", "/tmp/x"]).load().unwrap();
        assert_eq!((load.agents, load.senders), (1, 64));
        assert_eq!(load.length, Length::Duration(Duration::from_secs(5)));
        let load = parse(&["--log", "/tmp/x", "--seconds", "0.25"])
            .load()
            .unwrap();
        assert_eq!(load.length, Length::Duration(Duration::from_millis(250)));
        for seconds in ["0", "-1", "NaN", "inf", "86401", "1e-12"] {
            let args = parse(&["--log", "/tmp/x", &format!("--seconds={seconds}")]);
            assert_eq!(args.load().unwrap_err(), Refused::Seconds, "{seconds}");
        }
        assert_eq!(
            Refused::Seconds.to_string(),
            "--seconds must be above 0 and at most 86400"
        );
        let conflict =
            Cli::try_parse_from(["load", "--log", "x", "--seconds", "1", "--messages", "2"]);
        assert!(conflict.is_err());
    }

    #[test]
    fn more_senders_than_a_list_holds_are_refused() {
        let args = parse(&["--log", "/tmp/x", "--senders", "10001"]);
        assert_eq!(args.load().unwrap_err(), Refused::Senders);
        assert_eq!(
            Refused::Senders.to_string(),
            "--senders must be within 1..=10000 (each sender keeps one message pending)"
        );
        assert!(parse(&["--log", "/tmp/x", "--senders", "10000"])
            .load()
            .is_ok());
    }

    #[test]
    fn a_small_load_runs_and_reports_every_field() {
        let dir = tempfile::tempdir().unwrap();
        let load = parse(&[
            "--log",
            dir.path().to_str().unwrap(),
            "--agents",
            "2",
            "--senders",
            "3",
            "--messages",
            "4",
            "--sync",
            "never",
        ])
        .load()
        .unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let progress = Arc::new(Progress::default());
        let report = runtime.block_on(run(&load, Arc::clone(&progress))).unwrap();
        assert_eq!(report.deliveries, 24);
        assert_eq!(progress.deliveries(), 24);
        assert!(progress.measuring_floor());
        assert_eq!(report.floor_group, 6);
        assert!(report.floor_groups >= coxswain_load::FLOOR_MIN_GROUPS);
        assert!(report.p50 <= report.p99);
        let object = to_json(&load, &report);
        for key in ["deliveries_per_s", "p50_ms", "p99_ms", "floor_per_s"] {
            assert!(
                object[key].as_f64().unwrap() > 0.0 || key.ends_with("ms"),
                "{key}"
            );
        }
        assert_eq!(object["workload"], "replace");
        assert_eq!(object["messages"], 4);
        assert_eq!(object["seconds"], serde_json::Value::Null);
        // Every agent's log holds its 12 deliveries (each sender's inject, then 3 replaces),
        // and verifies; each list ends with one message per sender, the last it sent.
        for i in 0..2 {
            let bytes = std::fs::read(dir.path().join(format!("agent-{i}.jsonl"))).unwrap();
            let records = coxswain_log::parse(&bytes).unwrap().records;
            assert_eq!(records.len(), 12);
            let removed = records
                .iter()
                .filter(|r| r.event["data"]["removedCount"] == 1)
                .count();
            assert_eq!(removed, 9);
            assert!(matches!(
                crate::verify::verify_bytes(&bytes),
                crate::verify::Verdict::Ok { events: 12, .. }
            ));
            let events: Vec<serde_json::Value> = records.into_iter().map(|r| r.event).collect();
            let machine = coxswain_core::Machine::restore(&events, 0).unwrap();
            assert_eq!(machine.pending(coxswain_core::Target::NextTurn).len(), 0);
            let pending: Vec<String> = machine
                .pending(coxswain_core::Target::NextStep)
                .map(|item| item.message().id().to_string())
                .collect();
            let expected: Vec<String> = (0..3).map(|s| format!("a{i}s{s}m3")).collect();
            let mut sorted = pending.clone();
            sorted.sort();
            assert_eq!(sorted, expected, "{pending:?}");
        }
    }

    #[test]
    fn a_timed_load_goes_on_for_its_duration() {
        let dir = tempfile::tempdir().unwrap();
        let load = parse(&[
            "--log",
            dir.path().to_str().unwrap(),
            "--senders",
            "4",
            "--seconds",
            "0.3",
            "--sync",
            "never",
        ])
        .load()
        .unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let report = runtime
            .block_on(run(&load, Arc::new(Progress::default())))
            .unwrap();
        assert!(report.elapsed >= Duration::from_millis(300), "{report:?}");
        assert!(report.deliveries >= 4, "{report:?}");
        let object = to_json(&load, &report);
        assert_eq!(object["seconds"], 0.3);
        assert_eq!(object["messages"], serde_json::Value::Null);
        let bytes = std::fs::read(dir.path().join("agent-0.jsonl")).unwrap();
        assert!(matches!(
            crate::verify::verify_bytes(&bytes),
            crate::verify::Verdict::Ok { events, .. } if events as u64 == report.deliveries
        ));
    }

    #[test]
    fn a_shared_load_writes_one_segment_log_that_verifies_per_session() {
        let dir = tempfile::tempdir().unwrap();
        let load = parse(&[
            "--log",
            dir.path().to_str().unwrap(),
            "--agents",
            "3",
            "--senders",
            "2",
            "--messages",
            "4",
            "--shared",
        ])
        .load()
        .unwrap();
        assert!(matches!(load.target, Target::Files { shared: true, .. }));
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let report = runtime
            .block_on(run(&load, Arc::new(Progress::default())))
            .unwrap();
        assert_eq!(report.deliveries, 24);
        assert!(report.syncs >= 1 && report.syncs <= 24, "{}", report.syncs);
        assert_eq!(to_json(&load, &report)["shared"], true);
        assert!(!dir.path().join("agent-0.jsonl").exists());
        let bytes = std::fs::read(dir.path().join("segment.jsonl")).unwrap();
        assert_eq!(report.bytes, bytes.len() as u64);
        let crate::verify::SegmentVerdict::Sessions(verdicts) =
            crate::verify::verify_segment(&bytes, None)
        else {
            panic!("not split");
        };
        assert_eq!(verdicts.len(), 3);
        for (i, (session, verdict)) in verdicts.iter().enumerate() {
            assert_eq!(session, &format!("agent-{i}"));
            assert!(
                matches!(verdict, crate::verify::Verdict::Ok { events: 8, repair, .. } if repair.is_empty()),
                "{verdict:?}"
            );
        }
    }
}
