//! The delivery state machine: phases, the wake latch, turns and steps, cancellation, disposal.
//!
//! One method per input. Each first validates (and on failure returns a [`Rejected`] having
//! changed nothing, S5), then applies the whole transition, queues its outputs, and hands them
//! to the host as a [`Transition`].

use std::num::NonZeroUsize;

use crate::config::Config;
use crate::error::{BatchError, Completion, Rejected};
use crate::fingerprint::Fingerprint;
use crate::hasher::IdHasher;
use crate::inbox::{Inbox, Pending};
use crate::input::{
    CancelCause, ErrorInfo, Expect, Input, MaintenanceInput, PreStepAnswer, Preset, StepAnswer,
    Target, TurnStoppingAnswer,
};
use crate::message::{Message, MessageId, SharedMessage};
use crate::output::{
    Abort, Activity as ActivityId, Effect, Event, Notification, Outstanding, Request, RequestKind,
    Status, TurnEndReason,
};
use crate::transition::{Queue, Transition};

mod batch;
mod behaviour;
mod inputs;
mod queries;
#[cfg(test)]
#[path = "machine/tests/s13.rs"]
mod s13_tests;
pub use behaviour::{Behaviour, RestorerBehaviour};

/// The sans-IO delivery state machine of one agent session.
///
/// # Calling contract
///
/// * Feed one input at a time through a method ([`followup`](Machine::followup),
///   [`answer_step`](Machine::answer_step), …) or [`handle`](Machine::handle). Each input either
///   returns a [`Transition`] or a [`Rejected`] having changed nothing and emitted nothing (S5).
/// * The [`Transition`] borrows the machine: persist its [`events`](Transition::events) (append
///   them to the session's durable log as one batch, before acknowledging the input), then call
///   [`persisted`](Transition::persisted) and carry out each [`Effect`] in order: publish
///   notifications, make a cancellation scope at each [`Effect::Begin`], start each request,
///   trip the current scope at [`Effect::Abort`]. No other input can be fed in between; a
///   transition dropped before it was drained makes the next input fail
///   [`Rejected::Undrained`] until [`drain`](Machine::drain) hands its outputs out again.
/// * Answer the outstanding request (`preStep`, `step` or `turnStopping`; at most one at a time,
///   S4) with [`answer_pre_step`](Machine::answer_pre_step), [`answer_step`](Machine::answer_step)
///   or [`answer_turn_stopping`](Machine::answer_turn_stopping) when the work is done. `abort` is
///   never answered, and the outstanding request must still be answered (S40).
///
/// # Examples
///
/// A whole turn: a follow-up opens it, the host enters the claimed batch, the model answers,
/// the turn-stopping hooks run.
///
/// ```
/// use coxswain_core::{Effect, Machine, Message, PreStepAnswer, Request, StepAnswer, TurnStoppingAnswer};
///
/// let mut machine = Machine::new();
/// let mut log = Vec::new();
/// let transition = machine.followup(Message::user("m1", "hello"))?;
/// log.extend_from_slice(transition.events());
/// let mut batch = None;
/// for effect in transition.persisted() {
///     if let Effect::Request(Request::PreStep { messages, .. }) = effect {
///         batch = Some(messages);
///     }
/// }
/// let answers = [
///     machine.answer_pre_step(PreStepAnswer::Enter(batch.unwrap_or_default()))?.persisted().count(),
///     machine.answer_step(StepAnswer::Completed)?.persisted().count(),
///     machine.answer_turn_stopping(TurnStoppingAnswer::Done)?.persisted().count(),
/// ];
/// assert!(machine.is_quiescent());
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
///
/// # The pending lists
///
/// Deliveries append to NT or NS (S16); `remove`, `replace`, `prepend` and `clear` edit the
/// lists (S15); every change is one durable splice.
///
/// ```
/// use coxswain_core::{Input, Machine, Message, MessageId, Pending, Preset, Target};
///
/// let mut machine = Machine::new();
/// let quiet = |t: coxswain_core::Transition<'_>| t.persisted().for_each(drop);
/// quiet(machine.inject(Message::user("c1", "notes"))?); // NS, quiet: no turn (S20)
/// quiet(machine.send(Message::user("later", "hi"), Target::NextTurn, false, None)?); // quiet NT send
/// quiet(machine.handle(Input::preset(Preset::Inject, Message::user("c2", "more").into()))?);
/// quiet(machine.prepend(Target::NextStep, Message::user("c0", "first"))?);
/// let replaced = machine.replace(&MessageId::new("c2"), Message::user("c3", "instead"))?;
/// replaced.into_iter().for_each(quiet); // `None` had c2 not been pending
/// machine.remove(&MessageId::new("later"))?.into_iter().for_each(quiet);
/// assert!(machine.replace(&MessageId::new("c2"), Message::user("c5", "gone"))?.is_none());
/// quiet(machine.handle(Input::Inject(Message::user("c4", "last").into()))?);
///
/// let ns: Vec<&str> = machine.pending(Target::NextStep).map(|p: &Pending| p.message().id().as_str()).collect();
/// assert_eq!(ns, ["c0", "c1", "c3", "c4"]);
/// assert!(machine.pending(Target::NextStep).all(|p| !p.is_waking()));
/// assert!(machine.is_pending(&MessageId::new("c3")) && !machine.is_pending(&MessageId::new("c2")));
/// quiet(machine.clear()?);
/// assert_eq!(machine.pending(Target::NextStep).len(), 0);
///
/// quiet(machine.steer(Message::user("s1", "go"))?); // waking: opens turn 1 (S24)
/// assert_eq!(machine.last_turn(), 1);
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
///
/// # Cancel, maintenance and disposal
///
/// ```
/// use coxswain_core::{CancelCause, Machine, Message, Outstanding, Status, StepAnswer};
/// use coxswain_core::{PreStepAnswer, TurnStoppingAnswer};
///
/// let mut machine = Machine::new();
/// let quiet = |t: coxswain_core::Transition<'_>| t.persisted().for_each(drop);
/// quiet(machine.followup(Message::user("m1", "hi"))?);
/// assert_eq!(machine.status(), Status::Running);
/// assert_eq!(machine.outstanding(), Some(Outstanding::PreStep { turn: 1, step: 1 }));
/// quiet(machine.cancel(CancelCause::User, false)?); // abort; the request is still answered (S40)
/// assert!(machine.is_cancel_requested());
/// assert_eq!(machine.cancel_cause(), Some(&CancelCause::User));
/// quiet(machine.followup(Message::user("m2", "again"))?); // latched: replays when the turn ends
/// assert!(machine.is_wake_latched());
/// quiet(machine.answer_pre_step(PreStepAnswer::Reject)?); // turn 1 ends aborted, turn 2 opens
/// assert_eq!(machine.last_turn(), 2);
///
/// quiet(machine.dispose()?); // disposing until the running turn ends (S45)
/// assert!(machine.is_disposing() && !machine.is_disposed());
/// quiet(machine.answer_pre_step(PreStepAnswer::Reject)?);
/// assert!(machine.is_disposed() && machine.is_quiescent());
///
/// let mut idle = Machine::new();
/// quiet(idle.begin_maintenance()?);
/// assert!(idle.is_maintenance() && idle.status() == Status::Idle);
/// quiet(idle.end_maintenance()?);
/// # let _ = (StepAnswer::Completed, TurnStoppingAnswer::Done);
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
///
/// # The delivery memory and restoring
///
/// ```
/// use coxswain_core::{Config, Event, Machine, Message, MessageId, PreStepAnswer, Rejected};
/// use serde_json::Value;
///
/// let config = Config::new().with_delivery_memory(8);
/// let mut machine = Machine::with_config(config);
/// let mut log: Vec<Event> = Vec::new();
/// machine.followup(Message::user("m1", "hi"))?.persist_into(&mut log).for_each(drop);
/// let batch = [Message::user("m1", "hi")].into_iter().collect();
/// machine.answer_pre_step(PreStepAnswer::Enter(batch))?.persist_into(&mut log).for_each(drop);
/// // m1 was claimed: the memory holds it, so a retried delivery is refused (S52).
/// assert!(machine.remembers(&MessageId::new("m1")));
/// assert_eq!(machine.delivered().map(MessageId::as_str).collect::<Vec<_>>(), ["m1"]);
/// assert_eq!(
///     machine.followup(Message::user("m1", "hi")).err(),
///     Some(Rejected::AlreadyDelivered("m1".into()))
/// );
///
/// // A resumed machine: close the open turn (crash repair, S50), then restore.
/// let mut restored_log = log.clone();
/// let mut position = coxswain_core::LogPosition::new();
/// log.iter().for_each(|event| position.advance(event));
/// restored_log.extend(position.closers());
/// let json: Vec<Value> = restored_log.iter().map(serde_json::to_value).collect::<Result<_, _>>().unwrap_or_default();
/// let resumed = Machine::restore_with(config, &json, 0).unwrap();
/// assert!(resumed.remembers(&MessageId::new("m1"))); // rebuilt from the log (S53)
/// let plain = Machine::restore_events(&restored_log, 0).unwrap(); // no memory
/// assert_eq!((plain.last_turn(), plain.remembers(&MessageId::new("m1"))), (1, false));
///
/// // A transition dropped before it was drained: its outputs wait for `drain`.
/// drop(machine.followup(Message::user("m2", "next"))?);
/// assert_eq!(machine.steer(Message::user("m3", "x")).err(), Some(Rejected::Undrained));
/// assert!(!machine.drain().is_empty());
/// # Ok::<(), Rejected>(())
/// ```
///
/// `==` is structural: every list item with its place, the id index, the delivery memory, the
/// phase, the turn number, the bound, the undrained outputs and the open batch's saved state.
/// What a model checker compares instead, the view of what the machine's future behaviour
/// depends on, is [`Machine::behaviour`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    inbox: Inbox,
    phase: Phase,
    /// The number of the last opened turn (S27); the running turn's number while running.
    last_turn: u64,
    /// The admission bound `P` of S55 (the host's choice, like the memory's capacity).
    max_pending: Option<NonZeroUsize>,
    /// The outputs of the input being applied, until the host drains them.
    queue: Queue,
}

