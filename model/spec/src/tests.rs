//! What no trace can express: the whole state untouched by a rejection, the public
//! projections (status, quiescence, `lastTurn`, the pending view, the held ids and messages, the
//! bound) the harness compares with the core's, and S56's value equality itself, edge by edge
//! across serde_json's three number representations (the traces pin it only through inputs).
//! Behaviour (outputs and rejections) is pinned by the corpus, which `coxswain-tests` replays on
//! the spec (`tests/src/conformance.rs`).

use serde_json::{json, Value};

use super::Spec;

fn m(id: &str) -> Value {
    json!({ "id": id, "source": { "kind": "user" }, "content": id })
}

fn ok(r: &mut Spec, input: Value) -> Vec<Value> {
    r.apply(&input)
        .unwrap_or_else(|e| panic!("{input} rejected {e}"))
}

fn pending(ids: &[(&str, bool)]) -> Vec<(String, bool)> {
    ids.iter().map(|(id, w)| (id.to_string(), *w)).collect()
}

/// S5: a rejected input leaves every field as it was (the clone-and-commit of `apply`).
#[test]
fn s5_rejected_input_changes_nothing() {
    let mut r = Spec::new();
    ok(&mut r, json!({ "followup": m("a") }));
    ok(&mut r, json!({ "preStep": { "enter": [m("a")] } }));
    let before = format!("{r:?}");
    assert_eq!(
        r.apply(&json!({ "preStep": { "enter": [] } })),
        Err("unexpected-completion")
    );
    assert_eq!(r.apply(&json!({"maintenance":"begin"})), Err("busy"));
    assert_eq!(format!("{r:?}"), before);
}

/// S23, S44, S45: status, quiescence, `lastTurn` and the pending view (id, waking) through idle,
/// maintenance, running, disposing and disposed.
#[test]
fn s23_s44_s45_projections_in_each_phase() {
    let mut r = Spec::new();
    assert_eq!(
        (r.status().as_str(), r.is_quiescent(), r.last_turn()),
        ("idle", true, 0)
    );
    ok(&mut r, json!({ "inject": m("c") }));
    ok(
        &mut r,
        json!({"send":{"message":m("q"),"target":"next-turn","wakeup":false}}),
    );
    assert_eq!(
        r.pending(),
        (pending(&[("q", false)]), pending(&[("c", false)]))
    );
    // Maintenance: status idle, yet not quiescent.
    ok(&mut r, json!({"maintenance":"begin"}));
    assert_eq!((r.status().as_str(), r.is_quiescent()), ("idle", false));
    ok(&mut r, json!({ "followup": m("a") }));
    assert_eq!(r.pending().0, pending(&[("q", false), ("a", true)]));
    // The latch replays: turn 1 claims `c` and `q`.
    ok(&mut r, json!({"maintenance":"end"}));
    assert_eq!(
        (r.status().as_str(), r.is_quiescent(), r.last_turn()),
        ("running", false, 1)
    );
    assert_eq!(r.pending(), (pending(&[("a", true)]), pending(&[])));
    // Disposing: still running until the driver exits.
    ok(&mut r, json!({"dispose":{}}));
    assert_eq!((r.status().as_str(), r.is_quiescent()), ("running", false));
    ok(&mut r, json!({ "preStep": { "enter": [] } }));
    // Disposed: status idle, quiescent.
    assert_eq!(
        (r.status().as_str(), r.is_quiescent(), r.last_turn()),
        ("idle", true, 1)
    );
    assert_eq!(r.pending(), (pending(&[]), pending(&[])));
}

