//! Crash repair (S50) and restore (S46–S48) of a log read back from storage.
//!
//! [`repair`] restores the machine with the core's own [`Restorer`], so it accepts exactly the
//! logs S46 accepts (another implementation's log "as written" included) and rejects the others
//! naming the line. If the log ends inside a turn it computes the [`closers`] the turn needs
//! (`step/end` if a step is open, then `turn/end {kind: "interrupted"}`) and restores with them
//! appended; the caller appends them to the stored log before anything else. The torn tail is the
//! reader's business ([`parse`](crate::parse) leaves it out); nothing else is ever dropped or
//! rewritten. Checking a log against every invariant is the [`Auditor`](crate::Auditor)'s job
//! (`coxswain verify`), not repair's: a resume must not refuse what a restore accepts.

use coxswain_core::{Event, InvalidLog, Machine, Restorer, TurnEndReason};

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

/// A log that repair cannot fix: it is invalid before its end (S46, S47).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {error}")]
pub struct RepairError {
    /// The 1-based line of the offending record.
    pub line: usize,
    /// What the core's restore found wrong with it.
    pub error: InvalidLog,
}

impl RepairError {
    /// The 1-based line of the offending record.
    pub fn line(&self) -> usize {
        self.line
    }
}

/// Crash repair's closers (S50) for a log read so far: `step/end` if a step is open, then
/// `turn/end {kind: "interrupted"}` if a turn is open. Empty for a balanced log.
pub fn closers(restorer: &Restorer) -> Vec<Event> {
    let Some(turn) = restorer.open_turn() else {
        return Vec::new();
    };
    let mut closers = Vec::with_capacity(2);
    if let Some(step) = restorer.open_step() {
        closers.push(Event::StepEnd { turn, step });
    }
    closers.push(Event::TurnEnd {
        turn,
        reason: TurnEndReason::Interrupted,
    });
    closers
}

/// Restores the machine from `records` (S46–S48), closing an open final turn first (S50).
pub fn repair(records: &[Record]) -> Result<Repaired, RepairError> {
    let line_of = |index: usize| {
        records
            .get(index)
            .map_or_else(|| records.last().map_or(0, |r| r.line) + 1, |r| r.line)
    };
    let fail = |error: InvalidLog| RepairError {
        line: line_of(error.index),
        error,
    };
    let mut restorer = Restorer::new(0);
    for record in records {
        restorer.push_json(&record.event).map_err(fail)?;
    }
    let interrupted = restorer.open_turn();
    let closers = closers(&restorer);
    for closer in &closers {
        restorer.push_event(closer).map_err(fail)?;
    }
    let machine = restorer.finish().map_err(fail)?;
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
    fn s46_repair_accepts_what_restore_accepts() {
        // Unbalanced numbering and an explicit `removedCount: 0` break no S46 rule: accepted as
        // written (the auditor, not repair, reports them).
        let log = [
            json!({"type": "turn/start", "data": {"turn": 1}}),
            json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}),
            json!({"type": "turn/start", "data": {"turn": 3}}),
            json!({"type": "agent/inbox/spliced", "data": {"target": "next-step", "start": 0, "removedCount": 0, "inserted": [{"id": "x"}]}}),
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
        let repaired = repair(&records).unwrap();
        assert_eq!(repaired.interrupted, Some(3));
        assert_eq!(repaired.machine.last_turn(), 3);
        assert_eq!(repaired.machine.pending(Target::NextStep).len(), 1);
    }

    #[test]
    fn corruption_names_the_line() {
        let log = [
            json!({"type": "turn/start", "data": {"turn": 1}}),
            json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}}),
            json!({"type": "agent/inbox/spliced", "data": {"target": "next-turn", "start": 1, "inserted": []}}),
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
        assert_eq!(
            error.error.violation,
            coxswain_core::LogViolation::SpliceStart
        );
        assert_eq!(
            error.to_string(),
            "line 3: invalid log: event 2: splice `start` is not an integer in range (S11, S46)"
        );
    }
}
