//! The facts a page shows, pinned on small logs (SPEC rule numbers in each test).

use super::facts::{collect, Kind, Mark, Row};
use super::page::data_json;
use super::render;
use super::session::{Session, SessionError};

fn session(lines: &[&str]) -> Session {
    let bytes: Vec<u8> = lines
        .iter()
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect();
    Session::from_bytes("test.jsonl".into(), &bytes, None).unwrap()
}

const CANCELLED: &[&str] = &[
    r#"{"seq":1,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"m1","content":"hi","source":{"kind":"user"}}],"wakeup":true}}"#,
    r#"{"seq":2,"type":"turn/start","data":{"turn":1}}"#,
    r#"{"seq":3,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}"#,
    r#"{"seq":4,"type":"step/start","data":{"turn":1,"step":1}}"#,
    r#"{"seq":5,"type":"user/message","data":{"id":"m1","content":"hi","source":{"kind":"user"}}}"#,
    r#"{"seq":6,"type":"tool/call","data":{"name":"grep"}}"#,
    r#"{"seq":7,"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"s1","content":"stop"}]}}"#,
    r#"{"seq":8,"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"}}"#,
    r#"{"seq":9,"type":"step/end","data":{"turn":1,"step":1}}"#,
    r#"{"seq":10,"type":"turn/end","data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}}"#,
];

fn row(
    seq: u64,
    kind: Kind,
    (turn, step): (u64, u64),
    depths: (i64, i64),
    text: &str,
    mark: Mark,
    ids: &[&str],
) -> Row {
    Row(
        seq,
        seq as usize,
        kind,
        turn,
        step,
        depths.0,
        depths.1,
        text.into(),
        mark,
        ids.iter().map(|s| (*s).to_owned()).collect(),
    )
}

/// Every row: its lanes, the depths the core's restorer gives after it (S46–S49), its summary.
#[test]
fn rows_carry_lanes_depths_and_marks() {
    let facts = collect(&session(CANCELLED).records);
    assert_eq!(
        facts.rows,
        vec![
            row(
                1,
                Kind::Insert,
                (0, 0),
                (1, 0),
                "inbox next-turn @0 + m1 \"hi\" (waking)",
                Mark::None,
                &["m1"]
            ),
            row(
                2,
                Kind::TurnStart,
                (1, 0),
                (1, 0),
                "turn 1 starts",
                Mark::None,
                &[]
            ),
            row(
                3,
                Kind::Claim,
                (1, 0),
                (0, 0),
                "inbox next-turn @0 claim ×1: m1 by turn 1",
                Mark::None,
                &["m1"]
            ),
            row(
                4,
                Kind::StepStart,
                (1, 1),
                (0, 0),
                "step 1.1 starts",
                Mark::None,
                &[]
            ),
            row(
                5,
                Kind::UserMessage,
                (1, 1),
                (0, 0),
                "user/message m1 \"hi\"",
                Mark::None,
                &["m1"]
            ),
            row(
                6,
                Kind::Host,
                (1, 1),
                (0, 0),
                "tool/call {\"name\":\"grep\"}",
                Mark::None,
                &[]
            ),
            row(
                7,
                Kind::Insert,
                (1, 1),
                (0, 1),
                "inbox next-step @0 + s1 \"stop\"",
                Mark::None,
                &["s1"]
            ),
            row(
                8,
                Kind::Discard,
                (1, 1),
                (0, 0),
                "inbox next-step @0 discard ×1: s1",
                Mark::Discard,
                &["s1"]
            ),
            row(
                9,
                Kind::StepEnd,
                (1, 1),
                (0, 0),
                "step 1.1 ends",
                Mark::None,
                &[]
            ),
            row(
                10,
                Kind::TurnEnd,
                (1, 0),
                (0, 0),
                "turn 1 ends: aborted (user)",
                Mark::Abort,
                &[]
            ),
        ]
    );
}

/// A message's life: claimed by the turn that opened (S28), entered by its step (S30); a
/// discard followed by the turn's aborted end is that cancel's (S39).
#[test]
fn lives_say_who_claimed_and_why_discarded() {
    let facts = collect(&session(CANCELLED).records);
    let m1 = &facts.lives[0];
    assert_eq!(
        (m1.id.as_str(), m1.inserted, m1.claimed, &m1.entered),
        ("m1", 0, Some((2, 1)), &vec![4])
    );
    assert_eq!(m1.discarded, None);
    let s1 = &facts.lives[1];
    assert_eq!((s1.id.as_str(), s1.waking, s1.claimed), ("s1", false, None));
    assert_eq!(
        s1.discarded,
        Some((
            7,
            "discarded by the cancel (user) that aborted turn 1 (S39)".to_owned()
        ))
    );
    assert_eq!(
        (
            facts.summary.messages,
            facts.summary.claimed,
            facts.summary.discarded,
            facts.summary.aborted
        ),
        (2, 1, 1, 1)
    );
}

