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
    /// The records too wide for [`Packed`] (a turn at or past 2^40, a step at or past 2^19:
    /// only a restored log's numbers), by id. Empty in any session a process lives through.
    wide: HashMap<MessageId, Record, IdHasher>,
    /// The ids that entered as claimed since the last `turn/end`, in claim order: the records a
    /// `turn/end` gives their `end` (S58). Ids forgotten since are skipped then.
    claims: Vec<MessageId>,
}

/// One held id: the fingerprint of the message it left as (S56, as two words so that the entry
/// is aligned to 8) and its fate record (S58) packed in one word: 24 bytes, 8 over the bare
/// fingerprint, so a full memory's index grows by at most 16 bytes per held id at hashbrown's
/// lowest load (bench 6's budget is 24).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    print: [u64; 2],
    record: Packed,
}

/// A [`Record`] in one word: bit 63 claimed, bit 62 stepped, bits 59–61 the end kind (0 none,
/// 1–6 the kinds, 7: the record is in [`Held::wide`]), bits 40–58 the step, bits 0–39 the
/// turn. A discarded record is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Packed(u64);

impl Packed {
    const CLAIMED: u64 = 1 << 63;
    const STEPPED: u64 = 1 << 62;
    const END_SHIFT: u32 = 59;
    const WIDE: u64 = 7;
    const STEP_SHIFT: u32 = 40;
    const STEP_LIMIT: u64 = 1 << 19;
    const TURN_LIMIT: u64 = 1 << 40;

    /// `record` packed, or `None` when its numbers do not fit.
    fn pack(record: &Record) -> Option<Packed> {
        if !record.claimed {
            return Some(Packed(0));
        }
        if record.turn >= Packed::TURN_LIMIT || record.step >= Packed::STEP_LIMIT {
            return None;
        }
        let end = match record.end {
            None => 0,
            Some(TurnEndKind::Completed) => 1,
            Some(TurnEndKind::MaxTokens) => 2,
            Some(TurnEndKind::Blocked) => 3,
            Some(TurnEndKind::Aborted) => 4,
            Some(TurnEndKind::Error) => 5,
            Some(TurnEndKind::Interrupted) => 6,
        };
        let stepped = if record.stepped { Packed::STEPPED } else { 0 };
        Some(Packed(
            Packed::CLAIMED
                | stepped
                | (end << Packed::END_SHIFT)
                | (record.step << Packed::STEP_SHIFT)
                | record.turn,
        ))
    }

    /// Whether the record lives in [`Held::wide`].
    fn is_wide(self) -> bool {
        (self.0 >> Packed::END_SHIFT) & 7 == Packed::WIDE
    }

    /// The record, unless it [`is_wide`](Packed::is_wide).
    fn unpack(self) -> Record {
        let word = self.0;
        let end = match (word >> Packed::END_SHIFT) & 7 {
            1 => Some(TurnEndKind::Completed),
            2 => Some(TurnEndKind::MaxTokens),
            3 => Some(TurnEndKind::Blocked),
            4 => Some(TurnEndKind::Aborted),
            5 => Some(TurnEndKind::Error),
            6 => Some(TurnEndKind::Interrupted),
            _ => None,
        };
        Record {
            turn: word & (Packed::TURN_LIMIT - 1),
            step: (word >> Packed::STEP_SHIFT) & (Packed::STEP_LIMIT - 1),
            claimed: word & Packed::CLAIMED != 0,
            stepped: word & Packed::STEPPED != 0,
            end,
        }
    }
}

/// A held id's fingerprint and record, as taken out of the memory (to be put back by an undo).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kept {
    print: [u64; 2],
    record: Record,
}

