//! `coxswain._native.Machine`: the core's [`Machine`] for the typed API and the port.
//!
//! The typed API (`coxswain._machine`) feeds it typed inputs (`deliver`, `enter`,
//! `answer_word`, `handle_typed`) and gets back a `coxswain.Transition` of frozen output classes
//! built here (`typed`, `outputs`); the port (`python -m coxswain.port`) speaks the trace format's
//! JSON as is (`handle`: every `"in"` value in, every `"out"` value back in wire order). Each
//! input's outputs are taken out of the core at once; the typed API's drain contract (the next
//! input raises `Undrained` until the transition is settled) is kept here, beside the machine.

use std::num::NonZeroUsize;
use std::str::FromStr;

use coxswain_binding_kit::options::{self, Memory};
use coxswain_binding_kit::request;
use coxswain_core::{
    AnswerWord, Config, Input, Machine, Message, MessageId, Output, Outstanding, PreStepAnswer,
    Preset, Rejected, RequestKind, SharedMessage, Status, Target, Transition,
};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use serde_json::{json, Value};

use crate::errors;
use crate::json::{text_arg, to_py, to_value};
use crate::transition;
use crate::typed::{message_from, Builder, Messages};

/// The machine, driven with JSON inputs (see the module docs).
#[pyclass(module = "coxswain._native", name = "Machine")]
pub(crate) struct NativeMachine {
    pub(crate) machine: Machine,
    /// The Python objects of the messages the machine holds (S8: one object each).
    pub(crate) messages: Messages,
    /// The typed transition not settled yet (the typed API's drain contract): the next typed
    /// input raises `Undrained` until it is settled.
    pub(crate) undrained: Option<Py<transition::Transition>>,
}

/// The pending list `name` (the core's `Target` words); raises `InvalidInput` naming another.
fn target(py: Python<'_>, name: &str) -> PyResult<Target> {
    Target::from_str(name).map_err(|unknown| {
        errors::invalid_input(py, format!("{unknown}: `next-turn` or `next-step`"))
    })
}

/// The host's [`Config`] (the kit's one reading): a delivery memory of `delivery_memory` ids
/// (S51; `usize::MAX`: unbounded, S58), the admission bound `max_pending` (S55; `None`:
/// unbounded, 0 raises `InvalidInput`) and the id indexes' `hash_seed` (the agent draws a
/// random one: HashDoS).
pub(crate) fn config(
    py: Python<'_>,
    delivery_memory: usize,
    max_pending: Option<usize>,
    hash_seed: u64,
) -> PyResult<Config> {
    options::config(Memory::Ids(delivery_memory), max_pending, hash_seed)
        .map_err(|error| errors::invalid_input(py, error.to_string()))
}

fn output_value(output: &Output) -> Value {
    serde_json::to_value(output).unwrap_or_else(|e| json!({ "unserializable": e.to_string() }))
}

/// One pending list of `machine` (`"next-turn"` or `"next-step"`): `(message, waking)` in
/// order.
pub(crate) fn pending<'py>(
    py: Python<'py>,
    machine: &Machine,
    list: &str,
) -> PyResult<Bound<'py, PyList>> {
    let items = PyList::empty(py);
    for pending in machine.pending(target(py, list)?) {
        let message = serde_json::to_value(pending.message()).unwrap_or(Value::Null);
        let item = PyTuple::new(
            py,
            [
                to_py(py, &message)?,
                to_py(py, &Value::Bool(pending.is_waking()))?,
            ],
        )?;
        items.append(item)?;
    }
    Ok(items)
}

/// A request as `(kind, turn, step)`: `("preStep", turn, step)`, `("step", turn, step)` or
/// `("turnStopping", turn, 0)` (the kit's spelling).
pub(crate) fn outstanding(request: Outstanding) -> (&'static str, u64, u64) {
    request::parts(request)
}

