//! The session layer's one host-failure vocabulary (`coxswain_session::HostFailure`), for the
//! asyncio agent: it says what happened to a host call; the code written into the log is the
//! session layer's.

use coxswain_core::Outstanding;
use coxswain_session::HostFailure;
use pyo3::prelude::*;

use crate::errors;

/// `(message, code)` of the `fail` answer for a host call that `failure`d (`panicked`,
/// `raised`, `cancelled`, `abandoned` or `invalid-answer`); `call` is `preStep`, `step` or
/// `turnStopping`. Raises `InvalidInput` for another name.
#[pyfunction]
pub(crate) fn host_failure(
    py: Python<'_>,
    failure: &str,
    call: &str,
    detail: &str,
) -> PyResult<(String, String)> {
    let failure = named(py, failure)?;
    // Only the call's kind shows in the message; the numbers do not.
    let request = match call {
        "preStep" => Outstanding::PreStep { turn: 0, step: 0 },
        "step" => Outstanding::Step { turn: 0, step: 0 },
        "turnStopping" => Outstanding::TurnStopping { turn: 0 },
        other => return Err(errors::invalid_input(py, format!("no host call `{other}`"))),
    };
    let error = failure.error(request, detail);
    Ok((error.message.to_string(), error.code.to_string()))
}

/// The failure named `panicked`, `raised`, `cancelled`, `abandoned` or `invalid-answer` (the
/// session layer's code without its `host-`). Raises `InvalidInput` for another name.
pub(crate) fn named(py: Python<'_>, failure: &str) -> PyResult<HostFailure> {
    match failure {
        "panicked" => Ok(HostFailure::Panicked),
        "raised" => Ok(HostFailure::Raised),
        "cancelled" => Ok(HostFailure::Cancelled),
        "abandoned" => Ok(HostFailure::Abandoned),
        "invalid-answer" => Ok(HostFailure::InvalidAnswer),
        other => Err(errors::invalid_input(
            py,
            format!("no host failure `{other}`"),
        )),
    }
}
