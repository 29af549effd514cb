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

use crate::fate::TurnEndKind;
use crate::fingerprint::Fingerprint;
use crate::hasher::IdHasher;
use crate::message::{MessageId, SharedMessage};

/// The ids of the last `capacity` items that left the lists, oldest first. Boxed, so a machine
/// without a memory (the default) carries one pointer and allocates nothing.
///
/// `==` is structural (the capacity, the ring and the index with each id's record); the model
/// checker's view is [`Behaviour`](crate::Behaviour).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DeliveryMemory(Option<Box<Held>>);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Held {
    capacity: usize,
    ring: VecDeque<MessageId>,
    index: HashMap<MessageId, Entry, IdHasher>,
    /// The ids that entered as claimed since the last `turn/end`, in claim order: the records a
    /// `turn/end` gives their `end` (S58). Ids forgotten since are skipped then.
    claims: Vec<MessageId>,
}

/// One held id: the fingerprint of the message it left as (S56, as two words so that the entry
/// is aligned to 8: 40 bytes, 24 over the bare fingerprint) and its fate record (S58).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    print: [u64; 2],
    record: Record,
}

/// How an item left the lists (S58): an ordinary removal, or a claim by a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Left {
    /// An ordinary removal (S12): remove, replace with another id, clear, cancel, dispose; on
    /// restore, a splice with `outcome`.
    Discarded,
    /// A claim by this turn (S28); on restore, a splice without `outcome`, by the turn of the
    /// last `turn/start` before it (0 if none).
    Claimed(u64),
}

/// The fate record of a held id (S58), compact: 24 bytes next to the 16-byte fingerprint (the
/// budget of bench 6). `step` is meaningful only when `stepped`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Record {
    turn: u64,
    step: u64,
    claimed: bool,
    stepped: bool,
    end: Option<TurnEndKind>,
}

impl Record {
    fn new(left: Left) -> Self {
        let (turn, claimed) = match left {
            Left::Discarded => (0, false),
            Left::Claimed(turn) => (turn, true),
        };
        Record {
            turn,
            step: 0,
            claimed,
            stepped: false,
            end: None,
        }
    }

    /// The record as the public [`Fate`](crate::Fate).
    pub(crate) fn fate(&self) -> crate::Fate {
        if self.claimed {
            crate::Fate::Claimed {
                turn: self.turn,
                step: self.stepped.then_some(self.step),
                end: self.end,
            }
        } else {
            crate::Fate::Discarded
        }
    }
}

