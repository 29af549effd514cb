//! `coxswain`: the command-line tool of the coxswain delivery state machine.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check;
mod conform;
mod exec;
mod fate;
mod fuzz;
mod load;
mod logfile;
mod pg;
mod port;
mod run;
mod traces;
mod verify;
mod view;

/// Drive, check and verify the coxswain delivery state machine.
#[derive(Parser, Debug)]
#[command(name = "coxswain", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay conformance traces (FORMAT.md) against the real machine.
    Conform {
        /// Trace files (`.jsonl`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Replay on a port instead: `sh -c CMD` speaking docs/PORTS.md's line protocol.
        #[arg(long, value_name = "CMD")]
        exec: Option<String>,
        /// With --exec: seconds to wait for each reply before the port counts as silent.
        #[arg(long, default_value = "10", value_parser = conform::parse_timeout)]
        timeout: std::time::Duration,
    },
    /// Export what the model checker explores at a bound as a conformance suite: the shortest
    /// path to every core state and every distinct transition (docs/PORTS.md).
    Traces(traces::TracesArgs),
    /// Random sessions on a port and on the core side by side; the first divergence is shrunk
    /// and written as a trace (docs/PORTS.md).
    Fuzz(fuzz::FuzzArgs),
    /// The core's own end of docs/PORTS.md's line protocol, on stdin/stdout.
    Port,
    /// Model-check the real core (stateright) at a bound and print what it proved.
    Check(check::CheckArgs),
    /// Run a scripted agent session on the tokio adapter and print its timeline.
    Run {
        /// The session script (JSON; see examples/ and the top of adapters/cli/src/run/mod.rs).
        script: PathBuf,
        /// Where to write the JSON-lines log (default: a new temp dir, removed when the run
        /// ends); an existing log is resumed (the run says so first).
        /// A `postgres://…` URL writes to PostgreSQL (with `--session`).
        #[arg(long)]
        log: Option<PathBuf>,
        /// With a `postgres://…` log: the session to run (taken under a new epoch).
        #[arg(long)]
        session: Option<String>,
        /// Crash repair's redelivery allowance (S59), 0..=1000: when the log ends inside a turn,
        /// put back what that turn claimed that no model call saw, at most N times per id.
        #[arg(long, value_name = "N", default_value = "0", value_parser = fate::parse_redelivery)]
        redelivery: u64,
        /// Send `resume` (S57) once the agent is open (and at every reopen): parked work runs
        /// without waiting for a new waking send.
        #[arg(long)]
        resume_on_open: bool,
    },
    /// Load-test the durable path on your disk: deliveries/s, p50/p99 acknowledgement latency,
    /// and the fsync floor measured in the same run.
    Load(load::LoadArgs),
    /// One worker process of `coxswain load --failover` (started by it).
    #[command(hide = true, name = "load-worker")]
    LoadWorker(load::WorkerArgs),
    /// List the sessions of a PostgreSQL log: owner, epoch, lease, length.
    Sessions {
        /// The database: `postgres://…`.
        url: String,
    },
    /// Manage durable logs.
    #[command(subcommand)]
    Log(LogCommand),
    /// Check a durable log (JSON lines) against I1, I2, I5 and the splice rules; a shared
    /// segment log per session; a PostgreSQL log per session. Exit status: 0 ok, 1 violation,
    /// 2 needs crash repair.
    Verify {
        /// The log file (a session's log, or a shared segment log), or a `postgres://…` URL.
        log: PathBuf,
        /// In a segment log or a database: audit only this session (default: every session,
        /// one line each).
        #[arg(long)]
        session: Option<String>,
    },
    /// Print what became of message ID (S58) as one JSON line, from a log it never writes.
    ///
    /// Pending, claimed (turn, first step that carried it, the turn's end), discarded or
    /// unknown, as the log restores (a turn left open is read as crash repair would close it).
    Fate(fate::FateArgs),
    /// Write one self-contained HTML page that shows a session's log: turns and steps as
    /// lanes, the depth of both lists, each message's life, the auditor's verdict.
    View(view::ViewArgs),
}

/// `coxswain log …`.
#[derive(Subcommand, Debug)]
enum LogCommand {
    /// Copy a session's records between a JSON-lines file and PostgreSQL (either way) into an
    /// empty log.
    Copy {
        /// The source: a file, or a `postgres://…` URL (with `--session`).
        from: PathBuf,
        /// The target: a file, or a `postgres://…` URL (with `--session`); must be empty.
        to: PathBuf,
        /// The session, on the PostgreSQL side(s).
        #[arg(long)]
        session: Option<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Conform {
            files, exec: None, ..
        } => conform::run(&files),
        Command::Conform {
            files,
            exec: Some(command),
            timeout,
        } => conform::run_exec(&command, timeout, &files),
        Command::Port => port::run(),
        Command::Traces(args) => traces::run(&args),
        Command::Fuzz(args) => fuzz::run(&args),
        Command::Run {
            script,
            log,
            session,
            redelivery,
            resume_on_open,
        } => {
            let open = run::Open {
                redelivery,
                resume_on_open,
            };
            run::run(&script, log.as_deref(), session.as_deref(), open)
        }
        Command::Verify { log, session } if pg::is_postgres(&log) => {
            pg::verify(&log.to_string_lossy(), session.as_deref())
        }
        Command::Verify { log, session } => verify::run(&log, session.as_deref()),
        Command::Sessions { url } => pg::sessions(&url),
        Command::Log(LogCommand::Copy { from, to, session }) => {
            pg::copy(&from, &to, session.as_deref())
        }
        Command::Check(args) => check::run(&args),
        Command::Load(args) => load::run_load(&args),
        Command::LoadWorker(args) => load::run_worker(&args),
        Command::View(args) => view::run(&args),
        Command::Fate(args) => fate::run(&args),
    }
}
