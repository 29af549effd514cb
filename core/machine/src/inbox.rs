//! The two pending lists and their durable splice projection (SPEC §3).
//!
//! Every change to a list goes through one method here, which emits the change's durable
//! `agent/inbox/spliced` event and its notifications in the order of S14. The machine decides
//! *when* to change the lists; this module decides *how a change is recorded*.
//!
//! Costs do not grow with queue depth where they need not: an index maps every pending id to its
//! list and a sort key, so the duplicate check of S13 is O(1), appends and claims are O(1) per
//! message, and finding a message's position for `remove`/`replace` is a binary search. Items keep
//! ascending keys: appends take keys above every key in the list, prepends keys below.

use std::collections::{HashMap, VecDeque};

use smallvec::SmallVec;

use crate::fate::TurnEndKind;
use crate::fingerprint::Fingerprint;
use crate::hasher::IdHasher;
use crate::input::Target;
use crate::memory::{DeliveryMemory, Ended, Forgotten, Left};
use crate::message::{Batch, MessageId, SharedMessage};
use crate::output::{Event, Notification, Splice, SpliceOutcome};
use crate::transition::Queue;

mod equality;

/// One pending message and whether it was delivered waking (S19)
/// ([example](crate::Machine#the-pending-lists)).
#[derive(Clone, Debug)]
pub struct Pending {
    message: SharedMessage,
    waking: bool,
    key: i64,
}

impl Pending {
    /// The message ([example](crate::Machine#the-pending-lists)).
    pub fn message(&self) -> &SharedMessage {
        &self.message
    }

    /// Whether it was delivered with `wakeup = true` (S19)
    /// ([example](crate::Machine#the-pending-lists)).
    pub fn is_waking(&self) -> bool {
        self.waking
    }
}

/// One pending list, in ascending key order.
#[derive(Clone, Debug, Default)]
struct List {
    items: VecDeque<Pending>,
    /// The key the next prepend takes; decreases.
    front_key: i64,
    /// The key the next append takes; increases.
    back_key: i64,
}

impl List {
    fn next_back_key(&mut self) -> i64 {
        let key = self.back_key;
        // Wrapping is unreachable in practice (2^63 appends to one machine).
        self.back_key = self.back_key.wrapping_add(1);
        key
    }

    fn next_front_key(&mut self) -> i64 {
        self.front_key = self.front_key.wrapping_sub(1);
        self.front_key
    }

    fn position(&self, key: i64) -> Option<usize> {
        self.items.binary_search_by_key(&key, |item| item.key).ok()
    }

    /// A key for an item about to be inserted at `position`, between its neighbours' keys:
    /// the next append's last, the next prepend's first, otherwise the one after the previous
    /// item's key if the next item's is above it; `None` when the neighbours' keys are adjacent.
    fn key_at(&mut self, position: usize) -> Option<i64> {
        if position == self.items.len() {
            return Some(self.next_back_key());
        }
        if position == 0 {
            return Some(self.next_front_key());
        }
        let before = self.items.get(position - 1)?.key;
        let after = self.items.get(position)?.key;
        before.checked_add(1).filter(|&key| key < after)
    }
}

/// Where an id is pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    target: Target,
    key: i64,
}

/// NT and NS, the index of pending ids, and the count of waking items.
#[derive(Clone, Debug, Default)]
pub(crate) struct Inbox {
    next_turn: List,
    next_step: List,
    index: HashMap<MessageId, Slot, IdHasher>,
    waking: usize,
    /// The ids that left the lists lately (S51).
    memory: DeliveryMemory,
    /// While a batch is open ([`Machine::begin_batch`](crate::Machine::begin_batch)): how to
    /// take back every change since, newest last. Bookkeeping, outside equality and hashing.
    /// Allocated at the first batch and kept, so later batches reuse its buffer; one pointer
    /// until then (an idle machine stays small, bench 6).
    undo: Option<Box<Journal>>,
}

