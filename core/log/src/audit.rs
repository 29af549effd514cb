//! The log auditor: checks a durable log, event by event, against the invariants a log can show.
//!
//! * I1 / S11 — every splice's coordinates are in range of the lists the log so far projects;
//! * I2 / S13 — no id is ever pending twice;
//! * S10 / S12 — splice shape: no empty splice, `removedCount` only when > 0, `outcome` only
//!   (and always `canceled`) on an ordinary removal, `wakeup` only on an insertion;
//! * I3 / I4 — a claim (a pure deletion) happens only inside an open turn, outside any step:
//!   all of NS from 0, and at the turn boundary only, one NT item from 0, after the NS claim;
//! * I5 — `turn/start`/`turn/end` alternate with consecutive numbers from 1; `step/start`/`step/end`
//!   alternate inside an open turn with steps 1, 2, …; `user/message` only inside an open step;
//!   no `turn/end` while a step is open. In a log read from disk ([`Auditor::push_json`]) a
//!   `user/message` *between* turns is the host's (amended I5: the TypeScript system's compaction
//!   writes its summary that way) and is read past; one inside an open turn but outside its open
//!   step is still a violation, and so is any the machine emits outside a step
//!   ([`Auditor::push_event`]).
//!
//! The auditor reads the lists through the core's own [`Restorer`] (one projection, not two), so
//! at any point it also knows what restoring the log so far gives (S49): the model checker and
//! the property tests compare that with the live machine.

use std::fmt;

use coxswain_core::{
    Config, Event, InvalidLog, LogPosition, LogViolation, Machine, OpenTurn, Restorer, ShownId,
    Splice, SpliceKind, Target,
};
use serde_json::Value;

/// The invariant or rule a log breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    /// I1 / S11: splice coordinates out of range of the projected lists.
    I1,
    /// I2 / S13: an id pending twice.
    I2,
    /// I3: a claim outside an open turn.
    I3,
    /// I4: a claim of the wrong shape or at the wrong time.
    I4,
    /// I5: turn or step events out of order.
    I5,
    /// S10 / S12: a splice of the wrong shape.
    S10,
    /// S46: an event the log format does not allow.
    S46,
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rule::I1 => "I1 splice projection (S11)",
            Rule::I2 => "I2 identity (S13)",
            Rule::I3 => "I3 conservation",
            Rule::I4 => "I4 claim shape",
            Rule::I5 => "I5 turn enclosure",
            Rule::S10 => "S10 splice shape",
            Rule::S46 => "S46 log format",
        })
    }
}

/// The first violation found in a log.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("event {index}: {rule}: {detail}")]
pub struct AuditError {
    /// 0-based index of the offending event.
    pub index: usize,
    /// The rule it breaks.
    pub rule: Rule,
    /// What is wrong.
    pub detail: String,
}

/// Checks a durable log event by event. Feed it every event in log order: the machine's own
/// ([`push_event`](Auditor::push_event), or [`push_json`](Auditor::push_json) for a log read from
/// disk) and the host's ([`push_host_event`](Auditor::push_host_event)). After the first
/// violation every push returns it again.
#[derive(Clone, Debug)]
pub struct Auditor {
    /// The core's restorer fed with the same log; it also knows where the log stands.
    restorer: Restorer,
    index: usize,
    /// The open turn's boundary NT claim happened (I4).
    next_turn_claimed: bool,
    failed: Option<AuditError>,
}

/// Auditors compare by what they know about the log, not by how many events it had: the model
/// checker keeps one in its state. Their restorers compare by [`Restorer::behaviour`], and by
/// the whole position (the auditor checks each step against it).
impl PartialEq for Auditor {
    fn eq(&self, other: &Self) -> bool {
        self.restorer.behaviour() == other.restorer.behaviour()
            && self.restorer.position() == other.restorer.position()
            && self.next_turn_claimed == other.next_turn_claimed
            && self.failed.is_some() == other.failed.is_some()
    }
}

impl Eq for Auditor {}

impl std::hash::Hash for Auditor {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.restorer.behaviour().hash(state);
        self.restorer.position().hash(state);
        self.next_turn_claimed.hash(state);
        self.failed.is_some().hash(state);
    }
}

