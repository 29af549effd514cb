//! [`NativeAgent`]: one agent's loop, the session layer's [`AgentLoop`], behind N-API, for
//! `agent.js`, which only moves bytes (the log), time (its clock, in milliseconds) and promises.
//! Every decision is the loop's: which commands make a batch, who waits for what, what a host
//! answer the session refused means, the stop policy, the defaults ([`Options::DEFAULT`]) and
//! what a missing hook or one that returns nothing answers ([`Hooks`]).
//!
//! A waiter is a number JavaScript maps to its promise. Each call hands something to the loop
//! (a caller's command, a host call's answer, an append's result, the clock) and replies with a
//! *turn*: a tape (the module `tape`, decoded by `session.js`) of
//!
//! 1. the input messages bound to the caller's objects (S8: every later output names them by
//!    handle);
//! 2. the outputs, in order, each its [`AgentOutputOp`] code (the table `session.js` reads from
//!    `tapeTable()`, so the codes have one source) and then: `effect` an effect; a reply to
//!    waiter `w`: `delivered w found`, `done w` (recorded, a job's end), `pending w LISTS`,
//!    `fate w TEXT` (its [`Fate::to_json`](coxswain_core::Fate::to_json) text), `closed w KIND`
//!    (the ending's kind), `refused w TEXT` (the refusal's JSON), `failed w KIND`
//!    (`persistence`, `indeterminate` or the ending's kind); `startJob w`; `abandon` (a call was
//!    abandoned); `ended KIND WHY` (the agent ends: its kind, and `0`, or the log failure that
//!    stopped it, `1` failed, `2` indeterminate, `3` fenced);
//! 3. the batch to append: `0`, or `1`, the entry count, whether the entries follow (each `0`
//!    and a machine event, or `1`, its type and its data's JSON text), whether a `turn/end` is
//!    among them, and `1` and the UTF-8 length of their log lines (numbered from the log's next
//!    `seq`; held for `takeLines` / `takeLinesInto`) or `0`;
//! 4. when to call `timeout` next (`1` and milliseconds as text, or `0`);
//! 5. whether the machine is quiescent.
//!
//! A batch with nothing to write is reported durable here, at once; any other is JavaScript's
//! to append as one write and report with `appended`.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use coxswain_binding_kit::options::{saturating_millis as millis, session_options};
use coxswain_binding_kit::records::{encode_lines, host_events};
use coxswain_binding_kit::request::{number, request};
use coxswain_binding_kit::shapes::{refusal, refused};
use coxswain_core::{Input, MessageId, PreStepAnswer};
use coxswain_log::Entry;
use coxswain_session::{
    AgentLoop, BatchNo, Command, Ending, Failure, Hooks, HostFailure, HostReply, LogFailure,
    Options, Output, Reply,
};
use napi::bindgen_prelude::{BufferSlice, Either, Latin1String, Object, Utf16String};
use napi::Env;
use napi_derive::napi;
use serde::Deserialize;
use serde_json::Value;

use crate::bound::Bound;
use crate::machine::NativeMachine;
use crate::machine::{answer_word, delivered, handle_number, plain_message, preset_input};
use crate::tape::{self, AgentOutputOp, Given, Handles, Tape};
use crate::wire;

/// One agent's loop, driven from JavaScript through its hot path ([`NativeAgent::hot_path`]).
#[napi]
pub struct NativeAgent {
    core: AgentShared,
}

/// The loop and the messages JavaScript holds objects for (the tape's handles, taken from the
/// machine): shared by the [`NativeAgent`] object and the functions of its hot path.
pub struct AgentCore {
    agent: AgentLoop<u32>,
    handles: Handles,
    /// The batch JavaScript is appending, and how many entries it has.
    sealed: Option<(BatchNo, u64)>,
    /// Its log lines, until JavaScript takes them or reports the append.
    lines: Option<String>,
    /// Whether a turn carries the entries (else only their log lines): `withEntries`.
    with_entries: bool,
    /// The `seq` of the log's next record (the first of the next batch's lines).
    next_seq: u64,
    /// The host's clock, as last told.
    now: Duration,
    /// Replies this binding gives before the loop sees the command (a value no command is).
    told: Vec<(u32, Value)>,
}

/// The one core of a [`NativeAgent`].
pub type AgentShared = Rc<RefCell<AgentCore>>;

