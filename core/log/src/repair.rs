//! Crash repair (S50) and restore (S46–S48) of a log read back from storage.
//!
//! [`repair`] restores the machine with the core's own [`Restorer`], so it accepts exactly the
//! logs S46 accepts (another implementation's log "as written" included) and rejects the others
//! naming the line. If the log ends inside a turn it takes the closers the turn needs
//! ([`LogPosition::closers`](coxswain_core::LogPosition::closers): `step/end` if a step is open,
//! then `turn/end {kind: "interrupted"}`) and restores with them
//! appended; the caller appends them to the stored log before anything else. The torn tail is the
//! reader's business ([`parse`](crate::parse) leaves it out); nothing else is ever dropped or
//! rewritten. Checking a log against every invariant is the [`Auditor`](crate::Auditor)'s job
//! (`coxswain verify`), not repair's: a resume must not refuse what a restore accepts.

use coxswain_core::{Config, Event, InvalidLog, Machine, Restorer};

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

/// Restores the machine from `records` (S46–S48), closing an open final turn first (S50).
pub fn repair(records: &[Record]) -> Result<Repaired, RepairError> {
    repair_with(records, Config::new())
}

/// [`repair`] into a machine with the host's `config` (its delivery memory, admission bound and
/// hash seed; S51, S53, S55).
pub fn repair_with(records: &[Record], config: Config) -> Result<Repaired, RepairError> {
    let mut repairer = Repairer::new(config);
    records
        .iter()
        .try_for_each(|record| repairer.push(record))?;
    repairer.finish()
}

/// [`repair_with`] one record at a time, for a log read as a stream (its memory does not grow
/// with the log).
#[derive(Debug)]
pub struct Repairer {
    restorer: Restorer,
    records: usize,
    /// The line of the last record pushed (0 before the first).
    last_line: usize,
}

impl Repairer {
    /// A repair into a machine with `config`.
    pub fn new(config: Config) -> Self {
        Repairer {
            restorer: Restorer::with_config(config, 0),
            records: 0,
            last_line: 0,
        }
    }

    /// Restores the next record.
    ///
    /// # Errors
    ///
    /// [`RepairError`] naming the record's line when the core does not accept it.
    pub fn push(&mut self, record: &Record) -> Result<(), RepairError> {
        self.restorer
            .push_json(&record.event)
            .map_err(|error| RepairError {
                line: record.line,
                error,
            })?;
        self.records += 1;
        self.last_line = record.line;
        Ok(())
    }

    /// Closes an open final turn (S50) and finishes the restore.
    ///
    /// # Errors
    ///
    /// [`RepairError`] when the log cannot end where it does; a closer's line is one past the
    /// last record's.
    pub fn finish(mut self) -> Result<Repaired, RepairError> {
        let line = self.last_line + 1;
        let fail = |error: InvalidLog| RepairError { line, error };
        let interrupted = self.restorer.position().open_turn();
        let closers = self.restorer.position().closers();
        for closer in &closers {
            self.restorer.push_event(closer).map_err(fail)?;
        }
        let machine = self.restorer.finish().map_err(fail)?;
        Ok(Repaired {
            machine,
            closers,
            interrupted,
            records: self.records,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonl::{encode, parse, Entry};
    use coxswain_core::{
        Message, PreStepAnswer, Rejected, StepAnswer, Target, Transition, TurnEndReason,
        TurnStoppingAnswer,
    };
    use serde_json::json;

    /// A session's log, one line per event.
    fn session_log() -> Vec<u8> {
        let mut machine = Machine::new();
        let mut bytes = Vec::new();
        let mut log = Vec::new();
        let mut record = |transition: Result<Transition<'_>, Rejected>| {
            transition.unwrap().persist_into(&mut log).for_each(drop);
        };
        record(machine.inject(Message::user("c", "ctx")));
        record(machine.followup(Message::user("a", "a")));
        record(machine.followup(Message::user("b", "b")));
        record(machine.answer_pre_step(PreStepAnswer::Enter(
            [Message::user("a", "a")].into_iter().collect(),
        )));
        record(machine.answer_step(StepAnswer::Completed));
        record(machine.answer_turn_stopping(TurnStoppingAnswer::Done));
        record(machine.answer_pre_step(PreStepAnswer::Enter(
            [Message::user("b", "b")].into_iter().collect(),
        )));
        for (seq, event) in (1..).zip(log) {
            encode(seq, &Entry::Machine(event), &mut bytes).unwrap();
        }
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
