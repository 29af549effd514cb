//! The delivery memory (SPEC §11, S51–S53): the ids of the last `W` items that left the pending
//! lists, so that a retried delivery of one of them is rejected `already-delivered` instead of
//! running twice.
//!
//! A ring keeps their order (oldest first, for eviction) and an index answers "is it held" in
//! O(1). Both the live machine (through the inbox) and the restorer feed it through
//! [`left`](DeliveryMemory::left), so the live rule and the replayed one are the same code (S53).

use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use crate::inbox::IdHasher;
use crate::message::MessageId;

/// The ids of the last `capacity` items that left the lists, oldest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeliveryMemory {
    capacity: usize,
    ring: VecDeque<MessageId>,
    held: HashSet<MessageId, IdHasher>,
}

/// Memories compare by capacity and held ids in order; the index is derived.
impl PartialEq for DeliveryMemory {
    fn eq(&self, other: &Self) -> bool {
        self.capacity == other.capacity && self.ring == other.ring
    }
}

impl Eq for DeliveryMemory {}

impl Hash for DeliveryMemory {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.capacity.hash(state);
        self.ring.hash(state);
    }
}

impl DeliveryMemory {
    /// An empty memory holding at most `capacity` ids (0: it holds none, plain S9).
    pub(crate) fn new(capacity: usize) -> Self {
        DeliveryMemory {
            capacity,
            ring: VecDeque::new(),
            held: HashSet::default(),
        }
    }

    /// The capacity `W`.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether `id` is among the last `W` ids that left the lists (S52).
    #[inline]
    pub(crate) fn holds(&self, id: &MessageId) -> bool {
        self.capacity > 0 && self.held.contains(id)
    }

    /// S51: `id` left the lists and is not pending after the splice that removed it. It enters
    /// the memory; past `W` ids, the oldest are forgotten.
    #[inline]
    pub(crate) fn left(&mut self, id: &MessageId) {
        if self.capacity == 0 {
            return;
        }
        if !self.held.insert(id.clone()) {
            // Unreachable live (a held id is never inserted, so it cannot leave again while
            // held); kept exact for any caller: it moves to the newest place.
            self.ring.retain(|held| held != id);
        }
        self.ring.push_back(id.clone());
        while self.ring.len() > self.capacity {
            if let Some(oldest) = self.ring.pop_front() {
                self.held.remove(&oldest);
            }
        }
    }

    /// `id` is pending again: only a restored log written under another capacity can insert a
    /// held id (the live machine rejects it, S52). No id is both pending and held (S51).
    pub(crate) fn release(&mut self, id: &MessageId) {
        if self.held.remove(id) {
            self.ring.retain(|held| held != id);
        }
    }

    /// The held ids, oldest first.
    pub(crate) fn ids(&self) -> impl ExactSizeIterator<Item = &MessageId> + '_ {
        self.ring.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(memory: &DeliveryMemory) -> Vec<&str> {
        memory.ids().map(MessageId::as_str).collect()
    }

    #[test]
    fn s51_the_oldest_is_forgotten_past_the_capacity() {
        let mut memory = DeliveryMemory::new(2);
        for id in ["a", "b", "c"] {
            memory.left(&id.into());
        }
        assert_eq!(ids(&memory), ["b", "c"]);
        assert!(!memory.holds(&"a".into()));
        assert!(memory.holds(&"b".into()) && memory.holds(&"c".into()));
        memory.release(&"b".into());
        assert_eq!(ids(&memory), ["c"]);
        assert!(!memory.holds(&"b".into()));
    }

    #[test]
    fn s51_capacity_zero_holds_nothing() {
        let mut memory = DeliveryMemory::new(0);
        memory.left(&"a".into());
        assert_eq!(ids(&memory), Vec::<&str>::new());
        assert!(!memory.holds(&"a".into()));
    }
}
