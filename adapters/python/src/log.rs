//! The JSON-lines log record format of `coxswain-log`, exposed so the format has one owner: the
//! Python side does the file IO (and the `fsync`) and calls these to encode, read back and
//! restore, exactly as `adapters/tokio`'s `FileLog` and `Agent::open` do.

use coxswain_binding_kit::options::{redelivery_shown, resume_options};
use coxswain_binding_kit::records::{encode_values, RecordError};
use coxswain_core::{Event, Message, Restorer};
use coxswain_log::{check_message, parse, Record};
use coxswain_session::{ResumeError, ResumeOptions, ResumePlan};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyList};
use serde_json::Value;

use crate::errors;
use crate::json::{to_py, to_value};
use crate::machine::NativeMachine;

/// The lines of `records` (`{type, data}` each), numbered from `first_seq`: the bytes to append,
/// every line ending in `\n`. Raises `EncodeError` (nothing encoded) for a record the reader
/// would refuse (too deep, a machine type with the wrong data, `seq` exhausted).
#[pyfunction]
pub(crate) fn encode_records<'py>(
    py: Python<'py>,
    first_seq: u64,
    records: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut values = Vec::new();
    for record in records.try_iter()? {
        values.push(to_value(&record?)?);
    }
    // The kit's one reading and encoding of records (as the Node binding's).
    let out = encode_values(first_seq, values).map_err(|error| match error {
        RecordError::Encode { error, .. } => errors::encode(py, &error),
        other => errors::raise(py, "EncodeError", (other.to_string(),)),
    })?;
    Ok(PyBytes::new(py, &out))
}

/// Reads a log back: `(records, complete_len, torn, unterminated, next_seq)`, where `records` is
/// every complete record (`{seq?, type, data}`), `complete_len` the bytes they take, `torn` the
/// `(line, bytes)` of a final record cut short (left out, S50) or `None`, `unterminated` whether
/// the last record lacks its `\n`. Raises `CorruptLog` naming the line of anything else.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub(crate) fn parse_log<'py>(
    py: Python<'py>,
    data: &[u8],
) -> PyResult<(Bound<'py, PyList>, usize, Option<(usize, usize)>, bool, u64)> {
    let parsed =
        parse(data).map_err(|e| errors::raise(py, "CorruptLog", (e.to_string(), e.line)))?;
    let records = PyList::empty(py);
    for record in &parsed.records {
        records.append(to_py(py, &record.event)?)?;
    }
    Ok((
        records,
        parsed.complete_len,
        parsed.torn.map(|t| (t.line, t.bytes)),
        parsed.unterminated,
        parsed.next_seq,
    ))
}

/// The redelivery allowance `A` of crash repair (S59) a host passed, checked: an `int` (not a
/// `bool`) from 0 to `MAX_REDELIVERY` (the kit's check: the session layer's
/// `try_with_redelivery`, the one owner of the bound). Anything else raises `InvalidRedelivery`
/// naming the value; an `int` beyond 128 bits is refused by its sign, never converted.
#[pyfunction]
pub(crate) fn check_redelivery(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    let refuse = |message: String| errors::raise(py, "InvalidRedelivery", (message, value));
    let shown = || -> PyResult<String> { Ok(value.repr()?.to_string()) };
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(refuse(format!(
            "the redelivery allowance {} is not an integer (S59)",
            shown()?
        )));
    }
    // The kit's one check (negative, or above the session layer's bound); an `int` beyond 128
    // bits is shown as Python writes it, never converted.
    let checked = match value.extract::<i128>() {
        Ok(allowance) => redelivery_shown(allowance, allowance),
        Err(_) => {
            let beyond = if value.lt(0)? { i128::MIN } else { i128::MAX };
            redelivery_shown(beyond, shown()?)
        }
    };
    checked.map_err(|error| refuse(error.to_string()))
}

