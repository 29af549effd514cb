//! What no trace can express: the whole state untouched by a rejection, and the public
//! projections (status, quiescence, `lastTurn`, the pending view) the harness compares with the
//! core's. Behaviour (outputs and rejections) is pinned by the corpus, see `trace_replay`.

use serde_json::{json, Value};

use super::Reference;

fn m(id: &str) -> Value {
    json!({ "id": id, "source": { "kind": "user" }, "content": id })
}

fn ok(r: &mut Reference, input: Value) -> Vec<Value> {
    r.apply(&input)
        .unwrap_or_else(|e| panic!("{input} rejected {e}"))
}

fn pending(ids: &[(&str, bool)]) -> Vec<(String, bool)> {
    ids.iter().map(|(id, w)| (id.to_string(), *w)).collect()
}

/// S5: a rejected input leaves every field as it was (the clone-and-commit of `apply`).
#[test]
fn s5_rejected_input_changes_nothing() {
    let mut r = Reference::new();
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
    let mut r = Reference::new();
    assert_eq!(
        (r.status(), r.is_quiescent(), r.last_turn()),
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
    assert_eq!((r.status(), r.is_quiescent()), ("idle", false));
    ok(&mut r, json!({ "followup": m("a") }));
    assert_eq!(r.pending().0, pending(&[("q", false), ("a", true)]));
    // The latch replays: turn 1 claims `c` and `q`.
    ok(&mut r, json!({"maintenance":"end"}));
    assert_eq!(
        (r.status(), r.is_quiescent(), r.last_turn()),
        ("running", false, 1)
    );
    assert_eq!(r.pending(), (pending(&[("a", true)]), pending(&[])));
    // Disposing: still running until the driver exits.
    ok(&mut r, json!({"dispose":{}}));
    assert_eq!((r.status(), r.is_quiescent()), ("running", false));
    ok(&mut r, json!({ "preStep": { "enter": [] } }));
    // Disposed: status idle, quiescent.
    assert_eq!(
        (r.status(), r.is_quiescent(), r.last_turn()),
        ("idle", true, 1)
    );
    assert_eq!(r.pending(), (pending(&[]), pending(&[])));
}