/// The undo journal of the open batch, and the machine's own saved state for its batch (one
/// allocation for both).
#[derive(Clone, Debug, Default)]
struct Journal {
    /// The machine's batch bookkeeping ([`Machine::begin_batch`](crate::Machine::begin_batch)).
    machine: crate::machine::Before,
    open: bool,
    /// How to take back each change since the batch opened, oldest first.
    changes: Vec<Undo>,
}

/// How to take back one change to the lists (and the memory it fed), exactly.
#[derive(Clone, Debug)]
enum Undo {
    /// An item was put first (`front`) or last in `target`; the list's keys were `keys`.
    Inserted {
        target: Target,
        front: bool,
        keys: (i64, i64),
    },
    /// The item at `position` of `target` left it (into the memory: `forgotten`).
    Removed {
        target: Target,
        position: usize,
        item: Pending,
        forgotten: Forgotten,
    },
    /// The item at `position` of `target` held `old`; the old id left if `forgotten` is set.
    Replaced {
        target: Target,
        position: usize,
        old: SharedMessage,
        forgotten: Option<Forgotten>,
    },
    /// `target` was emptied of `items` (each into the memory, in order); its keys were `keys`.
    Cleared {
        target: Target,
        items: Vec<(Pending, Forgotten)>,
        keys: (i64, i64),
    },
    /// The record of `id` got its `step` (S58).
    Stepped { id: MessageId },
    /// A `turn/end` gave records their `end` (S58).
    Ended(Ended),
}

impl Inbox {
    /// Empty lists, a delivery memory of `capacity` (S51), the indexes keyed by `hasher`.
    pub(crate) fn with_memory(capacity: usize, hasher: IdHasher) -> Self {
        Inbox {
            memory: DeliveryMemory::new(capacity, hasher.clone()),
            index: HashMap::with_hasher(hasher),
            ..Inbox::default()
        }
    }

    /// The keys of the id index (the seed of [`Config::hash_seed`](crate::Config::hash_seed)).
    pub(crate) fn hasher(&self) -> &IdHasher {
        self.index.hasher()
    }

    /// The delivery memory (S51).
    pub(crate) fn memory(&self) -> &DeliveryMemory {
        &self.memory
    }

    fn list(&self, target: Target) -> &List {
        match target {
            Target::NextTurn => &self.next_turn,
            Target::NextStep => &self.next_step,
        }
    }

    fn list_mut(&mut self, target: Target) -> &mut List {
        match target {
            Target::NextTurn => &mut self.next_turn,
            Target::NextStep => &mut self.next_step,
        }
    }

    /// The items of one list, in order.
    pub(crate) fn items(&self, target: Target) -> &VecDeque<Pending> {
        &self.list(target).items
    }

    pub(crate) fn len(&self, target: Target) -> usize {
        self.list(target).items.len()
    }

    pub(crate) fn contains(&self, id: &MessageId) -> bool {
        self.index.contains_key(id)
    }

    /// The fingerprint of the message pending under `id`, if any (for S56's comparison).
    #[inline]
    pub(crate) fn pending_fingerprint(&self, id: &MessageId) -> Option<Fingerprint> {
        let slot = self.index.get(id)?;
        let list = self.list(slot.target);
        let position = list.position(slot.key)?;
        list.items
            .get(position)
            .map(|item| item.message.fingerprint())
    }

    /// Waking work (S19): at least one pending item, in either list, delivered waking.
    pub(crate) fn has_waking_work(&self) -> bool {
        self.waking > 0
    }

    /// Where `id` is pending: its list and position (S15 looks in NT, then NS; an id is pending
    /// at most once, S9).
    pub(crate) fn locate(&self, id: &MessageId) -> Option<(Target, usize)> {
        let slot = self.index.get(id)?;
        let position = self.list(slot.target).position(slot.key)?;
        Some((slot.target, position))
    }

    /// Appends a message to the end of `target` (S17). The caller checked the id is not pending.
    pub(crate) fn append(
        &mut self,
        target: Target,
        message: SharedMessage,
        waking: bool,
        out: &mut Queue,
    ) {
        let start = self.len(target);
        self.insert_item(target, message, waking, start, out);
    }

