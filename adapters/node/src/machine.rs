//! [`NativeMachine`]: the core's machine behind N-API, with its drain contract.

use std::cell::RefCell;
use std::rc::Rc;

use coxswain_binding_kit::options::{self, Memory};
use coxswain_binding_kit::shapes;
use coxswain_core::{
    AnswerWord, BatchError, Input, Machine, Message, Output, PreStepAnswer, SharedMessage, Target,
};
use coxswain_session::{ResumeError, ResumePlan};
use napi::bindgen_prelude::{Buffer, Object, Utf16String};
use napi::Env;
use napi_derive::napi;
use serde::Serialize;
use serde_json::{json, Value};

use crate::bound::Bound;
use crate::filelog::NativeFileLog;
use crate::section13::Given;
use crate::tape::{self, Handles, Tape};
use crate::wire;

/// The core's [`Machine`], driven from JavaScript.
///
/// The drain contract (the core's [`Transition`](coxswain_core::Transition)) is kept by the core
/// itself: the hot path's `feed` ([`NativeMachine::hot_path`]) applies an input
/// and returns its whole transition as a tape, leaving its effects queued in the core; the
/// host's persisted word (`ack`, or the `ack` flag of the next input) or `ordered` (every
/// output in wire order, for ports) drains them. Until then the core rejects the next input as
/// `undrained`.
#[napi]
pub struct NativeMachine {
    pub(crate) core: Shared,
}

/// A machine and the messages JavaScript holds objects for (the tape's handles): shared by the
/// [`NativeMachine`] object and the functions of its hot path ([`NativeMachine::hot_path`]).
pub struct Core {
    pub(crate) machine: Machine,
    pub(crate) handles: Handles,
}

/// The one core of a [`NativeMachine`].
pub type Shared = Rc<RefCell<Core>>;

#[napi]
impl NativeMachine {
    /// A fresh machine whose delivery memory holds `memory` ids (S51; 0 is plain S9), with the
    /// admission bound `max_pending` (S55; absent, `null` or 0: unbounded — the JavaScript side
    /// refuses 0 before it gets here).
    ///
    /// `hash_seed` (16 hex digits; absent: 0) keys the id indexes: the agent draws a random one
    /// (HashDoS). No output depends on it. With `unbounded_memory`, the delivery memory never
    /// forgets an id (S58's `unbounded`; `memory` is then ignored).
    #[napi(constructor)]
    pub fn new(
        memory: u32,
        max_pending: Option<u32>,
        hash_seed: Option<String>,
        unbounded_memory: Option<bool>,
    ) -> Self {
        let seed = hash_seed
            .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
            .unwrap_or(0);
        let memory = match unbounded_memory {
            Some(true) => Memory::Unbounded,
            _ => Memory::Ids(usize::try_from(memory).unwrap_or(usize::MAX)),
        };
        // 0 is unbounded here (the JavaScript side refuses it before).
        let max_pending = max_pending
            .filter(|limit| *limit > 0)
            .map(|limit| usize::try_from(limit).unwrap_or(usize::MAX));
        let config = options::config(memory, max_pending, seed).unwrap_or_default();
        NativeMachine {
            core: Rc::new(RefCell::new(Core {
                machine: Machine::with_config(config),
                handles: Handles::default(),
            })),
        }
    }

    /// The seed of the id indexes' hasher, as 16 hex digits.
    #[napi]
    pub fn hash_seed(&self) -> String {
        let core = self.core.borrow();
        format!("{:016x}", core.machine.config().hash_seed)
    }

    /// Replaces this machine with one restored from a conformance trace's `given` value (JSON
    /// text: `null`, or `{log, seedLength, memory, maxPending, repair}`; S46–S48, S55; `memory`
    /// may be `"unbounded"`, S58; `repair: {redeliver: A}` runs crash repair with allowance `A`
    /// on `log` first, S50, S59). Returns `{"ready": {}}` (with `repair`: `{"ready":
    /// {"repaired": [{"event": EVENT}…]}}`, the events repair appended), `{"invalidLog": "why"}`
    /// (S47; the machine is unchanged) or `{"error": "why"}` for a value of the wrong shape.
    #[napi]
    pub fn restore_given(&mut self, given: String) -> String {
        let mut core = self.core.borrow_mut();
        let reply = match Given::parse(&given) {
            Err(error) => json!({ "error": error }),
            Ok(given) => match given.restore() {
                Ok((machine, repaired)) => {
                    core.adopt(machine);
                    given.ready(repaired)
                }
                Err(error) => json!({ "invalidLog": error.to_string() }),
            },
        };
        wire::text(&reply)
    }

