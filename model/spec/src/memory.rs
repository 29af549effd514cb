//! The delivery memory (S51–S53, I11): the ids of the last `W` items that left the pending lists,
//! each with its message (S56), and the `already-delivered` rejection it causes.
//!
//! Written from SPEC §11 alone, for clarity rather than speed: a `VecDeque` of (id, message),
//! oldest first, searched linearly. The rules hook in at exactly two places: after every live
//! splice ([`Spec::splice`](super::Spec)) and after every replayed splice of a restore
//! (S53), both through [`Spec::memory_after_splice`]; and in the checks of `send`,
//! `prepend` and `replace` ([`Spec::check_not_delivered`], S52, S56).
//!
//! S56 lets the memory keep, for each held id, the message or a digest of its canonical value;
//! the spec keeps the whole message (shared with the item it left as, S8), so the comparison is
//! the plain JSON equality of `conflict` and the view can show it.

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::Value;

use super::conflict::reuse_rejection;
use super::lists::Item;
use super::wire::msg_id;
use super::Spec;

/// The delivery memory of one machine (S51).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Memory {
    /// `W`, chosen by the host at creation or restore; never written to the log (S51).
    capacity: usize,
    /// The held ids with the message each left the lists as (S56), oldest first. Never longer
    /// than `capacity`; no id twice (an id is held only while not pending, and enters only when
    /// it leaves the lists).
    held: VecDeque<(String, Arc<Value>)>,
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
        self.held
            .iter()
            .find(|(held, _)| held == id)
            .map(|(_, msg)| msg.as_ref())
    }

    /// The held ids, oldest first.
    pub(super) fn held(&self) -> Vec<String> {
        self.held.iter().map(|(id, _)| id.clone()).collect()
    }

    /// The held (id, message) pairs, oldest first (S56).
    pub(super) fn held_messages(&self) -> Vec<(String, Value)> {
        self.held
            .iter()
            .map(|(id, msg)| (id.clone(), msg.as_ref().clone()))
            .collect()
    }

    /// S51: an id that left the lists enters the memory as the newest, with the message it left
    /// as (S56); while more than `W` ids are held, the oldest are forgotten.
    fn remember(&mut self, item: &Item) {
        self.held
            .push_back((item.id().to_string(), Arc::clone(&item.msg)));
        while self.held.len() > self.capacity {
            self.held.pop_front();
        }
    }

    /// S51 "no id is ever both pending and held": an id that is pending is not held. Live, S52
    /// already refuses every insertion of a held id, so this only acts on a restored log written
    /// under a smaller capacity: S53 accepts such a log, and the id leaves the memory as it is
    /// inserted.
    fn release(&mut self, id: &str) {
        self.held.retain(|(held, _)| held != id);
    }
}

impl Spec {
    /// S51 (live) and S53 (restore): the memory after one splice on the lists. `removed` are the
    /// items the splice removed, in list order; the lists already show the splice's result.
    /// Every removed id that is not pending after the splice enters the memory, in list order (a
    /// `replace` that keeps the id leaves it pending, so it does not enter); every pending id is
    /// not held.
    pub(super) fn memory_after_splice(&mut self, removed: &[Item]) {
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
                self.memory.remember(item);
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
