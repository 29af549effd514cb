//! The delivery state machine: phases, the wake latch, turns and steps, cancellation, disposal.
//!
//! One method per input. Each first validates (and on failure returns a [`Rejected`] having
//! changed nothing, S5), then applies the whole transition and queues its outputs.

use std::collections::VecDeque;

use crate::bugs::seeded_bug;
use crate::error::{Completion, Rejected};
use crate::inbox::{Inbox, Pending};
use crate::input::{
    CancelCause, ErrorInfo, Input, MaintenanceInput, PreStepAnswer, StepAnswer, Target,
    TurnStoppingAnswer,
};
use crate::message::{MessageId, SharedMessage};
use crate::output::{Event, Notification, Output, Outstanding, Request, Status, TurnEndReason};

/// The sans-IO delivery state machine of one agent session.
///
/// # Calling contract
///
/// * Feed one input at a time through a method ([`followup`](Machine::followup),
///   [`answer_step`](Machine::answer_step), …) or [`handle`](Machine::handle). Each input either
///   succeeds completely or returns [`Rejected`] having changed nothing and emitted nothing (S5).
/// * After every input, drain [`poll_output`](Machine::poll_output) until it returns `None`, in
///   order, before acting on any output (S1). Append every [`Output::Event`] to the session's
///   durable log (in order, before acknowledging the input to its caller), publish every
///   [`Output::Notify`], and carry out every [`Output::Request`].
/// * Answer the outstanding request (`preStep`, `step` or `turnStopping`; at most one at a time,
///   S4) with [`answer_pre_step`](Machine::answer_pre_step), [`answer_step`](Machine::answer_step)
///   or [`answer_turn_stopping`](Machine::answer_turn_stopping) when the work is done. An `abort`
///   request is a signal to stop in-flight work; it is never answered, and the outstanding request
///   must still be answered (S40). Anything the host does in reaction to an output is a later input.
///
/// ```
/// use coxswain_core::{Machine, Message, Output, PreStepAnswer, Request, StepAnswer, TurnStoppingAnswer};
///
/// let mut machine = Machine::new();
/// machine.followup(Message::user("m1", "hello"))?;
/// let mut batch = None;
/// while let Some(output) = machine.poll_output() {
///     if let Output::Request(Request::PreStep { messages, .. }) = output {
///         batch = Some(messages);
///     }
/// }
/// machine.answer_pre_step(PreStepAnswer::Enter(batch.unwrap_or_default()))?;
/// machine.answer_step(StepAnswer::Completed)?;
/// machine.answer_turn_stopping(TurnStoppingAnswer::Done)?;
/// assert!(machine.is_quiescent());
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Machine {
    inbox: Inbox,
    phase: Phase,
    /// The number of the last opened turn (S27); the running turn's number while running.
    last_turn: u64,
    outputs: VecDeque<Output>,
    #[cfg(feature = "seeded-bugs")]
    seeded_bug: Option<crate::bugs::SeededBug>,
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Activity {
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
    /// S24: latch a wake unless disposing or cancelled with cause `disposed`.
    fn latch(&mut self) {
        let suppressed = self
            .cancel
            .as_ref()
            .is_some_and(|c| c.disposing || c.cause == CancelCause::Disposed);
        if !suppressed {
            self.wake_requested = true;
        }
    }
}

/// The running turn (its number is `Machine::last_turn`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Run {
    activity: Activity,
    /// The last entered step of the turn, 0 before the first.
    step: u64,
    awaiting: Awaiting,
    /// Some step of the turn hit the output limit (the sticky reason of S34).
    max_tokens: bool,
}

/// The outstanding request of a running turn (S4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Awaiting {
    /// `after_terminal`: the latest step's outcome was terminal and the turn only goes on for
    /// NS items (S30, S33).
    PreStep {
        after_terminal: bool,
    },
    Step,
    TurnStopping,
}

impl Run {
    fn new() -> Self {
        Run {
            activity: Activity::default(),
            step: 0,
            awaiting: Awaiting::PreStep {
                after_terminal: false,
            },
            max_tokens: false,
        }
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
    /// A fresh machine: idle, both lists empty, no turn yet.
    pub fn new() -> Self {
        Machine::with_state(Inbox::default(), 0)
    }

    pub(crate) fn with_state(inbox: Inbox, last_turn: u64) -> Self {
        Machine {
            inbox,
            phase: Phase::Idle,
            last_turn,
            outputs: VecDeque::new(),
            #[cfg(feature = "seeded-bugs")]
            seeded_bug: None,
        }
    }

    /// Test-only: this machine breaks one rule on purpose (see [`SeededBug`](crate::SeededBug)).
    #[cfg(feature = "seeded-bugs")]
    pub fn with_seeded_bug(mut self, bug: Option<crate::bugs::SeededBug>) -> Self {
        self.seeded_bug = bug;
        self
    }

    /// The next queued output, in emission order. Drain until `None` after every input.
    #[must_use]
    #[inline]
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    // ----- queries -----

    /// The public status (S23): `running` while a driver runs, otherwise `idle`.
    pub fn status(&self) -> Status {
        match self.phase {
            Phase::Running(_) => Status::Running,
            _ => Status::Idle,
        }
    }

    /// No driver and no maintenance is active (S44).
    pub fn is_quiescent(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::Disposed)
    }

