//! The EVENTs an action can wait for (`"when": EVENT`): things the timeline saw happen, named in
//! words. Each is parsed strictly and prints back as it was written.

use std::fmt;
use std::str::FromStr;

use coxswain_core::Event;

/// Something that happened in the run, or that an action waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cue {
    /// `turn T starts`: the `turn/start` record.
    TurnStarts(u64),
    /// `turn T ends`: the `turn/end` record (crash repair's closer included).
    TurnEnds(u64),
    /// `step T.S starts`: the `step/start` record.
    StepStarts(u64, u64),
    /// `step T.S ends`: the `step/end` record.
    StepEnds(u64, u64),
    /// `ID is claimed`: the `claimed` notification of message ID.
    Claimed(String),
    /// `TYPE in step T.S`: a host event of type TYPE recorded inside step T.S.
    Recorded {
        /// The host event's type.
        kind: String,
        /// Its turn.
        turn: u64,
        /// Its step.
        step: u64,
    },
}

impl Cue {
    /// The cue a machine event is, if any.
    pub(crate) fn of_event(event: &Event) -> Option<Cue> {
        match event {
            Event::TurnStart { turn } => Some(Cue::TurnStarts(*turn)),
            Event::TurnEnd { turn, .. } => Some(Cue::TurnEnds(*turn)),
            Event::StepStart { turn, step } => Some(Cue::StepStarts(*turn, *step)),
            Event::StepEnd { turn, step } => Some(Cue::StepEnds(*turn, *step)),
            Event::Spliced(_) | Event::UserMessage(_) => None,
        }
    }
}

const GRAMMAR: &str = "`turn T starts`, `turn T ends`, `step T.S starts`, `step T.S ends`, \
                       `ID is claimed` or `TYPE in step T.S`";

impl FromStr for Cue {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let unknown = || format!("unknown event `{text}`: expected {GRAMMAR}");
        let words: Vec<&str> = text.split(' ').collect();
        let cue = match words.as_slice() {
            ["turn", turn, "starts"] => Cue::TurnStarts(number(turn).ok_or_else(unknown)?),
            ["turn", turn, "ends"] => Cue::TurnEnds(number(turn).ok_or_else(unknown)?),
            ["step", key, "starts"] => {
                let (turn, step) = step_key(key).ok_or_else(unknown)?;
                Cue::StepStarts(turn, step)
            }
            ["step", key, "ends"] => {
                let (turn, step) = step_key(key).ok_or_else(unknown)?;
                Cue::StepEnds(turn, step)
            }
            [id, "is", "claimed"] if !id.is_empty() => Cue::Claimed((*id).to_owned()),
            [kind, "in", "step", key] if !kind.is_empty() => {
                let (turn, step) = step_key(key).ok_or_else(unknown)?;
                if Event::TYPES.contains(kind) {
                    return Err(format!(
                        "event `{text}`: `{kind}` is the machine's own record type, not a host \
                         event; use `turn …`/`step …` events instead"
                    ));
                }
                Cue::Recorded {
                    kind: (*kind).to_owned(),
                    turn,
                    step,
                }
            }
            _ => return Err(unknown()),
        };
        Ok(cue)
    }
}

impl fmt::Display for Cue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cue::TurnStarts(turn) => write!(f, "turn {turn} starts"),
            Cue::TurnEnds(turn) => write!(f, "turn {turn} ends"),
            Cue::StepStarts(turn, step) => write!(f, "step {turn}.{step} starts"),
            Cue::StepEnds(turn, step) => write!(f, "step {turn}.{step} ends"),
            Cue::Claimed(id) => write!(f, "{id} is claimed"),
            Cue::Recorded { kind, turn, step } => write!(f, "{kind} in step {turn}.{step}"),
        }
    }
}

/// A turn or step number: digits only.
fn number(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `T.S`, as in the host's step keys.
pub(crate) fn step_key(text: &str) -> Option<(u64, u64)> {
    let (turn, step) = text.split_once('.')?;
    Some((number(turn)?, number(step)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_prints_back_as_written() {
        for text in [
            "turn 2 starts",
            "turn 12 ends",
            "step 2.1 starts",
            "step 1.3 ends",
            "m1 is claimed",
            "tool/call in step 4.1",
        ] {
            let cue: Cue = text.parse().unwrap();
            assert_eq!(cue.to_string(), text);
        }
        assert_eq!("step 2.1 starts".parse::<Cue>(), Ok(Cue::StepStarts(2, 1)));
    }

    #[test]
    fn unknown_events_are_errors() {
        let expected = "expected `turn T starts`, `turn T ends`, `step T.S starts`, \
                        `step T.S ends`, `ID is claimed` or `TYPE in step T.S`";
        for text in [
            "turn 1 begins",
            "step 2 starts",
            "step 2.x ends",
            "turn -1 starts",
            "turn  1 starts",
            "",
            "tool/call in step 4",
        ] {
            assert_eq!(
                text.parse::<Cue>(),
                Err(format!("unknown event `{text}`: {expected}"))
            );
        }
        assert_eq!(
            "turn/start in step 1.1".parse::<Cue>(),
            Err(
                "event `turn/start in step 1.1`: `turn/start` is the machine's own record type, \
                 not a host event; use `turn …`/`step …` events instead"
                    .to_owned()
            )
        );
    }
}
