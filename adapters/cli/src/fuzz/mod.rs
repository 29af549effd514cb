//! `coxswain fuzz --exec CMD --sessions N --seed S`: random sessions on a port and on the core
//! side by side; the first divergence is shrunk ([`shrink`]) to a minimal trace, recorded on the
//! core, written to `--out`.
//!
//! Sessions draw their inputs as the property tests do (`coxswain_conformance::generate`: the
//! same weighted choices, message pool and delivery memories), from a deterministic generator
//! seeded by `--seed` and the session's number. The core decides what each choice means (the
//! request it answers, the batch it enters); the port gets the same inputs and must answer each
//! exactly as the core did.

mod shrink;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use coxswain_conformance::generate::{self, Choice, MEMORY};
use coxswain_conformance::{
    output_json, replay, replay_on, Given, Recorder, Subject, Trace, TraceError,
};
use coxswain_core::{Batch, Config, Input, Machine, Output, Request};
use serde_json::Value;

use crate::exec::Exec;

/// Flags of `coxswain fuzz`.
#[derive(Args, Debug)]
pub(crate) struct FuzzArgs {
    /// The port: `sh -c CMD` speaking docs/PORTS.md's line protocol.
    #[arg(long, value_name = "CMD")]
    exec: String,
    /// Random sessions to run.
    #[arg(long, default_value_t = 100)]
    sessions: u64,
    /// The generator's seed: the same seed, the same sessions.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The longest session, in inputs.
    #[arg(long, default_value_t = 300)]
    max_inputs: u64,
    /// Where to write the shrunk divergence (a FORMAT.md trace).
    #[arg(long, default_value = "divergence.jsonl")]
    out: PathBuf,
    /// Seconds to wait for each reply before the port counts as silent.
    #[arg(long, default_value = "10", value_parser = crate::conform::parse_timeout)]
    timeout: Duration,
}

