//! What the session admits before the core sees an input: messages and ids within the host's
//! size limits and within the log's nesting depth, host events only inside their own step. The
//! admission bound of S55 is the core's ([`Config::with_max_pending`](coxswain_core::Config)).

use coxswain_core::{Input, Message, MessageId, Outstanding, PreStepAnswer, Rejected};
use coxswain_log::{
    check_data, check_message, measure_message, HostEvent, Measure, TooDeep, MAX_MESSAGE_DEPTH,
};

/// The host's size limits on what a send may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The longest id, in UTF-8 bytes.
    pub max_id_bytes: usize,
    /// The largest message, in bytes of its JSON encoding.
    pub max_message_bytes: usize,
}

impl Limits {
    /// 256-byte ids and 1 MiB messages.
    pub const DEFAULT: Limits = Limits {
        max_id_bytes: 256,
        max_message_bytes: 1 << 20,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Why the session refused an input or a host event. A refused call changed nothing (S5).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The core rejected the input.
    #[error(transparent)]
    Rejected(#[from] Rejected),
    /// A message's id is longer than [`Limits::max_id_bytes`].
    #[error("the id is {bytes} bytes long; at most {max} are admitted")]
    IdTooLong {
        /// Its length in bytes.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A message's JSON encoding is larger than [`Limits::max_message_bytes`].
    #[error("message {} is {bytes} bytes as JSON; at most {max} are admitted", id.shown())]
    MessageTooLarge {
        /// The message.
        id: MessageId,
        /// Its size in bytes.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A value nests deeper than a log record can hold.
    #[error(transparent)]
    TooDeep(#[from] TooDeep),
    /// Host events for a step that is not the running one: they belong inside their step.
    #[error("step {step} of turn {turn} is not the running step")]
    StepClosed {
        /// The turn the events named.
        turn: u64,
        /// The step the events named.
        step: u64,
    },
    /// An answer to a request that is not the outstanding one (a late answer of a call the
    /// session abandoned, or of a turn that moved on: S4).
    #[error("{request:?} is not the outstanding request")]
    Stale {
        /// The request the answer was for.
        request: Outstanding,
    },
    /// A batch is being persisted: wait for [`Session::persisted`](crate::Session::persisted)
    /// or [`Session::failed`](crate::Session::failed).
    #[error("a batch is being persisted")]
    Sealed,
}

impl Refused {
    /// The refusal's kind, the one spelling every binding uses (common to all languages): the
    /// core's [`Rejected::kind`] for a rejection, else `id-too-long`, `message-too-large`,
    /// `too-deep`, `step-closed`, `stale` or `sealed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Refused::Rejected(rejected) => rejected.kind(),
            Refused::IdTooLong { .. } => "id-too-long",
            Refused::MessageTooLarge { .. } => "message-too-large",
            Refused::TooDeep(_) => "too-deep",
            Refused::StepClosed { .. } => "step-closed",
            Refused::Stale { .. } => "stale",
            Refused::Sealed => "sealed",
        }
    }
}

/// Checks every message an input carries.
pub(crate) fn admit(input: &Input, limits: Limits) -> Result<(), Refused> {
    match input {
        Input::Send { message, .. }
        | Input::Followup(message)
        | Input::Steer(message)
        | Input::Inject(message)
        | Input::Prepend { message, .. } => admit_message(message, limits),
        // Both ids of a replace, and the id a remove names, are held to the limit.
        Input::Replace { id, message } => {
            admit_id(id, limits)?;
            admit_message(message, limits)
        }
        Input::Remove(id) => admit_id(id, limits),
        Input::PreStep(PreStepAnswer::Enter(batch)) => batch
            .iter()
            .try_for_each(|message| check_message(message).map_err(Refused::from)),
        _ => Ok(()),
    }
}

fn admit_id(id: &MessageId, limits: Limits) -> Result<(), Refused> {
    let bytes = id.as_str().len();
    if bytes > limits.max_id_bytes {
        return Err(Refused::IdTooLong {
            bytes,
            max: limits.max_id_bytes,
        });
    }
    Ok(())
}

fn admit_message(message: &Message, limits: Limits) -> Result<(), Refused> {
    admit_id(message.id(), limits)?;
    // One walk gives both the size and the nesting: the log's encoder counting the bytes it
    // would write, without writing them (no serialisation, no allocation).
    let Measure { bytes, depth } = measure_message(message);
    if bytes > limits.max_message_bytes {
        return Err(Refused::MessageTooLarge {
            id: message.id().clone(),
            bytes,
            max: limits.max_message_bytes,
        });
    }
    if depth > MAX_MESSAGE_DEPTH {
        return Err(TooDeep {
            depth,
            max: MAX_MESSAGE_DEPTH,
        }
        .into());
    }
    Ok(())
}

/// Host events are admitted only inside the step they name, and only if they fit a record.
pub(crate) fn admit_events(
    outstanding: Option<Outstanding>,
    turn: u64,
    step: u64,
    events: &[HostEvent],
) -> Result<(), Refused> {
    if outstanding != Some(Outstanding::Step { turn, step }) {
        return Err(Refused::StepClosed { turn, step });
    }
    events
        .iter()
        .try_for_each(|event| check_data(event.data()).map_err(Refused::from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_and_messages_within_the_limits() {
        let limits = Limits {
            max_id_bytes: 4,
            max_message_bytes: 64,
        };
        let ok = Input::Followup(Message::user("m1", "hi").into());
        assert_eq!(admit(&ok, limits), Ok(()));
        let long = Input::Steer(Message::user("m12345", "hi").into());
        assert_eq!(
            admit(&long, limits),
            Err(Refused::IdTooLong { bytes: 6, max: 4 })
        );
        let big = Input::Inject(Message::user("m1", "x".repeat(64)).into());
        // {"id":"m1","content":"xx…","source":{"kind":"user"}}
        let bytes = measure_message(&Message::user("m1", "x".repeat(64))).bytes;
        assert_eq!(
            bytes,
            serde_json::to_vec(&Message::user("m1", "x".repeat(64)))
                .unwrap()
                .len()
        );
        assert_eq!(
            admit(&big, limits),
            Err(Refused::MessageTooLarge {
                id: "m1".into(),
                bytes,
                max: 64
            })
        );
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        let deep = Input::Followup(Message::user("m1", deep).into());
        let unbounded = Limits {
            max_id_bytes: 4,
            max_message_bytes: usize::MAX,
        };
        assert!(matches!(admit(&deep, unbounded), Err(Refused::TooDeep(_))));
        assert_eq!(
            admit(&deep, unbounded),
            Err(Refused::TooDeep(TooDeep {
                depth: 201,
                max: MAX_MESSAGE_DEPTH
            }))
        );
        // Escapes count as serde_json writes them: a control character is six bytes.
        let hostile = Message::user("m\"1", "\u{1}\n\\/🦀");
        let text = serde_json::to_vec(&hostile).unwrap();
        assert_eq!(text.len(), 66);
        let fits = Limits {
            max_id_bytes: 4,
            max_message_bytes: 66,
        };
        let input = Input::Followup(hostile.clone().into());
        assert_eq!(admit(&input, fits), Ok(()));
        let tight = Limits {
            max_message_bytes: 65,
            ..fits
        };
        assert_eq!(
            admit(&input, tight),
            Err(Refused::MessageTooLarge {
                id: "m\"1".into(),
                bytes: 66,
                max: 65
            })
        );
        // The ids a remove or a replace names are held to the limit too.
        let remove = Input::Remove("m12345".into());
        assert_eq!(
            admit(&remove, limits),
            Err(Refused::IdTooLong { bytes: 6, max: 4 })
        );
        let replace = Input::Replace {
            id: "m12345".into(),
            message: Message::user("m1", "hi").into(),
        };
        assert_eq!(
            admit(&replace, limits),
            Err(Refused::IdTooLong { bytes: 6, max: 4 })
        );
        assert_eq!(admit(&Input::Remove("m1".into()), limits), Ok(()));
    }

    #[test]
    fn host_events_only_inside_their_step() {
        let event = HostEvent::new("model/output", json!({"text": "hi"})).unwrap();
        let step = Some(Outstanding::Step { turn: 2, step: 1 });
        assert_eq!(
            admit_events(step, 2, 1, std::slice::from_ref(&event)),
            Ok(())
        );
        assert_eq!(
            admit_events(step, 2, 2, std::slice::from_ref(&event)),
            Err(Refused::StepClosed { turn: 2, step: 2 })
        );
        assert_eq!(
            admit_events(None, 2, 1, &[event]),
            Err(Refused::StepClosed { turn: 2, step: 1 })
        );
    }

    #[test]
    fn every_refusal_has_its_kind() {
        use coxswain_core::RequestKind;
        let deep = coxswain_log::TooDeep {
            depth: 200,
            max: 128,
        };
        let refusals = [
            Refused::Rejected(Rejected::Busy),
            Refused::IdTooLong {
                bytes: 300,
                max: 256,
            },
            Refused::MessageTooLarge {
                id: "a".into(),
                bytes: 9,
                max: 8,
            },
            Refused::TooDeep(deep),
            Refused::StepClosed { turn: 1, step: 2 },
            Refused::Stale {
                request: RequestKind::Step.outstanding(1, 1),
            },
            Refused::Sealed,
        ];
        let kinds = refusals.map(|refused| refused.kind());
        assert_eq!(
            kinds,
            [
                "busy",
                "id-too-long",
                "message-too-large",
                "too-deep",
                "step-closed",
                "stale",
                "sealed"
            ]
        );
        // A rejection's kind is the core's own.
        let rejected = Rejected::AlreadyPending("a".into());
        assert_eq!(Refused::from(rejected.clone()).kind(), rejected.kind());
    }
}