/// The defaults every driver takes from the session layer ([`Options::DEFAULT`]).
#[napi(object)]
pub struct AgentDefaults {
    /// The abort grace (S38, S39), in milliseconds.
    pub abort_grace_ms: f64,
    /// The pause after a failed batch, in milliseconds.
    pub retry_after_ms: f64,
    /// The most commands in one batch.
    pub max_batch: u32,
    /// The longest message id, in UTF-8 bytes.
    pub max_id_bytes: u32,
    /// The largest message, in bytes of its JSON.
    pub max_message_bytes: u32,
}

/// The session layer's defaults, for `session.js` (which spells none of its own).
#[napi]
pub fn agent_defaults() -> AgentDefaults {
    let default = Options::DEFAULT;
    let size = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    AgentDefaults {
        abort_grace_ms: default.abort_grace.as_secs_f64() * 1000.0,
        retry_after_ms: default.retry_after.as_secs_f64() * 1000.0,
        max_batch: size(default.max_batch),
        max_id_bytes: size(default.limits.max_id_bytes),
        max_message_bytes: size(default.limits.max_message_bytes),
    }
}

/// An agent's options from JavaScript (checked there; absent: the session layer's default).
#[napi(object)]
pub struct AgentOptions {
    /// The abort grace, in milliseconds (`Infinity`: never).
    pub abort_grace_ms: Option<f64>,
    /// The pause after a failed batch, in milliseconds.
    pub retry_after_ms: Option<f64>,
    /// The longest message id, in UTF-8 bytes.
    pub max_id_bytes: Option<u32>,
    /// The largest message, in bytes of its JSON.
    pub max_message_bytes: Option<u32>,
    /// The most commands in one batch.
    pub max_batch: Option<u32>,
    /// Whether the host wrote a `preStep` hook.
    pub pre_step: bool,
    /// Whether the host wrote a `turnStopping` hook.
    pub turn_stopping: bool,
    /// The `seq` of the log's next record.
    pub next_seq: f64,
}

/// One command of `submitTape`, as JSON: a caller's (`W` its waiter) `{"input": [W, INPUT]}`,
/// `{"record": [W, TURN, STEP, [{type, data}…]]}`, `{"maintenance": W}`, `{"jobEnded": W}`,
/// `{"pending": W}`, `{"fate": [W, ID]}`, `{"close": W}`; or a host call's (`CALL` one of
/// `preStep`, `step`, `turnStopping`): `{"answer": [CALL, TURN, STEP, INPUT]}`, `{"nothing":
/// [CALL, TURN, STEP]}`, `{"hostFailed": [CALL, TURN, STEP, FAILURE, DETAIL]}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum Wire {
    Input(u32, Input),
    Record(u32, i64, i64, Vec<Value>),
    Maintenance(u32),
    JobEnded(u32),
    Pending(u32),
    Fate(u32, String),
    Close(u32),
    Answer(String, i64, i64, Input),
    Nothing(String, i64, i64),
    HostFailed(String, i64, i64, String, String),
}

#[napi]
impl NativeAgent {
    /// A loop over `machine`'s machine (fresh, or resumed by [`NativeMachine::resume`]), which
    /// is taken: `machine` is left fresh, with the same configuration.
    #[napi(constructor)]
    pub fn new(machine: &mut NativeMachine, options: AgentOptions) -> Self {
        let size = |n: Option<u32>| n.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let mut settings = session_options(
            options.abort_grace_ms.map(millis),
            options.retry_after_ms.map(millis),
            size(options.max_id_bytes),
            size(options.max_message_bytes),
        );
        settings.hooks = Hooks {
            pre_step: options.pre_step,
            turn_stopping: options.turn_stopping,
        };
        settings.max_batch = size(options.max_batch).unwrap_or(settings.max_batch);
        let (machine, handles) = machine.take();
        NativeAgent {
            core: Rc::new(RefCell::new(AgentCore {
                agent: AgentLoop::new(machine, settings),
                handles,
                sealed: None,
                lines: None,
                with_entries: true,
                next_seq: seq_number(options.next_seq),
                now: Duration::ZERO,
                told: Vec::new(),
            })),
        }
    }

    /// The machine's state as JSON (as `NativeMachine::state`).
    #[napi]
    pub fn state(&self) -> String {
        wire::text(&wire::state(self.core.borrow().agent.machine()))
    }

