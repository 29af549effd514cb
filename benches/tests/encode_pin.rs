//! The record encoder (`core/log/src/encode.rs`) pinned byte for byte against `serde_json`, the
//! path it replaced ([`coxswain_benches::serde_json_line`]): on every record type,
//! hostile strings and numbers, the deepest and the longest records, every event and message of
//! the conformance corpus and the restore seeds, and generated messages. Admission's
//! [`measure_message`] is pinned against `serde_json`'s output the same way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use coxswain_core::{
    CancelCause, Details, ErrorInfo, Event, Message, Splice, SpliceOutcome, Target, TurnEndReason,
};
use coxswain_log::{
    encode, encode_in_session, encode_message, measure, measure_message, EncodeError, Entry,
    HostEvent, Measure, TooDeep, MAX_DATA_DEPTH, MAX_DEPTH, MAX_LINE_BYTES,
};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// The new encoder's line and the reference's, for plain and segment records, must be equal
/// (bytes, and the same error when refused, leaving `out` as it was).
fn pin(seq: u64, entry: &Entry) {
    for session in [None, Some("s-1"), Some("\u{1}\"odd\\ session\u{2028}")] {
        let mut new = b"before".to_vec();
        let result = match session {
            None => encode(seq, entry, &mut new),
            Some(session) => encode_in_session(session, seq, entry, &mut new),
        };
        let mut old = b"before".to_vec();
        let expected = coxswain_benches::serde_json_line(seq, session, entry, &mut old);
        assert_eq!(result, expected, "{entry:?}");
        assert_eq!(
            String::from_utf8_lossy(&new),
            String::from_utf8_lossy(&old),
            "{entry:?}"
        );
    }
}

fn pin_message(message: &Message) {
    let reference = serde_json::to_vec(message).unwrap();
    let mut out = Vec::new();
    encode_message(message, &mut out);
    assert_eq!(
        String::from_utf8_lossy(&out),
        String::from_utf8_lossy(&reference)
    );
    assert_eq!(measure_message(message), measure(message), "{message:?}");
    assert_eq!(measure_message(message).bytes, reference.len());
}

/// Strings serde_json escapes, and strings it leaves alone.
fn hostile_strings() -> Vec<String> {
    let mut strings: Vec<String> = vec![
        String::new(),
        "plain".into(),
        "\"quoted\" and \\back\\slashed\\".into(),
        "\u{0}\u{1}\u{7}\u{8}\t\n\u{b}\u{c}\r\u{e}\u{1b}\u{1f} \u{7f}".into(),
        "/slash/ </script> \u{2028}\u{2029} line separators".into(),
        "emoji 🦀👩‍👩‍👧 flags 🇫🇷 combining e\u{301} bom \u{feff} nbsp\u{a0}".into(),
        "\u{ffff}\u{10ffff}\u{fffd} 中文 العربية".into(),
        "ends with a backslash \\".into(),
        "\\u0000 is text here, not an escape".into(),
        "[{\"nested\": \"brackets\"}]".into(),
    ];
    strings.push((0u8..0x80).map(char::from).collect());
    strings
}

fn numbers() -> Vec<Value> {
    vec![
        json!(0),
        json!(1),
        json!(-1),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(i64::MAX),
        json!(1e300),
        json!(-0.0),
        json!(0.1),
        json!(1e-7),
        json!(1.5),
        json!(-2.5e-300),
        json!(f64::MAX),
        json!(f64::MIN_POSITIVE),
        json!(5e-324),
        json!(1e21),
        json!(1e20),
        json!(123456789.125),
        json!(100.0),
    ]
}

fn nested(levels: usize) -> Value {
    let mut value = json!(1);
    for index in 0..levels {
        value = if index % 2 == 0 {
            Value::Array(vec![value])
        } else {
            json!({ "k": value })
        };
    }
    value
}

fn splice(inserted: Vec<Message>) -> Splice {
    Splice {
        target: Target::NextTurn,
        start: 0,
        removed_count: 0,
        inserted: inserted.into_iter().map(Arc::new).collect(),
        outcome: None,
        wakeup: false,
        redelivery: None,
    }
}

fn details(fields: Value) -> Details {
    match fields {
        Value::Object(map) => Details::from(map),
        _ => Details::default(),
    }
}