/// What [`Machine::roll_back_batch`] puts back besides the inbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Before {
    open: bool,
    /// Implicit batches ([`Machine::set_implicit_batches`], batch.rs): each accepted input
    /// commits the open batch and opens its own.
    implicit: bool,
    phase: Phase,
    last_turn: u64,
}

/// The state before the open batch, if one is open, kept in the inbox journal's allocation
/// (one pointer for both, allocated at the first batch and kept closed in between, so later
/// batches reuse it: an idle machine stays small, bench 6). The kept allocation is not part of
/// the value, as a `Vec`'s capacity is not: two machines are equal when both have no open
/// batch, or both one opened on the same state (and both the same batch mode).
impl Default for Before {
    fn default() -> Self {
        Before {
            open: false,
            implicit: false,
            phase: Phase::Idle,
            last_turn: 0,
        }
    }
}

impl Before {
    /// What `==` sees of the batch bookkeeping: the open batch's saved state and the mode.
    pub(crate) fn view(before: Option<&Before>) -> (Option<&Before>, bool) {
        (
            before.filter(|before| before.open),
            before.is_some_and(|before| before.implicit),
        )
    }
}

/// The activity phase (S23). Disposing is a flag on the activity's cancellation (S45).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    Maintenance(Activity),
    Running(Run),
    Disposed,
}

