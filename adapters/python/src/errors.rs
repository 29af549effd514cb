//! Raising the exception classes of `coxswain._errors` (defined in Python, so they carry typed
//! attributes and `mypy` sees them as ordinary classes).

use coxswain_core::{InvalidLog, Rejected};
use pyo3::prelude::*;

/// An instance of `coxswain._errors.<class>` built from `args`, as a Python error.
pub(crate) fn raise<'py, A>(py: Python<'py>, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = py
        .import("coxswain._errors")
        .and_then(|module| module.getattr(class))
        .and_then(|class| class.call1(args));
    match made {
        Ok(error) => PyErr::from_value(error),
        Err(error) => error,
    }
}

/// The exception of a rejected input: one class per kind (S5: nothing changed).
pub(crate) fn rejected(py: Python<'_>, rejection: &Rejected) -> PyErr {
    let class = match rejection {
        Rejected::AlreadyPending(_) => "AlreadyPending",
        Rejected::AlreadyDelivered(_) => "AlreadyDelivered",
        Rejected::UnexpectedCompletion { .. } => "UnexpectedCompletion",
        Rejected::Busy => "Busy",
        Rejected::AfterDisposal => "Disposed",
        Rejected::Undrained => "Undrained",
        _ => "Rejected",
    };
    let id = match rejection {
        Rejected::AlreadyPending(id) | Rejected::AlreadyDelivered(id) => Some(id.as_str()),
        _ => None,
    };
    raise(py, class, (rejection.to_string(), id))
}

/// The exception of a log the machine cannot be restored from (S47).
pub(crate) fn invalid_log(py: Python<'_>, error: &InvalidLog) -> PyErr {
    raise(py, "InvalidLog", (error.to_string(), error.index))
}

/// The exception of an input that is not one of FORMAT.md's shapes.
pub(crate) fn invalid_input(py: Python<'_>, message: String) -> PyErr {
    raise(py, "InvalidInput", (message,))
}
