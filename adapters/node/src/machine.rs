//! [`NativeMachine`]: the core's machine behind N-API, with its drain contract.

use std::num::NonZeroUsize;

use coxswain_core::{
    BatchError, Config, Event, Input, Machine, Output, PreStepAnswer, Rejected, Target,
};
use coxswain_log::{check_message, TooDeep};
use coxswain_session::{ResumeError, ResumePlan};
use napi::bindgen_prelude::Buffer;
use napi_derive::napi;
use serde::Serialize;
use serde_json::{json, Value};

use crate::wire;

/// The core's [`Machine`], driven from JavaScript.
///
/// The drain contract (the core's [`Transition`](coxswain_core::Transition)) is kept by the core
/// itself: [`handle`](NativeMachine::handle) applies an input and returns its durable events,
/// leaving its effects queued; [`persisted`](NativeMachine::persisted) (the host's word that the
/// events are durable) or [`outputs`](NativeMachine::outputs) (every output in wire order, for
/// ports) drains them. Until then the core rejects the next input as `undrained`.
#[napi]
pub struct NativeMachine {
    machine: Machine,
}

#[napi]
impl NativeMachine {
    /// A fresh machine whose delivery memory holds `memory` ids (S51; 0 is plain S9), with the
    /// admission bound `max_pending` (S55; absent, `null` or 0: unbounded — the JavaScript side
    /// refuses 0 before it gets here).
    ///
    /// `hash_seed` (16 hex digits; absent: 0) keys the id indexes: the agent draws a random one
    /// (HashDoS). No output depends on it.
    #[napi(constructor)]
    pub fn new(memory: u32, max_pending: Option<u32>, hash_seed: Option<String>) -> Self {
        let seed = hash_seed
            .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
            .unwrap_or(0);
        NativeMachine {
            machine: Machine::with_config(config(memory, max_pending).with_hash_seed(seed)),
        }
    }

    /// The seed of the id indexes' hasher, as 16 hex digits.
    #[napi]
    pub fn hash_seed(&self) -> String {
        format!("{:016x}", self.machine.config().hash_seed)
    }

    /// Replaces this machine with one restored from a conformance trace's `given` value (JSON
    /// text: `null`, or `{log, seedLength, memory, maxPending}`; S46–S48, S55). Returns
    /// `{"ready": {}}`, `{"invalidLog": "why"}` (S47; the machine is unchanged) or `{"error":
    /// "why"}` for a value of the wrong shape.
    #[napi]
    pub fn restore_given(&mut self, given: String) -> String {
        let reply = match parse_given(&given) {
            Err(error) => json!({ "error": error }),
            Ok((log, seed_length, memory, max_pending)) => {
                let config = Config::new().with_delivery_memory(memory);
                let config = match max_pending {
                    Some(limit) => config.with_max_pending(limit),
                    None => config,
                };
                match Machine::restore_with(config, &log, seed_length) {
                    Ok(machine) => {
                        self.machine = machine;
                        json!({ "ready": {} })
                    }
                    Err(error) => json!({ "invalidLog": error.to_string() }),
                }
            }
        };
        wire::text(&reply)
    }

