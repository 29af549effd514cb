//! The inputs, one method each (S4, S13–S56): each checks, applies and returns its transition; `handle` takes one as a value.

use super::*;

impl Machine {
    /// Applies one input given as a value, through the same method as a direct call: the entry
    /// for inputs as data (replayers, bindings, the session layer). A `remove` or `replace` of
    /// an id that is not pending is an empty transition here ([`remove`](Machine::remove) says
    /// `None`).
    ///
    /// # Errors
    ///
    /// The rejection of the input's own method (S5).
    pub fn handle(&mut self, input: Input) -> Result<Transition<'_>, Rejected> {
        match input {
            Input::Send {
                message,
                target,
                wakeup,
                expect,
            } => self.send(message, target, wakeup, expect),
            Input::Followup(message) => self.followup(message),
            Input::Steer(message) => self.steer(message),
            Input::Inject(message) => self.inject(message),
            // Total: a remove or replace of an id that is not pending is an empty transition.
            Input::Remove(id) => self.apply(|machine| machine.on_remove(&id).map(drop)),
            Input::Replace { id, message } => {
                self.apply(|machine| machine.on_replace(&id, message).map(drop))
            }
            Input::Prepend { target, message } => self.prepend(target, message),
            Input::Clear {} => self.clear(),
            Input::Cancel { cause, keep_inbox } => self.cancel(cause, keep_inbox),
            Input::Maintenance(MaintenanceInput::Begin) => self.begin_maintenance(),
            Input::Maintenance(MaintenanceInput::End) => self.end_maintenance(),
            Input::Dispose {} => self.dispose(),
            Input::Resume {} => self.resume(),
            Input::PreStep(answer) => self.answer_pre_step(answer),
            Input::Step(answer) => self.answer_step(answer),
            Input::TurnStopping(answer) => self.answer_turn_stopping(answer),
        }
    }

    /// `send(message, target, wakeup, expect)` (S16–S21, S54), the delivery primitive
    /// ([`followup`](Machine::followup), [`steer`](Machine::steer) and
    /// [`inject`](Machine::inject) are its presets): append the message to the end of
    /// `target` (or of NT, for a waking send after a cancel, S18); a waking send then wakes
    /// (S24). With an [`Expect`] guard it is accepted only while the guard holds.
    ///
    /// # Errors
    ///
    /// In this order (S54): [`Rejected::AfterDisposal`] once the machine is disposed (S45);
    /// [`Rejected::AlreadyPending`] if the message's id is pending (S13),
    /// [`Rejected::AlreadyDelivered`] if the delivery memory holds it (S52), either of them
    /// [`Rejected::Conflict`] when that id belongs to a different message (S56);
    /// [`Rejected::TurnMismatch`] if the guard does not hold (S54); [`Rejected::Full`] if the
    /// resolved list holds the admission bound's number of items (S55).
    /// [`Rejected::Undrained`] while a dropped transition's outputs wait for
    /// [`drain`](Machine::drain).
    pub fn send(
        &mut self,
        message: impl Into<SharedMessage>,
        target: Target,
        wakeup: bool,
        expect: Option<Expect>,
    ) -> Result<Transition<'_>, Rejected> {
        let message = message.into();
        self.apply(|machine| machine.on_send(message, target, wakeup, expect))
    }

    /// `followup(m) = send(m, next-turn, true)`: a turn of its own (S22).
    ///
    /// # Errors
    ///
    /// In this order (S54): [`Rejected::AfterDisposal`] once the machine is disposed (S45);
    /// [`Rejected::AlreadyPending`] if the message's id is pending (S13),
    /// [`Rejected::AlreadyDelivered`] if the delivery memory holds it (S52), either of them
    /// [`Rejected::Conflict`] when that id belongs to a different message (S56);
    /// [`Rejected::Full`] if the list it joins holds the admission bound's number of items
    /// (S55). [`Rejected::Undrained`] while a dropped transition's outputs wait for
    /// [`drain`](Machine::drain).
    pub fn followup(
        &mut self,
        message: impl Into<SharedMessage>,
    ) -> Result<Transition<'_>, Rejected> {
        self.send_preset(Preset::Followup, message)
    }

    /// `steer(m) = send(m, next-step, true)`: joins the running turn at its next boundary.
    ///
    /// # Errors
    ///
    /// In this order (S54): [`Rejected::AfterDisposal`] once the machine is disposed (S45);
    /// [`Rejected::AlreadyPending`] if the message's id is pending (S13),
    /// [`Rejected::AlreadyDelivered`] if the delivery memory holds it (S52), either of them
    /// [`Rejected::Conflict`] when that id belongs to a different message (S56);
    /// [`Rejected::Full`] if the list it joins holds the admission bound's number of items
    /// (S55). [`Rejected::Undrained`] while a dropped transition's outputs wait for
    /// [`drain`](Machine::drain).
    pub fn steer(&mut self, message: impl Into<SharedMessage>) -> Result<Transition<'_>, Rejected> {
        self.send_preset(Preset::Steer, message)
    }

    /// `inject(m) = send(m, next-step, false)`: context that rides along, never wakes (S20).
    ///
    /// # Errors
    ///
    /// In this order (S54): [`Rejected::AfterDisposal`] once the machine is disposed (S45);
    /// [`Rejected::AlreadyPending`] if the message's id is pending (S13),
    /// [`Rejected::AlreadyDelivered`] if the delivery memory holds it (S52), either of them
    /// [`Rejected::Conflict`] when that id belongs to a different message (S56);
    /// [`Rejected::Full`] if the list it joins holds the admission bound's number of items
    /// (S55). [`Rejected::Undrained`] while a dropped transition's outputs wait for
    /// [`drain`](Machine::drain).
    pub fn inject(
        &mut self,
        message: impl Into<SharedMessage>,
    ) -> Result<Transition<'_>, Rejected> {
        self.send_preset(Preset::Inject, message)
    }

    /// `remove(id)` (S15): discard a pending message. `None` if it is not pending: nothing
    /// changed and nothing was emitted ([`handle`](Machine::handle) gives an empty transition
    /// instead).
    ///
    /// # Errors
    ///
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    ///
    /// # Examples
    ///
    /// ```
    /// use coxswain_core::{Machine, Message, MessageId};
    ///
    /// let mut machine = Machine::new();
    /// assert!(machine.remove(&MessageId::new("absent"))?.is_none()); // nothing to persist or do
    /// machine.inject(Message::user("c1", "notes"))?.persisted().for_each(drop);
    /// let removal = machine.remove(&MessageId::new("c1"))?.expect("c1 is pending");
    /// assert_eq!(removal.events().len(), 1); // the splice that discards it
    /// # Ok::<(), coxswain_core::Rejected>(())
    /// ```
    pub fn remove(&mut self, id: &MessageId) -> Result<Option<Transition<'_>>, Rejected> {
        self.apply_edit(|machine| machine.on_remove(id))
    }

    /// `replace(id, message)` (S15): swap a pending message in place; the replacement inherits its
    /// waking flag. `None` if `id` is not pending: nothing changed and nothing was emitted
    /// ([example](Machine#the-pending-lists)); rejected if the new id is pending elsewhere.
    ///
    /// # Errors
    ///
    /// If `id` is pending: [`Rejected::AlreadyPending`] if the replacement's (different) id is
    /// pending, [`Rejected::AlreadyDelivered`] if the delivery memory holds it (S52), either of
    /// them [`Rejected::Conflict`] when that id belongs to a different message (S56); never
    /// [`Rejected::Full`] (a replace keeps the list's length, S55). Always:
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    pub fn replace(
        &mut self,
        id: &MessageId,
        message: impl Into<SharedMessage>,
    ) -> Result<Option<Transition<'_>>, Rejected> {
        let message = message.into();
        self.apply_edit(|machine| machine.on_replace(id, message))
    }

    /// The send a preset names (S20–S22): its target and wakeup, no guard.
    fn send_preset(
        &mut self,
        preset: Preset,
        message: impl Into<SharedMessage>,
    ) -> Result<Transition<'_>, Rejected> {
        self.send(message, preset.target(), preset.wakeup(), None)
    }

    /// `prepend(target, message)` (S15): put a quiet message first in `target`.
    ///
    /// # Errors
    ///
    /// In this order (S54): [`Rejected::AfterDisposal`] once the machine is disposed (S45);
    /// [`Rejected::AlreadyPending`] if the message's id is pending (S13),
    /// [`Rejected::AlreadyDelivered`] if the delivery memory holds it (S52), either of them
    /// [`Rejected::Conflict`] when that id belongs to a different message (S56);
    /// [`Rejected::Full`] if the list it joins holds the admission bound's number of items
    /// (S55). [`Rejected::Undrained`] while a dropped transition's outputs wait for
    /// [`drain`](Machine::drain).
    pub fn prepend(
        &mut self,
        target: Target,
        message: impl Into<SharedMessage>,
    ) -> Result<Transition<'_>, Rejected> {
        let message = message.into();
        self.apply(|machine| {
            machine.check_new_message(&message)?;
            machine.check_room(target)?;
            machine.inbox.prepend(target, message, &mut machine.queue);
            Ok(())
        })
    }

    /// `clear()` (S15): discard everything pending, NS first. Touches neither phase nor latch.
    ///
    /// # Errors
    ///
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    pub fn clear(&mut self) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| {
            machine.inbox.clear(&mut machine.queue);
            Ok(())
        })
    }

    /// `cancel(cause, { keepInbox })` (S39): without `keep_inbox`, clear both lists (and the
    /// current activity's latch); then, if an activity runs, request its cancellation (the first
    /// cause wins) and, on its first cancel only, emit `abort`.
    ///
    /// # Errors
    ///
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    pub fn cancel(
        &mut self,
        cause: CancelCause,
        keep_inbox: bool,
    ) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| {
            machine.apply_cancel(cause, keep_inbox);
            Ok(())
        })
    }

    /// `dispose()` (S45): `cancel(disposed)` without `keepInbox`, then disposing until quiescent;
    /// `disposed` is the last output of the input that makes the machine quiescent.
    ///
    /// # Errors
    ///
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    pub fn dispose(&mut self) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| {
            machine.on_dispose();
            Ok(())
        })
    }

    /// `resume()` (S57): start parked waking work. When the machine is idle and waking work is
    /// pending (S19), it wakes exactly as a waking send would (S24: `status running`,
    /// `turn/start`, the claim, the pre-step request, in one transition). Otherwise it emits
    /// nothing and changes nothing: it never sets the wake latch and never touches the lists.
    /// A host sends it after restoring a log (S48), after taking a session over, or after a
    /// `keepInbox` cancel.
    ///
    /// # Errors
    ///
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    ///
    /// # Examples
    ///
    /// ```
    /// use coxswain_core::{Event, Machine, Message, Status};
    ///
    /// let mut live = Machine::new();
    /// let mut log: Vec<Event> = Vec::new();
    /// live.begin_maintenance()?.persisted().for_each(drop);
    /// live.followup(Message::user("m1", "hi"))?.persist_into(&mut log).for_each(drop);
    /// let mut restored = Machine::restore_events(&log, 0).expect("a valid log");
    /// assert_eq!(restored.status(), Status::Idle); // parked (S48)
    /// let resumed = restored.resume()?;
    /// let turn: Vec<String> = resumed.events().iter().map(|e| e.kind().to_owned()).collect();
    /// assert_eq!(turn, ["turn/start", "agent/inbox/spliced"]);
    /// resumed.persisted().for_each(drop);
    /// assert_eq!(restored.status(), Status::Running);
    /// assert!(restored.resume()?.is_empty()); // running: nothing, and no latch
    /// assert!(!restored.is_wake_latched());
    /// # Ok::<(), coxswain_core::Rejected>(())
    /// ```
    pub fn resume(&mut self) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| {
            machine.on_resume();
            Ok(())
        })
    }

    /// `beginMaintenance()` (S43): only while idle; status stays `idle`. Its one effect is
    /// [`Effect::Begin`]`(Maintenance)`; nothing goes on the wire.
    ///
    /// # Errors
    ///
    /// [`Rejected::Busy`] unless idle (S43), [`Rejected::AfterDisposal`] once the machine is
    /// disposed (S45), [`Rejected::Undrained`] while a dropped transition's outputs wait for
    /// [`drain`](Machine::drain).
    pub fn begin_maintenance(&mut self) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| {
            if !matches!(machine.phase, Phase::Idle) {
                return Err(Rejected::Busy);
            }
            machine.phase = Phase::Maintenance(Activity::default());
            machine.queue.effect(Effect::Begin(ActivityId::Maintenance));
            Ok(())
        })
    }

    /// `endMaintenance()` (S43): back to idle, then replay the latch (S25) or finish disposal.
    ///
    /// # Errors
    ///
    /// [`Rejected::UnexpectedCompletion`] unless a maintenance job is active (S43),
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    pub fn end_maintenance(&mut self) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| {
            let Phase::Maintenance(activity) = &machine.phase else {
                return Err(machine.unexpected(Completion::EndMaintenance));
            };
            let activity = activity.clone();
            machine.phase = Phase::Idle;
            machine.activity_ended(activity);
            Ok(())
        })
    }

    /// Answers the outstanding `preStep` request (S29, S30).
    ///
    /// # Errors
    ///
    /// [`Rejected::UnexpectedCompletion`] unless this request is outstanding (S4),
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    pub fn answer_pre_step(&mut self, answer: PreStepAnswer) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| machine.on_pre_step(answer))
    }

    /// Answers the outstanding `step` request (S32, S33): `step/end` first, always.
    ///
    /// # Errors
    ///
    /// [`Rejected::UnexpectedCompletion`] unless this request is outstanding (S4),
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    pub fn answer_step(&mut self, answer: StepAnswer) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| machine.on_step(answer))
    }

    /// Answers the outstanding `turnStopping` request (S33).
    ///
    /// # Errors
    ///
    /// [`Rejected::UnexpectedCompletion`] unless this request is outstanding (S4),
    /// [`Rejected::AfterDisposal`] once the machine is disposed (S45), [`Rejected::Undrained`]
    /// while a dropped transition's outputs wait for [`drain`](Machine::drain).
    pub fn answer_turn_stopping(
        &mut self,
        answer: TurnStoppingAnswer,
    ) -> Result<Transition<'_>, Rejected> {
        self.apply(|machine| machine.on_turn_stopping(answer))
    }
}
