//! What a machine's (and a restorer's) future behaviour depends on: the one view the model
//! checkers compare and hash their states by, instead of the structural `==` of [`Machine`] and
//! [`Restorer`](crate::Restorer). This module is the one place that says which parts count and
//! why; everything else is bookkeeping a checker must not tell apart, or it would count states
//! that behave alike many times over (the pinned model-check state counts are the proof that
//! the view is unchanged).

use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;

use super::Machine;
use crate::error::InvalidLog;
use crate::fingerprint::Fingerprint;
use crate::inbox::Inbox;
use crate::input::Target;
use crate::memory::DeliveryMemory;
use crate::message::MessageId;
use crate::position::LogPosition;

/// What a machine's future behaviour depends on ([`Machine::behaviour`]): two machines with
/// equal behaviours give the same outputs and rejections for every sequence of inputs, and
/// answer every query alike, except the two this view leaves out on purpose (below).
///
/// It counts:
/// - the two pending lists, item by item in order: each message (its id and fields, S8) and
///   whether it was delivered waking (S19);
/// - the delivery memory: its capacity `W` (S51) and the held ids, oldest first (eviction
///   order), each with the fingerprint of the message that left (S52, S56);
/// - the phase (S23) with its activity: the first cancel cause and disposing (S39, S45), the wake
///   latch (S24), the running turn's step, its outstanding request and its sticky `max-tokens`
///   (S4, S34);
/// - `lastTurn` (S27) and the admission bound `P` (S55);
/// - the outputs not drained yet (S1: inputs are rejected until they are).
///
/// It leaves out what no input can tell apart:
/// - the items' sort keys and the id index: derived from the lists (positions are reported,
///   never keys; the index answers "where" as a scan of the lists would), and a live machine and
///   one restored from its log hold the same items under other keys;
/// - the count of waking items: a function of the waking flags;
/// - the id indexes' hash seed ([`Config::hash_seed`](crate::Config::hash_seed)), which only
///   [`Machine::config`] reports back: no output depends on it;
/// - the open batch ([`Machine::begin_batch`]): whether one is open and what
///   [`Machine::roll_back_batch`] would put back. Equal behaviours answer every input alike, but
///   rolling each back restores its own state before the batch: a checker that rolls back keeps
///   that state in its own key (the session model keys by its reference machine and the staged
///   inputs).
///
/// `Hash` agrees with `==` and writes the ids in list order, then memory order (the model
/// checker's symmetry reduction renames ids as they are hashed).
///
/// ```
/// use coxswain_core::{Machine, Message, Target};
///
/// let quiet = |t: coxswain_core::Transition<'_>| t.persisted().for_each(drop);
/// let mut live = Machine::new();
/// quiet(live.inject(Message::user("b", "hi"))?);
/// quiet(live.prepend(Target::NextStep, Message::user("a", "first"))?);
/// // Another history leaving the same items: `a`, then `b`, neither waking.
/// let mut other = Machine::new();
/// quiet(other.inject(Message::user("a", "first"))?);
/// quiet(other.inject(Message::user("b", "hi"))?);
/// assert_eq!(live.behaviour(), other.behaviour());
/// assert_ne!(live, other); // `a` was put first in one, last in the other: other keys
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Behaviour<'a> {
    machine: &'a Machine,
}

impl Machine {
    /// The view of what this machine's future behaviour depends on, which the model checkers
    /// compare and hash ([`Behaviour`] says what counts and why). `==` on the machine itself is
    /// structural.
    pub fn behaviour(&self) -> Behaviour<'_> {
        Behaviour { machine: self }
    }
}

impl PartialEq for Behaviour<'_> {
    fn eq(&self, other: &Self) -> bool {
        let (one, two) = (self.machine, other.machine);
        InboxBehaviour(&one.inbox) == InboxBehaviour(&two.inbox)
            && one.phase == two.phase
            && one.last_turn == two.last_turn
            && one.max_pending == two.max_pending
            && one.queue == two.queue
    }
}

impl Eq for Behaviour<'_> {}

impl Hash for Behaviour<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let machine = self.machine;
        InboxBehaviour(&machine.inbox).hash(state);
        machine.phase.hash(state);
        machine.last_turn.hash(state);
        machine.max_pending.hash(state);
        machine.queue.hash(state);
    }
}

