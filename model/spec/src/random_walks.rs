//! Random walks of valid and invalid inputs: the spec agrees with its own durable log (S49,
//! S53) and keeps the invariants I1, I5, I8, I10, I11, I12, I13 and I14. A check of the spec
//! itself, which no single trace can express; the proptests walk the real core beside it.

use std::num::NonZeroUsize;

use serde_json::{json, Value};

use super::conflict::same_message;
use super::wire::msg_id;
use super::{Config, Spec};

fn m(id: &str) -> Value {
    json!({ "id": id, "source": { "kind": "user" }, "content": id })
}

/// A message under `id` in one of four variants: 0 is [`m`], 1 and 2 are the same message for
/// S56 (key order and `1` vs `1.0`), 3 differs from all of them (a `conflict` on reuse).
fn variant(id: &str, v: u64) -> Value {
    match v {
        0 => m(id),
        1 => json!({ "id": id, "source": { "kind": "user" }, "content": { "n": 1, "s": id } }),
        2 => json!({ "id": id, "content": { "s": id, "n": 1.0 }, "source": { "kind": "user" } }),
        _ => json!({ "id": id, "source": { "kind": "plugin" }, "content": id }),
    }
}
fn followup(msg: &Value) -> Value {
    json!({ "followup": msg })
}
fn steer(msg: &Value) -> Value {
    json!({ "steer": msg })
}
fn inject(msg: &Value) -> Value {
    json!({ "inject": msg })
}
fn enter(msgs: &[&Value]) -> Value {
    json!({ "preStep": { "enter": msgs } })
}
fn cancel(kind: &str, keep: bool) -> Value {
    json!({ "cancel": { "cause": { "kind": kind }, "keepInbox": keep } })
}
fn err(code: &str) -> Value {
    json!({ "message": "boom", "code": code })
}

/// A tiny deterministic PRNG (xorshift64*), std only.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n
    }
}

fn random_input(rng: &mut Rng, spec: &Spec) -> Value {
    let id = format!("m{}", rng.below(6));
    let v = if rng.below(2) == 0 { 0 } else { rng.below(4) };
    let msg = variant(&id, v);
    let target = if rng.below(2) == 0 {
        "next-turn"
    } else {
        "next-step"
    };
    let causes = ["user", "parent", "disposed"];
    match rng.below(25) {
        // S54: guarded sends, near the current turn so that both outcomes occur.
        22 | 23 => {
            let n = (spec.last_turn() + rng.below(3)).saturating_sub(1);
            let expect = if rng.below(2) == 0 {
                json!({ "turn": n })
            } else {
                json!({ "idleAfter": n })
            };
            json!({"send":{"message":msg,"target":target,"wakeup":rng.below(3)!=0,"expect":expect}})
        }
        0 | 1 => followup(&msg),
        2 | 3 => steer(&msg),
        4 => inject(&msg),
        5 => json!({"send":{"message":msg,"target":target,"wakeup":rng.below(2)==0}}),
        6 => json!({"remove": id}),
        7 => json!({"replace":{"id": format!("m{}", rng.below(6)),"message":msg}}),
        8 => json!({"prepend":{"target":target,"message":msg}}),
        9 => json!({"clear":{}}),
        10 => cancel(causes[rng.below(3) as usize], rng.below(2) == 0),
        11 => json!({"maintenance":"begin"}),
        12 => json!({"maintenance":"end"}),
        13 => {
            if rng.below(8) == 0 {
                json!({"dispose":{}})
            } else {
                json!({"maintenance":"end"})
            }
        }
        14 => enter(&[]),
        15 => enter(&[&msg]),
        16 => json!({"preStep":"reject"}),
        17 => json!({"preStep":{"fail":err("P")}}),
        18 => {
            let outcome = ["completed", "max-tokens", "continue"][rng.below(3) as usize];
            json!({ "step": outcome })
        }
        19 => json!({"step":{"fail":err("S")}}),
        20 | 24 => json!({"turnStopping":"done"}),
        _ => json!({"turnStopping":{"fail":err("T")}}),
    }
}

