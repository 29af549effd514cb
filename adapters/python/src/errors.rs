//! Raising the exception classes of `coxswain._errors` (defined in Python, so they carry typed
//! attributes and `mypy` sees them as ordinary classes).

use coxswain_core::{BatchError, Expect, InvalidLog, Rejected};
use coxswain_log::{EncodeError, TooDeep};
use pyo3::prelude::*;

/// An instance of `coxswain._errors.<class>` built from `args`, as a Python error.
pub(crate) fn raise<'py, A>(py: Python<'py>, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    raise_from(py, "coxswain._errors", class, args)
}

/// An instance of `<module>.<class>` built from `args`, as a Python error (the asyncio agent's
/// own errors live in `coxswain.asyncio._errors`).
pub(crate) fn raise_from<'py, A>(py: Python<'py>, module: &str, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = py
        .import(module)
        .and_then(|module| module.getattr(class))
        .and_then(|class| class.call1(args));
    match made {
        Ok(error) => PyErr::from_value(error),
        Err(error) => error,
    }
}

/// The exception of a rejected input: one class per kind (S5: nothing changed), with the
/// rejection's details as attributes (`id`; `expect` for `TurnMismatch`; `target` and
/// `max_pending` for `Full`).
pub(crate) fn rejected(py: Python<'_>, rejection: &Rejected) -> PyErr {
    let message = rejection.to_string();
    match rejection {
        Rejected::AlreadyPending(id) => raise(py, "AlreadyPending", (message, id.as_str())),
        Rejected::AlreadyDelivered(id) => raise(py, "AlreadyDelivered", (message, id.as_str())),
        Rejected::Conflict(id) => raise(py, "Conflict", (message, id.as_str())),
        Rejected::TurnMismatch(expect) => {
            let (kind, turn) = match expect {
                Expect::Turn(turn) => ("turn", *turn),
                Expect::IdleAfter(turn) => ("idleAfter", *turn),
            };
            raise(py, "TurnMismatch", (message, kind, turn))
        }
        Rejected::Full {
            target,
            max_pending,
        } => raise(py, "Full", (message, target.as_str(), max_pending.get())),
        Rejected::UnexpectedCompletion { .. } => raise(py, "UnexpectedCompletion", (message,)),
        Rejected::Busy => raise(py, "Busy", (message,)),
        Rejected::AfterDisposal => raise(py, "Disposed", (message,)),
        Rejected::Undrained => raise(py, "Undrained", (message,)),
        _ => raise(py, "Rejected", (message,)),
    }
}

/// The exception of a log the machine cannot be restored from (S47).
pub(crate) fn invalid_log(py: Python<'_>, error: &InvalidLog) -> PyErr {
    raise(py, "InvalidLog", (error.to_string(), error.index))
}

/// The exception of an input that is not one of FORMAT.md's shapes.
pub(crate) fn invalid_input(py: Python<'_>, message: String) -> PyErr {
    raise(py, "InvalidInput", (message,))
}

/// The exception of a batch call that does not fit the machine's state (nothing changed):
/// `BatchError` with its `kind`, `already-open`, `not-open` or `undrained`.
pub(crate) fn batch(py: Python<'_>, error: BatchError) -> PyErr {
    raise(py, "BatchError", (error.to_string(), error.kind()))
}

/// `TooDeep` (an `EncodeError`): a value nests deeper than a log record holds it, with the Rust
/// `TooDeep`'s own text and its `depth` and `max` (nothing changed, nothing written).
pub(crate) fn too_deep(py: Python<'_>, deep: &TooDeep) -> PyErr {
    raise(py, "TooDeep", (deep.to_string(), deep.depth, deep.max))
}

/// The exception of a record that cannot be encoded: `TooDeep` for one nesting too deep, else
/// `EncodeError` (nothing written).
pub(crate) fn encode(py: Python<'_>, error: &EncodeError) -> PyErr {
    match error {
        EncodeError::TooDeep(deep) => too_deep(py, deep),
        other => raise(py, "EncodeError", (other.to_string(),)),
    }
}
