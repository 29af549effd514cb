//! §13 (S57–S59, I15, I16): what no trace can express. The query `fate` and a `resume` that
//! does nothing leave the whole state as it was; the records through every phase, capacity and
//! restore (lenient logs included); `unbounded`; and crash repair as a function of the stored
//! log, its seed boundary and the allowance: its exact events, its refusals, and the machine it
//! restores to.

use serde_json::{json, Value};

use super::{repair, Config, Spec};

fn m(id: &str) -> Value {
    json!({ "id": id, "source": { "kind": "user" }, "content": id })
}

fn ok(r: &mut Spec, input: Value) -> Vec<Value> {
    r.apply(&input)
        .unwrap_or_else(|e| panic!("{input} rejected {e}"))
}

/// Applies `input` and appends its durable events to `log`.
fn run(r: &mut Spec, log: &mut Vec<Value>, input: Value) -> Vec<Value> {
    let outs = ok(r, input);
    log.extend(outs.iter().filter_map(|o| o.get("event").cloned()));
    outs
}

fn pending(ids: &[(&str, bool)]) -> Vec<(String, bool)> {
    ids.iter().map(|(id, w)| (id.to_string(), *w)).collect()
}

fn unbounded() -> Config {
    Config {
        memory: Config::UNBOUNDED_MEMORY,
        max_pending: None,
    }
}

fn splice(data: Value) -> Value {
    json!({ "type": "agent/inbox/spliced", "data": data })
}

fn turn_end(turn: u64, kind: &str) -> Value {
    json!({ "type": "turn/end", "data": { "turn": turn, "reason": { "kind": kind } } })
}

fn claimed(turn: u64, step: Option<u64>, end: Option<&str>) -> Value {
    let mut c = json!({ "turn": turn });
    if let Some(step) = step {
        c["step"] = json!(step);
    }
    if let Some(end) = end {
        c["end"] = json!(end);
    }
    json!({ "claimed": c })
}

// ---------------------------------------------------------------------------------------------
// S57: resume
// ---------------------------------------------------------------------------------------------

/// S57: a resume that does not wake emits nothing and changes nothing (the whole state, the
/// latch included), in every phase where it does not apply: idle with no items, idle with quiet
/// items only (S19), running (also with cancellation requested: it never latches), maintenance.
/// Once disposed it is rejected `disposed` (S45).
#[test]
fn s57_resume_that_does_not_wake_changes_nothing() {
    let resume = json!({ "resume": {} });
    let unchanged = |r: &mut Spec| {
        let before = format!("{r:?}");
        assert_eq!(r.apply(&resume), Ok(Vec::new()));
        assert_eq!(format!("{r:?}"), before);
    };
    let mut r = Spec::new();
    unchanged(&mut r);
    // Quiet items alone never open a turn.
    ok(&mut r, json!({ "inject": m("q") }));
    ok(
        &mut r,
        json!({ "send": { "message": m("n"), "target": "next-turn", "wakeup": false } }),
    );
    unchanged(&mut r);
    // Running: the driver claims at its next boundary; with cancellation requested, no latch.
    ok(&mut r, json!({ "followup": m("a") }));
    ok(&mut r, json!({ "followup": m("b") }));
    unchanged(&mut r);
    ok(
        &mut r,
        json!({ "cancel": { "cause": { "kind": "user" }, "keepInbox": true } }),
    );
    unchanged(&mut r);
    assert!(!r.is_wake_latched());
    // Turn 1 (which claimed `q` and `n`) ends aborted; `a` and `b` park (S26).
    ok(&mut r, json!({ "preStep": { "enter": [] } }));
    assert_eq!(
        (r.status().as_str(), r.pending().0),
        ("idle", pending(&[("a", true), ("b", true)]))
    );
    // Maintenance: nothing, and no latch, so its end leaves the work parked.
    ok(&mut r, json!({ "maintenance": "begin" }));
    unchanged(&mut r);
    assert_eq!(
        ok(&mut r, json!({ "maintenance": "end" })),
        Vec::<Value>::new()
    );
    // Idle with parked waking work: resume wakes exactly as a waking send would (S24).
    let outs = ok(&mut r, resume.clone());
    assert_eq!(
        outs,
        vec![
            json!({ "notify": { "type": "agent/status", "status": "running" } }),
            json!({ "event": { "type": "turn/start", "data": { "turn": 2 } } }),
            json!({ "event": { "type": "agent/inbox/spliced",
                               "data": { "target": "next-turn", "start": 0, "removedCount": 1,
                                         "inserted": [] } } }),
            json!({ "notify": { "type": "agent/inbox/claimed", "message": m("a"), "turn": 2 } }),
            json!({ "request": { "preStep": { "turn": 2, "step": 1, "messages": [m("a")] } } }),
        ]
    );
    ok(&mut r, json!({ "dispose": {} }));
    ok(&mut r, json!({ "preStep": { "enter": [] } }));
    assert!(r.is_disposed());
    assert_eq!(r.apply(&resume), Err("disposed"));
}