    /// Puts a quiet message first in `target` (S15). The caller checked the id is not pending.
    pub(crate) fn prepend(&mut self, target: Target, message: SharedMessage, out: &mut Queue) {
        self.insert_item(target, message, false, 0, out);
    }

    /// Inserts at the front (`start == 0`) or the back (`start == len`).
    fn insert_item(
        &mut self,
        target: Target,
        message: SharedMessage,
        waking: bool,
        start: usize,
        out: &mut Queue,
    ) {
        out.event(Event::Spliced(Splice {
            target,
            start,
            removed_count: 0,
            inserted: SmallVec::from_buf([message.clone()]),
            outcome: None,
            wakeup: waking,
            redelivery: None,
        }));
        let list = self.list_mut(target);
        let keys = (list.front_key, list.back_key);
        let key = if start == 0 && !list.items.is_empty() {
            list.next_front_key()
        } else {
            list.next_back_key()
        };
        let item = Pending {
            message: message.clone(),
            waking,
            key,
        };
        if start == 0 {
            list.items.push_front(item);
        } else {
            list.items.push_back(item);
        }
        self.index
            .insert(message.id().clone(), Slot { target, key });
        self.waking += usize::from(waking);
        self.journal(|| Undo::Inserted {
            target,
            front: start == 0,
            keys,
        });
        out.notify(Notification::Inserted { message });
    }

    /// Ordinary removal of the item at `position` (S12, S15).
    pub(crate) fn remove_at(&mut self, target: Target, position: usize, out: &mut Queue) {
        let Some(item) = self.list_mut(target).items.remove(position) else {
            return;
        };
        out.event(Event::Spliced(Splice {
            target,
            start: position,
            removed_count: 1,
            inserted: SmallVec::new(),
            outcome: Some(SpliceOutcome::Canceled),
            wakeup: false,
            redelivery: None,
        }));
        let forgotten = self.left(&item, Left::Discarded);
        let message = match self.open_journal() {
            Some(journal) => {
                let message = item.message.clone();
                journal.push(Undo::Removed {
                    target,
                    position,
                    item,
                    forgotten,
                });
                message
            }
            None => item.message,
        };
        out.notify(Notification::Discarded { message });
    }

    /// Replaces the item at `position` in place (S15): the replacement keeps the slot and inherits
    /// the waking flag. The caller checked the new id is not pending elsewhere.
    pub(crate) fn replace_at(
        &mut self,
        target: Target,
        position: usize,
        message: SharedMessage,
        out: &mut Queue,
    ) {
        let list = self.list_mut(target);
        let Some(item) = list.items.get_mut(position) else {
            return;
        };
        let old = std::mem::replace(&mut item.message, message.clone());
        let waking = item.waking;
        let key = item.key;
        out.event(Event::Spliced(Splice {
            target,
            start: position,
            removed_count: 1,
            inserted: SmallVec::from_buf([message.clone()]),
            outcome: Some(SpliceOutcome::Canceled),
            wakeup: waking,
            redelivery: None,
        }));
        self.index.remove(old.id());
        self.index
            .insert(message.id().clone(), Slot { target, key });
        // S51: a replace that keeps the id leaves it pending.
        let forgotten = (old.id() != message.id()).then(|| self.memory.left(&old, Left::Discarded));
        self.journal(|| Undo::Replaced {
            target,
            position,
            old: old.clone(),
            forgotten,
        });
        out.notify(Notification::Discarded { message: old });
        out.notify(Notification::Inserted { message });
    }

    /// `clear()` (S15): NS then NT, each non-empty list one ordinary splice followed by its
    /// `discarded` notifications in list order.
    pub(crate) fn clear(&mut self, out: &mut Queue) {
        self.clear_list(Target::NextStep, out);
        self.clear_list(Target::NextTurn, out);
    }