    /// Replaces this machine with the session held in a JSON-lines log's bytes, as the tokio
    /// adapter's `Agent::open` does: reads the records (`coxswain-log`'s reader; a torn final
    /// line is left out), restores them (S46–S48; items park, nothing wakes) with this machine's
    /// delivery memory and admission bound, and closes a turn the log ends inside (S50), then
    /// re-inserts what that turn claimed unseen, within the redelivery allowance `redelivery`
    /// (S59; absent: 0, checked by `ResumeOptions::try_with_redelivery`). The caller writes the
    /// tail fix and the closers to the log before anything else. Returns `{"ok": {records,
    /// completeLen, torn, unterminated, nextSeq, closers, redelivered, interrupted}}`, or
    /// `{"corrupt": {line, message}}` / `{"invalidLog": {line, message}}` / `{"redelivery":
    /// "why"}` (an allowance refused: nothing read) with the machine unchanged.
    #[napi]
    pub fn resume(&mut self, bytes: Buffer, redelivery: Option<i64>) -> String {
        let mut core = self.core.borrow_mut();
        let allowance = i128::from(redelivery.unwrap_or(0));
        let options = match options::resume_options(core.machine.config(), allowance) {
            Ok(options) => options,
            Err(why) => return wire::text(&json!({ "redelivery": why.to_string() })),
        };
        // The session layer's one resume decision (`ResumePlan`).
        match ResumePlan::from_bytes(&bytes, options) {
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
                core.adopt(plan.machine);
                wire::text(&json!({ "ok": {
                    "records": plan.records,
                    "completeLen": plan.cut_to,
                    "torn": plan.torn.map(|t| json!({ "line": t.line, "bytes": t.bytes })),
                    "unterminated": plan.terminate,
                    "nextSeq": plan.next_seq,
                    "closers": plan.closers,
                    "redelivered": plan.redelivered,
                    "interrupted": plan.interrupted,
                }}))
            }
        }
    }

    /// Takes the session `log`'s last resume restored (`NativeFileLog.resume`, the shared file
    /// log's `FileLog::resume`) as this machine: `false` (and this machine unchanged) if there is
    /// none to take.
    #[napi]
    pub fn adopt_resumed(&mut self, log: &NativeFileLog) -> bool {
        match log.take_resumed() {
            Some(machine) => {
                self.core.borrow_mut().adopt(machine);
                true
            }
            None => false,
        }
    }

    /// The hot path: an object of functions bound to this machine's core. Each replies with a
    /// tape (the module `tape`, decoded by `tape.js`); `ack` first drains the transition the
    /// caller was handed, whose events it said are durable:
    ///
    /// * `feed(ack, input)`: applies one input (JSON text of a trace's `"in"` value): the swept
    ///   handles, then `0`, `found`, the events and the effects (left queued in the core until
    ///   the caller's persisted word); or `1` and a rejection's JSON text, or `2` and why the
    ///   input is of unknown shape;
    /// * `deliver(ack, preset, message)`: `feed` of a follow-up (`preset` 0), a steer (1) or an
    ///   inject (2) of `message`, its JSON text, with no wrapper to parse;
    ///   `fields0`/`1`/`2`(ack, id, kind, content), the same by the preset's code in the
    ///   name, of the message `{id, source: {kind}, content}` given as its three strings
    ///   (`plain_message`, `machine.js` `plainFields`): no text to parse at all;
    ///   `sourced0`/`1`/`2`(ack, id, content, key, value, …), the same of a message whose
    ///   `source` is any plain object of at most eight strings, given as its pairs
    ///   (`sourced_message`, `machine.js` `fieldsOf`);
    /// * `enter(ack, handles)`, `enterOne(ack, handle)`: the pre-step answer `enter` of the
    ///   messages behind the tape's handles, so none crosses again (`2` for a handle the table
    ///   does not hold);
    /// * `answer(ack, word)`: an answer that is a word, by code (`0` step `completed`, `1` step
    ///   `max-tokens`, `2` step `continue`, `3` turnStopping `done`, `4` preStep `reject`);
    /// * `ack()`: the persisted word alone; `queued()`: the queued transition again (left
    ///   queued); `ordered(withBegin)`: every queued output in wire order (each begin too when
    ///   asked), which drains them; `pending()`: both pending lists, each item's message and
    ///   whether it wakes.
    ///
    /// A bound function is a plain N-API function over its closure: a call costs about a fifth
    /// of a `#[napi]` function's (whose glue tracks borrows on every call, and looks an
    /// `External` argument up in a locked table).
    ///
    /// # Errors
    ///
    /// When N-API cannot make a function or the object (out of memory).
    #[napi]
    pub fn hot_path<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let mut path = Bound::new(env, &self.core)?;
        path.bind("feed", |core, call| {
            let (ack, input) = (call.get::<bool>(0)?, call.get::<String>(1)?);
            Ok(core.feed(ack, input))
        })?;
        path.bind("deliver", |core, call| {
            let (ack, preset) = (call.get::<bool>(0)?, call.get::<u32>(1)?);
            Ok(core.deliver(ack, preset, &call.get::<String>(2)?))
        })?;
        // One function a preset (its code in the name): four arguments at most keep napi-rs's
        // call on its fast path (no second `napi_get_cb_info`, no argument vector to grow).
        for (name, preset) in [("fields0", 0), ("fields1", 1), ("fields2", 2)] {
            path.bind(name, move |core, call| {
                let (ack, id) = (call.get::<bool>(0)?, call.get::<String>(1)?);
                let (kind, content) = (call.get::<String>(2)?, call.get::<String>(3)?);
                let input = preset_input(preset, plain_message(id, kind, content));
                Ok(core.deliver_input(ack, input))
            })?;
        }
        // A message whose `source` is any plain object of strings (`machine.js` `fieldsOf`):
        // `sourced0`/`1`/`2`(ack, id, content, key, value, …), its source's fields as pairs.
        for (name, preset) in [("sourced0", 0), ("sourced1", 1), ("sourced2", 2)] {
            path.bind(name, move |core, call| {
                let (ack, id) = (call.get::<bool>(0)?, call.get::<String>(1)?);
                let content = call.get::<String>(2)?;
                let input = sourced_message(call, id, content)?
                    .and_then(|message| preset_input(preset, message));
                Ok(core.deliver_input(ack, input))
            })?;
        }
        path.bind("enter", |core, call| {
            let (ack, handles) = (call.get::<bool>(0)?, call.get::<Vec<i64>>(1)?);
            Ok(core.enter(ack, handles))
        })?;
        path.bind("enterOne", |core, call| {
            let (ack, handle) = (call.get::<bool>(0)?, call.get::<f64>(1)?);
            Ok(core.enter(ack, vec![handle_number(handle)]))
        })?;
        path.bind("answer", |core, call| {
            let (ack, word) = (call.get::<bool>(0)?, call.get::<u32>(1)?);
            Ok(core.answer(ack, word))
        })?;
        path.bind("ack", |core, _| {
            core.ack();
            Ok(())
        })?;
        path.bind("queued", |core, _| Ok(core.queued()))?;
        path.bind("ordered", |core, call| {
            Ok(core.ordered(call.get::<bool>(0)?))
        })?;
        path.bind("pending", |core, _| Ok(core.pending_tape()))?;
        Ok(path.into_object())
    }

    /// One request of the `--exec` line protocol (PORTS.md) on this machine: the reply line to an
    /// `"in"` request, `{"outputs": [OUTPUT…]}`, `{"rejected": KIND}` or `{"error": "why"}`.
    #[napi]
    pub fn wire(&mut self, input: String) -> String {
        let mut core = self.core.borrow_mut();
        let input: Input = match crate::wire::from_text(&input) {
            Ok(input) => input,
            Err(error) => {
                return wire::text(&json!({ "error": format!("unknown input: {error}") }))
            }
        };
        match core.machine.handle(input) {
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
        let mut core = self.core.borrow_mut();
        batch_reply(core.machine.begin_batch())
    }

    /// Closes the batch and keeps its inputs: `""`, or `not-open`.
    #[napi]
    pub fn commit_batch(&mut self) -> String {
        let mut core = self.core.borrow_mut();
        batch_reply(core.machine.commit_batch())
    }

    /// Closes the batch and takes back every input fed since it opened (the machine is as it
    /// was; queued outputs are dropped): `""`, or `not-open`.
    #[napi]
    pub fn roll_back_batch(&mut self) -> String {
        let mut core = self.core.borrow_mut();
        batch_reply(core.machine.roll_back_batch())
    }

    /// Turns implicit batches on or off ([`Machine::set_implicit_batches`]: each accepted input
    /// commits the open batch and opens its own, so `roll_back_batch` takes back the last
    /// input): `""`, or the refusal's kind (`already-open`: a batch is open).
    #[napi]
    pub fn set_implicit_batches(&mut self, on: bool) -> String {
        let mut core = self.core.borrow_mut();
        batch_reply(core.machine.set_implicit_batches(on))
    }

    /// Whether implicit batches are on.
    #[napi]
    pub fn is_implicit_batches(&self) -> bool {
        let core = self.core.borrow();
        core.machine.is_implicit_batches()
    }

    /// Whether a batch is open.
    #[napi]
    pub fn is_batch_open(&self) -> bool {
        let core = self.core.borrow();
        core.machine.is_batch_open()
    }

    /// The machine's state as JSON: `{status, quiescent, disposed, maintenance,
    /// cancelRequested, lastTurn, outstanding, nextTurn, nextStep}`.
    #[napi]
    pub fn state(&self) -> String {
        let core = self.core.borrow();
        wire::text(&wire::state(&core.machine))
    }

    /// Whether no turn and no maintenance runs (S44).
    #[napi]
    pub fn is_quiescent(&self) -> bool {
        let core = self.core.borrow();
        core.machine.is_quiescent()
    }

    /// Whether the machine is disposed (S45).
    #[napi]
    pub fn is_disposed(&self) -> bool {
        let core = self.core.borrow();
        core.machine.is_disposed()
    }

    /// The outstanding request as JSON (`{"step": {turn, step}}`, …) or `null`.
    #[napi]
    pub fn outstanding(&self) -> String {
        let core = self.core.borrow();
        wire::text(&wire::outstanding(core.machine.outstanding()))
    }

    /// Whether the delivery memory holds `id` (S51).
    #[napi]
    pub fn remembers(&self, id: String) -> bool {
        let core = self.core.borrow();
        core.machine.remembers(&id.into())
    }

    /// The admission bound (S55), or `null` when unbounded.
    #[napi]
    pub fn max_pending(&self) -> Option<u32> {
        let core = self.core.borrow();
        core.machine
            .config()
            .max_pending
            .map(|limit| u32::try_from(limit.get()).unwrap_or(u32::MAX))
    }

    /// The number of items pending in the next-turn list (NT) and the next-step list (NS).
    #[napi]
    pub fn pending_counts(&self) -> Vec<u32> {
        let core = self.core.borrow();
        let count = |target| u32::try_from(core.machine.pending(target).len()).unwrap_or(u32::MAX);
        vec![count(Target::NextTurn), count(Target::NextStep)]
    }
}

