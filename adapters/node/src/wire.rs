//! The JSON shapes that cross to JavaScript: the core's own serde for inputs, outputs and events
//! (FORMAT.md), plus the few host-side shapes the wire format has no line for (the outstanding
//! request, the machine's state).

use coxswain_core::{Machine, Outstanding, Pending, Target};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// The deepest JSON text the binding parses (arrays and objects): past a value `json.js` sends
/// (it refuses one nesting deeper than 256 levels) and the few levels of an input's or a
/// command's wrapping. The depth the log holds is coxswain's own rule, checked on the value
/// (`coxswain_log::TooDeep`), never serde_json's recursion limit.
pub(crate) const MAX_TEXT_DEPTH: usize = 512;

/// `T` parsed from JSON text, serde_json's recursion limit lifted (so it never decides what is
/// too deep) behind a depth check of its own: a text nesting deeper than [`MAX_TEXT_DEPTH`] is
/// refused before it is parsed.
pub(crate) fn from_text<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    // Nesting `d` deep takes `d` opening brackets: a shorter text needs no scan.
    if text.len() > MAX_TEXT_DEPTH && depth(text.as_bytes()) > MAX_TEXT_DEPTH {
        return Err(serde::de::Error::custom(format!(
            "a value nests deeper than {MAX_TEXT_DEPTH} levels"
        )));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    let value = T::deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// How many arrays and objects a JSON text nests (brackets inside strings do not count); linear,
/// no recursion. A text that is not JSON is measured all the same (its parse then fails).
fn depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &byte in bytes {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// JSON text of any serializable reply (the core's types cannot fail to serialize; an error
/// would read as `null`).
pub(crate) fn to_text<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// JSON text of a value (serializing a `Value` cannot fail; an error would read as `null`).
pub(crate) fn text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// The request the machine waits on, in the request vocabulary of the wire format.
pub(crate) fn outstanding(outstanding: Option<Outstanding>) -> Value {
    match outstanding {
        None => Value::Null,
        Some(Outstanding::PreStep { turn, step }) => {
            json!({ "preStep": { "turn": turn, "step": step } })
        }
        Some(Outstanding::Step { turn, step }) => json!({ "step": { "turn": turn, "step": step } }),
        Some(Outstanding::TurnStopping { turn }) => json!({ "turnStopping": { "turn": turn } }),
    }
}

fn pending<'a>(items: impl Iterator<Item = &'a Pending>) -> Value {
    items
        .map(|item| json!({ "message": &**item.message(), "wakeup": item.is_waking() }))
        .collect()
}

/// The machine's queryable state: status, quiescence, lifecycle flags, the outstanding request
/// and both pending lists.
pub(crate) fn state(machine: &Machine) -> Value {
    json!({
        "status": machine.status(),
        "quiescent": machine.is_quiescent(),
        "disposed": machine.is_disposed(),
        "maintenance": machine.is_maintenance(),
        "cancelRequested": machine.is_cancel_requested(),
        "lastTurn": machine.last_turn(),
        "outstanding": outstanding(machine.outstanding()),
        "nextTurn": pending(machine.pending(Target::NextTurn)),
        "nextStep": pending(machine.pending(Target::NextStep)),
    })
}