    /// Clears one list as an ordinary removal.
    pub(crate) fn clear_list(&mut self, target: Target, out: &mut Queue) {
        let count = self.len(target);
        if count == 0 {
            return;
        }
        out.event(Event::Spliced(Splice {
            target,
            start: 0,
            removed_count: count,
            inserted: SmallVec::new(),
            outcome: Some(SpliceOutcome::Canceled),
            wakeup: false,
            redelivery: None,
        }));
        let mut items = std::mem::take(&mut self.list_mut(target).items);
        let mut journal = self.is_journaling().then(Vec::new);
        for item in items.drain(..) {
            let forgotten = self.left(&item, Left::Discarded);
            let message = match &mut journal {
                Some(journal) => {
                    let message = item.message.clone();
                    journal.push((item, forgotten));
                    message
                }
                None => item.message,
            };
            out.notify(Notification::Discarded { message });
        }
        self.emptied(target, items, journal);
    }

    /// `target` was emptied (its buffer is handed back so its capacity is reused); while a
    /// batch is open, the items it held are journaled.
    fn emptied(
        &mut self,
        target: Target,
        buffer: VecDeque<Pending>,
        journal: Option<Vec<(Pending, Forgotten)>>,
    ) {
        let list = self.list_mut(target);
        let keys = (list.front_key, list.back_key);
        list.items = buffer;
        list.front_key = 0;
        list.back_key = 0;
        if let (Some(undo), Some(items)) = (self.open_journal(), journal) {
            undo.push(Undo::Cleared {
                target,
                items,
                keys,
            });
        }
    }

    /// Claims (S28) as pure deletions: all of NS, then at a turn boundary the first NT item. Emits
    /// the splices; the caller emits `claimed` for the returned batch, which is in claim order.
    pub(crate) fn claim(&mut self, turn: u64, turn_boundary: bool, out: &mut Queue) -> Batch {
        let mut batch = Batch::new();
        let ns = self.len(Target::NextStep);
        if ns > 0 {
            out.event(claim_splice(Target::NextStep, ns));
            let mut items = std::mem::take(&mut self.next_step.items);
            let mut journal = self.is_journaling().then(Vec::new);
            for item in items.drain(..) {
                let forgotten = self.left(&item, Left::Claimed(turn));
                match &mut journal {
                    Some(journal) => {
                        batch.push(item.message.clone());
                        journal.push((item, forgotten));
                    }
                    None => batch.push(item.message),
                }
            }
            self.emptied(Target::NextStep, items, journal);
        }
        if turn_boundary {
            if let Some(item) = self.next_turn.items.pop_front() {
                out.event(claim_splice(Target::NextTurn, 1));
                let forgotten = self.left(&item, Left::Claimed(turn));
                match self.open_journal() {
                    Some(journal) => {
                        batch.push(item.message.clone());
                        journal.push(Undo::Removed {
                            target: Target::NextTurn,
                            position: 0,
                            item,
                            forgotten,
                        });
                    }
                    None => batch.push(item.message),
                }
            }
        }
        batch
    }

    /// An item left its list (and no splice puts its id back): out of the index and the waking
    /// count, into the delivery memory (S51).
    fn left(&mut self, item: &Pending, how: Left) -> Forgotten {
        self.index.remove(item.message.id());
        self.waking -= usize::from(item.waking);
        self.memory.left(&item.message, how)
    }

