//! [`NativeSession`]: the session layer ([`coxswain_session::Session`]) behind N-API, for the
//! agent (`agent.js`), which only moves bytes, time and promises. Every delivery, admission,
//! host-failure and abort-grace decision is the session's: group commit with rollback (S5
//! extended to a failed persistence), the abort grace (S38, S39), admission (id and message
//! sizes, the log's depth, host events inside their step; the S55 bound is the core's), one
//! host-failure vocabulary.
//!
//! Values cross as JSON text in FORMAT.md's shapes (inputs as `"in"` values, entries as log
//! records, effects as `NativeMachine::persisted` gives them); a ticket is its index in the
//! staged batch, a number; a refusal is `{"rejected": KIND, "message": …, details}`.
//! [`stage`](NativeSession::stage) stages a whole batch and seals it in one crossing, which is
//! what the agent's loop calls; the per-member methods are the same steps one at a time.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use coxswain_core::{Event, Input, Outstanding, PreStepAnswer};
use coxswain_log::{Entry, HostEvent, TooDeep};
use coxswain_session::{
    Ack, BatchNo, HostFailure, Limits, Options, Refused, Release, Session, Ticket, Timeout,
};
use napi::bindgen_prelude::{BufferSlice, Either, Latin1String, Object, Utf16String};
use napi::Env;
use napi_derive::napi;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::bound::Bound;
use crate::machine::{
    answer_word, delivered, handle_number, plain_message, preset_input, rejection_value,
    NativeMachine,
};
use crate::tape::{self, Given, Handles, Tape};
use crate::wire::{self, EffectJson};

/// A staged member's ticket (its index in the batch), or why it was refused (JSON text).
type Staged = Either<u32, String>;

/// The session layer over a machine, driven from JavaScript: stage inputs and host events
/// ([`stage`](NativeSession::stage), or [`feed`](NativeSession::feed),
/// [`answer`](NativeSession::answer), [`record`](NativeSession::record),
/// [`host_failed`](NativeSession::host_failed) and [`seal`](NativeSession::seal)), append the
/// sealed batch, then report it [`persisted`](NativeSession::persisted) or
/// [`failed`](NativeSession::failed).
#[napi]
pub struct NativeSession {
    pub(crate) core: SessionShared,
}

/// A session and the messages JavaScript holds objects for (the tape's handles, taken from the
/// machine): shared by the [`NativeSession`] object and the functions of its hot path
/// ([`NativeSession::hot_path`]).
pub struct SessionCore {
    pub(crate) session: Session,
    handles: Handles,
    /// The log lines of the sealed batch, until JavaScript takes them (`takeLines`,
    /// `takeLinesInto`) or the batch is persisted or failed.
    lines: Option<String>,
    /// Whether a staged batch's reply carries its entries (`withEntries`; else only the
    /// inputs' messages, when the lines carry the entries).
    with_entries: bool,
}

/// The one core of a [`NativeSession`].
pub type SessionShared = Rc<RefCell<SessionCore>>;

/// One command of [`NativeSession::stage`], as JSON: `{"feed": INPUT}`, `{"answer": [CALL,
/// TURN, STEP, INPUT]}` (the answer of the call `CALL` — `preStep`, `step`, `turnStopping` — to
/// the request of turn `TURN`, step `STEP`), `{"hostFailed": [CALL, TURN, STEP, FAILURE,
/// DETAIL]}`, `{"record": [TURN, STEP, [{type, data}…]]}` or `{"timeout": NOW_MS}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum Command {
    Feed(Input),
    Answer(String, i64, i64, Input),
    HostFailed(String, i64, i64, String, String),
    Record(i64, i64, Vec<Value>),
    Timeout(f64),
}