/// What a running driver or a maintenance job carries: its cancellation and its wake latch.
/// Boxed, since an ordinary turn sets neither: one pointer keeps an idle machine small (bench
/// 6). `None` whenever neither is set, so that `==` and the hash stay structural.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Activity(Option<Box<Marks>>);

/// An activity's cancellation and wake latch, once either is set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Marks {
    /// Set by the activity's first cancel (S39); a later cancel keeps the first cause.
    cancel: Option<Cancellation>,
    /// The wake latch (S24–S26). While running it can only be set once a cancel was requested.
    wake_requested: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Cancellation {
    cause: CancelCause,
    /// `dispose()` was called: the machine becomes disposed when this activity ends (S45).
    disposing: bool,
}

impl Activity {
    /// The first cancel's cancellation, once one was requested (S39).
    fn cancel(&self) -> Option<&Cancellation> {
        self.0.as_ref()?.cancel.as_ref()
    }

    fn cancel_mut(&mut self) -> Option<&mut Cancellation> {
        self.0.as_mut()?.cancel.as_mut()
    }

    /// Records the first cancel (the caller checked there was none).
    fn set_cancel(&mut self, cancellation: Cancellation) {
        self.0.get_or_insert_with(Box::default).cancel = Some(cancellation);
    }

    /// Whether the wake latch is set (S24–S26).
    fn wake_requested(&self) -> bool {
        self.0.as_ref().is_some_and(|marks| marks.wake_requested)
    }

    /// Clears the wake latch (an ordinary cancel's clear, S41).
    fn clear_wake(&mut self) {
        if let Some(marks) = self.0.as_deref_mut() {
            marks.wake_requested = false;
            if marks.cancel.is_none() {
                self.0 = None;
            }
        }
    }

    /// S24: latch a wake unless disposing or cancelled with cause `disposed`.
    fn latch(&mut self) {
        let suppressed = self
            .cancel()
            .is_some_and(|c| c.disposing || c.cause == CancelCause::Disposed);
        if !suppressed {
            self.0.get_or_insert_with(Box::default).wake_requested = true;
        }
    }
}

/// The running turn (its number is `Machine::last_turn`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Run {
    activity: Activity,
    /// The last entered step of the turn, 0 before the first.
    step: u64,
    /// The request the turn waits on (S4).
    awaiting: RequestKind,
    /// The awaited `preStep` follows a terminal step: the turn only goes on for NS items (S30,
    /// S33). Always `false` while another request is awaited.
    after_terminal: bool,
    /// Some step of the turn hit the output limit (the sticky reason of S34).
    max_tokens: bool,
}

impl Run {
    fn new() -> Self {
        Run {
            activity: Activity::default(),
            step: 0,
            awaiting: RequestKind::PreStep,
            after_terminal: false,
            max_tokens: false,
        }
    }

    /// The turn now waits on a request of this kind; `after_terminal` only for a `preStep`.
    fn wait_for(&mut self, request: RequestKind, after_terminal: bool) {
        self.awaiting = request;
        self.after_terminal = after_terminal && request == RequestKind::PreStep;
    }

    /// S34: the reason of a normal stop.
    fn stop_reason(&self) -> TurnEndReason {
        if self.max_tokens {
            TurnEndReason::MaxTokens
        } else {
            TurnEndReason::Completed
        }
    }
}

impl Default for Machine {
    fn default() -> Self {
        Machine::new()
    }
}

impl Machine {
    /// A fresh machine: idle, both lists empty, no turn yet, no delivery memory.
    pub fn new() -> Self {
        Machine::with_config(Config::new())
    }

    /// A fresh machine with the host's [`Config`] (the delivery memory's capacity, S51).
    pub fn with_config(config: Config) -> Self {
        let hasher = IdHasher::new(config.hash_seed);
        let inbox = Inbox::with_memory(config.delivery_memory, hasher);
        Machine::with_state(inbox, 0, config.max_pending)
    }

    /// The [`Config`] the machine was created or restored with.
    pub fn config(&self) -> Config {
        let config = Config::new()
            .with_delivery_memory(self.inbox.memory().capacity())
            .with_hash_seed(self.inbox.hasher().seed());
        match self.max_pending {
            Some(limit) => config.with_max_pending(limit),
            None => config,
        }
    }

    pub(crate) fn with_state(
        inbox: Inbox,
        last_turn: u64,
        max_pending: Option<NonZeroUsize>,
    ) -> Self {
        Machine {
            inbox,
            phase: Phase::Idle,
            last_turn,
            max_pending,
            queue: Queue::default(),
        }
    }

