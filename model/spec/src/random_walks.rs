//! Random walks of valid and invalid inputs (`resume` included, S57), with crashes now and then
//! (crash repair with a random redelivery allowance, then restore, S50, S59): the spec agrees
//! with its own durable log (S49, S53, S58) and keeps the invariants I1, I5, I8, I10, I11, I12,
//! I13, I14, I15 and I16. A check of the spec itself, which no single trace can express; the
//! proptests walk the real core beside it.

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
    match rng.below(27) {
        // S57: resume, in every phase.
        25 | 26 => json!({"resume":{}}),
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

/// S49 / S53 / S58 / S59 / I1 / I5 / I8 / I10 / I11 / I12 / I13 / I14 / I15 / I16 on random
/// walks, each with a delivery memory of capacity 0 to 3 or `unbounded` and an admission bound
/// of none, 1, 2 or 3: the model agrees with its own durable log, fate records included, and a
/// crash loses nothing unseen that the allowance covers.
#[test]
fn s49_random_walks_keep_replay_equivalence_and_enclosure() {
    // Coverage: which turn-end kinds (and disposal) the walks reached, and which rejections.
    let mut seen: Vec<String> = Vec::new();
    for seed in 1..=400u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        // S51, S58: capacities 0 to 3 and `unbounded`.
        let memory = match seed % 5 {
            4 => Config::UNBOUNDED_MEMORY,
            w => w as usize,
        };
        let config = Config {
            memory,
            max_pending: NonZeroUsize::new((seed / 5 % 4) as usize),
        };
        let mut r = Spec::with_config(config);
        let mut log: Vec<Value> = Vec::new();
        let mut statuses: Vec<String> = Vec::new();
        let (mut open_turn, mut open_step): (Option<u64>, Option<u64>) = (None, None);
        let mut outstanding = 0i32;
        // S59: what the open turn claimed after its last `step/start` (ids in claim order), and
        // per id the redelivery splices so far.
        let mut unseen: Vec<Claimed> = Vec::new();
        let mut redelivered: Vec<(String, u64)> = Vec::new();
        let mut crashed = false;
        for _ in 0..120 {
            // S50, S59: now and then the process dies inside a turn; crash repair with a random
            // allowance closes the log and may redeliver, and the walk goes on from the restored
            // machine (I16).
            if let (Some(t), true) = (open_turn, rng.below(12) == 0) {
                let allowance = rng.below(3);
                r = crash(
                    &r,
                    &mut log,
                    config,
                    allowance,
                    t,
                    &unseen,
                    &mut redelivered,
                    &mut seen,
                    seed,
                );
                seen.push(format!("crash A={allowance}"));
                crashed = true;
                (open_turn, open_step, outstanding) = (None, None, 0);
                statuses.clear();
                unseen.clear();
                continue;
            }
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
                            unseen.clear();
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
                            unseen.clear();
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
                    if n["type"] == "agent/inbox/claimed" {
                        unseen.push(claimed_item(&before, &input, &n["message"]));
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
            // I13: only a restored list can be longer than P; the walks restore none but after
            // a crash (S55: redelivery may refill a list beyond P).
            if let (Some(p), false) = (config.max_pending, crashed) {
                let (nt, ns) = r.pending();
                assert!(
                    nt.len() <= p.get() && ns.len() <= p.get(),
                    "I13 seed {seed}"
                );
            }
            if r.is_quiescent() {
                assert_eq!(restored.last_turn(), r.last_turn(), "S49 seed {seed}");
            }
            // S58, I15: the restored records are the live ones, once idle; while a turn is open,
            // they differ by design only in that turn's claims, which the closers end
            // `interrupted`.
            let mut want = r.fates();
            if let Some(t) = open_turn {
                for (_, fate) in &mut want {
                    if let Some(claimed) = fate.get_mut("claimed") {
                        if claimed["turn"] == t && claimed.get("end").is_none() {
                            claimed["end"] = json!("interrupted");
                        }
                    }
                }
            }
            assert_eq!(restored.fates(), want, "S58 seed {seed} after {input}");
            for id in (0..6).map(|i| format!("m{i}")) {
                let held = want.iter().find(|(h, _)| *h == id).map(|(_, f)| f.clone());
                let fate = held.unwrap_or_else(|| r.fate(&id));
                assert_eq!(restored.fate(&id), fate, "S58 seed {seed}: {id}");
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
        "crash A=0",
        "crash A=1",
        "crash A=2",
        "redelivered",
        "redelivery skipped",
    ] {
        assert!(seen.iter().any(|k| k == kind), "walks never reached {kind}");
    }
}

/// A claimed message, as S59 redelivers it: the message, the list it was claimed from (0 NT,
/// 1 NS) and whether it was waking (S19). Found in the lists before the input, else it was
/// inserted by the input itself (a waking send to an idle machine, which claims at once, S24).
type Claimed = (Value, usize, bool);

fn claimed_item(before: &Spec, input: &Value, msg: &Value) -> Claimed {
    let id = msg_id(msg);
    let (nt, ns) = before.pending();
    for (t, list) in [nt, ns].iter().enumerate() {
        if let Some((_, waking)) = list.iter().find(|(p, _)| p == id) {
            return (msg.clone(), t, *waking);
        }
    }
    let (target, waking) = if let Some(a) = input.get("send") {
        (
            a["target"].as_str().unwrap_or_default(),
            a["wakeup"] == true,
        )
    } else if input.get("followup").is_some() {
        ("next-turn", true)
    } else {
        assert!(input.get("steer").is_some(), "{input} claimed {id}");
        ("next-step", true)
    };
    (msg.clone(), usize::from(target == "next-step"), waking)
}

/// S50, S59, I16: crash repair of the walk's log (open turn `turn`, which claimed `unseen` after
/// its last `step/start`) with allowance `allowance`, then restore: the closers, then one
/// redelivery splice per unseen message whose id is not pending at the crash and was
/// redelivered fewer than `allowance` times (its `redelivery` one more than before), and every
/// such id pending again where it was claimed from, with its waking flag; a skipped id keeps
/// `claimed { …, end: interrupted }` if the memory holds it (S58). Appends the repair's events
/// to `log` and returns the restored machine.
#[allow(clippy::too_many_arguments)]
fn crash(
    live: &Spec,
    log: &mut Vec<Value>,
    config: Config,
    allowance: u64,
    turn: u64,
    unseen: &[Claimed],
    redelivered: &mut Vec<(String, u64)>,
    seen: &mut Vec<String>,
    seed: u64,
) -> Spec {
    let (back, events) =
        Spec::restore_repaired(log, 0, config, allowance).expect("S50: a repaired log restores");
    // S50: `step/end` if a step is open, then `turn/end interrupted`.
    let mut want: Vec<Value> = Vec::new();
    if let Some(super::Outstanding::Step { step, .. }) = live.outstanding() {
        want.push(json!({"type":"step/end","data":{"turn":turn,"step":step}}));
    }
    want.push(json!({"type":"turn/end","data":{"turn":turn,"reason":{"kind":"interrupted"}}}));
    let (nt, ns) = live.pending();
    let (bnt, bns) = back.pending();
    let mut k = [0usize; 2];
    for (msg, target, waking) in unseen {
        let id = msg_id(msg);
        let count = redelivered
            .iter()
            .find(|(h, _)| h == id)
            .map_or(0, |(_, n)| *n);
        let pending = nt.iter().chain(&ns).any(|(p, _)| p == id);
        if pending || count + 1 > allowance {
            seen.push("redelivery skipped".into());
            // S58: a skipped id keeps its record, which the closers end `interrupted` when it is
            // still this turn's claim (the id may have been sent and removed again since).
            let mut fate = live.fate(id);
            if let Some(claimed) = fate.get_mut("claimed") {
                if claimed["turn"] == turn && claimed.get("end").is_none() {
                    claimed["end"] = json!("interrupted");
                }
            }
            assert_eq!(back.fate(id), fate, "S58/S59 seed {seed}: {id}");
            continue;
        }
        seen.push("redelivered".into());
        // I16: pending again, where it was claimed from, with its waking flag.
        let list = [&bnt, &bns][*target];
        assert!(
            list.contains(&(id.to_string(), *waking)),
            "I16 seed {seed}: {id}"
        );
        let name = ["next-turn", "next-step"][*target];
        let start = k[*target];
        let mut data = json!({ "target": name, "start": start, "inserted": [msg],
                               "redelivery": count + 1 });
        if *waking {
            data["wakeup"] = json!(true);
        }
        k[*target] += 1;
        want.push(json!({ "type": "agent/inbox/spliced", "data": data }));
        match redelivered.iter_mut().find(|(h, _)| h == id) {
            Some((_, n)) => *n += 1,
            None => redelivered.push((id.to_string(), 1)),
        }
    }
    assert_eq!(events, want, "S50/S59 seed {seed}");
    log.extend(events);
    back
}
