//! `coxswain._native.Session`: the session layer's agent loop ([`coxswain_session::AgentLoop`]) for
//! the asyncio agent, which only moves bytes, time and tasks. Every decision is the loop's: which
//! commands make a batch (up to `max_batch`; a `pending`, `fate` or `close` ends the batch before
//! it), who waits for what (a waiter is any Python object the driver hands in: a future), what a
//! host answer the session refuses means (`fail`, `host-invalid-answer`; a late one is dropped),
//! what a hook the host did not write answers, the stop policy of a failed append, the defaults
//! ([`Options::DEFAULT`]), and every error's kind name.
//!
//! The driver hands in commands (`deliver`, `feed`, `record`, `maintenance`, `job_ended`,
//! `control`), host calls' outcomes (`answer_word`, `answer_enter`, `answer`, `returned_nothing`,
//! `host_failed`) and the time (`handle_timeout`), writes what the loop seals (`commit` in line for
//! a log that appends without IO, else `poll_append` / `appended`) and carries out the outputs, in
//! order: an effect object of `coxswain._types`, or a tuple `(tag, a, b)`: `(0, waiter, value)` a
//! reply, `(1, waiter, exception)` a failed one (its `kind` the loop's), `(2, (waiter, job), None)`
//! a maintenance job to start, `(3, ending, None)` the agent ends (then `finish`), `(4, first_seq,
//! records)` the records just appended (asked for by `records=True`). Times are seconds on any
//! monotonic clock (the agent passes `loop.time()`).

use std::time::Duration;

use coxswain_binding_kit::options::{saturating_seconds, seconds, session_options};
use coxswain_binding_kit::records::{encode_entries, host_events};
use coxswain_binding_kit::request::request;
use coxswain_core::{Input, MessageId, Outstanding, Pending, PreStepAnswer};
use coxswain_log::Entry;
use coxswain_session::{
    AgentLoop, BatchMismatch, BatchNo, Command, Ending, Failure, Hooks, HostFailure, HostReply,
    LogFailure, Options, Output, Refused, Reply,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use serde_json::Value;

use crate::errors;
use crate::filelog::NativeFileLog;
use crate::json::{text_arg, to_py, to_value};
use crate::machine::{
    delivery, entered, fate, outstanding, pending, status_name, word_answer, NativeMachine,
};
use crate::typed::{Builder, Messages};

/// Where the agent's own error classes live.
const AGENT_ERRORS: &str = "coxswain.asyncio._errors";

/// A waiter: whatever the driver hands in with a command (it gets it back with the reply).
type Waiter = Py<PyAny>;

/// The agent loop over a machine (see the module docs).
#[pyclass(module = "coxswain._native", name = "Session")]
pub(crate) struct NativeSession {
    agent: AgentLoop<Waiter>,
    /// The sealed batch's lines (its buffer kept between batches).
    buffer: Vec<u8>,
    /// The Python objects of the messages the session's machine holds (S8: one object each).
    messages: Messages,
    /// The last failed append's error: a `PersistenceError`'s cause.
    log_error: Option<Py<PyAny>>,
}

/// A sealed batch, encoded into the session's buffer.
struct Sealed<'py> {
    batch: BatchNo,
    count: usize,
    /// Whether it ends a turn (a `turn/end`): what a log syncing per turn syncs on.
    ends_turn: bool,
    /// Its records as `{type, data}` values, when asked for.
    records: Option<Bound<'py, PyList>>,
}

/// A sealed batch for the driver to append: `(batch, lines, count, records, ends_turn)`.
type ToAppend<'py> = (
    u64,
    Bound<'py, PyBytes>,
    usize,
    Option<Bound<'py, PyList>>,
    bool,
);

/// Sets `kind` (the one spelling every language gives it, common.md decision 7) on `error`.
fn with_kind(py: Python<'_>, error: PyErr, kind: &'static str) -> PyErr {
    // An error class that takes no attribute keeps its own (a refusal's class spells it too).
    let _ = error.value(py).setattr(pyo3::intern!(py, "kind"), kind);
    error
}