/// The resume options of a host: its [`Config`](coxswain_core::Config) and the redelivery
/// allowance, checked by the session layer (`InvalidRedelivery` above its bound, S59).
pub(crate) fn options(
    py: Python<'_>,
    delivery_memory: usize,
    max_pending: Option<usize>,
    hash_seed: u64,
    redelivery: u64,
) -> PyResult<ResumeOptions> {
    let config = crate::machine::config(py, delivery_memory, max_pending, hash_seed)?;
    resume_options(config, i128::from(redelivery))
        .map_err(|error| errors::raise(py, "InvalidRedelivery", (error.to_string(), redelivery)))
}

/// Restores the machine from a log read back, as `Agent::open` does (S46–S48, S50, S59), with
/// the host's delivery memory (S51), admission bound (S55) and redelivery allowance (S59):
/// returns `(machine, closers, interrupted_turn, redelivered)`, where `closers` are the events
/// that close a turn the log ended inside, then the redelivery splices (the last
/// `redelivered`), typed (append them before anything else). Raises `CorruptLog` naming the
/// line of the first record the core refuses (nothing is to be written then), or
/// `InvalidRedelivery` (nothing read).
#[pyfunction]
#[pyo3(signature = (records, delivery_memory = 0, max_pending = None, hash_seed = 0, redelivery = 0))]
#[allow(clippy::type_complexity)]
pub(crate) fn open_log<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    delivery_memory: usize,
    max_pending: Option<usize>,
    hash_seed: u64,
    redelivery: u64,
) -> PyResult<(NativeMachine, Bound<'py, PyList>, Option<u64>, usize)> {
    let options = options(py, delivery_memory, max_pending, hash_seed, redelivery)?;
    // The session layer's one resume decision (`ResumePlan`): restore, then the closers.
    let mut read = Vec::new();
    for (index, record) in records.try_iter()?.enumerate() {
        let event = to_value(&record?)?;
        let seq = event.get("seq").and_then(Value::as_u64);
        read.push(Record {
            line: index + 1,
            seq,
            event,
        });
    }
    let plan =
        ResumePlan::from_records(&read, 0, options).map_err(|error| resume_error(py, &error))?;
    let mut machine = NativeMachine {
        machine: plan.machine,
        messages: crate::typed::Messages::default(),
        undrained: None,
    };
    let closers = typed_events(py, &mut machine, &plan.closers)?;
    Ok((machine, closers, plan.interrupted, plan.redelivered))
}

/// Crash repair (S50, S59) of a log of `{type, data}` records as the trace format's
/// `given.repair` runs it: restored from `seed_length` (S46) into a machine with the host's
/// delivery memory (S51; `usize::MAX`, unbounded, S58) and admission bound (S55), the closers
/// of a turn it ended inside and the redelivery splices of the allowance `redelivery` appended
/// (the core's `Restorer::repair`), then restored too. Returns `(machine, appended,
/// interrupted_turn)`, `appended` the typed events repair appended, in order. Raises
/// `InvalidLog` (S47) or `InvalidRedelivery` (before reading anything).
#[pyfunction]
#[pyo3(signature = (log, seed_length = 0, delivery_memory = 0, max_pending = None, redelivery = 0))]
#[allow(clippy::type_complexity)]
pub(crate) fn repair_log<'py>(
    py: Python<'py>,
    log: &Bound<'py, PyAny>,
    seed_length: usize,
    delivery_memory: usize,
    max_pending: Option<usize>,
    redelivery: u64,
) -> PyResult<(NativeMachine, Bound<'py, PyList>, Option<u64>)> {
    let options = options(py, delivery_memory, max_pending, 0, redelivery)?;
    let mut restorer = Restorer::with_config(options.config, seed_length);
    for record in log.try_iter()? {
        restorer
            .push_json(&to_value(&record?)?)
            .map_err(|error| errors::invalid_log(py, &error))?;
    }
    let interrupted = restorer.position().open_turn();
    let appended = restorer.repair(options.redelivery);
    for event in &appended {
        restorer
            .push_event(event)
            .map_err(|error| errors::invalid_log(py, &error))?;
    }
    let machine = restorer
        .finish()
        .map_err(|error| errors::invalid_log(py, &error))?;
    let mut machine = NativeMachine {
        machine,
        messages: crate::typed::Messages::default(),
        undrained: None,
    };
    let appended = typed_events(py, &mut machine, &appended)?;
    Ok((machine, appended, interrupted))
}

