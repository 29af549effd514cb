//! The wire: FORMAT.md `"in"` values parsed into [`Input`], `"out"` values built as JSON.
//!
//! A value that is not a FORMAT.md input is rejected [`MALFORMED`] before anything changes.

use serde_json::{json, Map, Value};

/// The rejection kind of a value that is not a FORMAT.md input (no SPEC rule: the core's typed
/// inputs cannot be malformed, so the spec's callers never see it for a core's input).
pub const MALFORMED: &str = "malformed-input";

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
    fn parse(v: &Value) -> Result<Target, &'static str> {
        match v.as_str() {
            Some("next-turn") => Ok(Target::NextTurn),
            Some("next-step") => Ok(Target::NextStep),
            _ => Err(MALFORMED),
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Target::NextTurn => "next-turn",
            Target::NextStep => "next-step",
        }
    }
}

/// The id of a message value (S6). Every message the spec holds was checked by [`message`] when
/// its input was parsed (or by the restore's validation, S46), so the empty fallback is never
/// taken.
pub(super) fn msg_id(m: &Value) -> &str {
    m.get("id").and_then(Value::as_str).unwrap_or_default()
}

/// A message value (S6): an object with a string `id`.
fn message(m: &Value) -> Result<Value, &'static str> {
    match m.get("id") {
        Some(Value::String(_)) => Ok(m.clone()),
        _ => Err(MALFORMED),
    }
}

/// A string argument.
fn string(v: &Value) -> Result<String, &'static str> {
    v.as_str().map(str::to_string).ok_or(MALFORMED)
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

/// The expected-turn guard a `send` may carry (S54), as FORMAT.md spells it: `{"turn": n}` or
/// `{"idleAfter": n}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expect {
    /// `{"turn": n}`: only while turn `n` is open and not cancelled.
    Turn(u64),
    /// `{"idleAfter": n}`: only while idle with `lastTurn == n`.
    IdleAfter(u64),
}

impl Expect {
    /// `expect` of a `send` (S54): absent is no guard; anything but an object with exactly one
    /// of the keys `turn` / `idleAfter` whose value is a non-negative integer (a turn number as
    /// written: `1.0`, `-1` and `"1"` are not) is [`MALFORMED`].
    fn parse(v: Option<&Value>) -> Result<Option<Expect>, &'static str> {
        let Some(v) = v else {
            return Ok(None);
        };
        let obj = v.as_object().filter(|o| o.len() == 1).ok_or(MALFORMED)?;
        let (key, n) = obj.iter().next().ok_or(MALFORMED)?;
        let n = n.as_u64().ok_or(MALFORMED)?;
        match key.as_str() {
            "turn" => Ok(Some(Expect::Turn(n))),
            "idleAfter" => Ok(Some(Expect::IdleAfter(n))),
            _ => Err(MALFORMED),
        }
    }
}

/// A host answer to `turnStopping` (S33).
pub(super) enum TurnStoppingAnswer {
    Done,
    Fail(Value),
}

/// One input, parsed.
pub(super) enum Input {
    /// S16 `send`, and the presets `followup`, `steer`, `inject` (which carry no guard, S54).
    Send {
        message: Value,
        target: Target,
        wakeup: bool,
        expect: Option<Expect>,
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
    /// S57 `resume`.
    Resume,
    /// The answer to the outstanding `preStep` request.
    PreStep(PreStepAnswer),
    /// The answer to the outstanding `step` request.
    Step(StepAnswer),
    /// The answer to the outstanding `turnStopping` request.
    TurnStopping(TurnStoppingAnswer),
}

/// The single key of an `"in"` value and its argument.
pub(super) fn one_key(input: &Value) -> Result<(&String, &Value), &'static str> {
    match input.as_object() {
        Some(obj) if obj.len() == 1 => obj.iter().next().ok_or(MALFORMED),
        _ => Err(MALFORMED),
    }
}

impl Input {
    /// Parse the key and argument of an `"in"` value.
    pub(super) fn parse(key: &str, arg: &Value) -> Result<Input, &'static str> {
        Ok(match key {
            "send" => Input::Send {
                message: message(&arg["message"])?,
                target: Target::parse(&arg["target"])?,
                wakeup: arg["wakeup"].as_bool().ok_or(MALFORMED)?,
                expect: Expect::parse(arg.get("expect"))?,
            },
            // S16 presets.
            "followup" => Input::send(arg, Target::NextTurn, true)?,
            "steer" => Input::send(arg, Target::NextStep, true)?,
            "inject" => Input::send(arg, Target::NextStep, false)?,
            "remove" => Input::Remove(string(arg)?),
            "replace" => Input::Replace {
                id: string(&arg["id"])?,
                message: message(&arg["message"])?,
            },
            "prepend" => Input::Prepend {
                target: Target::parse(&arg["target"])?,
                message: message(&arg["message"])?,
            },
            "clear" => Input::Clear,
            "cancel" => {
                let cause = arg["cause"].clone();
                if cause.get("kind").is_none() {
                    return Err(MALFORMED); // S36: a cause has a kind
                }
                let keep_inbox = match arg.get("keepInbox") {
                    None => false,
                    Some(v) => v.as_bool().ok_or(MALFORMED)?,
                };
                Input::Cancel { cause, keep_inbox }
            }
            "maintenance" => match arg.as_str() {
                Some("begin") => Input::BeginMaintenance,
                Some("end") => Input::EndMaintenance,
                _ => return Err(MALFORMED),
            },
            "dispose" => Input::Dispose,
            "resume" => Input::Resume,
            "preStep" => Input::PreStep(if arg.as_str() == Some("reject") {
                PreStepAnswer::Reject
            } else if let Some(msgs) = arg.get("enter") {
                let msgs = msgs.as_array().ok_or(MALFORMED)?;
                PreStepAnswer::Enter(msgs.iter().map(message).collect::<Result<_, _>>()?)
            } else if let Some(e) = arg.get("fail") {
                PreStepAnswer::Fail(e.clone())
            } else {
                return Err(MALFORMED);
            }),
            "step" => Input::Step(match arg.as_str() {
                Some("completed") => StepAnswer::Completed,
                Some("max-tokens") => StepAnswer::MaxTokens,
                Some("continue") => StepAnswer::Continue,
                _ => StepAnswer::Fail(arg.get("fail").ok_or(MALFORMED)?.clone()),
            }),
            "turnStopping" => Input::TurnStopping(if arg.as_str() == Some("done") {
                TurnStoppingAnswer::Done
            } else {
                TurnStoppingAnswer::Fail(arg.get("fail").ok_or(MALFORMED)?.clone())
            }),
            _ => return Err(MALFORMED),
        })
    }

    /// A preset (S16): the message with a fixed target and wakeup, and no guard (S54).
    fn send(m: &Value, target: Target, wakeup: bool) -> Result<Input, &'static str> {
        Ok(Input::Send {
            message: message(m)?,
            target,
            wakeup,
            expect: None,
        })
    }
}
/// A durable event output.
pub(super) fn event(ty: &str, data: Value) -> Value {
    json!({ "event": { "type": ty, "data": data } })
}

/// A notification output: its type beside the given fields (an object).
pub(super) fn notify(ty: &str, fields: Value) -> Value {
    let mut obj = Map::new();
    obj.insert("type".to_string(), json!(ty));
    if let Value::Object(fields) = fields {
        obj.extend(fields);
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