/// Applies one input; `None` only for a `remove`/`replace` of an id not pending (S15), which
/// changed nothing and emitted nothing.
fn apply(machine: &mut Machine, input: Input) -> Result<Option<Transition<'_>>, Rejected> {
    match input {
        Input::Remove(id) => machine.remove(&id),
        Input::Replace { id, message } => machine.replace(&id, message),
        input => machine.handle(input).map(Some),
    }
}

impl NativeMachine {
    /// Applies a typed input and builds its `Transition`, binding the input's messages to
    /// `given` (in [`messages_of`] order) once the machine accepted it.
    fn typed<'py>(
        slf: &Bound<'py, Self>,
        input: Input,
        given: &[Bound<'py, PyAny>],
    ) -> PyResult<Bound<'py, transition::Transition>> {
        let py = slf.py();
        let mut this = slf.borrow_mut();
        if this.undrained.is_some() {
            let why = "the previous input's outputs were not drained";
            return Err(errors::raise(py, "Undrained", (why,)));
        }
        let carried: Vec<SharedMessage> = input.messages().cloned().collect();
        let this = &mut *this;
        let transition = apply(&mut this.machine, input)
            .map_err(|rejection| errors::rejected(py, &rejection))?;
        for (message, object) in carried.iter().zip(given) {
            this.messages.bind(message, object);
        }
        let found = transition.is_some();
        let mut builder = Builder::new(py, &mut this.messages)?;
        for output in transition
            .into_iter()
            .flat_map(Transition::into_outputs_with_begin)
        {
            builder.push(&output)?;
        }
        let settles = !(builder.events.is_empty() && builder.effects.is_empty());
        let owner = settles.then(|| slf.clone().into_any().unbind());
        let made = transition::Transition::made(
            py,
            found,
            builder.events,
            builder.effects,
            builder.order,
            owner,
        )?;
        if settles {
            this.undrained = Some(made.clone().unbind());
        }
        Ok(made)
    }
}

/// The input delivering the typed `message` as `kind` (`followup`, `steer`, `inject`), or a
/// send of it when `target` is given (with `wakeup` and the guard `expect`, `("turn" |
/// "idleAfter", n)`, S54): the machine's and the session's one reading of a delivery.
pub(crate) fn delivery(
    kind: &str,
    message: &Bound<'_, PyAny>,
    target: Option<&str>,
    wakeup: bool,
    expect: Option<(String, u64)>,
) -> PyResult<Input> {
    let py = message.py();
    let core = std::sync::Arc::new(core_message(message)?);
    if let Ok(preset) = Preset::from_str(kind) {
        return Ok(Input::preset(preset, core));
    }
    Ok(match target {
        Some(name) => Input::Send {
            message: core,
            target: self::target(py, name)?,
            wakeup,
            expect: match expect {
                None => None,
                Some((guard, n)) => Some(
                    serde_json::from_value(json!({ guard: n }))
                        .map_err(|e| errors::invalid_input(py, format!("not a guard: {e}")))?,
                ),
            },
        },
        None => return Err(errors::invalid_input(py, format!("no delivery `{kind}`"))),
    })
}

/// The core's message for a `Message` object: read from its fields, else through its
/// `to_json()` (an `extra` field, a subclass).
fn core_message(object: &Bound<'_, PyAny>) -> PyResult<Message> {
    if let Some(core) = message_from(object)? {
        return Ok(core);
    }
    let py = object.py();
    let value = to_value(&object.call_method0(pyo3::intern!(py, "to_json"))?)?;
    serde_json::from_value(value)
        .map_err(|e| errors::invalid_input(py, format!("not a message: {e}")))
}

/// The batch of a pre-step `enter` of `messages` (`Message` objects): the ones `known` holds
/// (the machine handed them out) go back as its own messages, with no conversion.
pub(crate) fn entered(
    known: &Messages,
    messages: &Bound<'_, PyTuple>,
) -> PyResult<Vec<SharedMessage>> {
    let mut batch = Vec::with_capacity(messages.len());
    for object in messages.iter() {
        batch.push(match known.message_of(&object) {
            Some(message) => message,
            None => std::sync::Arc::new(core_message(&object)?),
        });
    }
    Ok(batch)
}