    /// The seed of the id indexes' hasher, as 16 hex digits.
    #[napi]
    pub fn hash_seed(&self) -> String {
        let core = self.core.borrow();
        format!("{:016x}", core.agent.machine().config().hash_seed)
    }

    /// The hot path: an object of functions bound to this agent's core, each replying with a
    /// turn (its layout: the module `session`): `submitFields0`/`1`/`2(id, kind, content, w)` (a
    /// follow-up, steer or inject of the message `{id, source: {kind}, content}` of three
    /// strings), `submitDeliver(preset, text, w)` (of a message's JSON text), `submitTape(text)`
    /// (JSON commands: `Wire`), `submitWord(word, turn, step)` (a host answer that is a word,
    /// by its code: `AnswerWord::ALL`), `submitEnter(turn, step, handles)` and
    /// `submitEnterOne(turn, step, handle)` (a pre-step `enter` of messages the tape handed
    /// out), `appended(status, nowMs, seq)` (the append JavaScript was given: `0` durable from
    /// `seq` on, `1` failed, `2` indeterminate, `3` fenced), `timeout(nowMs)` and `finish()`
    /// (the ending is published: answer whoever still waits). And `withEntries(flag)`,
    /// `takeLines()` (the held log lines as a string, `undefined` if none) and
    /// `takeLinesInto(buffer, offset)` (copied into a `Buffer`: their length, or `-1`).
    ///
    /// # Errors
    ///
    /// When N-API cannot make a function or the object (out of memory).
    #[napi]
    pub fn hot_path<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let mut path = Bound::new(env, &self.core)?;
        for (name, preset) in [
            ("submitFields0", 0),
            ("submitFields1", 1),
            ("submitFields2", 2),
        ] {
            path.bind(name, move |core, call| {
                let id = call.get::<String>(0)?;
                let (kind, content) = (call.get::<String>(1)?, call.get::<String>(2)?);
                let input = preset_input(preset, plain_message(id, kind, content));
                Ok(core.deliver(input, call.get::<u32>(3)?))
            })?;
        }
        path.bind("submitDeliver", |core, call| {
            let (preset, text) = (call.get::<u32>(0)?, call.get::<String>(1)?);
            Ok(core.deliver(delivered(preset, &text), call.get::<u32>(2)?))
        })?;
        path.bind("submitTape", |core, call| {
            Ok(core.submit_tape(&call.get::<String>(0)?))
        })?;
        path.bind("submitWord", |core, call| {
            let word = call.get::<u32>(0)?;
            let (turn, step) = (call.get::<i64>(1)?, call.get::<i64>(2)?);
            if let Some(word) = answer_word(word) {
                let request = word.request().outstanding(number(turn), number(step));
                core.agent
                    .host_answered(request, HostReply::Answer(word.input()));
            }
            Ok(core.turn(Given::new()))
        })?;
        path.bind("submitEnter", |core, call| {
            let (turn, step) = (call.get::<i64>(0)?, call.get::<i64>(1)?);
            Ok(core.enter(turn, step, &call.get::<Vec<i64>>(2)?))
        })?;
        path.bind("submitEnterOne", |core, call| {
            let (turn, step) = (call.get::<i64>(0)?, call.get::<i64>(1)?);
            Ok(core.enter(turn, step, &[handle_number(call.get::<f64>(2)?)]))
        })?;
        path.bind("appended", |core, call| {
            let status = call.get::<u32>(0)?;
            let (now, seq) = (call.get::<f64>(1)?, call.get::<f64>(2)?);
            core.appended(status, now, seq)
        })?;
        path.bind("timeout", |core, call| {
            core.now = millis(call.get::<f64>(0)?);
            if core.sealed.is_none() {
                core.agent.handle_timeout(core.now);
            }
            Ok(core.turn(Given::new()))
        })?;
        path.bind("finish", |core, _| {
            core.agent.finish();
            Ok(core.turn(Given::new()))
        })?;
        path.bind("withEntries", |core, call| {
            core.with_entries = call.get::<bool>(0)?;
            Ok(())
        })?;
        path.bind("takeLines", |core, _| {
            Ok(core.lines.take().map(|lines| {
                if lines.is_ascii() {
                    Either::A(Latin1String::from(lines))
                } else {
                    Either::B(lines)
                }
            }))
        })?;
        path.bind("takeLinesInto", |core, call| {
            let mut buffer = call.get::<BufferSlice<'_>>(0)?;
            let offset = usize::try_from(call.get::<i64>(1)?).unwrap_or(usize::MAX);
            Ok(core.take_lines_into(&mut buffer, offset))
        })?;
        Ok(path.into_object())
    }
}

