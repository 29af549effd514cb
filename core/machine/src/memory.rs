//! The delivery memory (SPEC §11, S51–S53): the ids of the last `W` items that left the pending
//! lists, so that a retried delivery of one of them is rejected `already-delivered` instead of
//! running twice, and each one's message, so that a *different* message under a held id is
//! rejected `conflict` instead (S56).
//!
//! A ring keeps their order (oldest first, for eviction) and an index answers "is it held, and
//! with which message" in O(1). What it keeps of the message is its [`Fingerprint`] (16 bytes,
//! §12's "digest of its canonical value"): holding the shared message instead would keep every
//! delivered message's content alive for as long as its id is held. Only the inbox feeds
//! it, through [`left`](DeliveryMemory::left): its live changes and the splices a restorer
//! replays into it, so the live rule and the replayed one are the same code (S53).

use std::collections::{HashMap, VecDeque};

use crate::fingerprint::Fingerprint;
use crate::hasher::IdHasher;
use crate::message::{MessageId, SharedMessage};

/// The ids of the last `capacity` items that left the lists, oldest first. Boxed, so a machine
/// without a memory (the default) carries one pointer and allocates nothing.
///
/// `==` is structural (the capacity, the ring and the index); the model checker's view is
/// [`Behaviour`](crate::Behaviour).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeliveryMemory(Option<Box<Held>>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    capacity: usize,
    ring: VecDeque<MessageId>,
    index: HashMap<MessageId, Fingerprint, IdHasher>,
}

impl DeliveryMemory {
    /// An empty memory holding at most `capacity` ids (0: it holds none, plain S9), its index
    /// keyed by `hasher`.
    pub(crate) fn new(capacity: usize, hasher: IdHasher) -> Self {
        DeliveryMemory((capacity > 0).then(|| {
            Box::new(Held {
                capacity,
                ring: VecDeque::new(),
                index: HashMap::with_hasher(hasher),
            })
        }))
    }

    /// The capacity `W`.
    pub(crate) fn capacity(&self) -> usize {
        self.0.as_ref().map_or(0, |held| held.capacity)
    }

    /// Whether `id` is among the last `W` ids that left the lists (S52).
    #[inline]
    pub(crate) fn holds(&self, id: &MessageId) -> bool {
        self.0
            .as_ref()
            .is_some_and(|held| held.index.contains_key(id))
    }

    /// The fingerprint of the message held under `id`, if the memory holds it (S56 compares a
    /// retry with it).
    #[inline]
    pub(crate) fn held(&self, id: &MessageId) -> Option<Fingerprint> {
        self.0.as_ref().and_then(|held| held.index.get(id).copied())
    }

    /// S51: `message` left the lists and its id is not pending after the splice that removed
    /// it. It enters the memory; past `W` ids, the oldest are forgotten. Returns what
    /// [`undo`](DeliveryMemory::undo) needs to take it back out.
    #[inline]
    pub(crate) fn left(&mut self, message: &SharedMessage) -> Forgotten {
        let Some(held) = self.0.as_mut() else {
            return Forgotten::default();
        };
        let id = message.id();
        let mut forgotten = Forgotten::default();
        if let Some(previous) = held.index.insert(id.clone(), message.fingerprint()) {
            // Unreachable live (a held id is never inserted, so it cannot leave again while
            // held); kept exact for any caller: it moves to the newest place.
            let place = held.ring.iter().position(|other| other == id);
            held.ring.retain(|other| other != id);
            forgotten.moved = place.map(|place| (place, previous));
        }
        held.ring.push_back(id.clone());
        while held.ring.len() > held.capacity {
            if let Some(oldest) = held.ring.pop_front() {
                if let Some(print) = held.index.remove(&oldest) {
                    forgotten.evicted.push((oldest, print));
                }
            }
        }
        forgotten
    }

    /// Takes back the [`left`](DeliveryMemory::left) of `id` that returned `forgotten`, the
    /// memory's latest change: the memory is exactly as before it (a failed batch, S5).
    pub(crate) fn undo(&mut self, id: &MessageId, forgotten: Forgotten) {
        let Some(held) = self.0.as_mut() else {
            return;
        };
        for (oldest, print) in forgotten.evicted.into_iter().rev() {
            held.index.insert(oldest.clone(), print);
            held.ring.push_front(oldest);
        }
        held.ring.pop_back();
        held.index.remove(id);
        if let Some((place, previous)) = forgotten.moved {
            held.index.insert(id.clone(), previous);
            held.ring.insert(place, id.clone());
        }
    }

