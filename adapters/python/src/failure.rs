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
    let failure = match failure {
        "panicked" => HostFailure::Panicked,
        "raised" => HostFailure::Raised,
        "cancelled" => HostFailure::Cancelled,
        "abandoned" => HostFailure::Abandoned,
        "invalid-answer" => HostFailure::InvalidAnswer,
        other => {
            return Err(errors::invalid_input(
                py,
                format!("no host failure `{other}`"),
            ))
        }
    };
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