#[napi]
impl NativeSession {
    /// The hot path: an object of functions bound to this session's core (see
    /// [`NativeMachine::hot_path`] for why): `withEntries(flag)`, `stageTape(commands,
    /// firstSeq)`, `stageDeliver(preset, message, firstSeq)`, `stageFields0`/`1`/`2`(id, kind,
    /// content, firstSeq), `stageWord(word, turn, step, firstSeq)`, `stageEnter(turn, step,
    /// handles, firstSeq)`, `stageEnterOne(turn, step, handle, firstSeq)`,
    /// `persistedTape(batch, nowMs)`, `takeLines()` and `takeLinesInto(buffer, offset)`; the
    /// stage functions and `persistedTape` reply with tapes (the module `tape`, decoded by
    /// `tape.js`). `withEntries` sets whether the stage functions' replies carry the entries
    /// (from then on; `true` at first). `stageTape` is [`stage`](NativeSession::stage) of
    /// `commands` (their JSON text); `stageDeliver` of the one command `{"feed": {"followup":
    /// message}}` (`preset` 0; a steer 1, an inject 2) with `message` its JSON text;
    /// `stageFields` and its preset's code of that command with the message `{id, source:
    /// {kind}, content}` given as its three strings (as the machine's `fields0`…);
    /// `stageWord` of one answer that is a word, by code (as the machine's `answer`), to the
    /// request of turn `turn`, step `step`; `stageEnter` of the pre-step answer `enter` of the
    /// messages behind the tape's `handles` (`stageEnterOne`: of one, by its handle, as the
    /// machine's `enterOne`). Each replies: the swept handles; the staged results (`0` and a
    /// ticket, `1` for nothing staged, `2` and a refusal's or a timeout's JSON text); then `0`
    /// (nothing staged), or `1`, the batch number, the entry count, whether the entries follow
    /// (`withEntries`), the entries or the inputs' messages bound to their handles, whether a
    /// `turn/end` is among them, and `1` and the UTF-8 length of their log lines (with
    /// `firstSeq`, numbered from it) or `0`; last, whether the machine is quiescent. The
    /// session holds those lines until the batch is persisted or failed, for one of:
    /// `takeLines()`, which hands them out as their own string (one byte a character when they
    /// are ASCII; no tape is kept alive by a slice of it; `undefined` when none are held), or
    /// `takeLinesInto(buffer, offset)`, which copies their bytes into a Node `Buffer` at
    /// `offset` (a log that keeps its bytes, as `MemoryLog` does: no string is made) and
    /// replies their length, or `-1` when none are held or they do not fit (nothing taken).
    /// `persistedTape` is [`persisted`](NativeSession::persisted): the swept handles, the
    /// count, then each release (`0` and an effect; `1`, a ticket and whether it was found;
    /// `2`, a ticket and its refusal's JSON text; `3` and the abort grace's deadline, in
    /// milliseconds, as text); last, whether the machine is quiescent; it throws when `batch`
    /// is not the sealed batch (nothing changed).
    ///
    /// # Errors
    ///
    /// When N-API cannot make a function or the object (out of memory).
    #[napi]
    pub fn hot_path<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let mut path = Bound::new(env, &self.core)?;
        path.bind("withEntries", |core, call| {
            core.with_entries = call.get::<bool>(0)?;
            Ok(())
        })?;
        path.bind("stageTape", |core, call| {
            let commands = call.get::<String>(0)?;
            Ok(core.stage_tape(commands, call.get::<Option<i64>>(1)?))
        })?;
        path.bind("stageDeliver", |core, call| {
            let (preset, message) = (call.get::<u32>(0)?, call.get::<String>(1)?);
            Ok(core.stage_deliver(delivered(preset, &message), call.get::<Option<i64>>(2)?))
        })?;
        // One function a preset (its code in the name): four arguments at most keep napi-rs's
        // call on its fast path (no second `napi_get_cb_info`, no argument vector to grow).
        for (name, preset) in [
            ("stageFields0", 0),
            ("stageFields1", 1),
            ("stageFields2", 2),
        ] {
            path.bind(name, move |core, call| {
                let id = call.get::<String>(0)?;
                let (kind, content) = (call.get::<String>(1)?, call.get::<String>(2)?);
                let input = preset_input(preset, plain_message(id, kind, content));
                Ok(core.stage_deliver(input, call.get::<Option<i64>>(3)?))
            })?;
        }
        path.bind("stageWord", |core, call| {
            let (word, turn, step) = (
                call.get::<u32>(0)?,
                call.get::<i64>(1)?,
                call.get::<i64>(2)?,
            );
            Ok(core.stage_word(word, turn, step, call.get::<Option<i64>>(3)?))
        })?;
        path.bind("stageEnter", |core, call| {
            let (turn, step) = (call.get::<i64>(0)?, call.get::<i64>(1)?);
            let handles = call.get::<Vec<i64>>(2)?;
            Ok(core.stage_enter(turn, step, handles, call.get::<Option<i64>>(3)?))
        })?;
        path.bind("stageEnterOne", |core, call| {
            let (turn, step) = (call.get::<i64>(0)?, call.get::<i64>(1)?);
            let handle = handle_number(call.get::<f64>(2)?);
            Ok(core.stage_enter(turn, step, vec![handle], call.get::<Option<i64>>(3)?))
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
        path.bind("persistedTape", |core, call| {
            let (batch, now_ms) = (call.get::<i64>(0)?, call.get::<f64>(1)?);
            core.persisted_tape(batch, now_ms)
        })?;
        Ok(path.into_object())
    }

    /// A session over `machine`'s machine (fresh, or resumed by
    /// [`NativeMachine::resume`], the session layer's `ResumePlan`), which is taken: `machine`
    /// is left fresh, with the same configuration. `abort_grace_ms` is how long an aborted
    /// host call may take to answer before the session answers `fail` (`host-abandoned`) on
    /// its behalf (S38, S39; infinite: never); `max_id_bytes` and `max_message_bytes` are the
    /// admission limits (absent: the session's defaults, 256 bytes and 1 MiB); `retry_after_ms`
    /// the pause after a failed batch before the session stages anything on its own again
    /// (absent: 100 ms).
    #[napi(constructor)]
    pub fn new(
        machine: &mut NativeMachine,
        abort_grace_ms: Option<f64>,
        max_id_bytes: Option<u32>,
        max_message_bytes: Option<u32>,
        retry_after_ms: Option<f64>,
    ) -> Self {
        let size = |limit: Option<u32>, default: usize| {
            limit.map_or(default, |n| usize::try_from(n).unwrap_or(usize::MAX))
        };
        let options = Options {
            abort_grace: abort_grace_ms.map_or(Options::DEFAULT.abort_grace, millis),
            retry_after: retry_after_ms.map_or(Options::DEFAULT.retry_after, millis),
            limits: Limits {
                max_id_bytes: size(max_id_bytes, Limits::DEFAULT.max_id_bytes),
                max_message_bytes: size(max_message_bytes, Limits::DEFAULT.max_message_bytes),
            },
        };
        let (machine, handles) = machine.take();
        let session = Session::new(machine, options);
        NativeSession {
            core: Rc::new(RefCell::new(SessionCore {
                session,
                handles,
                lines: None,
                with_entries: true,
            })),
        }
    }

    /// Stages `commands` (JSON text: an array of `Command`s) in order, then seals the batch:
    /// `[REPLY, LINES?]`. `REPLY` is `{"staged": [TICKET | REFUSAL | null…], "batch": n,
    /// "entries": [ENTRY…]}`, one result per command (`null`: nothing staged, a timeout not due),
    /// `batch` and `entries` only when something was staged (append the entries as one write,
    /// then report the batch). With `first_seq`, `LINES` is the entries already encoded as log
    /// lines numbered from it (`coxswain-log`'s encoder, as `encodeRecords`), for a log whose
    /// next record has that `seq`; absent when one cannot be encoded. A command of unknown
    /// shape is refused (`invalid-input`) alone; an answer of unknown shape fails its call
    /// (`host-invalid-answer`, S38).
    #[napi]
    pub fn stage(&mut self, commands: String, first_seq: Option<i64>) -> Vec<String> {
        let this = &mut *self.core.borrow_mut();
        let staged: Vec<Value> = match crate::wire::from_text::<Vec<Command>>(&commands) {
            Ok(commands) => commands
                .into_iter()
                .map(|command| this.command(command))
                .collect(),
            // Some command is of unknown shape: each on its own (the slow path).
            Err(_) => match crate::wire::from_text::<Vec<Value>>(&commands) {
                Ok(values) => values.into_iter().map(|value| this.value(value)).collect(),
                Err(error) => vec![refusal_value("invalid-input", &error.to_string())],
            },
        };
        let Some(append) = this.session.seal() else {
            return vec![wire::to_text(&StagedBatch {
                staged,
                batch: None,
                entries: None,
            })];
        };
        let reply = wire::to_text(&StagedBatch {
            staged,
            batch: Some(append.batch.0),
            entries: Some(append.entries),
        });
        let first = first_seq.and_then(|seq| u64::try_from(seq).ok());
        match first.and_then(|first| lines(first, append.entries)) {
            Some(lines) => vec![reply, lines],
            None => vec![reply],
        }
    }

    /// Both pending lists as a tape (as `machine_pending`): their messages the caller's objects.
    #[napi]
    pub fn pending_tape(&mut self) -> Utf16String {
        let this = &mut *self.core.borrow_mut();
        let mut tape = Tape::new(&mut this.handles, Given::new());
        tape.pending(this.session.machine());
        tape.finish().into()
    }

    /// Stages one input (JSON text of a trace's `"in"` value): its ticket, or the refusal
    /// (admission, the core's rejection, S5: it changed nothing; `invalid-input` for an input
    /// of unknown shape).
    #[napi]
    pub fn feed(&mut self, input: String) -> Staged {
        let this = &mut *self.core.borrow_mut();
        match crate::wire::from_text(&input) {
            Ok(input) => staged(this.session.feed(input)),
            Err(error) => Either::B(wire::text(&invalid_input(&error))),
        }
    }

    /// Stages the answer (JSON text of the `"in"` value) of the host call `call` (`preStep`,
    /// `step`, `turnStopping`) to the request of turn `turn`, step `step`: `stale` unless that
    /// request is outstanding (the late answer of an abandoned call, S4). An answer of the
    /// wrong shape fails the call instead (`host-invalid-answer`, S38).
    #[napi]
    pub fn answer(&mut self, call: String, turn: i64, step: i64, input: String) -> Staged {
        let this = &mut *self.core.borrow_mut();
        either(this.answer_parsed(&call, turn, step, crate::wire::from_text(&input)))
    }

    /// Answers the request of the host call `call` (turn `turn`, step `step`) `fail` on the
    /// host's behalf, with the code of `failure` (`panicked`, `raised`, `cancelled`,
    /// `abandoned`, `invalid-answer`: the session layer's vocabulary) and `detail` in its
    /// message; `stale` unless that request is outstanding.
    #[napi]
    pub fn host_failed(
        &mut self,
        call: String,
        turn: i64,
        step: i64,
        failure: String,
        detail: String,
    ) -> Staged {
        let this = &mut *self.core.borrow_mut();
        either(this.host_failed_named(&call, turn, step, &failure, &detail))
    }

    /// Stages host events (JSON text: an array of `{type, data}`) inside step `step` of turn
    /// `turn`: refused unless that step is the outstanding request (`step-closed`), for a type
    /// of the machine's own (`reserved-type`), for data a record cannot hold (`encode`).
    #[napi]
    pub fn record(&mut self, turn: i64, step: i64, events: String) -> Staged {
        let this = &mut *self.core.borrow_mut();
        match crate::wire::from_text::<Vec<Value>>(&events) {
            Ok(events) => either(this.record_values(turn, step, events)),
            Err(error) => Either::B(refusal_text(
                "invalid-input",
                &format!("host events: {error}"),
            )),
        }
    }

    /// Seals the staged batch for its write: JSON text `{"batch": n, "entries": [ENTRY…]}`
    /// (append the entries as one write; empty: nothing to write), or `null` when nothing is
    /// staged.
    #[napi]
    pub fn seal(&mut self) -> Option<String> {
        let this = &mut *self.core.borrow_mut();
        this.session.seal().map(|append| {
            wire::to_text(&StagedBatch {
                staged: Vec::new(),
                batch: Some(append.batch.0),
                entries: Some(append.entries),
            })
        })
    }

    /// Batch `batch` is durable, at time `now_ms` (the host's clock, in milliseconds): every
    /// member's effects, then its acknowledgement, in input order, as a JSON array of effects
    /// (`NativeMachine::persisted`'s shapes) and `{"ack": index, "found": bool}`; last,
    /// `{"deadline": ms}` while an abort grace runs ([`poll_timeout`](NativeSession::poll_timeout),
    /// so that a driver needs no second call to learn it).
    ///
    /// # Errors
    ///
    /// When `batch` is not the sealed batch (nothing changed).
    #[napi]
    pub fn persisted(&mut self, batch: i64, now_ms: f64) -> napi::Result<String> {
        let this = &mut *self.core.borrow_mut();
        let released = this
            .session
            .persisted(batch_no(batch), millis(now_ms))
            .map_err(mismatch)?;
        this.lines = None;
        let mut released: Vec<ReleaseJson> = released.into_iter().map(ReleaseJson::from).collect();
        released.extend(
            this.poll_timeout()
                .map(|deadline| ReleaseJson::Deadline { deadline }),
        );
        Ok(wire::to_text(&released))
    }

    /// Batch `batch` could not be made durable at `now_ms`: the machine is as before it (S5
    /// extended to a failed persistence). JSON text `{"members": [TICKET…], "held":
    /// [TICKET…]}`: the members that failed, and those whose answer the session holds (the
    /// host's, a maintenance job's end: the calls that gave them will not answer twice) and
    /// stages again once its retry pause is over ([`handle_timeout`](NativeSession::handle_timeout));
    /// their waiters wait for that.
    ///
    /// # Errors
    ///
    /// When `batch` is not the sealed batch (nothing changed).
    #[napi]
    pub fn failed(&mut self, batch: i64, now_ms: f64) -> napi::Result<String> {
        let this = &mut *self.core.borrow_mut();
        let failed = this
            .session
            .failed(batch_no(batch), millis(now_ms))
            .map_err(mismatch)?;
        this.lines = None;
        let tickets = |tickets: &[Ticket]| tickets.iter().map(|t| index(*t)).collect::<Vec<_>>();
        Ok(wire::text(&json!({
            "members": tickets(&failed.members),
            "held": tickets(&failed.held),
        })))
    }

    /// When to call [`handle_timeout`](NativeSession::handle_timeout) next, in milliseconds of
    /// the host's clock (the end of the retry pause after a failed batch, or the abort grace's
    /// deadline), or `null`.
    #[napi]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.core.borrow().poll_timeout()
    }

