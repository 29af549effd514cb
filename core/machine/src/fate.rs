//! What became of a message (SPEC §13, S58): the answer of [`Machine::fate`](crate::Machine::fate).

use serde_json::{json, Map, Value};

use crate::input::{Target, UnknownName};
use crate::output::TurnEndReason;

/// The `kind` of a turn-end reason (S36), without its details: what a fate record keeps of the
/// end of the turn that claimed a message (S58).
///
/// ```
/// use coxswain_core::{TurnEndKind, TurnEndReason};
///
/// assert_eq!(TurnEndReason::Interrupted.end_kind(), TurnEndKind::Interrupted);
/// assert_eq!(TurnEndKind::MaxTokens.as_str(), "max-tokens");
/// assert_eq!("blocked".parse(), Ok(TurnEndKind::Blocked));
/// let unknown = "later".parse::<TurnEndKind>().unwrap_err();
/// assert_eq!(unknown.to_string(), "unknown turn-end kind `later`");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TurnEndKind {
    /// `completed`.
    Completed,
    /// `max-tokens`.
    MaxTokens,
    /// `blocked`.
    Blocked,
    /// `aborted`.
    Aborted,
    /// `error`.
    Error,
    /// `interrupted` (crash repair's, S50).
    Interrupted,
}

impl TurnEndKind {
    /// Every kind, in S36's order.
    ///
    /// ```
    /// use coxswain_core::TurnEndKind;
    ///
    /// let words = TurnEndKind::ALL.map(TurnEndKind::as_str);
    /// assert_eq!(words, ["completed", "max-tokens", "blocked", "aborted", "error", "interrupted"]);
    /// ```
    pub const ALL: [TurnEndKind; 6] = [
        TurnEndKind::Completed,
        TurnEndKind::MaxTokens,
        TurnEndKind::Blocked,
        TurnEndKind::Aborted,
        TurnEndKind::Error,
        TurnEndKind::Interrupted,
    ];

    /// The kind as the wire spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            TurnEndKind::Completed => "completed",
            TurnEndKind::MaxTokens => "max-tokens",
            TurnEndKind::Blocked => "blocked",
            TurnEndKind::Aborted => "aborted",
            TurnEndKind::Error => "error",
            TurnEndKind::Interrupted => "interrupted",
        }
    }
}

impl std::str::FromStr for TurnEndKind {
    type Err = UnknownName;

    /// One of the six kinds the wire spells; anything else is an error naming it.
    fn from_str(kind: &str) -> Result<Self, UnknownName> {
        TurnEndKind::ALL
            .into_iter()
            .find(|end| end.as_str() == kind)
            .ok_or_else(|| UnknownName::new("turn-end kind", kind))
    }
}

impl std::fmt::Display for TurnEndKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TurnEndReason {
    /// The reason's `kind` (S36, S58).
    ///
    /// ```
    /// use coxswain_core::{TurnEndKind, TurnEndReason};
    ///
    /// assert_eq!(TurnEndReason::MaxTokens.end_kind(), TurnEndKind::MaxTokens);
    /// assert_eq!(TurnEndReason::MaxTokens.end_kind().as_str(), "max-tokens");
    /// ```
    pub fn end_kind(&self) -> TurnEndKind {
        match self {
            TurnEndReason::Completed => TurnEndKind::Completed,
            TurnEndReason::MaxTokens => TurnEndKind::MaxTokens,
            TurnEndReason::Blocked => TurnEndKind::Blocked,
            TurnEndReason::Aborted { .. } => TurnEndKind::Aborted,
            TurnEndReason::Error { .. } => TurnEndKind::Error,
            TurnEndReason::Interrupted => TurnEndKind::Interrupted,
        }
    }
}

/// What became of a message id (S58): the answer of [`Machine::fate`](crate::Machine::fate).
///
/// ```
/// use coxswain_core::{Config, Fate, Machine, Message, MessageId, Target, TurnEndKind};
/// use coxswain_core::{PreStepAnswer, StepAnswer, TurnStoppingAnswer};
///
/// let mut machine = Machine::with_config(Config::new().with_unbounded_delivery_memory());
/// let id = MessageId::new("m1");
/// assert_eq!(machine.fate(&id), Fate::Unknown);
/// machine.inject(Message::user("m1", "hi"))?.persisted().for_each(drop);
/// assert_eq!(machine.fate(&id), Fate::Pending { target: Target::NextStep });
/// machine.followup(Message::user("m2", "go"))?.persisted().for_each(drop); // turn 1 claims both
/// assert_eq!(machine.fate(&id), Fate::Claimed { turn: 1, step: None, end: None });
/// let batch = [Message::user("m1", "hi")].into_iter().collect();
/// machine.answer_pre_step(PreStepAnswer::Enter(batch))?.persisted().for_each(drop);
/// machine.answer_step(StepAnswer::Completed)?.persisted().for_each(drop);
/// machine.answer_turn_stopping(TurnStoppingAnswer::Done)?.persisted().for_each(drop);
/// let end = Some(TurnEndKind::Completed);
/// assert_eq!(machine.fate(&id), Fate::Claimed { turn: 1, step: Some(1), end });
/// // m2 was claimed but dropped by the host: no step.
/// assert_eq!(machine.fate(&MessageId::new("m2")), Fate::Claimed { turn: 1, step: None, end });
/// assert_eq!(machine.fate(&id).to_json(), serde_json::json!({"claimed": {"turn": 1, "step": 1, "end": "completed"}}));
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fate {
    /// The id is pending in `target` (S9).
    Pending {
        /// The list it is pending in.
        target: Target,
    },
    /// It left the lists by an ordinary removal (S12), and the memory still holds it.
    Discarded,
    /// It left the lists by a claim of turn `turn` (S28), and the memory still holds it.
    Claimed {
        /// The claiming turn.
        turn: u64,
        /// The first step of that turn, after the claim, whose `user/message` carried the id;
        /// `None` while none has (S29: the host may drop or rewrite a claimed message).
        step: Option<u64>,
        /// The kind of that turn's `turn/end` reason; `None` while the turn is open.
        end: Option<TurnEndKind>,
    },
    /// Neither pending nor held: never seen, or forgotten (capacity, S51).
    Unknown,
}

