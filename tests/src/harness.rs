//! The session driver shared by the property tests (`proptests`, `roundtrip`) and the `inputs`
//! fuzz target (`fuzz/fuzz_targets/inputs.rs` includes this file by path).
//!
//! A test generates a sequence of abstract [`Choice`]s; a [`Session`] maps each to a concrete
//! [`Input`] against the state the machine is in *at that point* (answer the outstanding request,
//! deliver message `m2`, …), so a shrunk sequence stays meaningful. Each input goes to the real
//! machine and to the executable spec ([`Spec`], the `coxswain-spec` crate) side by side:
//!
//! * the [`Monitor`] — the same invariant oracle the model checker uses — checks I1–I8, I10, S5,
//!   S10, S18, S33, S39 and S49 on the core's outputs and state;
//! * the core's outputs, serialized as FORMAT.md `out` values, must equal the spec's exactly,
//!   and so must the rejection kind, the pending lists, the status, quiescence and `lastTurn`;
//! * a rejected input must leave the machine unchanged: `==` on the machine is structural (the
//!   inbox's position keys and id index included), not the checker's [`Machine::behaviour`];
//! * at random points, a fresh machine (and spec) restored from the durable log so far, with
//!   crash repair's closers appended, must hold the live lists, `lastTurn` and delivery memory
//!   (S49, S53); and the process may crash, be repaired and go on from the restored machine (S50).
//!
//! A session has one delivery memory capacity `W` (S51) and one admission bound `P` (S55, or
//! none), given to the core, its monitor and the spec at creation and at every restore; the held
//! ids are one more projection compared.

use std::fmt;

use coxswain_checker::{Fact, Monitor, Violation};
use coxswain_core::{
    Batch, Config, Effect, Input, LogPosition, Machine, Output, Rejected, Request, Target,
};
use serde_json::{json, Value};

use coxswain_spec::Spec;

pub(crate) use coxswain_conformance::generate::Choice;

/// Which oracles a session applies (the seeded-bug tests prove each bites on its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Checks {
    /// The [`Monitor`]'s invariants, the byte-for-byte S5 check and the explicit S49 restores.
    pub(crate) invariants: bool,
    /// Exact agreement with the spec.
    pub(crate) differential: bool,
}

impl Checks {
    /// Every check.
    pub(crate) const ALL: Checks = Checks {
        invariants: true,
        differential: true,
    };
}

/// What went wrong at one choice. Both oracles are evaluated on every input, so a failure says
/// whether the invariants, the differential comparison, or both caught it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Failure {
    /// The 0-based index of the choice.
    pub(crate) at: usize,
    /// The input it mapped to, as an `"in"` value (none for a restore or crash).
    pub(crate) input: Option<Value>,
    /// A broken invariant (the monitor's, or the byte-for-byte S5 and explicit S49 checks).
    pub(crate) invariant: Option<String>,
    /// The monitor's violation, when it was the monitor.
    pub(crate) violation: Option<Violation>,
    /// How the core and the spec disagree.
    pub(crate) differential: Option<String>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "choice {}", self.at)?;
        if let Some(input) = &self.input {
            write!(f, " (in {input})")?;
        }
        if let Some(invariant) = &self.invariant {
            write!(f, "\n  invariant: {invariant}")?;
        }
        if let Some(differential) = &self.differential {
            write!(f, "\n  differential: {differential}")?;
        }
        Ok(())
    }
}

/// One machine, its monitor and the spec, driven side by side.
pub(crate) struct Session {
    checks: Checks,
    machine: Machine,
    monitor: Monitor,
    spec: Spec,
    /// The durable log so far as JSON (with crash repair's closers at each crash).
    log: Vec<Value>,
    /// Where the log stands (for crash repair's closers).
    position: LogPosition,
    /// The batch of the latest `preStep` request (what a host enters).
    claimed: Batch,
    /// The spec's FORMAT.md trace since the last crash, when recording.
    tape: Option<String>,
    note: String,
    /// Monitor facts seen so far (coverage).
    facts: Vec<Fact>,
    /// How many inputs the core rejected `already-delivered` (S52), for coverage.
    already_delivered: usize,
    choices: usize,
}