// ---------------------------------------------------------------------------------------------
// S58: fate
// ---------------------------------------------------------------------------------------------

/// S58: `fate` through two turns: a claim records the turn; the first step whose
/// `user/message` carries the id sets `step` (a later step does not move it; an id the host
/// added changes nothing); `turn/end` sets `end`; ordinary removals record `discarded`. It is
/// answered in every phase, disposed included, and changes nothing.
#[test]
fn s58_fate_through_turns_and_phases() {
    let mut r = Spec::with_config(unbounded());
    let fate_of = |r: &Spec, id: &str| {
        let before = format!("{r:?}");
        let fate = r.fate(id);
        assert_eq!(format!("{r:?}"), before, "S58: a query changes nothing");
        fate
    };
    assert_eq!(fate_of(&r, "c"), json!("unknown"));
    ok(&mut r, json!({ "inject": m("c") }));
    assert_eq!(fate_of(&r, "c"), json!({ "pending": "next-step" }));
    // Turn 1 claims `c` (NS) and `a` (NT).
    ok(&mut r, json!({ "followup": m("a") }));
    assert_eq!(fate_of(&r, "c"), claimed(1, None, None));
    assert_eq!(fate_of(&r, "a"), claimed(1, None, None));
    ok(&mut r, json!({ "followup": m("b") }));
    assert_eq!(fate_of(&r, "b"), json!({ "pending": "next-turn" }));
    // Step 1 carries `a` and a message of the host's own (`x`): `x` stays unknown.
    ok(&mut r, json!({ "preStep": { "enter": [m("a"), m("x")] } }));
    assert_eq!(fate_of(&r, "a"), claimed(1, Some(1), None));
    assert_eq!(fate_of(&r, "c"), claimed(1, None, None));
    assert_eq!(fate_of(&r, "x"), json!("unknown"));
    // Step 2 carries `c` (first time: step 2) and `a` again (still step 1).
    ok(&mut r, json!({ "step": "continue" }));
    ok(&mut r, json!({ "preStep": { "enter": [m("c"), m("a")] } }));
    assert_eq!(fate_of(&r, "c"), claimed(1, Some(2), None));
    assert_eq!(fate_of(&r, "a"), claimed(1, Some(1), None));
    // Turn 1 ends `max-tokens` (sticky), turn 2 claims `b` at once (S35).
    ok(&mut r, json!({ "step": "max-tokens" }));
    ok(&mut r, json!({ "turnStopping": "done" }));
    assert_eq!(fate_of(&r, "a"), claimed(1, Some(1), Some("max-tokens")));
    assert_eq!(fate_of(&r, "c"), claimed(1, Some(2), Some("max-tokens")));
    assert_eq!(fate_of(&r, "b"), claimed(2, None, None));
    // A message entered in turn 2 under an id turn 1 claimed changes turn 1's record not.
    ok(&mut r, json!({ "preStep": { "enter": [m("c")] } }));
    assert_eq!(fate_of(&r, "c"), claimed(1, Some(2), Some("max-tokens")));
    // Turn 2 fails: `end: error`; the step it never carried `b` in stays absent.
    ok(
        &mut r,
        json!({ "step": { "fail": { "message": "boom", "code": "E" } } }),
    );
    assert_eq!(fate_of(&r, "b"), claimed(2, None, Some("error")));
    // Ordinary removals: remove, replace by another id, clear.
    ok(&mut r, json!({ "inject": m("d") }));
    ok(&mut r, json!({ "inject": m("e") }));
    ok(&mut r, json!({ "inject": m("f") }));
    ok(&mut r, json!({ "remove": "d" }));
    ok(
        &mut r,
        json!({ "replace": { "id": "e", "message": m("g") } }),
    );
    assert_eq!(fate_of(&r, "d"), json!("discarded"));
    assert_eq!(fate_of(&r, "e"), json!("discarded"));
    assert_eq!(fate_of(&r, "g"), json!({ "pending": "next-step" }));
    // Maintenance; then dispose clears `f` and `g`.
    ok(&mut r, json!({ "maintenance": "begin" }));
    assert_eq!(fate_of(&r, "f"), json!({ "pending": "next-step" }));
    ok(&mut r, json!({ "maintenance": "end" }));
    ok(&mut r, json!({ "dispose": {} }));
    assert!(r.is_disposed());
    for (id, fate) in [
        ("f", json!("discarded")),
        ("g", json!("discarded")),
        ("a", claimed(1, Some(1), Some("max-tokens"))),
        ("x", json!("unknown")),
    ] {
        assert_eq!(fate_of(&r, id), fate, "disposed: {id}");
    }
    // The held ids in the order they left, each with its fate.
    let order: Vec<String> = r.fates().into_iter().map(|(id, _)| id).collect();
    // (`g` took `e`'s place in NS, before `f`: clear removes in list order, S15, S51.)
    assert_eq!(order, ["c", "a", "b", "d", "e", "g", "f"]);
}