/// What a turn's batch to append carries (taken out of the loop's [`Append`](coxswain_session::Append)).
struct ToWrite {
    count: u64,
    /// The entries, when the turn carries them.
    entries: Option<Vec<Entry>>,
    turn_end: bool,
    /// The UTF-8 length of the held log lines.
    lines: Option<u64>,
}

impl AgentCore {
    /// A follow-up, steer or inject for waiter `w`; a message of unknown shape (`Err`: why) is
    /// refused (`invalid-input`) and changes nothing.
    fn deliver(&mut self, input: Result<Input, String>, w: u32) -> Utf16String {
        match input {
            Ok(input) => {
                let given = tape::messages_of(&input);
                self.agent.submit(Command::Input(input), w);
                self.turn(given)
            }
            Err(why) => {
                self.told.push((w, refusal("invalid-input", &why)));
                self.turn(Given::new())
            }
        }
    }

    /// The pre-step answer `enter` of the messages behind `handles`; a handle the table does
    /// not hold is an invalid answer (`host-invalid-answer`, S38).
    fn enter(&mut self, turn: i64, step: i64, handles: &[i64]) -> Utf16String {
        let request = coxswain_core::Outstanding::PreStep {
            turn: number(turn),
            step: number(step),
        };
        let found: Result<Vec<_>, i64> = handles
            .iter()
            .map(|&h| {
                let message = u64::try_from(h).ok().and_then(|h| self.handles.get(h));
                message.cloned().ok_or(h)
            })
            .collect();
        let reply = match found {
            Ok(batch) => HostReply::Answer(Input::PreStep(PreStepAnswer::Enter(batch.into()))),
            Err(h) => HostReply::Failed(
                HostFailure::InvalidAnswer,
                format!("no message has the handle {h}"),
            ),
        };
        self.agent.host_answered(request, reply);
        self.turn(Given::new())
    }

    /// The commands of `text` (JSON: `Wire`s), in order.
    fn submit_tape(&mut self, text: &str) -> Utf16String {
        let mut given = Given::new();
        match wire::from_text::<Vec<Wire>>(text) {
            Ok(commands) => {
                for command in commands {
                    if let Wire::Input(_, input) | Wire::Answer(_, _, _, input) = &command {
                        given.extend(tape::messages_of(input));
                    }
                    self.submit(command);
                }
            }
            // Some command is of unknown shape: each on its own (its messages bound by none).
            Err(_) => {
                for value in wire::from_text::<Vec<Value>>(text).unwrap_or_default() {
                    match Wire::deserialize(&value) {
                        Ok(command) => self.submit(command),
                        Err(error) => self.unknown(&value, &error),
                    }
                }
            }
        }
        self.turn(given)
    }