/// The exception of a refused input or host event: nothing changed (S5). Its `kind` is
/// [`Refused::kind`].
fn refused(py: Python<'_>, refused: &Refused) -> PyErr {
    let message = refused.to_string();
    let error = match refused {
        Refused::Rejected(rejection) => errors::rejected(py, rejection),
        Refused::IdTooLong { bytes, max, .. } => {
            errors::raise_from(py, AGENT_ERRORS, "IdTooLong", (message, *bytes, *max))
        }
        Refused::MessageTooLarge { bytes, max, .. } => {
            errors::raise_from(py, AGENT_ERRORS, "MessageTooLarge", (message, *bytes, *max))
        }
        Refused::TooDeep(deep) => errors::too_deep(py, deep),
        Refused::StepClosed { .. } => {
            errors::raise_from(py, AGENT_ERRORS, "StepClosed", (message,))
        }
        Refused::Sealed => errors::raise(py, "BatchError", (message, "sealed")),
        _ => errors::raise(py, "Rejected", (message,)),
    };
    with_kind(py, error, refused.kind())
}

/// The exception of a call on an agent that has ended: `Disposed` (the core's), `Closed` or
/// `Stopped`, its `kind` [`Ending::kind`].
fn ended(py: Python<'_>, ending: Ending) -> PyErr {
    let error = match ending {
        Ending::Disposed => errors::raise(
            py,
            "Disposed",
            ("the machine is disposed and accepts no input",),
        ),
        Ending::Closed => errors::raise_from(py, AGENT_ERRORS, "Closed", ("the agent is closed",)),
        Ending::Stopped(why) => {
            let why = match why {
                LogFailure::Fenced => "another writer owns its log",
                _ => "its log may hold a failed append",
            };
            let message = format!("the agent stopped ({why}): re-open it");
            errors::raise_from(py, AGENT_ERRORS, "Stopped", (message,))
        }
    };
    with_kind(py, error, ending.kind())
}

/// The exception of a failed command; its `kind` is [`Failure::kind`]. A persistence error's
/// cause is `log_error`, the failed append's error.
fn failed(py: Python<'_>, failure: &Failure, log_error: Option<&Py<PyAny>>) -> PyErr {
    match failure {
        Failure::Refused(why) => refused(py, why),
        Failure::Ended(ending) => ended(py, *ending),
        Failure::Persistence | Failure::Indeterminate => {
            let cause = log_error.map(|error| error.bind(py).clone());
            let message = cause
                .as_ref()
                .and_then(|error| error.str().ok())
                .map(|text| text.to_string())
                .unwrap_or_else(|| "the append failed".into());
            let indeterminate = matches!(failure, Failure::Indeterminate);
            let args = (message, failure.kind(), cause, indeterminate);
            errors::raise_from(py, AGENT_ERRORS, "PersistenceError", args)
        }
    }
}

/// The exception of a batch call naming a batch that is not being persisted (nothing changed).
fn mismatch(py: Python<'_>, error: BatchMismatch) -> PyErr {
    errors::raise(py, "BatchError", (error.to_string(), error.kind()))
}

fn encode_error(py: Python<'_>, message: String) -> PyErr {
    errors::raise(py, "EncodeError", (message,))
}

/// The request `(kind, turn, step)` names, as `outstanding` spells it (the kit's reading).
fn request_named(py: Python<'_>, named: &(String, u64, u64)) -> PyResult<Outstanding> {
    request(&named.0, named.1, named.2).map_err(|e| errors::invalid_input(py, e.to_string()))
}

/// A pending list as `(message, waking)` pairs, in order.
fn pending_list<'py>(py: Python<'py>, items: &[Pending]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for item in items {
        let message = serde_json::to_value(item.message()).unwrap_or(Value::Null);
        list.append((to_py(py, &message)?, item.is_waking()))?;
    }
    Ok(list)
}

/// A reply's value: `found` for a delivery, `None` for a record, a job's end and `close`, both
/// pending lists, or a fate as `Fate::to_json` spells it (S58).
fn reply_value<'py>(py: Python<'py>, reply: &Reply) -> PyResult<Bound<'py, PyAny>> {
    Ok(match reply {
        Reply::Delivered { found } => pyo3::types::PyBool::new(py, *found).to_owned().into_any(),
        Reply::Pending {
            next_turn,
            next_step,
        } => PyList::new(
            py,
            [pending_list(py, next_turn)?, pending_list(py, next_step)?],
        )?
        .into_any(),
        Reply::Fate(fate) => to_py(py, &fate.to_json())?,
        _ => py.None().into_bound(py),
    })
}