impl Fate {
    /// The fate as the conformance format spells it (FORMAT.md's `F`): `{"pending": T}`,
    /// `"discarded"`, `"unknown"` or `{"claimed": {"turn": n, "step": n, "end": K}}` with
    /// `step` and `end` omitted while absent.
    pub fn to_json(&self) -> Value {
        match self {
            Fate::Pending { target } => json!({ "pending": target.as_str() }),
            Fate::Discarded => json!("discarded"),
            Fate::Unknown => json!("unknown"),
            Fate::Claimed { turn, step, end } => {
                let mut claimed = Map::new();
                claimed.insert("turn".into(), json!(turn));
                if let Some(step) = step {
                    claimed.insert("step".into(), json!(step));
                }
                if let Some(end) = end {
                    claimed.insert("end".into(), json!(end.as_str()));
                }
                json!({ "claimed": claimed })
            }
        }
    }

    /// Reads FORMAT.md's `F` back ([`to_json`](Fate::to_json)'s inverse); `None` for anything
    /// else (an unknown key, a non-integer turn or step, an unknown end kind).
    ///
    /// ```
    /// use coxswain_core::{Fate, TurnEndKind};
    /// use serde_json::json;
    ///
    /// let fate = Fate::Claimed { turn: 2, step: None, end: Some(TurnEndKind::Interrupted) };
    /// assert_eq!(fate.to_json(), json!({ "claimed": { "turn": 2, "end": "interrupted" } }));
    /// assert_eq!(Fate::from_json(&fate.to_json()), Some(fate));
    /// assert_eq!(Fate::from_json(&json!("gone")), None);
    /// ```
    pub fn from_json(value: &Value) -> Option<Fate> {
        match value {
            Value::String(word) => match word.as_str() {
                "discarded" => Some(Fate::Discarded),
                "unknown" => Some(Fate::Unknown),
                _ => None,
            },
            Value::Object(map) if map.len() == 1 => {
                if let Some(target) = map.get("pending") {
                    let target = target.as_str()?.parse().ok()?;
                    return Some(Fate::Pending { target });
                }
                let claimed = map.get("claimed")?.as_object()?;
                if claimed
                    .keys()
                    .any(|key| !matches!(key.as_str(), "turn" | "step" | "end"))
                {
                    return None;
                }
                let turn = claimed.get("turn")?.as_u64()?;
                let step = match claimed.get("step") {
                    None => None,
                    Some(step) => Some(step.as_u64()?),
                };
                let end = match claimed.get("end") {
                    None => None,
                    Some(end) => Some(end.as_str()?.parse().ok()?),
                };
                Some(Fate::Claimed { turn, step, end })
            }
            _ => None,
        }
    }
}

impl serde::Serialize for Fate {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s58_fates_round_trip_through_the_format_shape() {
        let fates = [
            (
                Fate::Pending {
                    target: Target::NextTurn,
                },
                json!({"pending": "next-turn"}),
            ),
            (Fate::Discarded, json!("discarded")),
            (Fate::Unknown, json!("unknown")),
            (
                Fate::Claimed {
                    turn: 3,
                    step: None,
                    end: None,
                },
                json!({"claimed": {"turn": 3}}),
            ),
            (
                Fate::Claimed {
                    turn: 3,
                    step: Some(2),
                    end: Some(TurnEndKind::Interrupted),
                },
                json!({"claimed": {"turn": 3, "step": 2, "end": "interrupted"}}),
            ),
        ];
        for (fate, json) in fates {
            assert_eq!(fate.to_json(), json);
            assert_eq!(Fate::from_json(&json), Some(fate));
            assert_eq!(serde_json::to_value(fate).ok(), Some(json));
        }
        for bad in [
            json!("claimed"),
            json!({"claimed": {"turn": -1}}),
            json!({"claimed": {"turn": 1, "end": "later"}}),
            json!({"claimed": {"turn": 1, "at": 2}}),
            json!({"pending": "elsewhere"}),
            json!({"pending": "next-turn", "claimed": {}}),
        ] {
            assert_eq!(Fate::from_json(&bad), None, "{bad}");
        }
    }

    #[test]
    fn turn_end_kinds_parse_back_and_unknown_kinds_are_errors() {
        let words: Vec<_> = TurnEndKind::ALL.map(TurnEndKind::as_str).to_vec();
        assert_eq!(
            words,
            [
                "completed",
                "max-tokens",
                "blocked",
                "aborted",
                "error",
                "interrupted"
            ]
        );
        for kind in TurnEndKind::ALL {
            assert_eq!(kind.as_str().parse::<TurnEndKind>(), Ok(kind));
        }
        let unknown = "Completed".parse::<TurnEndKind>().unwrap_err();
        assert_eq!(unknown.to_string(), "unknown turn-end kind `Completed`");
    }
}