/// Every record type, every optional field present and absent, every reason and cause.
fn every_record() -> Vec<Entry> {
    let user = Message::user("m1", "hi");
    let rich = Message::new(
        "m\"2\n",
        json!({"kind": "plugin", "name": "ctx", "extra": [1, 2.5, null, true, false]}),
        json!({"text": "x", "parts": [], "empty": {}, "n": -3}),
    );
    let mut fields = Map::new();
    fields.insert("zeta".into(), json!(1));
    fields.insert("alpha".into(), json!({"b": 1, "a": 2}));
    fields.insert("content".into(), json!("c"));
    let many = Message::from_fields("m3", fields);
    let bare = Message::from_fields("only-id", Map::new());
    let mut entries = vec![
        Entry::Machine(Event::Spliced(splice(vec![user.clone()]))),
        Entry::Machine(Event::Spliced(splice(vec![]))),
        Entry::Machine(Event::Spliced(Splice {
            target: Target::NextStep,
            start: 7,
            removed_count: 3,
            inserted: [Arc::new(rich.clone()), Arc::new(many.clone())]
                .into_iter()
                .collect(),
            outcome: Some(SpliceOutcome::Canceled),
            wakeup: true,
            redelivery: Some(2),
        })),
        Entry::Machine(Event::Spliced(Splice {
            target: Target::NextTurn,
            start: usize::MAX,
            removed_count: usize::MAX,
            inserted: Default::default(),
            outcome: None,
            wakeup: false,
            redelivery: Some(u64::MAX),
        })),
        Entry::Machine(Event::TurnStart { turn: 1 }),
        Entry::Machine(Event::TurnStart { turn: u64::MAX }),
        Entry::Machine(Event::StepStart { turn: 0, step: 10 }),
        Entry::Machine(Event::UserMessage(Arc::new(user))),
        Entry::Machine(Event::UserMessage(Arc::new(rich))),
        Entry::Machine(Event::UserMessage(Arc::new(many))),
        Entry::Machine(Event::UserMessage(Arc::new(bare))),
        Entry::Machine(Event::StepEnd {
            turn: 12345678901234,
            step: 9,
        }),
    ];
    let causes = [
        CancelCause::User,
        CancelCause::Parent,
        CancelCause::Disposed,
        CancelCause::Hook {
            reason: "hook \"said\" no\n".into(),
        },
    ];
    let errors = [
        ErrorInfo::new("model unavailable", "upstream-503"),
        ErrorInfo {
            details: details(json!({"status": 503, "retryAfterMs": 1.5, "cause": {"x": [1]}})),
            ..ErrorInfo::new("m\u{1}", "c\\")
        },
    ];
    let mut reasons = vec![
        TurnEndReason::Completed,
        TurnEndReason::MaxTokens,
        TurnEndReason::Blocked,
        TurnEndReason::Interrupted,
    ];
    reasons.extend(
        causes
            .into_iter()
            .map(|reason| TurnEndReason::Aborted { reason }),
    );
    reasons.extend(
        errors
            .into_iter()
            .map(|error| TurnEndReason::Error { error }),
    );
    for reason in reasons {
        entries.push(Entry::Machine(Event::TurnEnd { turn: 3, reason }));
    }
    for data in [
        json!(null),
        json!(true),
        json!(false),
        json!([]),
        json!({}),
        json!({"text": "x"}),
        json!([[], {}, [{}], {"a": []}]),
    ] {
        entries.push(Entry::Host(HostEvent::new("model/output", data).unwrap()));
    }
    for text in hostile_strings() {
        entries.push(Entry::Host(
            HostEvent::new(text.clone(), json!({ text.clone(): text.clone() })).unwrap(),
        ));
        entries.push(Entry::Machine(Event::UserMessage(Arc::new(Message::new(
            text.as_str(),
            json!({"kind": text.clone()}),
            json!(text.clone()),
        )))));
    }
    entries.push(Entry::Host(
        HostEvent::new("numbers", Value::Array(numbers())).unwrap(),
    ));
    for number in numbers() {
        entries.push(Entry::Host(HostEvent::new("n", number).unwrap()));
    }
    entries
}

#[test]
fn every_record_type_is_serde_jsons_bytes() {
    let entries = every_record();
    assert!(entries.len() > 60, "{}", entries.len());
    for (index, entry) in entries.iter().enumerate() {
        for seq in [1, index as u64 + 1, 999_999_999, u64::MAX - 1] {
            pin(seq, entry);
        }
        if let Entry::Machine(Event::UserMessage(message)) = entry {
            pin_message(message);
        }
    }
}

