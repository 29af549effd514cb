//! I11 and S51–S53, watched from the outputs alone: the monitor keeps its own window of the ids
//! that last left the lists (from `discarded` and `claimed` notifications, splice by splice), and
//! checks that no insertion takes one of them and that the machine's memory is that window.

use std::collections::VecDeque;

use coxswain_core::{Machine, MessageId, SharedMessage};

use super::properties::{fail, Check, Fact, Invariant};
use super::records::{Left, Record};
use super::Monitor;

/// The ids one splice moved: the removed messages (in list order) and the inserted ids.
#[derive(Default)]
pub(super) struct SpliceIds {
    left: Vec<(SharedMessage, Left)>,
    inserted: Vec<MessageId>,
}

/// The monitor's view of the delivery memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Window {
    capacity: usize,
    /// The last `capacity` messages that left the lists, oldest first (S56 compares a retry
    /// with the one held under its id), each with the monitor's fate record (S58).
    held: VecDeque<(SharedMessage, Record)>,
    /// The id last forgotten, until it is delivered again (a `sometimes` fact) or another is.
    forgotten: Option<MessageId>,
}

/// Hashes the held messages but not their fate records (S58), as the core's `Behaviour` and the
/// spec's `Hash` leave theirs out: no input reads a record (`fate` is a query), and every
/// transition checks the records against the machine's answers (I15) before its state is
/// compared with any other, so a wrong record is caught where it arises. Hashing them would
/// count every path's records as states of their own (over twice the states at W = 2).
impl std::hash::Hash for Window {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.capacity.hash(state);
        self.held.len().hash(state);
        for (message, _) in &self.held {
            message.hash(state);
        }
        self.forgotten.hash(state);
    }
}

impl Window {
    pub(super) fn new(capacity: usize) -> Self {
        Window {
            capacity,
            ..Window::default()
        }
    }

    pub(super) fn holds(&self, id: &MessageId) -> bool {
        self.held(id).is_some()
    }

    /// The message held under `id`, if the window holds it.
    pub(super) fn held(&self, id: &MessageId) -> Option<&SharedMessage> {
        self.held
            .iter()
            .find(|(message, _)| message.id() == id)
            .map(|(message, _)| message)
    }

    /// The held ids, oldest first.
    pub(super) fn ids(&self) -> impl Iterator<Item = &MessageId> + '_ {
        self.held.iter().map(|(message, _)| message.id())
    }

    /// The fate record held under `id` (S58).
    pub(super) fn record(&self, id: &MessageId) -> Option<&Record> {
        self.held
            .iter()
            .find(|(message, _)| message.id() == id)
            .map(|(_, record)| record)
    }

    fn record_mut(&mut self, id: &MessageId) -> Option<&mut Record> {
        self.held
            .iter_mut()
            .find(|(message, _)| message.id() == id)
            .map(|(_, record)| record)
    }

    /// S58: a `user/message` carrying `id` entered step `step` of turn `turn`: a record claimed
    /// by that turn gets the step if it has none.
    pub(super) fn record_step(&mut self, id: &MessageId, turn: u64, step: u64) {
        if let Some(record) = self.record_mut(id) {
            record.entered(turn, step);
        }
    }

    /// S58: turn `turn` ended with `kind`: the records it claimed that have no `end` get it.
    /// Returns whether one of them had its step (a fate with both, a `sometimes` fact).
    pub(super) fn record_end(&mut self, turn: u64, kind: coxswain_core::TurnEndKind) -> bool {
        let mut stepped = false;
        for (_, record) in &mut self.held {
            stepped |= record.ended(turn, kind);
        }
        stepped
    }

    /// The held messages claimed by turn `turn` whose record has a step (S58).
    pub(super) fn stepped_claims(&self, turn: u64) -> Vec<SharedMessage> {
        self.held
            .iter()
            .filter(|(_, record)| record.stepped_in(turn))
            .map(|(message, _)| message.clone())
            .collect()
    }

    /// S59, S53: `id` is pending again (crash repair redelivered it): it leaves the window with
    /// its record.
    pub(super) fn release(&mut self, id: &MessageId) {
        self.held.retain(|(message, _)| message.id() != id);
    }

    pub(super) fn forgotten(&self) -> Option<&MessageId> {
        self.forgotten.as_ref()
    }
}

impl Monitor {
    /// An id is inserted: I11 forbids an id among the last `W` that left.
    pub(super) fn observe_memory_insert(
        &mut self,
        id: &MessageId,
        splice: &mut SpliceIds,
    ) -> Check {
        if self.window.holds(id) {
            return fail(
                Invariant::I11Once,
                format!("`{id}` inserted while among the last ids that left the lists"),
            );
        }
        if self.window.forgotten.as_ref() == Some(id) {
            self.window.forgotten = None;
            self.note(Fact::ForgottenIdDeliveredAgain);
        }
        splice.inserted.push(id.clone());
        Ok(())
    }

    /// An id left its list (discarded or claimed, `how`).
    pub(super) fn observe_memory_leave(message: &SharedMessage, how: Left, splice: &mut SpliceIds) {
        splice.left.push((message.clone(), how));
    }

    /// A splice ended (the next one began, or the input's outputs did): S51, its removed ids that
    /// are not pending again enter the window, in list order; the oldest past `W` are forgotten.
    pub(super) fn close_splice(&mut self, splice: &mut SpliceIds) {
        let SpliceIds { left, inserted } = std::mem::take(splice);
        if self.window.capacity == 0 {
            return;
        }
        for (message, how) in left.into_iter().filter(|(m, _)| !inserted.contains(m.id())) {
            self.window.held.push_back((message, Record::new(how)));
            while self.window.held.len() > self.window.capacity {
                self.window.forgotten = self.window.held.pop_front().map(|(m, _)| m.id().clone());
            }
        }
    }
}

/// S51, S53: the machine's memory holds exactly the window, in order (after a restore too).
pub(super) fn check_memory(monitor: &Monitor, machine: &Machine) -> Check {
    if machine.delivered().eq(monitor.window.ids()) {
        return Ok(());
    }
    let held: Vec<&MessageId> = machine.delivered().collect();
    let window: Vec<&MessageId> = monitor.window.ids().collect();
    fail(
        Invariant::I11Once,
        format!("the delivery memory holds {held:?}, the last ids that left are {window:?}"),
    )
}