impl Default for Auditor {
    fn default() -> Self {
        Auditor::new()
    }
}

/// The shape of a splice, from either a typed event or its JSON.
struct Shape {
    target: Target,
    start: usize,
    removed: usize,
    inserted: usize,
    /// `removedCount: 0` written explicitly (JSON only).
    explicit_zero_removed: bool,
    outcome: Outcome,
    wakeup: bool,
}

enum Outcome {
    Absent,
    Canceled,
    Other(String),
}

impl Auditor {
    /// An auditor at the start of a log.
    pub fn new() -> Self {
        Auditor::with_config(Config::new())
    }

    /// An auditor whose restorer rebuilds a machine with `config` (its delivery memory, S53).
    pub fn with_config(config: Config) -> Self {
        Auditor {
            restorer: Restorer::with_config(config, 0),
            index: 0,
            next_turn_claimed: false,
            failed: None,
        }
    }

    /// Reads the next event, as the machine emitted it.
    pub fn push_event(&mut self, event: &Event) -> Result<(), AuditError> {
        self.guard(|this| match event {
            Event::Spliced(splice) => {
                let shape = Shape::of(splice);
                let before = this.lengths();
                this.restorer.push_event(event).map_err(restore_violation)?;
                this.check_splice(&shape, before)
            }
            _ => {
                let before = *this.restorer.position();
                this.restorer.push_event(event).map_err(restore_violation)?;
                this.check_enclosure(event, before)
            }
        })
    }

    /// Reads the next event of a log read from disk: `{ type, data }` (other keys ignored).
    /// Events of types the machine does not emit are the host's and are read past, and so is a
    /// `user/message` between turns (amended I5: a host may write one there; inside an open
    /// turn it must be inside the open step).
    pub fn push_json(&mut self, event: &Value) -> Result<(), AuditError> {
        self.guard(|this| {
            let before = this.lengths();
            let position = *this.restorer.position();
            this.restorer.push_json(event).map_err(restore_violation)?;
            let kind = event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let data = event.get("data").unwrap_or(&Value::Null);
            if kind == Event::SPLICED {
                let shape = Shape::of_json(data)
                    .ok_or_else(|| violation(Rule::S10, "a splice without a known target"))?;
                return this.check_splice(&shape, before);
            }
            if !Event::TYPES.contains(&kind) {
                return Ok(()); // the host's
            }
            let parsed: Event = serde_json::from_value(event.clone()).map_err(|e| {
                violation(
                    Rule::I5,
                    format!("malformed {} event: {e}", ShownId::new(kind)),
                )
            })?;
            if matches!(parsed, Event::UserMessage(_)) && position.open().is_none() {
                return Ok(()); // the host's, between turns (amended I5)
            }
            this.check_enclosure(&parsed, position)
        })
    }

    /// Reads past an event the host wrote (model output, tool calls…).
    pub fn push_host_event(&mut self) -> Result<(), AuditError> {
        self.guard(|this| this.restorer.skip_host_event().map_err(restore_violation))
    }

    /// The number of events read so far.
    pub fn events_read(&self) -> usize {
        self.index
    }

    /// The core's restorer fed with the same log: what restoring the log so far gives (S49).
    pub fn restorer(&self) -> &Restorer {
        &self.restorer
    }

    /// Restores a machine from the log so far. The log must not end inside a turn; push
    /// the closers of [`LogPosition::closers`] first (crash repair, S50).
    pub fn restore(&self) -> Result<Machine, InvalidLog> {
        self.restorer.clone().finish()
    }

    /// Where the log so far stands: its last turn, the turn and step it leaves open (crash
    /// repair's closers, S50, are [`LogPosition::closers`]).
    pub fn position(&self) -> &LogPosition {
        self.restorer.position()
    }

    fn guard(
        &mut self,
        check: impl FnOnce(&mut Self) -> Result<(), Detail>,
    ) -> Result<(), AuditError> {
        if let Some(failed) = &self.failed {
            return Err(failed.clone());
        }
        let index = self.index;
        self.index += 1;
        check(self).map_err(|(rule, detail)| {
            let failure = AuditError {
                index,
                rule,
                detail,
            };
            self.failed = Some(failure.clone());
            failure
        })
    }

