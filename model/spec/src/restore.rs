//! Restoring from a durable log (S46–S48), rebuilding the delivery memory (S53) and keeping a
//! restored list longer than the admission bound (S55).

use std::sync::Arc;

use serde_json::Value;

use super::lists::Item;
use super::wire::Target;
use super::{Config, Spec};

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
    /// `maxPending` is kept as written.
    pub fn restore_with_config(
        log: &[Value],
        seed_length: usize,
        config: Config,
    ) -> Result<Self, String> {
        // S46: seedLength clamped into [0, len].
        let seed = seed_length.min(log.len());
        // S48: restoring never wakes: the machine is idle, no latch. S51, S55: the host's choices.
        let mut m = Spec::with_config(config);
        // Whether the log is inside an open turn at this point (S46: may not end inside one).
        let mut open = false;
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
                    open = true;
                }
                "turn/end" => open = false,
                // S46: splices before the seed boundary are not read (S53: nor remembered).
                "agent/inbox/spliced" if i >= seed => m.replay_splice(i, data)?,
                // Every other event is read past.
                _ => {}
            }
        }
        if open {
            return Err("log ends inside an open turn (S46, S50)".to_string());
        }
        Ok(m)
    }

    /// Re-apply one durable splice during restore, validating it (S46, S11, S13).
    fn replay_splice(&mut self, i: usize, data: Option<&Value>) -> Result<(), String> {
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
        self.memory_after_splice(&removed);
        Ok(())
    }
}