    /// Time has reached `now_ms`: JSON text of what the session staged, as `stage` reports a
    /// timeout: `null` (nothing due), the ticket of an abandoned call's answer, or
    /// `{"retried": [[BATCH, TICKET, STAGED]…]}`. Call again while `poll_timeout` is due.
    #[napi]
    pub fn handle_timeout(&mut self, now_ms: f64) -> String {
        let this = &mut *self.core.borrow_mut();
        wire::text(&timeout_value(this.session.handle_timeout(millis(now_ms))))
    }

    /// The machine's state as JSON (as `NativeMachine::state`); while a batch is staged, with
    /// the staged inputs applied.
    #[napi]
    pub fn state(&self) -> String {
        let this = &*self.core.borrow();
        wire::text(&wire::state(this.session.machine()))
    }

    /// The pending lists as JSON: `{nextTurn, nextStep}` (each `[{message, wakeup}…]`, in order).
    #[napi]
    pub fn pending(&self) -> String {
        let this = &*self.core.borrow();
        wire::text(&wire::pending_lists(this.session.machine()))
    }

    /// Whether no turn and no maintenance runs (S44).
    #[napi]
    pub fn is_quiescent(&self) -> bool {
        let this = &*self.core.borrow();
        this.session.machine().is_quiescent()
    }