#[pymethods]
impl NativeSession {
    /// The defaults every driver takes (`coxswain_session::Options::DEFAULT`): `abort_grace`
    /// and `retry_after` in seconds, `max_batch`, `max_id_bytes`, `max_message_bytes`.
    #[classattr]
    #[pyo3(name = "DEFAULTS")]
    fn defaults(py: Python<'_>) -> PyResult<Py<PyDict>> {
        let options = Options::DEFAULT;
        let defaults = PyDict::new(py);
        defaults.set_item("abort_grace", options.abort_grace.as_secs_f64())?;
        defaults.set_item("retry_after", options.retry_after.as_secs_f64())?;
        defaults.set_item("max_batch", options.max_batch)?;
        defaults.set_item("max_id_bytes", options.limits.max_id_bytes)?;
        defaults.set_item("max_message_bytes", options.limits.max_message_bytes)?;
        Ok(defaults.unbind())
    }

    /// `closed`: the kind of the error of a call on a closed agent ([`Ending::kind`]).
    #[classattr]
    #[pyo3(name = "CLOSED")]
    fn closed_kind() -> &'static str {
        Ending::Closed.kind()
    }

    /// A loop over a copy of `machine` (fresh, or restored by `open_log`): an abort grace of
    /// `abort_grace` seconds, a pause of `retry_after` seconds after a failed batch, batches of
    /// up to `max_batch` commands, the admission limits `max_id_bytes` (an id's UTF-8 bytes) and
    /// `max_message_bytes` (a message's JSON), and whether the host wrote `pre_step` and
    /// `turn_stopping` (the session answers a hook it did not write). `None`: the default
    /// (`DEFAULTS`). Raises `InvalidInput` for a negative or infinite time, or a `max_batch`
    /// of 0.
    #[new]
    #[pyo3(signature = (machine, abort_grace = None, max_id_bytes = None, max_message_bytes = None, retry_after = None, max_batch = None, pre_step = true, turn_stopping = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        machine: PyRef<'_, NativeMachine>,
        abort_grace: Option<f64>,
        max_id_bytes: Option<usize>,
        max_message_bytes: Option<usize>,
        retry_after: Option<f64>,
        max_batch: Option<usize>,
        pre_step: bool,
        turn_stopping: bool,
    ) -> PyResult<Self> {
        let time = |name: &'static str, value: Option<f64>| {
            value
                .map(|value| seconds(name, value))
                .transpose()
                .map_err(|e| errors::invalid_input(py, e.to_string()))
        };
        if max_batch == Some(0) {
            return Err(errors::invalid_input(py, "max_batch is at least 1".into()));
        }
        let (abort_grace, retry_after) = (
            time("abort_grace", abort_grace)?,
            time("retry_after", retry_after)?,
        );
        let options = Options {
            hooks: Hooks {
                pre_step,
                turn_stopping,
            },
            max_batch: max_batch.unwrap_or(Options::DEFAULT.max_batch),
            ..session_options(abort_grace, retry_after, max_id_bytes, max_message_bytes)
        };
        Ok(NativeSession {
            agent: AgentLoop::new(machine.machine.clone(), options),
            buffer: Vec::new(),
            messages: Messages::default(),
            log_error: None,
        })
    }

    // ----- commands: each answered through the outputs, with its waiter -----

    /// An input (a trace `"in"` value). Raises `InvalidInput` (not an input) or `TypeError`
    /// (not JSON) at once; a refusal is its reply.
    fn feed(&mut self, py: Python<'_>, waiter: Waiter, input: &Bound<'_, PyAny>) -> PyResult<()> {
        let input: Input = serde_json::from_value(to_value(input)?)
            .map_err(|e| errors::invalid_input(py, format!("not an input: {e}")))?;
        self.agent.submit(Command::Input(input), waiter);
        Ok(())
    }

    /// A follow-up, steer or inject (`kind`) of a typed `Message` (read from its fields, as
    /// `Machine.deliver` reads it), or a send of it when `target` is given (with `wakeup` and
    /// the guard `expect`, S54); every output carrying it hands back `message` (S8).
    #[pyo3(signature = (waiter, kind, message, target = None, wakeup = false, expect = None))]
    fn deliver(
        &mut self,
        waiter: Waiter,
        kind: &str,
        message: &Bound<'_, PyAny>,
        target: Option<&Bound<'_, PyAny>>,
        wakeup: bool,
        expect: Option<(String, u64)>,
    ) -> PyResult<()> {
        let target = target.map(text_arg).transpose()?;
        let input = delivery(kind, message, target.as_deref(), wakeup, expect)?;
        if let Some(carried) = input.messages().next() {
            self.messages.bind(carried, message);
        }
        self.agent.submit(Command::Input(input), waiter);
        Ok(())
    }

    /// Host events (`{type, data}` records) of step `step` of turn `turn`. Raises
    /// `EncodeError` at once for a record that is none or of a type of the machine's own; a
    /// step not running (`StepClosed`) or data too deep (`TooDeep`) is its reply.
    fn record(
        &mut self,
        py: Python<'_>,
        waiter: Waiter,
        turn: u64,
        step: u64,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let values = records
            .try_iter()?
            .map(|record| to_value(&record?))
            .collect::<PyResult<Vec<_>>>()?;
        let events = host_events(values).map_err(|e| encode_error(py, e.to_string()))?;
        let command = Command::Record { turn, step, events };
        self.agent.submit(command, waiter);
        Ok(())
    }

    /// A maintenance job `job`'s beginning (S43): once durable, the output `(2, (waiter, job),
    /// None)` says to start it; a refusal (`Busy`) is its reply, `(1, (waiter, job), error)`.
    fn maintenance(&mut self, py: Python<'_>, waiter: Waiter, job: Waiter) -> PyResult<()> {
        let both = PyTuple::new(py, [waiter, job])?;
        self.agent
            .submit(Command::Maintenance, both.into_any().unbind());
        Ok(())
    }

    /// The maintenance job started has ended; `waiter` is answered once its end is durable.
    fn job_ended(&mut self, waiter: Waiter) {
        self.agent.job_ended(waiter);
    }

    /// `pending` (both lists), `fate` (of the message `id`, S58) or `close`: answered once the
    /// batch before it is durable. Raises `TypeError` at once for an `id` that is no text.
    #[pyo3(signature = (waiter, kind, id = None))]
    fn control(
        &mut self,
        py: Python<'_>,
        waiter: Waiter,
        kind: &str,
        id: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let command = match (kind, id) {
            ("pending", _) => Command::Pending,
            ("close", _) => Command::Close,
            ("fate", Some(id)) => Command::Fate(MessageId::new(text_arg(id)?)),
            _ => return Err(errors::invalid_input(py, format!("no command `{kind}`"))),
        };
        self.agent.submit(command, waiter);
        Ok(())
    }

    // ----- what a host call came back with (`request` is `(kind, turn, step)`) -----

    /// The call returned the word `word` (`"completed"`, `"done"`, `"reject"`, …: FORMAT.md's
    /// names, read through the core's own, no JSON value made). Anything that is not an answer
    /// of `request` is an invalid answer (`fail`, `host-invalid-answer`).
    fn answer_word(
        &mut self,
        py: Python<'_>,
        request: (String, u64, u64),
        word: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let outstanding = request_named(py, &request)?;
        // A word that is no UTF-8 text (a lone surrogate) is no answer either.
        let parsed = text_arg(word).map_err(|e| e.to_string()).and_then(|word| {
            match word_answer(&request.0, &word) {
                Some(input) => Ok(input),
                None => serde_json::from_value::<Input>(serde_json::json!({ request.0: word }))
                    .map_err(|e| format!("not an answer: {e}")),
            }
        });
        self.answered(outstanding, parsed);
        Ok(())
    }

    /// The pre-step call answered `enter` of `messages` (`Message` objects): the ones the
    /// session handed out go back as its own messages, with no conversion, and every output
    /// carrying one hands back its object (S8).
    fn answer_enter(
        &mut self,
        py: Python<'_>,
        request: (String, u64, u64),
        messages: &Bound<'_, PyTuple>,
    ) -> PyResult<()> {
        let outstanding = request_named(py, &request)?;
        let parsed = match entered(&self.messages, messages) {
            Ok(batch) => {
                for (message, object) in batch.iter().zip(messages.iter()) {
                    self.messages.bind(message, &object);
                }
                Ok(Input::PreStep(PreStepAnswer::Enter(batch.into())))
            }
            Err(error) => Err(error.to_string()),
        };
        self.answered(outstanding, parsed);
        Ok(())
    }

    /// The call answered `answer` (a trace `"in"` value); a value that is not an answer is an
    /// invalid answer (`fail`, `host-invalid-answer`).
    fn answer(
        &mut self,
        py: Python<'_>,
        request: (String, u64, u64),
        answer: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let outstanding = request_named(py, &request)?;
        let parsed = to_value(answer)
            .map_err(|e| e.to_string())
            .and_then(|value| {
                serde_json::from_value::<Input>(value).map_err(|e| format!("not an answer: {e}"))
            });
        self.answered(outstanding, parsed);
        Ok(())
    }

    /// The call returned nothing (`None`): a hook answers what the missing hook answers; a
    /// `step` gave no answer (`fail`, `host-invalid-answer`).
    fn returned_nothing(&mut self, py: Python<'_>, request: (String, u64, u64)) -> PyResult<()> {
        let outstanding = request_named(py, &request)?;
        self.agent.host_answered(outstanding, HostReply::Nothing);
        Ok(())
    }

    /// The call `failure`d (`panicked`, `raised`, `cancelled`, `abandoned`, `invalid-answer`):
    /// the session answers `fail` with its code and `detail`.
    fn host_failed(
        &mut self,
        py: Python<'_>,
        request: (String, u64, u64),
        failure: &str,
        detail: &str,
    ) -> PyResult<()> {
        let failure = crate::failure::named(py, failure)?;
        let outstanding = request_named(py, &request)?;
        let reply = HostReply::Failed(failure, detail.to_owned());
        self.agent.host_answered(outstanding, reply);
        Ok(())
    }

    // ----- the driver's IO -----

    /// Everything to carry out now, in order (see the module docs).
    fn outputs<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        self.drain(py, &out)?;
        Ok(out)
    }

    /// In line, for a log whose append does no IO or does not wait for the disk
    /// (`log.append_encoded(lines, count)`, from `log.next_seq`; the native `FileLog` called
    /// directly): seals, appends and reports every batch until nothing is left to write;
    /// returns the outputs, in order (with `records`, each appended batch's records too).
    fn commit<'py>(
        &mut self,
        py: Python<'py>,
        log: &Bound<'py, PyAny>,
        now: f64,
        records: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let now = saturating_seconds(now);
        let out = PyList::empty(py);
        // The shared file log itself (a `FileLog` that does not sync on its own): appended to
        // from here, the lines never becoming Python bytes.
        let native = log.cast::<NativeFileLog>().ok();
        loop {
            self.drain(py, &out)?;
            let first_seq: u64 = match &native {
                Some(native) => native.get().next_seq(),
                None => log.getattr(pyo3::intern!(py, "next_seq"))?.extract()?,
            };
            let Some(sealed) = self.seal(py, first_seq, now, records)? else {
                break;
            };
            let mut result = Ok(());
            if sealed.count > 0 {
                let appended = match &native {
                    Some(native) => native
                        .get()
                        .append_lines(py, first_seq, &self.buffer, sealed.count, sealed.ends_turn)
                        .map(drop),
                    None => {
                        let lines = PyBytes::new(py, &self.buffer);
                        let method = pyo3::intern!(py, "append_encoded");
                        log.call_method1(method, (lines, sealed.count)).map(drop)
                    }
                };
                if let Err(error) = appended {
                    result = Err(self.log_failed(py, error.value(py)));
                }
            }
            if let (Ok(()), Some(records)) = (result, sealed.records) {
                out.append((4u8, first_seq, records))?;
            }
            self.agent
                .appended(sealed.batch, result, now)
                .map_err(|e| mismatch(py, e))?;
        }
        self.drain(py, &out)?;
        Ok(out)
    }

    /// Seals what waits into the next batch: `(batch, lines, count, records, ends_turn)` to
    /// append as one write (from `first_seq`; `count` 0: write nothing, still report it;
    /// `ends_turn`: it holds a `turn/end`, what a log syncing per turn syncs on), then
    /// `appended`; `None` when nothing is to be written (take the `outputs`: some may be
    /// answered).
    fn poll_append<'py>(
        &mut self,
        py: Python<'py>,
        first_seq: u64,
        now: f64,
        records: bool,
    ) -> PyResult<Option<ToAppend<'py>>> {
        let Some(sealed) = self.seal(py, first_seq, saturating_seconds(now), records)? else {
            return Ok(None);
        };
        let lines = PyBytes::new(py, &self.buffer);
        Ok(Some((
            sealed.batch.0,
            lines,
            sealed.count,
            sealed.records,
            sealed.ends_turn,
        )))
    }

    /// Batch `batch` is in the log (`error` `None`) or its append raised `error` at `now`: a
    /// `LogError` with `indeterminate` (may or may not be in the log) or `fenced` (another
    /// writer owns it) stops the agent; any other failure fails the batch's members and the
    /// agent goes on. Raises `BatchError` (`not-sealed`, `other-batch`; nothing changed).
    #[pyo3(signature = (batch, error, now))]
    fn appended(
        &mut self,
        py: Python<'_>,
        batch: u64,
        error: Option<&Bound<'_, PyAny>>,
        now: f64,
    ) -> PyResult<()> {
        let result = match error {
            None => Ok(()),
            Some(error) => Err(self.log_failed(py, error)),
        };
        self.agent
            .appended(BatchNo(batch), result, saturating_seconds(now))
            .map_err(|e| mismatch(py, e))
    }

    /// When to call `handle_timeout` next (the end of the retry pause after a failed batch, or
    /// the abort grace's deadline), if ever.
    fn poll_timeout(&self) -> Option<f64> {
        self.agent.poll_timeout().map(|at| at.as_secs_f64())
    }

    /// Time has reached `now`: the answers a failed batch held are staged again, or an aborted
    /// call that outlived the abort grace is answered `fail` (`host-abandoned`, S38–S40) and
    /// its late answer dropped. Then commit. Nothing happens while a batch is being written:
    /// call it again after (`poll_timeout` says when).
    fn handle_timeout(&mut self, now: f64) {
        self.agent.handle_timeout(saturating_seconds(now));
    }

    /// The driver has stopped what ran and released the log after the ending: every caller
    /// still waiting is answered (take the `outputs`); later commands are answered at once.
    fn finish(&mut self) {
        self.agent.finish();
    }

    /// The exception of a call on this agent once it has ended (`Closed` before it has).
    fn ended_error<'py>(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        let ending = self.agent.ending().unwrap_or(Ending::Closed);
        ended(py, ending).value(py).clone().into_any()
    }

    // ----- queries: the machine with a staged batch applied (read them with no batch) -----

    /// Whether members are staged or a batch is sealed.
    fn has_batch(&self) -> bool {
        self.agent.has_batch()
    }

    /// The public status (S23): `"idle"` or `"running"`.
    fn status(&self) -> &'static str {
        status_name(self.agent.machine().status())
    }

    /// The last turn number (0 before the first, S27).
    fn last_turn(&self) -> u64 {
        self.agent.machine().last_turn()
    }

    /// The fate of `id` (S58), as `Machine.fate` spells it (the core's `Fate::to_json`).
    fn fate<'py>(&self, py: Python<'py>, id: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        fate(py, self.agent.machine(), id)
    }

    /// No turn and no maintenance is running (S44).
    fn is_quiescent(&self) -> bool {
        self.agent.machine().is_quiescent()
    }

    /// The machine is disposed (S45).
    fn is_disposed(&self) -> bool {
        self.agent.machine().is_disposed()
    }

    /// The seed of the id indexes' hasher.
    fn hash_seed(&self) -> u64 {
        self.agent.machine().config().hash_seed
    }

    /// One pending list (`"next-turn"` or `"next-step"`): `(message, waking)` in order.
    fn pending<'py>(&self, py: Python<'py>, list: &str) -> PyResult<Bound<'py, PyList>> {
        pending(py, self.agent.machine(), list)
    }

    /// The outstanding request (S4) as `(kind, turn, step)`, or `None`.
    fn outstanding(&self) -> Option<(&'static str, u64, u64)> {
        self.agent.machine().outstanding().map(outstanding)
    }

    /// How the agent ended (`"closed"`, `"disposed"`, `"stopped"`), if it has.
    fn ending(&self) -> Option<&'static str> {
        self.agent.ending().map(Ending::kind)
    }
}