/// A log the auditor rejects: the banner names the line and rule; depths past it are unknown.
#[test]
fn a_violation_is_marked_and_depths_after_it_unknown() {
    let bad = session(&[
        CANCELLED[0],
        r#"{"seq":2,"type":"agent/inbox/spliced","data":{"target":"next-step","start":0,"inserted":[{"id":"m1"}]}}"#,
    ]);
    let facts = collect(&bad.records);
    assert_eq!(facts.rows[1].8, Mark::Violation);
    assert_eq!((facts.rows[1].5, facts.rows[1].6), (-1, -1));
    let json = data_json(&bad);
    assert!(json.contains(
        r#""verdict":{"ok":false,"text":"line 2: I2 identity (S13): splice makes `m1` pending twice (S13, S46)","repair":[],"line":2}"#
    ), "{json}");
}

/// A repaired turn (S50) is marked; a page embeds no `</script>` from the data, and fetches
/// nothing (its CSP allows no source).
#[test]
fn the_page_is_self_contained() {
    let log = session(&[
        r#"{"seq":1,"type":"agent/inbox/spliced","data":{"target":"next-turn","start":0,"inserted":[{"id":"x","content":"</script><script>alert(1)</script>"}],"wakeup":true}}"#,
        r#"{"seq":2,"type":"turn/start","data":{"turn":1}}"#,
        r#"{"seq":3,"type":"turn/end","data":{"turn":1,"reason":{"kind":"interrupted"}}}"#,
    ]);
    let facts = collect(&log.records);
    assert_eq!(
        facts.rows[2].7,
        "turn 1 ends: interrupted (crash repair, S50)"
    );
    assert_eq!(facts.rows[2].8, Mark::Repair);
    let page = render(&log);
    assert_eq!(
        page.matches("</script>").count(),
        2,
        "only the two script elements close"
    );
    assert!(page.contains("default-src 'none'"));
    assert!(!page.contains("http://") && !page.contains("https://"));
    assert!(!page.contains("{{"), "every placeholder filled");
}

/// A long log is aggregated into at most OVERVIEW_BUCKETS columns.
#[test]
fn the_overview_is_bounded() {
    let mut lines = Vec::new();
    for turn in 1..=1000u64 {
        lines.push(format!(
            r#"{{"seq":{},"type":"turn/start","data":{{"turn":{turn}}}}}"#,
            2 * turn - 1
        ));
        lines.push(format!(
            r#"{{"seq":{},"type":"turn/end","data":{{"turn":{turn},"reason":{{"kind":"completed"}}}}}}"#,
            2 * turn
        ));
    }
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let facts = collect(&session(&refs).records);
    assert_eq!(facts.overview.per, 2);
    assert_eq!(facts.overview.turn.len(), 1000);
    assert!(
        facts.overview.turn.iter().all(|&t| t == 0),
        "every bucket ends a turn"
    );
}

#[test]
fn segment_logs_need_a_session() {
    let line = r#"{"session":"a","seq":1,"type":"turn/start","data":{"turn":1}}"#;
    let bytes = format!("{line}\n").into_bytes();
    assert_eq!(
        Session::from_bytes("seg.jsonl".into(), &bytes, None).unwrap_err(),
        SessionError::Session(
            "seg.jsonl is a shared segment log: pick a session with --session (a)".into()
        )
    );
    let one = Session::from_bytes("seg.jsonl".into(), &bytes, Some("a")).unwrap();
    assert_eq!(
        (one.name.as_str(), one.records.len()),
        ("seg.jsonl · session a", 1)
    );
    assert_eq!(
        Session::from_bytes("seg.jsonl".into(), &bytes, Some("b")).unwrap_err(),
        SessionError::Session("no session b in seg.jsonl".into())
    );
}

/// A fixture log of `tests/fixtures/logs/` (shared with `verify`'s tests).
fn fixture(name: &str) -> Session {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/logs")
        .join(name);
    Session::from_file(&path, None).unwrap()
}

/// Each id's fate at the log's end, on its last life, by id.
fn fates(facts: &super::facts::Facts) -> Vec<(&str, Option<&str>, Option<&str>)> {
    facts
        .lives
        .iter()
        .map(|life| {
            (
                life.id.as_str(),
                life.redelivered.as_deref(),
                life.fate.as_deref(),
            )
        })
        .collect()
}