    /// Whether the machine is disposed (S45).
    #[napi]
    pub fn is_disposed(&self) -> bool {
        let this = &*self.core.borrow();
        this.session.machine().is_disposed()
    }

    /// The outstanding request as JSON (`{"step": {turn, step}}`, …) or `null`.
    #[napi]
    pub fn outstanding(&self) -> String {
        let this = &*self.core.borrow();
        wire::text(&wire::outstanding(this.session.machine().outstanding()))
    }

    /// The seed of the id indexes' hasher, as 16 hex digits.
    #[napi]
    pub fn hash_seed(&self) -> String {
        let this = &*self.core.borrow();
        format!("{:016x}", this.session.machine().config().hash_seed)
    }
}

impl SessionCore {
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

    /// When to call `handle_timeout` next, in milliseconds of the host's clock.
    fn poll_timeout(&self) -> Option<f64> {
        self.session
            .poll_timeout()
            .map(|deadline| deadline.as_secs_f64() * 1000.0)
    }

    /// [`stage`](NativeSession::stage), replying with a tape (the module `tape`, decoded by
    /// `tape.js`) instead of JSON text: the swept handles; the staged results (`0` and a
    /// ticket, `1` for nothing staged, `2` and a refusal's or a timeout's JSON text); then `0`
    /// (nothing staged), or `1`, the batch number, the entry count, whether the entries follow
    /// (`withEntries`: each `0` and a machine event, or `1`, its type and its data's JSON text;
    /// else the inputs' messages, bound to their handles), whether a `turn/end` is among them,
    /// and `1` and the UTF-8 length of their log lines (with `first_seq`, numbered from it;
    /// held for `takeLines`) or `0`; last, whether the machine is quiescent. A message of a
    /// staged input is named by the handle of the caller's object (the input's `k`-th, in
    /// `messagesOf` order over the commands).
    pub(crate) fn stage_tape(&mut self, commands: String, first_seq: Option<i64>) -> Utf16String {
        let (staged, given): (Vec<Value>, Given) =
            match crate::wire::from_text::<Vec<Command>>(&commands) {
                Ok(commands) => {
                    let mut given = Given::new();
                    for command in &commands {
                        if let Command::Feed(input) | Command::Answer(_, _, _, input) = command {
                            given.extend(tape::messages_of(input));
                        }
                    }
                    let staged = commands
                        .into_iter()
                        .map(|command| self.command(command))
                        .collect();
                    (staged, given)
                }
                // Some command is of unknown shape: each on its own, no message bound.
                Err(_) => match crate::wire::from_text::<Vec<Value>>(&commands) {
                    Ok(values) => (
                        values.into_iter().map(|value| self.value(value)).collect(),
                        Given::new(),
                    ),
                    Err(error) => (
                        vec![refusal_value("invalid-input", &error.to_string())],
                        Given::new(),
                    ),
                },
            };
        self.sealed_tape(&staged, given, first_seq)
    }