impl Held {
    /// Holds `id` with `kept`; returns what it held before under `id`.
    fn put(&mut self, id: &MessageId, kept: Kept) -> Option<Kept> {
        let previous_wide = match self.wide.is_empty() {
            true => None,
            false => self.wide.remove(id),
        };
        let record = match Packed::pack(&kept.record) {
            Some(packed) => packed,
            None => {
                self.wide.insert(id.clone(), kept.record);
                Packed(Packed::WIDE << Packed::END_SHIFT)
            }
        };
        let entry = Entry {
            print: kept.print,
            record,
        };
        let previous = self.index.insert(id.clone(), entry)?;
        Some(Kept {
            print: previous.print,
            record: match previous.record.is_wide() {
                true => previous_wide.unwrap_or_default(),
                false => previous.record.unpack(),
            },
        })
    }

    /// Forgets `id`; returns what it held.
    fn take(&mut self, id: &MessageId) -> Option<Kept> {
        let entry = self.index.remove(id)?;
        Some(Kept {
            print: entry.print,
            record: match entry.record.is_wide() {
                true => self.wide.remove(id).unwrap_or_default(),
                false => entry.record.unpack(),
            },
        })
    }

    /// The record held under `id`.
    fn record(&self, id: &MessageId) -> Option<Record> {
        let entry = self.index.get(id)?;
        match entry.record.is_wide() {
            false => Some(entry.record.unpack()),
            true => self.wide.get(id).copied(),
        }
    }

    /// Applies `change` to the record held under `id`; returns what `change` returned (false:
    /// not held).
    fn change(&mut self, id: &MessageId, change: impl FnOnce(&mut Record) -> bool) -> bool {
        let Some(mut record) = self.record(id) else {
            return false;
        };
        if !change(&mut record) {
            return false;
        }
        let print = self.index.get(id).map_or([0; 2], |entry| entry.print);
        self.put(id, Kept { print, record });
        true
    }
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

/// The fate record of a held id (S58), as read and changed; held [`Packed`] in one word.
/// `step` is meaningful only when `stepped`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
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
                index: HashMap::with_hasher(hasher.clone()),
                wide: HashMap::with_hasher(hasher),
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
        self.0.as_ref().and_then(|held| held.record(id))
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
        let kept = Kept {
            print: message.fingerprint().halves(),
            record: Record::new(how),
        };
        if let Some(previous) = held.put(id, kept) {
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
                if let Some(kept) = held.take(&oldest) {
                    forgotten.evicted.push((oldest, kept));
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
        for (oldest, kept) in forgotten.evicted.into_iter().rev() {
            held.put(&oldest, kept);
            held.ring.push_front(oldest);
        }
        if forgotten.claimed {
            held.claims.pop();
        }
        held.ring.pop_back();
        held.take(id);
        if let Some((place, previous)) = forgotten.moved {
            held.put(id, previous);
            held.ring.insert(place, id.clone());
        }
    }

    /// `id` is pending again: only a restored log written under another capacity, or crash
    /// repair's redelivery (S59), can insert a held id (the live machine rejects it, S52). No
    /// id is both pending and held (S51); its record goes with it (S58).
    pub(crate) fn release(&mut self, id: &MessageId) {
        if let Some(held) = self.0.as_mut() {
            if held.take(id).is_some() {
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
        held.change(id, |record| {
            let first = record.claimed && record.turn == turn && !record.stepped;
            if first {
                record.stepped = true;
                record.step = step;
            }
            first
        })
    }

    /// Takes back an [`entered`](DeliveryMemory::entered) that returned `true`.
    pub(crate) fn unenter(&mut self, id: &MessageId) {
        if let Some(held) = self.0.as_mut() {
            held.change(id, |record| {
                record.stepped = false;
                record.step = 0;
                true
            });
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
                let ended = held.change(id, |record| {
                    let open = record.claimed && record.turn == turn && record.end.is_none();
                    if open {
                        record.end = Some(kind);
                    }
                    open
                });
                if ended {
                    set.push(id.clone());
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
            held.change(id, |record| {
                record.end = None;
                true
            });
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
    evicted: smallvec::SmallVec<[(MessageId, Kept); 1]>,
    moved: Option<(usize, Kept)>,
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
