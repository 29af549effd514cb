//! The drain contract as a type: what one input produced, persisted before it is acted on.
//!
//! Every accepted input returns a [`Transition`] that borrows the machine's output queue (and so
//! the machine), so the next input cannot be fed while it is alive. Its durable [`events`](Transition::events) come first, as one
//! batch; only [`persisted`](Transition::persisted), the host's word that the batch is durable,
//! releases the [`Effect`]s (notifications, the start of activities, requests, `abort`). This is
//! raft-rs's `Ready`/`advance` and str0m's single-mutation rhythm, carried by the borrow checker.
//! A transition dropped before it was drained leaves its outputs queued: the next input is
//! rejected [`Rejected::Undrained`](crate::Rejected::Undrained) until
//! [`Machine::drain`](crate::Machine::drain) hands them out again.

use std::collections::VecDeque;

use crate::output::{Effect, Event, Notification, Output};

/// The outputs of the input being applied: its events (one batch) and its effects, each in
/// emission order. Each effect carries how many events were emitted before it, which is all the
/// ordered wire view needs to interleave them again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Queue {
    events: Vec<Event>,
    effects: VecDeque<(usize, Effect)>,
}

impl Queue {
    #[inline]
    pub(crate) fn event(&mut self, event: Event) {
        self.events.push(event);
    }

    #[inline]
    pub(crate) fn effect(&mut self, effect: Effect) {
        self.effects.push_back((self.events.len(), effect));
    }

    #[inline]
    pub(crate) fn notify(&mut self, notification: Notification) {
        self.effect(Effect::Notify(notification));
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.events.is_empty() && self.effects.is_empty()
    }

    /// Every queued output in the wire vocabulary, left queued (for unit tests).
    #[cfg(test)]
    pub(crate) fn peek(&self) -> Vec<Output> {
        let mut copy = self.clone();
        Outputs::new(&mut copy, false).collect()
    }

    /// Empties the queue (for unit tests).
    #[cfg(test)]
    pub(crate) fn clear(&mut self) {
        *self = Queue::default();
    }

    /// Drops every queued output, keeping the buffers (a rolled-back batch's outputs).
    #[inline]
    pub(crate) fn clear_all(&mut self) {
        self.events.clear();
        self.effects.clear();
    }

    /// The events are durable: they leave the queue, the effects stay (their counts of events
    /// before them now point past the end, which the ordered view reads as "none left").
    #[inline]
    fn persist(&mut self) {
        self.events.clear();
    }
}

/// What one accepted input produced: its durable events, then its effects.
///
/// 1. Append [`events`](Transition::events) to the session's log, as one batch, and make it
///    durable (skip this when there are none).
/// 2. Call [`persisted`](Transition::persisted) and carry out every [`Effect`] in order.
///
/// The transition borrows the machine's output queue, and through it the machine: no other input
/// can be fed until it is gone.
///
/// ```
/// use coxswain_core::{Effect, Machine, Message, Request};
///
/// let mut machine = Machine::new();
/// let mut log = Vec::new();
/// let transition = machine.followup(Message::user("m1", "hello"))?;
/// log.extend_from_slice(transition.events()); // 1. persist: splice, turn/start, claim splice
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
    queue: &'m mut Queue,
}

impl<'m> Transition<'m> {
    pub(crate) fn new(queue: &'m mut Queue) -> Self {
        Transition { queue }
    }

    /// The durable events, in order: append them to the log as one batch before
    /// [`persisted`](Transition::persisted).
    #[inline]
    pub fn events(&self) -> &[Event] {
        &self.queue.events
    }