    /// [`stage_tape`](SessionCore::stage_tape) of the one command `{"feed": {"followup":
    /// message}}` (a steer's, an inject's), made into its `input` without a wrapper to parse
    /// ([`delivered`] from the message's JSON text, or [`plain_message`] from its three
    /// strings). A message of unknown shape (`Err`: why) is refused (`invalid-input`) and
    /// stages nothing.
    pub(crate) fn stage_deliver(
        &mut self,
        input: Result<Input, String>,
        first_seq: Option<i64>,
    ) -> Utf16String {
        let (staged, given) = match input {
            Ok(input) => {
                let given = tape::messages_of(&input);
                (self.command(Command::Feed(input)), given)
            }
            Err(why) => (refusal_value("invalid-input", &why), Given::new()),
        };
        self.sealed_tape(&[staged], given, first_seq)
    }

    /// [`stage_tape`](SessionCore::stage_tape) of one answer that is a word, by the code of
    /// the machine's `answer` (`0` step `completed`, `1` step `max-tokens`, `2` step `continue`, `3`
    /// turnStopping `done`, `4` preStep `reject`), to the request of turn `turn`, step `step`:
    /// no text crosses. Another code is refused (`invalid-input`) and stages nothing.
    pub(crate) fn stage_word(
        &mut self,
        word: u32,
        turn: i64,
        step: i64,
        first_seq: Option<i64>,
    ) -> Utf16String {
        let result = match answer_word(word) {
            Some((call, input)) => self.answer_parsed(call, turn, step, Ok(input)),
            None => Err(refusal_value(
                "invalid-input",
                &format!("no answer word {word}"),
            )),
        };
        self.sealed_one(result, first_seq)
    }

