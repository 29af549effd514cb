//! Batches (group commit): open, seal, roll back, the journal of what a rolled-back batch puts back.

use super::*;

impl Machine {
    /// Opens a batch: the inputs fed from now on can be taken back together with
    /// [`roll_back_batch`](Machine::roll_back_batch), as if none had been fed, when the host
    /// fails to persist their events (a group commit that failed: S5 extended to persistence);
    /// [`commit_batch`](Machine::commit_batch) keeps them once they are durable. Each input is
    /// still persisted and drained as usual; a batch only changes what can be undone. The cost
    /// is proportional to what the batch changes, not to the machine's size.
    ///
    /// # Errors
    ///
    /// [`BatchError::AlreadyOpen`] while a batch is open; [`BatchError::Undrained`] while a
    /// dropped transition's outputs wait for [`drain`](Machine::drain).
    ///
    /// # Examples
    ///
    /// ```
    /// use coxswain_core::{BatchError, Machine, Message};
    ///
    /// let mut machine = Machine::new();
    /// let before = machine.clone();
    /// machine.begin_batch()?;
    /// assert!(machine.is_batch_open());
    /// assert_eq!(machine.begin_batch(), Err(BatchError::AlreadyOpen));
    /// let events = machine.followup(Message::user("m1", "hi"))?.events().to_vec();
    /// machine.drain().persisted().for_each(drop); // the host holds the effects back
    /// assert_eq!(events.len(), 3);
    /// // The append of `events` failed: take the batch back.
    /// machine.roll_back_batch()?;
    /// assert_eq!(machine, before);
    /// assert_eq!(machine.last_turn(), 0);
    ///
    /// // Fed again and appended: keep it.
    /// machine.begin_batch()?;
    /// machine.followup(Message::user("m1", "hi"))?.persisted().for_each(drop);
    /// machine.commit_batch()?;
    /// assert_eq!((machine.last_turn(), machine.is_batch_open()), (1, false));
    /// assert_eq!(machine.commit_batch(), Err(BatchError::NotOpen));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn begin_batch(&mut self) -> Result<(), BatchError> {
        if self.is_batch_open() {
            return Err(BatchError::AlreadyOpen);
        }
        if !self.queue.is_empty() {
            return Err(BatchError::Undrained);
        }
        let (phase, last_turn) = (self.phase.clone(), self.last_turn);
        let before = self.before_mut();
        (before.open, before.phase, before.last_turn) = (true, phase, last_turn);
        self.inbox.begin_batch();
        Ok(())
    }

    /// Closes the open batch and keeps its inputs: their events are durable
    /// ([example](Machine::begin_batch)).
    ///
    /// # Errors
    ///
    /// [`BatchError::NotOpen`] without an open batch.
    pub fn commit_batch(&mut self) -> Result<(), BatchError> {
        let Some(before) = self.open_batch() else {
            return Err(BatchError::NotOpen);
        };
        before.open = false;
        self.inbox.commit_batch();
        Ok(())
    }

    /// Closes the open batch and takes back every input accepted since it was opened: the
    /// machine equals what it was before the batch (lists, delivery memory, phase, turn number),
    /// and outputs still queued are dropped. The host must not carry out the effects it held for
    /// the batch; it answers each of its inputs with the persistence failure instead
    /// ([example](Machine::begin_batch)).
    ///
    /// # Errors
    ///
    /// [`BatchError::NotOpen`] without an open batch.
    pub fn roll_back_batch(&mut self) -> Result<(), BatchError> {
        let Some(before) = self.open_batch() else {
            return Err(BatchError::NotOpen);
        };
        before.open = false;
        let (phase, last_turn) = (before.phase.clone(), before.last_turn);
        self.inbox.roll_back_batch();
        self.phase = phase;
        self.last_turn = last_turn;
        self.queue.clear_all();
        Ok(())
    }

    /// Whether a batch is open ([example](Machine::begin_batch)).
    pub fn is_batch_open(&self) -> bool {
        self.inbox.batch_state().is_some_and(|before| before.open)
    }

    fn open_batch(&mut self) -> Option<&mut Before> {
        self.inbox.batch_state_mut().filter(|before| before.open)
    }

    /// The batch bookkeeping, allocated (closed, explicit) at its first use.
    fn before_mut(&mut self) -> &mut Before {
        self.inbox.batch_state_or_default()
    }

    /// Turns implicit batches on or off. While on, every input the machine accepts commits the
    /// open batch (the previous input's: the host's next input is its word that those events
    /// are durable) and opens a batch of its own, so
    /// [`roll_back_batch`](Machine::roll_back_batch) takes back the last accepted input, and
    /// only it: the machine equals what it was before that input (S5 extended to a failed
    /// append), outputs still queued are dropped, and the inputs before it stay. A host that
    /// appends each input's events to its own log can so undo a failed append with no
    /// `begin_batch`/`commit_batch` around every input.
    ///
    /// The exact rules:
    /// * The batch turns over when an input is *accepted* (a `remove` or `replace` of an id
    ///   that is not pending too: its batch is empty). A rejected input changes nothing, the
    ///   open batch included (S5): a rollback after it still takes back the input before.
    /// * The batch stays open after the transition is drained or persisted, until the next
    ///   accepted input, [`commit_batch`](Machine::commit_batch) (the last input is durable: no
    ///   batch is open until the next input) or `roll_back_batch` (no batch is open until the
    ///   next input: a second rollback is [`BatchError::NotOpen`]).
    /// * An accepted input commits whatever batch is open, one opened by
    ///   [`begin_batch`](Machine::begin_batch) too: in this mode a batch spans one input.
    /// * Turning the mode off leaves the last input's batch open as an ordinary batch: the host
    ///   closes it with `commit_batch` or `roll_back_batch`.
    ///
    /// Off (the default) costs nothing: no input journals. On, an input costs the journal of
    /// what it changes, as it would inside an explicit batch. The mode is part of `==`, not of
    /// [`behaviour`](Machine::behaviour) (no output depends on it).
    ///
    /// # Errors
    ///
    /// [`BatchError::AlreadyOpen`] when turning it on while a batch opened by `begin_batch` is
    /// open (its inputs would be committed by the next one): close it first. Turning it on
    /// when on, or off when off, does nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use coxswain_core::{BatchError, Effect, Machine, Message, PreStepAnswer, Request};
    ///
    /// let mut machine = Machine::new();
    /// machine.set_implicit_batches(true)?;
    /// assert!(machine.is_implicit_batches());
    /// assert!(!machine.is_batch_open()); // the first input opens the first batch
    /// let mut claimed = None;
    /// for effect in machine.followup(Message::user("m1", "hi"))?.persisted() {
    ///     if let Effect::Request(Request::PreStep { messages, .. }) = effect {
    ///         claimed = Some(messages);
    ///     }
    /// }
    /// assert!(machine.is_batch_open()); // the follow-up's, until the next input
    /// let before = machine.clone();
    /// let enter = PreStepAnswer::Enter(claimed.unwrap_or_default());
    /// machine.answer_pre_step(enter)?.persisted().for_each(drop); // commits the follow-up
    /// // The append of the pre-step answer's events failed: take it back, and only it.
    /// machine.roll_back_batch()?;
    /// assert_eq!(machine.behaviour(), before.behaviour()); // as before the answer
    /// assert_eq!(machine.roll_back_batch(), Err(BatchError::NotOpen)); // the follow-up stays
    /// assert_eq!(machine.last_turn(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_implicit_batches(&mut self, on: bool) -> Result<(), BatchError> {
        if on == self.is_implicit_batches() {
            return Ok(());
        }
        if on && self.is_batch_open() {
            return Err(BatchError::AlreadyOpen);
        }
        self.before_mut().implicit = on;
        Ok(())
    }

    /// Whether implicit batches are on ([example](Machine::set_implicit_batches)).
    pub fn is_implicit_batches(&self) -> bool {
        self.inbox
            .batch_state()
            .is_some_and(|before| before.implicit)
    }

    /// An input's start in implicit-batch mode (from [`frame`](Machine::frame), after its
    /// checks): what [`implicit_end`](Machine::implicit_end) needs to turn the batch over. Not
    /// generic, and apart from the input's step, so `frame` calls the step at one place only
    /// (which keeps every input's step inlined).
    pub(super) fn implicit_start(&mut self) -> ImplicitStart {
        ImplicitStart {
            was_open: self.is_batch_open(),
            phase: self.phase.clone(),
            last_turn: self.last_turn,
            mark: self.inbox.journal_mark(),
        }
    }

    /// An input's end in implicit-batch mode: accepted, it commits the open batch and opens its
    /// own on the state before it; rejected, it leaves the open batch as it was (S5: nothing
    /// journaled, nothing changed).
    pub(super) fn implicit_end(&mut self, start: ImplicitStart, accepted: bool) {
        if accepted {
            self.inbox.commit_first(start.mark);
            let before = self.before_mut();
            (before.open, before.phase, before.last_turn) = (true, start.phase, start.last_turn);
        } else if !start.was_open {
            // Opened for this input, which journaled nothing: closed again.
            self.inbox.commit_batch();
        }
    }
}