impl NativeMachine {
    /// Takes the machine out (for a [`NativeSession`](crate::NativeSession)), leaving a fresh
    /// one with the same configuration.
    pub(crate) fn take(&mut self) -> (Machine, Handles) {
        let mut core = self.core.borrow_mut();
        let fresh = Machine::with_config(core.machine.config());
        (
            std::mem::replace(&mut core.machine, fresh),
            std::mem::take(&mut core.handles),
        )
    }
}

impl Core {
    /// Takes `machine` (restored or resumed) as this core's, in this machine's batch mode: a
    /// machine made with `implicitBatch` stays so.
    pub(crate) fn adopt(&mut self, mut machine: Machine) {
        if self.machine.is_implicit_batches() {
            // A restored machine has no batch open: turning the mode on cannot be refused.
            let _ = machine.set_implicit_batches(true);
        }
        self.machine = machine;
    }

    /// Applies one input (JSON text of a trace's `"in"` value) and replies with a tape (the
    /// module `tape`): the swept handles, then `0`, `found`, the events and the effects of the
    /// transition (left queued in the core until the caller's persisted word: `ack`); or `1`
    /// and a rejection's JSON text (as [`handle`](NativeMachine::handle) writes it), or `2` and
    /// why the input is of unknown shape. With `ack`, the previous transition is first drained:
    /// the caller has had its effects, and the host said its events are durable.
    pub(crate) fn feed(&mut self, ack: bool, input: String) -> Utf16String {
        if ack {
            self.ack();
        }
        match crate::wire::from_text::<Input>(&input) {
            Ok(input) => self.apply_taped(input),
            Err(error) => self.refusal(2, &format!("unknown input: {error}")),
        }
    }

