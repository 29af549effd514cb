//! Python values <-> JSON values (`serde_json::Value`), the one currency between the two sides.
//!
//! Python passes `None`, `bool`, `int` (within 64 bits: `-2**63 ..= 2**64 - 1`, kept exactly),
//! `float` (finite), `str`, `dict` (string keys), `list` and `tuple`; anything else (a larger
//! `int`, a NaN or infinite `float`, a non-`str` key, a `set`, an object) raises
//! `coxswain.UnrepresentableValue` (an `InvalidInput`, so a `ValueError`, and a `TypeError`),
//! never a panic or a rounding. Nesting is bounded (a cycle or a pathological value is refused,
//! not followed).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Deeper than this a value is refused (the log refuses far less deep records anyway).
const MAX_NESTING: usize = 256;

/// The refusal of a value JSON cannot carry exactly (nothing changed).
fn unrepresentable(object: &Bound<'_, PyAny>, why: impl Into<String>) -> PyErr {
    crate::errors::raise(object.py(), "UnrepresentableValue", (why.into(),))
}

/// The UTF-8 text of a Python `str`: one holding a lone surrogate (`"\\udc80"`, which
/// `surrogateescape` makes of undecodable bytes) is no UTF-8 text, and JSON and the log carry
/// none: `UnrepresentableValue` naming the code point and where it is, never Python's own
/// `UnicodeEncodeError`.
pub(crate) fn text<'a>(string: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
    string.to_str().map_err(|error| {
        let py = string.py();
        // `UnicodeEncodeError.start`: the index of the first character UTF-8 cannot encode.
        let found = error
            .value(py)
            .getattr("start")
            .and_then(|start| start.extract::<usize>())
            .ok()
            .and_then(|start| {
                let char = string.as_any().get_item(start).ok()?;
                let code = py
                    .import("builtins")
                    .ok()?
                    .getattr("ord")
                    .ok()?
                    .call1((char,))
                    .ok()?;
                Some((code.extract::<u32>().ok()?, start))
            });
        let why = match found {
            Some((code, at)) => format!(
                "a str holding a lone surrogate (U+{code:04X} at index {at}) is not UTF-8 text"
            ),
            None => "a str that is not UTF-8 text (a lone surrogate)".to_owned(),
        };
        unrepresentable(string.as_any(), why)
    })
}

/// A Python `str` argument's UTF-8 text (see [`text`]); not a `str`: `TypeError`.
pub(crate) fn text_arg(object: &Bound<'_, PyAny>) -> PyResult<String> {
    let string = object.cast::<PyString>()?;
    text(string).map(str::to_owned)
}

/// A Python value as JSON.
pub(crate) fn to_value(object: &Bound<'_, PyAny>) -> PyResult<Value> {
    convert(object, 0)
}

fn convert(object: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > MAX_NESTING {
        return Err(unrepresentable(
            object,
            format!("a value nests deeper than {MAX_NESTING} levels"),
        ));
    }
    if object.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(boolean) = object.cast::<PyBool>() {
        return Ok(Value::Bool(boolean.is_true()));
    }
    if let Ok(string) = object.cast::<PyString>() {
        return Ok(Value::String(text(string)?.to_owned()));
    }
    if let Ok(int) = object.cast::<PyInt>() {
        if let Ok(n) = int.extract::<i64>() {
            return Ok(Value::Number(n.into()));
        }
        if let Ok(n) = int.extract::<u64>() {
            return Ok(Value::Number(n.into()));
        }
        // Beyond 64 bits neither JSON as the Rust side reads it nor the log holds the integer
        // exactly (serde_json would read it as a float): refused, not rounded.
        return Err(unrepresentable(
            object,
            "an integer beyond 64 bits (JSON here holds -2**63 ..= 2**64 - 1 exactly)",
        ));
    }
    if let Ok(float) = object.cast::<PyFloat>() {
        return Number::from_f64(float.value())
            .map(Value::Number)
            .ok_or_else(|| {
                unrepresentable(object, "a float that JSON cannot hold (NaN, infinity)")
            });
    }
    if let Ok(dict) = object.cast::<PyDict>() {
        let mut map = Map::new();
        for (key, value) in dict.iter() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(unrepresentable(object, "a JSON object's keys are strings"));
            };
            map.insert(text(key)?.to_owned(), convert(&value, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if let Ok(list) = object.cast::<PyList>() {
        return list
            .iter()
            .map(|item| convert(&item, depth + 1))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    if let Ok(tuple) = object.cast::<PyTuple>() {
        return tuple
            .iter()
            .map(|item| convert(&item, depth + 1))
            .collect::<PyResult<Vec<_>>>()
            .map(Value::Array);
    }
    Err(unrepresentable(
        object,
        format!("not a JSON value: {}", object.get_type().name()?),
    ))
}

/// A JSON value as Python objects (`dict`, `list`, `str`, `int`, `float`, `bool`, `None`).
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}
