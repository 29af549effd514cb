//! `coxswain._native.Session`: the session layer ([`coxswain_session::Session`]) for the asyncio
//! agent, which only moves bytes, time and tasks. Every decision is the session's: what is
//! admitted (id and message sizes, the log's nesting depth, host events only inside their step),
//! how inputs are staged into a numbered batch, what a persisted batch releases (each member's
//! effects, then its acknowledgement, in input order), how a failed batch is taken back (S5
//! extended to a failed persistence) and what of it is fed again, when an aborted call is
//! abandoned (the abort grace, S38–S40), and the code a host failure is written with.
//!
//! Inputs are trace `"in"` values (FORMAT.md), effects the classes of `coxswain._types` (as
//! `Machine.handle_typed` builds them), acknowledgements `(index, found)` tuples, times seconds
//! on any monotonic clock (the agent passes `loop.time()`).

use std::time::Duration;

use coxswain_core::{Input, Outstanding, PreStepAnswer};
use coxswain_log::{encode, HostEvent};
use coxswain_session::{
    Ack, BatchMismatch, BatchNo, HostFailure, Limits, Options, Refused, Release, Session, Timeout,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use serde_json::Value;

use crate::errors;
use crate::json::{text_arg, to_py, to_value};
use crate::machine::{
    delivery, entered, fate, outstanding, pending, status_name, word_answer, NativeMachine,
};
use crate::typed::{Builder, Messages};

/// Where the agent's own error classes live.
const AGENT_ERRORS: &str = "coxswain.asyncio._errors";

/// A session over a machine (see the module docs).
#[pyclass(module = "coxswain._native", name = "Session")]
pub(crate) struct NativeSession {
    session: Session,
    /// The sealed batch's lines (its buffer kept between batches).
    buffer: Vec<u8>,
    /// The Python objects of the messages the session's machine holds (S8: one object each).
    messages: Messages,
}

/// Seconds as a [`Duration`]: negative or NaN is 0, too large is the largest.
fn duration(seconds: f64) -> Duration {
    if seconds.is_nan() || seconds <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
}

/// The exception of a refused input or host event: nothing changed (S5).
fn refused(py: Python<'_>, refused: &Refused) -> PyErr {
    let message = refused.to_string();
    match refused {
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
    }
}

/// The exception of a batch call naming a batch that is not being persisted (nothing changed).
fn mismatch(py: Python<'_>, error: BatchMismatch) -> PyErr {
    let kind = match error {
        BatchMismatch::NotSealed => "not-sealed",
        _ => "other-batch",
    };
    errors::raise(py, "BatchError", (error.to_string(), kind))
}

fn encode_error(py: Python<'_>, message: String) -> PyErr {
    errors::raise(py, "EncodeError", (message,))
}

#[pymethods]
impl NativeSession {
    /// A session over a copy of `machine` (fresh, or restored by `open_log`), with an abort
    /// grace of `abort_grace` seconds and the admission limits `max_id_bytes` (an id's UTF-8
    /// bytes) and `max_message_bytes` (a message's JSON), and a pause of `retry_after` seconds
    /// after a failed batch before the session stages anything on its own again. Raises
    /// `InvalidInput` for a negative or infinite time.
    #[new]
    #[pyo3(signature = (machine, abort_grace = 5.0, max_id_bytes = 256, max_message_bytes = 1 << 20, retry_after = 0.1))]
    fn new(
        py: Python<'_>,
        machine: PyRef<'_, NativeMachine>,
        abort_grace: f64,
        max_id_bytes: usize,
        max_message_bytes: usize,
        retry_after: f64,
    ) -> PyResult<Self> {
        let seconds = |name: &str, value: f64| {
            Duration::try_from_secs_f64(value).map_err(|_| {
                errors::invalid_input(
                    py,
                    format!("{name} is a number of seconds, at least 0: {value}"),
                )
            })
        };
        let options = Options {
            abort_grace: seconds("abort_grace", abort_grace)?,
            retry_after: seconds("retry_after", retry_after)?,
            limits: Limits {
                max_id_bytes,
                max_message_bytes,
            },
        };
        Ok(NativeSession {
            session: Session::new(machine.machine.clone(), options),
            buffer: Vec::new(),
            messages: Messages::default(),
        })
    }

    /// Stages an input (a trace `"in"` value) into the open batch; returns its place in it.
    /// Raises the rejection's class (S5), `IdTooLong`, `MessageTooLarge`, `EncodeError` (too
    /// deep for a log record), `InvalidInput` (not an input) or `TypeError` (not JSON).
    fn feed(&mut self, py: Python<'_>, input: &Bound<'_, PyAny>) -> PyResult<usize> {
        let input: Input = serde_json::from_value(to_value(input)?)
            .map_err(|e| errors::invalid_input(py, format!("not an input: {e}")))?;
        let ticket = self.session.feed(input).map_err(|e| refused(py, &e))?;
        Ok(ticket.index)
    }

    /// A follow-up, steer or inject (`kind`) of a typed `Message` (read from its fields, as
    /// `Machine.deliver` reads it), or a send of it when `target` is given (with `wakeup` and
    /// the guard `expect`, S54): staged as `feed` stages it, and every output carrying it hands
    /// back `message` (S8).
    #[pyo3(signature = (kind, message, target = None, wakeup = false, expect = None))]
    fn deliver(
        &mut self,
        py: Python<'_>,
        kind: &str,
        message: &Bound<'_, PyAny>,
        target: Option<&Bound<'_, PyAny>>,
        wakeup: bool,
        expect: Option<(String, u64)>,
    ) -> PyResult<usize> {
        let target = target.map(text_arg).transpose()?;
        let input = delivery(kind, message, target.as_deref(), wakeup, expect)?;
        let carried = input.messages().next().cloned();
        let ticket = self.session.feed(input).map_err(|e| refused(py, &e))?;
        if let Some(carried) = carried {
            self.messages.bind(&carried, message);
        }
        Ok(ticket.index)
    }

    /// Stages the answer (a trace `"in"` value) of the host call made for `request` (`(kind,
    /// turn, step)`, as `outstanding` says it), through `Session::host_answered` (an entered
    /// batch too deep for a record is answered `fail`, `host-invalid-answer`, S38). `None`: that
    /// request is not outstanding, the answer is late (an abandoned call's) and dropped (S4).
    /// A value that is not an answer, or one the session still refuses, is answered `fail`
    /// (`host-invalid-answer`) too: else the request would stay outstanding for ever.
    fn answer(
        &mut self,
        py: Python<'_>,
        request: (String, u64, u64),
        answer: &Bound<'_, PyAny>,
    ) -> PyResult<Option<usize>> {
        let Some(request) = self.named(&request) else {
            return Ok(None);
        };
        let parsed = to_value(answer)
            .map_err(|e| e.to_string())
            .and_then(|value| {
                serde_json::from_value::<Input>(value).map_err(|e| format!("not an answer: {e}"))
            });
        self.answered(py, request, parsed)
    }

    /// `answer` with the word `word` (`"completed"`, `"done"`, `"reject"`, …: FORMAT.md's
    /// names, read through the core's own), with no JSON value made; any other string is
    /// answered as `answer` answers it.
    fn answer_word(
        &mut self,
        py: Python<'_>,
        request: (String, u64, u64),
        word: &Bound<'_, PyAny>,
    ) -> PyResult<Option<usize>> {
        let Some(outstanding) = self.named(&request) else {
            return Ok(None);
        };
        // A word that is no UTF-8 text (a lone surrogate) is no answer: the call fails
        // (`host-invalid-answer`), as for any other, else the request would stay outstanding.
        let parsed = text_arg(word).map_err(|e| e.to_string()).and_then(|word| {
            match word_answer(&request.0, &word) {
                Some(input) => Ok(input),
                None => serde_json::from_value::<Input>(serde_json::json!({ request.0: word }))
                    .map_err(|e| format!("not an answer: {e}")),
            }
        });
        self.answered(py, outstanding, parsed)
    }

    /// `answer` of a pre-step request (`request`) with `enter` of `messages` (`Message`
    /// objects): the ones the session handed out go back as its own messages, with no
    /// conversion, and every output carrying one hands back its object (S8).
    fn answer_enter(
        &mut self,
        py: Python<'_>,
        request: (String, u64, u64),
        messages: &Bound<'_, PyTuple>,
    ) -> PyResult<Option<usize>> {
        let Some(outstanding) = self.named(&request) else {
            return Ok(None);
        };
        let batch = match entered(&self.messages, messages) {
            Ok(batch) => batch,
            Err(error) => return self.answered(py, outstanding, Err(error.to_string())),
        };
        let input = Input::PreStep(PreStepAnswer::Enter(batch.clone().into()));
        let staged = self.answered(py, outstanding, Ok(input))?;
        for (message, object) in batch.iter().zip(messages.iter()) {
            self.messages.bind(message, &object);
        }
        Ok(staged)
    }

    /// Stages `fail` for the host call made for `request`, which `failure`d (`panicked`,
    /// `raised`, `cancelled`, `abandoned`, `invalid-answer`): the session's code and message
    /// with `detail`. `None`: that request is not outstanding (a late failure, dropped).
    fn host_failed(
        &mut self,
        py: Python<'_>,
        request: (String, u64, u64),
        failure: &str,
        detail: &str,
    ) -> PyResult<Option<usize>> {
        let failure = crate::failure::named(py, failure)?;
        let Some(request) = self.named(&request) else {
            return Ok(None);
        };
        self.fail(py, request, failure, detail)
    }

    /// Stages host events (`{type, data}` records) of step `step` of turn `turn`; returns the
    /// member's place. Raises `StepClosed` unless that step is running, `EncodeError` for a type
    /// of the machine's own or data too deep for a record.
    fn record(
        &mut self,
        py: Python<'_>,
        turn: u64,
        step: u64,
        records: &Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        let mut events = Vec::new();
        for record in records.try_iter()? {
            let Value::Object(mut record) = to_value(&record?)? else {
                return Err(encode_error(
                    py,
                    "a record is a `{type, data}` object".into(),
                ));
            };
            let Some(Value::String(kind)) = record.remove("type") else {
                return Err(encode_error(py, "a record has a string `type`".into()));
            };
            let data = record.remove("data").unwrap_or(Value::Null);
            events.push(HostEvent::new(kind, data).map_err(|e| encode_error(py, e.to_string()))?);
        }
        self.session
            .record(turn, step, events)
            .map(|ticket| ticket.index)
            .map_err(|e| refused(py, &e))
    }

    /// Seals the staged batch for its write; returns its number, or `None` with nothing staged.
    /// No member joins it until it is `persisted` or `failed`.
    fn seal(&mut self) -> Option<u64> {
        self.session.seal().map(|append| append.batch.0)
    }

    /// The sealed batch's lines (sealing it if `seal` was not called), numbered from
    /// `first_seq`, and how many: append them as one write (`b""`, 0 when its inputs emitted no
    /// event, or nothing is staged). Raises `EncodeError`: then report the batch `failed`.
    fn encode<'py>(
        &mut self,
        py: Python<'py>,
        first_seq: u64,
    ) -> PyResult<(Bound<'py, PyBytes>, usize)> {
        self.buffer.clear();
        let Some(append) = self.session.seal() else {
            return Ok((PyBytes::new(py, b""), 0));
        };
        let mut seq = first_seq;
        for entry in append.entries {
            encode(seq, entry, &mut self.buffer).map_err(|e| errors::encode(py, &e))?;
            seq = seq.saturating_add(1);
        }
        Ok((PyBytes::new(py, &self.buffer), append.entries.len()))
    }

    /// `seal` and `encode` in one call: `(batch, lines, count)`, or `None` with nothing
    /// staged. Raises `EncodeError` with the batch sealed (`seal` names it: report it `failed`).
    fn seal_encoded<'py>(
        &mut self,
        py: Python<'py>,
        first_seq: u64,
    ) -> PyResult<Option<(u64, Bound<'py, PyBytes>, usize)>> {
        let Some(batch) = self.seal() else {
            return Ok(None);
        };
        let (lines, count) = self.encode(py, first_seq)?;
        Ok(Some((batch, lines, count)))
    }

    /// The sealed batch's records as `{type, data}` values, in order (for subscribers; it seals
    /// the batch as `seal` does).
    fn records<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let records = PyList::empty(py);
        if let Some(append) = self.session.seal() {
            for entry in append.entries {
                records.append(to_py(
                    py,
                    &serde_json::to_value(entry).unwrap_or(Value::Null),
                )?)?;
            }
        }
        Ok(records)
    }

    /// Batch `batch` is durable: what it releases, in input order: each member's effects, then
    /// its acknowledgement `(index, found)` (`found` is false only for a `remove`/`replace` of
    /// an id not pending, S15). An abort among them starts the abort grace at `now`. Raises
    /// `BatchError` (`not-sealed`, `other-batch`; nothing changed).
    fn persisted<'py>(
        &mut self,
        py: Python<'py>,
        batch: u64,
        now: f64,
    ) -> PyResult<Bound<'py, PyList>> {
        let released = self
            .session
            .persisted(BatchNo(batch), duration(now))
            .map_err(|e| mismatch(py, e))?;
        let mut builder = Builder::new(py, &mut self.messages)?;
        let out = PyList::empty(py);
        for release in &released {
            match release {
                Release::Effect(effect) => out.append(builder.effect(effect)?)?,
                // Refused against the batch's earlier members: it stands now they are durable.
                Release::Ack(ticket, Ack::Refused(why)) => {
                    out.append((ticket.index, refused(py, why).value(py).clone()))?;
                }
                Release::Ack(ticket, ack) => {
                    let found = matches!(ack, Ack::Input { found: true } | Ack::Recorded);
                    out.append((ticket.index, found))?;
                }
            }
        }
        Ok(out)
    }

    /// Batch `batch` was not persisted at `now`: the machine is taken back to before it (S5).
    /// Returns `(members, held)`: the places of the members that failed (answer each with the
    /// failure) and of those whose answer the session holds (a host call's, a maintenance
    /// job's end): it stages them again once its retry pause is over (`handle_timeout`), and
    /// their callers wait for that. Raises `BatchError` as `persisted` does.
    fn failed(
        &mut self,
        py: Python<'_>,
        batch: u64,
        now: f64,
    ) -> PyResult<(Vec<usize>, Vec<usize>)> {
        let failed = self
            .session
            .failed(BatchNo(batch), duration(now))
            .map_err(|e| mismatch(py, e))?;
        let places =
            |tickets: &[coxswain_session::Ticket]| tickets.iter().map(|t| t.index).collect();
        Ok((places(&failed.members), places(&failed.held)))
    }

    /// When to call `handle_timeout` next (the end of the retry pause after a failed batch, or
    /// the abort grace's deadline), if ever.
    fn poll_timeout(&self) -> Option<f64> {
        self.session.poll_timeout().map(|at| at.as_secs_f64())
    }

    /// Time has reached `now`. Returns what the session staged, as `(was, place)` pairs, or
    /// `None`: the answers failed batches held, once the retry pause is over (`was` is the
    /// held member's `(batch, place)`; `place` its new place, or the exception that refuses it
    /// now: tell its caller), else the `fail` answer (code `host-abandoned`, S38–S40) of an
    /// aborted call that outlived the abort grace (`was` is `None`; the call is dropped, a late
    /// answer is refused). Call again while `poll_timeout` is not after `now`.
    fn handle_timeout<'py>(
        &mut self,
        py: Python<'py>,
        now: f64,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let out = PyList::empty(py);
        match self.session.handle_timeout(duration(now)) {
            None => return Ok(None),
            Some(Timeout::Abandoned { ticket, .. }) => {
                out.append((None::<(u64, usize)>, ticket.index))?
            }
            Some(Timeout::Retried { answers }) => {
                for (held, staged) in answers {
                    let was = Some((held.batch.0, held.index));
                    match staged {
                        Ok(ticket) => {
                            out.append((was, ticket.index.into_pyobject(py)?.into_any()))?
                        }
                        Err(why) => {
                            out.append((was, refused(py, &why).value(py).clone().into_any()))?
                        }
                    }
                }
            }
        }
        Ok(Some(out))
    }

    /// Whether members are staged or a batch is sealed.
    fn has_batch(&self) -> bool {
        self.session.has_batch()
    }

    /// The public status (S23): `"idle"` or `"running"`. The queries show a staged batch
    /// applied.
    fn status(&self) -> &'static str {
        status_name(self.session.machine().status())
    }

    /// The last turn number (0 before the first, S27).
    fn last_turn(&self) -> u64 {
        self.session.machine().last_turn()
    }

    /// The fate of `id` (S58), as `Machine.fate` spells it (the core's `Fate::to_json`); a
    /// query, answered in every phase, also once disposed. It shows a staged batch applied.
    fn fate<'py>(&self, py: Python<'py>, id: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        fate(py, self.session.machine(), id)
    }

    /// No turn and no maintenance is running (S44).
    fn is_quiescent(&self) -> bool {
        self.session.machine().is_quiescent()
    }

    /// The machine is disposed (S45).
    fn is_disposed(&self) -> bool {
        self.session.machine().is_disposed()
    }

    /// The seed of the id indexes' hasher.
    fn hash_seed(&self) -> u64 {
        self.session.machine().config().hash_seed
    }

    /// One pending list (`"next-turn"` or `"next-step"`): `(message, waking)` in order.
    fn pending<'py>(&self, py: Python<'py>, list: &str) -> PyResult<Bound<'py, PyList>> {
        pending(py, self.session.machine(), list)
    }

    /// The outstanding request (S4) as `(kind, turn, step)`, or `None`.
    fn outstanding(&self) -> Option<(&'static str, u64, u64)> {
        self.session.machine().outstanding().map(outstanding)
    }
}

