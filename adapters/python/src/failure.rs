//! The session layer's one host-failure vocabulary (`coxswain_session::HostFailure`), for the
//! asyncio agent: it says what happened to a host call; the code written into the log is the
//! session layer's. The names are the core's (`HostFailure`'s and `RequestKind`'s `FromStr`).

use std::str::FromStr;

use coxswain_binding_kit::request::request;
use coxswain_session::HostFailure;
use pyo3::prelude::*;

use crate::errors;

/// `(message, code)` of the `fail` answer for a host call that `failure`d (`panicked`,
/// `raised`, `cancelled`, `abandoned` or `invalid-answer`); `call` is `preStep`, `step` or
/// `turnStopping`. Raises `InvalidInput` naming another name.
#[pyfunction]
pub(crate) fn host_failure(
    py: Python<'_>,
    failure: &str,
    call: &str,
    detail: &str,
) -> PyResult<(String, String)> {
    let failure = named(py, failure)?;
    // Only the call's kind shows in the message; the numbers do not.
    let request =
        request(call, 0, 0).map_err(|unknown| errors::invalid_input(py, unknown.to_string()))?;
    let error = failure.error(request, detail);
    Ok((error.message.to_string(), error.code.to_string()))
}

/// The failure named `panicked`, `raised`, `cancelled`, `abandoned` or `invalid-answer` (the
/// session layer's code without its `host-`). Raises `InvalidInput` naming another name.
pub(crate) fn named(py: Python<'_>, failure: &str) -> PyResult<HostFailure> {
    HostFailure::from_str(failure).map_err(|unknown| errors::invalid_input(py, unknown.to_string()))
}
