//! Random walks of valid and invalid inputs: the spec agrees with its own durable log (S49,
//! S53) and keeps the invariants I1, I5, I8, I10 and I11. A check of the spec itself, which no single
//! trace can express; the proptests walk the real core beside it.

use serde_json::{json, Value};

use super::Spec;

fn m(id: &str) -> Value {
    json!({ "id": id, "source": { "kind": "user" }, "content": id })
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

fn random_input(rng: &mut Rng) -> Value {
    let id = format!("m{}", rng.below(6));
    let msg = m(&id);
    let target = if rng.below(2) == 0 {
        "next-turn"
    } else {
        "next-step"
    };
    let causes = ["user", "parent", "disposed"];
    match rng.below(22) {
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
        20 => json!({"turnStopping":"done"}),
        _ => json!({"turnStopping":{"fail":err("T")}}),
    }
}

/// S49 / S53 / I1 / I5 / I8 / I10 / I11 on random walks, each with a delivery memory of capacity
/// 0 to 3: the model agrees with its own durable log.
#[test]
fn s49_random_walks_keep_replay_equivalence_and_enclosure() {
    // Coverage: which turn-end kinds (and disposal) the walks reached.
    let mut seen: Vec<String> = Vec::new();
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let memory = (seed % 4) as usize;
        let mut r = Spec::with_memory(memory);
        let mut log: Vec<Value> = Vec::new();
        let mut statuses: Vec<String> = Vec::new();
        let (mut open_turn, mut open_step): (Option<u64>, Option<u64>) = (None, None);
        let mut outstanding = 0i32;
        for _ in 0..120 {
            let input = random_input(&mut rng);
            let held = r.delivered();
            let Ok(outs) = r.apply(&input) else { continue };
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
            let restored = Spec::restore(&repaired, 0, memory).expect("own log is valid");
            assert_eq!(restored.pending(), r.pending(), "S49 seed {seed}");
            assert_eq!(restored.delivered(), r.delivered(), "S53 seed {seed}");
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
    ] {
        assert!(seen.iter().any(|k| k == kind), "walks never reached {kind}");
    }
}