/// What a restorer's future behaviour depends on
/// ([`Restorer::behaviour`](crate::Restorer::behaviour), [example](crate::Restorer::behaviour)): two restorers with equal behaviours accept and reject the same rest of a log and restore
/// machines with equal [`Behaviour`]s from it.
///
/// It counts: how many events remain before the seed boundary (S46: splices before it are not
/// replayed); the lists and the delivery memory restored so far, as [`Behaviour`] counts them;
/// the admission bound the machine will get (S55); `lastTurn` (S46); whether the log so far
/// leaves a turn open and which step it leaves open in it (S46: a log may not end inside a turn;
/// crash repair closes them, S50); and the first error (S47: a restorer that failed keeps
/// failing).
///
/// It leaves out the count of events read (history: two logs that restored the same thing are
/// read on alike), how many steps the open turn closed, the index of the event that opened it
/// (only the index of [`finish`](crate::Restorer::finish)'s
/// [`OpenTurn`](crate::LogViolation::OpenTurn) error reports it: a position in the history,
/// like the count), and, as [`Behaviour`] does, the items' keys, the id index and the hash seed.
#[derive(Clone, Copy, Debug)]
pub struct RestorerBehaviour<'a> {
    seed_ahead: usize,
    inbox: &'a Inbox,
    max_pending: Option<NonZeroUsize>,
    position: &'a LogPosition,
    failed: &'a Option<InvalidLog>,
}

impl<'a> RestorerBehaviour<'a> {
    /// The view of a restorer's parts: the events left before the seed boundary, what it
    /// restored so far, the bound, where the log stands and its first error.
    pub(crate) fn new(
        seed_ahead: usize,
        inbox: &'a Inbox,
        max_pending: Option<NonZeroUsize>,
        position: &'a LogPosition,
        failed: &'a Option<InvalidLog>,
    ) -> Self {
        RestorerBehaviour {
            seed_ahead,
            inbox,
            max_pending,
            position,
            failed,
        }
    }

    /// Whether a turn is open and, if so, which step it leaves open (0 for none): not how many
    /// it closed.
    fn open(&self) -> Option<u64> {
        self.position
            .open()
            .map(|_| self.position.open_step().map_or(0, |step| step + 1))
    }
}

impl PartialEq for RestorerBehaviour<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.seed_ahead == other.seed_ahead
            && InboxBehaviour(self.inbox) == InboxBehaviour(other.inbox)
            && self.max_pending == other.max_pending
            && self.position.last_turn() == other.position.last_turn()
            && self.open() == other.open()
            && self.failed == other.failed
    }
}

impl Eq for RestorerBehaviour<'_> {}

impl Hash for RestorerBehaviour<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.seed_ahead.hash(state);
        InboxBehaviour(self.inbox).hash(state);
        self.max_pending.hash(state);
        self.position.last_turn().hash(state);
        self.open().hash(state);
        self.failed.hash(state);
    }
}

/// The lists item by item (message and waking flag, in order) and the memory as
/// [`MemoryBehaviour`] sees it.
struct InboxBehaviour<'a>(&'a Inbox);

impl InboxBehaviour<'_> {
    const LISTS: [Target; 2] = [Target::NextTurn, Target::NextStep];
}

impl PartialEq for InboxBehaviour<'_> {
    fn eq(&self, other: &Self) -> bool {
        Self::LISTS.into_iter().all(|target| {
            let (one, two) = (self.0.items(target), other.0.items(target));
            one.len() == two.len()
                && one
                    .iter()
                    .zip(two)
                    .all(|(x, y)| x.is_waking() == y.is_waking() && x.message() == y.message())
        }) && MemoryBehaviour::of(self.0.memory()) == MemoryBehaviour::of(other.0.memory())
    }
}

impl Hash for InboxBehaviour<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for target in Self::LISTS {
            let items = self.0.items(target);
            items.len().hash(state);
            for item in items {
                item.message().hash(state);
                item.is_waking().hash(state);
            }
        }
        MemoryBehaviour::of(self.0.memory()).hash(state);
    }
}

/// A memory with a capacity (`None`: `W = 0`, it holds nothing): the capacity and the held ids
/// oldest first, each with its message's fingerprint (not its fate record, S58: see
/// [`MemoryBehaviour::held`]). The index's layout does not count.
struct MemoryBehaviour<'a>(&'a DeliveryMemory);

impl<'a> MemoryBehaviour<'a> {
    fn of(memory: &'a DeliveryMemory) -> Option<Self> {
        (memory.capacity() > 0).then_some(MemoryBehaviour(memory))
    }

    /// The held ids, oldest first, each with its message's fingerprint. The fate records
    /// (S58) are left out: no output depends on them (`fate` is a query, not an input), and
    /// the checkers' state counts stay what they were. A checker that proves I15 on the core
    /// adds them here and re-pins its state counts.
    fn held(&self) -> impl Iterator<Item = (&'a MessageId, Option<Fingerprint>)> + 'a {
        let memory = self.0;
        memory.ids().map(move |id| (id, memory.held(id)))
    }
}

impl PartialEq for MemoryBehaviour<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.capacity() == other.0.capacity()
            && self.0.ids().len() == other.0.ids().len()
            && self.held().eq(other.held())
    }
}