    /// The outputs not drained yet, as a [`Transition`]: after a transition was dropped before
    /// it was drained (inputs are rejected [`Rejected::Undrained`] until then). Empty otherwise.
    pub fn drain(&mut self) -> Transition<'_> {
        Transition::new(&mut self.queue)
    }

    // ----- what each input does -----

    /// The frame of every input: the previous input's outputs were drained, the machine is live
    /// (S45), and a rejection leaves everything as it was (S5). Returns what `step` returned.
    fn frame<T>(
        &mut self,
        step: impl FnOnce(&mut Self) -> Result<T, Rejected>,
    ) -> Result<T, Rejected> {
        if !self.queue.is_empty() {
            return Err(Rejected::Undrained);
        }
        if self.is_disposed() {
            return Err(Rejected::AfterDisposal);
        }
        // Implicit batches (batch.rs): the step is called at this one place either way.
        let implicit = self.is_implicit_batches().then(|| self.implicit_start());
        let result = step(self);
        if let Some(start) = implicit {
            self.implicit_end(start, result.is_ok());
        }
        result
    }

    /// An input in its [`frame`](Machine::frame), and the outputs it queued.
    fn apply(
        &mut self,
        transition: impl FnOnce(&mut Self) -> Result<(), Rejected>,
    ) -> Result<Transition<'_>, Rejected> {
        self.frame(transition)?;
        Ok(Transition::new(&mut self.queue))
    }

    /// [`apply`](Machine::apply) for `remove` and `replace`, whose id may not be pending: no
    /// transition then (S15).
    fn apply_edit(
        &mut self,
        edit: impl FnOnce(&mut Self) -> Result<bool, Rejected>,
    ) -> Result<Option<Transition<'_>>, Rejected> {
        let found = self.frame(edit)?;
        Ok(found.then(|| Transition::new(&mut self.queue)))
    }

    fn on_send(
        &mut self,
        message: SharedMessage,
        target: Target,
        wakeup: bool,
        expect: Option<Expect>,
    ) -> Result<(), Rejected> {
        // S54: identity (S13, S52, S56), then the guard, then the bound (S55).
        self.check_new_message(&message)?;
        if let Some(expect) = expect {
            self.check_guard(expect)?;
        }
        // S18: a steer sent after a stop cannot join the aborted turn.
        let target = if wakeup && self.is_cancel_requested() {
            Target::NextTurn
        } else {
            target
        };
        self.check_room(target)?;
        self.inbox.append(target, message, wakeup, &mut self.queue);
        if wakeup {
            self.wake();
        }
        Ok(())
    }

    fn on_remove(&mut self, id: &MessageId) -> Result<bool, Rejected> {
        let Some((target, position)) = self.inbox.locate(id) else {
            return Ok(false);
        };
        self.inbox.remove_at(target, position, &mut self.queue);
        Ok(true)
    }

    fn on_replace(&mut self, id: &MessageId, message: SharedMessage) -> Result<bool, Rejected> {
        let Some((target, position)) = self.inbox.locate(id) else {
            return Ok(false);
        };
        if message.id() != id {
            self.check_new_message(&message)?;
        }
        self.inbox
            .replace_at(target, position, message, &mut self.queue);
        Ok(true)
    }

    /// S57: at idle with waking work, wake exactly as a waking send would; otherwise nothing
    /// (no latch, no list change).
    fn on_resume(&mut self) {
        if matches!(self.phase, Phase::Idle) && self.inbox.has_waking_work() {
            self.start_driver();
        }
    }

    fn on_dispose(&mut self) {
        self.apply_cancel(CancelCause::Disposed, false);
        match self.activity_mut() {
            Some(activity) => {
                if let Some(cancellation) = activity.cancel_mut() {
                    cancellation.disposing = true;
                }
            }
            None => self.finish_disposal(),
        }
    }

    fn on_pre_step(&mut self, answer: PreStepAnswer) -> Result<(), Rejected> {
        let after_terminal = self.answering(RequestKind::PreStep)?.after_terminal;
        // S30, in this order: cancellation, fail, reject, then the entered batch.
        if self.end_if_cancelled() {
            return Ok(());
        }
        let messages = match answer {
            PreStepAnswer::Fail(error) => {
                self.fail(error);
                return Ok(());
            }
            PreStepAnswer::Reject => {
                self.end_turn(TurnEndReason::Blocked);
                return Ok(());
            }
            PreStepAnswer::Enter(messages) => messages,
        };
        let Some(run) = self.running_mut() else {
            return Ok(());
        };
        if messages.is_empty() && (run.step == 0 || after_terminal) {
            // An empty first batch ends the turn at once, with no step. After a terminal step the
            // turn only went on for NS items, and the host dropped them all: stop now with the
            // sticky reason, without turnStopping and without looking at NS again.
            let reason = if run.step == 0 {
                TurnEndReason::Completed
            } else {
                run.stop_reason()
            };
            self.end_turn(reason);
            return Ok(());
        }
        // Enter the step (after a `continue`, even with no new messages).
        run.step += 1;
        run.wait_for(RequestKind::Step, false);
        let step = run.step;
        let turn = self.last_turn;
        self.queue.event(Event::StepStart { turn, step });
        // S58: the entered messages the open turn claimed get this step, if they have none.
        self.inbox
            .entered(turn, step, messages.iter().map(|message| message.id()));
        for message in messages {
            self.queue.event(Event::UserMessage(message));
        }
        self.queue
            .effect(Effect::Request(Request::Step { turn, step }));
        Ok(())
    }

    fn on_step(&mut self, answer: StepAnswer) -> Result<(), Rejected> {
        let (turn, step) = (self.last_turn, self.answering(RequestKind::Step)?.step);
        self.queue.event(Event::StepEnd { turn, step });
        if self.end_if_cancelled() {
            return Ok(());
        }
        let terminal = match answer {
            StepAnswer::Fail(error) => {
                self.fail(error);
                return Ok(());
            }
            StepAnswer::Continue => false,
            StepAnswer::Completed => true,
            StepAnswer::MaxTokens => {
                if let Some(run) = self.running_mut() {
                    run.max_tokens = true;
                }
                true
            }
        };
        if terminal && self.inbox.len(Target::NextStep) == 0 {
            self.request_turn_stopping();
        } else {
            // A tool step goes on; a terminal step goes on only for the NS items.
            self.claim_and_request_pre_step(false, terminal);
        }
        Ok(())
    }

    fn on_turn_stopping(&mut self, answer: TurnStoppingAnswer) -> Result<(), Rejected> {
        let reason = self.answering(RequestKind::TurnStopping)?.stop_reason();
        if self.end_if_cancelled() {
            return Ok(());
        }
        match answer {
            TurnStoppingAnswer::Fail(error) => self.fail(error),
            TurnStoppingAnswer::Done if self.inbox.len(Target::NextStep) == 0 => {
                self.end_turn(reason)
            }
            // Hooks steered or injected meanwhile: the turn goes on for them.
            TurnStoppingAnswer::Done => self.claim_and_request_pre_step(false, true),
        }
        Ok(())
    }

    // ----- transitions shared by several inputs -----

    /// S13 then S52: an id joining a list is neither pending nor held by the delivery memory.
    /// S13 and S52, each turned into `conflict` when the id belongs to a different message
    /// (S56).
    #[inline(always)]
    fn check_new_message(&self, message: &Message) -> Result<(), Rejected> {
        let id = message.id();
        let known = match self.inbox.pending_fingerprint(id) {
            Some(pending) => Known::Pending(pending),
            None => match self.inbox.memory().held(id) {
                Some(held) => Known::Held(held),
                None => return Ok(()),
            },
        };
        Err(known.rejection(message))
    }

    /// S54: the expected-turn guard holds.
    fn check_guard(&self, expect: Expect) -> Result<(), Rejected> {
        let holds = match (expect, &self.phase) {
            (Expect::Turn(turn), Phase::Running(run)) => {
                turn == self.last_turn && run.activity.cancel().is_none()
            }
            (Expect::IdleAfter(turn), Phase::Idle) => turn == self.last_turn,
            _ => false,
        };
        if holds {
            Ok(())
        } else {
            Err(Rejected::TurnMismatch(expect))
        }
    }

    /// S55: the list an insertion joins holds fewer than `P` items.
    fn check_room(&self, target: Target) -> Result<(), Rejected> {
        match self.max_pending {
            Some(limit) if self.inbox.len(target) >= limit.get() => Err(Rejected::Full {
                target,
                max_pending: limit,
            }),
            _ => Ok(()),
        }
    }

    /// S4: the running turn waits on a request of this kind, which the input answers.
    fn answering(&self, request: RequestKind) -> Result<&Run, Rejected> {
        match self.running() {
            Some(run) if run.awaiting == request => Ok(run),
            _ => Err(self.unexpected(Completion::Answer(request))),
        }
    }

    fn unexpected(&self, answered: Completion) -> Rejected {
        Rejected::UnexpectedCompletion {
            answered,
            outstanding: self.outstanding(),
        }
    }

    fn activity(&self) -> Option<&Activity> {
        match &self.phase {
            Phase::Maintenance(activity) => Some(activity),
            Phase::Running(run) => Some(&run.activity),
            Phase::Idle | Phase::Disposed => None,
        }
    }

    fn activity_mut(&mut self) -> Option<&mut Activity> {
        match &mut self.phase {
            Phase::Maintenance(activity) => Some(activity),
            Phase::Running(run) => Some(&mut run.activity),
            Phase::Idle | Phase::Disposed => None,
        }
    }

    fn running(&self) -> Option<&Run> {
        match &self.phase {
            Phase::Running(run) => Some(run),
            _ => None,
        }
    }

    fn running_mut(&mut self) -> Option<&mut Run> {
        match &mut self.phase {
            Phase::Running(run) => Some(run),
            _ => None,
        }
    }

    /// S30, S33: once cancellation was requested, any answer ends the turn `aborted` with the
    /// first cause. Returns whether it did.
    fn end_if_cancelled(&mut self) -> bool {
        let cause = self
            .running()
            .and_then(|run| run.activity.cancel())
            .map(|cancellation| cancellation.cause.clone());
        match cause {
            Some(reason) => {
                self.end_turn(TurnEndReason::Aborted { reason });
                true
            }
            None => false,
        }
    }

    /// S39 on a live machine (shared by `cancel` and `dispose`).
    fn apply_cancel(&mut self, cause: CancelCause, keep_inbox: bool) {
        if !keep_inbox {
            self.inbox.clear(&mut self.queue);
            if let Some(activity) = self.activity_mut() {
                activity.clear_wake();
            }
        }
        let Some(activity) = self.activity_mut() else {
            return;
        };
        if activity.cancel().is_none() {
            activity.set_cancel(Cancellation {
                cause: cause.clone(),
                disposing: false,
            });
            self.queue.effect(Effect::Abort(Abort { cause }));
        }
    }

    /// S24: what a waking send does in each phase.
    fn wake(&mut self) {
        match &mut self.phase {
            Phase::Idle => self.start_driver(),
            Phase::Running(run) if run.activity.cancel().is_none() => {
                // The live driver claims the input at its next boundary.
            }
            Phase::Running(run) => run.activity.latch(),
            Phase::Maintenance(activity) => activity.latch(),
            Phase::Disposed => {}
        }
    }

    /// Idle → running: `status running`, then open a turn (S24).
    fn start_driver(&mut self) {
        self.phase = Phase::Running(Run::new());
        self.push_status(Status::Running);
        self.open_turn();
    }

    /// S27: `turn/start`, claim at the turn boundary, request the pre-step decision. The caller
    /// installed a fresh `Run`.
    fn open_turn(&mut self) {
        // Saturates rather than wraps: 2^64 turns are unreachable, but a restored log may start
        // near the limit, and a panic must not be reachable from input.
        self.last_turn = self.last_turn.saturating_add(1);
        self.queue.event(Event::TurnStart {
            turn: self.last_turn,
        });
        self.queue
            .effect(Effect::Begin(ActivityId::Turn(self.last_turn)));
        self.claim_and_request_pre_step(true, false);
    }

    /// S28, S29: claim (all of NS, and at a turn boundary the first NT item), emit `claimed` for
    /// each, then request the pre-step decision.
    fn claim_and_request_pre_step(&mut self, turn_boundary: bool, after_terminal: bool) {
        let turn = self.last_turn;
        let messages = self.inbox.claim(turn, turn_boundary, &mut self.queue);
        for message in &messages {
            self.queue.notify(Notification::Claimed {
                message: message.clone(),
                turn,
            });
        }
        let Phase::Running(run) = &mut self.phase else {
            return;
        };
        run.wait_for(RequestKind::PreStep, after_terminal);
        let step = run.step + 1;
        self.queue.effect(Effect::Request(Request::PreStep {
            turn,
            step,
            messages,
        }));
    }

    fn request_turn_stopping(&mut self) {
        let Phase::Running(run) = &mut self.phase else {
            return;
        };
        run.wait_for(RequestKind::TurnStopping, false);
        self.queue.effect(Effect::Request(Request::TurnStopping {
            turn: self.last_turn,
        }));
    }

    /// S38: `agent/error`, then `turn/end error`, then the driver exits.
    fn fail(&mut self, error: ErrorInfo) {
        let Phase::Running(run) = &self.phase else {
            return;
        };
        self.queue.notify(Notification::Error {
            turn: self.last_turn,
            step: run.step,
            error: error.clone(),
        });
        self.end_turn(TurnEndReason::Error { error });
    }

    /// S35: `turn/end`, then either the next turn in the same running interval (after
    /// `completed`, `max-tokens` or `blocked` with waking work pending) or the driver's exit.
    fn end_turn(&mut self, reason: TurnEndReason) {
        let continues = matches!(
            reason,
            TurnEndReason::Completed | TurnEndReason::MaxTokens | TurnEndReason::Blocked
        ) && self.inbox.has_waking_work();
        // S58: this turn's claims get its reason's kind as their `end`.
        self.inbox
            .turn_ended(self.last_turn, Some(reason.end_kind()));
        self.queue.event(Event::TurnEnd {
            turn: self.last_turn,
            reason,
        });
        let Phase::Running(run) = &mut self.phase else {
            return;
        };
        if continues {
            // A fresh activity: new cancellation token, latch clear, no status change.
            *run = Run::new();
            self.open_turn();
            return;
        }
        let activity = std::mem::take(&mut run.activity);
        self.phase = Phase::Idle;
        self.push_status(Status::Idle);
        self.activity_ended(activity);
    }

    /// An activity ended and the machine is idle: finish a disposal, or replay the latch (S25).
    fn activity_ended(&mut self, activity: Activity) {
        let disposing = activity.cancel().is_some_and(|c| c.disposing);
        if disposing {
            self.finish_disposal();
        } else if activity.wake_requested() && self.inbox.has_waking_work() {
            self.start_driver();
        }
    }

    fn finish_disposal(&mut self) {
        self.phase = Phase::Disposed;
        self.queue.effect(Effect::Disposed);
    }

    fn push_status(&mut self, status: Status) {
        self.queue.notify(Notification::Status { status });
    }
}