/// Integers around every digit count, in every place a record holds one.
#[test]
fn every_integer_width_is_serde_jsons_digits() {
    let mut numbers: Vec<u64> = (0..=1_000).collect();
    for power in 1..=19 {
        let ten = 10u64.pow(power);
        numbers.extend([
            ten - 1,
            ten,
            ten + 1,
            ten + 99,
            ten.saturating_mul(3).saturating_add(7),
        ]);
    }
    numbers.extend([u64::MAX - 1, u64::MAX]);
    for n in numbers {
        let seq = n.clamp(1, u64::MAX - 1);
        pin(seq, &Entry::Machine(Event::TurnStart { turn: n }));
        pin(
            seq,
            &Entry::Machine(Event::StepEnd {
                turn: n,
                step: n / 7,
            }),
        );
        let start = usize::try_from(n).unwrap_or(usize::MAX);
        pin(
            seq,
            &Entry::Machine(Event::Spliced(Splice {
                start,
                removed_count: start,
                redelivery: Some(n),
                ..splice(vec![])
            })),
        );
    }
}

/// The escapes written out, not only compared: a change in serde_json's escaping would show
/// here as well as in the pin.
#[test]
fn the_escapes_are_serde_jsons() {
    let text = "\u{0}\u{8}\t\n\u{c}\r\u{1f}\"\\/\u{7f}é\u{2028}🦀";
    let entry = Entry::Host(HostEvent::new("x", json!(text)).unwrap());
    let mut out = Vec::new();
    encode(1, &entry, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"seq\":1,\"type\":\"x\",\"data\":\"\\u0000\\b\\t\\n\\f\\r\\u001f\\\"\\\\/\u{7f}é\u{2028}🦀\"}\n"
    );
    let mut out = Vec::new();
    let entry = Entry::Host(HostEvent::new("n", Value::Array(numbers())).unwrap());
    encode(2, &entry, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "{\"seq\":2,\"type\":\"n\",\"data\":[0,1,-1,18446744073709551615,-9223372036854775808,\
         9223372036854775807,1e+300,-0.0,0.1,1e-7,1.5,-2.5e-300,1.7976931348623157e+308,\
         2.2250738585072014e-308,5e-324,1e+21,1e+20,123456789.125,100.0]}\n"
    );
}

/// The deepest record and the longest line each encoder takes, one more level or byte refused
/// with the same error, nothing written.
#[test]
fn the_limits_refuse_alike() {
    for levels in [MAX_DATA_DEPTH - 1, MAX_DATA_DEPTH, MAX_DATA_DEPTH + 1, 300] {
        pin(
            1,
            &Entry::Host(HostEvent::new("deep", nested(levels)).unwrap()),
        );
        let message = Message::new("d", json!({"kind": "user"}), nested(levels - 3));
        pin(
            1,
            &Entry::Machine(Event::Spliced(splice(vec![message.clone()]))),
        );
        pin(
            1,
            &Entry::Machine(Event::UserMessage(Arc::new(message.clone()))),
        );
        pin_message(&message);
    }
    let mut out = Vec::new();
    assert_eq!(
        encode(
            1,
            &Entry::Host(HostEvent::new("deep", nested(MAX_DATA_DEPTH + 1)).unwrap()),
            &mut out
        ),
        Err(EncodeError::TooDeep(TooDeep {
            depth: MAX_DEPTH + 1,
            max: MAX_DEPTH
        }))
    );
    assert!(out.is_empty());
    let envelope = r#"{"seq":1,"type":"model/output","data":""}"#.len();
    for extra in [0, 1] {
        let text = "a".repeat(MAX_LINE_BYTES - envelope + extra);
        pin(
            1,
            &Entry::Host(HostEvent::new("model/output", json!(text)).unwrap()),
        );
        // An escape's six bytes counted where the line crosses the limit.
        let text = format!("{}\u{1}", "a".repeat(MAX_LINE_BYTES - envelope - 6 + extra));
        pin(
            1,
            &Entry::Host(HostEvent::new("model/output", json!(text)).unwrap()),
        );
    }
    // Too long and too deep: too long is what both report.
    let mut deep_and_long = nested(MAX_DATA_DEPTH + 1);
    if let Value::Object(map) = &mut deep_and_long {
        map.insert("pad".into(), json!("p".repeat(MAX_LINE_BYTES)));
    }
    pin(1, &Entry::Host(HostEvent::new("x", deep_and_long).unwrap()));
    pin(u64::MAX, &Entry::Machine(Event::TurnStart { turn: 1 }));
}