/// S58: an aborted turn's claims end `aborted` (the kind only, not the cause); with a
/// `keepInbox` cancel the parked items stay pending.
#[test]
fn s58_aborted_turn_records_kind() {
    let mut r = Spec::with_memory(4);
    ok(&mut r, json!({ "followup": m("a") }));
    ok(&mut r, json!({ "followup": m("b") }));
    ok(
        &mut r,
        json!({ "cancel": { "cause": { "kind": "hook", "reason": "r" }, "keepInbox": true } }),
    );
    ok(&mut r, json!({ "preStep": { "enter": [m("a")] } }));
    assert_eq!(r.fate("a"), claimed(1, None, Some("aborted")));
    assert_eq!(r.fate("b"), json!({ "pending": "next-turn" }));
}

/// S51, S58: a capacity forgets the oldest record with its id (then `unknown`); a re-inserted
/// id drops its record (`pending`, then a fresh record when it leaves again).
#[test]
fn s58_capacity_forgets_records_and_reinsertion_drops_them() {
    let mut r = Spec::with_memory(2);
    for id in ["a", "b", "c"] {
        ok(&mut r, json!({ "inject": m(id) }));
    }
    ok(&mut r, json!({ "clear": {} }));
    assert_eq!(
        (r.fate("a"), r.fate("b"), r.fate("c")),
        (json!("unknown"), json!("discarded"), json!("discarded"))
    );
    // `a` was forgotten: it may come back, and is claimed this time.
    ok(&mut r, json!({ "followup": m("a") }));
    assert_eq!(r.fate("a"), claimed(1, None, None));
    assert_eq!(r.fate("b"), json!("unknown"));
    // S53: a restored log re-inserting a held id drops its record.
    let log = [
        splice(json!({ "target": "next-step", "start": 0, "inserted": [m("a")] })),
        splice(json!({ "target": "next-step", "start": 0, "removedCount": 1, "inserted": [] })),
        splice(json!({ "target": "next-turn", "start": 0, "inserted": [m("a")] })),
    ];
    let back = Spec::restore(&log[..2], 0, 2).expect("valid");
    assert_eq!(back.fate("a"), claimed(0, None, None));
    let back = Spec::restore(&log, 0, 2).expect("valid");
    assert_eq!(back.fate("a"), json!({ "pending": "next-turn" }));
    assert_eq!(back.fates(), Vec::<(String, Value)>::new());
}

