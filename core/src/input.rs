//! Inputs: deliveries, queue edits, cancellation, maintenance, disposal and the host's answers.
//!
//! Every input has its own method on [`Machine`](crate::Machine); [`Input`] is the same set as a
//! value (one variant per input), for hosts that record or replay inputs. It serializes exactly as
//! an `"in"` line of the conformance trace format (`conformance/FORMAT.md`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::message::{Batch, MessageId, SharedMessage};

/// Which pending list a delivery joins (S16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// NT: queued prompts, one claimed per turn.
    NextTurn,
    /// NS: steering and injected context, all claimed at every step boundary.
    NextStep,
}

impl Target {
    /// The wire name: `next-turn` or `next-step`.
    pub fn as_str(self) -> &'static str {
        match self {
            Target::NextTurn => "next-turn",
            Target::NextStep => "next-step",
        }
    }
}

/// Why an activity is cancelled (S36).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CancelCause {
    /// The user stopped it.
    User,
    /// A parent agent stopped it.
    Parent,
    /// A hook stopped it.
    Hook {
        /// The hook's explanation.
        reason: Arc<str>,
    },
    /// The agent is being disposed. As the cause of an ordinary `cancel` it does not dispose the
    /// machine, but nothing latches under it (S24).
    Disposed,
}

/// A failure the host reports (S29, S32, S33): `{ message, code }`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// Human-readable description.
    pub message: Arc<str>,
    /// Machine-readable code.
    pub code: Arc<str>,
}

impl ErrorInfo {
    /// An error with a message and a code.
    pub fn new(message: impl Into<Arc<str>>, code: impl Into<Arc<str>>) -> Self {
        ErrorInfo {
            message: message.into(),
            code: code.into(),
        }
    }
}

/// The host's answer to a `preStep` request (S29).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PreStepAnswer {
    /// Run the step with exactly these messages (the host may keep, rewrite, drop or add).
    Enter(Batch),
    /// The step must not run: the turn ends `blocked`.
    Reject,
    /// The hook or prompt assembly failed (error path, S38).
    Fail(ErrorInfo),
}

/// The host's answer to a `step` request (S32).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepAnswer {
    /// The model stopped on its own (terminal).
    Completed,
    /// The model hit the output limit; truncated tool calls did not run (terminal).
    MaxTokens,
    /// Tools ran and the turn goes on.
    Continue,
    /// The step failed (error path, S38).
    Fail(ErrorInfo),
}

/// The host's answer to a `turnStopping` request (S33).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TurnStoppingAnswer {
    /// The turn-stopping hooks ran.
    Done,
    /// A turn-stopping hook failed (error path, S38).
    Fail(ErrorInfo),
}

/// The two maintenance inputs (S43).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MaintenanceInput {
    /// `begin_maintenance()`.
    Begin,
    /// `end_maintenance()`.
    End,
}

/// One input to the machine, as a value. [`Machine::handle`](crate::Machine::handle) applies it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum Input {
    /// `send(message, target, wakeup)` (S16).
    Send {
        /// The message.
        message: SharedMessage,
        /// The list it joins (unless retargeted, S18).
        target: Target,
        /// Whether it makes the model run (S19).
        wakeup: bool,
    },
    /// `send(message, next-turn, true)`.
    Followup(SharedMessage),
    /// `send(message, next-step, true)`.
    Steer(SharedMessage),
    /// `send(message, next-step, false)`.
    Inject(SharedMessage),
    /// Remove a pending message by id (S15).
    Remove(MessageId),
    /// Replace a pending message by id (S15).
    Replace {
        /// The pending message to replace.
        id: MessageId,
        /// Its replacement.
        message: SharedMessage,
    },
    /// Put a quiet message first in a list (S15).
    Prepend {
        /// The list.
        target: Target,
        /// The message.
        message: SharedMessage,
    },
    /// Discard everything pending (S15).
    Clear {},
    /// Cancel the current activity (S39).
    Cancel {
        /// The cause.
        cause: CancelCause,
        /// Keep the pending lists (and the wake latch) as they are.
        #[serde(default)]
        keep_inbox: bool,
    },
    /// Begin or end a maintenance job (S43).
    Maintenance(MaintenanceInput),
    /// Dispose the machine (S45).
    Dispose {},
    /// Answer the outstanding `preStep` request.
    PreStep(PreStepAnswer),
    /// Answer the outstanding `step` request.
    Step(StepAnswer),
    /// Answer the outstanding `turnStopping` request.
    TurnStopping(TurnStoppingAnswer),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use serde_json::json;

    fn round_trip(input: Input, wire: serde_json::Value) {
        assert_eq!(serde_json::to_value(&input).unwrap(), wire);
        assert_eq!(serde_json::from_value::<Input>(wire).unwrap(), input);
    }

    #[test]
    fn inputs_serialize_as_format_md_in_lines() {
        let m = Arc::new(Message::user("a", "hi"));
        let mj = json!({"id": "a", "source": {"kind": "user"}, "content": "hi"});
        round_trip(
            Input::Send {
                message: m.clone(),
                target: Target::NextTurn,
                wakeup: false,
            },
            json!({"send": {"message": mj, "target": "next-turn", "wakeup": false}}),
        );
        round_trip(Input::Followup(m.clone()), json!({"followup": mj}));
        round_trip(Input::Steer(m.clone()), json!({"steer": mj}));
        round_trip(Input::Inject(m.clone()), json!({"inject": mj}));
        round_trip(Input::Remove("a".into()), json!({"remove": "a"}));
        round_trip(
            Input::Replace {
                id: "a".into(),
                message: m.clone(),
            },
            json!({"replace": {"id": "a", "message": mj}}),
        );
        round_trip(
            Input::Prepend {
                target: Target::NextStep,
                message: m.clone(),
            },
            json!({"prepend": {"target": "next-step", "message": mj}}),
        );
        round_trip(Input::Clear {}, json!({"clear": {}}));
        round_trip(
            Input::Cancel {
                cause: CancelCause::Hook { reason: "r".into() },
                keep_inbox: true,
            },
            json!({"cancel": {"cause": {"kind": "hook", "reason": "r"}, "keepInbox": true}}),
        );
        round_trip(
            Input::Maintenance(MaintenanceInput::Begin),
            json!({"maintenance": "begin"}),
        );
        round_trip(Input::Dispose {}, json!({"dispose": {}}));
        round_trip(
            Input::PreStep(PreStepAnswer::Enter([m.clone()].into_iter().collect())),
            json!({"preStep": {"enter": [mj]}}),
        );
        round_trip(
            Input::PreStep(PreStepAnswer::Reject),
            json!({"preStep": "reject"}),
        );
        round_trip(
            Input::PreStep(PreStepAnswer::Fail(ErrorInfo::new("m", "c"))),
            json!({"preStep": {"fail": {"message": "m", "code": "c"}}}),
        );
        round_trip(
            Input::Step(StepAnswer::MaxTokens),
            json!({"step": "max-tokens"}),
        );
        round_trip(
            Input::Step(StepAnswer::Continue),
            json!({"step": "continue"}),
        );
        round_trip(
            Input::TurnStopping(TurnStoppingAnswer::Done),
            json!({"turnStopping": "done"}),
        );
    }

    #[test]
    fn s39_keep_inbox_defaults_to_false() {
        let input: Input =
            serde_json::from_value(json!({"cancel": {"cause": {"kind": "user"}}})).unwrap();
        assert_eq!(
            input,
            Input::Cancel {
                cause: CancelCause::User,
                keep_inbox: false
            }
        );
    }
}