/// `events` as the typed `Event`s of `coxswain` (a splice's `redelivery` kept, S59), each
/// message the one object `machine` hands out for it (S8).
fn typed_events<'py>(
    py: Python<'py>,
    machine: &mut NativeMachine,
    events: &[Event],
) -> PyResult<Bound<'py, PyList>> {
    let mut builder = crate::typed::Builder::new(py, &mut machine.messages)?;
    let list = PyList::empty(py);
    for event in events {
        list.append(builder.event(event)?)?;
    }
    Ok(list)
}

/// Resumes a session from a log's bytes in one crossing, as `Agent::open` does (the session
/// layer's `ResumePlan::from_bytes`: read back, restore with the host's delivery memory, S51,
/// admission bound, S55, and hash seed, repair with its redelivery allowance; S46–S48, S50,
/// S59): returns `(machine, closers, interrupted_turn, records, cut_to, torn, unterminated,
/// next_seq, redelivered)`. `cut_to` is the length to cut a torn tail back to (S50), `torn` its
/// `(line, bytes)`, `unterminated` whether the last record lacks its `\n`, `redelivered` how
/// many of the closers (the last) are redelivery splices; no record becomes a Python object.
/// Raises `CorruptLog` naming the line of anything that is not a record, or of the first record
/// the core refuses, and `InvalidRedelivery` for an allowance above the bound.
#[pyfunction]
#[pyo3(signature = (data, delivery_memory = 0, max_pending = None, hash_seed = 0, redelivery = 0))]
#[allow(clippy::type_complexity)]
pub(crate) fn resume_log<'py>(
    py: Python<'py>,
    data: &[u8],
    delivery_memory: usize,
    max_pending: Option<usize>,
    hash_seed: u64,
    redelivery: u64,
) -> PyResult<(
    NativeMachine,
    Bound<'py, PyList>,
    Option<u64>,
    usize,
    Option<u64>,
    Option<(usize, usize)>,
    bool,
    u64,
    usize,
)> {
    let options = options(py, delivery_memory, max_pending, hash_seed, redelivery)?;
    let plan = ResumePlan::from_bytes(data, options).map_err(|error| resume_error(py, &error))?;
    let closers = closers(py, &plan.closers)?;
    Ok((
        NativeMachine {
            machine: plan.machine,
            messages: crate::typed::Messages::default(),
            undrained: None,
        },
        closers,
        plan.interrupted,
        plan.records,
        plan.cut_to,
        plan.torn.map(|torn| (torn.line, torn.bytes)),
        plan.terminate,
        plan.next_seq,
        plan.redelivered,
    ))
}

/// A resume plan's closers (S50) as Python `{type, data}` values, to append before anything.
fn closers<'py>(py: Python<'py>, closers: &[Event]) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for closer in closers {
        list.append(to_py(
            py,
            &serde_json::to_value(closer).unwrap_or(Value::Null),
        )?)?;
    }
    Ok(list)
}

/// `CorruptLog` for a log the session layer cannot resume, naming the line.
fn resume_error(py: Python<'_>, error: &ResumeError) -> PyErr {
    let line = match error {
        ResumeError::Invalid(invalid) => invalid.line,
        ResumeError::Corrupt(corrupt) => corrupt.line,
        _ => 0,
    };
    errors::raise(py, "CorruptLog", (error.to_string(), line))
}

/// Raises `EncodeError` if `message` (a message's JSON) is not a message with a string `id`, or
/// nests deeper than a log record can hold it: checked before delivering, as the tokio adapter
/// does, so such a message is refused before anything changes.
#[pyfunction]
pub(crate) fn check_message_json(py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<()> {
    let value = to_value(message)?;
    let Some(message) = Message::from_json(&value) else {
        return Err(errors::raise(
            py,
            "EncodeError",
            ("a message is an object with a string `id`".to_owned(),),
        ));
    };
    check_message(&message).map_err(|deep| errors::too_deep(py, &deep))
}