    /// A follow-up (`preset` 0), a steer (1) or an inject (2) of the message `message` (its
    /// JSON text, [`delivered`]): [`feed`](Core::feed) of `{"followup": message}` and the
    /// others, without the input's wrapper to parse. Replies as `feed` does.
    pub(crate) fn deliver(&mut self, ack: bool, preset: u32, message: &str) -> Utf16String {
        self.deliver_input(ack, delivered(preset, message))
    }

    /// [`deliver`](Core::deliver) of a delivery already made into its input (or why there is
    /// none: replies `2`).
    pub(crate) fn deliver_input(&mut self, ack: bool, input: Result<Input, String>) -> Utf16String {
        if ack {
            self.ack();
        }
        match input {
            Ok(input) => self.apply_taped(input),
            Err(why) => self.refusal(2, &why),
        }
    }

    /// Answers the outstanding pre-step request with `enter` of the messages behind `handles`
    /// (handles of the tape, in order): [`feed`](Core::feed) of `{"preStep": {"enter":
    /// […]}}` with the core's own messages, so none crosses again. A handle the table does not
    /// hold replies `2`.
    pub(crate) fn enter(&mut self, ack: bool, handles: Vec<i64>) -> Utf16String {
        if ack {
            self.ack();
        }
        let mut batch = Vec::with_capacity(handles.len());
        for handle in handles {
            let found = u64::try_from(handle)
                .ok()
                .and_then(|handle| self.handles.get(handle));
            match found {
                Some(message) => batch.push(std::sync::Arc::clone(message)),
                None => return self.refusal(2, &format!("no message has the handle {handle}")),
            }
        }
        // The core's own messages, checked when they were delivered.
        self.apply_taped(Input::PreStep(PreStepAnswer::Enter(batch.into())))
    }