    /// [`stage_tape`](SessionCore::stage_tape) of the pre-step answer `enter` of the messages
    /// behind `handles` (the tape's, in order) to the request of turn `turn`, step `step`: no
    /// message crosses again. A handle the table does not hold fails the call
    /// (`host-invalid-answer`, S38), as an answer of unknown shape does.
    pub(crate) fn stage_enter(
        &mut self,
        turn: i64,
        step: i64,
        handles: Vec<i64>,
        first_seq: Option<i64>,
    ) -> Utf16String {
        let mut batch = Vec::with_capacity(handles.len());
        let mut unknown = None;
        for handle in handles {
            let found = u64::try_from(handle).ok().and_then(|h| self.handles.get(h));
            match found {
                Some(message) => batch.push(std::sync::Arc::clone(message)),
                None => {
                    unknown = Some(handle);
                    break;
                }
            }
        }
        let result = match unknown {
            None => {
                let input = Input::PreStep(PreStepAnswer::Enter(batch.into()));
                self.answer_parsed("preStep", turn, step, Ok(input))
            }
            Some(handle) => {
                let why = format!("no message has the handle {handle}");
                request_named("preStep", turn, step).and_then(|request| {
                    self.session
                        .host_failed(request, HostFailure::InvalidAnswer, &why)
                        .map_err(|refused| refused_value(&refused))
                })
            }
        };
        self.sealed_one(result, first_seq)
    }

    /// [`persisted`](NativeSession::persisted), replying with a tape: the swept handles, the
    /// count, then each release (`0` and an effect; `1`, a ticket and whether it was found;
    /// `2`, a ticket and its refusal's JSON text; `3` and the abort grace's deadline, in
    /// milliseconds, as text); last, whether the machine is quiescent.
    ///
    /// # Errors
    ///
    /// When `batch` is not the sealed batch (nothing changed).
    pub(crate) fn persisted_tape(&mut self, batch: i64, now_ms: f64) -> napi::Result<Utf16String> {
        let released = self
            .session
            .persisted(batch_no(batch), millis(now_ms))
            .map_err(mismatch)?;
        self.lines = None;
        let deadline = self.poll_timeout();
        let mut tape = Tape::new(&mut self.handles, Given::new());
        tape.num(released.len() as u64 + u64::from(deadline.is_some()));
        for release in &released {
            match release {
                Release::Effect(effect) => {
                    tape.num(0);
                    tape.effect(effect);
                }
                Release::Ack(ticket, Ack::Refused(refused)) => {
                    tape.num(2);
                    tape.num(u64::from(index(*ticket)));
                    tape.str(&wire::text(&refused_value(refused)));
                }
                Release::Ack(ticket, ack) => {
                    tape.num(1);
                    tape.num(u64::from(index(*ticket)));
                    tape.flag(!matches!(ack, Ack::Input { found: false }));
                }
            }
        }
        if let Some(deadline) = deadline {
            tape.num(3);
            tape.str(&deadline.to_string());
        }
        tape.flag(self.session.machine().is_quiescent());
        Ok(tape.finish().into())
    }

    /// [`sealed_tape`](Self::sealed_tape) of one command's result (no input message to bind).
    fn sealed_one(&mut self, result: Result<Ticket, Value>, first_seq: Option<i64>) -> Utf16String {
        let staged = [result.map_or_else(|refusal| refusal, |t| Value::from(index(t)))];
        self.sealed_tape(&staged, Given::new(), first_seq)
    }

