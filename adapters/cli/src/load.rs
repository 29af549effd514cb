//! `coxswain load --log PATH --agents N --senders K --messages M [--shared] [--json]`: a load
//! generator for the durable path on the user's own disk. N agents, each on its own `FileLog` in
//! the directory PATH (`agent-I.jsonl`, replaced) — or, with `--shared`, each a session of one
//! shared segment log `PATH/segment.jsonl` (one sync for many sessions) — each fed by K concurrent senders sending M quiet deliveries
//! (`inject`) one after the other. Prints deliveries per second, the p50 and p99 time from a call
//! to its acknowledgement, and the fsync floor measured in the same run: the same bytes written
//! to one file with one `write` + `fdatasync` per group of `min(N × K, --max-batch)` deliveries.
//! `--json` prints one object instead (`deliveries_per_s`, `p50_ms`, `p99_ms`, `floor_per_s`,
//! and the details). `postgres://…` is the PostgreSQL log's (not supported yet).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, ValueEnum};
use coxswain_tokio::load::{run, Load, LoadReport};
use coxswain_tokio::{Options, SyncPolicy};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

/// The arguments of `coxswain load`.
#[derive(Args, Debug)]
pub(crate) struct LoadArgs {
    /// Where the logs go: a directory for the agents' JSON-lines logs (created if needed).
    /// `postgres://…` is for the PostgreSQL log (not supported yet).
    #[arg(long)]
    log: String,
    /// Agents, each on its own log.
    #[arg(long, default_value_t = 1)]
    agents: usize,
    /// Concurrent senders per agent.
    #[arg(long, default_value_t = 64)]
    senders: usize,
    /// Messages per sender.
    #[arg(long, default_value_t = 1000)]
    messages: usize,
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
}

/// `SyncPolicy` on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Sync {
    EveryAppend,
    PerTurn,
    Never,
}

/// Why the arguments cannot run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Postgres,
    Zero,
    MaxBatch,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Postgres => write!(
                f,
                "postgres:// logs are not supported yet (the PostgreSQL log is its own issue); \
                 pass a directory"
            ),
            Refused::Zero => write!(f, "--agents, --senders and --messages must be at least 1"),
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
        if self.log.starts_with("postgres://") || self.log.starts_with("postgresql://") {
            return Err(Refused::Postgres);
        }
        if self.agents == 0 || self.senders == 0 || self.messages == 0 {
            return Err(Refused::Zero);
        }
        if !(1..=Options::MAX_CAPACITY).contains(&self.max_batch) {
            return Err(Refused::MaxBatch);
        }
        Ok(Load {
            dir: PathBuf::from(&self.log),
            agents: self.agents,
            senders: self.senders,
            messages: self.messages,
            max_batch: self.max_batch,
            policy: match self.sync {
                Sync::EveryAppend => SyncPolicy::EveryAppend,
                Sync::PerTurn => SyncPolicy::PerTurn,
                Sync::Never => SyncPolicy::Never,
            },
            shared: self.shared,
        })
    }
}