    fn lengths(&self) -> (usize, usize) {
        (
            self.restorer.pending(Target::NextTurn).len(),
            self.restorer.pending(Target::NextStep).len(),
        )
    }

    /// S10, S12, I3, I4 for a splice the restorer accepted (so its coordinates are in range).
    /// `before` is (NT, NS) lengths before it.
    fn check_splice(&mut self, shape: &Shape, before: (usize, usize)) -> Result<(), Detail> {
        if shape.removed == 0 && shape.inserted == 0 {
            return Err(violation(Rule::S10, "a splice that changes nothing"));
        }
        if shape.explicit_zero_removed {
            return Err(violation(Rule::S10, "`removedCount` written as 0"));
        }
        if shape.wakeup && shape.inserted == 0 {
            return Err(violation(
                Rule::S10,
                "`wakeup` on a splice that inserts nothing",
            ));
        }
        match &shape.outcome {
            Outcome::Other(outcome) => {
                return Err(violation(
                    Rule::S10,
                    format!("unknown outcome {}", ShownId::new(outcome)),
                ))
            }
            Outcome::Canceled if shape.removed == 0 => {
                return Err(violation(
                    Rule::S10,
                    "`outcome` on a splice that removes nothing",
                ))
            }
            Outcome::Absent if shape.removed > 0 && shape.inserted > 0 => {
                return Err(violation(
                    Rule::S10,
                    "a removal that inserts is ordinary and must carry `outcome: canceled` (S12)",
                ))
            }
            Outcome::Absent | Outcome::Canceled => {}
        }
        let canceled = matches!(shape.outcome, Outcome::Canceled);
        if SpliceKind::of(shape.removed, shape.inserted, canceled) != SpliceKind::Claim {
            return Ok(());
        }
        // A pure deletion: a claim (S28).
        let Some(open) = self.restorer.position().open() else {
            return Err(violation(Rule::I3, "a claim outside an open turn"));
        };
        if open.step_open {
            return Err(violation(Rule::I4, "a claim inside an open step"));
        }
        if shape.start != 0 {
            return Err(violation(Rule::I4, "a claim that does not start at 0"));
        }
        let (next_turn, next_step) = before;
        let at_boundary = open.last_step == 0;
        match shape.target {
            Target::NextStep if shape.removed != next_step => Err(violation(
                Rule::I4,
                format!("a claim of {} of the {next_step} NS items", shape.removed),
            )),
            Target::NextStep if at_boundary && self.next_turn_claimed => Err(violation(
                Rule::I4,
                "an NS claim after the turn boundary's NT claim",
            )),
            Target::NextStep => Ok(()),
            Target::NextTurn if shape.removed != 1 => Err(violation(
                Rule::I4,
                format!("a claim of {} NT items (of {next_turn})", shape.removed),
            )),
            Target::NextTurn if !at_boundary || self.next_turn_claimed => Err(violation(
                Rule::I4,
                "an NT claim that is not at the turn boundary",
            )),
            Target::NextTurn => {
                self.next_turn_claimed = true;
                Ok(())
            }
        }
    }

    /// I5 for turn and step events and `user/message`, against where the log stood before it.
    fn check_enclosure(&mut self, event: &Event, before: LogPosition) -> Result<(), Detail> {
        let open = before.open();
        match (event, open) {
            (Event::TurnStart { turn }, None) if *turn == before.last_turn() + 1 => {
                self.next_turn_claimed = false;
                Ok(())
            }
            (Event::TurnStart { turn }, None) => Err(violation(
                Rule::I5,
                format!("turn {turn} starts after turn {}", before.last_turn()),
            )),
            (Event::TurnStart { turn }, Some(open)) => Err(violation(
                Rule::I5,
                format!("turn {turn} starts inside open turn {}", open.turn),
            )),
            (Event::TurnEnd { turn, .. }, Some(open)) if *turn == open.turn && !open.step_open => {
                self.next_turn_claimed = false;
                Ok(())
            }
            (Event::TurnEnd { turn, .. }, open) => Err(violation(
                Rule::I5,
                match open {
                    None => format!("turn {turn} ends with no turn open"),
                    Some(open) if open.step_open => {
                        format!("turn {turn} ends inside open step {}", open.last_step)
                    }
                    Some(open) => format!("turn {turn} ends while turn {} is open", open.turn),
                },
            )),
            (Event::StepStart { turn, step }, Some(open))
                if *turn == open.turn && !open.step_open && *step == open.last_step + 1 =>
            {
                Ok(())
            }
            (Event::StepEnd { turn, step }, Some(open))
                if *turn == open.turn && open.step_open && *step == open.last_step =>
            {
                Ok(())
            }
            (Event::StepStart { turn, step } | Event::StepEnd { turn, step }, open) => {
                Err(violation(
                    Rule::I5,
                    format!(
                        "step {step} of turn {turn} out of order ({})",
                        describe(open)
                    ),
                ))
            }
            (Event::UserMessage(_), Some(open)) if open.step_open => Ok(()),
            (Event::UserMessage(message), open) => Err(violation(
                Rule::I5,
                format!(
                    "user/message `{}` outside an open step ({})",
                    message.id(),
                    describe(open)
                ),
            )),
            (Event::Spliced(_), _) => Ok(()),
        }
    }
}