    /// Whether the input produced no output at all.
    ///
    /// ```
    /// use coxswain_core::{Input, Machine, MessageId};
    ///
    /// let mut machine = Machine::new();
    /// // A remove of an id that is not pending, as a value: nothing to persist, nothing to do.
    /// let removal = machine.handle(Input::Remove(MessageId::new("absent")))?;
    /// assert!(removal.is_empty());
    /// # Ok::<(), coxswain_core::Rejected>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// The host's word that the events are durable: releases the effects, in order. Effects
    /// left unread when the iterator is dropped stay queued for
    /// [`Machine::drain`](crate::Machine::drain).
    #[inline]
    pub fn persisted(self) -> Effects<'m> {
        self.queue.persist();
        Effects { queue: self.queue }
    }

    /// The effects [`persisted`](Transition::persisted) will release, in order, read without
    /// releasing them: they stay queued, and the machine still refuses the next input until
    /// the transition is drained. For a binding that hands a whole transition to another
    /// language in one crossing and gives the effects out only on its caller's persisted word
    /// (which it passes on to [`persisted`](Transition::persisted) before the next input).
    ///
    /// ```
    /// use coxswain_core::{Effect, Machine, Message, Rejected};
    ///
    /// let mut machine = Machine::new();
    /// let transition = machine.followup(Message::user("m1", "hi"))?;
    /// let seen: Vec<Effect> = transition.effects().cloned().collect();
    /// drop(transition);
    /// assert_eq!(machine.steer(Message::user("m2", "hi")).err(), Some(Rejected::Undrained));
    /// assert_eq!(machine.drain().persisted().collect::<Vec<_>>(), seen);
    /// # Ok::<(), Rejected>(())
    /// ```
    pub fn effects(&self) -> impl ExactSizeIterator<Item = &Effect> + '_ {
        self.queue.effects.iter().map(|(_, effect)| effect)
    }

    /// Persists the events into an in-memory log (durable once extended, for tests and
    /// collecting hosts) and releases the effects: `events` then `persisted` in one
    /// ([example](crate::Event#examples)).
    pub fn persist_into(self, log: &mut impl Extend<Event>) -> Effects<'m> {
        // The events leave the queue for the log: moved, not cloned (`persisted` clears them).
        log.extend(self.queue.events.drain(..));
        self.persisted()
    }

    /// Every output in emission order, events included, in the wire vocabulary of the trace
    /// format: for recorders, replayers and ports, which persist nothing. Hosts use
    /// [`events`](Transition::events) and [`persisted`](Transition::persisted)
    /// ([example](crate::Output#examples)).
    pub fn into_outputs(self) -> Outputs<'m> {
        Outputs::new(self.queue, false)
    }

    /// [`into_outputs`](Transition::into_outputs) with each [`Effect::Begin`] where its
    /// activity begins (right after a turn's `turn/start`, first for a maintenance job): the
    /// wire order for a host that reads it and scopes its cancellation by activity. FORMAT.md's
    /// traces hold no `Begin`; this view is not a trace's.
    ///
    /// ```
    /// use coxswain_core::{Activity, Effect, Event, Machine, Message, Output};
    ///
    /// let mut machine = Machine::new();
    /// let outputs: Vec<Output> =
    ///     machine.followup(Message::user("m1", "hi"))?.into_outputs_with_begin().collect();
    /// let start = outputs
    ///     .iter()
    ///     .position(|output| *output == Output::Event(Event::TurnStart { turn: 1 }))
    ///     .unwrap();
    /// assert_eq!(outputs[start + 1], Output::Effect(Effect::Begin(Activity::Turn(1))));
    /// # Ok::<(), coxswain_core::Rejected>(())
    /// ```
    pub fn into_outputs_with_begin(self) -> Outputs<'m> {
        Outputs::new(self.queue, true)
    }
}

/// The effects of a persisted [`Transition`], in order. Effects left unread when it is dropped
/// stay queued for [`Machine::drain`](crate::Machine::drain).
///
/// # Examples
///
/// ```
/// use coxswain_core::{Effect, Machine, Message, Rejected};
///
/// let mut machine = Machine::new();
/// let mut effects = machine.followup(Message::user("m1", "hi"))?.persisted();
/// let pending = effects.len();
/// let first: Option<Effect> = effects.next();
/// drop(effects); // the rest stay queued: the next input is refused until they are drained
/// assert_eq!(machine.steer(Message::user("m2", "hi")).err(), Some(Rejected::Undrained));
/// assert_eq!(machine.drain().persisted().len(), pending - 1);
/// assert!(first.is_some());
/// # Ok::<(), Rejected>(())
/// ```
#[derive(Debug)]
pub struct Effects<'m> {
    queue: &'m mut Queue,
}

