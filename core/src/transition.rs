//! The drain contract as a type: what one input produced, persisted before it is acted on.
//!
//! Every accepted input returns a [`Transition`] that borrows the machine, so the next input
//! cannot be fed while it is alive. Its durable [`events`](Transition::events) come first, as one
//! batch; only [`persisted`](Transition::persisted), the host's word that the batch is durable,
//! releases the [`Effect`]s (notifications, the start of activities, requests, `abort`). This is
//! raft-rs's `Ready`/`advance` and str0m's single-mutation rhythm, carried by the borrow checker.
//! A transition dropped before it was drained leaves its outputs queued: the next input is
//! rejected [`Rejected::Undrained`](crate::Rejected::Undrained) until
//! [`Machine::drain`](crate::Machine::drain) hands them out again.

use std::collections::VecDeque;

use crate::machine::Machine;
use crate::output::{Effect, Event, Notification, Output};

/// One queued output: a durable event or an effect.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Emitted {
    Event(Event),
    Effect(Effect),
}

/// The outputs of the input being applied, in emission order, with a count of its events.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Queue {
    items: VecDeque<Emitted>,
    events: usize,
}

impl Queue {
    pub(crate) fn event(&mut self, event: Event) {
        self.events += 1;
        self.items.push_back(Emitted::Event(event));
    }

    pub(crate) fn effect(&mut self, effect: Effect) {
        self.items.push_back(Emitted::Effect(effect));
    }

    pub(crate) fn notify(&mut self, notification: Notification) {
        self.effect(Effect::Notify(notification));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Every queued output in the wire vocabulary, left queued (for unit tests).
    #[cfg(test)]
    pub(crate) fn peek(&self) -> Vec<Output> {
        self.clone().outputs_in_order()
    }

    /// Empties the queue (for unit tests).
    #[cfg(test)]
    pub(crate) fn clear(&mut self) {
        *self = Queue::default();
    }

    #[cfg(test)]
    fn outputs_in_order(mut self) -> Vec<Output> {
        std::iter::from_fn(|| self.pop_output()).collect()
    }

    fn pop_effect(&mut self) -> Option<Effect> {
        loop {
            match self.items.pop_front()? {
                Emitted::Effect(effect) => return Some(effect),
                Emitted::Event(_) => self.events -= 1,
            }
        }
    }

    fn drop_events(&mut self) {
        if self.events > 0 {
            self.items.retain(|item| matches!(item, Emitted::Effect(_)));
            self.events = 0;
        }
    }

    fn pop_output(&mut self) -> Option<Output> {
        loop {
            match self.items.pop_front()? {
                Emitted::Event(event) => {
                    self.events -= 1;
                    return Some(Output::Event(event));
                }
                Emitted::Effect(effect) => {
                    if let Some(output) = Option::<Output>::from(effect) {
                        return Some(output);
                    }
                }
            }
        }
    }
}

/// What one accepted input produced: its durable events, then its effects.
///
/// 1. Append [`events`](Transition::events) to the session's log, as one batch, and make it
///    durable (skip this when there are none).
/// 2. Call [`persisted`](Transition::persisted) and carry out every [`Effect`] in order.
///
/// The transition borrows the machine: no other input can be fed until it is gone.
///
/// ```
/// use coxswain_core::{Effect, Machine, Message, Request};
///
/// let mut machine = Machine::new();
/// let mut log = Vec::new();
/// let transition = machine.followup(Message::user("m1", "hello"))?;
/// log.extend(transition.events().cloned()); // 1. persist: splice, turn/start, claim splice
/// assert_eq!(log.len(), 3);
/// for effect in transition.persisted() {   // 2. then act
///     if let Effect::Request(Request::PreStep { messages, .. }) = effect {
///         assert_eq!(messages[0].id().as_str(), "m1");
///     }
/// }
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
#[must_use = "persist the events, then carry out the effects (Transition::persisted)"]
#[derive(Debug)]
pub struct Transition<'m> {
    machine: &'m mut Machine,
    found: bool,
}

impl<'m> Transition<'m> {
    pub(crate) fn new(machine: &'m mut Machine, found: bool) -> Self {
        Transition { machine, found }
    }

    /// `false` only for a `remove` or `replace` whose id was not pending: it changed nothing and
    /// emitted nothing (S15). `true` for every other accepted input.
    pub fn found(&self) -> bool {
        self.found
    }

    /// The durable events, in order: append them to the log as one batch before
    /// [`persisted`](Transition::persisted).
    pub fn events(&self) -> Events<'_> {
        let queue = self.machine.queue();
        Events {
            items: queue.items.iter(),
            left: queue.events,
        }
    }

    /// Whether the input produced no output at all.
    pub fn is_empty(&self) -> bool {
        self.machine.queue().is_empty()
    }

    /// The machine, for queries, while the transition is held.
    pub fn machine(&self) -> &Machine {
        self.machine
    }

    /// The host's word that the events are durable: releases the effects, in order. Effects
    /// left unread when the iterator is dropped stay queued for [`Machine::drain`].
    pub fn persisted(self) -> Effects<'m> {
        Effects {
            queue: self.machine.queue_mut(),
        }
    }

    /// Persists the events into an in-memory log (durable once extended, for tests and
    /// [`Events`]-collecting hosts) and releases the effects: `events` then `persisted` in one.
    pub fn persist_into(self, log: &mut impl Extend<Event>) -> Effects<'m> {
        log.extend(self.events().cloned());
        self.persisted()
    }

    /// Every output in emission order, events included, in the wire vocabulary of the trace
    /// format: for recorders, replayers and ports, which persist nothing. Hosts use
    /// [`events`](Transition::events) and [`persisted`](Transition::persisted).
    pub fn into_outputs(self) -> Outputs<'m> {
        Outputs {
            queue: self.machine.queue_mut(),
        }
    }
}

/// The durable events of a [`Transition`], in order.
#[derive(Clone, Debug)]
pub struct Events<'a> {
    items: std::collections::vec_deque::Iter<'a, Emitted>,
    left: usize,
}

impl<'a> Iterator for Events<'a> {
    type Item = &'a Event;

    fn next(&mut self) -> Option<&'a Event> {
        if self.left == 0 {
            return None;
        }
        let event = self.items.find_map(|item| match item {
            Emitted::Event(event) => Some(event),
            Emitted::Effect(_) => None,
        })?;
        self.left -= 1;
        Some(event)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Events<'_> {}

/// The effects of a persisted [`Transition`], in order.
#[derive(Debug)]
pub struct Effects<'m> {
    queue: &'m mut Queue,
}

impl Iterator for Effects<'_> {
    type Item = Effect;

    #[inline]
    fn next(&mut self) -> Option<Effect> {
        self.queue.pop_effect()
    }
}

impl Drop for Effects<'_> {
    /// The events were persisted: effects left unread stay queued, the events do not.
    fn drop(&mut self) {
        self.queue.drop_events();
    }
}

/// Every output of a [`Transition`] in emission order (see
/// [`Transition::into_outputs`]).
#[derive(Debug)]
pub struct Outputs<'m> {
    queue: &'m mut Queue,
}

impl Iterator for Outputs<'_> {
    type Item = Output;

    #[inline]
    fn next(&mut self) -> Option<Output> {
        self.queue.pop_output()
    }
}