/// S58: `unbounded` never forgets: a thousand ids that left are all held, the first still with
/// its record; FORMAT.md's `given.memory` reads as a capacity.
#[test]
fn s58_unbounded_memory_never_forgets() {
    let mut r = Spec::with_config(unbounded());
    assert_eq!(r.config().memory, usize::MAX);
    for i in 0..1000 {
        let id = format!("m{i}");
        ok(&mut r, json!({ "inject": m(&id) }));
        ok(&mut r, json!({ "remove": id }));
    }
    assert_eq!(r.delivered().len(), 1000);
    assert_eq!(r.fate("m0"), json!("discarded"));
    assert_eq!(
        r.apply(&json!({ "inject": m("m0") })),
        Err("already-delivered")
    );
    let read = Config::memory_from_json;
    assert_eq!(read(None), Some(0));
    assert_eq!(read(Some(&json!(3))), Some(3));
    assert_eq!(
        read(Some(&json!("unbounded"))),
        Some(Config::UNBOUNDED_MEMORY)
    );
    for bad in [
        json!(-1),
        json!(1.5),
        json!("3"),
        json!(null),
        json!("Unbounded"),
    ] {
        assert_eq!(read(Some(&bad)), None, "{bad}");
    }
}

/// S58: restore rebuilds the records from a log the machine did not write, as the rules read:
/// a claim before any `turn/start` is turn 0's; any `outcome` (even an unknown one, S46) is an
/// ordinary removal; a `user/message` inside the open turn sets `step` only inside an open step
/// and only for that turn's claims; a `turn/end` whose reason's `kind` is not a string sets no
/// `end`; a later turn's end touches no earlier record.
#[test]
fn s58_restore_rebuilds_records_from_lenient_logs() {
    let claim = || {
        splice(
            json!({ "target": "next-step", "start": 0, "removedCount": 1,
                                  "inserted": [] }),
        )
    };
    let user = |id: &str| json!({ "type": "user/message", "data": m(id) });
    let log = vec![
        splice(json!({ "target": "next-step", "start": 0, "inserted": [m("a"), m("b"), m("c")] })),
        claim(), // a: turn 0
        json!({ "type": "turn/start", "data": { "turn": 5 } }),
        splice(
            json!({ "target": "next-step", "start": 0, "removedCount": 1, "inserted": [],
                       "outcome": "weird" }),
        ), // b: discarded
        claim(),   // c: turn 5
        user("c"), // no open step
        json!({ "type": "step/start", "data": { "turn": 5, "step": 3 } }),
        user("a"), // claimed by turn 0, not 5
        user("c"), // step 3
        user("c"),
        json!({ "type": "step/end", "data": { "turn": 5, "step": 3 } }),
        json!({ "type": "turn/end", "data": { "turn": 5, "reason": { "kind": { "x": 1 } } } }),
        json!({ "type": "turn/start", "data": { "turn": 6 } }),
        turn_end(6, "completed"),
    ];
    let r = Spec::restore_with_config(&log, 0, unbounded()).expect("valid");
    assert_eq!(
        r.fates(),
        vec![
            ("a".to_string(), claimed(0, None, None)),
            ("b".to_string(), json!("discarded")),
            ("c".to_string(), claimed(5, Some(3), None)),
        ]
    );
    // The same log with a string kind on turn 5's end.
    let mut ended = log.clone();
    ended[11] = turn_end(5, "blocked");
    let r = Spec::restore_with_config(&ended, 0, unbounded()).expect("valid");
    assert_eq!(r.fate("c"), claimed(5, Some(3), Some("blocked")));
    // S53: records come only from the log at or after the seed boundary.
    let seeded = [log[..2].to_vec(), vec![turn_end(0, "completed")]].concat();
    let r = Spec::restore_with_config(&seeded, 2, unbounded()).expect("valid");
    assert_eq!((r.fate("a"), r.fates().len()), (json!("unknown"), 0));
    let r = Spec::restore_with_config(&seeded, 0, unbounded()).expect("valid");
    assert_eq!(r.fate("a"), claimed(0, None, Some("completed")));
}