/// The message pending under `id`, else the one the memory holds under it (S56).
fn known_message(spec: &Spec, id: &str) -> Option<(&'static str, Value)> {
    if let Some((t, i)) = spec.find(id) {
        return Some(("already-pending", spec.list(t)[i].msg.as_ref().clone()));
    }
    spec.delivered_messages()
        .into_iter()
        .find(|(held, _)| held == id)
        .map(|(_, msg)| ("already-delivered", msg))
}

/// S54: does `expect` hold on this (pre-input) state?
fn guard_holds(spec: &Spec, expect: &Value) -> bool {
    let running_turn = match spec.outstanding() {
        Some(super::Outstanding::PreStep { turn, .. })
        | Some(super::Outstanding::Step { turn, .. })
        | Some(super::Outstanding::TurnStopping { turn }) => Some(turn),
        None => None,
    };
    if let Some(n) = expect.get("turn").and_then(Value::as_u64) {
        running_turn == Some(n) && !spec.is_cancel_requested()
    } else {
        let n = expect.get("idleAfter").and_then(Value::as_u64);
        running_turn.is_none() && !spec.is_maintenance() && n == Some(spec.last_turn())
    }
}

/// I12 / I13 / I14 and the check order of §12 for one `send` or `prepend`, from the state
/// before it (`before`) and its result.
fn check_s12(before: &Spec, input: &Value, result: &Result<Vec<Value>, &'static str>, seed: u64) {
    let (msg, target, wakeup, expect) = if let Some(a) = input.get("send") {
        (
            &a["message"],
            &a["target"],
            a["wakeup"] == true,
            a.get("expect"),
        )
    } else if let Some(a) = input.get("prepend") {
        (&a["message"], &a["target"], false, None)
    } else {
        return;
    };
    let id = msg_id(msg);
    // S18: the resolved list.
    let resolved = if wakeup && before.is_cancel_requested() {
        "next-turn"
    } else {
        target.as_str().unwrap_or_default()
    };
    let (nt, ns) = before.pending();
    let len = if resolved == "next-turn" {
        nt.len()
    } else {
        ns.len()
    };
    let full = before.max_pending().is_some_and(|p| len >= p);
    let known = known_message(before, id);
    let guard = expect.is_none_or(|e| guard_holds(before, e));
    let want = match &known {
        // S13 / S52, each `conflict` for a different message (S56, I14).
        Some((kind, old)) if same_message(old, msg) => Err(*kind),
        Some(_) => Err("conflict"),
        // S54 after identity (I12), S55 last (I13).
        None if !guard => Err("turn-mismatch"),
        None if full => Err("full"),
        None => Ok(()),
    };
    let got = result.as_ref().map(|_| ()).map_err(|e| *e);
    assert_eq!(got, want, "S13/S52/S54/S55/S56 order, seed {seed}: {input}");
    if let Ok(outs) = result {
        // I13: the insertion went into the resolved list, which held fewer than P items.
        let splice = &outs[0]["event"]["data"];
        assert_eq!(splice["target"], resolved, "S18 seed {seed}");
    }
}

