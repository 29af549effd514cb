//! `coxswain verify LOG.jsonl`: checks a durable log (ours, or one another implementation wrote
//! in the same vocabulary) against I1, I2, I5 and the splice rules with the log auditor.
//!
//! Prints `ok (N events, T turns)`, or the first violation as `line L: <rule>: <detail>`.
//! Exit status: 0 ok; 1 a violation or a corrupt line (or the file cannot be read); 2 the log is
//! sound but needs crash repair first (a torn final line, or a turn left open; S50).

use std::path::Path;
use std::process::ExitCode;

use coxswain_log::{parse, Auditor};

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
    let mut auditor = Auditor::new();
    for record in &parsed.records {
        if let Err(violation) = auditor.push_json(&record.event) {
            return Verdict::Violation {
                line: record.line,
                message: format!("{}: {}", violation.rule, violation.detail),
            };
        }
    }
    let mut repair = Vec::new();
    if let Some(torn) = parsed.torn {
        repair.push(format!("{torn} and will be dropped"));
    }
    if let Some(turn) = auditor.position().open_turn() {
        let closers = auditor.position().closers().len();
        repair.push(format!(
            "turn {turn} is open and will be closed `interrupted` ({closers} closers)"
        ));
    }
    Verdict::Ok {
        events: parsed.records.len(),
        turns: auditor.position().last_turn(),
        repair,
    }
}

pub(crate) fn run(path: &Path) -> ExitCode {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("cannot read {}: {error}", path.display());
            return ExitCode::FAILURE;
        }
    };
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
}