// ---------------------------------------------------------------------------------------------
// S50, S59: crash repair with redelivery
// ---------------------------------------------------------------------------------------------

/// S59: a turn that crashed with its first pre-step outstanding claimed two NS items (one
/// waking, one quiet) and one waking NT item, while a follow-up queued behind it. Repair with
/// `A = 1` appends the closer and three redelivery splices: NS at 0 and 1, NT at 0 (in front
/// of the queued follow-up), in claim order, `wakeup` as each was; the restored machine holds
/// them pending, parked until `resume` (S48, S57). With `A = 0` (S50 unchanged) only the closer,
/// and the records end `interrupted` (S58).
#[test]
fn s59_redelivery_after_a_crash_before_any_step() {
    let mut r = Spec::with_config(unbounded());
    let mut log = Vec::new();
    run(&mut r, &mut log, json!({ "maintenance": "begin" }));
    run(&mut r, &mut log, json!({ "steer": m("s") }));
    run(&mut r, &mut log, json!({ "inject": m("q") }));
    run(&mut r, &mut log, json!({ "followup": m("f") }));
    run(&mut r, &mut log, json!({ "maintenance": "end" })); // latch: turn 1 claims s, q, f
    run(&mut r, &mut log, json!({ "followup": m("p") }));
    let closer = turn_end(1, "interrupted");
    let events = repair(&log, 0, 1).expect("valid");
    assert_eq!(
        events,
        vec![
            closer.clone(),
            splice(
                json!({ "target": "next-step", "start": 0, "inserted": [m("s")],
                           "wakeup": true, "redelivery": 1 })
            ),
            splice(
                json!({ "target": "next-step", "start": 1, "inserted": [m("q")],
                           "redelivery": 1 })
            ),
            splice(
                json!({ "target": "next-turn", "start": 0, "inserted": [m("f")],
                           "wakeup": true, "redelivery": 1 })
            ),
        ]
    );
    let (mut back, appended) = Spec::restore_repaired(&log, 0, unbounded(), 1).expect("valid");
    assert_eq!(appended, events);
    assert_eq!(
        back.pending(),
        (
            pending(&[("f", true), ("p", true)]),
            pending(&[("s", true), ("q", false)])
        )
    );
    assert_eq!((back.status().as_str(), back.last_turn()), ("idle", 1));
    assert_eq!(back.fate("s"), json!({ "pending": "next-step" }));
    let outs = ok(&mut back, json!({ "resume": {} }));
    assert_eq!(
        outs.last(),
        Some(&json!({ "request": { "preStep": { "turn": 2, "step": 1,
                                                "messages": [m("s"), m("q"), m("f")] } } }))
    );
    // A = 0: the closer only; the claims stay claimed by turn 1, now ended `interrupted`.
    assert_eq!(repair(&log, 0, 0), Ok(vec![closer]));
    let (back, _) = Spec::restore_repaired(&log, 0, unbounded(), 0).expect("valid");
    assert_eq!(back.fate("s"), claimed(1, None, Some("interrupted")));
    assert_eq!(back.pending(), (pending(&[("p", true)]), pending(&[])));
}

