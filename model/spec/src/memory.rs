//! The delivery memory (S51–S53, S58, I11, I15): the ids of the last `W` items that left the
//! pending lists, each with its message (S56) and its fate record (S58), and the
//! `already-delivered` rejection it causes.
//!
//! Written from SPEC §11 and §13 alone, for clarity rather than speed: a `VecDeque` of held
//! entries, oldest first, searched linearly. The rules hook in at exactly two places: after every
//! live splice ([`Spec::splice`](super::Spec)) and after every replayed splice of a restore
//! (S53), both through [`Spec::memory_after_splice`]; and in the checks of `send`,
//! `prepend` and `replace` ([`Spec::check_not_delivered`], S52, S56). The fate records are
//! updated by [`Memory::entered`] (a `user/message`) and [`Memory::turn_ended`] (a `turn/end`),
//! live (`answers`, `turns`) and on restore (`restore`) alike (S58).
//!
//! S56 lets the memory keep, for each held id, the message or a digest of its canonical value;
//! the spec keeps the whole message (shared with the item it left as, S8), so the comparison is
//! the plain JSON equality of `conflict` and the view can show it.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::conflict::reuse_rejection;
use super::lists::Item;
use super::wire::msg_id;
use super::Spec;

/// How the items a splice removed left the lists (S58): by an ordinary removal (S12: remove,
/// replace, clear, cancel, dispose) or by a claim (S28) of a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Left {
    /// An ordinary removal: the splice carries `outcome` (S10, S12).
    Discarded,
    /// A claim by this turn: a pure deletion, no `outcome` (S28). On restore, the turn of the
    /// last `turn/start` before the splice, 0 if there is none (S58).
    Claimed(u64),
}

/// S58: the record the memory keeps with a held id: how it left the lists and what happened to
/// it since.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Record {
    /// `discarded`: it left by an ordinary removal.
    Discarded,
    /// `claimed { turn, step?, end? }`: it left by a claim of `turn`.
    Claimed {
        /// The claiming turn.
        turn: u64,
        /// The first step of that turn, after the claim, whose `user/message` carried the id.
        step: Option<u64>,
        /// The `kind` of that turn's `turn/end` reason, once it ended.
        end: Option<String>,
    },
}

impl Record {
    /// The record as FORMAT.md's fate value `F`: `"discarded"`, or
    /// `{"claimed": {"turn": n, "step"?: n, "end"?: K}}` with absent keys omitted.
    pub(super) fn to_json(&self) -> Value {
        match self {
            Record::Discarded => json!("discarded"),
            Record::Claimed { turn, step, end } => {
                let mut claimed = Map::new();
                claimed.insert("turn".into(), json!(turn));
                if let Some(step) = step {
                    claimed.insert("step".into(), json!(step));
                }
                if let Some(end) = end {
                    claimed.insert("end".into(), json!(end));
                }
                json!({ "claimed": claimed })
            }
        }
    }
}

/// One held id (S51): the message it left as (S56) and its fate record (S58).
///
/// `Eq` and `Hash` leave the record out, as [`Spec`]'s promise to a model checker says: no later
/// *input* reads it (`fate` is a query, and no output depends on a record), so two specs that
/// differ only in records behave the same from then on. The core's `Behaviour` leaves them out
/// the same way. A check of the records compares [`Spec::fate`] answers directly.
#[derive(Clone, Debug)]
struct Held {
    id: String,
    msg: Arc<Value>,
    record: Record,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (&self.id, &self.msg) == (&other.id, &other.msg)
    }
}

impl Eq for Held {}

impl std::hash::Hash for Held {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (&self.id, &self.msg).hash(state);
    }
}

/// The delivery memory of one machine (S51).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Memory {
    /// `W`, chosen by the host at creation or restore; never written to the log (S51).
    /// `usize::MAX` is S58's `unbounded` ([`Config::UNBOUNDED_MEMORY`](super::Config)): no
    /// memory can hold that many ids, so none is ever forgotten.
    capacity: usize,
    /// The held ids with the message each left the lists as (S56) and its record (S58), oldest
    /// first. Never longer than `capacity`; no id twice (an id is held only while not pending,
    /// and enters only when it leaves the lists).
    held: VecDeque<Held>,
}

impl Memory {
    /// S51: a memory of capacity `W ≥ 0`; `W = 0` holds nothing (plain S9).
    pub(super) fn new(capacity: usize) -> Self {
        Memory {
            capacity,
            held: VecDeque::new(),
        }
    }

    /// `W` (S51).
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// S52, S56: the message the memory holds under this id, if it holds the id.
    pub(super) fn message(&self, id: &str) -> Option<&Value> {
        self.find(id).map(|held| held.msg.as_ref())
    }