type Detail = (Rule, String);

fn violation(rule: Rule, detail: impl Into<String>) -> Detail {
    (rule, detail.into())
}

fn describe(open: Option<OpenTurn>) -> String {
    match open {
        None => "no turn open".into(),
        Some(open) if open.step_open => format!("turn {} step {} open", open.turn, open.last_step),
        Some(open) => format!("turn {} open after {} steps", open.turn, open.last_step),
    }
}

fn restore_violation(error: InvalidLog) -> Detail {
    let rule = match &error.violation {
        LogViolation::SpliceStart | LogViolation::SpliceRemovedCount => Rule::I1,
        LogViolation::AlreadyPending(_) => Rule::I2,
        _ => Rule::S46,
    };
    (rule, error.violation.to_string())
}

impl Shape {
    fn of(splice: &Splice) -> Shape {
        Shape {
            target: splice.target,
            start: splice.start,
            removed: splice.removed_count,
            inserted: splice.inserted.len(),
            explicit_zero_removed: false,
            outcome: match splice.outcome {
                Some(_) => Outcome::Canceled,
                None => Outcome::Absent,
            },
            wakeup: splice.wakeup,
        }
    }

    /// The shape of a splice the restorer already validated (target, coordinates, inserted);
    /// `None` for a target it would have refused.
    fn of_json(data: &Value) -> Option<Shape> {
        let target = data.get("target")?.as_str()?.parse::<Target>().ok()?;
        let count = |key: &str| {
            data.get(key)
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(0)
        };
        Some(Shape {
            target,
            start: count("start"),
            removed: count("removedCount"),
            inserted: data
                .get("inserted")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            explicit_zero_removed: data.get("removedCount").and_then(Value::as_u64) == Some(0),
            outcome: match data.get("outcome") {
                None => Outcome::Absent,
                Some(Value::String(s)) if s == "canceled" => Outcome::Canceled,
                Some(other) => Outcome::Other(other.to_string()),
            },
            wakeup: data.get("wakeup") == Some(&Value::Bool(true)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::{
        Message, PreStepAnswer, Rejected, StepAnswer, Transition, TurnEndReason, TurnStoppingAnswer,
    };
    use serde_json::json;

    fn m(id: &str) -> Value {
        json!({"id": id, "source": {"kind": "user"}, "content": id})
    }

    fn spliced(data: Value) -> Value {
        json!({"type": "agent/inbox/spliced", "data": data})
    }

    fn audit(log: &[Value]) -> Result<(), AuditError> {
        let mut auditor = Auditor::new();
        log.iter().try_for_each(|event| auditor.push_json(event))
    }

    fn record(transition: Result<Transition<'_>, Rejected>, log: &mut Vec<Event>) {
        transition.unwrap().persist_into(log).for_each(drop);
    }

    #[test]
    fn a_machine_session_audits_clean_and_restores_alike() {
        let mut machine = Machine::new();
        let mut log = Vec::new();
        record(machine.inject(Message::user("c", "c")), &mut log);
        record(machine.followup(Message::user("a", "a")), &mut log);
        record(machine.followup(Message::user("b", "b")), &mut log);
        record(
            machine.answer_pre_step(PreStepAnswer::Enter(Default::default())),
            &mut log,
        );
        record(machine.steer(Message::user("s", "s")), &mut log);
        record(machine.answer_pre_step(PreStepAnswer::Reject), &mut log);
        assert!(machine.answer_step(StepAnswer::Continue).is_err());
        record(
            machine.answer_pre_step(PreStepAnswer::Enter(
                [Message::user("x", "x")].into_iter().collect(),
            )),
            &mut log,
        );
        record(machine.answer_step(StepAnswer::Completed), &mut log);
        record(
            machine.answer_turn_stopping(TurnStoppingAnswer::Done),
            &mut log,
        );
        let mut auditor = Auditor::new();
        for event in &log {
            auditor.push_event(event).unwrap();
        }
        let mut json_auditor = Auditor::new();
        for event in &log {
            json_auditor
                .push_json(&serde_json::to_value(event).unwrap())
                .unwrap();
        }
        assert_eq!(auditor, json_auditor);
        assert_eq!(auditor.position().open_turn(), None);
        assert_eq!(auditor.position().last_turn(), 3);
        assert_eq!(auditor.restore().unwrap().behaviour(), machine.behaviour());
    }

    #[test]
    fn closers_balance_an_interrupted_turn() {
        let mut auditor = Auditor::new();
        for event in [
            Event::TurnStart { turn: 1 },
            Event::StepStart { turn: 1, step: 1 },
        ] {
            auditor.push_event(&event).unwrap();
        }
        let closers = auditor.position().closers();
        assert_eq!(
            closers,
            vec![
                Event::StepEnd { turn: 1, step: 1 },
                Event::TurnEnd {
                    turn: 1,
                    reason: TurnEndReason::Interrupted
                }
            ]
        );
        for event in &closers {
            auditor.push_event(event).unwrap();
        }
        assert_eq!(auditor.position().closers(), vec![]);
        assert_eq!(auditor.restore().unwrap().last_turn(), 1);
    }

    #[test]
    fn each_broken_log_names_its_rule_and_event() {
        let turn = |n: u64| json!({"type": "turn/start", "data": {"turn": n}});
        let end = |n: u64| json!({"type": "turn/end", "data": {"turn": n, "reason": {"kind": "completed"}}});
        let step = |t: u64, s: u64| json!({"type": "step/start", "data": {"turn": t, "step": s}});
        let step_end = |t: u64, s: u64| json!({"type": "step/end", "data": {"turn": t, "step": s}});
        let add = |target: &str, start: u64, id: &str| {
            spliced(json!({"target": target, "start": start, "inserted": [m(id)], "wakeup": true}))
        };
        let claim = |target: &str, n: u64| {
            spliced(json!({"target": target, "start": 0, "removedCount": n, "inserted": []}))
        };
        let cases: Vec<(Vec<Value>, usize, Rule)> = vec![
            (vec![add("next-turn", 1, "a")], 0, Rule::I1),
            (
                vec![add("next-turn", 0, "a"), add("next-step", 0, "a")],
                1,
                Rule::I2,
            ),
            (
                vec![add("next-turn", 0, "a"), claim("next-turn", 1)],
                1,
                Rule::I3,
            ),
            (
                vec![
                    add("next-step", 0, "a"),
                    add("next-step", 1, "b"),
                    turn(1),
                    claim("next-step", 1),
                ],
                3,
                Rule::I4,
            ),
            (
                vec![
                    add("next-turn", 0, "a"),
                    add("next-turn", 1, "b"),
                    turn(1),
                    claim("next-turn", 2),
                ],
                3,
                Rule::I4,
            ),
            (
                vec![
                    add("next-turn", 0, "a"),
                    turn(1),
                    step(1, 1),
                    claim("next-turn", 1),
                ],
                3,
                Rule::I4,
            ),
            (
                vec![
                    add("next-turn", 0, "a"),
                    add("next-turn", 1, "b"),
                    turn(1),
                    claim("next-turn", 1),
                    step(1, 1),
                    step_end(1, 1),
                    claim("next-turn", 1),
                ],
                6,
                Rule::I4,
            ),
            (
                vec![
                    add("next-turn", 0, "a"),
                    add("next-step", 0, "s"),
                    turn(1),
                    claim("next-turn", 1),
                    claim("next-step", 1),
                ],
                4,
                Rule::I4,
            ),
            (vec![turn(2)], 0, Rule::I5),
            (vec![turn(1), turn(2)], 1, Rule::I5),
            (vec![turn(1), step(1, 2)], 1, Rule::I5),
            (vec![turn(1), step(1, 1), end(1)], 2, Rule::I5),
            (vec![end(1)], 0, Rule::I5),
            (
                vec![turn(1), json!({"type": "user/message", "data": m("a")})],
                1,
                Rule::I5,
            ),
            (vec![turn(1), step(1, 1), step_end(1, 2)], 2, Rule::I5),
            (
                vec![spliced(
                    json!({"target": "next-turn", "start": 0, "inserted": []}),
                )],
                0,
                Rule::S10,
            ),
            (
                vec![spliced(
                    json!({"target": "next-turn", "start": 0, "removedCount": 0, "inserted": [m("a")]}),
                )],
                0,
                Rule::S10,
            ),
            (
                vec![
                    add("next-turn", 0, "a"),
                    spliced(
                        json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [], "outcome": "lost"}),
                    ),
                ],
                1,
                Rule::S10,
            ),
            (
                vec![spliced(
                    json!({"target": "next-turn", "start": 0, "inserted": [m("a")], "outcome": "canceled"}),
                )],
                0,
                Rule::S10,
            ),
            (
                vec![
                    add("next-turn", 0, "a"),
                    spliced(
                        json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [], "wakeup": true}),
                    ),
                ],
                1,
                Rule::S10,
            ),
            (
                vec![
                    add("next-turn", 0, "a"),
                    spliced(
                        json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [m("b")]}),
                    ),
                ],
                1,
                Rule::S10,
            ),
            (vec![json!({"data": 1})], 0, Rule::S46),
            (
                vec![turn(1), json!({"type": "step/start", "data": {"turn": 1}})],
                1,
                Rule::I5,
            ),
        ];
        for (log, index, rule) in cases {
            let violation = audit(&log).unwrap_err();
            assert_eq!(
                (violation.index, violation.rule),
                (index, rule),
                "{log:?}: {violation}"
            );
        }
        // Host events are read past anywhere; interrupted turns are balanced.
        audit(&[
            json!({"type": "session/meta", "data": {}}),
            turn(1),
            json!({"type": "model/output"}),
            step(1, 1),
            json!({"type": "tool/call", "data": [1]}),
            step_end(1, 1),
            json!({"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "interrupted"}}}),
            turn(2),
            end(2),
        ])
        .unwrap();
    }

    /// Amended I5: in a log read from disk a `user/message` between turns is the host's (the
    /// TypeScript system's compaction summary); inside an open turn but outside its step it
    /// is still a violation; one the machine emits (`push_event`) must be inside a step.
    #[test]
    fn i5_a_host_user_message_between_turns_is_read_past() {
        let turn = |n: u64| json!({"type": "turn/start", "data": {"turn": n}});
        let end = |n: u64| json!({"type": "turn/end", "data": {"turn": n, "reason": {"kind": "completed"}}});
        let step = |s: u64| json!({"type": "step/start", "data": {"turn": 1, "step": s}});
        let step_end = |s: u64| json!({"type": "step/end", "data": {"turn": 1, "step": s}});
        let summary = json!({"type": "user/message", "data": m("summary")});
        audit(&[summary.clone(), turn(1), end(1), summary.clone(), turn(2)]).unwrap();
        let violation = audit(&[turn(1), step(1), step_end(1), summary.clone()]).unwrap_err();
        assert_eq!(
            violation.to_string(),
            "event 3: I5 turn enclosure: user/message `summary` outside an open step (turn 1 \
             open after 1 steps)"
        );
        let mut auditor = Auditor::new();
        let emitted = Event::UserMessage(std::sync::Arc::new(Message::user("summary", "s")));
        assert_eq!(
            auditor.push_event(&emitted).unwrap_err().to_string(),
            "event 0: I5 turn enclosure: user/message `summary` outside an open step (no turn \
             open)"
        );
    }
}