    /// A command of unknown shape: an answer's is an invalid answer (`host-invalid-answer`,
    /// S38); a caller's is refused (`invalid-input`).
    fn unknown(&mut self, value: &Value, error: &serde_json::Error) {
        if let Some([Value::String(call), turn, step, _]) = value
            .get("answer")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            let n = |v: &Value| number(v.as_i64().unwrap_or(-1));
            if let Ok(request) = request(call, n(turn), n(step)) {
                let why = format!("not an answer: {error}");
                let reply = HostReply::Failed(HostFailure::InvalidAnswer, why);
                self.agent.host_answered(request, reply);
            }
            return;
        }
        let waiter = value
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(|v| {
                let w = v.as_array().and_then(|a| a.first()).unwrap_or(v);
                w.as_u64().and_then(|w| u32::try_from(w).ok())
            });
        if let Some(w) = waiter {
            let why = format!("unknown input: {error}");
            self.told.push((w, refusal("invalid-input", &why)));
        }
    }

    /// Hands one command to the loop.
    fn submit(&mut self, command: Wire) {
        let host = |call: &str, turn: i64, step: i64| request(call, number(turn), number(step));
        match command {
            Wire::Input(w, input) => self.agent.submit(Command::Input(input), w),
            Wire::Record(w, turn, step, events) => match host_events(events) {
                Ok(events) => {
                    let (turn, step) = (number(turn), number(step));
                    self.agent.submit(Command::Record { turn, step, events }, w);
                }
                Err(error) => self
                    .told
                    .push((w, refusal(error.kind(), &error.to_string()))),
            },
            Wire::Maintenance(w) => self.agent.submit(Command::Maintenance, w),
            Wire::JobEnded(w) => self.agent.job_ended(w),
            Wire::Pending(w) => self.agent.submit(Command::Pending, w),
            Wire::Fate(w, id) => self.agent.submit(Command::Fate(MessageId::from(id)), w),
            Wire::Close(w) => self.agent.submit(Command::Close, w),
            Wire::Answer(call, turn, step, input) => {
                if let Ok(request) = host(&call, turn, step) {
                    self.agent.host_answered(request, HostReply::Answer(input));
                }
            }
            Wire::Nothing(call, turn, step) => {
                if let Ok(request) = host(&call, turn, step) {
                    self.agent.host_answered(request, HostReply::Nothing);
                }
            }
            Wire::HostFailed(call, turn, step, failure, detail) => {
                if let Ok(request) = host(&call, turn, step) {
                    // A failure of no known name is no answer the host gave (S38).
                    let reply = match failure.parse() {
                        Ok(failure) => HostReply::Failed(failure, detail),
                        Err(unknown) => {
                            HostReply::Failed(HostFailure::InvalidAnswer, unknown.to_string())
                        }
                    };
                    self.agent.host_answered(request, reply);
                }
            }
        }
    }

    /// The sealed batch's append went as `status` says (`0` durable from `seq` on).
    fn appended(&mut self, status: u32, now_ms: f64, seq: f64) -> napi::Result<Utf16String> {
        let Some((batch, count)) = self.sealed.take() else {
            return Err(napi::Error::from_reason("no batch is being appended"));
        };
        self.lines = None;
        self.now = millis(now_ms);
        let result = match status {
            0 => {
                self.next_seq = seq_number(seq).saturating_add(count);
                Ok(())
            }
            1 => Err(LogFailure::Failed),
            2 => Err(LogFailure::Indeterminate),
            _ => Err(LogFailure::Fenced),
        };
        self.agent
            .appended(batch, result, self.now)
            .map_err(|mismatch| napi::Error::from_reason(mismatch.to_string()))?;
        Ok(self.turn(Given::new()))
    }

    /// Drains the loop (the driver contract: outputs, then the next batch; a batch with
    /// nothing to write is durable at once) and writes the turn, `given` the messages of the
    /// commands just handed over.
    fn turn(&mut self, given: Given) -> Utf16String {
        let mut outputs = Vec::new();
        let mut write = None;
        loop {
            outputs.extend(std::iter::from_fn(|| self.agent.poll_output()));
            if self.sealed.is_some() || write.is_some() {
                break;
            }
            let Some(append) = self.agent.poll_append(self.now) else {
                outputs.extend(std::iter::from_fn(|| self.agent.poll_output()));
                break;
            };
            let (batch, entries) = (append.batch, append.entries);
            if entries.is_empty() {
                // Nothing to write: durable as it is (the loop's batch is never a mismatch here).
                let _ = self.agent.appended(batch, Ok(()), self.now);
                continue;
            }
            let lines = encode_lines(self.next_seq, entries).ok();
            let carried = self.with_entries || lines.is_none();
            write = Some(ToWrite {
                count: entries.len() as u64,
                entries: carried.then(|| entries.to_vec()),
                turn_end: Entry::ends_turn(entries),
                lines: lines.as_ref().map(|l| l.len() as u64),
            });
            self.sealed = Some((batch, entries.len() as u64));
            self.lines = lines;
        }
        let deadline = self.agent.poll_timeout();
        let quiescent = self.agent.machine().is_quiescent();
        let mut tape = Tape::new(&mut self.handles, given);
        tape.bind_inputs();
        tape.num((self.told.len() + outputs.len()) as u64);
        for (w, refusal) in self.told.drain(..) {
            tape.num(AgentOutputOp::Refused.code());
            tape.num(u64::from(w));
            tape.str(&wire::text(&refusal));
        }
        for output in &outputs {
            write_output(&mut tape, output);
        }
        write_append(&mut tape, write);
        match deadline {
            Some(at) => {
                tape.num(1);
                tape.str(&(at.as_secs_f64() * 1000.0).to_string());
            }
            None => tape.num(0),
        }
        tape.flag(quiescent);
        tape.finish().into()
    }

    /// Copies the held log lines into `buffer` at `offset` and lets go of them: their length,
    /// or `-1` when none are held or they do not fit there (nothing taken).
    fn take_lines_into(&mut self, buffer: &mut [u8], offset: usize) -> i64 {
        let Some(lines) = &self.lines else {
            return -1;
        };
        let end = offset.checked_add(lines.len());
        let Some(room) = end.and_then(|end| buffer.get_mut(offset..end)) else {
            return -1;
        };
        room.copy_from_slice(lines.as_bytes());
        let written = i64::try_from(lines.len()).unwrap_or(i64::MAX);
        self.lines = None;
        written
    }
}