fn corpus_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    let mut dirs = vec![root.join("tests/conformance"), root.join("fuzz/seeds")];
    while let Some(dir) = dirs.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in read.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "jsonl") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every `{type, data}` object (an event or a host event) and every message (an object with a
/// string `id` that reads as one) in `value`, at any depth.
fn collect(value: &Value, entries: &mut Vec<Entry>, messages: &mut Vec<Message>) {
    match value {
        Value::Object(map) => {
            if let (Some(Value::String(kind)), Some(data)) = (map.get("type"), map.get("data")) {
                let typed = json!({"type": kind, "data": data});
                if Event::TYPES.contains(&kind.as_str()) {
                    if let Ok(event) = serde_json::from_value::<Event>(typed) {
                        entries.push(Entry::Machine(event));
                    }
                } else if let Ok(event) = HostEvent::new(kind.clone(), data.clone()) {
                    entries.push(Entry::Host(event));
                }
            }
            if let Some(message) = Message::from_json(value) {
                messages.push(message);
            }
            map.values()
                .for_each(|value| collect(value, entries, messages));
        }
        Value::Array(items) => items
            .iter()
            .for_each(|value| collect(value, entries, messages)),
        _ => {}
    }
}

#[test]
fn the_corpus_is_serde_jsons_bytes() {
    let files = corpus_files();
    assert!(files.len() >= 200, "the corpus was not found: {files:?}");
    let (mut entries, mut messages, mut lines) = (Vec::new(), Vec::new(), 0);
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for line in text.lines() {
            let Ok(value) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            lines += 1;
            collect(&value, &mut entries, &mut messages);
        }
    }
    // Every machine event type and host events were found, so the pin covers them.
    for kind in Event::TYPES {
        assert!(
            entries.iter().any(|entry| entry.kind() == kind),
            "no {kind} in the corpus"
        );
    }
    assert!(entries.iter().any(|entry| matches!(entry, Entry::Host(_))));
    assert!(
        lines > 5_000 && entries.len() > 2_000 && messages.len() > 2_000,
        "{lines} lines, {} records, {} messages",
        entries.len(),
        messages.len()
    );
    for (index, entry) in entries.iter().enumerate() {
        pin(index as u64 + 1, entry);
    }
    for message in &messages {
        pin_message(message);
    }
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<u64>().prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        any::<String>().prop_map(Value::String),
        "[\\x00-\\x7f\u{2028}🦀]{0,12}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[\\x00-\\x7f]{0,6}|\\PC{0,4}", inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Generated messages and host events: the same bytes, and the same size and depth.
    #[test]
    fn generated_records_are_serde_jsons_bytes(
        id in "\\PC{0,8}|[\\x00-\\x7f]{0,8}",
        source in json_value(),
        content in json_value(),
        kind in "[a-z/]{1,12}|\\PC{1,6}",
        data in json_value(),
        seq in 1u64..u64::MAX,
    ) {
        let message = Message::new(id.as_str(), source, content);
        pin_message(&message);
        pin(seq, &Entry::Machine(Event::UserMessage(Arc::new(message.clone()))));
        pin(seq, &Entry::Machine(Event::Spliced(splice(vec![message.clone(), message]))));
        if let Ok(event) = HostEvent::new(kind, data) {
            pin(seq, &Entry::Host(event));
        }
    }
}

/// A message's measure: the bytes and nesting of its JSON.
#[test]
fn a_message_is_measured_without_writing_it() {
    let message = Message::user("m1", json!({"a": ["\n", [1.5, {}]]}));
    let text = serde_json::to_string(&message).unwrap();
    assert_eq!(
        text,
        r#"{"id":"m1","content":{"a":["\n",[1.5,{}]]},"source":{"kind":"user"}}"#
    );
    assert_eq!(
        measure_message(&message),
        Measure {
            bytes: text.len(),
            depth: 5
        }
    );
}
