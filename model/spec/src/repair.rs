//! Crash repair (S50) with redelivery (S59): the events the persistence layer appends to a
//! stored log that ends inside an open turn, before the log is restored (S46).
//!
//! Not part of the machine (S3, S50): a function of the log, its seed boundary and the host's
//! redelivery allowance `A`. It reads the log exactly as restore does (`Spec::replay`, the same
//! pass that restores), so the lists it redelivers into, the claims it finds and the splices it
//! counts are the ones restore sees.

use serde_json::{json, Map, Value};

use super::lists::Item;
use super::restore::Interrupted;
use super::wire::Target;
use super::{Config, Spec};

/// Crash repair (S50, S59) of a stored durable log: the events it appends, in order, each as
/// `{ "type", "data" }` (FORMAT.md's `given.repair`: the `out` lines right after `given` are
/// these events, each as `{ "event": … }`).
///
/// `log` is the stored log (each event `{type, data}`; a torn final record is the storage
/// layer's to drop before this, S50), `seed_length` its seed boundary (S46) and `allowance` the
/// host's redelivery allowance `A ≥ 0` (S59; 0 is S50 unchanged: no redelivery).
///
/// A log that does not end inside an open turn needs no repair: nothing is appended. Otherwise,
/// in order (S50): `step/end { turn, step }` if a step is open, then
/// `turn/end { turn, reason: { kind: "interrupted" } }`; then (S59) one redelivery splice
/// `{ target, start: k, inserted: [m], wakeup: true?, redelivery: r }` for each message the
/// interrupted turn claimed after its last `step/start` (every message it claimed, if it has
/// none), in claim order, skipping a message when `r > A` or when its id is pending at the end of
/// the log.
///
/// `Err` (naming the offending event, as [`Spec::restore`] would) exactly when the log is
/// invalid for any reason other than ending inside an open turn (S46, S47): repair cannot mend
/// it, and restoring it would fail. After `Ok(events)`, `log` followed by `events` restores.
pub fn repair(log: &[Value], seed_length: usize, allowance: u64) -> Result<Vec<Value>, String> {
    // Capacity and bound play no part in repair (they are not in the log, S51, S55).
    let replay = Spec::replay(log, seed_length, Config::default())?;
    let Some(turn) = replay.interrupted else {
        return Ok(Vec::new());
    };
    let mut events = closers(&turn);
    let (nt, ns) = replay.spec.pending();
    let mut pending: Vec<String> = nt.into_iter().chain(ns).map(|(id, _)| id).collect();
    // S59: `k` per list, the messages this repair has already re-inserted there.
    let (mut k_nt, mut k_ns) = (0usize, 0usize);
    for (target, item) in &turn.unseen {
        let id = item.id();
        // S59: skipped when its id is pending at the end of the log (a later send reused it,
        // S9), or already re-inserted by this repair (only a log the machine did not write can
        // show one id claimed twice in the window; a second insertion would break S13).
        if pending.iter().any(|p| p == id) {
            continue;
        }
        // S59: `r` is one more than the replayed splices that carry `redelivery` and insert
        // this id (per id: a later message that reuses the id inherits the count).
        let before = replay
            .redeliveries
            .iter()
            .find(|(held, _)| held == id)
            .map_or(0, |(_, n)| *n);
        let r = before + 1;
        if r > allowance {
            continue;
        }
        let k = match target {
            Target::NextTurn => &mut k_nt,
            Target::NextStep => &mut k_ns,
        };
        events.push(redelivery_splice(*target, *k, item, r));
        *k += 1;
        pending.push(id.to_string());
    }
    Ok(events)
}

impl Spec {
    /// Crash repair (S50, S59, [`repair`]) of `log` with allowance `allowance`, then restore
    /// (S46, [`Spec::restore_with_config`]) of `log` followed by the repair's events: the
    /// restored machine and those events (FORMAT.md's `given` with `repair`). `Err` when the log
    /// is invalid for a reason repair cannot mend (S47).
    pub fn restore_repaired(
        log: &[Value],
        seed_length: usize,
        config: Config,
        allowance: u64,
    ) -> Result<(Spec, Vec<Value>), String> {
        let events = repair(log, seed_length, allowance)?;
        let repaired: Vec<Value> = log.iter().chain(&events).cloned().collect();
        let spec = Spec::restore_with_config(&repaired, seed_length, config)?;
        Ok((spec, events))
    }
}

/// S50: the closers of the interrupted turn: `step/end` (if a step is open), then
/// `turn/end {kind: "interrupted"}`.
fn closers(turn: &Interrupted) -> Vec<Value> {
    let mut events = Vec::new();
    if let Some(step) = &turn.step {
        events.push(json!({ "type": "step/end", "data": { "turn": turn.turn, "step": step } }));
    }
    events.push(json!({ "type": "turn/end",
                        "data": { "turn": turn.turn, "reason": { "kind": "interrupted" } } }));
    events
}

/// S59: `{ target, start: k, inserted: [m], wakeup: true?, redelivery: r }`, the message as it
/// was claimed (S8), `wakeup` exactly when the item was waking when it was claimed (S19).
fn redelivery_splice(target: Target, k: usize, item: &Item, r: u64) -> Value {
    let mut data = Map::new();
    data.insert("target".into(), json!(target.name()));
    data.insert("start".into(), json!(k));
    data.insert("inserted".into(), json!([item.msg.as_ref()]));
    if item.waking {
        data.insert("wakeup".into(), json!(true));
    }
    data.insert("redelivery".into(), json!(r));
    json!({ "type": "agent/inbox/spliced", "data": data })
}