impl Session {
    /// A session of a fresh machine with no delivery memory.
    pub(crate) fn new(checks: Checks) -> Self {
        Session::with_memory(checks, 0)
    }

    /// A session of a fresh machine with a delivery memory of capacity `memory` (S51),
    /// unbounded.
    pub(crate) fn with_memory(checks: Checks, memory: usize) -> Self {
        Session::with_config(checks, Config::new().with_delivery_memory(memory))
    }

    /// A session of a fresh machine with the host's `config`: its delivery memory (S51) and its
    /// admission bound (S55). The core, its monitor and the spec are created, and restored at
    /// each crash, with it.
    pub(crate) fn with_config(checks: Checks, config: Config) -> Self {
        Session {
            checks,
            machine: Machine::with_config(config),
            monitor: Monitor::with_config(config),
            spec: Spec::with_config(spec_config(config)),
            log: Vec::new(),
            position: LogPosition::new(),
            claimed: Batch::new(),
            tape: None,
            note: String::new(),
            facts: Vec::new(),
            already_delivered: 0,
            choices: 0,
        }
    }

    /// The host's config of this session's machines (the delivery memory, S51, and the
    /// admission bound, S55).
    fn config(&self) -> Config {
        self.machine.config()
    }

    /// Records the spec's trace (FORMAT.md), starting with a note, then (with a delivery memory
    /// or a bound) the `given` line `{"memory": W, "maxPending": P}` of a fresh machine with
    /// them.
    pub(crate) fn record(mut self, note: &str) -> Self {
        self.note = note.to_owned();
        self.tape = Some(String::new());
        push_line(&mut self.tape, &json!({ "note": note }));
        let mut given = serde_json::Map::new();
        add_config(&mut given, self.config());
        if !given.is_empty() {
            push_line(&mut self.tape, &json!({ "given": given }));
        }
        self
    }

    /// The spec's trace since the last crash (with its `given` log), when recording.
    pub(crate) fn tape(&self) -> Option<&str> {
        self.tape.as_deref()
    }

    /// The machine.
    pub(crate) fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The durable log so far.
    pub(crate) fn log(&self) -> &[Value] {
        &self.log
    }

    /// Crash repair's closers for the log so far (S50), as JSON events.
    pub(crate) fn closers(&self) -> Vec<Value> {
        self.position.closers().iter().map(to_json).collect()
    }

    /// The monitor facts seen so far.
    pub(crate) fn facts(&self) -> &[Fact] {
        &self.facts
    }

    /// How many inputs so far were rejected `already-delivered` (S52).
    pub(crate) fn already_delivered(&self) -> usize {
        self.already_delivered
    }

    /// Runs every choice in order; the first failure stops the session.
    pub(crate) fn run(&mut self, choices: &[Choice]) -> Result<(), Failure> {
        for &choice in choices {
            self.step(choice)?;
        }
        Ok(())
    }

    /// Applies one choice and checks everything.
    pub(crate) fn step(&mut self, choice: Choice) -> Result<(), Failure> {
        let at = self.choices;
        self.choices += 1;
        let result = match choice {
            Choice::CheckRestore => self.check_restore(),
            Choice::Crash => self.crash(),
            _ => {
                let input = self.input(choice);
                self.apply(input)
            }
        };
        result.map_err(|mut failure| {
            failure.at = at;
            failure
        })
    }

    /// The input a choice stands for now ([`coxswain_conformance::generate::input`]).
    pub(crate) fn input(&self, choice: Choice) -> Input {
        coxswain_conformance::generate::input(choice, &self.machine, &self.claimed)
    }