    /// Seals the staged batch and writes the reply tape of `stage_tape` for `staged`.
    fn sealed_tape(
        &mut self,
        staged: &[Value],
        given: Given,
        first_seq: Option<i64>,
    ) -> Utf16String {
        let sealed = self.session.seal();
        let mut tape = Tape::new(&mut self.handles, given);
        tape.num(staged.len() as u64);
        for result in staged {
            match result {
                Value::Number(ticket) => {
                    tape.num(0);
                    tape.num(ticket.as_u64().unwrap_or(u64::from(u32::MAX)));
                }
                Value::Null => tape.num(1),
                other => {
                    tape.num(2);
                    tape.str(&wire::text(other));
                }
            }
        }
        let Some(append) = sealed else {
            tape.num(0);
            tape.flag(self.session.machine().is_quiescent());
            return tape.finish().into();
        };
        let first = first_seq.and_then(|seq| u64::try_from(seq).ok());
        let lines = first.and_then(|first| lines(first, append.entries));
        // Entries that cannot be encoded cross as values even when not asked for.
        let with_entries = self.with_entries || lines.is_none();
        tape.num(1);
        tape.num(append.batch.0);
        tape.num(append.entries.len() as u64);
        tape.flag(with_entries);
        if !with_entries {
            tape.bind_inputs();
        }
        let mut turn_end = false;
        for entry in append.entries {
            turn_end |= matches!(entry, Entry::Machine(Event::TurnEnd { .. }));
            if !with_entries {
                continue;
            }
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
        tape.flag(turn_end);
        match &lines {
            Some(lines) => {
                tape.num(1);
                tape.num(lines.len() as u64);
            }
            None => tape.num(0),
        }
        self.lines = lines;
        tape.flag(self.session.machine().is_quiescent());
        tape.finish().into()
    }

    /// One command of a [`stage`](NativeSession::stage): its ticket, refusal or `null`.
    fn command(&mut self, command: Command) -> Value {
        let result = match command {
            Command::Feed(input) => self.session.feed(input).map_err(|r| refused_value(&r)),
            Command::Answer(call, turn, step, input) => {
                self.answer_parsed(&call, turn, step, Ok(input))
            }
            Command::HostFailed(call, turn, step, failure, detail) => {
                self.host_failed_named(&call, turn, step, &failure, &detail)
            }
            Command::Record(turn, step, events) => self.record_values(turn, step, events),
            Command::Timeout(now) => {
                return timeout_value(self.session.handle_timeout(millis(now)));
            }
        };
        match result {
            Ok(ticket) => Value::from(index(ticket)),
            Err(refusal) => refusal,
        }
    }

    /// One command given as a JSON value (the slow path, for a batch holding one of unknown
    /// shape).
    fn value(&mut self, value: Value) -> Value {
        if let Some(Value::Array(answer)) = value.get("answer") {
            if let [Value::String(call), turn, step, input] = answer.as_slice() {
                let number = |n: &Value| n.as_i64().unwrap_or(-1);
                let parsed = Input::deserialize(input);
                return match self.answer_parsed(call, number(turn), number(step), parsed) {
                    Ok(ticket) => Value::from(index(ticket)),
                    Err(refusal) => refusal,
                };
            }
        }
        match Command::deserialize(&value) {
            Ok(command) => self.command(command),
            Err(error) => invalid_input(&error),
        }
    }

    /// The answer of call `call` to its request, or, for one of the wrong shape, its failure
    /// (`host-invalid-answer`, S38: what the host gave is not an answer).
    fn answer_parsed(
        &mut self,
        call: &str,
        turn: i64,
        step: i64,
        input: Result<Input, serde_json::Error>,
    ) -> Result<Ticket, Value> {
        let request = request_named(call, turn, step)?;
        let result = match input {
            Ok(input) => self.session.answer(request, input),
            Err(error) => {
                let why = format!("not an answer: {error}");
                self.session
                    .host_failed(request, HostFailure::InvalidAnswer, &why)
            }
        };
        result.map_err(|refused| refused_value(&refused))
    }

    fn host_failed_named(
        &mut self,
        call: &str,
        turn: i64,
        step: i64,
        failure: &str,
        detail: &str,
    ) -> Result<Ticket, Value> {
        let request = request_named(call, turn, step)?;
        let Some(failure) = failure_named(failure) else {
            let why = format!("no host failure `{failure}`");
            return Err(refusal_value("invalid-input", &why));
        };
        self.session
            .host_failed(request, failure, detail)
            .map_err(|refused| refused_value(&refused))
    }

    fn record_values(&mut self, turn: i64, step: i64, events: Vec<Value>) -> Result<Ticket, Value> {
        let events = host_events(events)?;
        let number = |n: i64| u64::try_from(n).unwrap_or(u64::MAX);
        self.session
            .record(number(turn), number(step), events)
            .map_err(|r| refused_value(&r))
    }
}

/// `entries` as log lines numbered from `first` (`None` if one cannot be encoded: the log's own
/// encoder then says why).
fn lines(first: u64, entries: &[Entry]) -> Option<String> {
    let mut bytes = Vec::with_capacity(128 * entries.len());
    for (seq, entry) in (first..).zip(entries) {
        coxswain_log::encode(seq, entry, &mut bytes).ok()?;
    }
    String::from_utf8(bytes).ok()
}

/// A staged (and sealed) batch's reply.
#[derive(Serialize)]
struct StagedBatch<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    staged: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    entries: Option<&'a [Entry]>,
}

/// A release as JSON: an effect, a member's acknowledgement (`refused`: its refusal, judged
/// against the batch's earlier members, stands now that they are durable), or the abort
/// grace's deadline.
#[derive(Serialize)]
#[serde(untagged)]
enum ReleaseJson {
    Ack { ack: u32, found: bool },
    Refused { ack: u32, refused: Value },
    Deadline { deadline: f64 },
    Effect(EffectJson),
}

impl From<Release> for ReleaseJson {
    fn from(release: Release) -> Self {
        match release {
            Release::Effect(effect) => ReleaseJson::Effect(EffectJson::from(effect)),
            Release::Ack(ticket, Ack::Refused(refused)) => ReleaseJson::Refused {
                ack: index(ticket),
                refused: refused_value(&refused),
            },
            Release::Ack(ticket, ack) => ReleaseJson::Ack {
                ack: index(ticket),
                found: !matches!(ack, Ack::Input { found: false }),
            },
        }
    }
}

/// The host-failure a name (the vocabulary's, without its `host-` prefix) names.
pub(crate) fn failure_named(name: &str) -> Option<HostFailure> {
    match name {
        "panicked" => Some(HostFailure::Panicked),
        "raised" => Some(HostFailure::Raised),
        "cancelled" => Some(HostFailure::Cancelled),
        "abandoned" => Some(HostFailure::Abandoned),
        "invalid-answer" => Some(HostFailure::InvalidAnswer),
        _ => None,
    }
}

/// What a request is, for a message naming the call (only its kind shows).
pub(crate) fn call_named(call: &str) -> Option<Outstanding> {
    request_named(call, 0, 0).ok()
}