pub(crate) fn run(args: &FuzzArgs) -> ExitCode {
    let mut exec = match Exec::start(&args.exec, args.timeout) {
        Ok(exec) => exec,
        Err(error) => {
            println!("{error}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "fuzz: port {}, {} sessions, seed {}",
        exec.describe(),
        args.sessions,
        args.seed
    );
    let mut total = 0;
    for number in 1..=args.sessions {
        let mut rng = Rng::new(args.seed, number);
        let session = Session::draw(&mut rng, args.max_inputs);
        match session.run(&mut exec) {
            Ok(inputs) => total += inputs,
            Err(Divergence { inputs, what }) => {
                println!(
                    "session {number} (delivery memory {}): diverged at input {}: {what}",
                    session.memory,
                    inputs.len()
                );
                return report(&mut exec, session.memory, inputs, args);
            }
        }
        if let Some(mismatch) = exec.mismatch() {
            println!("{mismatch}");
            return ExitCode::FAILURE;
        }
    }
    println!(
        "{} sessions, {total} inputs: the port answered every one as the core did",
        args.sessions
    );
    let _ = exec.finish();
    ExitCode::SUCCESS
}

/// Shrinks a divergence, writes its trace and says how it fails on the port.
fn report(exec: &mut Exec, memory: usize, inputs: Vec<Input>, args: &FuzzArgs) -> ExitCode {
    let found = inputs.len();
    let mut fails = |memory: usize, candidate: &[Input]| {
        let trace = record(memory, candidate, "candidate");
        Trace::parse(&trace).is_ok_and(|trace| replay_on(&trace, exec).is_err())
    };
    // The simplest machine first: no delivery memory, if the divergence does not need one.
    let memory = if memory > 0 && fails(0, &inputs) {
        0
    } else {
        memory
    };
    let (inputs, tries) = shrink::shrink(inputs, |candidate| fails(memory, candidate));
    println!(
        "shrunk {found} inputs to {} ({tries} candidates tried)",
        inputs.len()
    );
    let note = format!(
        "coxswain fuzz --seed {}: a divergence of port `{}`, shrunk to {} inputs; replays on \
         the core",
        args.seed,
        exec.describe(),
        inputs.len()
    );
    let text = record(memory, &inputs, &note);
    if let Err(error) = std::fs::write(&args.out, &text) {
        println!("cannot write {}: {error}", args.out.display());
        return ExitCode::FAILURE;
    }
    let on_core = Trace::parse(&text).and_then(|trace| replay(&trace));
    let on_port = Trace::parse(&text).and_then(|trace| replay_on(&trace, exec));
    println!(
        "wrote {} ({} inputs): on the core {}; on the port {}",
        args.out.display(),
        inputs.len(),
        outcome(&on_core),
        outcome(&on_port)
    );
    ExitCode::FAILURE
}

fn outcome(result: &Result<coxswain_conformance::Replayed, TraceError>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(error) => format!("FAIL {error}"),
    }
}

/// The trace the core records for `inputs` on a fresh machine with delivery memory `memory`.
fn record(memory: usize, inputs: &[Input], note: &str) -> String {
    let mut recorder = Recorder::with_config(note, config(memory));
    for input in inputs {
        // A rejection is recorded as the trace's `rejected` line.
        let _ = recorder.input(input.clone());
    }
    recorder.finish()
}

fn config(memory: usize) -> Config {
    Config::new().with_delivery_memory(memory)
}

/// One random session: its delivery memory and its choices.
struct Session {
    memory: usize,
    choices: Vec<Choice>,
}

/// The inputs up to and including the one the port answered differently, and how.
struct Divergence {
    inputs: Vec<Input>,
    what: String,
}

impl Session {
    fn draw(rng: &mut Rng, max_inputs: u64) -> Session {
        let total: u32 = MEMORY.iter().map(|(weight, _)| weight).sum();
        let mut pick = u32::try_from(rng.below(u64::from(total))).unwrap_or_default();
        let mut memory = 0;
        for (weight, w) in MEMORY {
            if pick < weight {
                memory = w;
                break;
            }
            pick -= weight;
        }
        let length = 1 + rng.below(max_inputs.max(1));
        let choices = (0..length)
            .map(|_| {
                let code = u16::try_from(rng.below(u64::from(Choice::CODES))).unwrap_or_default();
                let arg = u8::try_from(rng.below(256)).unwrap_or_default();
                Choice::decode(code, arg)
            })
            // One machine's life: crash and restore checks are not inputs.
            .filter(|choice| !matches!(choice, Choice::CheckRestore | Choice::Crash))
            .collect();
        Session { memory, choices }
    }

    /// Runs the session on the core and the port; the number of inputs, or the divergence.
    fn run(&self, exec: &mut Exec) -> Result<usize, Divergence> {
        // The machine a trace with this memory's `given` line restores (FORMAT.md).
        let (mut machine, given) = if self.memory == 0 {
            (Machine::new(), None)
        } else {
            let machine = Machine::restore_with(config(self.memory), &[], 0)
                .unwrap_or_else(|_| Machine::with_config(config(self.memory)));
            (machine, Some(self.memory))
        };
        let mut inputs = Vec::with_capacity(self.choices.len());
        let diverged = |inputs: &Vec<Input>, what: String| Divergence {
            inputs: inputs.clone(),
            what,
        };
        let started = exec.begin(
            given
                .map(|memory| Given {
                    log: &[],
                    seed_length: 0,
                    memory,
                })
                .as_ref(),
        );
        match started {
            Ok(Ok(())) => {}
            Ok(Err(rejection)) => return Err(diverged(&inputs, format!("begin {rejection}"))),
            Err(failure) => {
                return Err(diverged(
                    &inputs,
                    format!("{}{}", failure.what, failure.tail),
                ))
            }
        }
        let mut claimed = Batch::new();
        for &choice in &self.choices {
            let input = generate::input(choice, &machine, &claimed);
            inputs.push(input.clone());
            let core: Result<Vec<Value>, String> = match machine.handle(input.clone()) {
                Ok(transition) => {
                    let outputs: Vec<Output> = transition.into_outputs().collect();
                    for output in &outputs {
                        if let Output::Request(Request::PreStep { messages, .. }) = output {
                            claimed = messages.clone();
                        }
                    }
                    Ok(outputs.iter().map(output_json).collect())
                }
                Err(rejection) => Err(rejection.kind().to_owned()),
            };
            let port = match exec.input(&input) {
                Ok(answer) => answer.map_err(|rejection| rejection.kind),
                Err(failure) => {
                    return Err(diverged(
                        &inputs,
                        format!("{}{}", failure.what, failure.tail),
                    ))
                }
            };
            if port != core {
                return Err(diverged(&inputs, "the port answered differently".into()));
            }
        }
        Ok(inputs.len())
    }
}

/// SplitMix64: a small deterministic generator (no dependency, same numbers everywhere).
struct Rng(u64);

impl Rng {
    fn new(seed: u64, session: u64) -> Rng {
        let mut rng = Rng(seed ^ session.wrapping_mul(0xA076_1D64_78BD_642F));
        rng.next();
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `bound` (> 0).
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}
