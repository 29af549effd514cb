//! The bad input catalogue: malformed traces, invalid logs (out-of-range splices, duplicate
//! pending ids, turn events out of order, unknown event types interleaved), corrupt and truncated
//! JSON lines, and inputs the machine must reject. Each case pins its exact typed error (or, for
//! input the spec accepts, exactly what it restores) and runs under `catch_unwind`: none may panic.

use std::panic::{catch_unwind, AssertUnwindSafe};

use coxswain_conformance::{replay, Trace, TraceError};
use coxswain_core::{
    CancelCause, Completion, Input, InvalidLog, LogViolation, Machine, Message, MessageId,
    Outstanding, PreStepAnswer, Rejected, RequestKind, ShownId, StepAnswer, Target, Transition,
    TurnStoppingAnswer,
};
use coxswain_log::{
    parse, repair, Auditor, CorruptLine, EncodeError, Problem, RepairError, Rule, TooDeep,
    TornTail, MAX_LINE_BYTES,
};
use serde_json::error::Category;
use serde_json::{json, Value};

/// What a case did, normalised so it can be compared with what it must do.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    /// `Trace::parse` or `replay` found the trace malformed at `line`; the message contains `says`.
    Malformed { line: usize, says: String },
    /// `replay` found the machine disagreeing with the trace at `line`; `actual` contains `says`.
    Mismatch { line: usize, says: String },
    /// `Machine::restore` rejected the log.
    InvalidLog(InvalidLog),
    /// `Machine::restore` accepted the log: the lists (ids) and `lastTurn`.
    Restored {
        nt: Vec<String>,
        ns: Vec<String>,
        last_turn: u64,
    },
    /// The auditor's first violation.
    Audit { index: usize, rule: Rule },
    /// The JSON-lines reader found a corrupt line (`NotJson` messages are reduced to "").
    Corrupt(CorruptLine),
    /// The JSON-lines reader read `records` complete records and left out a torn tail.
    Read {
        records: usize,
        torn: Option<TornTail>,
    },
    /// Crash repair refused the log.
    Repair(RepairError),
    /// Crash repair closed the log with `closers` events, interrupting `interrupted`.
    Repaired {
        closers: usize,
        interrupted: Option<u64>,
    },
    /// The input was rejected and changed nothing, emitted nothing.
    Rejected(Rejected),
    /// `serde_json` refused an input line with this category.
    Json(Category),
}

impl Outcome {
    fn matches(&self, expected: &Outcome) -> bool {
        match (self, expected) {
            (
                Outcome::Malformed { line, says },
                Outcome::Malformed {
                    line: want,
                    says: part,
                },
            )
            | (
                Outcome::Mismatch { line, says },
                Outcome::Mismatch {
                    line: want,
                    says: part,
                },
            ) => line == want && says.contains(part.as_str()),
            _ => self == expected,
        }
    }
}

fn malformed(line: usize, says: &str) -> Outcome {
    Outcome::Malformed {
        line,
        says: says.to_owned(),
    }
}

fn invalid(index: usize, violation: LogViolation) -> Outcome {
    Outcome::InvalidLog(InvalidLog { index, violation })
}

fn restored(nt: &[&str], ns: &[&str], last_turn: u64) -> Outcome {
    let owned = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect();
    Outcome::Restored {
        nt: owned(nt),
        ns: owned(ns),
        last_turn,
    }
}

fn m(id: &str) -> Value {
    json!({"id": id, "source": {"kind": "user"}, "content": id})
}

fn spliced(data: Value) -> Value {
    json!({"type": "agent/inbox/spliced", "data": data})
}

fn insert(target: &str, start: usize, ids: &[&str]) -> Value {
    let inserted: Vec<Value> = ids.iter().map(|id| m(id)).collect();
    spliced(json!({"target": target, "start": start, "inserted": inserted}))
}

fn turn_start(turn: u64) -> Value {
    json!({"type": "turn/start", "data": {"turn": turn}})
}