/// S49 / S53 / I1 / I5 / I8 / I10 / I11 / I12 / I13 / I14 on random walks, each with a delivery
/// memory of capacity 0 to 3 and an admission bound of none, 1, 2 or 3: the model agrees with
/// its own durable log.
#[test]
fn s49_random_walks_keep_replay_equivalence_and_enclosure() {
    // Coverage: which turn-end kinds (and disposal) the walks reached, and which rejections.
    let mut seen: Vec<String> = Vec::new();
    for seed in 1..=400u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let config = Config {
            memory: (seed % 4) as usize,
            max_pending: NonZeroUsize::new((seed / 4 % 4) as usize),
        };
        let mut r = Spec::with_config(config);
        let mut log: Vec<Value> = Vec::new();
        let mut statuses: Vec<String> = Vec::new();
        let (mut open_turn, mut open_step): (Option<u64>, Option<u64>) = (None, None);
        let mut outstanding = 0i32;
        for _ in 0..120 {
            let input = random_input(&mut rng, &r);
            let held = r.delivered();
            let before = r.clone();
            let result = r.apply(&input);
            // S45 rejects every input once disposed, before any §12 check.
            if !before.is_disposed() {
                check_s12(&before, &input, &result, seed);
            }
            if let Err(kind) = result {
                seen.push(format!("rejected {kind}"));
            }
            let Ok(outs) = result else { continue };
            for o in &outs {
                if let Some(ev) = o.get("event") {
                    log.push(ev.clone());
                    let d = &ev["data"];
                    match ev["type"].as_str().expect("type") {
                        "turn/start" => {
                            assert_eq!(open_turn, None, "I5 seed {seed}");
                            open_turn = d["turn"].as_u64();
                        }
                        "turn/end" => {
                            seen.push(d["reason"]["kind"].as_str().expect("kind").into());
                            assert_eq!(open_step, None, "I5 seed {seed}");
                            assert_eq!(open_turn, d["turn"].as_u64(), "I5 seed {seed}");
                            open_turn = None;
                        }
                        "step/start" => {
                            assert!(open_turn.is_some() && open_step.is_none(), "I5");
                            open_step = d["step"].as_u64();
                        }
                        "step/end" => {
                            assert_eq!(open_step, d["step"].as_u64(), "I5 seed {seed}");
                            open_step = None;
                        }
                        "user/message" => assert!(open_step.is_some(), "I5 seed {seed}"),
                        _ => {}
                    }
                }
                if let Some(n) = o.get("notify") {
                    // I11: an input inserts at most one message, by its first splice, so the
                    // memory before the input is the memory at that insertion.
                    if n["type"] == "agent/inbox/inserted" {
                        let id = n["message"]["id"].as_str().expect("id");
                        assert!(!held.iter().any(|h| h == id), "I11 seed {seed}: {id}");
                    }
                    if n["type"] == "agent/status" {
                        statuses.push(n["status"].as_str().expect("status").to_string());
                    }
                }
                if o.get("disposed").is_some() {
                    seen.push("disposed".into());
                }
                if let Some(q) = o.get("request") {
                    if q.get("abort").is_none() {
                        outstanding += 1;
                    }
                }
            }
            // I10: one outstanding request while running, none otherwise.
            let answered = ["preStep", "step", "turnStopping"]
                .iter()
                .any(|k| input.get(*k).is_some());
            if answered {
                outstanding -= 1;
            }
            let want = i32::from(r.status().as_str() == "running");
            assert_eq!(outstanding, want, "I10 seed {seed} after {input}");
            // S49 / I1: restoring the log (with crash-repair closers) gives the same lists.
            let mut repaired = log.clone();
            if let Some(t) = open_turn {
                if let Some(s) = open_step {
                    repaired.push(json!({"type":"step/end","data":{"turn":t,"step":s}}));
                }
                repaired.push(
                    json!({"type":"turn/end","data":{"turn":t,"reason":{"kind":"interrupted"}}}),
                );
            }
            let restored =
                Spec::restore_with_config(&repaired, 0, config).expect("own log is valid");
            assert_eq!(restored.pending(), r.pending(), "S49 seed {seed}");
            assert_eq!(restored.delivered(), r.delivered(), "S53 seed {seed}");
            // S53, S56: the restored memory holds the same messages.
            assert_eq!(
                restored.delivered_messages(),
                r.delivered_messages(),
                "S53/S56 seed {seed}"
            );
            // I13: only a restored list can be longer than P; the walks restore none.
            if let Some(p) = config.max_pending {
                let (nt, ns) = r.pending();
                assert!(
                    nt.len() <= p.get() && ns.len() <= p.get(),
                    "I13 seed {seed}"
                );
            }
            if r.is_quiescent() {
                assert_eq!(restored.last_turn(), r.last_turn(), "S49 seed {seed}");
            }
        }
        // I8: status notifications alternate, starting with running.
        for (i, s) in statuses.iter().enumerate() {
            let want = if i % 2 == 0 { "running" } else { "idle" };
            assert_eq!(s, want, "I8 seed {seed}");
        }
    }
    for kind in [
        "completed",
        "max-tokens",
        "blocked",
        "aborted",
        "error",
        "disposed",
        "rejected already-pending",
        "rejected already-delivered",
        "rejected conflict",
        "rejected turn-mismatch",
        "rejected full",
    ] {
        assert!(seen.iter().any(|k| k == kind), "walks never reached {kind}");
    }
}
