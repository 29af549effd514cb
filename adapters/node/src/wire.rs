//! The JSON shapes that cross to JavaScript: the core's own serde for inputs, outputs and events
//! (FORMAT.md), plus the few host-side shapes the wire format has no line for (an effect that
//! begins an activity, the outstanding request, the pending lists).

use coxswain_core::{Activity, Effect, Machine, Output, Outstanding, Pending, Target};
use serde_json::{json, Value};

/// An effect as JSON: its wire output (`{"notify": …}`, `{"request": …}` — `abort` included —,
/// `{"disposed": {}}`), or `{"begin": {"turn": n}}` / `{"begin": {"maintenance": {}}}` for the
/// start of an activity, which has no wire form.
pub(crate) fn effect(effect: Effect) -> Value {
    match effect {
        Effect::Begin(Activity::Turn(turn)) => json!({ "begin": { "turn": turn } }),
        Effect::Begin(Activity::Maintenance) => json!({ "begin": { "maintenance": {} } }),
        other => match Option::<Output>::from(other) {
            Some(output) => output_value(&output),
            None => Value::Null,
        },
    }
}

/// An output as the value of a trace's `"out"` line.
pub(crate) fn output_value(output: &Output) -> Value {
    serde_json::to_value(output).unwrap_or_else(|e| json!({ "unserializable": e.to_string() }))
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