/// One output of the loop (see the [module](self) for the codes).
fn write_output(tape: &mut Tape<'_>, output: &Output<u32>) {
    match output {
        Output::Effect(effect) => {
            tape.num(AgentOutputOp::Effect.code());
            tape.effect(effect);
        }
        Output::Reply(w, reply) => write_reply(tape, *w, reply),
        Output::StartJob(w) => {
            tape.num(AgentOutputOp::StartJob.code());
            tape.num(u64::from(*w));
        }
        Output::Abandon(_) => tape.num(AgentOutputOp::Abandon.code()),
        Output::Ended(ending) => {
            tape.num(AgentOutputOp::Ended.code());
            tape.str(ending.kind());
            tape.num(match ending {
                Ending::Stopped(LogFailure::Failed) => 1,
                Ending::Stopped(LogFailure::Indeterminate) => 2,
                Ending::Stopped(LogFailure::Fenced) => 3,
                Ending::Closed | Ending::Disposed => 0,
            });
        }
    }
}

fn write_reply(tape: &mut Tape<'_>, w: u32, reply: &Result<Reply, Failure>) {
    let (code, text) = match reply {
        Ok(Reply::Delivered { found }) => {
            tape.num(AgentOutputOp::Delivered.code());
            tape.num(u64::from(w));
            return tape.flag(*found);
        }
        Ok(Reply::Recorded | Reply::JobDone) => (AgentOutputOp::Done, None),
        Ok(Reply::Pending {
            next_turn,
            next_step,
        }) => {
            tape.num(AgentOutputOp::Pending.code());
            tape.num(u64::from(w));
            for list in [next_turn, next_step] {
                tape.num(list.len() as u64);
                for item in list {
                    tape.message(item.message());
                    tape.flag(item.is_waking());
                }
            }
            return;
        }
        Ok(Reply::Fate(fate)) => (AgentOutputOp::Fate, Some(wire::text(&fate.to_json()))),
        Ok(Reply::Closed(ending)) => (AgentOutputOp::Closed, Some(ending.kind().to_owned())),
        Err(Failure::Refused(why)) => (AgentOutputOp::Refused, Some(wire::text(&refused(why)))),
        Err(failure) => (AgentOutputOp::Failed, Some(failure.kind().to_owned())),
    };
    tape.num(code.code());
    tape.num(u64::from(w));
    if let Some(text) = text {
        tape.str(&text);
    }
}

/// The batch to append, if any (see the [module](self)).
fn write_append(tape: &mut Tape<'_>, write: Option<ToWrite>) {
    let Some(write) = write else {
        return tape.num(0);
    };
    tape.num(1);
    tape.num(write.count);
    tape.flag(write.entries.is_some());
    for entry in write.entries.iter().flatten() {
        match entry {
            Entry::Machine(event) => {
                tape.num(0);
                tape.event(event);
            }
            Entry::Host(event) => {
                tape.num(1);
                tape.str(event.kind());
                tape.str(&wire::text(event.data()));
            }
        }
    }
    tape.flag(write.turn_end);
    match write.lines {
        Some(len) => {
            tape.num(1);
            tape.num(len);
        }
        None => tape.num(0),
    }
}

/// A log `seq` from JavaScript (a safe integer): negative or NaN is 0.
fn seq_number(seq: f64) -> u64 {
    if seq.is_nan() || seq <= 0.0 {
        0
    } else {
        seq as u64
    }
}