/// What the machine knows under a new message's id (S13, S52).
enum Known {
    /// Pending, with this message's fingerprint.
    Pending(Fingerprint),
    /// Held by the delivery memory, with this fingerprint.
    Held(Fingerprint),
}

impl Known {
    /// The rejection: `conflict` for another message (S56), else the retry's own kind.
    #[cold]
    fn rejection(self, message: &Message) -> Rejected {
        let id = message.id().clone();
        match self {
            Known::Pending(known) | Known::Held(known) if known != message.fingerprint() => {
                Rejected::Conflict(id)
            }
            Known::Pending(_) => Rejected::AlreadyPending(id),
            Known::Held(_) => Rejected::AlreadyDelivered(id),
        }
    }
}

#[cfg(test)]
mod tests {
    //! Internals only: the behaviour of every rule is pinned once, by the conformance corpus
    //! (`tests/conformance/`), which this crate's machine replays in `coxswain-tests`.
    use super::*;
    use crate::message::Message;
    use crate::output::Output;
    use std::sync::Arc;

    fn user(id: &str) -> SharedMessage {
        Arc::new(Message::user(id, id))
    }

    fn settle(transition: Result<Transition<'_>, Rejected>) {
        transition.unwrap().persisted().for_each(drop);
    }

    /// A machine running turn 1 for follow-up `a`, awaiting its first pre-step; drained.
    fn running() -> Machine {
        let mut machine = Machine::new();
        settle(machine.followup(user("a")));
        machine
    }