    /// An answer that is a word, by code (no text crosses): `0` step `completed`, `1` step
    /// `max-tokens`, `2` step `continue`, `3` turnStopping `done`, `4` preStep `reject`; another
    /// code replies `2` (unknown shape). Replies as [`feed`](Core::feed) does.
    pub(crate) fn answer(&mut self, ack: bool, word: u32) -> Utf16String {
        if ack {
            self.ack();
        }
        match answer_word(word) {
            Some(answer) => self.apply_taped(answer.input()),
            None => self.refusal(2, &format!("no answer word {word}")),
        }
    }

    /// The caller's persisted word for the transition it was handed: drains it.
    pub(crate) fn ack(&mut self) {
        self.machine.drain().persisted().for_each(drop);
    }

    /// The queued transition again (its events and effects, left queued) as a tape: the swept
    /// handles, the events, the effects.
    pub(crate) fn queued(&mut self) -> Utf16String {
        let transition = self.machine.drain();
        let mut tape = Tape::new(&mut self.handles, tape::Given::new());
        tape.transition(&transition);
        drop(transition);
        tape.finish().into()
    }

    /// Every queued output in wire order (with each begin when `with_begin`) as a tape, which
    /// drains them: the swept handles, the count, then each output (`0` and an event, `1` and
    /// an effect).
    pub(crate) fn ordered(&mut self, with_begin: bool) -> Utf16String {
        let drained = self.machine.drain();
        let outputs: Vec<Output> = if with_begin {
            drained.into_outputs_with_begin().collect()
        } else {
            drained.into_outputs().collect()
        };
        let mut tape = Tape::new(&mut self.handles, tape::Given::new());
        tape.num(outputs.len() as u64);
        for output in &outputs {
            tape.output(output);
        }
        tape.finish().into()
    }

    /// Both pending lists as a tape: the swept handles, then each list (its length, then each
    /// item's message and whether it wakes).
    pub(crate) fn pending_tape(&mut self) -> Utf16String {
        let mut tape = Tape::new(&mut self.handles, tape::Given::new());
        tape.pending(&self.machine);
        tape.finish().into()
    }

    /// Applies an input and writes the tape of its transition (see [`feed`](Core::feed)).
    fn apply_taped(&mut self, input: Input) -> Utf16String {
        let inputs = tape::messages_of(&input);
        let applied = match input {
            Input::Remove(id) => self.machine.remove(&id),
            Input::Replace { id, message } => self.machine.replace(&id, message),
            input => self.machine.handle(input).map(Some),
        };
        match applied {
            Ok(transition) => {
                let mut tape = Tape::new(&mut self.handles, inputs);
                tape.num(0);
                tape.flag(transition.is_some());
                match &transition {
                    Some(transition) => tape.transition(transition),
                    None => {
                        tape.num(0);
                        tape.num(0);
                    }
                }
                // Left undrained: the effects stay queued for the caller's `ack`.
                tape.finish().into()
            }
            Err(rejected) => {
                let reply = wire::text(&shapes::rejection(&rejected));
                self.refusal(1, &reply)
            }
        }
    }