    /// Replaces this machine with the session held in a JSON-lines log's bytes, as the tokio
    /// adapter's `Agent::open` does: reads the records (`coxswain-log`'s reader; a torn final
    /// line is left out), restores them (S46–S48; items park, nothing wakes) with this machine's
    /// delivery memory and admission bound, and closes a turn the log ends inside (S50). The caller writes the tail
    /// fix and the closers to the log before anything else. Returns `{"ok": {records,
    /// completeLen, torn, unterminated, nextSeq, closers, interrupted}}`, or `{"corrupt": {line,
    /// message}}` / `{"invalidLog": {line, message}}` with the machine unchanged.
    #[napi]
    pub fn resume(&mut self, bytes: Buffer) -> String {
        // The session layer's one resume decision (`ResumePlan`).
        match ResumePlan::from_bytes(&bytes, self.machine.config()) {
            Err(ResumeError::Corrupt(corrupt)) => wire::text(
                &json!({ "corrupt": { "line": corrupt.line, "message": corrupt.to_string() } }),
            ),
            Err(ResumeError::Invalid(invalid)) => wire::text(&json!({
                "invalidLog": { "line": invalid.line, "message": invalid.to_string() }
            })),
            Err(other) => {
                wire::text(&json!({ "corrupt": { "line": 0, "message": other.to_string() } }))
            }
            Ok(plan) => {
                self.machine = plan.machine;
                wire::text(&json!({ "ok": {
                    "records": plan.records,
                    "completeLen": plan.cut_to,
                    "torn": plan.torn.map(|t| json!({ "line": t.line, "bytes": t.bytes })),
                    "unterminated": plan.terminate,
                    "nextSeq": plan.next_seq,
                    "closers": plan.closers,
                    "interrupted": plan.interrupted,
                }}))
            }
        }
    }

    /// Applies one input (JSON text of a trace's `"in"` value) and returns `{"found": bool,
    /// "events": [EVENT…]}`: the durable events to persist, as one batch, before calling
    /// [`persisted`](NativeMachine::persisted). A rejected input changed nothing (S5):
    /// `{"rejected": KIND, "message": "…"}` (`undrained` when the previous input's outputs were
    /// not drained). A message nesting deeper than a log record can hold is refused before the
    /// core sees it: `{"rejected": "too-deep", …}`. An input of unknown shape:
    /// `{"invalid": "why"}`. A rejection carries its details: `id` (`already-pending`,
    /// `already-delivered`, `conflict`), `expect` (`turn-mismatch`), `target` and `maxPending`
    /// (`full`).
    #[napi]
    pub fn handle(&mut self, input: String) -> String {
        let input = match parse_input(&input) {
            Ok(input) => input,
            Err(reply) => return reply,
        };
        if let Err(deep) = check_depth(&input) {
            return wire::text(&json!({ "rejected": "too-deep", "message": deep.to_string() }));
        }
        // Only a remove or a replace can find its id not pending (S15): no transition then.
        let applied = match input {
            Input::Remove(id) => self.machine.remove(&id),
            Input::Replace { id, message } => self.machine.replace(&id, message),
            input => self.machine.handle(input).map(Some),
        };
        match applied {
            Ok(Some(transition)) => {
                let reply = wire::to_text(&Accepted {
                    found: true,
                    events: transition.events(),
                });
                // Dropped undrained: the effects stay queued for `persisted`.
                drop(transition);
                reply
            }
            Ok(None) => wire::to_text(&Accepted {
                found: false,
                events: &[],
            }),
            Err(rejected) => rejection(&rejected),
        }
    }

    /// The host's word that the events of the last input are durable: its effects, in order, as
    /// a JSON array (see the module `wire` for their shapes). Empty when nothing is queued.
    #[napi]
    pub fn persisted(&mut self) -> String {
        let effects: Vec<wire::EffectJson> = self
            .machine
            .drain()
            .persisted()
            .map(wire::EffectJson::from)
            .collect();
        wire::to_text(&effects)
    }

    /// Every queued output of the last input in wire order (events included), as a JSON array
    /// of `"out"` values: for recorders and ports, which persist nothing. With `with_begin`,
    /// also each `{"begin": …}` (as [`persisted`](NativeMachine::persisted) writes it) where
    /// the core puts it: right after a turn's `turn/start`, first for a maintenance job.
    #[napi]
    pub fn outputs(&mut self, with_begin: Option<bool>) -> String {
        let drained = self.machine.drain();
        if with_begin.unwrap_or(false) {
            let outputs: Vec<wire::EffectJson> = drained
                .into_outputs_with_begin()
                .map(wire::EffectJson::from_output)
                .collect();
            return wire::to_text(&outputs);
        }
        let outputs: Vec<Output> = drained.into_outputs().collect();
        wire::to_text(&outputs)
    }