    /// S58: the messages `entered` step `step` of turn `turn` (its `user/message` events): each
    /// id held as claimed by that turn gets `step` if its record has none.
    pub(crate) fn entered<'a>(
        &mut self,
        turn: u64,
        step: u64,
        entered: impl IntoIterator<Item = &'a MessageId>,
    ) {
        if self.memory.capacity() == 0 {
            return;
        }
        for id in entered {
            if self.memory.entered(turn, step, id) {
                self.journal(|| Undo::Stepped { id: id.clone() });
            }
        }
    }

    /// S58: turn `turn` ended with a reason of `kind`: that turn's claims get their `end`.
    pub(crate) fn turn_ended(&mut self, turn: u64, kind: Option<TurnEndKind>) {
        if self.memory.capacity() == 0 {
            return;
        }
        let ended = self.memory.turn_ended(turn, kind);
        self.journal(|| Undo::Ended(ended));
    }

    /// While a batch is open, remembers how to take back the change just made.
    #[inline]
    fn journal(&mut self, undo: impl FnOnce() -> Undo) {
        if let Some(journal) = self.open_journal() {
            journal.push(undo());
        }
    }

    /// The open batch's journal, if a batch is open.
    #[inline]
    fn open_journal(&mut self) -> Option<&mut Vec<Undo>> {
        self.undo
            .as_deref_mut()
            .filter(|journal| journal.open)
            .map(|journal| &mut journal.changes)
    }

    #[inline]
    fn is_journaling(&self) -> bool {
        self.undo.as_deref().is_some_and(|journal| journal.open)
    }

    /// Opens a batch: from now on every change is journaled (an open batch is restarted).
    pub(crate) fn begin_batch(&mut self) {
        let journal = self.undo.get_or_insert_with(Box::default);
        journal.open = true;
        journal.changes.clear();
    }

    /// The machine's batch bookkeeping, if a batch was ever opened.
    pub(crate) fn batch_state(&self) -> Option<&crate::machine::Before> {
        self.undo.as_deref().map(|journal| &journal.machine)
    }

    /// [`batch_state`](Inbox::batch_state), to change it.
    pub(crate) fn batch_state_mut(&mut self) -> Option<&mut crate::machine::Before> {
        self.undo.as_deref_mut().map(|journal| &mut journal.machine)
    }

    /// The machine's batch bookkeeping, allocated (closed, explicit) at its first use.
    pub(crate) fn batch_state_or_default(&mut self) -> &mut crate::machine::Before {
        &mut self.undo.get_or_insert_with(Box::default).machine
    }

    /// An implicit batch's input is about to apply (`Machine::set_implicit_batches`, batch.rs):
    /// opens the journal if it is closed, and returns how many changes it holds (the open
    /// batch's, which the input commits if it is accepted: [`Inbox::commit_first`]).
    pub(crate) fn journal_mark(&mut self) -> usize {
        let journal = self.undo.get_or_insert_with(Box::default);
        if !journal.open {
            journal.open = true;
            journal.changes.clear();
        }
        journal.changes.len()
    }

    /// Keeps the first `mark` changes for good (the batch before an accepted implicit input);
    /// the journal stays open on the rest (the input's own).
    pub(crate) fn commit_first(&mut self, mark: usize) {
        if let Some(journal) = self.undo.as_deref_mut() {
            journal.changes.drain(..mark.min(journal.changes.len()));
        }
    }

    /// Closes the batch, keeping its changes.
    pub(crate) fn commit_batch(&mut self) {
        if let Some(journal) = self.undo.as_deref_mut() {
            journal.open = false;
            journal.changes.clear();
        }
    }

    /// Closes the batch, taking back every change since it was opened, newest first: the lists,
    /// the index, the waking count and the memory are exactly as they were (S5 for a failed
    /// batch).
    pub(crate) fn roll_back_batch(&mut self) {
        let Some(journal) = self.undo.as_deref_mut().filter(|journal| journal.open) else {
            return;
        };
        journal.open = false;
        let mut changes = std::mem::take(&mut journal.changes);
        for undo in changes.drain(..).rev() {
            self.undo_one(undo);
        }
        // Hand the emptied buffer back so the next batch reuses it.
        if let Some(journal) = self.undo.as_deref_mut() {
            journal.changes = changes;
        }
    }

    fn undo_one(&mut self, undo: Undo) {
        match undo {
            Undo::Inserted {
                target,
                front,
                keys,
            } => {
                let list = self.list_mut(target);
                let item = if front {
                    list.items.pop_front()
                } else {
                    list.items.pop_back()
                };
                (list.front_key, list.back_key) = keys;
                if let Some(item) = item {
                    self.index.remove(item.message.id());
                    self.waking -= usize::from(item.waking);
                }
            }
            Undo::Removed {
                target,
                position,
                item,
                forgotten,
            } => {
                self.restore_item(target, &item, forgotten);
                self.list_mut(target).items.insert(position, item);
            }
            Undo::Replaced {
                target,
                position,
                old,
                forgotten,
            } => {
                let Some(item) = self.list_mut(target).items.get_mut(position) else {
                    return;
                };
                let new = std::mem::replace(&mut item.message, old.clone());
                let key = item.key;
                if let Some(forgotten) = forgotten {
                    self.memory.undo(old.id(), forgotten);
                }
                self.index.remove(new.id());
                self.index.insert(old.id().clone(), Slot { target, key });
            }
            Undo::Cleared {
                target,
                items,
                keys,
            } => {
                let mut restored = VecDeque::with_capacity(items.len());
                for (item, forgotten) in items.into_iter().rev() {
                    self.restore_item(target, &item, forgotten);
                    restored.push_front(item);
                }
                let list = self.list_mut(target);
                list.items = restored;
                (list.front_key, list.back_key) = keys;
            }
            Undo::Stepped { id } => self.memory.unenter(&id),
            Undo::Ended(ended) => self.memory.unend(ended),
        }
    }

    /// Undoes [`left`](Inbox::left) for an item going back into `target`.
    fn restore_item(&mut self, target: Target, item: &Pending, forgotten: Forgotten) {
        self.memory.undo(item.message.id(), forgotten);
        self.waking += usize::from(item.waking);
        self.index.insert(
            item.message.id().clone(),
            Slot {
                target,
                key: item.key,
            },
        );
    }

    /// Applies one splice read from a restored log (S46), emitting nothing: the `removed` items
    /// from `start` of `target` leave it, then `inserted` go in their place, each delivered
    /// `waking` (S19). An inserted id the memory holds is released (a log written under a
    /// smaller capacity, S51: never both pending and held); then S53: the removed ids that are
    /// not pending after the splice enter the delivery memory, in list order, by the rule the
    /// live changes follow. The caller checked the coordinates (S11). No batch is open.
    ///
    /// # Errors
    ///
    /// The first inserted id that is pending already (S13 at restore, S47). The items inserted
    /// before it stay and the memory is not fed: a restorer that failed keeps failing.
    pub(crate) fn restore_splice(
        &mut self,
        target: Target,
        start: usize,
        removed: usize,
        inserted: impl IntoIterator<Item = SharedMessage>,
        waking: bool,
        how: Left,
    ) -> Result<SmallVec<[Pending; 1]>, MessageId> {
        let gone: SmallVec<[Pending; 1]> = self
            .list_mut(target)
            .items
            .drain(start..start + removed)
            .collect();
        for item in &gone {
            self.index.remove(item.message.id());
            self.waking -= usize::from(item.waking);
        }
        let mut free_keys = gone.iter().map(|item| item.key);
        let mut keyed = true;
        for (at, message) in (start..).zip(inserted) {
            if self.index.contains_key(message.id()) {
                if !keyed {
                    self.renumber(target);
                }
                return Err(message.id().clone());
            }
            self.memory.release(message.id());
            let key = match free_keys.next() {
                // A removed item's key lies between the neighbours of the removed range.
                Some(key) => key,
                None => self.list_mut(target).key_at(at).unwrap_or_else(|| {
                    keyed = false;
                    0
                }),
            };
            self.index
                .insert(message.id().clone(), Slot { target, key });
            self.waking += usize::from(waking);
            self.list_mut(target).items.insert(
                at,
                Pending {
                    message,
                    waking,
                    key,
                },
            );
        }
        if !keyed {
            self.renumber(target);
        }
        // S53: the removed ids not pending after the splice enter the memory, in list order.
        for gone in &gone {
            if !self.index.contains_key(gone.message.id()) {
                self.memory.left(&gone.message, how);
            }
        }
        self.memory.compact_claims();
        Ok(gone)
    }

    /// Gives the items of `target` the keys `0, 1, …` again (after a restored splice inserted
    /// between two items with adjacent keys).
    fn renumber(&mut self, target: Target) {
        let list = self.list_mut(target);
        list.front_key = 0;
        list.back_key = 0;
        let mut slots: Vec<(MessageId, i64)> = Vec::with_capacity(list.items.len());
        for item in &mut list.items {
            item.key = list.back_key;
            list.back_key += 1;
            slots.push((item.message.id().clone(), item.key));
        }
        for (id, key) in slots {
            self.index.insert(id, Slot { target, key });
        }
    }
}