    /// A tape that refuses: the swept handles, `status`, then `text`.
    fn refusal(&mut self, status: u64, text: &str) -> Utf16String {
        let mut tape = Tape::new(&mut self.handles, tape::Given::new());
        tape.num(status);
        tape.str(text);
        tape.finish().into()
    }
}

/// The input a follow-up (`preset` 0), a steer (1) or an inject (2) of `message` (its JSON
/// text) is, or why there is none (`unknown input: …`, the text of an input of unknown shape).
pub(crate) fn delivered(preset: u32, message: &str) -> Result<Input, String> {
    let message = crate::wire::from_text::<Message>(message)
        .map(SharedMessage::new)
        .map_err(|error| format!("unknown input: {error}"))?;
    preset_input(preset, message)
}

/// The message `{id, source: {kind}, content}` of three strings: the very message its JSON text
/// parses to (`Message`'s `Deserialize`: the id, then the other fields as JSON values), built
/// without the text. `machine.js`'s `plainFields` sends only well-formed strings, which cross
/// exactly.
pub(crate) fn plain_message(id: String, kind: String, content: String) -> SharedMessage {
    let mut source = serde_json::Map::new();
    source.insert("kind".to_owned(), Value::String(kind));
    SharedMessage::new(Message::new(
        id,
        Value::Object(source),
        Value::String(content),
    ))
}

/// The most fields a `source` crosses with as pairs of strings (`machine.js` `MAX_SOURCE_FIELDS`):
/// a larger one crosses as JSON text.
const MAX_SOURCE_FIELDS: usize = 8;

/// The message `{id, source, content}` whose `source` is the plain object of strings given as
/// the call's arguments from the fourth on, in pairs (key, value), in the object's order: the
/// very message its JSON text parses to, as [`plain_message`] is. Pairs that do not pair up, or
/// more than [`MAX_SOURCE_FIELDS`], are no message `machine.js` sends (`unknown input: …`).
///
/// # Errors
///
/// When an argument is not a string (N-API's conversion error).
fn sourced_message(
    call: &napi::bindgen_prelude::FunctionCallContext<'_>,
    id: String,
    content: String,
) -> napi::Result<Result<SharedMessage, String>> {
    let given = call.length().saturating_sub(3);
    if !given.is_multiple_of(2) || given / 2 > MAX_SOURCE_FIELDS {
        return Ok(Err(format!(
            "unknown input: a source given as {given} strings, not up to {MAX_SOURCE_FIELDS} \
             key-value pairs"
        )));
    }
    let mut source = serde_json::Map::new();
    for at in (3..call.length()).step_by(2) {
        let (key, value) = (call.get::<String>(at)?, call.get::<String>(at + 1)?);
        source.insert(key, Value::String(value));
    }
    Ok(Ok(SharedMessage::new(Message::new(
        id,
        Value::Object(source),
        Value::String(content),
    ))))
}

/// A message's handle from JavaScript: a handle is below 2^53 (a counter); any other number
/// is no handle (`-1`).
pub(crate) fn handle_number(handle: f64) -> i64 {
    if handle.fract() == 0.0 && (0.0..9.0e15).contains(&handle) {
        handle as i64
    } else {
        -1
    }
}

/// The input a follow-up (`preset` 0), a steer (1) or an inject (2) of `message` is, or why
/// there is none (`unknown input: no preset …`).
pub(crate) fn preset_input(preset: u32, message: SharedMessage) -> Result<Input, String> {
    match preset {
        0 => Ok(Input::Followup(message)),
        1 => Ok(Input::Steer(message)),
        2 => Ok(Input::Inject(message)),
        _ => Err(format!("unknown input: no preset {preset}")),
    }
}

/// The answer a word code stands for: its place in the core's [`AnswerWord::ALL`] (`0` step
/// `completed`, `1` step `max-tokens`, `2` step `continue`, `3` turnStopping `done`, `4`
/// preStep `reject`).
pub(crate) fn answer_word(word: u32) -> Option<AnswerWord> {
    AnswerWord::ALL.get(usize::try_from(word).ok()?).copied()
}

/// The reply line to an accepted `"in"` request (PORTS.md).
#[derive(Serialize)]
struct Wire {
    outputs: Vec<Output>,
}

/// A batch call's reply: `""` when it was done, else the refusal's kind.
fn batch_reply(result: Result<(), BatchError>) -> String {
    result
        .err()
        .map_or_else(String::new, |error| error.kind().to_owned())
}