fn turn_end(turn: u64) -> Value {
    json!({"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}})
}

// ----- runners -----

fn trace(text: &str) -> Outcome {
    match Trace::parse(text).and_then(|trace| replay(&trace)) {
        Err(TraceError::Malformed { line, message }) => Outcome::Malformed {
            line,
            says: message,
        },
        Err(TraceError::Mismatch { line, actual, .. }) => Outcome::Mismatch { line, says: actual },
        other => panic!("trace case neither malformed nor mismatched: {other:?}"),
    }
}

fn restore(log: &[Value], seed_length: usize) -> Outcome {
    match Machine::restore(log, seed_length) {
        Err(error) => Outcome::InvalidLog(error),
        Ok(machine) => {
            let ids = |target| {
                machine
                    .pending(target)
                    .map(|p| p.message().id().to_string())
                    .collect()
            };
            Outcome::Restored {
                nt: ids(Target::NextTurn),
                ns: ids(Target::NextStep),
                last_turn: machine.last_turn(),
            }
        }
    }
}

fn audit(log: &[Value]) -> Outcome {
    let mut auditor = Auditor::new();
    match log.iter().try_for_each(|event| auditor.push_json(event)) {
        Err(violation) => Outcome::Audit {
            index: violation.index,
            rule: violation.rule,
        },
        Ok(()) => panic!("the auditor accepted the log"),
    }
}

fn read(bytes: &[u8]) -> Outcome {
    match parse(bytes) {
        Err(CorruptLine {
            line,
            problem: Problem::NotJson(_),
        }) => Outcome::Corrupt(CorruptLine {
            line,
            problem: Problem::NotJson(String::new()),
        }),
        Err(corrupt) => Outcome::Corrupt(corrupt),
        Ok(parsed) => Outcome::Read {
            records: parsed.records.len(),
            torn: parsed.torn,
        },
    }
}

/// Reads JSON lines (which must read cleanly) and runs crash repair on them.
fn repair_lines(lines: &[Value]) -> Outcome {
    let mut bytes = Vec::new();
    for line in lines {
        bytes.extend_from_slice(line.to_string().as_bytes());
        bytes.push(b'\n');
    }
    let parsed = parse(&bytes).expect("the case's lines are JSON objects");
    match repair(&parsed.records) {
        Err(error) => Outcome::Repair(error),
        Ok(repaired) => Outcome::Repaired {
            closers: repaired.closers.len(),
            interrupted: repaired.interrupted,
        },
    }
}

/// Applies `setup` (which must succeed), then `input`, which must be rejected having changed
/// nothing and emitted nothing (S5).
fn reject(
    setup: impl FnOnce(&mut Machine) -> Result<(), Rejected>,
    input: impl FnOnce(&mut Machine) -> Result<(), Rejected>,
) -> Outcome {
    let mut machine = Machine::new();
    setup(&mut machine).expect("the setup is accepted");
    let before = machine.clone();
    let result = input(&mut machine);
    assert!(machine.drain().is_empty(), "a rejected input emitted");
    assert_eq!(machine, before, "a rejected input changed the machine");
    Outcome::Rejected(result.expect_err("the input is rejected"))
}

fn input_json(text: &str) -> Outcome {
    match serde_json::from_str::<coxswain_core::Input>(text) {
        Err(error) => Outcome::Json(error.classify()),
        Ok(input) => panic!("parsed {input:?}"),
    }
}

fn user(id: &str) -> Message {
    Message::user(id, id)
}

/// Settles an accepted input (its events are taken as persisted).
fn ok(transition: Result<Transition<'_>, Rejected>) -> Result<(), Rejected> {
    transition.map(|transition| transition.persisted().for_each(drop))
}

/// Opens turn 1 and enters its first step (the step request is outstanding).
fn in_step(machine: &mut Machine) -> Result<(), Rejected> {
    ok(machine.followup(user("f")))?;
    ok(machine.answer_pre_step(PreStepAnswer::Enter([user("f")].into_iter().collect())))
}

// ----- the catalogue -----

type Case = (&'static str, Box<dyn Fn() -> Outcome>, Outcome);

/// Every case, in groups of one theme each.
fn catalogue() -> Vec<Case> {
    [
        malformed_traces(),
        log_splice_ranges(),
        log_ids_and_events(),
        log_splice_fields(),
        log_seed_and_order(),
        log_unknown_types_and_audit(),
        log_crash_repair(),
        records(),
        input_identity_and_bounds(),
        input_out_of_order(),
        input_lines_as_json(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Malformed traces (FORMAT.md).
fn malformed_traces() -> Vec<Case> {
    let clear = r#"{"in":{"clear":{}}}"#;
    vec![
        (
            "trace: truncated JSON line",
            Box::new(move || trace(&format!("{clear}\n{{\"in\":{{\"clear\":"))),
            malformed(2, "not JSON"),
        ),
        (
            "trace: a line with two keys",
            Box::new(|| trace(r#"{"in":{"clear":{}},"out":{"disposed":{}}}"#)),
            malformed(1, "exactly one key"),
        ),
        (
            "trace: a line that is not an object",
            Box::new(|| trace("[1, 2]")),
            malformed(1, "exactly one key"),
        ),
        (
            "trace: unknown key",
            Box::new(|| trace(r#"{"expect":{}}"#)),
            malformed(1, "unknown key `expect`"),
        ),
        (
            "trace: unknown input",
            Box::new(|| trace(r#"{"in":{"launch":{}}}"#)),
            malformed(1, "unknown input"),
        ),
        (
            "trace: a message without an id",
            Box::new(|| trace(r#"{"in":{"followup":{"source":{"kind":"user"}}}}"#)),
            malformed(1, "unknown input"),
        ),
        (
            "trace: a message with a numeric id",
            Box::new(|| trace(r#"{"in":{"inject":{"id":7}}}"#)),
            malformed(1, "unknown input"),
        ),
        (
            "trace: `given` after an input",
            Box::new(move || trace(&format!("{clear}\n{{\"given\":{{\"log\":[]}}}}"))),
            malformed(2, "`given` must be the first line"),
        ),
        (
            "trace: `given` with a log that is not an array",
            Box::new(|| trace(r#"{"given":{"log":{},"seedLength":0}}"#)),
            malformed(1, "`log` is not an array"),
        ),
        (
            "trace: a negative delivery memory (S51)",
            Box::new(|| trace(r#"{"given":{"memory":-1}}"#)),
            malformed(1, "`memory` is not an integer"),
        ),
        (
            "trace: negative seedLength",
            Box::new(|| trace(r#"{"given":{"log":[],"seedLength":-1}}"#)),
            malformed(1, "`seedLength` is not an integer"),
        ),
        (
            "trace: `rejected` that is not a string",
            Box::new(move || trace(&format!("{clear}\n{{\"rejected\":1}}"))),
            malformed(2, "`rejected` takes a string"),
        ),
        (
            "trace: an output before any input",
            Box::new(|| trace("{\"note\":\"x\"}\n{\"out\":{\"disposed\":{}}}")),
            malformed(2, "with no input before it"),
        ),
        (
            "trace: lines after an invalid-log rejection",
            Box::new(move || {
                trace(&format!(
                    "{{\"given\":{{\"log\":[{{\"data\":1}}]}}}}\n{{\"rejected\":\"invalid-log\"}}\n{clear}"
                ))
            }),
            malformed(3, "ends after an invalid-log rejection"),
        ),
        (
            "trace: a given log with an out-of-range splice expected to restore",
            Box::new(move || {
                let given = json!({"given": {"log": [insert("next-turn", 1, &["a"])]}});
                trace(&format!("{given}\n{clear}"))
            }),
            Outcome::Mismatch {
                line: 2,
                says: "rejected invalid-log (invalid log: event 0: splice `start`".into(),
            },
        ),
    ]
}

/// Invalid logs (S46, S47): splice positions out of range or not whole numbers (S11).
fn log_splice_ranges() -> Vec<Case> {
    vec![
        (
            "log: splice start past the end (S11)",
            Box::new(|| restore(&[insert("next-turn", 1, &["a"])], 0)),
            invalid(0, LogViolation::SpliceStart),
        ),
        (
            "log: removedCount past the end (S11)",
            Box::new(|| {
                restore(
                    &[
                        insert("next-step", 0, &["a", "b"]),
                        spliced(
                            json!({"target": "next-step", "start": 1, "removedCount": 2, "inserted": []}),
                        ),
                    ],
                    0,
                )
            }),
            invalid(1, LogViolation::SpliceRemovedCount),
        ),
        (
            "log: removal from the other, empty list (S11)",
            Box::new(|| {
                restore(
                    &[
                        insert("next-step", 0, &["a"]),
                        spliced(
                            json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}),
                        ),
                    ],
                    0,
                )
            }),
            invalid(1, LogViolation::SpliceRemovedCount),
        ),
        (
            "log: negative start",
            Box::new(|| {
                restore(
                    &[spliced(
                        json!({"target": "next-turn", "start": -1, "inserted": []}),
                    )],
                    0,
                )
            }),
            invalid(0, LogViolation::SpliceStart),
        ),
        (
            "log: start as a string",
            Box::new(|| {
                restore(
                    &[spliced(
                        json!({"target": "next-turn", "start": "0", "inserted": [m("a")]}),
                    )],
                    0,
                )
            }),
            invalid(0, LogViolation::SpliceStart),
        ),
        (
            "log: fractional removedCount",
            Box::new(|| {
                restore(
                    &[
                        insert("next-turn", 0, &["a"]),
                        spliced(
                            json!({"target": "next-turn", "start": 0, "removedCount": 0.5, "inserted": []}),
                        ),
                    ],
                    0,
                )
            }),
            invalid(1, LogViolation::SpliceRemovedCount),
        ),
    ]
}

/// Invalid logs: duplicate ids (S13, S9) and events that are not events.
fn log_ids_and_events() -> Vec<Case> {
    vec![
        (
            "log: duplicate id inside one splice (S13)",
            Box::new(|| restore(&[insert("next-turn", 0, &["a", "a"])], 0)),
            invalid(0, LogViolation::AlreadyPending("a".into())),
        ),
        (
            "log: duplicate pending id across the lists (S13)",
            Box::new(|| {
                restore(
                    &[
                        insert("next-turn", 0, &["a"]),
                        insert("next-step", 0, &["a"]),
                    ],
                    0,
                )
            }),
            invalid(1, LogViolation::AlreadyPending("a".into())),
        ),
        (
            "log: an id removed may be inserted again (S9)",
            Box::new(|| {
                restore(
                    &[
                        insert("next-turn", 0, &["a"]),
                        spliced(
                            json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [m("a")], "outcome": "canceled"}),
                        ),
                    ],
                    0,
                )
            }),
            restored(&["a"], &[], 0),
        ),
        (
            "log: an event that is not an object",
            Box::new(|| restore(&[json!("turn/start")], 0)),
            invalid(0, LogViolation::MissingType),
        ),
        (
            "log: a numeric type",
            Box::new(|| {
                restore(
                    &[
                        insert("next-step", 0, &["a"]),
                        json!({"type": 5, "data": {}}),
                    ],
                    0,
                )
            }),
            invalid(1, LogViolation::MissingType),
        ),
        (
            "log: turn/start without a turn",
            Box::new(|| restore(&[json!({"type": "turn/start", "data": {}})], 0)),
            invalid(0, LogViolation::TurnWithoutNumber),
        ),
        (
            "log: turn/start with a negative turn",
            Box::new(|| restore(&[json!({"type": "turn/start", "data": {"turn": -1}})], 0)),
            invalid(0, LogViolation::TurnWithoutNumber),
        ),
    ]
}

/// Invalid logs: splice fields of the wrong shape, and a log ending inside a turn (S50).
fn log_splice_fields() -> Vec<Case> {
    vec![
        (
            "log: splice without a valid target",
            Box::new(|| {
                restore(
                    &[spliced(
                        json!({"target": "nt", "start": 0, "inserted": [m("a")]}),
                    )],
                    0,
                )
            }),
            invalid(0, LogViolation::SpliceTarget),
        ),
        (
            "log: splice without data",
            Box::new(|| restore(&[json!({"type": "agent/inbox/spliced"})], 0)),
            invalid(0, LogViolation::SpliceTarget),
        ),
        (
            "log: inserted is not a list",
            Box::new(|| {
                restore(
                    &[spliced(
                        json!({"target": "next-turn", "start": 0, "inserted": m("a")}),
                    )],
                    0,
                )
            }),
            invalid(0, LogViolation::SpliceInserted),
        ),
        (
            "log: an inserted message without a string id",
            Box::new(|| {
                restore(
                    &[spliced(
                        json!({"target": "next-turn", "start": 0, "inserted": [{"id": 1}]}),
                    )],
                    0,
                )
            }),
            invalid(0, LogViolation::SpliceInserted),
        ),
        (
            "log: wakeup false",
            Box::new(|| {
                restore(
                    &[spliced(
                        json!({"target": "next-turn", "start": 0, "inserted": [m("a")], "wakeup": false}),
                    )],
                    0,
                )
            }),
            invalid(0, LogViolation::SpliceWakeup),
        ),
        (
            "log: the log ends inside an open turn (S50)",
            Box::new(|| {
                restore(
                    &[
                        turn_start(1),
                        turn_end(1),
                        insert("next-turn", 0, &["a"]),
                        turn_start(2),
                    ],
                    0,
                )
            }),
            invalid(3, LogViolation::OpenTurn),
        ),
    ]
}

/// Logs read past: the seed boundary (S46), turn events out of order and what the auditor and crash
/// repair make of them (I5).
fn log_seed_and_order() -> Vec<Case> {
    vec![
        (
            "log: an invalid splice before the seed boundary is not read (S46)",
            Box::new(|| {
                restore(
                    &[
                        spliced(json!({"target": "nt"})),
                        insert("next-step", 0, &["b"]),
                    ],
                    1,
                )
            }),
            restored(&[], &["b"], 0),
        ),
        (
            "log: an invalid splice at the seed boundary is read (S46)",
            Box::new(|| {
                restore(
                    &[
                        insert("next-step", 0, &["b"]),
                        spliced(json!({"target": "nt"})),
                    ],
                    1,
                )
            }),
            invalid(1, LogViolation::SpliceTarget),
        ),
        (
            "log: turn events out of order are read past by restore (S46)",
            Box::new(|| {
                restore(
                    &[
                        turn_end(4),
                        turn_start(2),
                        json!({"type": "step/end", "data": {"turn": 9, "step": 9}}),
                        turn_start(1),
                        turn_end(7),
                    ],
                    0,
                )
            }),
            restored(&[], &[], 1),
        ),
        (
            "log: ...but the auditor names the first (I5)",
            Box::new(|| audit(&[turn_end(4), turn_start(2)])),
            Outcome::Audit {
                index: 0,
                rule: Rule::I5,
            },
        ),
        (
            "log: ...a turn that skips a number (I5)",
            Box::new(|| audit(&[turn_start(1), turn_end(1), turn_start(3), turn_end(3)])),
            Outcome::Audit {
                index: 2,
                rule: Rule::I5,
            },
        ),
        (
            "log: ...a step/end with no step open (I5)",
            Box::new(|| {
                audit(&[
                    turn_start(1),
                    json!({"type": "step/end", "data": {"turn": 1, "step": 1}}),
                ])
            }),
            Outcome::Audit {
                index: 1,
                rule: Rule::I5,
            },
        ),
        (
            "log: ...while crash repair accepts what restore accepts and closes the last turn (S50)",
            Box::new(|| {
                repair_lines(&[insert("next-turn", 0, &["a"]), turn_start(1), turn_start(2)])
            }),
            Outcome::Repaired {
                closers: 1,
                interrupted: Some(2),
            },
        ),
    ]
}

/// Logs: unknown event types (S47) and the auditor's rules (I1, I2).
fn log_unknown_types_and_audit() -> Vec<Case> {
    vec![
        (
            "log: unknown event types interleaved are read past, and count for the seed (S46)",
            Box::new(|| {
                restore(
                    &[
                        json!({"type": "model/output", "data": {"text": "hi"}}),
                        insert("next-turn", 0, &["a"]),
                        json!({"type": "agent/inbox/claimed", "data": {"whatever": true}}),
                        json!({"type": "tool/call"}),
                        insert("next-step", 0, &["b"]),
                        json!({"type": "agent/inbox/discarded", "data": null, "seq": 6}),
                    ],
                    2,
                )
            }),
            restored(&[], &["b"], 0),
        ),
        (
            "log: an inbox splice among them is never skipped (S47)",
            Box::new(|| {
                restore(
                    &[
                        json!({"type": "model/output", "data": {}}),
                        spliced(json!({"target": "next-turn", "start": 3, "inserted": [m("a")]})),
                        json!({"type": "tool/call", "data": {}}),
                    ],
                    0,
                )
            }),
            invalid(1, LogViolation::SpliceStart),
        ),
        (
            "log: the auditor maps an out-of-range splice to I1",
            Box::new(|| audit(&[json!({"type": "tool/call"}), insert("next-turn", 2, &["a"])])),
            Outcome::Audit {
                index: 1,
                rule: Rule::I1,
            },
        ),
        (
            "log: the auditor maps a duplicate pending id to I2",
            Box::new(|| {
                audit(&[
                    insert("next-turn", 0, &["a"]),
                    insert("next-step", 0, &["a"]),
                ])
            }),
            Outcome::Audit {
                index: 1,
                rule: Rule::I2,
            },
        ),
    ]
}

/// Crash repair: what it refuses at its line, and what it closes (S11, S13, S47, S50).
fn log_crash_repair() -> Vec<Case> {
    vec![
        (
            "log: crash repair refuses an out-of-range splice at its line (S11, S47)",
            Box::new(|| {
                repair_lines(&[
                    json!({"type": "model/output", "data": {}}),
                    spliced(
                        json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": []}),
                    ),
                ])
            }),
            Outcome::Repair(RepairError {
                line: 2,
                error: InvalidLog {
                    index: 1,
                    violation: LogViolation::SpliceRemovedCount,
                },
            }),
        ),
        (
            "log: crash repair refuses a duplicate pending id at its line (S13, S47)",
            Box::new(|| {
                repair_lines(&[
                    insert("next-turn", 0, &["a"]),
                    insert("next-turn", 1, &["a"]),
                ])
            }),
            Outcome::Repair(RepairError {
                line: 2,
                error: InvalidLog {
                    index: 1,
                    violation: LogViolation::AlreadyPending("a".into()),
                },
            }),
        ),
        (
            "log: crash repair closes an open step and turn (S50)",
            Box::new(|| {
                repair_lines(&[
                    insert("next-turn", 0, &["a"]),
                    turn_start(1),
                    spliced(
                        json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}),
                    ),
                    json!({"type": "step/start", "data": {"turn": 1, "step": 1}}),
                    json!({"type": "user/message", "data": m("a")}),
                    json!({"type": "model/output", "data": "partial"}),
                ])
            }),
            Outcome::Repaired {
                closers: 2,
                interrupted: Some(1),
            },
        ),
    ]
}

/// JSON-lines records (S50): torn tails, corruption, seq gaps and repeats.
fn records() -> Vec<Case> {
    vec![
        (
            "records: a truncated final record is a torn tail, left out",
            Box::new(|| read(b"{\"seq\":1,\"type\":\"a\"}\n{\"seq\":2,\"type\":\"turn/st")),
            Outcome::Read {
                records: 1,
                torn: Some(TornTail { line: 2, bytes: 24 }),
            },
        ),
        (
            "records: a truncated record before the end is corruption",
            Box::new(|| {
                read(b"{\"seq\":1,\"type\":\"a\"}\n{\"seq\":2,\"ty\n{\"seq\":3,\"type\":\"a\"}\n")
            }),
            Outcome::Corrupt(CorruptLine {
                line: 2,
                problem: Problem::NotJson(String::new()),
            }),
        ),
        (
            "records: a blank line is corruption",
            Box::new(|| read(b"{\"type\":\"a\"}\n\n")),
            Outcome::Corrupt(CorruptLine {
                line: 2,
                problem: Problem::NotJson(String::new()),
            }),
        ),
        (
            "records: invalid UTF-8 is corruption",
            Box::new(|| read(b"{\"type\":\"\xff\"}\n")),
            Outcome::Corrupt(CorruptLine {
                line: 1,
                problem: Problem::NotJson(String::new()),
            }),
        ),
        (
            "records: a JSON array is not a record",
            Box::new(|| read(b"{\"type\":\"a\"}\n[\"type\"]\n")),
            Outcome::Corrupt(CorruptLine {
                line: 2,
                problem: Problem::NotAnObject,
            }),
        ),
        (
            "records: a non-integer seq",
            Box::new(|| read(b"{\"seq\":-1,\"type\":\"a\"}\n")),
            Outcome::Corrupt(CorruptLine {
                line: 1,
                problem: Problem::BadSeq,
            }),
        ),
        (
            "records: a seq gap (a lost record)",
            Box::new(|| {
                read(b"{\"seq\":1,\"type\":\"a\"}\n{\"seq\":2,\"type\":\"a\"}\n{\"seq\":4,\"type\":\"a\"}\n")
            }),
            Outcome::Corrupt(CorruptLine {
                line: 3,
                problem: Problem::SeqGap {
                    previous: 2,
                    found: 4,
                },
            }),
        ),
        (
            "records: a repeated seq (a duplicated record)",
            Box::new(|| read(b"{\"seq\":1,\"type\":\"a\"}\n{\"seq\":1,\"type\":\"a\"}\n")),
            Outcome::Corrupt(CorruptLine {
                line: 2,
                problem: Problem::SeqGap {
                    previous: 1,
                    found: 1,
                },
            }),
        ),
        (
            "records: unknown record types are kept",
            Box::new(|| {
                read(b"{\"type\":\"model/output\"}\n{\"type\":\"x\",\"data\":[]}\n{\"no\":\"type\"}\n")
            }),
            Outcome::Read {
                records: 3,
                torn: None,
            },
        ),
        (
            "records: a line longer than any record a session writes (issue 49)",
            Box::new(|| {
                let mut bytes = b"{\"type\":\"a\"}\n".to_vec();
                bytes.resize(bytes.len() + MAX_LINE_BYTES + 1, b' ');
                bytes.extend_from_slice(b"{\"type\":\"a\"}\n");
                read(&bytes)
            }),
            Outcome::Corrupt(CorruptLine {
                line: 2,
                problem: Problem::TooLong(MAX_LINE_BYTES),
            }),
        ),
        (
            "records: a torn tail longer than any record is refused, not cut (issue 49)",
            Box::new(|| {
                let mut bytes = b"{\"type\":\"a\"}\n".to_vec();
                bytes.resize(bytes.len() + MAX_LINE_BYTES + 1, b'{');
                read(&bytes)
            }),
            Outcome::Corrupt(CorruptLine {
                line: 2,
                problem: Problem::TooLong(MAX_LINE_BYTES),
            }),
        ),
        (
            "records: a line nesting deeper than a record may (one TooDeep text)",
            Box::new(|| read(format!("{}{}\n", "[".repeat(128), "]".repeat(128)).as_bytes())),
            Outcome::Corrupt(CorruptLine {
                line: 1,
                problem: Problem::TooDeep(TooDeep {
                    depth: 128,
                    max: 127,
                }),
            }),
        ),
    ]
}

/// Inputs the machine rejects for their ids, guards and bounds (S13, S15, S54–S56).
fn input_identity_and_bounds() -> Vec<Case> {
    vec![
        (
            "input: a delivery of a pending id (S13)",
            Box::new(|| reject(|m| ok(m.inject(user("a"))), |m| ok(m.followup(user("a"))))),
            Outcome::Rejected(Rejected::AlreadyPending("a".into())),
        ),
        (
            "input: a prepend of an id pending in the other list (S13)",
            Box::new(|| {
                reject(
                    |m| ok(m.send(user("a"), Target::NextTurn, false, None)),
                    |m| ok(m.prepend(Target::NextStep, user("a"))),
                )
            }),
            Outcome::Rejected(Rejected::AlreadyPending("a".into())),
        ),
        (
            "input: a replacement taking an id pending elsewhere (S15)",
            Box::new(|| {
                reject(
                    |m| {
                        ok(m.inject(user("a")))?;
                        ok(m.inject(user("b")))
                    },
                    |m| {
                        ok(m.handle(Input::Replace {
                            id: "a".into(),
                            message: user("b").into(),
                        }))
                    },
                )
            }),
            Outcome::Rejected(Rejected::AlreadyPending("b".into())),
        ),
        (
            "input: a different message under a pending id (S56)",
            Box::new(|| {
                reject(
                    |m| ok(m.inject(user("a"))),
                    |m| ok(m.followup(Message::user("a", "not the same"))),
                )
            }),
            Outcome::Rejected(Rejected::Conflict("a".into())),
        ),
        (
            "input: a steer guarded by a turn that is not running (S54)",
            Box::new(|| {
                reject(
                    |_| Ok(()),
                    |m| {
                        let guard = Some(coxswain_core::Expect::Turn(1));
                        ok(m.send(user("a"), Target::NextStep, true, guard))
                    },
                )
            }),
            Outcome::Rejected(Rejected::TurnMismatch(coxswain_core::Expect::Turn(1))),
        ),
        (
            "input: a delivery into a list at the admission bound (S55)",
            Box::new(|| {
                let one = std::num::NonZeroUsize::MIN;
                let mut machine =
                    Machine::with_config(coxswain_core::Config::new().with_max_pending(one));
                ok(machine.inject(user("a"))).expect("the setup is accepted");
                let before = machine.clone();
                let result = ok(machine.inject(user("b")));
                assert_eq!(machine, before, "a rejected input changed the machine");
                Outcome::Rejected(result.expect_err("the input is rejected"))
            }),
            Outcome::Rejected(Rejected::Full {
                target: Target::NextStep,
                max_pending: std::num::NonZeroUsize::MIN,
            }),
        ),
    ]
}

/// Inputs out of order: answers with nothing or something else outstanding, maintenance, disposal
/// (S4, S43, S45).
fn input_out_of_order() -> Vec<Case> {
    vec![
        (
            "input: an answer with nothing outstanding (S4)",
            Box::new(|| reject(|_| Ok(()), |m| ok(m.answer_step(StepAnswer::Completed)))),
            Outcome::Rejected(Rejected::UnexpectedCompletion {
                answered: Completion::Answer(RequestKind::Step),
                outstanding: None,
            }),
        ),
        (
            "input: a pre-step answer while a step is outstanding (S4)",
            Box::new(|| reject(in_step, |m| ok(m.answer_pre_step(PreStepAnswer::Reject)))),
            Outcome::Rejected(Rejected::UnexpectedCompletion {
                answered: Completion::Answer(RequestKind::PreStep),
                outstanding: Some(Outstanding::Step { turn: 1, step: 1 }),
            }),
        ),
        (
            "input: a turnStopping answer while a step is outstanding (S4)",
            Box::new(|| {
                reject(in_step, |m| {
                    ok(m.answer_turn_stopping(TurnStoppingAnswer::Done))
                })
            }),
            Outcome::Rejected(Rejected::UnexpectedCompletion {
                answered: Completion::Answer(RequestKind::TurnStopping),
                outstanding: Some(Outstanding::Step { turn: 1, step: 1 }),
            }),
        ),
        (
            "input: endMaintenance with none active (S4, S43)",
            Box::new(|| reject(in_step, |m| ok(m.end_maintenance()))),
            Outcome::Rejected(Rejected::UnexpectedCompletion {
                answered: Completion::EndMaintenance,
                outstanding: Some(Outstanding::Step { turn: 1, step: 1 }),
            }),
        ),
        (
            "input: beginMaintenance while running (S43)",
            Box::new(|| reject(in_step, |m| ok(m.begin_maintenance()))),
            Outcome::Rejected(Rejected::Busy),
        ),
        (
            "input: beginMaintenance during maintenance (S43)",
            Box::new(|| reject(|m| ok(m.begin_maintenance()), |m| ok(m.begin_maintenance()))),
            Outcome::Rejected(Rejected::Busy),
        ),
        (
            "input: anything once disposed, before any other check (S45)",
            Box::new(|| {
                reject(
                    |m| ok(m.dispose()),
                    |m| ok(m.answer_step(StepAnswer::Completed)),
                )
            }),
            Outcome::Rejected(Rejected::AfterDisposal),
        ),
        (
            "input: a cancel once disposed (S45)",
            Box::new(|| {
                reject(
                    |m| ok(m.dispose()),
                    |m| ok(m.cancel(CancelCause::User, true)),
                )
            }),
            Outcome::Rejected(Rejected::AfterDisposal),
        ),
    ]
}

/// Input lines as JSON.
fn input_lines_as_json() -> Vec<Case> {
    vec![
        (
            "input JSON: truncated",
            Box::new(|| input_json(r#"{"followup":{"id":"a","source":{"#)),
            Outcome::Json(Category::Eof),
        ),
        (
            "input JSON: unknown input",
            Box::new(|| input_json(r#"{"launch":{}}"#)),
            Outcome::Json(Category::Data),
        ),
        (
            "input JSON: an answer of the wrong shape",
            Box::new(|| input_json(r#"{"step":"finished"}"#)),
            Outcome::Json(Category::Data),
        ),
        (
            "input JSON: not JSON",
            Box::new(|| input_json("{followup}")),
            Outcome::Json(Category::Syntax),
        ),
    ]
}

/// Issue 49: an id is shown elided in every error text that shows one (the first 64 characters,
/// `…` and its length), its control characters escaped; a line past the limit and a value too
/// deep read the same from every layer.
#[test]
fn long_ids_are_elided_and_the_limits_read_one_way() {
    let long: MessageId = "a".repeat(1 << 20).into();
    let shown = format!("`{}…` (1048576 bytes)", "a".repeat(64));
    assert_eq!(
        Rejected::AlreadyPending(long.clone()).to_string(),
        format!("message {shown} is already pending")
    );
    assert_eq!(
        Rejected::AlreadyDelivered(long.clone()).to_string(),
        format!("message {shown} was already delivered")
    );
    assert_eq!(
        Rejected::Conflict(long.clone()).to_string(),
        format!("message id {shown} is already used by a different message")
    );
    assert_eq!(
        LogViolation::AlreadyPending(long).to_string(),
        format!("splice makes {shown} pending twice (S13, S46)")
    );
    // 64 characters are shown whole; a 65th is elided (characters, not bytes).
    let at_limit = "é".repeat(64);
    assert_eq!(ShownId::new(&at_limit).to_string(), format!("`{at_limit}`"));
    assert_eq!(
        ShownId::new(&"é".repeat(65)).to_string(),
        format!("`{at_limit}…` (130 bytes)")
    );
    assert_eq!(
        Rejected::AlreadyPending("a\nb\u{1b}".into()).to_string(),
        "message `a\\nb\\u{1b}` is already pending"
    );
    // The restore names the long id elided too.
    let id = "b".repeat(100);
    let error = Machine::restore(
        &[
            insert("next-turn", 0, &[&id]),
            insert("next-step", 0, &[&id]),
        ],
        0,
    )
    .err()
    .map(|e| e.to_string());
    assert_eq!(
        error,
        Some(format!(
            "invalid log: event 1: splice makes `{}…` (100 bytes) pending twice (S13, S46)",
            "b".repeat(64)
        ))
    );
    assert_eq!(
        CorruptLine {
            line: 2,
            problem: Problem::TooLong(MAX_LINE_BYTES)
        }
        .to_string(),
        "line 2: the line is longer than 2097152 bytes (the longest record a session writes)"
    );
    // One TooDeep text: the reader's and the writer's are the same error.
    let deep = TooDeep {
        depth: 128,
        max: 127,
    };
    assert_eq!(
        deep.to_string(),
        "the value nests 128 levels deep; at most 127 fit in a log record"
    );
    assert_eq!(
        Problem::TooDeep(deep).to_string(),
        EncodeError::TooDeep(deep)
            .to_string()
            .trim_start_matches("cannot encode a record: ")
    );
}

#[test]
fn s5_s47_every_bad_input_gets_its_typed_error_and_none_panics() {
    let cases = catalogue();
    assert_eq!(cases.len(), 78, "the catalogue changed size");
    let mut failures = Vec::new();
    for (name, run, expected) in &cases {
        match catch_unwind(AssertUnwindSafe(run)) {
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                failures.push(format!("{name}: panicked: {message}"));
            }
            Ok(outcome) if !outcome.matches(expected) => {
                failures.push(format!(
                    "{name}:\n  expected {expected:?}\n  actual   {outcome:?}"
                ));
            }
            Ok(_) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