pub(crate) fn run_load(args: &LoadArgs) -> ExitCode {
    let load = match args.load() {
        Ok(load) => load,
        Err(refused) => {
            eprintln!("coxswain load: {refused}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("coxswain load: cannot start a runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let total = (load.agents * load.senders * load.messages) as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("  {bar:40} {pos}/{len} deliveries, {per_sec}, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress = Arc::new(AtomicU64::new(0));
    let result = runtime.block_on(async {
        let ticker = {
            let (bar, progress) = (bar.clone(), Arc::clone(&progress));
            tokio::spawn(async move {
                loop {
                    let done = progress.load(Ordering::Relaxed);
                    bar.set_position(done);
                    if done >= total {
                        bar.set_message("measuring the floor");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
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
    json!({
        "deliveries_per_s": report.deliveries_per_s,
        "p50_ms": ms(report.p50),
        "p99_ms": ms(report.p99),
        "floor_per_s": report.floor_per_s,
        "agents": load.agents,
        "senders": load.senders,
        "messages": load.messages,
        "max_batch": load.max_batch,
        "shared": load.shared,
        "deliveries": report.deliveries,
        "elapsed_s": report.elapsed.as_secs_f64(),
        "syncs": report.syncs,
        "bytes": report.bytes,
        "floor_group": report.floor_group,
    })
}

fn print_text(load: &Load, report: &LoadReport) {
    println!(
        "{} agents × {} senders × {} messages (max batch {}, {}): {} deliveries in {:.2} s",
        load.agents,
        load.senders,
        load.messages,
        load.max_batch,
        if load.shared {
            "one shared segment log"
        } else {
            "a log file each"
        },
        report.deliveries,
        report.elapsed.as_secs_f64()
    );
    println!(
        "  {:.0} deliveries/s; acknowledged in p50 {:.3} ms, p99 {:.3} ms",
        report.deliveries_per_s,
        ms(report.p50),
        ms(report.p99)
    );
    println!(
        "  {} syncs ({:.1} deliveries per sync), {} bytes ({} per delivery)",
        report.syncs,
        report.deliveries as f64 / report.syncs.max(1) as f64,
        report.bytes,
        report.bytes / report.deliveries.max(1)
    );
    println!(
        "  floor (same bytes, one write + fdatasync per {} deliveries): {:.0}/s; the run reached {:.0} % of it",
        report.floor_group,
        report.floor_per_s,
        100.0 * report.deliveries_per_s / report.floor_per_s.max(1e-9)
    );
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
    fn postgres_is_refused_as_not_supported_yet() {
        let args = parse(&["--log", "postgres://localhost/db", "--agents", "2"]);
        assert_eq!(args.load().unwrap_err(), Refused::Postgres);
        assert!(Refused::Postgres.to_string().contains("not supported yet"));
    }

    #[test]
    fn zero_counts_and_a_zero_batch_are_refused() {
        let args = parse(&["--log", "/tmp/x", "--senders", "0"]);
        assert_eq!(args.load().unwrap_err(), Refused::Zero);
        let args = parse(&["--log", "/tmp/x", "--max-batch", "0"]);
        assert_eq!(args.load().unwrap_err(), Refused::MaxBatch);
        let load = parse(&["--log", "/tmp/x", "--agents", "3", "--messages", "5"])
            .load()
            .unwrap();
        assert_eq!((load.agents, load.senders, load.messages), (3, 64, 5));
        assert_eq!(load.max_batch, 64);
        assert_eq!(load.policy, SyncPolicy::EveryAppend);
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
        let progress = Arc::new(AtomicU64::new(0));
        let report = runtime.block_on(run(&load, Arc::clone(&progress))).unwrap();
        assert_eq!(report.deliveries, 24);
        assert_eq!(progress.load(Ordering::Relaxed), 24);
        assert_eq!(report.floor_group, 6);
        assert!(report.p50 <= report.p99);
        let object = to_json(&load, &report);
        for key in ["deliveries_per_s", "p50_ms", "p99_ms", "floor_per_s"] {
            assert!(
                object[key].as_f64().unwrap() > 0.0 || key.ends_with("ms"),
                "{key}"
            );
        }
        // Every agent's log holds its 12 deliveries, and verifies.
        for i in 0..2 {
            let bytes = std::fs::read(dir.path().join(format!("agent-{i}.jsonl"))).unwrap();
            assert_eq!(coxswain_log::parse(&bytes).unwrap().records.len(), 12);
            assert!(matches!(
                crate::verify::verify_bytes(&bytes),
                crate::verify::Verdict::Ok { events: 12, .. }
            ));
        }
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
        assert!(load.shared);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let report = runtime
            .block_on(run(&load, Arc::new(AtomicU64::new(0))))
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