    /// Asserts the input is rejected with `kind`, emitting nothing and changing nothing (S5).
    fn assert_rejected(
        machine: &mut Machine,
        input: impl FnOnce(&mut Machine) -> Result<Transition<'_>, Rejected>,
        kind: &str,
    ) {
        let before = machine.clone();
        let error = input(machine)
            .map(|_| ())
            .expect_err("the input must be rejected");
        assert_eq!(error.kind(), kind);
        assert_eq!(*machine, before, "a rejected input changed the machine");
        assert!(
            machine.drain().is_empty(),
            "a rejected input emitted output"
        );
    }

    #[test]
    fn s5_every_rejection_changes_nothing() {
        let mut machine = running();
        settle(machine.inject(user("c")));
        assert_rejected(&mut machine, |m| m.steer(user("c")), "already-pending");
        assert_rejected(&mut machine, |m| m.followup(user("c")), "already-pending");
        assert_rejected(
            &mut machine,
            |m| m.prepend(Target::NextTurn, user("c")),
            "already-pending",
        );
        settle(machine.inject(user("d")));
        assert_rejected(
            &mut machine,
            |m| {
                m.handle(Input::Replace {
                    id: "c".into(),
                    message: user("d"),
                })
            },
            "already-pending",
        );
        assert_rejected(
            &mut machine,
            |m| m.answer_step(StepAnswer::Completed),
            "unexpected-completion",
        );
        assert_rejected(
            &mut machine,
            |m| m.answer_turn_stopping(TurnStoppingAnswer::Done),
            "unexpected-completion",
        );
        assert_rejected(
            &mut machine,
            |m| m.end_maintenance(),
            "unexpected-completion",
        );
        assert_rejected(&mut machine, |m| m.begin_maintenance(), "busy");
        // §12: a reused id (S56), a guard that does not hold (S54), a full list (S55).
        let other = || Arc::new(Message::user("c", "another message"));
        assert_rejected(&mut machine, |m| m.inject(other()), "conflict");
        let stale = Some(Expect::Turn(0));
        assert_rejected(
            &mut machine,
            |m| m.send(user("e"), Target::NextStep, true, stale),
            "turn-mismatch",
        );
        let mut bounded = Machine::with_config(Config::new().with_max_pending(NonZeroUsize::MIN));
        settle(bounded.inject(user("c")));
        assert_rejected(&mut bounded, |m| m.inject(user("e")), "full");
        let mut disposed = Machine::new();
        settle(disposed.dispose());
        assert_rejected(&mut disposed, |m| m.clear(), "disposed");
    }

