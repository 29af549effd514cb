//! What no trace can express: the whole state untouched by a rejection, and the public
//! projections (status, quiescence, `lastTurn`, the pending view, the held ids) the harness
//! compares with the core's. Behaviour (outputs and rejections) is pinned by the corpus, see `trace_replay`.

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
