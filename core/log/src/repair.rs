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
    /// What the stored log needs appended to be balanced (empty if it was), as one batch: the
    /// closers (S50), then the last [`redelivered`](Repaired::redelivered) events are the
    /// redelivery splices (S59, with a [`with_redelivery`](Repairer::with_redelivery)
    /// allowance).
    pub closers: Vec<Event>,
    /// How many of the `closers` (the last ones) are redelivery splices (S59): 0 without an
    /// allowance.
    pub redelivered: usize,
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
    repair_redelivering(records, config, 0)
}

/// [`repair_with`] with the redelivery allowance `allowance` (S59; 0 is [`repair_with`]):
/// after the closers, what the interrupted turn claimed after its last `step/start` is
/// re-inserted, each message at most `allowance` times over the log's life.
pub fn repair_redelivering(
    records: &[Record],
    config: Config,
    allowance: u64,
) -> Result<Repaired, RepairError> {
    let mut repairer = Repairer::new(config).with_redelivery(allowance);
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
    /// The redelivery allowance `A` (S59): 0, S50 unchanged.
    allowance: u64,
}

impl Repairer {
    /// A repair into a machine with `config`.
    pub fn new(config: Config) -> Self {
        Repairer {
            restorer: Restorer::with_config(config, 0),
            records: 0,
            last_line: 0,
            allowance: 0,
        }
    }

    /// This repair with the redelivery allowance `allowance` (S59): the host's choice, not in
    /// the log, like the memory's capacity. 0 (the default) is S50 unchanged; `A ≥ 1` chooses
    /// at-least-once for input no model saw. The type holds no negative; every `u64` is
    /// accepted (a count above what a log can hold means "always redeliver").
    pub fn with_redelivery(self, allowance: u64) -> Self {
        Repairer { allowance, ..self }
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

    /// Closes an open final turn (S50), redelivers what it claimed unseen (S59, within the
    /// allowance) and finishes the restore.
    ///
    /// # Errors
    ///
    /// [`RepairError`] when the log cannot end where it does; a closer's line is one past the
    /// last record's.
    pub fn finish(mut self) -> Result<Repaired, RepairError> {
        let line = self.last_line + 1;
        let fail = |error: InvalidLog| RepairError { line, error };
        let interrupted = self.restorer.position().open_turn();
        let closers = self.restorer.repair(self.allowance);
        let redelivered = closers
            .iter()
            .filter(|event| matches!(event, Event::Spliced(_)))
            .count();
        for closer in &closers {
            self.restorer.push_event(closer).map_err(fail)?;
        }
        let machine = self.restorer.finish().map_err(fail)?;
        Ok(Repaired {
            machine,
            closers,
            redelivered,
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

    /// S59: what the interrupted turn claimed after its last `step/start` comes back after
    /// the closers, within the allowance; what a step saw does not.
    #[test]
    fn s59_repair_redelivers_the_unseen_claims_within_the_allowance() {
        use coxswain_core::{Fate, MessageId, TurnEndKind};
        let parsed = parse(&session_log()).unwrap();
        // Cut after turn 2 claimed b, before its first step/start.
        let unseen = &parsed.records[..12];
        let config = Config::new().with_delivery_memory(4);
        let turn_end = Event::TurnEnd {
            turn: 2,
            reason: TurnEndReason::Interrupted,
        };
        let b = MessageId::new("b");
        let dropped = repair_redelivering(unseen, config, 0).unwrap();
        assert_eq!(
            (dropped.closers.clone(), dropped.redelivered),
            (vec![turn_end.clone()], 0)
        );
        assert_eq!(
            dropped.machine.fate(&b),
            Fate::Claimed {
                turn: 2,
                step: None,
                end: Some(TurnEndKind::Interrupted)
            }
        );
        let repaired = repair_redelivering(unseen, config, 1).unwrap();
        assert_eq!(repaired.redelivered, 1);
        let Some(Event::Spliced(splice)) = repaired.closers.get(1) else {
            panic!(
                "a redelivery splice after the closer: {:?}",
                repaired.closers
            );
        };
        assert_eq!(repaired.closers[0], turn_end);
        assert_eq!(
            (
                splice.target,
                splice.start,
                splice.removed_count,
                splice.wakeup,
                splice.redelivery
            ),
            (Target::NextTurn, 0, 0, true, Some(1))
        );
        assert_eq!(
            splice
                .inserted
                .iter()
                .map(|m| m.id().as_str())
                .collect::<Vec<_>>(),
            ["b"]
        );
        assert_eq!(
            repaired.machine.fate(&b),
            Fate::Pending {
                target: Target::NextTurn
            }
        );
        // The splice goes to storage with its count (S59), and reads back as written.
        let mut line = Vec::new();
        encode(13, &Entry::Machine(repaired.closers[1].clone()), &mut line).unwrap();
        let text = String::from_utf8(line).unwrap();
        assert!(text.contains(r#""redelivery":1"#), "{text}");
        // The repaired log audits clean (I3: the claim ended, the message is pending again).
        let mut auditor = crate::Auditor::with_config(config);
        for record in unseen {
            auditor.push_json(&record.event).unwrap();
        }
        for event in &repaired.closers {
            auditor.push_event(event).unwrap();
        }
        // The whole log: b entered step 1 of turn 2, so a model saw it: nothing comes back.
        let whole = repair_redelivering(&parsed.records, config, 5).unwrap();
        assert_eq!(whole.redelivered, 0);
        assert_eq!(whole.closers.len(), 2);
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