/// S59: only what the turn claimed after its last `step/start` is redelivered; a step open at
/// the crash gets its `step/end` first (S50). An id a later send made pending again is skipped.
/// A claim by a turn whose cancel was requested is redelivered like any other.
#[test]
fn s59_only_claims_after_the_last_step_start() {
    let mut r = Spec::with_memory(4);
    let mut log = Vec::new();
    run(&mut r, &mut log, json!({ "followup": m("a") }));
    run(
        &mut r,
        &mut log,
        json!({ "preStep": { "enter": [m("a")] } }),
    );
    run(&mut r, &mut log, json!({ "inject": m("x") }));
    run(&mut r, &mut log, json!({ "steer": m("y") }));
    // Step 1 open: `a` was seen; nothing is unseen yet.
    assert_eq!(
        repair(&log, 0, 5),
        Ok(vec![
            json!({ "type": "step/end", "data": { "turn": 1, "step": 1 } }),
            turn_end(1, "interrupted"),
        ])
    );
    run(&mut r, &mut log, json!({ "step": "continue" })); // claims x, y
    let at_pre_step = log.clone();
    assert_eq!(
        repair(&log, 0, 1),
        Ok(vec![
            turn_end(1, "interrupted"),
            splice(
                json!({ "target": "next-step", "start": 0, "inserted": [m("x")],
                           "redelivery": 1 })
            ),
            splice(
                json!({ "target": "next-step", "start": 1, "inserted": [m("y")],
                           "wakeup": true, "redelivery": 1 })
            ),
        ])
    );
    // A cancel with empty lists leaves nothing durable: the same repair.
    let mut cancelled = r.clone();
    let mut cancelled_log = log.clone();
    let outs = run(
        &mut cancelled,
        &mut cancelled_log,
        json!({ "cancel": { "cause": { "kind": "user" } } }),
    );
    assert_eq!(
        outs,
        vec![json!({ "request": { "abort": { "cause": { "kind": "user" } } } })]
    );
    assert_eq!(repair(&cancelled_log, 0, 1), repair(&log, 0, 1));
    // `x` is sent again after it was claimed (W = 0 allows it): pending at the end, skipped.
    let mut plain = Spec::restore(&[], 0, 0).expect("empty log");
    let mut plain_log = Vec::new();
    for input in [
        json!({ "followup": m("a") }),
        json!({ "inject": m("x") }),
        json!({ "preStep": { "enter": [m("a")] } }),
        json!({ "step": "continue" }), // claims x
        json!({ "inject": m("x") }),
    ] {
        run(&mut plain, &mut plain_log, input);
    }
    assert_eq!(
        repair(&plain_log, 0, 1),
        Ok(vec![turn_end(1, "interrupted")])
    );
    // Step 2 entered `x` and `y`: they were seen; nothing is redelivered.
    run(
        &mut r,
        &mut log,
        json!({ "preStep": { "enter": [m("x"), m("y")] } }),
    );
    assert_eq!(
        repair(&log, 0, 1),
        Ok(vec![
            json!({ "type": "step/end", "data": { "turn": 1, "step": 2 } }),
            turn_end(1, "interrupted"),
        ])
    );
    // S58: the restored records of the log cut at the pre-step.
    let (back, _) = Spec::restore_repaired(&at_pre_step, 0, Config::default(), 0).expect("ok");
    assert_eq!(back.fate("x"), json!("unknown"));
    let (back, _) = Spec::restore_repaired(
        &at_pre_step,
        0,
        Config {
            memory: 4,
            max_pending: None,
        },
        0,
    )
    .expect("valid");
    assert_eq!(back.fate("a"), claimed(1, Some(1), Some("interrupted")));
    assert_eq!(back.fate("y"), claimed(1, None, Some("interrupted")));
}

