//! `coxswain verify LOG.jsonl`: checks a durable log (ours, or one another implementation wrote
//! in the same vocabulary) against I1, I2, I5 and the splice rules with the log auditor.
//!
//! Prints `ok (N events, T turns)`, or the first violation as `line L: <rule>: <detail>`.
//! Exit status: 0 ok; 1 a violation or a corrupt line (or the file cannot be read); 2 the log is
//! sound but needs crash repair first (a torn final line, or a turn left open; S50). A path that
//! is not a regular file (`PATH: not a regular file (a FIFO)`), or a line longer than any record
//! a session writes (`PATH: line L is longer than 2097152 bytes (…)`), is refused on stderr
//! before anything is audited ([`crate::logfile`]).
//!
//! A shared segment log (its lines name their `session`) is audited per session:
//! `--session ID` audits one session (line numbers are the file's); without it every session
//! gets one verdict line, `session ID: …`, and the exit status is the worst of them.

use std::path::Path;
use std::process::ExitCode;

use coxswain_log::{is_segment, parse, split_segment, Auditor, Record, TornTail};

/// What verifying a log found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Sound: `events` records, `turns` turns; what crash repair would still have to do.
    Ok {
        events: usize,
        turns: u64,
        repair: Vec<String>,
    },
    /// The first broken line.
    Violation { line: usize, message: String },
}

pub(crate) fn verify_bytes(bytes: &[u8]) -> Verdict {
    let parsed = match parse(bytes) {
        Ok(parsed) => parsed,
        Err(corrupt) => {
            return Verdict::Violation {
                line: corrupt.line,
                message: format!("not a record: {}", corrupt.problem),
            }
        }
    };
    verify_records(&parsed.records, parsed.torn)
}

/// Audits one session's records (of a plain log, or one session of a segment log).
pub(crate) fn verify_records(records: &[Record], torn: Option<TornTail>) -> Verdict {
    let mut auditor = Auditor::new();
    for record in records {
        if let Err(violation) = auditor.push_json(&record.event) {
            return Verdict::Violation {
                line: record.line,
                message: format!("{}: {}", violation.rule, violation.detail),
            };
        }
    }
    let mut repair = Vec::new();
    if let Some(torn) = torn {
        repair.push(format!("{torn} and will be dropped"));
    }
    if let Some(turn) = auditor.position().open_turn() {
        let closers = auditor.position().closers().len();
        repair.push(format!(
            "turn {turn} is open and will be closed `interrupted` ({closers} closers)"
        ));
    }
    Verdict::Ok {
        events: records.len(),
        turns: auditor.position().last_turn(),
        repair,
    }
}

/// Verifying a segment log: one verdict per session, or why it cannot be split.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SegmentVerdict {
    /// Every session asked for, with its verdict.
    Sessions(Vec<(String, Verdict)>),
    /// A line is not a record of a session.
    Corrupt { line: usize, message: String },
    /// `--session` names a session the file has no record of.
    NoSession(String),
}

/// Audits a segment log per session (`only`: just that one). A torn final line belongs to no
/// session that can be named: every verdict reports it.
pub(crate) fn verify_segment(bytes: &[u8], only: Option<&str>) -> SegmentVerdict {
    let parsed = match split_segment(bytes) {
        Ok(parsed) => parsed,
        Err(corrupt) => {
            return SegmentVerdict::Corrupt {
                line: corrupt.line,
                message: format!("not a record: {}", corrupt.problem),
            }
        }
    };
    let mut verdicts = Vec::new();
    for (session, records) in &parsed.sessions {
        if only.is_none_or(|only| only == session) {
            verdicts.push((session.clone(), verify_records(records, parsed.torn)));
        }
    }
    match only {
        Some(only) if verdicts.is_empty() => SegmentVerdict::NoSession(only.to_owned()),
        _ => SegmentVerdict::Sessions(verdicts),
    }
}

/// Prints a verdict as one line (with `prefix`); its exit code: 0, 1 or 2.
pub(crate) fn report(prefix: &str, verdict: &Verdict) -> u8 {
    match verdict {
        Verdict::Violation { line, message } => {
            println!("{prefix}line {line}: {message}");
            1
        }
        Verdict::Ok {
            events,
            turns,
            repair,
        } => {
            if repair.is_empty() {
                println!("{prefix}ok ({events} events, {turns} turns)");
                0
            } else {
                println!(
                    "{prefix}ok ({events} events, {turns} turns); needs crash repair: {}",
                    repair.join("; ")
                );
                2
            }
        }
    }
}

