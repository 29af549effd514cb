//! Conflicting reuse of an id (S56, I14): the message equality that decides between
//! `already-pending` / `already-delivered` (an identical retry, which callers treat as success)
//! and `conflict` (a different message under a reused id, a caller bug).
//!
//! Pure functions on JSON values, written from SPEC S56 alone: two messages are equal when their
//! `source` and `content` are equal as JSON values (objects by keys and values whatever the key
//! order, arrays element by element, numbers by mathematical value, strings code point by code
//! point). This equality is S56's only: everywhere else (the traces, the message that travels,
//! S8) numbers compare as written.

use serde_json::{Number, Value};

/// S56: the rejection for a message whose id S13 or S52 refuses. `kind` is the rejection S13
/// (`already-pending`) or S52 (`already-delivered`) would give; `existing` is the message pending
/// (or held in the memory) under that id, `new` the refused one. An identical retry keeps `kind`;
/// a different message is a `conflict`.
pub(super) fn reuse_rejection(kind: &'static str, existing: &Value, new: &Value) -> &'static str {
    if same_message(existing, new) {
        kind
    } else {
        "conflict"
    }
}

/// S56: two messages are equal when their `source` and `content` are equal as JSON values. The
/// id is equal by construction (it is how the two were found); no other key takes part. A key
/// that is absent from both is equal; absent on one side only is a difference (an absent key is
/// no JSON value, not even `null`).
pub(super) fn same_message(a: &Value, b: &Value) -> bool {
    ["source", "content"]
        .iter()
        .all(|key| match (a.get(key), b.get(key)) {
            (None, None) => true,
            (Some(x), Some(y)) => json_equal(x, y),
            _ => false,
        })
}

/// S56: equality of JSON values: objects by keys and values (key order is free), arrays element
/// by element, numbers by mathematical value ([`numbers_equal`]), strings code point by code
/// point (Rust's `String` equality: the same UTF-8 bytes are the same code points), `true` /
/// `false` / `null` by themselves; values of different JSON types never equal.
pub(super) fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, x)| y.get(k).is_some_and(|y| json_equal(x, y)))
        }
        _ => false,
    }
}

/// S56: numbers by mathematical value, exactly: `1 == 1.0`, `-0.0 == 0`, but
/// `9007199254740993` (an integer) is not `9007199254740992.0` (the nearest double), and no
/// integer is ever rounded through `f64`. serde_json holds a number as a `u64`, an `i64` or a
/// finite `f64`; integers compare as `i128` (which holds both), a double with an integer only
/// when the double is integral and its exact value is that integer, two doubles as doubles.
pub(super) fn numbers_equal(a: &Number, b: &Number) -> bool {
    match (integer(a), integer(b)) {
        (Some(x), Some(y)) => x == y,
        (Some(x), None) => b.as_f64().is_some_and(|f| double_is_integer(f, x)),
        (None, Some(y)) => a.as_f64().is_some_and(|f| double_is_integer(f, y)),
        (None, None) => a.as_f64() == b.as_f64(),
    }
}

/// The exact value of an integer number (`u64` or `i64`), `None` for a double.
fn integer(n: &Number) -> Option<i128> {
    n.as_u64()
        .map(i128::from)
        .or_else(|| n.as_i64().map(i128::from))
}

/// Is the double `f` exactly the integer `x`? Every integer here lies in `(-2^64, 2^64)`, so a
/// double outside it (or with a fractional part, or not finite) is not; inside it, an integral
/// double converts to `i128` exactly.
fn double_is_integer(f: f64, x: i128) -> bool {
    const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
    f.is_finite() && f.fract() == 0.0 && f.abs() < TWO_POW_64 && f as i128 == x
}