    fn apply(&mut self, input: Input) -> Result<(), Failure> {
        let before = self.machine.clone();
        let (result, outputs): (Result<(), Rejected>, Vec<Output>) =
            match self.machine.handle(input.clone()) {
                Ok(transition) => (Ok(()), transition.into_outputs().collect()),
                Err(rejection) => (Err(rejection), Vec::new()),
            };
        if matches!(result, Err(Rejected::AlreadyDelivered(_))) {
            self.already_delivered += 1;
        }
        let input_json = to_json(&input);
        let mut failure = Failure {
            input: Some(input_json.clone()),
            ..Failure::default()
        };

        // The invariant oracle (the model checker's monitor), and S5 by structural equality.
        let observed = self
            .monitor
            .observe(&before, &input, &result, &outputs, &self.machine);
        if self.checks.invariants {
            if let Err(violation) = observed {
                failure.invariant = Some(violation.to_string());
                failure.violation = Some(violation);
            } else if result.is_err() && before != self.machine {
                failure.invariant = Some(format!(
                    "S5: the rejected input changed the machine\nbefore: {before:?}\nafter:  {:?}",
                    self.machine
                ));
            }
            self.collect_facts();
        }

        // The differential oracle: the spec on the same input.
        let core: Result<Vec<Value>, &'static str> = match &result {
            Ok(_) => Ok(outputs.iter().map(to_json).collect()),
            Err(rejection) => Err(rejection.kind()),
        };
        let spec = self.spec.apply(&input_json);
        push_line(&mut self.tape, &json!({ "in": input_json }));
        match &spec {
            Ok(outs) => {
                for out in outs {
                    push_line(&mut self.tape, &json!({ "out": out }));
                }
            }
            Err(kind) => push_line(&mut self.tape, &json!({ "rejected": kind })),
        }
        if self.checks.differential {
            if core != spec {
                failure.differential = Some(describe_difference(&core, &spec));
            } else if let Err(difference) = self.compare_projections() {
                failure.differential = Some(difference);
            }
        }