/// S59: `r` counts the splices at or after the seed boundary that carry `redelivery` (any value:
/// S46 reads it as an extra key) and insert the id, whatever the message: a message is skipped
/// once `r > A`; splices before the seed boundary are not read.
#[test]
fn s59_redelivery_count_per_id_from_the_seed_boundary() {
    let claim = splice(
        json!({ "target": "next-step", "start": 0, "removedCount": 1,
                               "inserted": [] }),
    );
    let other = json!({ "id": "s", "source": { "kind": "user" }, "content": "another" });
    let log = vec![
        splice(
            json!({ "target": "next-step", "start": 0, "inserted": [m("s")],
                       "redelivery": "extra" }),
        ),
        claim.clone(),
        splice(
            json!({ "target": "next-step", "start": 0, "inserted": [other.clone()],
                       "wakeup": true }),
        ),
        json!({ "type": "turn/start", "data": { "turn": 1 } }),
        claim,
    ];
    let redelivered = |r: u64| {
        vec![
            turn_end(1, "interrupted"),
            splice(
                json!({ "target": "next-step", "start": 0, "inserted": [other.clone()],
                           "wakeup": true, "redelivery": r }),
            ),
        ]
    };
    // One earlier redelivery of `s` (another message under the same id): r = 2.
    assert_eq!(repair(&log, 0, 1), Ok(vec![turn_end(1, "interrupted")]));
    assert_eq!(repair(&log, 0, 2), Ok(redelivered(2)));
    // Seed boundary 2: the earlier redelivery is not read, r = 1.
    assert_eq!(repair(&log, 2, 1), Ok(redelivered(1)));
    // Seed boundary 5: the claim is before it, not read: nothing is known to redeliver.
    assert_eq!(repair(&log, 5, 9), Ok(vec![turn_end(1, "interrupted")]));
    // The repaired log restores, with the count inherited by the next repair of this id.
    let (mut back, events) = Spec::restore_repaired(&log, 0, unbounded(), 2).expect("valid");
    let mut log = [log, events].concat();
    assert_eq!(back.fate("s"), json!({ "pending": "next-step" }));
    log.extend(
        ok(&mut back, json!({ "resume": {} }))
            .iter()
            .filter_map(|o| o.get("event").cloned()),
    );
    assert_eq!(repair(&log, 0, 2), Ok(vec![turn_end(2, "interrupted")]));
    let mut third = redelivered(3);
    third[0] = turn_end(2, "interrupted");
    assert_eq!(repair(&log, 0, 3), Ok(third));
}

/// S50: a log that does not end inside an open turn needs no repair; a log S46 rejects for any
/// other reason is refused by repair too (naming the event), and by `restore_repaired`.
#[test]
fn s50_repair_of_closed_and_invalid_logs() {
    let start = json!({ "type": "turn/start", "data": { "turn": 1 } });
    assert_eq!(repair(&[], 0, 1), Ok(Vec::new()));
    assert_eq!(
        repair(&[start.clone(), turn_end(1, "completed")], 0, 1),
        Ok(Vec::new())
    );
    // An open turn with no claim and no step: the closer only.
    assert_eq!(
        repair(std::slice::from_ref(&start), 0, 1),
        Ok(vec![turn_end(1, "interrupted")])
    );
    for bad in [
        vec![json!({ "data": {} }), start.clone()],
        vec![
            start.clone(),
            splice(json!({ "target": "next-step", "start": 1, "inserted": [] })),
        ],
        vec![json!({ "type": "turn/start", "data": { "turn": -1 } })],
    ] {
        let refused = repair(&bad, 0, 1);
        assert!(
            refused.as_ref().is_err_and(|e| e.starts_with("event ")),
            "{refused:?}"
        );
        assert_eq!(
            Spec::restore_repaired(&bad, 0, Config::default(), 1).map(|_| ()),
            refused.map(|_| ())
        );
    }
    // S46: the unrepaired log still may not end inside an open turn.
    assert!(Spec::restore(&[start], 0, 0).is_err());
}