    /// S58: the record the memory holds for this id, if it holds the id.
    pub(super) fn record(&self, id: &str) -> Option<&Record> {
        self.find(id).map(|held| &held.record)
    }

    fn find(&self, id: &str) -> Option<&Held> {
        self.held.iter().find(|held| held.id == id)
    }

    /// The held ids, oldest first.
    pub(super) fn held(&self) -> Vec<String> {
        self.held.iter().map(|held| held.id.clone()).collect()
    }

    /// The held (id, message) pairs, oldest first (S56).
    pub(super) fn held_messages(&self) -> Vec<(String, Value)> {
        self.held
            .iter()
            .map(|held| (held.id.clone(), held.msg.as_ref().clone()))
            .collect()
    }

    /// The held (id, fate) pairs, oldest first (S58), each fate as FORMAT.md spells it.
    pub(super) fn held_fates(&self) -> Vec<(String, Value)> {
        self.held
            .iter()
            .map(|held| (held.id.clone(), held.record.to_json()))
            .collect()
    }

    /// S51: an id that left the lists enters the memory as the newest, with the message it left
    /// as (S56) and the record of how it left (S58: `discarded`, or `claimed { turn }` with no
    /// step and no end yet); while more than `W` ids are held, the oldest are forgotten, each
    /// with its record.
    fn remember(&mut self, item: &Item, left: Left) {
        let record = match left {
            Left::Discarded => Record::Discarded,
            Left::Claimed(turn) => Record::Claimed {
                turn,
                step: None,
                end: None,
            },
        };
        self.held.push_back(Held {
            id: item.id().to_string(),
            msg: Arc::clone(&item.msg),
            record,
        });
        while self.held.len() > self.capacity {
            self.held.pop_front();
        }
    }

    /// S51 "no id is ever both pending and held": an id that is pending is not held. Live, S52
    /// already refuses every insertion of a held id, so this only acts on a restored log written
    /// under a smaller capacity, or on crash repair's redelivery (S59): S53 accepts such a log,
    /// and the id leaves the memory as it is inserted, its record with it (S58).
    fn release(&mut self, id: &str) {
        self.held.retain(|held| held.id != id);
    }

    /// S58: a `user/message` carrying `id` in step `step` of the open turn `turn`: the record of
    /// an id held as claimed by that turn gets `step` if it has none (the first such step). Any
    /// other entered message (not held, discarded, claimed by another turn, or a message the host
    /// added, S29) changes no record.
    pub(super) fn entered(&mut self, turn: u64, step: u64, id: &str) {
        for held in self.held.iter_mut().filter(|held| held.id == id) {
            if let Record::Claimed {
                turn: claimed_by,
                step: first @ None,
                ..
            } = &mut held.record
            {
                if *claimed_by == turn {
                    *first = Some(step);
                }
            }
        }
    }

    /// S58: the `turn/end` of `turn`, with its reason's `kind` (on restore, `None` when the
    /// reason's `kind` is not a string): every record claimed by that turn that has no `end`
    /// gets it.
    pub(super) fn turn_ended(&mut self, turn: u64, kind: Option<&str>) {
        let Some(kind) = kind else {
            return;
        };
        for held in &mut self.held {
            if let Record::Claimed {
                turn: claimed_by,
                end: end @ None,
                ..
            } = &mut held.record
            {
                if *claimed_by == turn {
                    *end = Some(kind.to_string());
                }
            }
        }
    }
}

impl Spec {
    /// S51 (live) and S53 (restore): the memory after one splice on the lists. `removed` are the
    /// items the splice removed, in list order; the lists already show the splice's result.
    /// Every removed id that is not pending after the splice enters the memory, in list order (a
    /// `replace` that keeps the id leaves it pending, so it does not enter); every pending id is
    /// not held. `left` says how they left, for their records (S58): an ordinary removal or a
    /// claim by a turn.
    pub(super) fn memory_after_splice(&mut self, removed: &[Item], left: Left) {
        let pending: Vec<String> = self
            .nt
            .iter()
            .chain(self.ns.iter())
            .map(|item| item.id().to_string())
            .collect();
        for id in &pending {
            self.memory.release(id);
        }
        for item in removed {
            if !pending.iter().any(|p| p == item.id()) {
                self.memory.remember(item, left);
            }
        }
    }

    /// S52: a `send`, a `prepend`, or a `replace` of a pending item whose new message's id the
    /// memory holds is rejected `already-delivered`, or `conflict` when `msg` differs from the
    /// message held under that id (S56). Callers run the S13 `already-pending` check first, and
    /// a `replace` of an absent id never gets here (S15).
    pub(super) fn check_not_delivered(&self, msg: &Value) -> Result<(), &'static str> {
        match self.memory.message(msg_id(msg)) {
            Some(held) => Err(reuse_rejection("already-delivered", held, msg)),
            None => Ok(()),
        }
    }
}
