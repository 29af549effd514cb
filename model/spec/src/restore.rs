//! Restoring from a durable log (S46–S48), rebuilding the delivery memory (S53) with its fate
//! records (S58), reading the `redelivery` key of crash repair's splices as an extra key (S46,
//! S59), and keeping a restored list longer than the admission bound (S55).

use std::sync::Arc;

use serde_json::Value;

use super::lists::Item;
use super::memory::Left;
use super::wire::{msg_id, Target};
use super::{Config, Spec};

/// A log replayed as restore reads it (S46, S53, S58), with what crash repair needs (S59).
pub(super) struct Replay {
    /// The machine the log restores to.
    pub(super) spec: Spec,
    /// The turn the log ends inside, if it does (S46 rejects such a log; S50 repairs it).
    pub(super) interrupted: Option<Interrupted>,
    /// S59: per id, the number of replayed splices (at or after the seed boundary) that carry
    /// `redelivery` and insert it; ids that none inserts are absent.
    pub(super) redeliveries: Vec<(String, u64)>,
}

/// The open turn a log ends inside (S50, S59).
pub(super) struct Interrupted {
    /// Its number, as its `turn/start` wrote it.
    pub(super) turn: u64,
    /// The open step's `step`, as its `step/start` wrote it, if a step is open.
    pub(super) step: Option<Value>,
    /// What the turn claimed after its last `step/start` (all it claimed, if it has none), in
    /// claim order: the list each item was claimed from and the item, with its waking flag (S19).
    /// Only replayed splices (at or after the seed boundary) are read.
    pub(super) unseen: Vec<(Target, Item)>,
}

/// S46: the largest turn a restored `turn/start` may carry, `2^53 − 2`, so that the next turn's
/// number, `2^53 − 1` at most, stays a JSON-safe integer (JavaScript's `MAX_SAFE_INTEGER`).
const MAX_RESTORED_TURN: u64 = (1 << 53) - 2;

impl Spec {
    /// Restores from a durable log (S46–S48): `log` is its events as JSON (`{type, data}`),
    /// `seed_length` the host's seed boundary (S46), `memory` the delivery memory's capacity `W`
    /// (S51), which the replayed splices rebuild (S53); unbounded (S55). `Err` (naming the
    /// offending event) exactly when S46/S47 say the log is invalid.
    pub fn restore(log: &[Value], seed_length: usize, memory: usize) -> Result<Self, String> {
        Spec::restore_with_config(
            log,
            seed_length,
            Config {
                memory,
                max_pending: None,
            },
        )
    }

    /// [`Spec::restore`] with the host's [`Config`]: the memory's capacity (S51, S53) and the
    /// admission bound (S55), which does not make a log invalid: a restored list longer than
    /// `maxPending` is kept as written. The memory's fate records are rebuilt too (S58).
    pub fn restore_with_config(
        log: &[Value],
        seed_length: usize,
        config: Config,
    ) -> Result<Self, String> {
        let replay = Spec::replay(log, seed_length, config)?;
        if replay.interrupted.is_some() {
            // S46: the log may not end inside an open turn (crash repair first, S50).
            return Err("log ends inside an open turn (S46, S50)".to_string());
        }
        Ok(replay.spec)
    }

    /// Replays a log (S46–S48, S53, S58) as restore reads it, without rejecting a log that ends
    /// inside an open turn: that turn is then described for crash repair (S50, S59). `Err`
    /// exactly when S46/S47 reject the log for any other reason.
    pub(super) fn replay(
        log: &[Value],
        seed_length: usize,
        config: Config,
    ) -> Result<Replay, String> {
        // S46: seedLength clamped into [0, len].
        let seed = seed_length.min(log.len());
        // S48: restoring never wakes: the machine is idle, no latch. S51, S55: the host's choices.
        let mut m = Spec::with_config(config);
        // The open turn at this point, if any (S46: a restored log may not end inside one).
        let mut open: Option<Interrupted> = None;
        // S59: per id, how many replayed splices carry `redelivery` and insert it.
        let mut redeliveries: Vec<(String, u64)> = Vec::new();
        for (i, ev) in log.iter().enumerate() {
            // S46: every event needs a string `type` (the whole log, seed included).
            let Some(ty) = ev.get("type").and_then(Value::as_str) else {
                return Err(format!("event {i}: lacks a string type (S46)"));
            };
            let data = ev.get("data");
            match ty {
                "turn/start" => {
                    // S46: lastTurn = turn of the last turn/start in the whole log, an integer in
                    // [0, 2^53 − 2] (as written: a negative, fractional or `1.0` turn is not).
                    let turn = data.and_then(|d| d.get("turn")).and_then(Value::as_u64);
                    let Some(t) = turn.filter(|t| *t <= MAX_RESTORED_TURN) else {
                        return Err(format!(
                            "event {i}: turn/start lacks an integer turn in [0, 2^53 - 2] (S46)"
                        ));
                    };
                    m.last_turn = t;
                    open = Some(Interrupted {
                        turn: t,
                        step: None,
                        unseen: Vec::new(),
                    });
                }
                "step/start" => {
                    if let Some(turn) = &mut open {
                        // S59: only claims after the turn's last `step/start` were unseen.
                        turn.step = Some(
                            data.and_then(|d| d.get("step"))
                                .cloned()
                                .unwrap_or_default(),
                        );
                        turn.unseen.clear();
                    }
                }
                "step/end" => {
                    if let Some(turn) = &mut open {
                        turn.step = None;
                    }
                }
                // S58: a `user/message` inside an open step of an open turn, whose id is held as
                // claimed by that turn, sets the record's `step` if it has none. (Records exist
                // only from replayed splices, so events before the seed boundary never meet one.)
                "user/message" => {
                    let id = data.and_then(|d| d.get("id")).and_then(Value::as_str);
                    let open_step = open
                        .as_ref()
                        .and_then(|t| Some((t.turn, t.step.as_ref()?.as_u64()?)));
                    if let (Some(id), Some((turn, step))) = (id, open_step) {
                        m.memory.entered(turn, step, id);
                    }
                }
                // S58: a `turn/end` sets `end` (its reason's `kind` when that is a string) on the
                // records claimed by that turn, the turn of the last `turn/start` (0 if none),
                // that have none.
                "turn/end" => {
                    let kind = data
                        .and_then(|d| d.get("reason"))
                        .and_then(|r| r.get("kind"))
                        .and_then(Value::as_str);
                    m.memory.turn_ended(m.last_turn, kind);
                    open = None;
                }
                // S46: splices before the seed boundary are not read (S53: nor remembered).
                "agent/inbox/spliced" if i >= seed => {
                    let (target, removed, left) = m.replay_splice(i, data)?;
                    // S59: the claims of the open turn, in claim order (list order within a
                    // splice, NS before NT as S28 writes them).
                    if let (Some(turn), Left::Claimed(_)) = (&mut open, left) {
                        turn.unseen
                            .extend(removed.into_iter().map(|item| (target, item)));
                    }
                    count_redeliveries(data, &mut redeliveries);
                }
                // Every other event is read past.
                _ => {}
            }
        }
        Ok(Replay {
            spec: m,
            interrupted: open,
            redeliveries,
        })
    }

