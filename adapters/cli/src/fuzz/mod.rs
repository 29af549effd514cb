//! `coxswain fuzz --exec CMD --sessions N --seed S`: random sessions on a port and on the core
//! side by side; the first divergence is shrunk ([`shrink`]) to a minimal trace, recorded on the
//! core, written to `--out`.
//!
//! Sessions draw their inputs as the property tests do (`coxswain_conformance::generate`: the
//! same weighted choices, guarded sends (S54), message pool and delivery memories), and an
//! admission bound (S55, `generate::MAX_PENDING`), from a deterministic generator seeded by
//! `--seed` and the session's number. The core decides what each choice means (the
//! request it answers, the batch it enters); the port gets the same inputs and must answer each
//! exactly as the core did.
//!
//! §13 on top of that distribution (which the property tests share, so it is left as it is):
//! a `resume` input (S57) before a choice in one case of 16, drawn from a stream of its own (so
//! the choices are the same as without it), and after every input the query `fate` (S58) of
//! one pool id in turn (`m0`, `m1`, … after the first, second, … input), whose answer the port
//! must give as the core does; the written trace holds the same `fate` lines.

mod shrink;

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use coxswain_conformance::generate::{self, Choice, MAX_PENDING, MEMORY};
use coxswain_conformance::{
    output_json, replay, replay_on, Given, Recorder, Subject, Trace, TraceError,
};
use coxswain_core::{Batch, Config, Effect, Input, Machine, MessageId, Output, Request};
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
        let mut resumes = Rng::new(args.seed ^ RESUME_STREAM, number);
        let session = Session::draw(&mut rng, &mut resumes, args.max_inputs);
        match session.run(&mut exec) {
            Ok(inputs) => total += inputs,
            Err(Divergence { inputs, what }) => {
                println!(
                    "session {number} ({}): diverged at input {}: {what}",
                    describe(session.machine),
                    inputs.len()
                );
                return report(&mut exec, session.machine, inputs, args);
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

/// "delivery memory W", with ", max pending P" for a bounded machine (S55).
fn describe(machine: Settings) -> String {
    match machine.max_pending {
        Some(limit) => format!("delivery memory {}, max pending {limit}", machine.memory),
        None => format!("delivery memory {}", machine.memory),
    }
}

/// Shrinks a divergence, writes its trace and says how it fails on the port.
fn report(exec: &mut Exec, machine: Settings, inputs: Vec<Input>, args: &FuzzArgs) -> ExitCode {
    let found = inputs.len();
    let mut fails = |machine: Settings, candidate: &[Input]| {
        let trace = record(machine, candidate, "candidate");
        Trace::parse(&trace).is_ok_and(|trace| replay_on(&trace, exec).is_err())
    };
    // The simplest machine first: no delivery memory, then no bound, if the divergence does
    // not need them.
    let mut machine = machine;
    let simpler = Settings {
        memory: 0,
        ..machine
    };
    if simpler != machine && fails(simpler, &inputs) {
        machine = simpler;
    }
    let simpler = Settings {
        max_pending: None,
        ..machine
    };
    if simpler != machine && fails(simpler, &inputs) {
        machine = simpler;
    }
    let (inputs, tries) = shrink::shrink(inputs, |candidate| fails(machine, candidate));
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
    let text = record(machine, &inputs, &note);
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

/// The trace the core records for `inputs` on a fresh machine with these settings, with the
/// `fate` line a session asks after each input ([`fate_asked`]).
fn record(machine: Settings, inputs: &[Input], note: &str) -> String {
    let mut recorder = Recorder::with_config(note, machine.config());
    for (index, input) in inputs.iter().enumerate() {
        // A rejection is recorded as the trace's `rejected` line.
        let _ = recorder.input(input.clone());
        recorder.fate(&fate_asked(index));
    }
    recorder.finish()
}

/// The pool id whose fate (S58) a session asks after its input number `index` (from 0): each
/// id in turn.
fn fate_asked(index: usize) -> String {
    format!("m{}", index % usize::from(generate::POOL))
}

/// Seeds the stream that places `resume` inputs (S57), apart from the choices' stream.
const RESUME_STREAM: u64 = 0x5EED_0000_0000_0057;

/// One `resume` (S57) in this many steps of a session.
const RESUME_ONE_IN: u64 = 16;

/// A session's step: a choice of the shared distribution, or a `resume` (S57).
#[derive(Clone, Copy, Debug)]
enum Step {
    Choice(Choice),
    Resume,
}

/// The host's choices for a session's machine: its delivery memory (S51) and admission bound
/// (S55), which the `begin` request's `given` carries to the port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Settings {
    memory: usize,
    max_pending: Option<NonZeroUsize>,
}

impl Settings {
    fn config(self) -> Config {
        let config = Config::new().with_delivery_memory(self.memory);
        match self.max_pending {
            Some(limit) => config.with_max_pending(limit),
            None => config,
        }
    }
}

/// One random session: its machine's settings and its steps.
struct Session {
    machine: Settings,
    steps: Vec<Step>,
}

/// A weighted pick from a table of `(weight, value)`.
fn pick<T: Copy + Default>(rng: &mut Rng, table: &[(u32, T)]) -> T {
    let total: u32 = table.iter().map(|(weight, _)| weight).sum();
    let mut pick = u32::try_from(rng.below(u64::from(total))).unwrap_or_default();
    for &(weight, value) in table {
        if pick < weight {
            return value;
        }
        pick -= weight;
    }
    T::default()
}

/// The inputs up to and including the one the port answered differently, and how.
struct Divergence {
    inputs: Vec<Input>,
    what: String,
}

impl Session {
    fn draw(rng: &mut Rng, resumes: &mut Rng, max_inputs: u64) -> Session {
        let memory = pick(rng, &MEMORY);
        let max_pending = pick(rng, &MAX_PENDING);
        let length = 1 + rng.below(max_inputs.max(1));
        let choices = (0..length)
            .map(|_| {
                let code = u16::try_from(rng.below(u64::from(Choice::CODES))).unwrap_or_default();
                let arg = u8::try_from(rng.below(256)).unwrap_or_default();
                Choice::decode(code, arg)
            })
            // One machine's life: crash and restore checks are not inputs.
            .filter(|choice| !matches!(choice, Choice::CheckRestore | Choice::Crash));
        let mut steps = Vec::new();
        for choice in choices {
            if resumes.below(RESUME_ONE_IN) == 0 {
                steps.push(Step::Resume);
            }
            steps.push(Step::Choice(choice));
        }
        Session {
            machine: Settings {
                memory,
                max_pending,
            },
            steps,
        }
    }

    /// Runs the session on the core and the port; the number of inputs, or the divergence.
    fn run(&self, exec: &mut Exec) -> Result<usize, Divergence> {
        // The machine a trace with these settings' `given` line restores (FORMAT.md).
        let settings = self.machine;
        let config = settings.config();
        let (mut machine, given) = if settings
            == (Settings {
                memory: 0,
                max_pending: None,
            }) {
            (Machine::new(), None)
        } else {
            let machine = Machine::restore_with(config, &[], 0)
                .unwrap_or_else(|_| Machine::with_config(config));
            (machine, Some(settings))
        };
        let mut inputs = Vec::with_capacity(self.steps.len());
        let diverged = |inputs: &Vec<Input>, what: String| Divergence {
            inputs: inputs.clone(),
            what,
        };
        let started = exec.begin(
            given
                .map(|settings| Given {
                    log: &[],
                    seed_length: 0,
                    memory: settings.memory,
                    max_pending: settings.max_pending,
                    repair: None,
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
        for &step in &self.steps {
            let input = match step {
                Step::Choice(choice) => generate::input(choice, &machine, &claimed),
                Step::Resume => Input::Resume {},
            };
            inputs.push(input.clone());
            let core: Result<Vec<Value>, String> = match machine.handle(input.clone()) {
                Ok(transition) => {
                    let outputs: Vec<Output> = transition.into_outputs().collect();
                    for output in &outputs {
                        if let Output::Effect(Effect::Request(Request::PreStep {
                            messages, ..
                        })) = output
                        {
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
            // S58: the fate of one pool id, on both sides.
            let id = fate_asked(inputs.len() - 1);
            let core = machine.fate(&MessageId::new(id.as_str())).to_json();
            match exec.fate(&id) {
                Ok(port) if port == core => {}
                Ok(_) => {
                    return Err(diverged(
                        &inputs,
                        format!("the port answered fate({id:?}) differently"),
                    ))
                }
                Err(failure) => {
                    return Err(diverged(
                        &inputs,
                        format!("{}{}", failure.what, failure.tail),
                    ))
                }
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