impl NativeSession {
    /// The outstanding request, if `request` names it (else the answer is late: S4).
    fn named(&self, request: &(String, u64, u64)) -> Option<Outstanding> {
        let now = self.session.machine().outstanding()?;
        let (kind, turn, step) = outstanding(now);
        ((kind, turn, step) == (request.0.as_str(), request.1, request.2)).then_some(now)
    }

    /// Stages `parsed`, the answer to `request`; an answer that is none (`Err`: why) or that
    /// the session refuses fails the call instead (`host-invalid-answer`, S38): else the
    /// request would stay outstanding for ever.
    fn answered(
        &mut self,
        py: Python<'_>,
        request: Outstanding,
        parsed: Result<Input, String>,
    ) -> PyResult<Option<usize>> {
        let detail = match parsed.map(|input| self.session.answer(request, input)) {
            Ok(Ok(ticket)) => return Ok(Some(ticket.index)),
            Ok(Err(refusal)) => refusal.to_string(),
            Err(detail) => detail,
        };
        self.fail(py, request, HostFailure::InvalidAnswer, &detail)
    }

    fn fail(
        &mut self,
        py: Python<'_>,
        request: Outstanding,
        failure: HostFailure,
        detail: &str,
    ) -> PyResult<Option<usize>> {
        self.session
            .host_failed(request, failure, detail)
            .map(|ticket| Some(ticket.index))
            .map_err(|e| refused(py, &e))
    }
}