/// The request a host call answers: its kind (`preStep`, `step`, `turnStopping`), turn and step.
fn request_named(call: &str, turn: i64, step: i64) -> Result<Outstanding, Value> {
    let (turn, step) = (
        u64::try_from(turn).unwrap_or(u64::MAX),
        u64::try_from(step).unwrap_or(u64::MAX),
    );
    match call {
        "preStep" => Ok(Outstanding::PreStep { turn, step }),
        "step" => Ok(Outstanding::Step { turn, step }),
        "turnStopping" => Ok(Outstanding::TurnStopping { turn }),
        _ => Err(refusal_value(
            "invalid-input",
            &format!("no host call `{call}`"),
        )),
    }
}

fn staged(result: Result<Ticket, Refused>) -> Staged {
    either(result.map_err(|refused| refused_value(&refused)))
}

fn either(result: Result<Ticket, Value>) -> Staged {
    match result {
        Ok(ticket) => Either::A(index(ticket)),
        Err(refusal) => Either::B(wire::text(&refusal)),
    }
}

/// What a timeout staged, as JSON: `null` (nothing due); the ticket of the `host-abandoned`
/// answer of an aborted call that outlived the grace (drop that call: its late answer is not
/// fed); or `{"retried": [[BATCH, TICKET, STAGED]…]}`, the answers failed batches held, each
/// with the held member's batch and ticket and its new ticket, or the refusal that stops it
/// now (S5: tell its waiter).
fn timeout_value(timeout: Option<Timeout>) -> Value {
    match timeout {
        None => Value::Null,
        Some(Timeout::Abandoned { ticket, .. }) => Value::from(index(ticket)),
        Some(Timeout::Retried { answers }) => {
            let answers: Vec<Value> = answers
                .iter()
                .map(|(held, staged)| {
                    let staged = match staged {
                        Ok(ticket) => Value::from(index(*ticket)),
                        Err(refused) => refused_value(refused),
                    };
                    json!([held.batch.0, index(*held), staged])
                })
                .collect();
            json!({ "retried": answers })
        }
    }
}

fn index(ticket: Ticket) -> u32 {
    u32::try_from(ticket.index).unwrap_or(u32::MAX)
}

fn batch_no(batch: i64) -> BatchNo {
    BatchNo(u64::try_from(batch).unwrap_or(u64::MAX))
}

/// Milliseconds of the host's clock as a `Duration`: negative or NaN is 0, too large or
/// infinite saturates.
fn millis(ms: f64) -> Duration {
    if ms.is_nan() || ms <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::MAX)
}

fn mismatch(error: coxswain_session::BatchMismatch) -> napi::Error {
    napi::Error::new(napi::Status::InvalidArg, error.to_string())
}

fn invalid_input(error: &serde_json::Error) -> Value {
    refusal_value("invalid-input", &format!("unknown input: {error}"))
}

/// `[{type, data}…]` as host events: `invalid-input` for an entry without a string `type`,
/// `reserved-type` for a type of the machine's own.
fn host_events(values: Vec<Value>) -> Result<Vec<HostEvent>, Value> {
    values
        .into_iter()
        .map(|value| {
            let Value::Object(mut object) = value else {
                return Err(refusal_value(
                    "invalid-input",
                    "a host event is not an object",
                ));
            };
            let Some(Value::String(kind)) = object.remove("type") else {
                return Err(refusal_value(
                    "invalid-input",
                    "a host event needs a string `type`",
                ));
            };
            let data = object.remove("data").unwrap_or(Value::Null);
            HostEvent::new(kind, data).map_err(|reserved| {
                json!({
                    "rejected": "reserved-type",
                    "message": reserved.to_string(),
                    "type": reserved.0,
                })
            })
        })
        .collect()
}

/// A refusal as JSON: its kind, its message and its details.
fn refused_value(refused: &Refused) -> Value {
    let message = refused.to_string();
    match refused {
        Refused::Rejected(rejected) => rejection_value(rejected),
        Refused::IdTooLong { bytes, max, .. } => json!({
            "rejected": "id-too-long", "message": message, "bytes": bytes, "max": max,
        }),
        Refused::MessageTooLarge { bytes, max, .. } => json!({
            "rejected": "message-too-large", "message": message, "bytes": bytes, "max": max,
        }),
        Refused::TooDeep(deep) => too_deep(deep),
        Refused::StepClosed { turn, step } => json!({
            "rejected": "step-closed", "message": message, "turn": turn, "step": step,
        }),
        Refused::Sealed => refusal_value("sealed", &message),
        Refused::Stale { .. } => refusal_value("stale", &message),
        _ => refusal_value("refused", &message),
    }
}

/// `too-deep` with the Rust `TooDeep`'s own text and its `depth` and `max` (`TooDeepError`).
pub(crate) fn too_deep(deep: &TooDeep) -> Value {
    json!({
        "rejected": "too-deep", "message": deep.to_string(), "depth": deep.depth, "max": deep.max,
    })
}

fn refusal_value(kind: &str, message: &str) -> Value {
    json!({ "rejected": kind, "message": message })
}

fn refusal_text(kind: &str, message: &str) -> String {
    wire::text(&refusal_value(kind, message))
}