impl DeliveryMemory {
    /// An empty memory holding at most `capacity` ids (0: it holds none, plain S9;
    /// `usize::MAX`, S58's `unbounded`: it forgets none), its index keyed by `hasher`.
    pub(crate) fn new(capacity: usize, hasher: IdHasher) -> Self {
        DeliveryMemory((capacity > 0).then(|| {
            Box::new(Held {
                capacity,
                ring: VecDeque::new(),
                index: HashMap::with_hasher(hasher),
                claims: Vec::new(),
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
        self.0.as_ref().and_then(|held| {
            held.index
                .get(id)
                .map(|entry| Fingerprint::from_halves(entry.print))
        })
    }

    /// The fate record held under `id`, if the memory holds it (S58).
    pub(crate) fn record(&self, id: &MessageId) -> Option<Record> {
        self.0
            .as_ref()
            .and_then(|held| held.index.get(id).map(|entry| entry.record))
    }

    /// S51: `message` left the lists (`how`, for its record, S58) and its id is not pending
    /// after the splice that removed it. It enters the memory; past `W` ids, the oldest are
    /// forgotten. Returns what [`undo`](DeliveryMemory::undo) needs to take it back out.
    #[inline]
    pub(crate) fn left(&mut self, message: &SharedMessage, how: Left) -> Forgotten {
        let Some(held) = self.0.as_mut() else {
            return Forgotten::default();
        };
        let id = message.id();
        let mut forgotten = Forgotten::default();
        let entry = Entry {
            print: message.fingerprint().halves(),
            record: Record::new(how),
        };
        if let Some(previous) = held.index.insert(id.clone(), entry) {
            // Unreachable live (a held id is never inserted, so it cannot leave again while
            // held); kept exact for any caller: it moves to the newest place.
            let place = held.ring.iter().position(|other| other == id);
            held.ring.retain(|other| other != id);
            forgotten.moved = place.map(|place| (place, previous));
        }
        held.ring.push_back(id.clone());
        if let Left::Claimed(_) = how {
            held.claims.push(id.clone());
            forgotten.claimed = true;
        }
        while held.ring.len() > held.capacity {
            if let Some(oldest) = held.ring.pop_front() {
                if let Some(entry) = held.index.remove(&oldest) {
                    forgotten.evicted.push((oldest, entry));
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
        for (oldest, entry) in forgotten.evicted.into_iter().rev() {
            held.index.insert(oldest.clone(), entry);
            held.ring.push_front(oldest);
        }
        if forgotten.claimed {
            held.claims.pop();
        }
        held.ring.pop_back();
        held.index.remove(id);
        if let Some((place, previous)) = forgotten.moved {
            held.index.insert(id.clone(), previous);
            held.ring.insert(place, id.clone());
        }
    }

    /// `id` is pending again: only a restored log written under another capacity, or crash
    /// repair's redelivery (S59), can insert a held id (the live machine rejects it, S52). No
    /// id is both pending and held (S51); its record goes with it (S58).
    pub(crate) fn release(&mut self, id: &MessageId) {
        if let Some(held) = self.0.as_mut() {
            if held.index.remove(id).is_some() {
                held.ring.retain(|other| other != id);
            }
        }
    }

    /// S58: a `user/message` carrying `id` entered step `step` of turn `turn`: the record of an
    /// id held as claimed by that turn gets `step` if it has none. Returns whether it changed (a
    /// message the host added, or one held otherwise, changes nothing, S29).
    pub(crate) fn entered(&mut self, turn: u64, step: u64, id: &MessageId) -> bool {
        let Some(held) = self.0.as_mut() else {
            return false;
        };
        match held.index.get_mut(id) {
            Some(Entry { record, .. })
                if record.claimed && record.turn == turn && !record.stepped =>
            {
                record.stepped = true;
                record.step = step;
                true
            }
            _ => false,
        }
    }

    /// Takes back an [`entered`](DeliveryMemory::entered) that returned `true`.
    pub(crate) fn unenter(&mut self, id: &MessageId) {
        if let Some(entry) = self.0.as_mut().and_then(|held| held.index.get_mut(id)) {
            entry.record.stepped = false;
            entry.record.step = 0;
        }
    }

    /// S58: turn `turn` ended with a reason of `kind` (`None`: a restored reason whose `kind`
    /// is not one of the six): the records claimed by that turn that have no `end` get it, and
    /// the claims seen so far are done with. Returns what [`unend`](DeliveryMemory::unend)
    /// needs to take it back.
    pub(crate) fn turn_ended(&mut self, turn: u64, kind: Option<TurnEndKind>) -> Ended {
        let Some(held) = self.0.as_mut() else {
            return Ended::default();
        };
        let claims = std::mem::take(&mut held.claims);
        let mut set = Vec::new();
        if let Some(kind) = kind {
            for id in &claims {
                if let Some(entry) = held.index.get_mut(id) {
                    let record = &mut entry.record;
                    if record.claimed && record.turn == turn && record.end.is_none() {
                        record.end = Some(kind);
                        set.push(id.clone());
                    }
                }
            }
        }
        Ended { claims, set }
    }

    /// Takes back the [`turn_ended`](DeliveryMemory::turn_ended) that returned `ended`.
    pub(crate) fn unend(&mut self, ended: Ended) {
        let Some(held) = self.0.as_mut() else {
            return;
        };
        for id in &ended.set {
            if let Some(entry) = held.index.get_mut(id) {
                entry.record.end = None;
            }
        }
        held.claims = ended.claims;
    }

    /// Drops the pending `turn/end` work of ids no longer held, when it has grown well past
    /// the held ids (a restored log may claim without ever ending a turn). Never while a batch
    /// is open (an undo could bring a forgotten id back).
    pub(crate) fn compact_claims(&mut self) {
        if let Some(held) = self.0.as_mut() {
            if held.claims.len() > 2 * held.ring.len() + 16 {
                let index = &held.index;
                held.claims.retain(|id| index.contains_key(id));
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
/// undone: the ids it forgot (oldest first), if the id was held already, where, and whether it
/// joined the claims a `turn/end` will see.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Forgotten {
    evicted: smallvec::SmallVec<[(MessageId, Entry); 1]>,
    moved: Option<(usize, Entry)>,
    claimed: bool,
}

/// What one [`turn_ended`](DeliveryMemory::turn_ended) changed: the claims it took, and the ids
/// whose record it gave an `end`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ended {
    claims: Vec<MessageId>,
    set: Vec<MessageId>,
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
            memory.left(&left(id), Left::Discarded);
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
        memory.left(&left("c"), Left::Discarded);
        memory.left(&left("d"), Left::Discarded);
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
        memory.left(&b, Left::Discarded);
        assert_eq!(memory.held(&"b".into()), Some(b.fingerprint()));
        assert_eq!(memory.held(&"a".into()), Some(left("a").fingerprint()));
        assert_ne!(memory.held(&"a".into()), memory.held(&"b".into()));
        memory.left(&left("c"), Left::Discarded); // evicts a
        assert_eq!(memory.held(&"a".into()), None);
        // Two memories with the same ids but another message under one of them differ.
        let mut other = filled(2, &["b"]);
        other.left(&left("c"), Left::Discarded);
        assert_ne!(memory, other);
    }

    #[test]
    fn s51_capacity_zero_holds_nothing() {
        let mut memory = DeliveryMemory::new(0, IdHasher::default());
        memory.left(&left("a"), Left::Discarded);
        assert_eq!(ids(&memory), Vec::<&str>::new());
        assert!(!memory.holds(&"a".into()));
    }
}