    #[test]
    fn s54_the_guard_names_the_open_uncancelled_turn_or_the_idle_machine_after_it() {
        let guarded = |m: &mut Machine, id: &str, expect| {
            m.send(user(id), Target::NextStep, true, Some(expect))
                .map(|t| t.persisted().count())
        };
        let mut machine = Machine::new();
        assert_eq!(guarded(&mut machine, "a", Expect::IdleAfter(0)), Ok(5));
        assert_eq!(
            guarded(&mut machine, "b", Expect::IdleAfter(0)),
            Err(Rejected::TurnMismatch(Expect::IdleAfter(0)))
        );
        assert_eq!(guarded(&mut machine, "b", Expect::Turn(1)), Ok(1));
        // The retry of an accepted guarded steer is a retry, not a mismatch (S54 after S13).
        assert_eq!(
            guarded(&mut machine, "b", Expect::Turn(7)),
            Err(Rejected::AlreadyPending("b".into()))
        );
        settle(machine.cancel(CancelCause::User, true));
        assert_eq!(
            guarded(&mut machine, "c", Expect::Turn(1)),
            Err(Rejected::TurnMismatch(Expect::Turn(1)))
        );
        let mut maintenance = Machine::new();
        settle(maintenance.begin_maintenance());
        assert_eq!(
            guarded(&mut maintenance, "a", Expect::IdleAfter(0)),
            Err(Rejected::TurnMismatch(Expect::IdleAfter(0)))
        );
    }

    #[test]
    fn s55_the_bound_counts_the_resolved_list_and_never_refuses_a_replace() {
        let two = NonZeroUsize::new(2).unwrap_or(NonZeroUsize::MIN);
        let mut machine = Machine::with_config(Config::new().with_max_pending(two));
        settle(machine.followup(user("a"))); // turn 1 runs, a claimed
        settle(machine.followup(user("b")));
        settle(machine.followup(user("c"))); // NT holds 2
        let full = |target| Rejected::Full {
            target,
            max_pending: two,
        };
        assert_eq!(
            machine.followup(user("d")).err(),
            Some(full(Target::NextTurn))
        );
        assert_eq!(
            machine.prepend(Target::NextTurn, user("d")).err(),
            Some(full(Target::NextTurn))
        );
        settle(machine.replace(&"b".into(), user("d")).map(Option::unwrap));
        settle(machine.steer(user("e"))); // NS has room before a cancel
        settle(machine.cancel(CancelCause::User, true));
        // After the cancel a steer goes to NT (S18), which is full, though NS has room.
        assert_eq!(machine.steer(user("f")).err(), Some(full(Target::NextTurn)));
        settle(machine.inject(user("f"))); // a quiet send is not retargeted
        assert_eq!(
            machine.inject(user("g")).err(),
            Some(full(Target::NextStep))
        );
        assert_eq!(machine.config().max_pending, Some(two));
    }

    #[test]
    fn s56_a_different_message_under_a_pending_or_held_id_is_a_conflict() {
        let mut machine = Machine::with_config(Config::new().with_delivery_memory(4));
        let numbered = |id: &str, n: serde_json::Value| {
            Arc::new(Message::new(id, serde_json::json!({"kind": "user"}), n))
        };
        settle(machine.inject(numbered("a", serde_json::json!({"n": 1, "m": [2]}))));
        // Numbers by value, key order free: the same message.
        assert_eq!(
            machine
                .inject(numbered("a", serde_json::json!({"m": [2.0], "n": 1.0})))
                .err(),
            Some(Rejected::AlreadyPending("a".into()))
        );
        assert_eq!(
            machine
                .inject(numbered("a", serde_json::json!({"n": 2})))
                .err(),
            Some(Rejected::Conflict("a".into()))
        );
        settle(machine.steer(user("b"))); // a turn claims a and b: both held
        assert_eq!(
            machine
                .followup(numbered("a", serde_json::json!({"n": 1, "m": [2]})))
                .err(),
            Some(Rejected::AlreadyDelivered("a".into()))
        );
        assert_eq!(
            machine.prepend(Target::NextTurn, user("a")).err(),
            Some(Rejected::Conflict("a".into()))
        );
        assert_eq!(
            machine.steer(user("b")).err(),
            Some(Rejected::AlreadyDelivered("b".into()))
        );
    }