impl Hash for MemoryBehaviour<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.capacity().hash(state);
        self.0.ids().len().hash(state);
        self.held().for_each(|held| held.hash(state));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::memory::tests::{filled, left};
    use crate::memory::Left;
    use crate::message::{Message, SharedMessage};
    use crate::transition::Queue;

    fn user(id: &str) -> SharedMessage {
        Arc::new(Message::user(id, id))
    }

    fn hash(inbox: &Inbox) -> u64 {
        crate::test_support::hash_of(&InboxBehaviour(inbox))
    }

    fn same(one: &Inbox, two: &Inbox) -> bool {
        InboxBehaviour(one) == InboxBehaviour(two)
    }

    #[test]
    fn the_inbox_behaves_by_its_items_not_their_keys() {
        let mut out = Queue::default();
        let mut one = Inbox::default();
        one.append(Target::NextTurn, user("a"), true, &mut out);
        let mut two = Inbox::default();
        two.append(Target::NextTurn, user("z"), true, &mut out);
        two.append(Target::NextTurn, user("a"), true, &mut out);
        two.remove_at(Target::NextTurn, 0, &mut out);
        assert!(same(&one, &two));
        assert_eq!(hash(&one), hash(&two));
        two.append(Target::NextStep, user("b"), false, &mut out);
        assert!(!same(&one, &two));
        assert_ne!(hash(&one), hash(&two));
    }

    /// Found by cargo-mutants (docs/MUTANTS.md): lists of the same length and waking flags but
    /// other messages are other states, for equality and for the hash the model checker uses.
    #[test]
    fn the_inbox_behaviour_looks_at_every_message_and_flag() {
        let mut out = Queue::default();
        let mut one = Inbox::default();
        one.append(Target::NextTurn, user("a"), false, &mut out);
        let mut two = Inbox::default();
        two.append(Target::NextTurn, user("b"), false, &mut out);
        assert!(!same(&one, &two));
        assert_ne!(hash(&one), hash(&two));
        let mut waking = Inbox::default();
        waking.append(Target::NextTurn, user("a"), true, &mut out);
        assert!(!same(&one, &waking));
        assert_ne!(hash(&one), hash(&waking));
    }

    #[test]
    fn the_memory_behaves_by_its_capacity_and_the_held_ids_in_order() {
        let of =
            |memory: &DeliveryMemory| crate::test_support::hash_of(&MemoryBehaviour::of(memory));
        let same = |one: &DeliveryMemory, two: &DeliveryMemory| {
            MemoryBehaviour::of(one) == MemoryBehaviour::of(two)
        };
        let base = filled(3, &["a", "b"]);
        assert!(same(&base, &filled(3, &["a", "b"])));
        assert_eq!(of(&base), of(&filled(3, &["a", "b"])));
        for other in [
            filled(3, &["b", "a"]),
            filled(4, &["a", "b"]),
            filled(3, &["a"]),
            filled(0, &[]),
        ] {
            assert!(!same(&base, &other));
            assert_ne!(of(&base), of(&other));
        }
        // S56: another message under a held id is another memory.
        let mut memory = filled(2, &["a"]);
        memory.left(
            &SharedMessage::new(Message::user("b", "the second")),
            Left::Discarded,
        );
        let mut other = filled(2, &["a"]);
        other.left(&left("b"), Left::Discarded);
        assert!(!same(&memory, &other));
        assert_ne!(of(&memory), of(&other));
    }

    /// The machine's view: the same items under other keys behave alike; the open batch is
    /// left out; every counted part counts.
    #[test]
    fn machines_behave_by_what_counts() {
        let hash = |machine: &Machine| crate::test_support::hash_of(&machine.behaviour());
        let quiet = |t: Result<crate::Transition<'_>, crate::Rejected>| {
            t.unwrap().persisted().for_each(drop)
        };
        let mut live = Machine::new();
        quiet(live.inject(Message::user("b", "b")));
        quiet(live.prepend(Target::NextStep, Message::user("a", "a")));
        let mut other = Machine::new();
        quiet(other.inject(Message::user("a", "a")));
        quiet(other.inject(Message::user("b", "b")));
        assert_eq!(live.behaviour(), other.behaviour());
        assert_eq!(hash(&live), hash(&other));
        assert_ne!(live, other);

        let mut batched = other.clone();
        batched.begin_batch().unwrap();
        assert_eq!(batched.behaviour(), other.behaviour());
        assert_ne!(batched, other);

        let mut running = other.clone();
        quiet(running.followup(Message::user("c", "c")));
        assert_ne!(running.behaviour(), other.behaviour());
        assert_ne!(hash(&running), hash(&other));
        // Undrained outputs count (S1).
        let mut undrained = other.clone();
        let _ = undrained.remove(&"a".into()).unwrap();
        let mut drained = other.clone();
        quiet(
            drained
                .remove(&"a".into())
                .map(|t| t.expect("a is pending")),
        );
        assert_ne!(undrained.behaviour(), drained.behaviour());
        // The bound counts (S55).
        let bounded =
            Machine::with_config(crate::Config::new().with_max_pending(NonZeroUsize::MIN));
        assert_ne!(bounded.behaviour(), Machine::new().behaviour());
        assert_ne!(hash(&bounded), hash(&Machine::new()));
    }
}
