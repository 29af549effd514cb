//! I11 and S51–S53, watched from the outputs alone: the monitor keeps its own window of the ids
//! that last left the lists (from `discarded` and `claimed` notifications, splice by splice), and
//! checks that no insertion takes one of them and that the machine's memory is that window.

use std::collections::VecDeque;

use coxswain_core::{Machine, MessageId, SharedMessage};

use super::properties::{fail, Check, Fact, Invariant};
use super::Monitor;

/// The ids one splice moved: the removed messages (in list order) and the inserted ids.
#[derive(Default)]
pub(super) struct SpliceIds {
    left: Vec<SharedMessage>,
    inserted: Vec<MessageId>,
}

/// The monitor's view of the delivery memory.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Window {
    capacity: usize,
    /// The last `capacity` messages that left the lists, oldest first (S56 compares a retry
    /// with the one held under its id).
    held: VecDeque<SharedMessage>,
    /// The id last forgotten, until it is delivered again (a `sometimes` fact) or another is.
    forgotten: Option<MessageId>,
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
        self.held.iter().find(|message| message.id() == id)
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

    /// An id left its list (discarded or claimed).
    pub(super) fn observe_memory_leave(message: &SharedMessage, splice: &mut SpliceIds) {
        splice.left.push(message.clone());
    }

    /// A splice ended (the next one began, or the input's outputs did): S51, its removed ids that
    /// are not pending again enter the window, in list order; the oldest past `W` are forgotten.
    pub(super) fn close_splice(&mut self, splice: &mut SpliceIds) {
        let SpliceIds { left, inserted } = std::mem::take(splice);
        if self.window.capacity == 0 {
            return;
        }
        for message in left.into_iter().filter(|m| !inserted.contains(m.id())) {
            self.window.held.push_back(message);
            while self.window.held.len() > self.window.capacity {
                self.window.forgotten = self.window.held.pop_front().map(|m| m.id().clone());
            }
        }
    }
}

/// S51, S53: the machine's memory holds exactly the window, in order (after a restore too).
pub(super) fn check_memory(monitor: &Monitor, machine: &Machine) -> Check {
    if machine
        .delivered()
        .eq(monitor.window.held.iter().map(|m| m.id()))
    {
        return Ok(());
    }
    let held: Vec<&MessageId> = machine.delivered().collect();
    let window: Vec<&MessageId> = monitor.window.held.iter().map(|m| m.id()).collect();
    fail(
        Invariant::I11Once,
        format!("the delivery memory holds {held:?}, the last ids that left are {window:?}"),
    )
}