pub(crate) fn run(path: &Path, session: Option<&str>) -> ExitCode {
    let bytes = match crate::logfile::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    };
    if is_segment(&bytes) || (session.is_some() && bytes.is_empty()) {
        return match verify_segment(&bytes, session) {
            SegmentVerdict::Corrupt { line, message } => {
                println!("line {line}: {message}");
                ExitCode::FAILURE
            }
            SegmentVerdict::NoSession(session) => {
                println!("no session {session} in {}", path.display());
                ExitCode::FAILURE
            }
            SegmentVerdict::Sessions(verdicts) => {
                let worst = verdicts
                    .iter()
                    .map(|(id, verdict)| {
                        let prefix = if session.is_some() {
                            String::new()
                        } else {
                            format!("session {id}: ")
                        };
                        report(&prefix, verdict)
                    })
                    .fold(0, |worst, code| match (worst, code) {
                        (1, _) | (_, 1) => 1,
                        (2, _) | (_, 2) => 2,
                        _ => 0,
                    });
                ExitCode::from(worst)
            }
        };
    }
    if session.is_some() {
        println!(
            "{} is not a segment log (its lines name no `session`)",
            path.display()
        );
        return ExitCode::FAILURE;
    }
    match verify_bytes(&bytes) {
        Verdict::Violation { line, message } => {
            println!("line {line}: {message}");
            ExitCode::FAILURE
        }
        Verdict::Ok {
            events,
            turns,
            repair,
        } => {
            println!("ok ({events} events, {turns} turns)");
            if repair.is_empty() {
                ExitCode::SUCCESS
            } else {
                println!("needs crash repair: {}", repair.join("; "));
                ExitCode::from(2)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPLICE_A: &str = r#"{"seq":1,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"a"}],"wakeup":true}}"#;

    fn lines(lines: &[&str]) -> Vec<u8> {
        lines
            .iter()
            .flat_map(|l| format!("{l}\n").into_bytes())
            .collect()
    }

    #[test]
    fn a_sound_log_is_ok() {
        let log = lines(&[
            SPLICE_A,
            r#"{"seq":2,"type":"turn/start","data":{"turn":1}}"#,
            r#"{"seq":3,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}"#,
            r#"{"seq":4,"type":"model/output","data":"hi"}"#,
            r#"{"seq":5,"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ]);
        assert_eq!(
            verify_bytes(&log),
            Verdict::Ok {
                events: 5,
                turns: 1,
                repair: vec![]
            }
        );
    }

    #[test]
    fn the_first_violation_names_its_line_and_rule() {
        let log = lines(&[
            SPLICE_A,
            r#"{"seq":2,"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"a"}]}}"#,
        ]);
        assert_eq!(
            verify_bytes(&log),
            Verdict::Violation {
                line: 2,
                message: "I2 identity (S13): splice makes `a` pending twice (S13, S46)".into()
            }
        );
        let log = lines(&[SPLICE_A, "garbage", SPLICE_A]);
        assert!(matches!(
            verify_bytes(&log),
            Verdict::Violation { line: 2, .. }
        ));
    }

    #[test]
    fn a_torn_tail_and_an_open_turn_need_repair() {
        let mut log = lines(&[
            SPLICE_A,
            r#"{"seq":2,"type":"turn/start","data":{"turn":1}}"#,
        ]);
        log.extend_from_slice(br#"{"seq":3,"ty"#);
        assert_eq!(
            verify_bytes(&log),
            Verdict::Ok {
                events: 2,
                turns: 1,
                repair: vec![
                    "line 3 is torn (12 bytes) and will be dropped".into(),
                    "turn 1 is open and will be closed `interrupted` (1 closers)".into()
                ]
            }
        );
    }

    /// A fixture log of `tests/fixtures/logs/`, verified.
    fn fixture(name: &str) -> Verdict {
        let path = format!("{}/tests/fixtures/logs/{name}", env!("CARGO_MANIFEST_DIR"));
        verify_bytes(&std::fs::read(&path).unwrap())
    }

    fn ok(events: usize, turns: u64) -> Verdict {
        Verdict::Ok {
            events,
            turns,
            repair: vec![],
        }
    }

    /// Amended I5: a `user/message` a host wrote between turns (the TypeScript system's
    /// compaction summary) is accepted; one inside an open turn but outside its open step is
    /// still a violation, before the first step or between two steps.
    #[test]
    fn i5_a_host_user_message_between_turns_is_accepted_inside_a_turn_it_is_not() {
        assert_eq!(fixture("host-message-between-turns.jsonl"), ok(17, 2));
        assert_eq!(
            fixture("message-in-turn-before-step.jsonl"),
            Verdict::Violation {
                line: 4,
                message: "I5 turn enclosure: user/message `summary` outside an open step \
                          (turn 1 open after 0 steps)"
                    .into()
            }
        );
        assert_eq!(
            fixture("message-between-steps.jsonl"),
            Verdict::Violation {
                line: 7,
                message: "I5 turn enclosure: user/message `summary` outside an open step \
                          (turn 1 open after 1 steps)"
                    .into()
            }
        );
    }

    /// S59: the redelivery splices crash repair appends (allowance 1) are accepted; the fixture
    /// is exactly what the core's repair writes after the crashed log. A redelivery splice that
    /// makes an id pending twice is I2's violation like any splice; one whose count is not an
    /// integer is still a splice S46 reads (`redelivery` is an extra key, counted whatever its
    /// value), so it is no violation either.
    #[test]
    fn s59_redelivery_splices_as_repair_writes_them_are_accepted() {
        let crashed = parse(
            &std::fs::read(format!(
                "{}/tests/fixtures/logs/crashed-before-step.jsonl",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            verify_records(&crashed.records, None),
            Verdict::Ok {
                events: 15,
                turns: 2,
                repair: vec!["turn 2 is open and will be closed `interrupted` (1 closers)".into()],
            }
        );
        let mut restorer = coxswain_core::Restorer::new(0);
        for record in &crashed.records {
            restorer.push_json(&record.event).unwrap();
        }
        let appended: Vec<serde_json::Value> = restorer
            .repair(1)
            .iter()
            .map(|event| serde_json::to_value(event).unwrap())
            .collect();
        let repaired = parse(
            &std::fs::read(format!(
                "{}/tests/fixtures/logs/redelivered.jsonl",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap(),
        )
        .unwrap();
        let tail: Vec<serde_json::Value> = repaired.records[15..]
            .iter()
            .map(|record| {
                serde_json::json!({"type": record.event["type"], "data": record.event["data"]})
            })
            .collect();
        assert_eq!(appended, tail);
        assert_eq!(appended.len(), 4, "the closer and three redelivery splices");
        assert_eq!(fixture("redelivered.jsonl"), ok(19, 2));
        assert_eq!(
            fixture("redelivery-already-pending.jsonl"),
            Verdict::Violation {
                line: 20,
                message: "I2 identity (S13): splice makes `q` pending twice (S13, S46)".into()
            }
        );
        assert_eq!(fixture("redelivery-not-a-count.jsonl"), ok(19, 2));
    }

    fn in_session(session: &str, line: &str) -> String {
        line.replacen(
            "\"seq\":",
            &format!("\"session\":\"{session}\",\"seq\":"),
            1,
        )
    }

    #[test]
    fn a_segment_log_is_verified_per_session() {
        let log = lines(&[
            &in_session("a", SPLICE_A),
            &in_session("b", SPLICE_A),
            &in_session("a", r#"{"seq":2,"type":"turn/start","data":{"turn":1}}"#),
            &in_session(
                "b",
                r#"{"seq":2,"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"a"}]}}"#,
            ),
        ]);
        assert!(is_segment(&log));
        let a = Verdict::Ok {
            events: 2,
            turns: 1,
            repair: vec!["turn 1 is open and will be closed `interrupted` (1 closers)".into()],
        };
        let b = Verdict::Violation {
            line: 4,
            message: "I2 identity (S13): splice makes `a` pending twice (S13, S46)".into(),
        };
        assert_eq!(
            verify_segment(&log, None),
            SegmentVerdict::Sessions(vec![("a".into(), a), ("b".into(), b)])
        );
        assert_eq!(
            verify_segment(&log, Some("b")),
            SegmentVerdict::Sessions(vec![(
                "b".into(),
                Verdict::Violation {
                    line: 4,
                    message: "I2 identity (S13): splice makes `a` pending twice (S13, S46)".into(),
                }
            )])
        );
        assert_eq!(
            verify_segment(&log, Some("c")),
            SegmentVerdict::NoSession("c".into())
        );
        let mut torn = lines(&[&in_session("a", SPLICE_A)]);
        torn.extend_from_slice(br#"{"seq":2,"se"#);
        assert_eq!(
            verify_segment(&torn, Some("a")),
            SegmentVerdict::Sessions(vec![(
                "a".into(),
                Verdict::Ok {
                    events: 1,
                    turns: 0,
                    repair: vec!["line 2 is torn (12 bytes) and will be dropped".into()],
                }
            )])
        );
        let gap = lines(&[
            &in_session("a", SPLICE_A),
            &in_session("a", r#"{"seq":3,"type":"turn/start","data":{"turn":1}}"#),
        ]);
        assert!(matches!(
            verify_segment(&gap, None),
            SegmentVerdict::Corrupt { line: 2, .. }
        ));
    }
}