    /// `disposed` was emitted: every input is now rejected (S45).
    pub fn is_disposed(&self) -> bool {
        matches!(self.phase, Phase::Disposed)
    }

    /// A maintenance job is active (S43).
    pub fn is_maintenance(&self) -> bool {
        matches!(self.phase, Phase::Maintenance(_))
    }

    /// The current activity's cancellation was requested (S18), `dispose` included.
    pub fn is_cancel_requested(&self) -> bool {
        self.activity().is_some_and(|a| a.cancel.is_some())
    }

    /// The items pending in one list, in order.
    pub fn pending(&self, target: Target) -> impl ExactSizeIterator<Item = &Pending> + '_ {
        self.inbox.items(target).iter()
    }

    /// Whether `id` is pending in either list.
    pub fn is_pending(&self, id: &MessageId) -> bool {
        self.inbox.contains(id)
    }

    /// The request the machine waits on, if any (S4).
    pub fn outstanding(&self) -> Option<Outstanding> {
        let Phase::Running(run) = &self.phase else {
            return None;
        };
        let turn = self.last_turn;
        Some(match run.awaiting {
            Awaiting::PreStep { .. } => Outstanding::PreStep {
                turn,
                step: run.step + 1,
            },
            Awaiting::Step => Outstanding::Step {
                turn,
                step: run.step,
            },
            Awaiting::TurnStopping => Outstanding::TurnStopping { turn },
        })
    }

    /// The number of the last opened turn, 0 before the first (S27, S46).
    pub fn last_turn(&self) -> u64 {
        self.last_turn
    }

    // ----- inputs -----

    /// Applies one input given as a value, through the same method as a direct call.
    ///
    /// `Ok(false)` means a `remove` or `replace` found its id not pending (and emitted nothing);
    /// every other accepted input returns `Ok(true)`.
    pub fn handle(&mut self, input: Input) -> Result<bool, Rejected> {
        let done = match input {
            Input::Remove(id) => return self.remove(&id),
            Input::Replace { id, message } => return self.replace(&id, message),
            Input::Send {
                message,
                target,
                wakeup,
            } => self.send(message, target, wakeup),
            Input::Followup(message) => self.followup(message),
            Input::Steer(message) => self.steer(message),
            Input::Inject(message) => self.inject(message),
            Input::Prepend { target, message } => self.prepend(target, message),
            Input::Clear {} => self.clear(),
            Input::Cancel { cause, keep_inbox } => self.cancel(cause, keep_inbox),
            Input::Maintenance(MaintenanceInput::Begin) => self.begin_maintenance(),
            Input::Maintenance(MaintenanceInput::End) => self.end_maintenance(),
            Input::Dispose {} => self.dispose(),
            Input::PreStep(answer) => self.answer_pre_step(answer),
            Input::Step(answer) => self.answer_step(answer),
            Input::TurnStopping(answer) => self.answer_turn_stopping(answer),
        };
        done.map(|()| true)
    }

    /// `send(message, target, wakeup)` (S16–S21): append the message to the end of `target`
    /// (or of NT, for a waking send after a cancel, S18); a waking send then wakes (S24).
    pub fn send(
        &mut self,
        message: impl Into<SharedMessage>,
        target: Target,
        wakeup: bool,
    ) -> Result<(), Rejected> {
        let message = message.into();
        self.check_live()?;
        self.check_not_pending(message.id())?;
        // S18: a steer sent after a stop cannot join the aborted turn.
        let target =
            if wakeup && self.is_cancel_requested() && !seeded_bug!(self, SteerJoinsAbortedTurn) {
                Target::NextTurn
            } else {
                target
            };
        self.inbox
            .append(target, message, wakeup, &mut self.outputs);
        #[cfg(feature = "seeded-bugs")]
        if seeded_bug!(self, SpliceStartOffByOne) {
            self.seed_splice_start_off_by_one();
        }
        if wakeup || (seeded_bug!(self, InjectWakes) && matches!(self.phase, Phase::Idle)) {
            self.wake();
        }
        Ok(())
    }

    /// `followup(m) = send(m, next-turn, true)`: a turn of its own (S22).
    pub fn followup(&mut self, message: impl Into<SharedMessage>) -> Result<(), Rejected> {
        self.send(message, Target::NextTurn, true)
    }

    /// `steer(m) = send(m, next-step, true)`: joins the running turn at its next boundary.
    pub fn steer(&mut self, message: impl Into<SharedMessage>) -> Result<(), Rejected> {
        self.send(message, Target::NextStep, true)
    }

    /// `inject(m) = send(m, next-step, false)`: context that rides along, never wakes (S20).
    pub fn inject(&mut self, message: impl Into<SharedMessage>) -> Result<(), Rejected> {
        self.send(message, Target::NextStep, false)
    }

    /// `remove(id)` (S15): discard a pending message. `Ok(false)` (nothing emitted) if it is not
    /// pending.
    pub fn remove(&mut self, id: &MessageId) -> Result<bool, Rejected> {
        self.check_live()?;
        let Some((target, position)) = self.inbox.locate(id) else {
            return Ok(false);
        };
        self.inbox.remove_at(target, position, &mut self.outputs);
        Ok(true)
    }

    /// `replace(id, message)` (S15): swap a pending message in place; the replacement inherits its
    /// waking flag. `Ok(false)` (nothing emitted) if `id` is not pending; rejected if the new id is
    /// pending elsewhere.
    pub fn replace(
        &mut self,
        id: &MessageId,
        message: impl Into<SharedMessage>,
    ) -> Result<bool, Rejected> {
        let message = message.into();
        self.check_live()?;
        let Some((target, position)) = self.inbox.locate(id) else {
            return Ok(false);
        };
        if message.id() != id && self.inbox.contains(message.id()) {
            if seeded_bug!(self, RejectedReplaceRemoves) {
                self.inbox.remove_at(target, position, &mut self.outputs);
                self.outputs.clear();
            }
            return Err(Rejected::AlreadyPending(message.id().clone()));
        }
        self.inbox
            .replace_at(target, position, message, &mut self.outputs);
        Ok(true)
    }

    /// `prepend(target, message)` (S15): put a quiet message first in `target`.
    pub fn prepend(
        &mut self,
        target: Target,
        message: impl Into<SharedMessage>,
    ) -> Result<(), Rejected> {
        let message = message.into();
        self.check_live()?;
        self.check_not_pending(message.id())?;
        self.inbox.prepend(target, message, &mut self.outputs);
        Ok(())
    }

    /// `clear()` (S15): discard everything pending, NS first. Touches neither phase nor latch.
    pub fn clear(&mut self) -> Result<(), Rejected> {
        self.check_live()?;
        self.inbox.clear(&mut self.outputs);
        Ok(())
    }

    /// `cancel(cause, { keepInbox })` (S39): without `keep_inbox`, clear both lists (and the
    /// current activity's latch); then, if an activity runs, request its cancellation (the first
    /// cause wins) and, on its first cancel only, emit `abort`.
    pub fn cancel(&mut self, cause: CancelCause, keep_inbox: bool) -> Result<(), Rejected> {
        self.check_live()?;
        self.apply_cancel(cause, keep_inbox);
        Ok(())
    }

    /// `dispose()` (S45): `cancel(disposed)` without `keepInbox`, then disposing until quiescent;
    /// `disposed` is the last output of the input that makes the machine quiescent.
    pub fn dispose(&mut self) -> Result<(), Rejected> {
        self.check_live()?;
        self.apply_cancel(CancelCause::Disposed, false);
        match self.activity_mut() {
            Some(activity) => {
                if let Some(cancellation) = activity.cancel.as_mut() {
                    cancellation.disposing = true;
                }
            }
            None => self.finish_disposal(),
        }
        Ok(())
    }

    /// `beginMaintenance()` (S43): only while idle; status stays `idle`, nothing is emitted.
    pub fn begin_maintenance(&mut self) -> Result<(), Rejected> {
        self.check_live()?;
        if !matches!(self.phase, Phase::Idle) {
            return Err(Rejected::Busy);
        }
        self.phase = Phase::Maintenance(Activity::default());
        Ok(())
    }

    /// `endMaintenance()` (S43): back to idle, then replay the latch (S25) or finish disposal.
    pub fn end_maintenance(&mut self) -> Result<(), Rejected> {
        self.check_live()?;
        let Phase::Maintenance(activity) = &self.phase else {
            return Err(self.unexpected(Completion::EndMaintenance));
        };
        let activity = activity.clone();
        self.phase = Phase::Idle;
        self.activity_ended(activity);
        Ok(())
    }

    /// Answers the outstanding `preStep` request (S29, S30).
    pub fn answer_pre_step(&mut self, answer: PreStepAnswer) -> Result<(), Rejected> {
        self.check_live()?;
        let Some(Awaiting::PreStep { after_terminal }) = self.awaiting() else {
            return Err(self.unexpected(Completion::PreStep));
        };
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
        run.awaiting = Awaiting::Step;
        let step = run.step;
        let turn = self.last_turn;
        self.outputs
            .push_back(Output::Event(Event::StepStart { turn, step }));
        for message in messages {
            self.outputs
                .push_back(Output::Event(Event::UserMessage(message)));
        }
        self.outputs
            .push_back(Output::Request(Request::Step { turn, step }));
        Ok(())
    }

    /// Answers the outstanding `step` request (S32, S33): `step/end` first, always.
    pub fn answer_step(&mut self, answer: StepAnswer) -> Result<(), Rejected> {
        self.check_live()?;
        let (Some(Awaiting::Step), Some(run)) = (self.awaiting(), self.running()) else {
            return Err(self.unexpected(Completion::Step));
        };
        let (turn, step) = (self.last_turn, run.step);
        if !(matches!(answer, StepAnswer::Fail(_)) && seeded_bug!(self, FailedStepNeverEnds)) {
            self.outputs
                .push_back(Output::Event(Event::StepEnd { turn, step }));
        }
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
        let stops = if terminal {
            self.inbox.len(Target::NextStep) == 0
        } else {
            seeded_bug!(self, MaxTokensStopsToolStep)
                && self.running().is_some_and(|run| run.max_tokens)
        };
        if stops {
            self.request_turn_stopping();
        } else {
            // A tool step goes on; a terminal step goes on only for the NS items.
            self.claim_and_request_pre_step(false, terminal);
        }
        Ok(())
    }

    /// Answers the outstanding `turnStopping` request (S33).
    pub fn answer_turn_stopping(&mut self, answer: TurnStoppingAnswer) -> Result<(), Rejected> {
        self.check_live()?;
        let (Some(Awaiting::TurnStopping), Some(run)) = (self.awaiting(), self.running()) else {
            return Err(self.unexpected(Completion::TurnStopping));
        };
        let reason = run.stop_reason();
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

    fn check_live(&self) -> Result<(), Rejected> {
        if self.is_disposed() {
            Err(Rejected::Disposed)
        } else {
            Ok(())
        }
    }

    fn check_not_pending(&self, id: &MessageId) -> Result<(), Rejected> {
        let pending = match self.inbox.locate(id) {
            Some((Target::NextStep, _)) if seeded_bug!(self, DuplicateInNextStep) => false,
            found => found.is_some(),
        };
        if pending {
            Err(Rejected::AlreadyPending(id.clone()))
        } else {
            Ok(())
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

    fn awaiting(&self) -> Option<Awaiting> {
        self.running().map(|run| run.awaiting)
    }

    /// S30, S33: once cancellation was requested, any answer ends the turn `aborted` with the
    /// first cause. Returns whether it did.
    fn end_if_cancelled(&mut self) -> bool {
        let cause = self
            .running()
            .and_then(|run| run.activity.cancel.as_ref())
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
            self.inbox.clear(&mut self.outputs);
            if let Some(activity) = self.activity_mut() {
                activity.wake_requested = false;
            }
        } else if seeded_bug!(self, KeepInboxDropsSteps) {
            self.inbox.clear_list(Target::NextStep, &mut self.outputs);
        }
        let Some(activity) = self.activity_mut() else {
            return;
        };
        if activity.cancel.is_none() {
            activity.cancel = Some(Cancellation {
                cause: cause.clone(),
                disposing: false,
            });
            self.outputs
                .push_back(Output::Request(Request::Abort { cause }));
        }
    }

    /// S24: what a waking send does in each phase.
    fn wake(&mut self) {
        let forget = seeded_bug!(self, MaintenanceForgetsWake);
        match &mut self.phase {
            Phase::Idle => self.start_driver(),
            Phase::Running(run) if run.activity.cancel.is_none() => {
                // The live driver claims the input at its next boundary.
            }
            Phase::Running(run) => run.activity.latch(),
            Phase::Maintenance(_) if forget => {}
            Phase::Maintenance(activity) => activity.latch(),
            Phase::Disposed => {}
        }
    }

    /// Idle → running: `status running`, then open a turn (S24).
    fn start_driver(&mut self) {
        self.phase = Phase::Running(Run::new());
        self.push_status(Status::Running);
        if seeded_bug!(self, StatusTwice) {
            self.push_status(Status::Running);
        }
        self.open_turn();
    }

    /// S27: `turn/start`, claim at the turn boundary, request the pre-step decision. The caller
    /// installed a fresh `Run`.
    fn open_turn(&mut self) {
        // Saturates rather than wraps: 2^64 turns are unreachable, but a restored log may start
        // near the limit, and a panic must not be reachable from input.
        self.last_turn = self.last_turn.saturating_add(1);
        self.outputs.push_back(Output::Event(Event::TurnStart {
            turn: self.last_turn,
        }));
        self.claim_and_request_pre_step(true, false);
    }

    /// S28, S29: claim (all of NS, and at a turn boundary the first NT item), emit `claimed` for
    /// each, then request the pre-step decision.
    fn claim_and_request_pre_step(&mut self, turn_boundary: bool, after_terminal: bool) {
        let turn = self.last_turn;
        #[cfg(feature = "seeded-bugs")]
        let steps_pending = self.inbox.len(Target::NextStep);
        #[allow(unused_mut)]
        let mut messages = self.inbox.claim(turn_boundary, &mut self.outputs);
        #[cfg(feature = "seeded-bugs")]
        self.seed_claim_bugs(turn_boundary, steps_pending, &mut messages);
        for message in &messages {
            self.outputs
                .push_back(Output::Notify(Notification::Claimed {
                    message: message.clone(),
                    turn,
                }));
        }
        let Phase::Running(run) = &mut self.phase else {
            return;
        };
        run.awaiting = Awaiting::PreStep { after_terminal };
        let step = run.step + 1;
        self.outputs.push_back(Output::Request(Request::PreStep {
            turn,
            step,
            messages,
        }));
    }

    fn request_turn_stopping(&mut self) {
        let Phase::Running(run) = &mut self.phase else {
            return;
        };
        run.awaiting = Awaiting::TurnStopping;
        self.outputs
            .push_back(Output::Request(Request::TurnStopping {
                turn: self.last_turn,
            }));
    }

    /// S38: `agent/error`, then `turn/end error`, then the driver exits.
    fn fail(&mut self, error: ErrorInfo) {
        let Phase::Running(run) = &self.phase else {
            return;
        };
        self.outputs.push_back(Output::Notify(Notification::Error {
            turn: self.last_turn,
            step: run.step,
            error: error.clone(),
        }));
        self.end_turn(TurnEndReason::Error { error });
    }

    /// S35: `turn/end`, then either the next turn in the same running interval (after
    /// `completed`, `max-tokens` or `blocked` with waking work pending) or the driver's exit.
    fn end_turn(&mut self, reason: TurnEndReason) {
        let continues = matches!(
            reason,
            TurnEndReason::Completed | TurnEndReason::MaxTokens | TurnEndReason::Blocked
        ) && self.inbox.has_waking_work();
        self.outputs.push_back(Output::Event(Event::TurnEnd {
            turn: self.last_turn,
            reason,
        }));
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
        let disposing = activity.cancel.as_ref().is_some_and(|c| c.disposing);
        if disposing {
            self.finish_disposal();
        } else if activity.wake_requested && self.inbox.has_waking_work() {
            self.start_driver();
        }
    }

    fn finish_disposal(&mut self) {
        self.phase = Phase::Disposed;
        self.outputs.push_back(Output::Disposed);
    }

    fn push_status(&mut self, status: Status) {
        self.outputs
            .push_back(Output::Notify(Notification::Status { status }));
    }

    /// Seeded bugs `ClaimTakesTwoTurnItems` and `ClaimForgetsStep`.
    #[cfg(feature = "seeded-bugs")]
    fn seed_claim_bugs(
        &mut self,
        turn_boundary: bool,
        steps_pending: usize,
        messages: &mut crate::message::Batch,
    ) {
        if turn_boundary && seeded_bug!(self, ClaimTakesTwoTurnItems) {
            for message in self.inbox.claim(true, &mut self.outputs) {
                messages.push(message);
            }
        }
        if steps_pending >= 2 && seeded_bug!(self, ClaimForgetsStep) {
            let forgotten = steps_pending - 1;
            *messages = std::mem::take(messages)
                .into_iter()
                .enumerate()
                .filter_map(|(i, message)| (i != forgotten).then_some(message))
                .collect();
        }
    }

    /// Seeded bug `SpliceStartOffByOne`: the append just queued reports `start = len + 1`.
    #[cfg(feature = "seeded-bugs")]
    fn seed_splice_start_off_by_one(&mut self) {
        let splice = self
            .outputs
            .iter_mut()
            .rev()
            .find_map(|output| match output {
                Output::Event(Event::Spliced(splice)) => Some(splice),
                _ => None,
            });
        if let Some(splice) = splice {
            splice.start += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Batch, Message};
    use serde_json::{json, Value};
    use std::sync::Arc;

    fn user(id: &str) -> SharedMessage {
        Arc::new(Message::user(id, id))
    }

    fn mj(id: &str) -> Value {
        json!({"id": id, "source": {"kind": "user"}, "content": id})
    }

    fn drain(machine: &mut Machine) -> Vec<Value> {
        std::iter::from_fn(|| machine.poll_output())
            .map(|output| serde_json::to_value(output).unwrap())
            .collect()
    }

    fn splice(data: Value) -> Value {
        json!({"event": {"type": "agent/inbox/spliced", "data": data}})
    }

    fn event(kind: &str, data: Value) -> Value {
        json!({"event": {"type": kind, "data": data}})
    }

    fn notify(body: Value) -> Value {
        json!({ "notify": body })
    }

    fn status(status: &str) -> Value {
        notify(json!({"type": "agent/status", "status": status}))
    }

    fn request(body: Value) -> Value {
        json!({ "request": body })
    }

    /// A machine running turn 1 for follow-up `a`, awaiting its first pre-step; outputs drained.
    fn running() -> Machine {
        let mut machine = Machine::new();
        machine.followup(user("a")).unwrap();
        drain(&mut machine);
        machine
    }

    /// Asserts the input is rejected with `kind`, emitting nothing and changing nothing (S5).
    fn assert_rejected(
        machine: &mut Machine,
        input: impl FnOnce(&mut Machine) -> Result<(), Rejected>,
        kind: &str,
    ) {
        let before = machine.clone();
        let error = input(machine).expect_err("the input must be rejected");
        assert_eq!(error.kind(), kind);
        assert_eq!(*machine, before, "a rejected input changed the machine");
        assert_eq!(
            machine.poll_output(),
            None,
            "a rejected input emitted output"
        );
    }

    #[test]
    fn s24_idle_followup_opens_a_turn_in_the_same_transition() {
        let mut machine = Machine::new();
        machine.followup(user("a")).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(
                    json!({"target": "next-turn", "start": 0, "inserted": [mj("a")], "wakeup": true})
                ),
                notify(json!({"type": "agent/inbox/inserted", "message": mj("a")})),
                status("running"),
                event("turn/start", json!({"turn": 1})),
                splice(
                    json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
                ),
                notify(json!({"type": "agent/inbox/claimed", "message": mj("a"), "turn": 1})),
                request(json!({"preStep": {"turn": 1, "step": 1, "messages": [mj("a")]}})),
            ]
        );
        assert_eq!(machine.status(), Status::Running);
        assert_eq!(
            machine.outstanding(),
            Some(Outstanding::PreStep { turn: 1, step: 1 })
        );
    }

    #[test]
    fn s20_idle_inject_only_records_and_notifies() {
        let mut machine = Machine::new();
        machine.inject(user("c")).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(json!({"target": "next-step", "start": 0, "inserted": [mj("c")]})),
                notify(json!({"type": "agent/inbox/inserted", "message": mj("c")})),
            ]
        );
        assert_eq!(machine.status(), Status::Idle);
        assert!(machine.is_quiescent());
        assert_eq!(machine.last_turn(), 0);
    }

    #[test]
    fn s28_turn_boundary_claims_all_steps_then_one_followup() {
        let mut machine = Machine::new();
        machine.send(user("q"), Target::NextTurn, false).unwrap();
        machine.inject(user("c")).unwrap();
        machine.prepend(Target::NextStep, user("p")).unwrap();
        drain(&mut machine);
        machine.followup(user("f")).unwrap();
        let outputs = drain(&mut machine);
        assert_eq!(
            outputs[4..],
            [
                splice(
                    json!({"target": "next-step", "start": 0, "removedCount": 2, "inserted": []})
                ),
                splice(
                    json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
                ),
                notify(json!({"type": "agent/inbox/claimed", "message": mj("p"), "turn": 1})),
                notify(json!({"type": "agent/inbox/claimed", "message": mj("c"), "turn": 1})),
                notify(json!({"type": "agent/inbox/claimed", "message": mj("q"), "turn": 1})),
                request(
                    json!({"preStep": {"turn": 1, "step": 1, "messages": [mj("p"), mj("c"), mj("q")]}})
                ),
            ]
        );
        // S19: the follow-up queued behind the quiet item waits for a turn of its own.
        let pending: Vec<_> = machine
            .pending(Target::NextTurn)
            .map(|item| (item.message().id().as_str().to_owned(), item.is_waking()))
            .collect();
        assert_eq!(pending, vec![("f".to_owned(), true)]);
    }

    #[test]
    fn s30_s32_s33_text_step_and_turn_stopping() {
        let mut machine = running();
        machine
            .answer_pre_step(PreStepAnswer::Enter([user("a")].into_iter().collect()))
            .unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event("step/start", json!({"turn": 1, "step": 1})),
                event("user/message", mj("a")),
                request(json!({"step": {"turn": 1, "step": 1}})),
            ]
        );
        machine.answer_step(StepAnswer::MaxTokens).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event("step/end", json!({"turn": 1, "step": 1})),
                request(json!({"turnStopping": {"turn": 1}})),
            ]
        );
        machine
            .answer_turn_stopping(TurnStoppingAnswer::Done)
            .unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "max-tokens"}})
                ),
                status("idle"),
            ]
        );
        assert!(machine.is_quiescent());
        assert_eq!(machine.outstanding(), None);
    }

    #[test]
    fn s34_tool_step_after_max_tokens_still_continues() {
        let mut machine = running();
        machine
            .answer_pre_step(PreStepAnswer::Enter([user("a")].into_iter().collect()))
            .unwrap();
        machine.answer_step(StepAnswer::MaxTokens).unwrap();
        machine.steer(user("s")).unwrap();
        machine
            .answer_turn_stopping(TurnStoppingAnswer::Done)
            .unwrap();
        drain(&mut machine);
        machine
            .answer_pre_step(PreStepAnswer::Enter([user("s")].into_iter().collect()))
            .unwrap();
        drain(&mut machine);
        machine.answer_step(StepAnswer::Continue).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event("step/end", json!({"turn": 1, "step": 2})),
                request(json!({"preStep": {"turn": 1, "step": 3, "messages": []}})),
            ]
        );
        // S30: enter([]) after a continue opens a step with no new messages.
        machine
            .answer_pre_step(PreStepAnswer::Enter(Batch::new()))
            .unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event("step/start", json!({"turn": 1, "step": 3})),
                request(json!({"step": {"turn": 1, "step": 3}})),
            ]
        );
        machine.answer_step(StepAnswer::Completed).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event("step/end", json!({"turn": 1, "step": 3})),
                request(json!({"turnStopping": {"turn": 1}})),
            ]
        );
        machine
            .answer_turn_stopping(TurnStoppingAnswer::Done)
            .unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "max-tokens"}})
                ),
                status("idle"),
            ]
        );
    }

    #[test]
    fn s38_error_path_reports_the_last_entered_step() {
        let mut machine = running();
        machine
            .answer_pre_step(PreStepAnswer::Enter([user("a")].into_iter().collect()))
            .unwrap();
        drain(&mut machine);
        machine
            .answer_step(StepAnswer::Fail(ErrorInfo::new("boom", "E")))
            .unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event("step/end", json!({"turn": 1, "step": 1})),
                notify(
                    json!({"type": "agent/error", "turn": 1, "step": 1, "error": {"message": "boom", "code": "E"}})
                ),
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "error", "error": {"message": "boom", "code": "E"}}})
                ),
                status("idle"),
            ]
        );
    }

    #[test]
    fn s38_failure_after_cancel_is_aborted_without_agent_error() {
        let mut machine = running();
        machine.cancel(CancelCause::Parent, true).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![request(json!({"abort": {"cause": {"kind": "parent"}}}))]
        );
        machine
            .answer_pre_step(PreStepAnswer::Fail(ErrorInfo::new("x", "y")))
            .unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "parent"}}})
                ),
                status("idle"),
            ]
        );
    }

    #[test]
    fn s35_blocked_turn_continues_with_the_next_followup() {
        let mut machine = running();
        machine.followup(user("b")).unwrap();
        drain(&mut machine);
        machine.answer_pre_step(PreStepAnswer::Reject).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "blocked"}})
                ),
                event("turn/start", json!({"turn": 2})),
                splice(
                    json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
                ),
                notify(json!({"type": "agent/inbox/claimed", "message": mj("b"), "turn": 2})),
                request(json!({"preStep": {"turn": 2, "step": 1, "messages": [mj("b")]}})),
            ]
        );
    }

    #[test]
    fn s18_s25_steer_after_cancel_queues_and_replays_at_exit() {
        let mut machine = running();
        machine.cancel(CancelCause::User, true).unwrap();
        drain(&mut machine);
        assert!(machine.is_cancel_requested());
        machine.steer(user("s")).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(
                    json!({"target": "next-turn", "start": 0, "inserted": [mj("s")], "wakeup": true})
                ),
                notify(json!({"type": "agent/inbox/inserted", "message": mj("s")})),
            ]
        );
        machine.answer_pre_step(PreStepAnswer::Reject).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
                ),
                status("idle"),
                status("running"),
                event("turn/start", json!({"turn": 2})),
                splice(
                    json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
                ),
                notify(json!({"type": "agent/inbox/claimed", "message": mj("s"), "turn": 2})),
                request(json!({"preStep": {"turn": 2, "step": 1, "messages": [mj("s")]}})),
            ]
        );
    }

    #[test]
    fn s24_disposed_cause_does_not_latch() {
        let mut machine = running();
        machine.cancel(CancelCause::Disposed, true).unwrap();
        machine.followup(user("f")).unwrap();
        drain(&mut machine);
        machine.answer_pre_step(PreStepAnswer::Reject).unwrap();
        // Aborted, exit, and no replay: the follow-up parks (no `status running` after idle).
        assert_eq!(
            drain(&mut machine),
            vec![
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "disposed"}}})
                ),
                status("idle"),
            ]
        );
        assert!(!machine.is_disposed(), "a disposed cause does not dispose");
        let parked: Vec<_> = machine
            .pending(Target::NextTurn)
            .map(|p| (p.message().id().as_str().to_owned(), p.is_waking()))
            .collect();
        assert_eq!(parked, vec![("f".to_owned(), true)]);
    }

    #[test]
    fn s39_cancel_clears_then_aborts_once() {
        let mut machine = running();
        machine.inject(user("c")).unwrap();
        machine.followup(user("f")).unwrap();
        drain(&mut machine);
        machine
            .cancel(CancelCause::Hook { reason: "r".into() }, false)
            .unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(
                    json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})
                ),
                notify(json!({"type": "agent/inbox/discarded", "message": mj("c")})),
                splice(
                    json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})
                ),
                notify(json!({"type": "agent/inbox/discarded", "message": mj("f")})),
                request(json!({"abort": {"cause": {"kind": "hook", "reason": "r"}}})),
            ]
        );
        machine.cancel(CancelCause::User, false).unwrap();
        assert_eq!(drain(&mut machine), Vec::<Value>::new());
        machine.answer_pre_step(PreStepAnswer::Reject).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "hook", "reason": "r"}}})
                ),
                status("idle"),
            ]
        );
    }

    #[test]
    fn s39_idle_cancel_never_aborts() {
        let mut machine = Machine::new();
        machine.cancel(CancelCause::User, false).unwrap();
        machine.cancel(CancelCause::User, true).unwrap();
        assert_eq!(drain(&mut machine), Vec::<Value>::new());
    }

    #[test]
    fn s43_s25_maintenance_latch_replays_at_end() {
        let mut machine = Machine::new();
        machine.begin_maintenance().unwrap();
        machine.followup(user("f")).unwrap();
        // Latched, not woken: no status, no turn.
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(
                    json!({"target": "next-turn", "start": 0, "inserted": [mj("f")], "wakeup": true})
                ),
                notify(json!({"type": "agent/inbox/inserted", "message": mj("f")})),
            ]
        );
        assert_eq!(machine.status(), Status::Idle);
        machine.end_maintenance().unwrap();
        // The status was already idle: only `status running` appears (S25).
        assert_eq!(
            drain(&mut machine),
            vec![
                status("running"),
                event("turn/start", json!({"turn": 1})),
                splice(
                    json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
                ),
                notify(json!({"type": "agent/inbox/claimed", "message": mj("f"), "turn": 1})),
                request(json!({"preStep": {"turn": 1, "step": 1, "messages": [mj("f")]}})),
            ]
        );
    }

    #[test]
    fn s45_dispose_while_running_ends_with_disposed() {
        let mut machine = running();
        machine.dispose().unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![request(json!({"abort": {"cause": {"kind": "disposed"}}}))]
        );
        machine.followup(user("late")).unwrap();
        drain(&mut machine);
        machine.dispose().unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(
                    json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})
                ),
                notify(json!({"type": "agent/inbox/discarded", "message": mj("late")})),
            ]
        );
        machine.answer_pre_step(PreStepAnswer::Reject).unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                event(
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "disposed"}}})
                ),
                status("idle"),
                json!({"disposed": {}}),
            ]
        );
        assert!(machine.is_disposed());
        assert_eq!(machine.status(), Status::Idle);
        assert_rejected(&mut machine, |m| m.clear(), "disposed");
        assert_rejected(
            &mut machine,
            |m| m.remove(&"x".into()).map(drop),
            "disposed",
        );
        assert_rejected(&mut machine, |m| m.end_maintenance(), "disposed");
    }

    #[test]
    fn s45_dispose_idle_is_immediate() {
        let mut machine = Machine::new();
        machine.inject(user("c")).unwrap();
        drain(&mut machine);
        machine.dispose().unwrap();
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(
                    json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})
                ),
                notify(json!({"type": "agent/inbox/discarded", "message": mj("c")})),
                json!({"disposed": {}}),
            ]
        );
    }

    #[test]
    fn s5_every_rejection_changes_nothing() {
        let mut machine = running();
        machine.inject(user("c")).unwrap();
        drain(&mut machine);
        assert_rejected(&mut machine, |m| m.steer(user("c")), "already-pending");
        assert_rejected(&mut machine, |m| m.followup(user("c")), "already-pending");
        assert_rejected(
            &mut machine,
            |m| m.prepend(Target::NextTurn, user("c")),
            "already-pending",
        );
        machine.inject(user("d")).unwrap();
        drain(&mut machine);
        assert_rejected(
            &mut machine,
            |m| m.replace(&"c".into(), user("d")).map(drop),
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
        let mut idle = Machine::new();
        assert_rejected(
            &mut idle,
            |m| m.answer_pre_step(PreStepAnswer::Reject),
            "unexpected-completion",
        );
    }

    #[test]
    fn s4_unexpected_completion_names_what_is_outstanding() {
        let mut machine = running();
        assert_eq!(
            machine.answer_step(StepAnswer::Continue),
            Err(Rejected::UnexpectedCompletion {
                answered: Completion::Step,
                outstanding: Some(Outstanding::PreStep { turn: 1, step: 1 }),
            })
        );
    }

    #[test]
    fn s15_replace_inherits_waking_and_absent_ids_are_not_errors() {
        let mut machine = Machine::new();
        machine.begin_maintenance().unwrap();
        machine.followup(user("a")).unwrap();
        machine.inject(user("b")).unwrap();
        drain(&mut machine);
        assert_eq!(machine.replace(&"a".into(), user("a2")), Ok(true));
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(
                    json!({"target": "next-turn", "start": 0, "removedCount": 1, "inserted": [mj("a2")], "outcome": "canceled", "wakeup": true})
                ),
                notify(json!({"type": "agent/inbox/discarded", "message": mj("a")})),
                notify(json!({"type": "agent/inbox/inserted", "message": mj("a2")})),
            ]
        );
        assert_eq!(machine.replace(&"zz".into(), user("b")), Ok(false));
        assert_eq!(machine.remove(&"zz".into()), Ok(false));
        assert_eq!(drain(&mut machine), Vec::<Value>::new());
        assert_eq!(machine.remove(&"b".into()), Ok(true));
        assert_eq!(
            drain(&mut machine),
            vec![
                splice(
                    json!({"target": "next-step", "start": 0, "removedCount": 1, "inserted": [], "outcome": "canceled"})
                ),
                notify(json!({"type": "agent/inbox/discarded", "message": mj("b")})),
            ]
        );
    }

    #[test]
    fn s9_claimed_ids_may_be_delivered_again() {
        let mut machine = running();
        assert_eq!(machine.followup(user("a")), Ok(()));
    }

    #[test]
    fn s28_common_claims_do_not_allocate_a_batch() {
        let mut machine = Machine::new();
        for id in ["s1", "s2", "s3"] {
            machine.inject(user(id)).unwrap();
        }
        machine.followup(user("f")).unwrap();
        let batch = std::iter::from_fn(|| machine.poll_output())
            .find_map(|output| match output {
                Output::Request(Request::PreStep { messages, .. }) => Some(messages),
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
        by_method.followup(user("a")).unwrap();
        by_value.handle(Input::Followup(user("a"))).unwrap();
        by_method.cancel(CancelCause::User, true).unwrap();
        by_value
            .handle(Input::Cancel {
                cause: CancelCause::User,
                keep_inbox: true,
            })
            .unwrap();
        assert_eq!(drain(&mut by_method), drain(&mut by_value));
        assert_eq!(by_method, by_value);
    }
}
