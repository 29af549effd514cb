//! Symmetry reduction over message ids: the pool's ids are interchangeable.
//!
//! Every pool message is `{id: "m<i>", source: {kind: "user"}, content: "hello"}`: nothing but
//! its id tells two apart, and the environment offers every action for every id. So two states
//! that differ only by a permutation of the ids behave alike, and the checker needs to visit one
//! of them (stateright's [`Representative`], honoured by its DFS checker).
//!
//! The representative of a state is the state itself with a *canonical fingerprint*: its hash
//! computed with the ids renamed in the order they first appear in a canonical walk of the
//! state's ordered parts (NT, then NS, then the outstanding pre-step batch, then the delivery
//! memory oldest first, then the id the memory forgot last; ids found nowhere keep their pool
//! order). The renaming happens inside the hasher, as the state's own `Hash` writes each id's
//! bytes, so no machine has to be rebuilt. Every part of the state that is hashed holds ids only
//! in ordered containers (lists, rings, batches), or, for the monitor's map of pending ids, hashes
//! them in list order; a renamed hash is therefore the hash of the renamed state.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use coxswain_core::{MessageId, Target};
use stateright::Representative;

use crate::model::State;

/// A hasher that renames pool ids as they are written: the bytes of id number `from[i]` are
/// written as the bytes of id number `i`.
struct Renaming<'a> {
    inner: DefaultHasher,
    /// The pool ids, in canonical order: the `i`-th is written as [`label`]`(i)`.
    order: &'a [MessageId],
    labels: &'a [MessageId],
}

impl Hasher for Renaming<'_> {
    fn finish(&self) -> u64 {
        self.inner.finish()
    }

    fn write(&mut self, bytes: &[u8]) {
        match self
            .order
            .iter()
            .position(|id| id.as_str().as_bytes() == bytes)
        {
            Some(index) => self.inner.write(self.labels[index].as_str().as_bytes()),
            None => self.inner.write(bytes),
        }
    }

    // Numbers never name an id: they bypass the renaming (so a number whose bytes happen to spell
    // an id is not renamed).
    fn write_u8(&mut self, i: u8) {
        self.inner.write_u8(i);
    }

    fn write_u16(&mut self, i: u16) {
        self.inner.write_u16(i);
    }

    fn write_u32(&mut self, i: u32) {
        self.inner.write_u32(i);
    }

    fn write_u64(&mut self, i: u64) {
        self.inner.write_u64(i);
    }

    fn write_u128(&mut self, i: u128) {
        self.inner.write_u128(i);
    }

    fn write_usize(&mut self, i: usize) {
        self.inner.write_usize(i);
    }

    fn write_i8(&mut self, i: i8) {
        self.inner.write_i8(i);
    }

    fn write_i16(&mut self, i: i16) {
        self.inner.write_i16(i);
    }

    fn write_i32(&mut self, i: i32) {
        self.inner.write_i32(i);
    }

    fn write_i64(&mut self, i: i64) {
        self.inner.write_i64(i);
    }

    fn write_i128(&mut self, i: i128) {
        self.inner.write_i128(i);
    }

    fn write_isize(&mut self, i: isize) {
        self.inner.write_isize(i);
    }
}

/// The hash of `value` with the pool ids renamed: the `i`-th id of `order` is hashed as the `i`-th
/// of `labels` (the pool in its own order).
pub(crate) fn renamed_hash(value: &impl Hash, order: &[MessageId], labels: &[MessageId]) -> u64 {
    let mut hasher = Renaming {
        inner: DefaultHasher::new(),
        order,
        labels,
    };
    value.hash(&mut hasher);
    hasher.finish()
}

/// The canonical order of the pool's ids for a state: each id where it first appears in `walk`,
/// then the ids that appear nowhere, in pool order.
pub(crate) fn canonical_order<'a>(
    pool: &'a [MessageId],
    walk: impl IntoIterator<Item = &'a MessageId>,
) -> Vec<MessageId> {
    let mut order: Vec<MessageId> = Vec::with_capacity(pool.len());
    for id in walk {
        if pool.contains(id) && !order.contains(id) {
            order.push(id.clone());
        }
    }
    for id in pool {
        if !order.contains(id) {
            order.push(id.clone());
        }
    }
    order
}

/// The lists a canonical walk starts with, NT first.
const LISTS: [Target; 2] = [Target::NextTurn, Target::NextStep];

impl Representative for State {
    /// The state with its canonical fingerprint: the hash of its parts with the pool's ids
    /// renamed in the order of the canonical walk. Every id a state holds is in that walk: the
    /// pending lists (the monitor's map, the restorer's lists and the spec's lists hold the same
    /// ids), the outstanding batch, the delivery memory, and the id it forgot last; the pending
    /// ids and the memory are the machine's, which the spec and the monitor must agree with (a
    /// state where they do not is a violation and has no successors).
    fn representative(&self) -> Self {
        let pending = LISTS
            .into_iter()
            .flat_map(|target| self.machine.pending(target).map(|p| p.message().id()));
        let batch = self
            .monitor
            .pre_step_batch()
            .into_iter()
            .flat_map(|batch| batch.iter().map(|m| m.id()));
        let walk = pending
            .chain(batch)
            .chain(self.machine.delivered())
            .chain(self.monitor.forgotten())
            .chain(self.monitor.redelivered_ids());
        let order = canonical_order(&self.pool, walk);
        State {
            canonical: Some(renamed_hash(&self.parts(), &order, &self.pool)),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<MessageId> {
        names.iter().map(|name| MessageId::from(*name)).collect()
    }

    #[test]
    fn renamed_hashes_agree_exactly_on_permuted_values() {
        let pool = ids(&["m1", "m2", "m3"]);
        let one = ids(&["m2", "m1"]);
        let two = ids(&["m3", "m2"]);
        let order_one = canonical_order(&pool, &one);
        let order_two = canonical_order(&pool, &two);
        assert_eq!(order_one, ids(&["m2", "m1", "m3"]));
        assert_eq!(
            renamed_hash(&one, &order_one, &pool),
            renamed_hash(&two, &order_two, &pool)
        );
        // Not a permutation of each other: different.
        let three = ids(&["m3", "m3"]);
        let order_three = canonical_order(&pool, &three);
        assert_ne!(
            renamed_hash(&one, &order_one, &pool),
            renamed_hash(&three, &order_three, &pool)
        );
        // Other strings pass through untouched.
        assert_ne!(
            renamed_hash(&"m1x", &order_one, &pool),
            renamed_hash(&"m2x", &order_one, &pool)
        );
    }
}