    #[test]
    fn s1_the_next_input_waits_until_the_outputs_are_drained() {
        let mut machine = Machine::new();
        drop(machine.followup(user("a")).unwrap());
        let before = machine.clone();
        assert_eq!(
            machine.inject(user("b")).map(|_| ()),
            Err(Rejected::Undrained)
        );
        assert_eq!(machine, before);
        // The outputs are still there, in order, events first.
        let transition = machine.drain();
        let events: Vec<&str> = transition.events().iter().map(Event::kind).collect();
        assert_eq!(
            events,
            ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced"]
        );
        let first = transition.persisted().next();
        assert!(matches!(
            first,
            Some(Effect::Notify(Notification::Inserted { .. }))
        ));
        // Unread effects stay queued; the persisted events do not come back.
        let rest = machine.drain();
        assert_eq!(rest.events().len(), 0);
        let rest: Vec<Effect> = rest.persisted().collect();
        assert_eq!(
            rest[..2],
            [
                Effect::Notify(Notification::Status {
                    status: Status::Running
                }),
                Effect::Begin(ActivityId::Turn(1)),
            ]
        );
        assert!(matches!(
            rest[2],
            Effect::Notify(Notification::Claimed { .. })
        ));
        assert!(matches!(
            rest[3],
            Effect::Request(Request::PreStep {
                turn: 1,
                step: 1,
                ..
            })
        ));
        assert_eq!(rest.len(), 4);
        settle(machine.inject(user("b")));
    }

    #[test]
    fn s43_maintenance_begins_an_activity_that_is_not_on_the_wire() {
        let mut machine = Machine::new();
        let transition = machine.begin_maintenance().unwrap();
        assert_eq!(transition.events().len(), 0);
        assert_eq!(transition.into_outputs().count(), 0);
        let mut machine = Machine::new();
        let effects: Vec<Effect> = machine.begin_maintenance().unwrap().persisted().collect();
        assert_eq!(effects, [Effect::Begin(ActivityId::Maintenance)]);
    }

    #[test]
    fn s15_an_edit_of_an_absent_id_is_none_and_silent() {
        let mut machine = Machine::new();
        let before = machine.clone();
        assert!(machine.remove(&"zz".into()).unwrap().is_none());
        assert!(machine.replace(&"zz".into(), user("b")).unwrap().is_none());
        assert_eq!(machine, before);
        assert!(machine.drain().is_empty());
        // As a value the input is total: an empty transition.
        assert!(machine
            .handle(Input::Remove("zz".into()))
            .unwrap()
            .is_empty());
        settle(machine.inject(user("b")));
        let transition = machine.replace(&"b".into(), user("b2")).unwrap();
        assert_eq!(transition.map(|t| t.events().len()), Some(1));
    }

    #[test]
    fn s28_common_claims_do_not_allocate_a_batch() {
        let mut machine = Machine::new();
        for id in ["s1", "s2", "s3"] {
            settle(machine.inject(user(id)));
        }
        let batch = machine
            .followup(user("f"))
            .unwrap()
            .persisted()
            .find_map(|effect| match effect {
                Effect::Request(Request::PreStep { messages, .. }) => Some(messages),
                _ => None,
            })
            .unwrap();
        assert_eq!(batch.len(), 4);
        assert!(!batch.spilled());
    }

    #[test]
    fn handle_dispatches_like_the_methods() {
        let mut by_method = Machine::new();
        let mut by_value = Machine::new();
        let outputs = |t: Result<Transition<'_>, Rejected>| -> Vec<Output> {
            t.unwrap().into_outputs().collect()
        };
        assert_eq!(
            outputs(by_method.followup(user("a"))),
            outputs(by_value.handle(Input::Followup(user("a"))))
        );
        assert_eq!(
            outputs(by_method.cancel(CancelCause::User, true)),
            outputs(by_value.handle(Input::Cancel {
                cause: CancelCause::User,
                keep_inbox: true,
            }))
        );
        assert_eq!(by_method, by_value);
    }

    #[test]
    fn a_transition_shows_its_outputs_and_its_effects_count_down() {
        let mut machine = Machine::new();
        let transition = machine.inject(Message::user("m1", "hi")).unwrap();
        assert!(!transition.is_empty());
        transition.persisted().for_each(drop);
        assert_eq!(machine.pending(Target::NextStep).len(), 1);

        // Effects count down exactly as they are taken (ExactSizeIterator).
        let mut effects = machine
            .followup(Message::user("m2", "hi"))
            .unwrap()
            .persisted();
        let total = effects.len();
        // inserted, status, the activity, claimed m1 (the injected NS item) and m2, pre-step
        assert_eq!(total, 6);
        assert_eq!(effects.size_hint(), (total, Some(total)));
        effects.next();
        assert_eq!(effects.len(), total - 1);
        assert_eq!(effects.by_ref().count(), total - 1);
        assert_eq!(effects.size_hint(), (0, Some(0)));
    }

    #[test]
    fn outputs_left_unread_stay_queued_in_order() {
        let all = |machine: &mut Machine| -> Vec<Output> {
            machine
                .followup(Message::user("m1", "hi"))
                .unwrap()
                .into_outputs()
                .collect()
        };
        let whole = all(&mut Machine::new());
        // three events (splice, turn/start, claim), inserted, status, claimed, pre-step
        assert_eq!(whole.len(), 7, "{whole:?}");
        for taken in 1..whole.len() {
            let mut machine = Machine::new();
            let mut outputs = machine
                .followup(Message::user("m1", "hi"))
                .unwrap()
                .into_outputs();
            let mut seen: Vec<Output> = outputs.by_ref().take(taken).collect();
            drop(outputs);
            seen.extend(machine.drain().into_outputs());
            assert_eq!(seen, whole, "after taking {taken}");
        }
    }

    #[test]
    fn s51_a_machine_reports_the_config_it_was_made_and_restored_with() {
        for config in [
            Config::new(),
            Config::new().with_hash_seed(0x5eed),
            Config::new()
                .with_delivery_memory(2)
                .with_hash_seed(u64::MAX),
        ] {
            assert_eq!(Machine::with_config(config).config(), config);
            let restored = Machine::restore_with(config, &[], 0).map(|m| m.config());
            assert_eq!(restored, Ok(config));
        }
    }
}
