//! Crash repair (S50) and restore (S46–S48) of a log read back from storage.
//!
//! [`repair`] feeds every complete record through the [`Auditor`] (so a log that breaks I1, I2,
//! I4, I5 or the splice rules anywhere is rejected, naming its line), computes the closers an open
//! final turn needs (`step/end` if a step is open, then `turn/end {kind: "interrupted"}`), and
//! restores the machine from the log with those closers appended. The caller appends the closers
//! to the stored log before it appends anything else. The torn tail is the reader's business
//! ([`parse`](crate::parse) leaves it out); nothing else is ever dropped or rewritten.

use coxswain_core::{Event, InvalidLog, Machine};

use crate::audit::{Auditor, Violation};
use crate::jsonl::Record;

/// A log repaired and restored.
#[derive(Clone, Debug)]
pub struct Repaired {
    /// The machine restored from the log and its closers: idle, items parked (S48).
    pub machine: Machine,
    /// What the stored log needs appended to be balanced (empty if it was).
    pub closers: Vec<Event>,
    /// The turn the crash interrupted, if the log ended inside one.
    pub interrupted: Option<u64>,
    /// The number of records read.
    pub records: usize,
}

/// A log that repair cannot fix: it is corrupt before its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RepairError {
    /// A record breaks a rule of the log (I1, I2, I4, I5, the splice rules, S46).
    #[error("line {line}: {}: {}", .violation.rule, .violation.detail)]
    Corrupt {
        /// The 1-based line of the offending record.
        line: usize,
        /// The rule it breaks.
        violation: Violation,
    },
    /// The core refused the audited log (an auditor and core disagreement: a bug).
    #[error("line {line}: {error}")]
    Restore {
        /// The 1-based line of the offending record (past the end for a closer).
        line: usize,
        /// The core's error.
        error: InvalidLog,
    },
}

impl RepairError {
    /// The 1-based line of the offending record.
    pub fn line(&self) -> usize {
        match self {
            RepairError::Corrupt { line, .. } | RepairError::Restore { line, .. } => *line,
        }
    }
}

/// Audits `records`, computes the closers of an open final turn, and restores the machine from
/// the log closed by them (S46–S50).
pub fn repair(records: &[Record]) -> Result<Repaired, RepairError> {
    let line_of = |index: usize| {
        records
            .get(index)
            .map_or_else(|| records.last().map_or(0, |r| r.line) + 1, |r| r.line)
    };
    let mut auditor = Auditor::new();
    for record in records {
        auditor
            .push_json(&record.event)
            .map_err(|violation| RepairError::Corrupt {
                line: line_of(violation.index),
                violation,
            })?;
    }
    let interrupted = auditor.open_turn();
    let closers = auditor.closers();
    for closer in &closers {
        auditor
            .push_event(closer)
            .map_err(|violation| RepairError::Corrupt {
                line: line_of(violation.index),
                violation,
            })?;
    }
    let machine = auditor.restore().map_err(|error| RepairError::Restore {
        line: line_of(error.index),
        error,
    })?;
    Ok(Repaired {
        machine,
        closers,
        interrupted,
        records: records.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Rule;
    use crate::jsonl::{encode, parse, Entry};
    use coxswain_core::{
        Message, Output, PreStepAnswer, StepAnswer, Target, TurnEndReason, TurnStoppingAnswer,
    };
    use serde_json::json;

    /// A session's log, one line per event.
    fn session_log() -> Vec<u8> {
        let mut machine = Machine::new();
        let mut bytes = Vec::new();
        let mut seq = 1;
        let mut drain = |machine: &mut Machine, bytes: &mut Vec<u8>| {
            while let Some(output) = machine.poll_output() {
                if let Output::Event(event) = output {
                    encode(seq, &Entry::Machine(event), bytes).unwrap();
                    seq += 1;
                }
            }
        };
        machine.inject(Message::user("c", "ctx")).unwrap();
        machine.followup(Message::user("a", "a")).unwrap();
        machine.followup(Message::user("b", "b")).unwrap();
        drain(&mut machine, &mut bytes);
        machine
            .answer_pre_step(PreStepAnswer::Enter(
                [Message::user("a", "a")].into_iter().collect(),
            ))
            .unwrap();
        machine.answer_step(StepAnswer::Completed).unwrap();
        machine
            .answer_turn_stopping(TurnStoppingAnswer::Done)
            .unwrap();
        machine
            .answer_pre_step(PreStepAnswer::Enter(
                [Message::user("b", "b")].into_iter().collect(),
            ))
            .unwrap();
        drain(&mut machine, &mut bytes);
        bytes
    }

    #[test]
    fn s50_an_open_step_is_closed_then_the_turn_interrupted() {
        let parsed = parse(&session_log()).unwrap();
        let repaired = repair(&parsed.records).unwrap();
        assert_eq!(repaired.interrupted, Some(2));
        assert_eq!(
            repaired.closers,
            vec![
                Event::StepEnd { turn: 2, step: 1 },
                Event::TurnEnd {
                    turn: 2,
                    reason: TurnEndReason::Interrupted
                }
            ]
        );
        assert_eq!(repaired.machine.last_turn(), 2);
        assert_eq!(repaired.machine.pending(Target::NextTurn).len(), 0);
        assert!(repaired.machine.is_quiescent());
    }

    #[test]
    fn s50_every_prefix_repairs_and_restores() {
        let bytes = session_log();
        for cut in 0..=bytes.len() {
            let parsed = parse(&bytes[..cut]).unwrap();
            let repaired =
                repair(&parsed.records).unwrap_or_else(|e| panic!("cut at byte {cut}: {e}"));
            let balanced = repaired.interrupted.is_none();
            assert_eq!(balanced, repaired.closers.is_empty());
        }
    }

    #[test]
    fn corruption_names_the_line() {
        let log = [
            json!({"type": "turn/start", "data": {"turn": 1}}),
            json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}),
            json!({"type": "turn/start", "data": {"turn": 3}}),
        ];
        let records: Vec<Record> = log
            .iter()
            .enumerate()
            .map(|(i, event)| Record {
                line: i + 1,
                seq: None,
                event: event.clone(),
            })
            .collect();
        let error = repair(&records).unwrap_err();
        assert_eq!(error.line(), 3);
        assert!(matches!(
            &error,
            RepairError::Corrupt { violation, .. } if violation.rule == Rule::I5
        ));
        assert_eq!(
            error.to_string(),
            "line 3: I5 turn enclosure: turn 3 starts after turn 1"
        );
    }
}