/// The answer that is the word `answer` to the request `kind` (FORMAT.md's names: the core's
/// own `RequestKind` and `AnswerWord`, with no JSON value made); `None` for anything else
/// (which then goes through `serde_json`, for its error).
pub(crate) fn word_answer(kind: &str, answer: &str) -> Option<Input> {
    let kind = RequestKind::from_str(kind).ok()?;
    AnswerWord::of(kind, answer).ok().map(AnswerWord::input)
}

/// The fate of `id` in `machine` (S58), spelled by the core's `Fate::to_json`.
pub(crate) fn fate<'py>(
    py: Python<'py>,
    machine: &Machine,
    id: &Bound<'_, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &machine.fate(&MessageId::new(text_arg(id)?)).to_json())
}

/// The public status (S23) by name (the core's spelling).
pub(crate) fn status_name(status: Status) -> &'static str {
    status.as_str()
}

#[pymethods]
impl NativeMachine {
    /// A fresh machine with a delivery memory of `delivery_memory` ids (S51), the admission
    /// bound `max_pending` (S55; `None`: unbounded) and the id indexes' `hash_seed`.
    #[new]
    #[pyo3(signature = (delivery_memory = 0, max_pending = None, hash_seed = 0))]
    fn new(
        py: Python<'_>,
        delivery_memory: usize,
        max_pending: Option<usize>,
        hash_seed: u64,
    ) -> PyResult<Self> {
        Ok(NativeMachine {
            machine: Machine::with_config(config(py, delivery_memory, max_pending, hash_seed)?),
            messages: Messages::default(),
            undrained: None,
        })
    }

    /// The seed of the id indexes' hasher.
    fn hash_seed(&self) -> u64 {
        self.machine.config().hash_seed
    }

    /// Restores a machine from a log of `{type, data}` records (S46–S48), with the host's
    /// delivery memory (S51) and admission bound (S55).
    #[staticmethod]
    #[pyo3(signature = (log, seed_length = 0, delivery_memory = 0, max_pending = None))]
    fn restore(
        py: Python<'_>,
        log: &Bound<'_, PyAny>,
        seed_length: usize,
        delivery_memory: usize,
        max_pending: Option<usize>,
    ) -> PyResult<Self> {
        let config = config(py, delivery_memory, max_pending, 0)?;
        let mut events = Vec::new();
        for record in log.try_iter()? {
            events.push(to_value(&record?)?);
        }
        Machine::restore_with(config, &events, seed_length)
            .map(|machine| NativeMachine {
                machine,
                messages: Messages::default(),
                undrained: None,
            })
            .map_err(|error| errors::invalid_log(py, &error))
    }