/// S51–S53: the held ids (oldest first) through a clear, eviction past `W`, the S52 rejections
/// (whole state untouched, S5), the S15 exemptions, and a restore from the spec's own log.
#[test]
fn s51_s52_s53_delivery_memory_projection() {
    let mut r = Spec::with_memory(2);
    let mut log: Vec<Value> = Vec::new();
    let mut run = |r: &mut Spec, input: Value| {
        let outs = ok(r, input);
        log.extend(outs.iter().filter_map(|o| o.get("event").cloned()));
        outs
    };
    run(&mut r, json!({ "inject": m("a") }));
    run(&mut r, json!({ "inject": m("b") }));
    run(
        &mut r,
        json!({"prepend":{"target":"next-turn","message":m("c")}}),
    );
    assert_eq!(r.delivered(), Vec::<String>::new());
    // S15 clear: NS (a, b) then NT (c); W = 2 forgets a.
    run(&mut r, json!({"clear":{}}));
    assert_eq!(r.delivered(), ["b", "c"]);
    // S52: a held id is refused, and the refusal changes nothing (S5).
    let before = format!("{r:?}");
    assert_eq!(
        r.apply(&json!({ "inject": m("b") })),
        Err("already-delivered")
    );
    assert_eq!(
        r.apply(&json!({"prepend":{"target":"next-step","message":m("c")}})),
        Err("already-delivered")
    );
    assert_eq!(format!("{r:?}"), before);
    // A forgotten id may come back; remove of a held id and replace of an absent id emit nothing.
    run(&mut r, json!({ "inject": m("a") }));
    assert_eq!(run(&mut r, json!({ "remove": "b" })), Vec::<Value>::new());
    assert_eq!(
        run(&mut r, json!({"replace":{"id":"zz","message":m("b")}})),
        Vec::<Value>::new()
    );
    // A replace of a pending item by a held id is refused; keeping the id keeps it pending.
    assert_eq!(
        r.apply(&json!({"replace":{"id":"a","message":m("c")}})),
        Err("already-delivered")
    );
    run(&mut r, json!({"replace":{"id":"a","message":m("a")}}));
    assert_eq!(r.delivered(), ["b", "c"]);
    // A replace by a new id: the old one leaves.
    run(&mut r, json!({"replace":{"id":"a","message":m("d")}}));
    assert_eq!(r.delivered(), ["c", "a"]);
    // S53: the spec's own log restores the same memory; W = 0 holds nothing.
    let back = Spec::restore(&log, 0, 2).expect("own log is valid");
    assert_eq!(
        (back.delivered(), back.pending()),
        (r.delivered(), r.pending())
    );
    let plain = Spec::restore(&log, 0, 0).expect("own log is valid");
    assert_eq!(plain.delivered(), Vec::<String>::new());
}

// ---------------------------------------------------------------------------------------------
// §12: what the traces cannot express
// ---------------------------------------------------------------------------------------------

/// Parses JSON text exactly as a trace line would be (so `1.0` is a double, `1` an integer).
fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// S56's JSON equality on two values written as JSON text.
fn s56_equal(a: &str, b: &str) -> bool {
    let (a, b) = (parse(a), parse(b));
    let forward = super::conflict::json_equal(&a, &b);
    assert_eq!(forward, super::conflict::json_equal(&b, &a), "symmetric");
    forward
}

