//! `coxswain traces --messages N --operations K --out DIR`: what the model checker explores at a
//! bound, exported as a conformance suite (FORMAT.md) a port can be held to.
//!
//! [`explore()`] searches breadth-first and keeps the shortest input path to every core state and
//! to every distinct (state, input) transition (the model's actions include guarded sends with
//! right and stale expectations, S54, and an id reused for a different message, S56); only
//! maximal paths become traces, each recorded on the real core ([`Recorder`]), so their outputs
//! are the core's. `--max-pending` gives the machines an admission bound (S55), recorded as the
//! traces' `given.maxPending`. Each trace ends with a `fate` line for every pool id (S58), the
//! core's answer where the path ends, so a port's records are held to it too (the model's
//! actions include `resume`, S57). Same arguments, same files.

mod explore;

use std::num::NonZeroU8;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use coxswain_checker::{Bound, DeliveryModel};
use coxswain_conformance::Recorder;

use explore::explore;

/// Flags of `coxswain traces`.
#[derive(Args, Debug)]
pub(crate) struct TracesArgs {
    /// Message ids in the pool.
    #[arg(long, default_value_t = 2)]
    messages: u8,
    /// Environment operations per path (deliveries, edits, cancels, maintenance, dispose); the
    /// suite grows about tenfold per operation (docs/PORTS.md has the counts).
    #[arg(long, default_value_t = 2)]
    operations: u8,
    /// `continue` answers per path.
    #[arg(long, default_value_t = 1)]
    tool_steps: u8,
    /// The delivery memory's capacity W (S51; 0 is plain S9).
    #[arg(long, default_value_t = 0)]
    memory: u8,
    /// The admission bound P (S55): a send or prepend into a list holding P items is refused
    /// `full`. Omitted: unbounded.
    #[arg(long, value_name = "P")]
    max_pending: Option<NonZeroU8>,
    /// The directory to write `trace-NNNN.jsonl` files to (created; its old `trace-*.jsonl`
    /// files are removed first).
    #[arg(long)]
    out: PathBuf,
}

impl TracesArgs {
    /// The model's bound (crash-restore off: a trace is one machine's life; the corpus covers
    /// restores).
    fn bound(&self) -> Bound {
        Bound {
            messages: self.messages,
            operations: self.operations,
            tool_steps: self.tool_steps,
            crashes: false,
            memory: self.memory,
            max_pending: self.max_pending.map_or(0, NonZeroU8::get),
        }
    }
}

pub(crate) fn run(args: &TracesArgs) -> ExitCode {
    let model = DeliveryModel::new(args.bound());
    let explored = explore(&model);
    let paths = explored.paths();
    let bounded = args
        .max_pending
        .map_or_else(String::new, |limit| format!(", max pending {limit}"));
    println!(
        "bound: {} message ids, {} operations, {} tool steps, delivery memory {}{bounded}",
        args.messages, args.operations, args.tool_steps, args.memory
    );
    println!("explored {} model states", explored.model_states);
    println!(
        "covered {} core states, {} transitions ({} rejected)",
        explored.states, explored.transitions, explored.rejections
    );
    match write(&model, &paths, args.messages, &args.out, &command(args)) {
        Ok(inputs) => {
            println!(
                "wrote {} traces ({inputs} inputs) to {}",
                paths.len(),
                args.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("coxswain traces: {}: {error}", args.out.display());
            ExitCode::FAILURE
        }
    }
}

/// The command line that makes this suite, for each trace's note.
fn command(args: &TracesArgs) -> String {
    let bounded = args
        .max_pending
        .map_or_else(String::new, |limit| format!(" --max-pending {limit}"));
    format!(
        "coxswain traces --messages {} --operations {} --tool-steps {} --memory {}{bounded}",
        args.messages, args.operations, args.tool_steps, args.memory
    )
}

/// Records every path on the real core, then the fate of each pool id `m1`..`mN` where it ends
/// (S58), and writes it; returns the inputs written.
fn write(
    model: &DeliveryModel,
    paths: &[Vec<coxswain_core::Input>],
    messages: u8,
    out: &Path,
    command: &str,
) -> std::io::Result<usize> {
    std::fs::create_dir_all(out)?;
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.starts_with("trace-") && name.ends_with(".jsonl") {
            std::fs::remove_file(&path)?;
        }
    }
    let width = paths.len().to_string().len().max(4);
    let mut inputs = 0;
    for (index, path) in paths.iter().enumerate() {
        let number = index + 1;
        let note = format!(
            "{command}: path {number} of {} (breadth-first shortest paths to every state and \
             transition, PORTS.md)",
            paths.len()
        );
        let mut recorder = Recorder::with_config(&note, model.config());
        for input in path {
            // A rejection is recorded as the trace's `rejected` line.
            let _ = recorder.input(input.clone());
        }
        for id in 1..=messages {
            recorder.fate(&format!("m{id}"));
        }
        inputs += path.len();
        std::fs::write(
            out.join(format!("trace-{number:0width$}.jsonl")),
            recorder.finish(),
        )?;
    }
    Ok(inputs)
}