/// S59: the splices crash repair appended to redeliver x, s and q (allowance 1) are marked as
/// repair's, with their count; each id's last life carries the fate the core answers on the
/// restored log (S58, `Fate::to_json`): the redelivered ids are pending again, the earlier
/// lives (whose records the redelivery dropped, S53) carry none.
#[test]
fn s58_s59_redelivered_items_are_marked_and_every_message_has_its_fate() {
    let facts = collect(&fixture("redelivered.jsonl").records);
    assert_eq!(
        facts.rows[15..],
        [
            row(
                16,
                Kind::TurnEnd,
                (2, 0),
                (1, 0),
                "turn 2 ends: interrupted (crash repair, S50)",
                Mark::Repair,
                &[]
            ),
            row(
                17,
                Kind::Insert,
                (0, 0),
                (1, 1),
                "inbox next-step @0 + x \"ctx x\", redelivered (1) by crash repair (S59)",
                Mark::Repair,
                &["x"]
            ),
            row(
                18,
                Kind::Insert,
                (0, 0),
                (1, 2),
                "inbox next-step @1 + s \"look here\" (waking), redelivered (1) by crash repair \
                 (S59)",
                Mark::Repair,
                &["s"]
            ),
            row(
                19,
                Kind::Insert,
                (0, 0),
                (2, 2),
                "inbox next-turn @0 + q \"later\", redelivered (1) by crash repair (S59)",
                Mark::Repair,
                &["q"]
            ),
        ]
    );
    let completed = r#"{"claimed":{"end":"completed","step":1,"turn":1}}"#;
    assert_eq!(
        fates(&facts),
        [
            ("a", None, Some(completed)),
            ("x", None, None),
            ("q", None, None),
            ("s", None, None),
            ("b", None, Some(r#"{"pending":"next-turn"}"#)),
            ("x", Some("1"), Some(r#"{"pending":"next-step"}"#)),
            ("s", Some("1"), Some(r#"{"pending":"next-step"}"#)),
            ("q", Some("1"), Some(r#"{"pending":"next-turn"}"#)),
        ]
    );
    assert_eq!(facts.fates_after, "");
    // The page embeds them for its life cards.
    let json = data_json(&fixture("redelivered.jsonl"));
    assert!(
        json.contains(r#""redelivered":"1","fate":"{\"pending\":\"next-step\"}"}"#),
        "{json}"
    );
    // A count that is not an integer is still a splice restore reads (S46): shown as written.
    let facts = collect(&fixture("redelivery-not-a-count.jsonl").records);
    assert_eq!(
        (
            facts.rows[18].2,
            facts.rows[18].7.as_str(),
            facts.rows[18].8
        ),
        (
            Kind::Insert,
            "inbox next-turn @0 + q \"later\", redelivered (\"once\") by crash repair (S59)",
            Mark::Repair
        )
    );
    assert_eq!(
        fates(&facts)[7],
        ("q", Some("\"once\""), Some(r#"{"pending":"next-turn"}"#))
    );
}

/// S58, S50: a log that ends inside a turn is closed by crash repair's closers (no redelivery)
/// to ask the fates, and the page says so: turn 2's claims end `interrupted`. Past a
/// violation nothing restores, so no fate is shown.
#[test]
fn s58_fates_of_a_log_that_needs_repair_and_of_a_broken_log() {
    let facts = collect(&fixture("crashed-before-step.jsonl").records);
    let interrupted = r#"{"claimed":{"end":"interrupted","turn":2}}"#;
    assert_eq!(
        fates(&facts),
        [
            (
                "a",
                None,
                Some(r#"{"claimed":{"end":"completed","step":1,"turn":1}}"#)
            ),
            ("x", None, Some(interrupted)),
            ("q", None, Some(interrupted)),
            ("s", None, Some(interrupted)),
            ("b", None, Some(r#"{"pending":"next-turn"}"#)),
        ]
    );
    assert_eq!(
        facts.fates_after,
        "after crash repair closes turn 2 `interrupted`, without redelivery (S50)"
    );
    let facts = collect(&fixture("redelivery-already-pending.jsonl").records);
    assert_eq!(facts.rows[19].8, Mark::Violation);
    assert!(facts.lives.iter().all(|life| life.fate.is_none()));
    assert_eq!(facts.fates_after, "");
}

/// Amended I5: a `user/message` the host wrote between turns is its own (said so), and enters
/// no step of any message's life; one inside a step still does.
#[test]
fn i5_a_host_user_message_between_turns_is_shown_as_the_hosts() {
    let facts = collect(&fixture("host-message-between-turns.jsonl").records);
    assert_eq!(
        facts.rows[8],
        row(
            9,
            Kind::UserMessage,
            (0, 0),
            (0, 0),
            "user/message summary \"the story so far\" (the host's, between turns)",
            Mark::None,
            &["summary"]
        )
    );
    assert_eq!(
        facts.rows[13].7,
        "user/message summary \"the story so far\""
    );
    assert!(facts.rows.iter().all(|row| row.8 == Mark::None));
    assert_eq!(facts.lives[0].entered, vec![4]);
}