        // The host's side: append the events, remember the batch to enter.
        for output in &outputs {
            match output {
                Output::Event(event) => {
                    self.position.advance(event);
                    self.log.push(to_json(event));
                }
                Output::Effect(Effect::Request(Request::PreStep { messages, .. })) => {
                    self.claimed = messages.clone();
                }
                _ => {}
            }
        }
        if failure.invariant.is_some() || failure.differential.is_some() {
            return Err(failure);
        }
        Ok(())
    }

    fn collect_facts(&mut self) {
        for fact in Fact::ALL {
            if self.monitor.saw(fact) && !self.facts.contains(&fact) {
                self.facts.push(fact);
            }
        }
    }

    /// The core's public projections against the spec's.
    fn compare_projections(&self) -> Result<(), String> {
        let core_pending = pending_view(&self.machine);
        let spec_pending = self.spec.pending();
        if core_pending != spec_pending {
            return Err(format!(
                "pending (NT, NS): core {core_pending:?}, spec {spec_pending:?}"
            ));
        }
        let status = match self.machine.status() {
            coxswain_core::Status::Idle => "idle",
            coxswain_core::Status::Running => "running",
        };
        if status != self.spec.status().as_str() {
            return Err(format!(
                "status: core {status}, spec {}",
                self.spec.status().as_str()
            ));
        }
        if self.machine.is_quiescent() != self.spec.is_quiescent() {
            return Err(format!(
                "quiescent: core {}, spec {}",
                self.machine.is_quiescent(),
                self.spec.is_quiescent()
            ));
        }
        if self.machine.last_turn() != self.spec.last_turn() {
            return Err(format!(
                "lastTurn: core {}, spec {}",
                self.machine.last_turn(),
                self.spec.last_turn()
            ));
        }
        let core_delivered = delivered(&self.machine);
        let spec_delivered = self.spec.delivered();
        if core_delivered != spec_delivered {
            return Err(format!(
                "delivery memory (S51): core {core_delivered:?}, spec \
                 {spec_delivered:?}"
            ));
        }
        // The per-id queries agree with the lists and the memory, for every id a session uses.
        let pool = (0..coxswain_conformance::generate::POOL).map(|i| format!("m{i}"));
        for id in pool.chain([coxswain_conformance::generate::hook_extra()
            .id()
            .to_string()])
        {
            let key = coxswain_core::MessageId::new(id.as_str());
            let listed = spec_pending
                .0
                .iter()
                .chain(&spec_pending.1)
                .any(|(p, _)| *p == id);
            if self.machine.is_pending(&key) != listed {
                return Err(format!("is_pending({id}): core {}, spec {listed}", !listed));
            }
            let held = spec_delivered.contains(&id);
            if self.machine.remembers(&key) != held {
                return Err(format!(
                    "remembers({id}) (S51): core {}, spec {held}",
                    !held
                ));
            }
        }
        Ok(())
    }

    /// S49: a fresh machine and a fresh spec restored from the log so far (closed by crash
    /// repair's closers) with the session's memory capacity hold the live lists, the live
    /// delivery memory (S53) and, when quiescent, the live `lastTurn`.
    fn check_restore(&mut self) -> Result<(), Failure> {
        let mut log = self.log.clone();
        log.extend(self.closers());
        let mut failure = Failure::default();
        if self.checks.invariants {
            match Machine::restore_with(self.config(), &log, 0) {
                Err(error) => failure.invariant = Some(format!("S49: own log invalid: {error}")),
                Ok(restored) => {
                    let (live, back) =
                        (pending_messages(&self.machine), pending_messages(&restored));
                    let (live_held, back_held) = (delivered(&self.machine), delivered(&restored));
                    if live != back {
                        failure.invariant =
                            Some(format!("S49: restored lists {back:?}, live {live:?}"));
                    } else if live_held != back_held {
                        failure.invariant = Some(format!(
                            "S53: restored memory {back_held:?}, live {live_held:?}"
                        ));
                    } else if self.machine.is_quiescent()
                        && restored.last_turn() != self.machine.last_turn()
                    {
                        failure.invariant = Some(format!(
                            "S49: restored lastTurn {}, live {}",
                            restored.last_turn(),
                            self.machine.last_turn()
                        ));
                    }
                }
            }
        }
        if self.checks.differential {
            match Spec::restore_with_config(&log, 0, spec_config(self.config())) {
                Err(error) => {
                    failure.differential = Some(format!("the spec rejects the log: {error}"))
                }
                Ok(restored) if restored.pending() != self.spec.pending() => {
                    failure.differential = Some(format!(
                        "S49: the spec restores {:?}, live {:?}",
                        restored.pending(),
                        self.spec.pending()
                    ))
                }
                Ok(restored) if restored.delivered() != self.spec.delivered() => {
                    failure.differential = Some(format!(
                        "S53: the spec restores the memory {:?}, live {:?}",
                        restored.delivered(),
                        self.spec.delivered()
                    ))
                }
                Ok(_) => {}
            }
        }
        if failure.invariant.is_some() || failure.differential.is_some() {
            return Err(failure);
        }
        Ok(())
    }

    /// S50 then S49: crash repair closes the log, and both sides go on from what it restores.
    fn crash(&mut self) -> Result<(), Failure> {
        if self.machine.is_disposed() {
            // A disposed agent is gone; there is nothing to restore.
            return Ok(());
        }
        for closer in self.position.closers() {
            self.position.advance(&closer);
            self.log.push(to_json(&closer));
        }
        let mut failure = Failure::default();
        let config = self.config();
        let restored = match Machine::restore_with(config, &self.log, 0) {
            Ok(machine) => machine,
            Err(error) => {
                failure.invariant = Some(format!("S49: own log invalid: {error}"));
                return Err(failure);
            }
        };
        match self.monitor.crash_and_restore() {
            Err(violation) if self.checks.invariants => {
                failure.invariant = Some(violation.to_string());
                failure.violation = Some(violation);
            }
            Ok(machine) if self.checks.invariants && machine != restored => {
                failure.invariant =
                    Some("S49: the monitor's restore and the JSON log's restore differ".to_owned());
            }
            _ => {}
        }
        self.collect_facts();
        self.machine = restored;
        self.claimed = Batch::new();
        match Spec::restore_with_config(&self.log, 0, spec_config(config)) {
            Ok(spec) => self.spec = spec,
            Err(error) => {
                failure.differential = Some(format!("the spec rejects the log: {error}"));
                return Err(failure);
            }
        }
        if let Some(tape) = self.tape.as_mut() {
            tape.clear();
            let note = self.note.clone();
            push_line(&mut self.tape, &json!({ "note": note }));
            let mut given = serde_json::Map::new();
            given.insert("log".into(), json!(self.log));
            given.insert("seedLength".into(), json!(0));
            add_config(&mut given, config);
            push_line(&mut self.tape, &json!({ "given": given }));
        }
        if self.checks.differential {
            if let Err(difference) = self.compare_projections() {
                failure.differential = Some(difference);
            }
        }
        if failure.invariant.is_some() || failure.differential.is_some() {
            return Err(failure);
        }
        Ok(())
    }
}