impl Iterator for Effects<'_> {
    type Item = Effect;

    #[inline]
    fn next(&mut self) -> Option<Effect> {
        self.queue.effects.pop_front().map(|(_, effect)| effect)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.queue.effects.len(), Some(self.queue.effects.len()))
    }
}

impl ExactSizeIterator for Effects<'_> {}

/// Every output of a [`Transition`] in emission order (see
/// [`Transition::into_outputs`]; [example](crate::Output#examples)).
#[derive(Debug)]
pub struct Outputs<'m> {
    queue: &'m mut Queue,
    /// Events handed out so far.
    read: usize,
    /// Whether each [`Effect::Begin`] is handed out too (else skipped, as the wire order has it).
    begin: bool,
}

impl<'m> Outputs<'m> {
    fn new(queue: &'m mut Queue, begin: bool) -> Self {
        // Events are taken from the back of the reversed batch, in emission order.
        queue.events.reverse();
        Outputs {
            queue,
            read: 0,
            begin,
        }
    }
}

impl Iterator for Outputs<'_> {
    type Item = Output;

    fn next(&mut self) -> Option<Output> {
        loop {
            let event_first = match self.queue.effects.front() {
                Some((before, _)) => *before > self.read,
                None => true,
            };
            if event_first {
                if let Some(event) = self.queue.events.pop() {
                    self.read += 1;
                    return Some(Output::Event(event));
                }
            }
            let (_, effect) = self.queue.effects.pop_front()?;
            if self.begin {
                return Some(Output::Effect(effect));
            }
            if let Some(output) = Option::<Output>::from(effect) {
                return Some(output);
            }
        }
    }
}

impl Drop for Outputs<'_> {
    /// What was not read stays queued, in order.
    fn drop(&mut self) {
        self.queue.events.reverse();
        for (before, _) in &mut self.queue.effects {
            *before = before.saturating_sub(self.read);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_empty_only_without_events_and_without_effects() {
        let mut queue = Queue::default();
        assert!(queue.is_empty());
        queue.event(Event::TurnStart { turn: 1 });
        assert!(!queue.is_empty(), "an event alone");
        let mut queue = Queue::default();
        queue.notify(Notification::Status {
            status: crate::output::Status::Idle,
        });
        assert!(!queue.is_empty(), "an effect alone");
    }

    /// The wire order with `Begin`: each activity's begin right after its `turn/start` (a turn)
    /// or first (a maintenance job), every other output where `into_outputs` has it.
    #[test]
    fn the_wire_order_with_begin_puts_each_begin_where_its_activity_begins() {
        use crate::{Activity, Input, Machine, MaintenanceInput, Message, Request, Status};
        let message = Message::user("m1", "hi");
        let mut machine = Machine::new();
        let plain: Vec<Output> = machine
            .followup(message.clone())
            .unwrap()
            .into_outputs()
            .collect();
        let mut again = Machine::new();
        let with: Vec<Output> = again
            .followup(message.clone())
            .unwrap()
            .into_outputs_with_begin()
            .collect();
        let begin = Output::Effect(Effect::Begin(Activity::Turn(1)));
        let mut expected = plain.clone();
        let start = plain
            .iter()
            .position(|output| *output == Output::Event(Event::TurnStart { turn: 1 }))
            .unwrap();
        expected.insert(start + 1, begin);
        assert_eq!(with, expected);
        assert_eq!(with.len(), 8);
        assert_eq!(
            with[2],
            Output::Effect(Effect::Notify(Notification::Status {
                status: Status::Running
            }))
        );
        assert!(matches!(
            with[7],
            Output::Effect(Effect::Request(Request::PreStep { turn: 1, .. }))
        ));
        // A maintenance job begins first; a drained transition's view is the same.
        let mut idle = Machine::new();
        drop(
            idle.handle(Input::Maintenance(MaintenanceInput::Begin))
                .unwrap(),
        );
        let drained: Vec<Output> = idle.drain().into_outputs_with_begin().collect();
        assert_eq!(
            drained,
            vec![Output::Effect(Effect::Begin(Activity::Maintenance))]
        );
        assert!(idle.drain().into_outputs_with_begin().next().is_none());
    }
}