/// S56: numbers by mathematical value, exactly, across serde_json's three representations
/// (`u64`, `i64`, `f64`): nothing is rounded through `f64`, nothing wraps between `u64` and
/// `i64`.
#[test]
fn s56_numbers_compare_by_exact_mathematical_value() {
    // The representations the cases below rely on (serde_json without `arbitrary_precision`).
    assert!(parse("18446744073709551615").is_u64());
    assert!(parse("-9223372036854775808").is_i64());
    assert!(parse("9007199254740992.0").is_f64() && parse("1e2").is_f64());
    // 1 == 1.0 == 1e0 == 10e-1; 0 == -0 == -0.0 == 0.0.
    for (a, b) in [
        ("1", "1.0"),
        ("1", "1e0"),
        ("1", "10e-1"),
        ("-3", "-3.0"),
        ("0", "-0.0"),
        ("0", "-0"),
        ("0.0", "-0.0"),
        ("1.5", "15e-1"),
        ("100", "1e2"),
    ] {
        assert!(s56_equal(a, b), "{a} == {b}");
    }
    // 2^53 + 1 as an integer is not the double nearest to it (2^53), whichever is written.
    assert!(!s56_equal("9007199254740993", "9007199254740992.0"));
    assert!(!s56_equal("9007199254740993", "9007199254740993.0"));
    assert!(s56_equal("9007199254740992", "9007199254740992.0"));
    assert!(!s56_equal("-9007199254740993", "-9007199254740992.0"));
    // Large u64: u64::MAX is not 2^64 (the double `18446744073709551615.0` rounds to 2^64).
    assert!(!s56_equal("18446744073709551615", "18446744073709551615.0"));
    assert!(!s56_equal("18446744073709551615", "1.8446744073709552e19"));
    // 2^63 is exact as a double; i64::MAX is not 2^63.
    assert!(s56_equal("9223372036854775808", "9223372036854775808.0"));
    assert!(!s56_equal("9223372036854775807", "9223372036854775808.0"));
    // u64 beyond i64 vs i64: no wrapping (u64::MAX is not -1, 2^63 is not i64::MIN).
    assert!(!s56_equal("18446744073709551615", "-1"));
    assert!(!s56_equal("9223372036854775808", "-9223372036854775808"));
    // i64::MIN is exact as a double.
    assert!(s56_equal("-9223372036854775808", "-9223372036854775808.0"));
    assert!(s56_equal("18446744073709551615", "18446744073709551615"));
    // Fractions and near-integers.
    assert!(!s56_equal("1", "1.0000000000000002"));
    assert!(!s56_equal("0.1", "0.10000000000000002"));
    assert!(s56_equal("0.1", "1e-1"));
    // Numbers never equal other JSON types.
    assert!(!s56_equal("1", "true"));
    assert!(!s56_equal("0", "false"));
    assert!(!s56_equal("0", "null"));
    assert!(!s56_equal("1", "\"1\""));
}