/// The state an implicit batch's input started from ([`Machine::implicit_start`]).
pub(super) struct ImplicitStart {
    was_open: bool,
    phase: Phase,
    last_turn: u64,
    mark: usize,
}

#[cfg(test)]
mod tests {
    //! Implicit batches ([`Machine::set_implicit_batches`]): a rollback takes back the last
    //! accepted input exactly (S5 extended to a failed append), a rejected input leaves the open
    //! batch as it was (S5), and the mode changes no output. The explicit batches' tests (the
    //! doc example of `begin_batch`, s13.rs, tests/src/rollback.rs) are the model.

    use std::sync::Arc;

    use crate::input::{CancelCause, Input, MaintenanceInput, PreStepAnswer, StepAnswer};
    use crate::input::{Target, TurnStoppingAnswer};
    use crate::message::{Message, MessageId, SharedMessage};
    use crate::output::Output;
    use crate::{BatchError, Config, Machine, Rejected};

    fn user(id: &str) -> SharedMessage {
        Arc::new(Message::user(id, id))
    }

    fn enter(ids: &[&str]) -> Input {
        Input::PreStep(PreStepAnswer::Enter(
            ids.iter().map(|id| user(id)).collect(),
        ))
    }

    /// Feeds `input`: its outputs (drained: the host persisted and carried them out), or the
    /// rejection's kind.
    fn feed(machine: &mut Machine, input: Input) -> Result<Vec<Output>, &'static str> {
        let outputs = match input {
            Input::Remove(id) => machine.remove(&id).map(|t| t.map(|t| t.into_outputs())),
            Input::Replace { id, message } => machine
                .replace(&id, message)
                .map(|t| t.map(|t| t.into_outputs())),
            input => machine.handle(input).map(|t| Some(t.into_outputs())),
        };
        match outputs {
            Ok(outputs) => Ok(outputs.into_iter().flatten().collect()),
            Err(rejected) => Err(rejected.kind()),
        }
    }

    /// Every kind of input, accepted and rejected: lists, turns, steps, a latched wake, cancel,
    /// maintenance, disposal.
    fn script() -> Vec<Input> {
        let id = MessageId::new;
        vec![
            Input::Inject(user("c1")),
            Input::Step(StepAnswer::Completed), // rejected: nothing is outstanding (S4)
            Input::Prepend {
                target: Target::NextStep,
                message: user("c0"),
            },
            Input::Followup(user("m1")), // turn 1
            Input::Followup(user("m1")), // rejected: m1 was claimed (S52)
            enter(&["c0", "c1", "m1"]),
            Input::Steer(user("s1")),
            Input::Inject(user("c2")),
            Input::Replace {
                id: id("c2"),
                message: user("c3"),
            },
            Input::Remove(id("nobody")), // accepted, found nothing (S15)
            Input::Step(StepAnswer::Continue),
            enter(&["s1", "c3"]),
            Input::Step(StepAnswer::MaxTokens), // turnStopping
            Input::Cancel {
                cause: CancelCause::User,
                keep_inbox: false,
            },
            Input::Followup(user("m2")),        // latched (S24)
            Input::Step(StepAnswer::Completed), // rejected: turnStopping is outstanding
            Input::TurnStopping(TurnStoppingAnswer::Done), // turn 1 ends, turn 2 opens
            enter(&["m2"]),
            Input::Step(StepAnswer::Completed),
            Input::TurnStopping(TurnStoppingAnswer::Done),
            Input::Inject(user("c4")),
            Input::Clear {},
            Input::Maintenance(MaintenanceInput::Begin),
            Input::Followup(user("m3")),
            Input::Maintenance(MaintenanceInput::End), // m3's turn
            Input::Dispose {},
            Input::PreStep(PreStepAnswer::Reject),
            Input::Followup(user("m4")), // rejected: disposed (S45)
        ]
    }

    #[test]
    fn s5_an_implicit_rollback_takes_back_the_last_input_exactly() {
        let config = Config::new().with_delivery_memory(2);
        let mut machine = Machine::with_config(config);
        machine.set_implicit_batches(true).unwrap();
        let mut plain = Machine::with_config(config);
        let (mut accepted, mut rejected) = (0, 0);
        for (k, input) in script().into_iter().enumerate() {
            let before = machine.clone();
            let first = feed(&mut machine, input.clone());
            // The mode changes no output and no rejection.
            assert_eq!(first, feed(&mut plain, input.clone()), "input {k}");
            if first.is_err() {
                rejected += 1;
                assert_eq!(
                    machine, before,
                    "input {k}: a rejection changes nothing (S5)"
                );
                continue;
            }
            accepted += 1;
            assert!(machine.is_batch_open(), "input {k}");
            assert_eq!(machine.roll_back_batch(), Ok(()), "input {k}");
            let mut rolled_back = before.clone();
            if rolled_back.is_batch_open() {
                // The rollback closed the batch the previous input left open: that input stays.
                rolled_back.commit_batch().unwrap();
            }
            assert_eq!(machine, rolled_back, "input {k}: as before it (S5)");
            assert_eq!(machine.roll_back_batch(), Err(BatchError::NotOpen));
            assert!(machine.is_implicit_batches());
            // Fed again, the same outputs, and the machine it made the first time.
            assert_eq!(feed(&mut machine, input), first, "input {k} again");
            assert_eq!(machine.behaviour(), plain.behaviour(), "input {k}");
        }
        assert_eq!((accepted, rejected), (24, 4));
        assert!(machine.is_disposed());
    }

    #[test]
    fn s5_a_rejected_input_leaves_the_implicit_batch_on_the_input_before() {
        let mut machine = Machine::new();
        machine.set_implicit_batches(true).unwrap();
        feed(&mut machine, Input::Inject(user("c1"))).unwrap();
        let before_c2 = machine.clone();
        feed(&mut machine, Input::Inject(user("c2"))).unwrap();
        let after_c2 = machine.clone();
        assert_eq!(
            feed(&mut machine, Input::Inject(user("c2"))),
            Err("already-pending")
        );
        assert_eq!(
            feed(&mut machine, Input::Step(StepAnswer::Completed)),
            Err("unexpected-completion")
        );
        assert_eq!(machine, after_c2);
        // A transition dropped undrained: the next input is refused, the batch kept.
        drop(machine.inject(user("c3")).unwrap());
        assert_eq!(machine.inject(user("c4")).err(), Some(Rejected::Undrained));
        machine.roll_back_batch().unwrap(); // c3's, its queued outputs dropped
        assert_eq!(machine, {
            let mut kept = after_c2.clone();
            kept.commit_batch().unwrap();
            kept
        });
        assert!(machine.drain().is_empty());
        // After a rejection with no batch open, still none is open.
        assert_eq!(
            feed(&mut machine, Input::Inject(user("c2"))),
            Err("already-pending")
        );
        assert!(!machine.is_batch_open());
        // And the next accepted input opens one again, on the state before it.
        let before_c5 = machine.clone();
        feed(&mut machine, Input::Inject(user("c5"))).unwrap();
        machine.roll_back_batch().unwrap();
        assert_eq!(machine, before_c5);
        let ns: Vec<String> = machine
            .pending(Target::NextStep)
            .map(|p| p.message().id().as_str().to_owned())
            .collect();
        assert_eq!(ns, ["c1", "c2"]);
        assert_ne!(machine, before_c2);
    }

    #[test]
    fn implicit_batches_span_one_input_and_turn_off_into_an_ordinary_batch() {
        let mut machine = Machine::new();
        assert!(!machine.is_implicit_batches());
        machine.begin_batch().unwrap();
        assert_eq!(
            machine.set_implicit_batches(true),
            Err(BatchError::AlreadyOpen)
        );
        assert!(!machine.is_implicit_batches());
        machine.commit_batch().unwrap();
        assert_eq!(machine.set_implicit_batches(true), Ok(()));
        assert_eq!(machine.set_implicit_batches(true), Ok(())); // on when on: nothing
        assert_ne!(machine, Machine::new()); // the mode is part of `==`
        assert_eq!(machine.behaviour(), Machine::new().behaviour()); // not of the behaviour

        // `commit_batch` keeps the last input now: nothing is open until the next one.
        feed(&mut machine, Input::Inject(user("a"))).unwrap();
        assert_eq!(machine.begin_batch(), Err(BatchError::AlreadyOpen));
        machine.commit_batch().unwrap();
        assert_eq!(machine.roll_back_batch(), Err(BatchError::NotOpen));
        // A batch opened by `begin_batch` is committed by the next accepted input.
        machine.begin_batch().unwrap();
        feed(&mut machine, Input::Inject(user("b"))).unwrap();
        let before_c = machine.clone();
        feed(&mut machine, Input::Inject(user("c"))).unwrap();
        machine.roll_back_batch().unwrap();
        let mut kept = before_c.clone();
        kept.commit_batch().unwrap();
        assert_eq!(machine, kept);
        assert_eq!(machine.pending(Target::NextStep).len(), 2);

        // Off: the last input's batch stays open as an ordinary one, and spans what follows.
        let before_d = machine.clone();
        feed(&mut machine, Input::Inject(user("d"))).unwrap();
        machine.set_implicit_batches(false).unwrap();
        assert!(machine.is_batch_open() && !machine.is_implicit_batches());
        feed(&mut machine, Input::Inject(user("e"))).unwrap();
        machine.roll_back_batch().unwrap();
        let mut off = before_d.clone();
        off.set_implicit_batches(false).unwrap();
        assert_eq!(machine, off);
        assert_eq!(machine.set_implicit_batches(false), Ok(())); // off when off: nothing
    }

    #[test]
    fn a_machine_without_implicit_batches_journals_nothing() {
        let mut machine = Machine::new();
        for input in script() {
            let _ = feed(&mut machine, input);
            assert!(!machine.is_batch_open());
        }
        // No batch bookkeeping was ever allocated.
        assert!(machine.inbox.batch_state().is_none());
    }
}