    /// One request of the `--exec` line protocol (PORTS.md) on this machine: the reply line to an
    /// `"in"` request, `{"outputs": [OUTPUT…]}`, `{"rejected": KIND}` or `{"error": "why"}`.
    #[napi]
    pub fn wire(&mut self, input: String) -> String {
        let input: Input = match serde_json::from_str(&input) {
            Ok(input) => input,
            Err(error) => {
                return wire::text(&json!({ "error": format!("unknown input: {error}") }))
            }
        };
        match self.machine.handle(input) {
            Ok(transition) => {
                let outputs: Vec<Output> = transition.into_outputs().collect();
                wire::to_text(&Wire { outputs })
            }
            Err(rejected) => wire::text(&json!({ "rejected": rejected.kind() })),
        }
    }

    /// Opens a batch ([`Machine::begin_batch`]): `""` when opened, else the refusal's kind
    /// (`already-open`, `undrained`).
    #[napi]
    pub fn begin_batch(&mut self) -> String {
        batch_reply(self.machine.begin_batch())
    }

    /// Closes the batch and keeps its inputs: `""`, or `not-open`.
    #[napi]
    pub fn commit_batch(&mut self) -> String {
        batch_reply(self.machine.commit_batch())
    }

    /// Closes the batch and takes back every input fed since it opened (the machine is as it
    /// was; queued outputs are dropped): `""`, or `not-open`.
    #[napi]
    pub fn roll_back_batch(&mut self) -> String {
        batch_reply(self.machine.roll_back_batch())
    }

    /// Whether a batch is open.
    #[napi]
    pub fn is_batch_open(&self) -> bool {
        self.machine.is_batch_open()
    }

    /// The machine's state as JSON: `{status, quiescent, disposed, maintenance,
    /// cancelRequested, lastTurn, outstanding, nextTurn, nextStep}`.
    #[napi]
    pub fn state(&self) -> String {
        wire::text(&wire::state(&self.machine))
    }

    /// The durable events still queued (of an input whose outputs were not drained), as a JSON
    /// array, leaving everything queued: the events half of the core's `Machine::drain`.
    #[napi]
    pub fn queued_events(&mut self) -> String {
        let transition = self.machine.drain();
        let events = wire::to_text(transition.events());
        drop(transition);
        events
    }

    /// Whether no turn and no maintenance runs (S44).
    #[napi]
    pub fn is_quiescent(&self) -> bool {
        self.machine.is_quiescent()
    }

    /// Whether the machine is disposed (S45).
    #[napi]
    pub fn is_disposed(&self) -> bool {
        self.machine.is_disposed()
    }

    /// The outstanding request as JSON (`{"step": {turn, step}}`, …) or `null`.
    #[napi]
    pub fn outstanding(&self) -> String {
        wire::text(&wire::outstanding(self.machine.outstanding()))
    }

    /// Whether the delivery memory holds `id` (S51).
    #[napi]
    pub fn remembers(&self, id: String) -> bool {
        self.machine.remembers(&id.into())
    }

    /// The admission bound (S55), or `null` when unbounded.
    #[napi]
    pub fn max_pending(&self) -> Option<u32> {
        self.machine
            .config()
            .max_pending
            .map(|limit| u32::try_from(limit.get()).unwrap_or(u32::MAX))
    }

    /// The number of items pending in the next-turn list (NT) and the next-step list (NS).
    #[napi]
    pub fn pending_counts(&self) -> Vec<u32> {
        let count = |target| u32::try_from(self.machine.pending(target).len()).unwrap_or(u32::MAX);
        vec![count(Target::NextTurn), count(Target::NextStep)]
    }
}

impl NativeMachine {
    /// Takes the machine out (for a [`NativeSession`](crate::NativeSession)), leaving a fresh
    /// one with the same configuration.
    pub(crate) fn take(&mut self) -> Machine {
        let fresh = Machine::with_config(self.machine.config());
        std::mem::replace(&mut self.machine, fresh)
    }
}

