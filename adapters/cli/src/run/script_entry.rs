//! One entry of a script's `actions` or of a host reply's `during`: `{TRIGGER?, "note"?,
//! ACTION}`, parsed strictly: exactly one action key, every name resolved (presets, targets,
//! record types), every message checked.

use std::str::FromStr;

use coxswain_core::{CancelCause, Event, Message, Preset, Target};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::cue::Cue;

/// When a top-level action runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    /// `"at": MS`: MS after the run began.
    At(u64),
    /// `"when": EVENT`: once the event happened.
    When(Cue),
    /// Neither: right after the previous action.
    Next,
}

/// One action: one call on the agent (or, for the runner's own, a wait or a reopen).
#[derive(Clone, Debug)]
pub(crate) enum Action {
    Deliver {
        preset: Preset,
        message: Message,
    },
    Send {
        message: Message,
        target: Target,
        wakeup: bool,
    },
    Remove(String),
    Replace {
        id: String,
        message: Message,
    },
    Prepend {
        target: Target,
        message: Message,
    },
    Clear,
    Cancel {
        cause: CancelCause,
        keep_inbox: bool,
    },
    Maintenance {
        ms: u64,
    },
    WaitIdle,
    Reopen,
    Dispose,
    Record {
        kind: String,
        data: Value,
    },
}

/// Where an action stands: at the top level, or in the `during` of a host call of this kind.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    TopLevel,
    During(&'static str),
}

/// One entry of `actions` or `during`: `{TRIGGER?, "note"?, ACTION}`, exactly one action key.
pub(crate) fn parse_entry(value: &Value, place: Place) -> Result<(Trigger, Action), String> {
    let object = value
        .as_object()
        .ok_or_else(|| format!("an action is an object, not {value}"))?;
    let mut trigger = Trigger::Next;
    let mut rest: Vec<(&String, &Value)> = Vec::new();
    for (key, value) in object {
        match key.as_str() {
            "note" if value.is_string() => {}
            "note" => return Err("`note` is a string".into()),
            "at" | "when" if trigger != Trigger::Next => {
                return Err("an action has one trigger: `at` or `when`, not both".into())
            }
            "at" => {
                let ms = value
                    .as_u64()
                    .ok_or_else(|| format!("`at` is a number of milliseconds, not {value}"))?;
                trigger = Trigger::At(ms);
            }
            "when" => {
                let text = value
                    .as_str()
                    .ok_or_else(|| format!("`when` is an event in words, not {value}"))?;
                trigger = Trigger::When(Cue::from_str(text)?);
            }
            _ => rest.push((key, value)),
        }
    }
    let [(key, body)] = rest.as_slice() else {
        let keys: Vec<&str> = rest.iter().map(|(key, _)| key.as_str()).collect();
        return Err(format!(
            "an action has exactly one action key, found {}: [{}]",
            keys.len(),
            keys.join(", ")
        ));
    };
    let action = parse_action(key, body).map_err(|e| format!("`{key}`: {e}"))?;
    check_place(&action, place)?;
    Ok((trigger, action))
}

const ACTIONS: &str = "followup, steer, inject, send, remove, replace, prepend, clear, cancel, \
                       maintenance, waitIdle, reopen, dispose, record";

fn parse_action(key: &str, body: &Value) -> Result<Action, String> {
    if let Ok(preset) = Preset::from_str(key) {
        let message = to_message(body)?;
        return Ok(Action::Deliver { preset, message });
    }
    let action = match key {
        "send" => {
            let send: SendBody = fields(body)?;
            Action::Send {
                message: to_message(&send.message)?,
                target: to_target(&send.target)?,
                wakeup: send.wakeup,
            }
        }
        "remove" => Action::Remove(fields(body)?),
        "replace" => {
            let replace: ReplaceBody = fields(body)?;
            Action::Replace {
                id: replace.id,
                message: to_message(&replace.message)?,
            }
        }
        "prepend" => {
            let prepend: PrependBody = fields(body)?;
            Action::Prepend {
                target: to_target(&prepend.target)?,
                message: to_message(&prepend.message)?,
            }
        }
        "cancel" => {
            let cancel: CancelBody = fields(body)?;
            Action::Cancel {
                cause: cancel.cause.unwrap_or(CancelCause::User),
                keep_inbox: cancel.keep_inbox,
            }
        }
        "maintenance" => Action::Maintenance {
            ms: fields::<MaintenanceBody>(body)?.ms,
        },
        "record" => {
            let record: RecordBody = fields(body)?;
            if Event::TYPES.contains(&record.kind.as_str()) {
                return Err(format!(
                    "`{}` is the machine's own record type, not a host event",
                    record.kind
                ));
            }
            Action::Record {
                kind: record.kind,
                data: record.data,
            }
        }
        "clear" | "waitIdle" | "reopen" | "dispose" => {
            fields::<Empty>(body)?;
            match key {
                "clear" => Action::Clear,
                "waitIdle" => Action::WaitIdle,
                "reopen" => Action::Reopen,
                _ => Action::Dispose,
            }
        }
        _ => return Err(format!("unknown action (the actions: {ACTIONS})")),
    };
    Ok(action)
}

/// `host`: the kind of host call whose `during` holds the action.
fn check_place(action: &Action, place: Place) -> Result<(), String> {
    match (action, place) {
        (Action::Record { .. }, Place::During("step")) => Ok(()),
        (Action::Record { .. }, _) => {
            Err("`record` is a host event: only in a step's `during`".into())
        }
        (
            Action::Maintenance { .. } | Action::WaitIdle | Action::Reopen | Action::Dispose,
            Place::During(_),
        ) => Err("this action waits for the host call that would run it".into()),
        _ => Ok(()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendBody {
    message: Value,
    target: String,
    #[serde(default)]
    wakeup: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceBody {
    id: String,
    message: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PrependBody {
    target: String,
    message: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CancelBody {
    #[serde(default)]
    cause: Option<CancelCause>,
    #[serde(default)]
    keep_inbox: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MaintenanceBody {
    ms: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordBody {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

fn fields<T: DeserializeOwned>(body: &Value) -> Result<T, String> {
    T::deserialize(body).map_err(|e| e.to_string())
}

fn to_target(name: &str) -> Result<Target, String> {
    Target::from_str(name).map_err(|e| e.to_string())
}

/// A script message: `{id, content, source?}`; the source defaults to `{"kind": "user"}`.
fn to_message(value: &Value) -> Result<Message, String> {
    let mut object: Map<String, Value> = value
        .as_object()
        .cloned()
        .ok_or_else(|| format!("a message is an object with an `id`, not {value}"))?;
    object
        .entry("source")
        .or_insert_with(|| json!({"kind": "user"}));
    Message::from_json(&Value::Object(object))
        .ok_or_else(|| format!("a message needs a string `id`: {value}"))
}