impl NativeSession {
    /// A host call's outcome: its answer, or (`Err`: why) an invalid answer.
    fn answered(&mut self, request: Outstanding, parsed: Result<Input, String>) {
        let reply = match parsed {
            Ok(input) => HostReply::Answer(input),
            Err(detail) => HostReply::Failed(HostFailure::InvalidAnswer, detail),
        };
        self.agent.host_answered(request, reply);
    }

    /// How `error` (what an append raised) failed it, by the stop policy's words; it is kept as
    /// the cause of the `PersistenceError` its members get.
    fn log_failed(&mut self, py: Python<'_>, error: &Bound<'_, PyAny>) -> LogFailure {
        let flag = |name: &str| {
            error
                .getattr(name)
                .and_then(|value| value.is_truthy())
                .unwrap_or(false)
        };
        let failure = if flag("indeterminate") {
            LogFailure::Indeterminate
        } else if flag("fenced") {
            LogFailure::Fenced
        } else {
            LogFailure::Failed
        };
        self.log_error = Some(error.clone().unbind());
        let _ = py;
        failure
    }

    /// Seals the next batch and encodes it from `first_seq` into the buffer. A batch that
    /// cannot be encoded fails whole (S5: its members get a `PersistenceError`), and the next
    /// is sealed. `None`: nothing to write.
    fn seal<'py>(
        &mut self,
        py: Python<'py>,
        first_seq: u64,
        now: Duration,
        records: bool,
    ) -> PyResult<Option<Sealed<'py>>> {
        loop {
            let Some(append) = self.agent.poll_append(now) else {
                return Ok(None);
            };
            let (batch, count) = (append.batch, append.entries.len());
            let ends_turn = Entry::ends_turn(append.entries);
            self.buffer.clear();
            let failed = encode_entries(first_seq, append.entries, &mut self.buffer)
                .err()
                .map(|error| errors::encode(py, &error));
            let listed = match (&failed, records) {
                (None, true) => {
                    let list = PyList::empty(py);
                    for entry in append.entries {
                        let value = serde_json::to_value(entry).unwrap_or(Value::Null);
                        list.append(to_py(py, &value)?)?;
                    }
                    Some(list)
                }
                _ => None,
            };
            let Some(error) = failed else {
                return Ok(Some(Sealed {
                    batch,
                    count,
                    ends_turn,
                    records: listed,
                }));
            };
            self.log_error = Some(error.value(py).clone().into_any().unbind());
            self.agent
                .appended(batch, Err(LogFailure::Failed), now)
                .map_err(|e| mismatch(py, e))?;
        }
    }

    /// Moves the loop's outputs to `out`, in order (see the module docs).
    fn drain(&mut self, py: Python<'_>, out: &Bound<'_, PyList>) -> PyResult<()> {
        let mut builder = None;
        while let Some(output) = self.agent.poll_output() {
            match output {
                Output::Reply(waiter, Ok(reply)) => {
                    out.append((0u8, waiter, reply_value(py, &reply)?))?
                }
                Output::Reply(waiter, Err(failure)) => {
                    let error = failed(py, &failure, self.log_error.as_ref());
                    out.append((1u8, waiter, error.value(py).clone()))?
                }
                Output::Effect(effect) => {
                    if builder.is_none() {
                        builder = Some(Builder::new(py, &mut self.messages)?);
                    }
                    if let Some(builder) = builder.as_mut() {
                        out.append(builder.effect(&effect)?)?;
                    }
                }
                Output::StartJob(waiter) => out.append((2u8, waiter, py.None()))?,
                // The call's task was cancelled with its scope: nothing more to stop, and the
                // loop drops its late answer.
                Output::Abandon(_) => {}
                Output::Ended(ending) => out.append((3u8, ending.kind(), py.None()))?,
            }
        }
        drop(builder);
        self.messages.sweep();
        Ok(())
    }
}
