//! `coxswain`: the command-line tool of the coxswain delivery state machine.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod check;
mod conform;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Conform { files } => conform::run(&files),
        Command::Check(args) => check::run(&args),
    }
}