    /// Applies one input (a trace `"in"` value). Returns `(found, outputs)`: `found` is false
    /// only for a `remove`/`replace` of an id not pending (S15); `outputs` every output in wire
    /// order. Raises the rejection's class of `coxswain._errors`, or `InvalidInput`.
    fn handle<'py>(
        &mut self,
        py: Python<'py>,
        input: &Bound<'py, PyAny>,
    ) -> PyResult<(bool, Bound<'py, PyList>)> {
        let value = to_value(input)?;
        let input: Input = serde_json::from_value(value.clone())
            .map_err(|e| errors::invalid_input(py, format!("unknown input {value}: {e}")))?;
        let transition = apply(&mut self.machine, input)
            .map_err(|rejection| errors::rejected(py, &rejection))?;
        let found = transition.is_some();
        let outputs = PyList::empty(py);
        for output in transition.into_iter().flat_map(Transition::into_outputs) {
            outputs.append(to_py(py, &output_value(&output))?)?;
        }
        Ok((found, outputs))
    }

    /// [`handle`](Self::handle) for the typed API: the `coxswain.Transition` of `owner` (the
    /// Python `Machine`, which settles it), its outputs the classes of `coxswain`. `given` are
    /// the `Message` objects of the input, in the order its JSON holds them (one for a send,
    /// follow-up, steer, inject, replace or prepend; a pre-step batch's): the outputs carrying
    /// those messages hand back these objects (S8).
    #[pyo3(signature = (input, given = None))]
    fn handle_typed<'py>(
        slf: &Bound<'py, Self>,
        input: &Bound<'py, PyAny>,
        given: Option<&Bound<'py, PyTuple>>,
    ) -> PyResult<Bound<'py, transition::Transition>> {
        let py = slf.py();
        let value = to_value(input)?;
        let input: Input = serde_json::from_value(value)
            .map_err(|e| errors::invalid_input(py, format!("not an input: {e}")))?;
        let objects: Vec<Bound<'py, PyAny>> = given.map(|g| g.iter().collect()).unwrap_or_default();
        NativeMachine::typed(slf, input, &objects)
    }

    /// A follow-up, steer or inject (`kind`) of a typed `Message` (read from its fields: no
    /// JSON round trip), or a send of it when `target` is given (with `wakeup` and the guard
    /// `expect`, `("turn" | "idleAfter", n)`, S54).
    #[pyo3(signature = (kind, message, target = None, wakeup = false, expect = None))]
    fn deliver<'py>(
        slf: &Bound<'py, Self>,
        kind: &str,
        message: &Bound<'py, PyAny>,
        target: Option<&Bound<'py, PyAny>>,
        wakeup: bool,
        expect: Option<(String, u64)>,
    ) -> PyResult<Bound<'py, transition::Transition>> {
        let target = target.map(text_arg).transpose()?;
        let input = delivery(kind, message, target.as_deref(), wakeup, expect)?;
        NativeMachine::typed(slf, input, std::slice::from_ref(message))
    }

    /// Answers the outstanding pre-step request `enter` with `messages` (typed `Message`s): the
    /// ones the machine handed out go back as its own messages, with no conversion.
    fn enter<'py>(
        slf: &Bound<'py, Self>,
        messages: &Bound<'py, PyTuple>,
    ) -> PyResult<Bound<'py, transition::Transition>> {
        let batch = entered(&slf.borrow().messages, messages)?;
        let objects: Vec<Bound<'py, PyAny>> = messages.iter().collect();
        let input = Input::PreStep(PreStepAnswer::Enter(batch.into()));
        NativeMachine::typed(slf, input, &objects)
    }

    /// Answers the outstanding request `kind` (`preStep`, `step`, `turnStopping`) with the
    /// word `answer` (`"completed"`, `"done"`, `"reject"`, …).
    fn answer_word<'py>(
        slf: &Bound<'py, Self>,
        kind: &str,
        answer: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, transition::Transition>> {
        let answer = &text_arg(answer)?;
        let input = match word_answer(kind, answer) {
            Some(input) => input,
            None => serde_json::from_value(json!({ kind: answer }))
                .map_err(|e| errors::invalid_input(slf.py(), format!("not an input: {e}")))?,
        };
        NativeMachine::typed(slf, input, &[])
    }

    /// The typed transition not settled yet, if any.
    fn undrained(&self, py: Python<'_>) -> Option<Py<transition::Transition>> {
        self.undrained.as_ref().map(|t| t.clone_ref(py))
    }

    /// Opens a batch: the inputs fed from now on can be taken back together
    /// ([`Machine::begin_batch`](coxswain_core::Machine::begin_batch)). Raises `BatchError`.
    fn begin_batch(&mut self, py: Python<'_>) -> PyResult<()> {
        self.machine
            .begin_batch()
            .map_err(|error| errors::batch(py, error))
    }

    /// Closes the batch and keeps its inputs: their events are durable. Raises `BatchError`.
    fn commit_batch(&mut self, py: Python<'_>) -> PyResult<()> {
        self.machine
            .commit_batch()
            .map_err(|error| errors::batch(py, error))
    }

    /// Closes the batch and takes back every input fed since it opened: the machine is as it
    /// was (S5 for a failed persistence). Raises `BatchError`.
    fn roll_back_batch(&mut self, py: Python<'_>) -> PyResult<()> {
        self.machine
            .roll_back_batch()
            .map_err(|error| errors::batch(py, error))?;
        // A transition still waiting to be settled is dropped: its effects must not be
        // carried out.
        self.undrained = None;
        Ok(())
    }

    /// Whether a batch is open.
    fn is_batch_open(&self) -> bool {
        self.machine.is_batch_open()
    }

    /// The public status (S23): `"idle"` or `"running"`.
    fn status(&self) -> &'static str {
        status_name(self.machine.status())
    }

    /// No turn and no maintenance is running (S44).
    fn is_quiescent(&self) -> bool {
        self.machine.is_quiescent()
    }

    /// The machine is disposed (S45).
    fn is_disposed(&self) -> bool {
        self.machine.is_disposed()
    }

    /// A maintenance job is running (S43).
    fn is_maintenance(&self) -> bool {
        self.machine.is_maintenance()
    }

    /// The current activity was cancelled (S39).
    fn is_cancel_requested(&self) -> bool {
        self.machine.is_cancel_requested()
    }

    /// The first cancel cause of the current activity, as JSON.
    fn cancel_cause<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.machine
            .cancel_cause()
            .map(|cause| to_py(py, &serde_json::to_value(cause).unwrap_or(Value::Null)))
            .transpose()
    }

    /// A dispose is under way (S45).
    fn is_disposing(&self) -> bool {
        self.machine.is_disposing()
    }

    /// A wake is latched (S25).
    fn is_wake_latched(&self) -> bool {
        self.machine.is_wake_latched()
    }

    /// The last turn number (0 before the first).
    fn last_turn(&self) -> u64 {
        self.machine.last_turn()
    }

    /// The delivery memory's capacity (S51).
    fn delivery_memory(&self) -> usize {
        self.machine.config().delivery_memory
    }

    /// The admission bound (S55), `None` when unbounded.
    fn max_pending(&self) -> Option<usize> {
        self.machine.config().max_pending.map(NonZeroUsize::get)
    }

    /// One pending list (`"next-turn"` or `"next-step"`): `(message, waking)` in order.
    fn pending<'py>(&self, py: Python<'py>, list: &str) -> PyResult<Bound<'py, PyList>> {
        pending(py, &self.machine, list)
    }

    /// One pending list (`"next-turn"` or `"next-step"`) as `(Message, waking)` in order, each
    /// message the one object the outputs carry (S8).
    fn pending_typed<'py>(
        &mut self,
        py: Python<'py>,
        list: &str,
    ) -> PyResult<Vec<(Bound<'py, PyAny>, bool)>> {
        let classes = crate::typed::classes(py)?;
        let mut items = Vec::new();
        for pending in self.machine.pending(target(py, list)?) {
            let message = self.messages.object(py, classes, pending.message())?;
            items.push((message, pending.is_waking()));
        }
        Ok(items)
    }

    /// Whether `id` is pending in either list.
    fn is_pending(&self, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.machine.is_pending(&MessageId::new(text_arg(id)?)))
    }

    /// The ids the delivery memory holds, oldest first (S51).
    fn delivered(&self) -> Vec<String> {
        self.machine
            .delivered()
            .map(|id| id.as_str().to_owned())
            .collect()
    }

    /// Whether the delivery memory holds `id` (S52).
    fn remembers(&self, id: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.machine.remembers(&MessageId::new(text_arg(id)?)))
    }

    /// The fate of `id` (S58) as the core spells it (`Fate::to_json`, FORMAT.md's `F`):
    /// `{"pending": T}`, `"discarded"`, `"unknown"` or `{"claimed": {turn, step?, end?}}`.
    /// A query: answered in every phase, also once disposed; it changes nothing.
    fn fate<'py>(&self, py: Python<'py>, id: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        fate(py, &self.machine, id)
    }

    /// The outstanding request (S4): `("preStep", turn, step)`, `("step", turn, step)`,
    /// `("turnStopping", turn, 0)`, or `None`.
    fn outstanding(&self) -> Option<(&'static str, u64, u64)> {
        self.machine.outstanding().map(outstanding)
    }
}
