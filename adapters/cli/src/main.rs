//! `coxswain`: the command-line tool of the coxswain delivery state machine.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check;
mod conform;
mod load;
mod run;
mod sim;
mod verify;

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
    },
    /// Model-check the real core (stateright) at a bound and print what it proved.
    Check(check::CheckArgs),
    /// Run a scripted agent session on the tokio adapter and print its timeline.
    Run {
        /// The session script (JSON; see examples/ and the top of adapters/cli/src/run/mod.rs).
        script: PathBuf,
        /// Where to write the JSON-lines log (default: a new temp dir); an existing log is resumed.
        #[arg(long)]
        log: Option<PathBuf>,
    },
    /// Load-test the durable path on your disk: deliveries/s, p50/p99 acknowledgement latency,
    /// and the fsync floor measured in the same run.
    Load(load::LoadArgs),
    /// Check a durable log (JSON lines) against I1, I2, I5 and the splice rules; a shared
    /// segment log per session. Exit status: 0 ok, 1 violation, 2 needs crash repair.
    Verify {
        /// The log file (a session's log, or a shared segment log).
        log: PathBuf,
        /// In a segment log: audit only this session (default: every session, one line each).
        #[arg(long)]
        session: Option<String>,
    },
    /// Deterministic simulation of the tokio adapter: seeded clients, log and host faults,
    /// crashes at any await point; prints the totals (acknowledged inputs lost must be 0).
    Sim(sim::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Conform { files } => conform::run(&files),
        Command::Run { script, log } => run::run(&script, log.as_deref()),
        Command::Verify { log, session } => verify::run(&log, session.as_deref()),
        Command::Check(args) => check::run(&args),
        Command::Load(args) => load::run_load(&args),
        Command::Sim(args) => sim::run(&args),
    }
}