/// The spec's config of the same host choices (S51, S55).
fn spec_config(config: Config) -> coxswain_spec::Config {
    coxswain_spec::Config {
        memory: config.delivery_memory,
        max_pending: config.max_pending,
    }
}

/// A `given` line's `memory` and `maxPending` (FORMAT.md), each only when set.
fn add_config(given: &mut serde_json::Map<String, Value>, config: Config) {
    if config.delivery_memory > 0 {
        given.insert("memory".into(), json!(config.delivery_memory));
    }
    if let Some(limit) = config.max_pending {
        given.insert("maxPending".into(), json!(limit.get()));
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!({ "unserializable": e.to_string() }))
}

fn push_line(tape: &mut Option<String>, value: &Value) {
    if let Some(tape) = tape {
        tape.push_str(&value.to_string());
        tape.push('\n');
    }
}

/// The lists as the spec shows them: (NT, NS), each as (id, waking).
type PendingView = (Vec<(String, bool)>, Vec<(String, bool)>);

fn pending_view(machine: &Machine) -> PendingView {
    let list = |target| {
        machine
            .pending(target)
            .map(|p| (p.message().id().to_string(), p.is_waking()))
            .collect()
    };
    (list(Target::NextTurn), list(Target::NextStep))
}

/// The ids the machine's delivery memory holds, oldest first (S51).
fn delivered(machine: &Machine) -> Vec<String> {
    machine.delivered().map(ToString::to_string).collect()
}

/// The lists with their message values and waking flags (what S49 compares).
pub(crate) fn pending_messages(machine: &Machine) -> Vec<(Target, Value, bool)> {
    [Target::NextTurn, Target::NextStep]
        .into_iter()
        .flat_map(|target| {
            machine
                .pending(target)
                .map(move |p| (target, to_json(p.message()), p.is_waking()))
        })
        .collect()
}

fn describe_difference(
    core: &Result<Vec<Value>, &'static str>,
    spec: &Result<Vec<Value>, &'static str>,
) -> String {
    match (core, spec) {
        (Err(core), Err(spec)) => format!("rejected: core {core}, spec {spec}"),
        (Err(core), Ok(_)) => format!("core rejected {core}, the spec accepted"),
        (Ok(_), Err(spec)) => format!("the spec rejected {spec}, core accepted"),
        (Ok(core), Ok(spec)) => {
            let index = core
                .iter()
                .zip(spec)
                .position(|(c, r)| c != r)
                .unwrap_or(core.len().min(spec.len()));
            format!(
                "output {index}: core {}, spec {}",
                core.get(index)
                    .map_or("nothing".to_owned(), Value::to_string),
                spec.get(index)
                    .map_or("nothing".to_owned(), Value::to_string)
            )
        }
    }
}