/// The reply to an accepted input: its events, to persist before its effects.
#[derive(Serialize)]
struct Accepted<'a> {
    found: bool,
    events: &'a [Event],
}

/// The reply line to an accepted `"in"` request (PORTS.md).
#[derive(Serialize)]
struct Wire {
    outputs: Vec<Output>,
}

fn config(memory: u32, max_pending: Option<u32>) -> Config {
    let config = Config::new().with_delivery_memory(usize::try_from(memory).unwrap_or(usize::MAX));
    match max_pending
        .and_then(|limit| usize::try_from(limit).ok())
        .and_then(NonZeroUsize::new)
    {
        Some(limit) => config.with_max_pending(limit),
        None => config,
    }
}

/// A rejection's reply: its kind, its message and its details (S13, S52, S54–S56).
fn rejection(rejected: &Rejected) -> String {
    wire::text(&rejection_value(rejected))
}

/// A rejection as a JSON value: `{rejected: KIND, message, …details}`.
pub(crate) fn rejection_value(rejected: &Rejected) -> Value {
    let mut reply = json!({ "rejected": rejected.kind(), "message": rejected.to_string() });
    let details = match rejected {
        Rejected::AlreadyPending(id) | Rejected::AlreadyDelivered(id) | Rejected::Conflict(id) => {
            json!({ "id": id })
        }
        Rejected::TurnMismatch(expect) => json!({ "expect": expect }),
        Rejected::Full {
            target,
            max_pending,
        } => json!({ "target": target, "maxPending": max_pending }),
        _ => Value::Null,
    };
    if let (Some(reply), Value::Object(details)) = (reply.as_object_mut(), details) {
        reply.extend(details);
    }
    reply
}

fn parse_input(text: &str) -> Result<Input, String> {
    serde_json::from_str(text)
        .map_err(|error| wire::text(&json!({ "invalid": format!("unknown input: {error}") })))
}

/// Every message an input carries must fit in the log records it can be written to.
fn check_depth(input: &Input) -> Result<(), TooDeep> {
    match input {
        Input::Send { message, .. }
        | Input::Followup(message)
        | Input::Steer(message)
        | Input::Inject(message)
        | Input::Replace { message, .. }
        | Input::Prepend { message, .. } => check_message(message),
        Input::PreStep(PreStepAnswer::Enter(batch)) => {
            batch.iter().try_for_each(|message| check_message(message))
        }
        _ => Ok(()),
    }
}

/// A trace's `given` value: `null`, or `{log?, seedLength?, memory?, maxPending?}` (FORMAT.md;
/// `maxPending` a positive integer, absent or `null` for unbounded, S55).
#[allow(clippy::type_complexity)]
fn parse_given(text: &str) -> Result<(Vec<Value>, usize, usize, Option<NonZeroUsize>), String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("given is not JSON: {e}"))?;
    if value.is_null() {
        return Ok((Vec::new(), 0, 0, None));
    }
    let Some(object) = value.as_object() else {
        return Err("given is neither null nor an object".into());
    };
    let log = match object.get("log") {
        None => Vec::new(),
        Some(Value::Array(log)) => log.clone(),
        Some(_) => return Err("given `log` is not an array".into()),
    };
    let count = |key: &str| match object.get(key) {
        None => Ok(0),
        Some(n) => n
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| format!("given `{key}` is not a non-negative integer")),
    };
    let max_pending = match object.get("maxPending") {
        None | Some(Value::Null) => None,
        Some(n) => Some(
            n.as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .and_then(NonZeroUsize::new)
                .ok_or_else(|| String::from("given `maxPending` is not a positive integer"))?,
        ),
    };
    Ok((log, count("seedLength")?, count("memory")?, max_pending))
}

/// A batch call's reply: `""` when it was done, else the refusal's kind.
fn batch_reply(result: Result<(), BatchError>) -> String {
    match result {
        Ok(()) => String::new(),
        Err(BatchError::AlreadyOpen) => "already-open".into(),
        Err(BatchError::NotOpen) => "not-open".into(),
        Err(_) => "undrained".into(),
    }
}