fn claim_splice(target: Target, removed_count: usize) -> Event {
    Event::Spliced(Splice {
        target,
        start: 0,
        removed_count,
        inserted: SmallVec::new(),
        outcome: None,
        wakeup: false,
        redelivery: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use crate::output::{Effect, Output};
    use std::sync::Arc;

    fn user(id: &str) -> SharedMessage {
        Arc::new(Message::user(id, id))
    }

    fn ids(inbox: &Inbox, target: Target) -> Vec<&str> {
        inbox
            .items(target)
            .iter()
            .map(|item| item.message().id().as_str())
            .collect()
    }

    fn splice_of(output: &Output) -> &Splice {
        match output {
            Output::Event(Event::Spliced(splice)) => splice,
            other => panic!("not a splice: {other:?}"),
        }
    }

    #[test]
    fn s15_positions_follow_prepends_appends_and_removals() {
        let mut inbox = Inbox::default();
        let mut out = Queue::default();
        for id in ["a", "b", "c"] {
            inbox.append(Target::NextTurn, user(id), true, &mut out);
        }
        inbox.prepend(Target::NextTurn, user("p"), &mut out);
        inbox.prepend(Target::NextTurn, user("q"), &mut out);
        assert_eq!(ids(&inbox, Target::NextTurn), ["q", "p", "a", "b", "c"]);
        for (id, position) in [("q", 0), ("p", 1), ("a", 2), ("b", 3), ("c", 4)] {
            assert_eq!(inbox.locate(&id.into()), Some((Target::NextTurn, position)));
        }
        out.clear();
        inbox.remove_at(Target::NextTurn, 2, &mut out);
        assert_eq!(splice_of(&out.peek()[0]).start, 2);
        assert_eq!(inbox.locate(&"b".into()), Some((Target::NextTurn, 2)));
        assert_eq!(inbox.locate(&"a".into()), None);
        // Emptied by removals, then refilled from both ends: still ordered.
        for id in ["q", "p", "b", "c"] {
            let (target, position) = inbox.locate(&id.into()).unwrap();
            inbox.remove_at(target, position, &mut out);
        }
        inbox.prepend(Target::NextTurn, user("x"), &mut out);
        inbox.append(Target::NextTurn, user("y"), false, &mut out);
        inbox.prepend(Target::NextTurn, user("w"), &mut out);
        assert_eq!(ids(&inbox, Target::NextTurn), ["w", "x", "y"]);
        assert_eq!(inbox.locate(&"y".into()), Some((Target::NextTurn, 2)));
        assert!(!inbox.has_waking_work());
    }

    #[test]
    fn s19_waking_count_follows_every_exit() {
        let mut inbox = Inbox::default();
        let mut out = Queue::default();
        inbox.append(Target::NextStep, user("s"), true, &mut out);
        inbox.append(Target::NextTurn, user("f"), true, &mut out);
        inbox.append(Target::NextTurn, user("q"), false, &mut out);
        assert!(inbox.has_waking_work());
        inbox.replace_at(Target::NextTurn, 0, user("f2"), &mut out);
        assert!(inbox.items(Target::NextTurn)[0].is_waking());
        let batch = inbox.claim(1, false, &mut out);
        assert_eq!(batch.len(), 1);
        assert!(inbox.has_waking_work(), "f2 is still pending");
        let batch = inbox.claim(1, true, &mut out);
        assert_eq!(batch.len(), 1);
        assert!(!inbox.has_waking_work(), "only the quiet q is left");
        inbox.clear(&mut out);
        assert_eq!(inbox.len(Target::NextTurn), 0);
        assert!(inbox.index.is_empty());
    }

    #[test]
    fn s14_replace_records_splice_then_discarded_then_inserted() {
        let mut inbox = Inbox::default();
        let mut out = Queue::default();
        inbox.append(Target::NextStep, user("a"), false, &mut out);
        out.clear();
        inbox.replace_at(Target::NextStep, 0, user("b"), &mut out);
        assert_eq!(out.peek().len(), 3);
        let outputs = out.peek();
        let splice = splice_of(&outputs[0]);
        assert_eq!(
            (
                splice.start,
                splice.removed_count,
                splice.outcome,
                splice.wakeup
            ),
            (0, 1, Some(SpliceOutcome::Canceled), false)
        );
        assert!(
            matches!(&out.peek()[1], Output::Effect(Effect::Notify(Notification::Discarded { message })) if message.id().as_str() == "a")
        );
        assert!(
            matches!(&out.peek()[2], Output::Effect(Effect::Notify(Notification::Inserted { message })) if message.id().as_str() == "b")
        );
        assert!(inbox.contains(&"b".into()));
        assert!(!inbox.contains(&"a".into()));
    }

    /// S46, S11: a restored splice may insert anywhere (a log another implementation wrote);
    /// keys stay ascending, so every id is found at its place and the live changes that follow
    /// work. S53: a removed id re-inserted by the same splice stays out of the memory.
    #[test]
    fn s46_restored_splices_insert_anywhere_and_keep_every_id_findable() {
        let mut inbox = Inbox::with_memory(4, IdHasher::default());
        let nt = Target::NextTurn;
        let splice = |inbox: &mut Inbox, start, removed, ids: &[&str]| {
            inbox
                .restore_splice(
                    nt,
                    start,
                    removed,
                    ids.iter().map(|id| user(id)),
                    true,
                    Left::Discarded,
                )
                .map(|_| ())
        };
        splice(&mut inbox, 0, 0, &["a", "b"]).unwrap();
        splice(&mut inbox, 1, 0, &["x"]).unwrap(); // between adjacent keys: renumbered
        splice(&mut inbox, 0, 0, &["y", "z"]).unwrap(); // two in front
        splice(&mut inbox, 2, 2, &["x", "c", "d"]).unwrap(); // a and x out, x back in
        assert_eq!(ids(&inbox, nt), ["y", "z", "x", "c", "d", "b"]);
        for (position, id) in ["y", "z", "x", "c", "d", "b"].into_iter().enumerate() {
            assert_eq!(inbox.locate(&id.into()), Some((nt, position)), "{id}");
        }
        assert_eq!(
            inbox
                .memory()
                .ids()
                .map(MessageId::as_str)
                .collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(splice(&mut inbox, 0, 0, &["e", "c"]), Err("c".into()));
        assert_eq!(ids(&inbox, nt)[..2], ["e", "y"]);
        let mut out = Queue::default();
        inbox.prepend(nt, user("p"), &mut out);
        inbox.append(nt, user("q"), false, &mut out);
        inbox.remove_at(nt, 3, &mut out); // z
        assert_eq!(ids(&inbox, nt), ["p", "e", "y", "x", "c", "d", "b", "q"]);
        for (position, id) in ["p", "e", "y", "x", "c", "d", "b", "q"]
            .into_iter()
            .enumerate()
        {
            assert_eq!(inbox.locate(&id.into()), Some((nt, position)), "{id}");
        }
        assert_eq!(inbox.waking, 6);
    }

    /// `==` is structural: the same items under other keys are another inbox (their
    /// [`Behaviour`](crate::Behaviour) is the same: `machine::behaviour`'s tests).
    #[test]
    fn equality_sees_the_keys_and_the_open_journal() {
        let mut out = Queue::default();
        let mut one = Inbox::default();
        one.append(Target::NextTurn, user("a"), true, &mut out);
        let mut two = Inbox::default();
        two.append(Target::NextTurn, user("z"), true, &mut out);
        two.append(Target::NextTurn, user("a"), true, &mut out);
        two.remove_at(Target::NextTurn, 0, &mut out);
        assert_ne!(one, two);
        let mut same = Inbox::default();
        same.append(Target::NextTurn, user("a"), true, &mut out);
        assert_eq!(one, same);
        // A batch opened and closed keeps its buffer: no part of the value.
        same.begin_batch();
        assert_ne!(one, same);
        same.commit_batch();
        assert_eq!(one, same);
    }
}
