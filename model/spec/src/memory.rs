//! The delivery memory (S51–S53, I11): the ids of the last `W` items that left the pending lists,
//! and the `already-delivered` rejection it causes.
//!
//! Written from SPEC §11 alone, for clarity rather than speed: a `VecDeque` of ids, oldest first,
//! searched linearly. The rules hook in at exactly two places: after every live splice
//! ([`Spec::splice`](super::Spec)) and after every replayed splice of a restore
//! (S53), both through [`Spec::memory_after_splice`]; and in the checks of `send`,
//! `prepend` and `replace` ([`Spec::check_not_delivered`], S52).

use std::collections::VecDeque;

use super::lists::Item;
use super::Spec;

/// The delivery memory of one machine (S51).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Memory {
    /// `W`, chosen by the host at creation or restore; never written to the log (S51).
    capacity: usize,
    /// The held ids, oldest first. Never longer than `capacity`.
    held: VecDeque<String>,
}

impl Memory {
    /// S51: a memory of capacity `W ≥ 0`; `W = 0` holds nothing (plain S9).
    pub(super) fn new(capacity: usize) -> Self {
        Memory {
            capacity,
            held: VecDeque::new(),
        }
    }

    /// S52: does the memory hold this id?
    pub(super) fn holds(&self, id: &str) -> bool {
        self.held.iter().any(|held| held == id)
    }

    /// The held ids, oldest first.
    pub(super) fn held(&self) -> Vec<String> {
        self.held.iter().cloned().collect()
    }

    /// S51: an id that left the lists enters the memory as the newest; while more than `W` ids
    /// are held, the oldest are forgotten.
    fn remember(&mut self, id: &str) {
        self.held.push_back(id.to_string());
        while self.held.len() > self.capacity {
            self.held.pop_front();
        }
    }

    /// S51 "no id is ever both pending and held": an id that is pending is not held. Live, S52
    /// already refuses every insertion of a held id, so this only acts on a restored log written
    /// under a smaller capacity (S46 accepts such a log as written; S53 replays it).
    fn release(&mut self, id: &str) {
        self.held.retain(|held| held != id);
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
                self.memory.remember(item.id());
            }
        }
    }

    /// S52: a `send`, a `prepend`, or a `replace` of a pending item whose new message's id the
    /// memory holds is rejected `already-delivered`. Callers run the S13 `already-pending` check
    /// first, and a `replace` of an absent id never gets here (S15).
    pub(super) fn check_not_delivered(&self, id: &str) -> Result<(), &'static str> {
        if self.memory.holds(id) {
            Err("already-delivered")
        } else {
            Ok(())
        }
    }
}