    /// Re-apply one durable splice during restore, validating it (S46, S11, S13). Returns its
    /// list, the items it removed and how they left (S58: with `outcome` an ordinary removal,
    /// without a claim by the turn of the last `turn/start`, 0 if none).
    fn replay_splice(
        &mut self,
        i: usize,
        data: Option<&Value>,
    ) -> Result<(Target, Vec<Item>, Left), String> {
        let bad = |what: &str| Err(format!("event {i}: splice {what} (S46)"));
        let Some(d) = data.and_then(Value::as_object) else {
            return bad("has no data object");
        };
        let target = match d.get("target").and_then(Value::as_str) {
            Some("next-turn") => Target::NextTurn,
            Some("next-step") => Target::NextStep,
            _ => return bad("lacks a valid target"),
        };
        let Some(start) = d.get("start").and_then(Value::as_u64) else {
            return bad("has a non-integer start");
        };
        let removed = match d.get("removedCount") {
            None => 0,
            Some(v) => match v.as_u64() {
                Some(n) => n,
                None => return bad("has a non-integer removedCount"),
            },
        };
        // S11: 0 <= start <= len, start + removedCount <= len.
        let len = self.list(target).len() as u64;
        if start > len || removed > len - start {
            return bad("has out-of-range coordinates (S11)");
        }
        let Some(inserted) = d.get("inserted").and_then(Value::as_array) else {
            return bad("has no inserted list");
        };
        for msg in inserted {
            if msg.get("id").and_then(Value::as_str).is_none() {
                return bad("inserts a message without a string id");
            }
        }
        // S48: the waking flag comes from the splice (absent = quiet); present must be `true`.
        let waking = match d.get("wakeup") {
            None => false,
            Some(Value::Bool(true)) => true,
            Some(_) => return bad("has a wakeup that is not true"),
        };
        let start = start as usize;
        let removed = removed as usize;
        let mut list = self.list(target).clone();
        let items: Vec<Item> = inserted
            .iter()
            .map(|msg| Item {
                msg: Arc::new(msg.clone()),
                waking,
            })
            .collect();
        let removed: Vec<Item> = list.splice(start..start + removed, items).collect();
        // S13: no id pending twice across NT and NS after the splice.
        let other = match target {
            Target::NextTurn => &self.ns,
            Target::NextStep => &self.nt,
        };
        let mut ids: Vec<&str> = Vec::new();
        for item in list.iter().chain(other.iter()) {
            if ids.contains(&item.id()) {
                return bad(&format!("makes id {:?} pending twice (S13)", item.id()));
            }
            ids.push(item.id());
        }
        *self.list_mut(target) = list;
        // S53: the memory is rebuilt by the S51 rule, splice by splice in log order, each held id
        // with the message it left as (S56); an inserted id the memory holds at this point (a
        // log written under a smaller capacity) is valid and leaves the memory as it is inserted.
        let left = if d.contains_key("outcome") {
            Left::Discarded
        } else {
            Left::Claimed(self.last_turn)
        };
        self.memory_after_splice(&removed, left);
        Ok((target, removed, left))
    }
}

/// S59: a splice carrying `redelivery` counts once for each id it inserts. (Its ids are
/// distinct: `replay_splice` refused a batch with a duplicate, S13.)
fn count_redeliveries(data: Option<&Value>, redeliveries: &mut Vec<(String, u64)>) {
    let d = data.and_then(Value::as_object);
    if !d.is_some_and(|d| d.contains_key("redelivery")) {
        return;
    }
    let inserted = d.and_then(|d| d.get("inserted")).and_then(Value::as_array);
    for id in inserted.into_iter().flatten().map(msg_id) {
        match redeliveries.iter_mut().find(|(held, _)| held == id) {
            Some((_, n)) => *n += 1,
            None => redeliveries.push((id.to_string(), 1)),
        }
    }
}
