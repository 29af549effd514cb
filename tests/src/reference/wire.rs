//! The wire: FORMAT.md `"in"` values parsed into [`Input`], `"out"` values built as JSON.
//!
//! Malformed input is a programming error in test code and panics.

use serde_json::{json, Map, Value};

/// Outputs collected during one input.
pub(super) type Out = Vec<Value>;

/// One of the two pending lists (SPEC vocabulary: NT and NS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// `next-turn` (NT).
    NextTurn,
    /// `next-step` (NS).
    NextStep,
}

impl Target {
    fn parse(v: &Value) -> Target {
        match v.as_str() {
            Some("next-turn") => Target::NextTurn,
            Some("next-step") => Target::NextStep,
            _ => panic!("bad target {v}"),
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Target::NextTurn => "next-turn",
            Target::NextStep => "next-step",
        }
    }
}

/// The id of a message value (S6). Panics on a malformed message (test input).
pub(super) fn msg_id(m: &Value) -> &str {
    m.get("id")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("message without string id: {m}"))
}

/// A host answer to `preStep` (S29).
pub(super) enum PreStepAnswer {
    Enter(Vec<Value>),
    Reject,
    Fail(Value),
}

/// A host answer to `step` (S32).
#[derive(PartialEq)]
pub(super) enum StepAnswer {
    Completed,
    MaxTokens,
    Continue,
    Fail(Value),
}

/// A host answer to `turnStopping` (S33).
pub(super) enum TurnStoppingAnswer {
    Done,
    Fail(Value),
}

/// One input, parsed.
pub(super) enum Input {
    /// S16 `send`, and the presets `followup`, `steer`, `inject`.
    Send {
        message: Value,
        target: Target,
        wakeup: bool,
    },
    /// S15 `remove(id)`.
    Remove(String),
    /// S15 `replace(id, message)`.
    Replace { id: String, message: Value },
    /// S15 `prepend(target, message)`.
    Prepend { target: Target, message: Value },
    /// S15 `clear()`.
    Clear,
    /// S39 `cancel(cause, {keepInbox})`.
    Cancel { cause: Value, keep_inbox: bool },
    /// S43 `beginMaintenance()`.
    BeginMaintenance,
    /// S43 `endMaintenance()`.
    EndMaintenance,
    /// S45 `dispose()`.
    Dispose,
    /// The answer to the outstanding `preStep` request.
    PreStep(PreStepAnswer),
    /// The answer to the outstanding `step` request.
    Step(StepAnswer),
    /// The answer to the outstanding `turnStopping` request.
    TurnStopping(TurnStoppingAnswer),
}

/// The single key of an `"in"` value and its argument.
pub(super) fn one_key(input: &Value) -> (&String, &Value) {
    let obj = input.as_object().expect("input must be an object");
    assert_eq!(obj.len(), 1, "input must have exactly one key: {input}");
    obj.iter().next().expect("one key")
}

impl Input {
    /// Parse the key and argument of an `"in"` value.
    pub(super) fn parse(key: &str, arg: &Value) -> Input {
        match key {
            "send" => Input::Send {
                message: arg["message"].clone(),
                target: Target::parse(&arg["target"]),
                wakeup: arg["wakeup"].as_bool().expect("send.wakeup bool"),
            },
            // S16 presets.
            "followup" => Input::send(arg, Target::NextTurn, true),
            "steer" => Input::send(arg, Target::NextStep, true),
            "inject" => Input::send(arg, Target::NextStep, false),
            "remove" => Input::Remove(arg.as_str().expect("remove id").to_string()),
            "replace" => Input::Replace {
                id: arg["id"].as_str().expect("replace.id").to_string(),
                message: arg["message"].clone(),
            },
            "prepend" => Input::Prepend {
                target: Target::parse(&arg["target"]),
                message: arg["message"].clone(),
            },
            "clear" => Input::Clear,
            "cancel" => {
                let cause = arg["cause"].clone();
                assert!(cause.get("kind").is_some(), "cancel cause needs a kind");
                let keep_inbox = match arg.get("keepInbox") {
                    None => false,
                    Some(v) => v.as_bool().expect("keepInbox bool"),
                };
                Input::Cancel { cause, keep_inbox }
            }
            "maintenance" => match arg.as_str() {
                Some("begin") => Input::BeginMaintenance,
                Some("end") => Input::EndMaintenance,
                _ => panic!("bad maintenance input {arg}"),
            },
            "dispose" => Input::Dispose,
            "preStep" => Input::PreStep(if arg.as_str() == Some("reject") {
                PreStepAnswer::Reject
            } else if let Some(msgs) = arg.get("enter") {
                let msgs = msgs.as_array().expect("enter list").clone();
                for m in &msgs {
                    msg_id(m);
                }
                PreStepAnswer::Enter(msgs)
            } else if let Some(e) = arg.get("fail") {
                PreStepAnswer::Fail(e.clone())
            } else {
                panic!("bad preStep answer {arg}")
            }),
            "step" => Input::Step(match arg.as_str() {
                Some("completed") => StepAnswer::Completed,
                Some("max-tokens") => StepAnswer::MaxTokens,
                Some("continue") => StepAnswer::Continue,
                _ => StepAnswer::Fail(arg.get("fail").expect("bad step answer").clone()),
            }),
            "turnStopping" => Input::TurnStopping(if arg.as_str() == Some("done") {
                TurnStoppingAnswer::Done
            } else {
                TurnStoppingAnswer::Fail(arg.get("fail").expect("bad turnStopping answer").clone())
            }),
            other => panic!("unknown input kind {other:?}"),
        }
    }

    /// A preset (S16): the message with a fixed target and wakeup.
    fn send(message: &Value, target: Target, wakeup: bool) -> Input {
        Input::Send {
            message: message.clone(),
            target,
            wakeup,
        }
    }
}

/// A durable event output.
pub(super) fn event(ty: &str, data: Value) -> Value {
    json!({ "event": { "type": ty, "data": data } })
}

/// A notification output: its type beside the given fields.
pub(super) fn notify(ty: &str, fields: Value) -> Value {
    let mut obj = Map::new();
    obj.insert("type".to_string(), json!(ty));
    for (k, v) in fields.as_object().expect("notification fields") {
        obj.insert(k.clone(), v.clone());
    }
    json!({ "notify": Value::Object(obj) })
}

/// A request to the host.
pub(super) fn request(name: &str, data: Value) -> Value {
    json!({ "request": { name: data } })
}

/// An `agent/status` notification (S23).
pub(super) fn status(status: &str) -> Value {
    notify("agent/status", json!({ "status": status }))
}