    /// `id` is pending again: only a restored log written under another capacity can insert a
    /// held id (the live machine rejects it, S52). No id is both pending and held (S51).
    pub(crate) fn release(&mut self, id: &MessageId) {
        if let Some(held) = self.0.as_mut() {
            if held.index.remove(id).is_some() {
                held.ring.retain(|other| other != id);
            }
        }
    }

    /// The held ids, oldest first.
    pub(crate) fn ids(&self) -> std::collections::vec_deque::Iter<'_, MessageId> {
        match &self.0 {
            Some(held) => held.ring.iter(),
            None => EMPTY.iter(),
        }
    }
}

/// What one [`left`](DeliveryMemory::left) changed beyond adding its id, so that it can be
/// undone: the ids it forgot (oldest first) and, if the id was held already, where.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Forgotten {
    evicted: smallvec::SmallVec<[(MessageId, Fingerprint); 1]>,
    moved: Option<(usize, Fingerprint)>,
}

/// The held ids of a machine without a memory.
static EMPTY: VecDeque<MessageId> = VecDeque::new();

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::message::Message;

    pub(crate) fn left(id: &str) -> SharedMessage {
        SharedMessage::new(Message::user(id, "hi"))
    }

    fn ids(memory: &DeliveryMemory) -> Vec<&str> {
        memory.ids().map(MessageId::as_str).collect()
    }

    /// A memory of `capacity` that saw `gone` leave the lists, in order.
    pub(crate) fn filled(capacity: usize, gone: &[&str]) -> DeliveryMemory {
        let mut memory = DeliveryMemory::new(capacity, IdHasher::default());
        for id in gone {
            memory.left(&left(id));
        }
        memory
    }

    #[test]
    fn s51_the_oldest_is_forgotten_past_the_capacity() {
        let mut memory = filled(2, &["a", "b", "c"]);
        assert_eq!(ids(&memory), ["b", "c"]);
        assert!(!memory.holds(&"a".into()));
        assert!(memory.holds(&"b".into()) && memory.holds(&"c".into()));
        memory.release(&"b".into());
        assert_eq!(ids(&memory), ["c"]);
        assert!(!memory.holds(&"b".into()));
    }

    #[test]
    fn an_id_that_leaves_again_moves_to_the_newest_place_once() {
        // Unreachable live (S52 rejects a held id), reachable through a restored log.
        let mut memory = filled(3, &["a", "b", "a"]);
        assert_eq!(ids(&memory), ["b", "a"]);
        memory.left(&left("c"));
        memory.left(&left("d"));
        assert_eq!(ids(&memory), ["a", "c", "d"]);
        assert!(!memory.holds(&"b".into()));
    }

    /// `==` is structural; the hash the model checker uses is the behaviour's
    /// (`machine::behaviour`'s tests pin it on the same memories).
    #[test]
    fn equality_looks_at_the_capacity_and_the_held_ids_in_order() {
        let base = filled(3, &["a", "b"]);
        assert_eq!(base, filled(3, &["a", "b"]));
        for other in [
            filled(3, &["b", "a"]),
            filled(4, &["a", "b"]),
            filled(3, &["a"]),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn s56_the_memory_holds_each_id_with_the_fingerprint_of_the_message_that_left() {
        let mut memory = filled(2, &["a"]);
        let b = SharedMessage::new(Message::user("b", "the second"));
        memory.left(&b);
        assert_eq!(memory.held(&"b".into()), Some(b.fingerprint()));
        assert_eq!(memory.held(&"a".into()), Some(left("a").fingerprint()));
        assert_ne!(memory.held(&"a".into()), memory.held(&"b".into()));
        memory.left(&left("c")); // evicts a
        assert_eq!(memory.held(&"a".into()), None);
        // Two memories with the same ids but another message under one of them differ.
        let mut other = filled(2, &["b"]);
        other.left(&left("c"));
        assert_ne!(memory, other);
    }

    #[test]
    fn s51_capacity_zero_holds_nothing() {
        let mut memory = DeliveryMemory::new(0, IdHasher::default());
        memory.left(&left("a"));
        assert_eq!(ids(&memory), Vec::<&str>::new());
        assert!(!memory.holds(&"a".into()));
    }
}