/// S56: objects by keys and values whatever the key order, arrays element by element, strings
/// code point by code point (no Unicode normalisation), nested.
#[test]
fn s56_structures_and_strings() {
    assert!(s56_equal(
        r#"{"a":1,"b":[1,{"c":2.0}]}"#,
        r#"{"b":[1.0,{"c":2}],"a":1e0}"#
    ));
    assert!(!s56_equal(r#"[1,2]"#, r#"[2,1]"#));
    assert!(!s56_equal(r#"[1]"#, r#"[1,1]"#));
    assert!(!s56_equal(r#"{"a":1}"#, r#"{"a":1,"b":null}"#));
    assert!(!s56_equal(r#"{"a":null}"#, r#"{"b":null}"#));
    assert!(s56_equal(r#""caf\u00e9""#, "\"café\""));
    // Precomposed é (U+00E9) is not e + combining acute (U+0065 U+0301).
    assert!(!s56_equal(r#""caf\u00e9""#, r#""cafe\u0301""#));
    assert!(!s56_equal(r#""a""#, r#""A""#));
    assert!(s56_equal(r#""\ud83d\ude00""#, "\"😀\""));
}

/// S56: a message's `source` and `content` take part, nothing else: the id is equal by
/// construction, other keys are ignored, and an absent key differs from `null`.
#[test]
fn s56_message_equality_reads_source_and_content_only() {
    use super::conflict::same_message;
    let a = parse(r#"{"id":"a","source":{"kind":"user"},"content":1}"#);
    let extra = parse(r#"{"id":"a","source":{"kind":"user"},"content":1.0,"meta":{"x":1}}"#);
    assert!(same_message(&a, &extra));
    let no_content = parse(r#"{"id":"a","source":{"kind":"user"}}"#);
    let null_content = parse(r#"{"id":"a","source":{"kind":"user"},"content":null}"#);
    assert!(same_message(&no_content, &no_content.clone()));
    assert!(!same_message(&no_content, &null_content));
    let other_source = parse(r#"{"id":"a","source":{"kind":"user","name":"x"},"content":1}"#);
    assert!(!same_message(&a, &other_source));
}

/// S56 through `apply`: a retry that differs only in key order and number spelling is the same
/// message (`already-pending`, then `already-delivered` once it left), a retry that differs in
/// one bit of a large integer is a `conflict`; the whole state stays as it was (S5). The held
/// message is the one that left the lists (S51), which restore rebuilds (S53).
#[test]
fn s56_retries_through_apply_and_restore() {
    let mut r = Spec::with_memory(1);
    let mut log: Vec<Value> = Vec::new();
    let first =
        parse(r#"{"id":"a","source":{"kind":"user"},"content":{"n":9007199254740993,"x":[1,2]}}"#);
    let same = parse(
        r#"{"source":{"kind":"user"},"content":{"x":[1.0,2e0],"n":9007199254740993},"id":"a"}"#,
    );
    let rounded = parse(
        r#"{"id":"a","source":{"kind":"user"},"content":{"n":9007199254740992.0,"x":[1,2]}}"#,
    );
    let outs = ok(&mut r, json!({ "inject": first }));
    log.extend(outs.iter().filter_map(|o| o.get("event").cloned()));
    let before = format!("{r:?}");
    assert_eq!(r.apply(&json!({ "inject": same })), Err("already-pending"));
    assert_eq!(r.apply(&json!({ "followup": rounded })), Err("conflict"));
    assert_eq!(format!("{r:?}"), before);
    let outs = ok(&mut r, json!({ "remove": "a" }));
    log.extend(outs.iter().filter_map(|o| o.get("event").cloned()));
    // S51, S56: the memory holds `a` with the message it left as, verbatim (S8).
    assert_eq!(
        r.delivered_messages(),
        vec![("a".to_string(), first.clone())]
    );
    assert_eq!(
        r.apply(&json!({ "inject": same })),
        Err("already-delivered")
    );
    assert_eq!(r.apply(&json!({ "inject": rounded })), Err("conflict"));
    // S53: restore rebuilds the held message from the replayed splice.
    let mut back = Spec::restore(&log, 0, 1).expect("own log is valid");
    assert_eq!(back.delivered_messages(), r.delivered_messages());
    assert_eq!(back.apply(&json!({ "inject": rounded })), Err("conflict"));
    assert_eq!(
        back.apply(&json!({ "inject": same })),
        Err("already-delivered")
    );
}

/// S51, S56: a `replace` that keeps the id puts the *new* message in the list, so it is the new
/// one a later retry is compared with, and the one the memory holds once it leaves.
#[test]
fn s56_replace_keeping_id_compares_with_new_message() {
    let mut r = Spec::with_memory(2);
    let old = json!({ "id": "q", "source": { "kind": "user" }, "content": "old" });
    let new = json!({ "id": "q", "source": { "kind": "user" }, "content": "new" });
    ok(&mut r, json!({ "inject": old }));
    ok(&mut r, json!({ "replace": { "id": "q", "message": new } }));
    assert_eq!(r.delivered(), Vec::<String>::new());
    assert_eq!(r.apply(&json!({ "inject": old })), Err("conflict"));
    assert_eq!(r.apply(&json!({ "inject": new })), Err("already-pending"));
    ok(&mut r, json!({ "clear": {} }));
    assert_eq!(r.delivered_messages(), vec![("q".to_string(), new.clone())]);
    assert_eq!(r.apply(&json!({ "inject": old })), Err("conflict"));
    assert_eq!(r.apply(&json!({ "inject": new })), Err("already-delivered"));
}

/// S54, S5: a malformed `expect` is a malformed input (changing nothing), except once disposed,
/// when every input is rejected `disposed` first (S45).
#[test]
fn s54_malformed_expect_is_malformed_input() {
    let mut r = Spec::new();
    let send = |expect: Value| {
        json!({ "send": { "message": m("a"), "target": "next-step", "wakeup": true,
                          "expect": expect } })
    };
    let before = format!("{r:?}");
    for bad in [
        json!(null),
        json!({}),
        json!(0),
        json!([{ "turn": 0 }]),
        json!({ "turn": 0, "idleAfter": 0 }),
        json!({ "step": 0 }),
        json!({ "turn": -1 }),
        json!({ "idleAfter": 0.0 }),
        json!({ "idleAfter": "0" }),
        json!({ "turn": null }),
    ] {
        assert_eq!(r.apply(&send(bad.clone())), Err(super::MALFORMED), "{bad}");
    }
    assert_eq!(format!("{r:?}"), before);
    // A large turn number is well formed; it just never matches.
    assert_eq!(
        r.apply(&send(json!({ "turn": u64::MAX }))),
        Err("turn-mismatch")
    );
    ok(&mut r, json!({ "dispose": {} }));
    assert_eq!(r.apply(&send(json!({}))), Err("disposed"));
}

/// S54: `{turn: n}` holds in pre-step, step and turn-stopping of turn `n` while not cancelled;
/// `{idleAfter: n}` only while idle with `lastTurn = n`, not in maintenance; a rejection
/// changes nothing (S5). An accepted guarded steer is an ordinary NS item.
#[test]
fn s54_guard_in_each_phase() {
    let guarded = |id: &str, expect: Value| {
        json!({ "send": { "message": m(id), "target": "next-step", "wakeup": true,
                          "expect": expect } })
    };
    let mut r = Spec::new();
    assert_eq!(
        r.apply(&guarded("x", json!({ "turn": 1 }))),
        Err("turn-mismatch")
    );
    ok(&mut r, guarded("a", json!({ "idleAfter": 0 }))); // opens turn 1
    assert_eq!(
        r.apply(&guarded("x", json!({ "idleAfter": 0 }))),
        Err("turn-mismatch")
    );
    assert_eq!(
        r.apply(&guarded("x", json!({ "turn": 2 }))),
        Err("turn-mismatch")
    );
    ok(&mut r, guarded("p", json!({ "turn": 1 }))); // pre-step
    ok(&mut r, json!({ "preStep": { "enter": [m("a")] } }));
    ok(&mut r, guarded("s", json!({ "turn": 1 }))); // step
    assert_eq!(
        r.pending(),
        (pending(&[]), pending(&[("p", true), ("s", true)]))
    );
    ok(&mut r, json!({ "step": "continue" }));
    ok(&mut r, json!({ "preStep": { "enter": [] } }));
    ok(&mut r, json!({ "step": "completed" }));
    ok(&mut r, guarded("t", json!({ "turn": 1 }))); // turn-stopping
    ok(&mut r, json!({ "turnStopping": "done" }));
    ok(&mut r, json!({ "preStep": { "enter": [] } })); // S30: ends turn 1
    assert_eq!((r.status().as_str(), r.last_turn()), ("idle", 1));
    assert_eq!(
        r.apply(&guarded("x", json!({ "turn": 1 }))),
        Err("turn-mismatch")
    );
    // Maintenance is not idle.
    ok(&mut r, json!({ "maintenance": "begin" }));
    let before = format!("{r:?}");
    assert_eq!(
        r.apply(&guarded("x", json!({ "idleAfter": 1 }))),
        Err("turn-mismatch")
    );
    assert_eq!(format!("{r:?}"), before);
    ok(&mut r, json!({ "maintenance": "end" }));
    // A cancelled turn (a dispose requests cancellation too, S45) refuses `{turn: n}`.
    ok(&mut r, guarded("b", json!({ "idleAfter": 1 })));
    ok(&mut r, json!({ "dispose": {} }));
    assert_eq!(
        r.apply(&guarded("x", json!({ "turn": 2 }))),
        Err("turn-mismatch")
    );
}

/// S55: the bound through `Config`, the view, a restore that holds more than `P` (kept;
/// insertions refused until the list is below `P`; replace never `full`), and the order of the
/// checks: identity, then guard, then bound.
#[test]
fn s55_bound_config_view_and_restored_overflow() {
    use super::Config;
    use std::num::NonZeroUsize;
    let two = Config {
        memory: 1,
        max_pending: NonZeroUsize::new(2),
    };
    assert_eq!(Spec::new().config(), Config::default());
    assert_eq!(Spec::with_memory(3).config().memory, 3);
    assert_eq!(Spec::new().view().max_pending, None);
    let splice = |start: usize, id: &str| {
        json!({ "type": "agent/inbox/spliced",
                "data": { "target": "next-step", "start": start, "inserted": [m(id)] } })
    };
    let log = [splice(0, "a"), splice(1, "b"), splice(2, "c")];
    let mut r = Spec::restore_with_config(&log, 0, two).expect("valid log");
    assert_eq!(r.config(), two);
    assert_eq!(r.view().max_pending, Some(2));
    assert_eq!(r.pending().1.len(), 3); // S55: kept as written
    let before = format!("{r:?}");
    assert_eq!(r.apply(&json!({ "inject": m("d") })), Err("full"));
    assert_eq!(
        r.apply(&json!({ "prepend": { "target": "next-step", "message": m("d") } })),
        Err("full")
    );
    // Identity (S13/S56) before the bound; the guard (S54) before the bound.
    assert_eq!(
        r.apply(&json!({ "inject": m("a") })),
        Err("already-pending")
    );
    let guarded = json!({ "send": { "message": m("d"), "target": "next-step", "wakeup": false,
                                    "expect": { "turn": 1 } } });
    assert_eq!(r.apply(&guarded), Err("turn-mismatch"));
    assert_eq!(format!("{r:?}"), before);
    // NT has room.
    ok(
        &mut r,
        json!({ "prepend": { "target": "next-turn", "message": m("d") } }),
    );
    // Replace is never full.
    ok(
        &mut r,
        json!({ "replace": { "id": "a", "message": m("e") } }),
    );
    // S51: `a` left; held by the memory of capacity 1.
    assert_eq!(r.delivered(), ["a"]);
    ok(&mut r, json!({ "remove": "e" }));
    assert_eq!(r.apply(&json!({ "inject": m("f") })), Err("full")); // 2 left: still at P
    ok(&mut r, json!({ "remove": "b" }));
    ok(&mut r, json!({ "inject": m("f") })); // 1 left: below P
    assert_eq!(r.pending().1, pending(&[("c", false), ("f", false)]));
}

/// S46: a restored `turn/start` carries an integer turn in `[0, 2^53 − 2]`, as written.
#[test]
fn s46_restored_turn_range() {
    let turn = |t: Value| {
        vec![
            json!({ "type": "turn/start", "data": { "turn": t } }),
            json!({ "type": "turn/end", "data": { "turn": t, "reason": { "kind": "completed" } } }),
        ]
    };
    let max = (1u64 << 53) - 2;
    for good in [json!(0), json!(1), json!(max)] {
        let r = Spec::restore(&turn(good.clone()), 0, 0).expect("valid");
        assert_eq!(Some(r.last_turn()), good.as_u64());
    }
    for bad in [
        json!(max + 1),
        json!(u64::MAX),
        json!(-1),
        json!(1.5),
        json!(1.0),
        json!("1"),
        json!(null),
    ] {
        assert!(Spec::restore(&turn(bad.clone()), 0, 0).is_err(), "{bad}");
    }
    // S27: after the largest restored turn, the next is 2^53 − 1 and still a safe integer.
    let mut r = Spec::restore(&turn(json!(max)), 0, 0).expect("valid");
    let outs = ok(&mut r, json!({ "followup": m("a") }));
    assert!(outs.contains(&json!({ "event": { "type": "turn/start",
                                               "data": { "turn": max + 1 } } })));
}

/// S53: a restored splice may insert an id the memory holds at that point (a log written with a
/// smaller capacity); the id leaves the memory as it is inserted, and its held message goes
/// with it (S56): once it leaves again, the newer message is held.
#[test]
fn s53_restored_reinsert_of_held_id() {
    let msg =
        |content: &str| json!({ "id": "a", "source": { "kind": "user" }, "content": content });
    let log = [
        json!({ "type": "agent/inbox/spliced",
                "data": { "target": "next-step", "start": 0, "inserted": [msg("one")] } }),
        json!({ "type": "agent/inbox/spliced",
                "data": { "target": "next-step", "start": 0, "removedCount": 1, "inserted": [] } }),
        json!({ "type": "agent/inbox/spliced",
                "data": { "target": "next-step", "start": 0, "inserted": [msg("two")] } }),
    ];
    let r = Spec::restore(&log[..2], 0, 2).expect("valid");
    assert_eq!(r.delivered_messages(), vec![("a".to_string(), msg("one"))]);
    let mut r = Spec::restore(&log, 0, 2).expect("S53: valid");
    assert_eq!(r.delivered(), Vec::<String>::new());
    assert_eq!(r.pending().1, pending(&[("a", false)]));
    assert_eq!(r.apply(&json!({ "inject": msg("one") })), Err("conflict"));
    ok(&mut r, json!({ "remove": "a" }));
    assert_eq!(r.delivered_messages(), vec![("a".to_string(), msg("two"))]);
}
