//! The JSON shapes of a refusal, for a binding that hands refusals on as values:
//! `{"rejected": KIND, "message": TEXT, …details}`, the kind the core's spelling
//! ([`Refused::kind`], [`Rejected::kind`]).

use coxswain_core::Rejected;
use coxswain_log::TooDeep;
use coxswain_session::Refused;
use serde_json::{json, Map, Value};

/// A refusal of kind `kind` with `message` and no details.
pub fn refusal(kind: &str, message: &str) -> Value {
    json!({ "rejected": kind, "message": message })
}

/// A rejection of the core: its kind, its text and its details (`id`; `expect` for
/// `turn-mismatch`; `target` and `maxPending` for `full`).
///
/// ```
/// use coxswain_binding_kit::shapes::rejection;
/// use coxswain_core::Rejected;
/// use serde_json::json;
///
/// assert_eq!(rejection(&Rejected::AlreadyPending("a".into())), json!({
///     "rejected": "already-pending", "message": "message `a` is already pending", "id": "a",
/// }));
/// ```
pub fn rejection(rejected: &Rejected) -> Value {
    let mut reply = Map::new();
    reply.insert("rejected".into(), rejected.kind().into());
    reply.insert("message".into(), rejected.to_string().into());
    match rejected {
        Rejected::AlreadyPending(id) | Rejected::AlreadyDelivered(id) | Rejected::Conflict(id) => {
            reply.insert("id".into(), id.as_str().into());
        }
        Rejected::TurnMismatch(expect) => {
            reply.insert("expect".into(), json!(expect));
        }
        Rejected::Full {
            target,
            max_pending,
        } => {
            reply.insert("target".into(), target.as_str().into());
            reply.insert("maxPending".into(), max_pending.get().into());
        }
        _ => {}
    }
    Value::Object(reply)
}

/// `too-deep` with the `TooDeep`'s own text and its `depth` and `max`.
pub fn too_deep(deep: &TooDeep) -> Value {
    json!({
        "rejected": "too-deep", "message": deep.to_string(), "depth": deep.depth, "max": deep.max,
    })
}

/// A refusal of the session: its kind ([`Refused::kind`]), its text and its details (`bytes`
/// and `max` of a size; `depth` and `max` of a nesting; `turn` and `step` of a closed step; a
/// rejection's own).
///
/// ```
/// use coxswain_binding_kit::shapes::refused;
/// use coxswain_session::Refused;
/// use serde_json::json;
///
/// assert_eq!(refused(&Refused::StepClosed { turn: 1, step: 2 }), json!({
///     "rejected": "step-closed", "message": "step 2 of turn 1 is not the running step",
///     "turn": 1, "step": 2,
/// }));
/// ```
pub fn refused(refused: &Refused) -> Value {
    let message = refused.to_string();
    match refused {
        Refused::Rejected(rejected) => rejection(rejected),
        Refused::IdTooLong { bytes, max, .. } | Refused::MessageTooLarge { bytes, max, .. } => {
            json!({ "rejected": refused.kind(), "message": message, "bytes": bytes, "max": max })
        }
        Refused::TooDeep(deep) => too_deep(deep),
        Refused::StepClosed { turn, step } => json!({
            "rejected": refused.kind(), "message": message, "turn": turn, "step": step,
        }),
        _ => refusal(refused.kind(), &message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::{Expect, Target};
    use std::num::NonZeroUsize;

    #[test]
    fn every_refusal_carries_its_kind_and_details() {
        let full = Rejected::Full {
            target: Target::NextStep,
            max_pending: NonZeroUsize::MIN,
        };
        assert_eq!(
            rejection(&full),
            json!({"rejected": "full", "message": full.to_string(),
                   "target": "next-step", "maxPending": 1})
        );
        let guard = Rejected::TurnMismatch(Expect::Turn(2));
        assert_eq!(rejection(&guard)["expect"], json!({"turn": 2}));
        assert_eq!(
            rejection(&Rejected::Busy),
            json!({"rejected": "busy", "message": Rejected::Busy.to_string()})
        );
        let long = Refused::IdTooLong {
            bytes: 300,
            max: 256,
        };
        assert_eq!(
            refused(&long),
            json!({"rejected": "id-too-long", "message": long.to_string(), "bytes": 300, "max": 256})
        );
        let deep = TooDeep { depth: 9, max: 8 };
        assert_eq!(
            refused(&Refused::TooDeep(deep)),
            json!({"rejected": "too-deep", "message": deep.to_string(), "depth": 9, "max": 8})
        );
        assert_eq!(
            refused(&Refused::Sealed),
            json!({"rejected": "sealed", "message": "a batch is being persisted"})
        );
        assert_eq!(refused(&Refused::Rejected(full.clone())), rejection(&full));
    }
}
