//! The stateright model: the environment's choices as actions, the real core as the transition.
//!
//! [`DeliveryModel::next_state`] clones the state, applies one input to the *real*
//! [`Machine`](coxswain_core::Machine) and feeds what it emitted to the [`Monitor`], and applies
//! the same input (as FORMAT.md JSON) to the executable spec beside it ([`crate::differential`]).
//! No delivery rule lives here: the actions are only what a user, a plugin or the host may do.

use std::sync::Arc;

use coxswain_conformance::input_json;
use std::num::NonZeroUsize;

use coxswain_core::{
    Batch, Behaviour, CancelCause, Config, ErrorInfo, Expect, Input, Machine, MaintenanceInput,
    Message, MessageId, Output, PreStepAnswer, SharedMessage, StepAnswer, Target,
    TurnStoppingAnswer,
};
use coxswain_spec::Spec;
use serde_json::Value;
use stateright::{Model, Property};

use crate::differential::{self, JsonLog, Mismatch, EQUIVALENCE};
use crate::monitor::{Fact, Invariant, Monitor, REDELIVERY};

mod spec_side;

/// The bound of a model run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bound {
    /// Message ids in the pool (`m1`, `m2`, …). Deliveries of a pending id exercise S13.
    pub messages: u8,
    /// Environment operations per path: deliveries, queue edits, cancels, maintenance begins,
    /// disposals and crash-restores. Host answers and maintenance ends are not counted.
    pub operations: u8,
    /// `continue` answers per path (tool steps), so a turn cannot loop forever.
    pub tool_steps: u8,
    /// Whether the environment may crash the process and restore from the log (S49, S50).
    pub crashes: bool,
    /// The delivery memory's capacity `W` (S51); 0 is plain S9.
    pub memory: u8,
    /// The admission bound `P` (S55); 0 is unbounded.
    pub max_pending: u8,
}

impl Bound {
    /// The bound CI checks exhaustively (with symmetry reduction over the ids,
    /// [`DeliveryModel::with_symmetry`]): four ids, more than a path of five operations can
    /// tell apart by role.
    pub const CI: Bound = Bound {
        messages: 4,
        operations: 5,
        tool_steps: 2,
        crashes: true,
        memory: 0,
        max_pending: 0,
    };

    /// The bigger bound documented in docs/verification.md: longer paths.
    pub const DEEP: Bound = Bound {
        messages: 5,
        operations: 6,
        tool_steps: 2,
        crashes: true,
        memory: 0,
        max_pending: 0,
    };

    /// This bound with a delivery memory of `w` ids (S51).
    pub const fn with_memory(self, w: u8) -> Bound {
        Bound { memory: w, ..self }
    }

    /// This bound with an admission bound of `p` items per list (S55; 0: unbounded).
    pub const fn with_max_pending(self, p: u8) -> Bound {
        Bound {
            max_pending: p,
            ..self
        }
    }
}

/// One choice of the environment (user, plugin, host).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// `send(message i, target, wakeup)`: followup, steer, inject, or a quiet next-turn send.
    Send {
        /// Index into the pool.
        message: u8,
        /// The requested list.
        target: Target,
        /// Whether it wakes.
        wakeup: bool,
    },
    /// `send(message i, next-step, true, expect: {turn: n})`: a guarded steer (S54), `n` the
    /// current turn, or (`stale`) the one before: the steer that lost its race with the loop.
    GuardedSteer {
        /// Index into the pool.
        message: u8,
        /// Expect the turn before the last one.
        stale: bool,
    },
    /// `send(message i, next-turn, true, expect: {idleAfter: n})`: a guarded follow-up (S54),
    /// `n` the last turn, or (`stale`) the one before.
    GuardedFollowup {
        /// Index into the pool.
        message: u8,
        /// Expect the turn before the last one.
        stale: bool,
    },
    /// `inject` of a *different* message under pool id i: a reused id (S56).
    Reuse(u8),
    /// `remove(id i)`.
    Remove(u8),
    /// `replace(id i, message j)`.
    Replace(u8, u8),
    /// `prepend(target, message i)`.
    Prepend(Target, u8),
    /// `clear()`.
    Clear,
    /// `cancel(cause, keepInbox)`.
    Cancel(Cause, bool),
    /// `beginMaintenance()`.
    BeginMaintenance,
    /// `endMaintenance()`.
    EndMaintenance,
    /// `dispose()`.
    Dispose,
    /// The process crashes; the log is repaired with the redelivery allowance `A = 1` and the
    /// machine restored from it (S50, S59, S49).
    CrashRestore,
    /// `resume()`: start parked waking work (S57).
    Resume,
    /// The environment stops: no more operations on this path (host answers go on).
    Stop,
    /// Pre-step: enter the claimed batch.
    EnterClaimed,
    /// Pre-step: enter no message.
    EnterEmpty,
    /// Pre-step: enter the claimed batch plus a message the hook added.
    EnterWithExtra,
    /// Pre-step: enter the claimed batch plus the messages this turn claimed and an earlier step
    /// entered (a host that enters them again, S29: S58's `step` stays the first). Offered only
    /// with a delivery memory (the fate records live there).
    EnterAgain,
    /// Pre-step: reject.
    Reject,
    /// Pre-step: fail.
    FailPreStep,
    /// Step: the model stopped.
    StepCompleted,
    /// Step: the model hit the output limit.
    StepMaxTokens,
    /// Step: tools ran.
    StepContinue,
    /// Step: failed.
    FailStep,
    /// Turn-stopping hooks done.
    TurnStoppingDone,
    /// Turn-stopping hooks failed.
    FailTurnStopping,
}

/// A cancel cause (S36).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// `{kind: "user"}`.
    User,
    /// `{kind: "parent"}`.
    Parent,
    /// `{kind: "hook", reason: "stop"}`.
    Hook,
    /// `{kind: "disposed"}` (an ordinary cancel, S24).
    Disposed,
}

impl Cause {
    const ALL: [Cause; 4] = [Cause::User, Cause::Parent, Cause::Hook, Cause::Disposed];

    pub(crate) fn cause(self) -> CancelCause {
        match self {
            Cause::User => CancelCause::User,
            Cause::Parent => CancelCause::Parent,
            Cause::Hook => CancelCause::Hook {
                reason: "stop".into(),
            },
            Cause::Disposed => CancelCause::Disposed,
        }
    }
}

/// A model state: the real machine, its monitor, the spec beside it, and the environment's
/// remaining budget.
///
/// The spec's state is a function of the machine's while the two agree (its `Hash` leaves out
/// the one field no later input reads), and the log is left out of `Hash` and `Eq`, so neither
/// multiplies the state space.
///
/// Its `Debug` is the compact form stateright's Explorer shows (see `explore.rs`).
#[derive(Clone)]
pub struct State {
    /// The machine under check.
    pub machine: Machine,
    /// The invariant monitor and its compact history.
    pub monitor: Monitor,
    /// The executable spec, fed the same inputs.
    pub spec: Spec,
    /// The first disagreement between the machine and the spec on this path, if any.
    pub mismatch: Option<Arc<Mismatch>>,
    /// The durable log of this path as JSON, which the spec restores from at a crash.
    pub log: JsonLog,
    /// Environment operations left on this path.
    pub operations_left: u8,
    /// `continue` answers left on this path.
    pub tool_steps_left: u8,
    /// The message ids of the bound's pool (`m1`…), for symmetry reduction.
    pub pool: Arc<[MessageId]>,
    /// Set only on a representative (symmetry reduction): the state's hash with its ids renamed
    /// canonically, which then stands for the whole state in `Hash` and `Eq`.
    pub canonical: Option<u64>,
}

impl State {
    /// Everything that tells two states apart (the log and the pool excepted: history and a
    /// constant of the model): the machine by its [`Machine::behaviour`].
    #[allow(clippy::type_complexity)]
    pub(crate) fn parts(
        &self,
    ) -> (
        Behaviour<'_>,
        &Monitor,
        &Spec,
        &Option<Arc<Mismatch>>,
        u8,
        u8,
    ) {
        (
            self.machine.behaviour(),
            &self.monitor,
            &self.spec,
            &self.mismatch,
            self.operations_left,
            self.tool_steps_left,
        )
    }
}

impl std::hash::Hash for State {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self.canonical {
            Some(key) => key.hash(state),
            None => self.parts().hash(state),
        }
    }
}

impl PartialEq for State {
    fn eq(&self, other: &Self) -> bool {
        match (self.canonical, other.canonical) {
            (Some(one), Some(two)) => one == two,
            _ => self.parts() == other.parts(),
        }
    }
}

impl Eq for State {}

/// The model of one agent session under every environment the bound allows.
#[derive(Clone, Debug)]
pub struct DeliveryModel {
    bound: Bound,
    /// Check one state per class of states that differ only by a renaming of the pool's ids
    /// (depth-first, the search stateright reduces by symmetry).
    symmetry: bool,
    pool: Vec<SharedMessage>,
    /// A different message under each pool id (S56's reuse).
    variants: Vec<SharedMessage>,
    extra: SharedMessage,
    /// Every id the environment uses (the pool's, then the hook's extra message's): the ids
    /// whose fate (S58) is compared in every state.
    ids: Vec<MessageId>,
}

impl DeliveryModel {
    /// A model with this bound, checking the real machine.
    pub fn new(bound: Bound) -> Self {
        let pool: Vec<SharedMessage> = (1..=bound.messages)
            // Only the id tells two pool messages apart: the ids are interchangeable (symmetry).
            .map(|i| Arc::new(Message::user(format!("m{i}"), "hello")))
            .collect();
        let variants = (1..=bound.messages)
            .map(|i| Arc::new(Message::user(format!("m{i}"), "something else")))
            .collect();
        let extra: SharedMessage = Arc::new(Message::new(
            "hook-extra",
            serde_json::json!({"kind": "plugin", "name": "hook"}),
            "added by the pre-step hook".into(),
        ));
        let ids = pool
            .iter()
            .chain([&extra])
            .map(|m: &SharedMessage| m.id().clone())
            .collect();
        DeliveryModel {
            bound,
            symmetry: false,
            pool,
            variants,
            extra,
            ids,
        }
    }

    /// The bound.
    pub fn bound(&self) -> Bound {
        self.bound
    }

    /// This model checked with symmetry reduction over message ids: one state per class of
    /// states that differ only by a renaming of the pool's ids (`crate::symmetry`), searched
    /// depth-first (stateright reduces only its depth-first search). Counterexamples are then
    /// not the shortest.
    pub fn with_symmetry(mut self) -> Self {
        self.symmetry = true;
        self
    }

    /// Whether the check reduces by symmetry.
    pub fn symmetry(&self) -> bool {
        self.symmetry
    }

    /// The machine's configuration under this bound.
    pub fn config(&self) -> Config {
        let config = Config::new().with_delivery_memory(usize::from(self.bound.memory));
        match NonZeroUsize::new(usize::from(self.bound.max_pending)) {
            Some(limit) => config.with_max_pending(limit),
            None => config,
        }
    }

    /// The spec's configuration under this bound: the same memory and admission bound.
    fn spec_config(&self) -> coxswain_spec::Config {
        coxswain_spec::Config {
            memory: usize::from(self.bound.memory),
            max_pending: NonZeroUsize::new(usize::from(self.bound.max_pending)),
        }
    }

    /// A fresh machine as this model checks it.
    pub fn machine(&self) -> Machine {
        Machine::with_config(self.config())
    }

    /// A fresh spec with the same delivery memory and admission bound.
    pub fn spec(&self) -> Spec {
        Spec::with_config(self.spec_config())
    }

    pub(crate) fn message(&self, index: u8) -> Option<SharedMessage> {
        self.pool.get(usize::from(index)).cloned()
    }

    /// The input an action stands for in a state, or `None` for crash-restore and stop (which
    /// are not inputs) and for answers that need a batch when none was requested.
    pub fn input(&self, state: &State, action: Action) -> Option<Input> {
        let error = |what: &str| ErrorInfo::new(format!("{what} failed"), "E_MODEL");
        Some(match action {
            Action::Send {
                message,
                target,
                wakeup,
            } => Input::delivery(self.message(message)?, target, wakeup),
            Action::GuardedSteer { message, stale } => Input::Send {
                message: self.message(message)?,
                target: Target::NextStep,
                wakeup: true,
                expect: Some(Expect::Turn(expected_turn(state, stale))),
            },
            Action::GuardedFollowup { message, stale } => Input::Send {
                message: self.message(message)?,
                target: Target::NextTurn,
                wakeup: true,
                expect: Some(Expect::IdleAfter(expected_turn(state, stale))),
            },
            Action::Reuse(i) => Input::Inject(self.variants.get(usize::from(i))?.clone()),
            Action::Remove(i) => Input::Remove(self.message(i)?.id().clone()),
            Action::Replace(i, j) => Input::Replace {
                id: self.message(i)?.id().clone(),
                message: self.message(j)?,
            },
            Action::Prepend(target, i) => Input::Prepend {
                target,
                message: self.message(i)?,
            },
            Action::Clear => Input::Clear {},
            Action::Cancel(cause, keep_inbox) => Input::Cancel {
                cause: cause.cause(),
                keep_inbox,
            },
            Action::BeginMaintenance => Input::Maintenance(MaintenanceInput::Begin),
            Action::EndMaintenance => Input::Maintenance(MaintenanceInput::End),
            Action::Dispose => Input::Dispose {},
            Action::Resume => Input::Resume {},
            Action::CrashRestore | Action::Stop => return None,
            Action::EnterClaimed => {
                Input::PreStep(PreStepAnswer::Enter(claimed(state).unwrap_or_default()))
            }
            Action::EnterEmpty => Input::PreStep(PreStepAnswer::Enter(Batch::new())),
            Action::EnterWithExtra => {
                let mut batch = claimed(state).unwrap_or_default();
                batch.push(self.extra.clone());
                Input::PreStep(PreStepAnswer::Enter(batch))
            }
            Action::EnterAgain => {
                let mut batch = claimed(state).unwrap_or_default();
                for message in state.monitor.entered_claims() {
                    batch.push(message);
                }
                Input::PreStep(PreStepAnswer::Enter(batch))
            }
            Action::Reject => Input::PreStep(PreStepAnswer::Reject),
            Action::FailPreStep => Input::PreStep(PreStepAnswer::Fail(error("pre-step"))),
            Action::StepCompleted => Input::Step(StepAnswer::Completed),
            Action::StepMaxTokens => Input::Step(StepAnswer::MaxTokens),
            Action::StepContinue => Input::Step(StepAnswer::Continue),
            Action::FailStep => Input::Step(StepAnswer::Fail(error("step"))),
            Action::TurnStoppingDone => Input::TurnStopping(TurnStoppingAnswer::Done),
            Action::FailTurnStopping => {
                Input::TurnStopping(TurnStoppingAnswer::Fail(error("turn-stopping")))
            }
        })
    }
}

/// The turn a guarded send expects: the last one, or (`stale`) the one before it; before turn 1,
/// 2^53 − 1, a JSON-safe number (S46) that no turn of the model reaches.
fn expected_turn(state: &State, stale: bool) -> u64 {
    let last = state.machine.last_turn();
    match (stale, last.checked_sub(1)) {
        (false, _) => last,
        (true, Some(before)) => before,
        (true, None) => coxswain_core::Restorer::MAX_TURN + 1,
    }
}

fn claimed(state: &State) -> Option<Batch> {
    state.monitor.pre_step_batch().cloned()
}

/// One `always` property per invariant.
macro_rules! always_holds {
    ($($invariant:ident),* $(,)?) => {
        vec![$(Property::always(
            Invariant::$invariant.name(),
            |_: &DeliveryModel, s: &State| !s.monitor.violated(Invariant::$invariant),
        )),*]
    };
}

/// One `sometimes` property per fact: proof that the bound reaches it.
macro_rules! sometimes_reached {
    ($($fact:ident),* $(,)?) => {
        vec![$(Property::sometimes(
            Fact::$fact.name(),
            |_: &DeliveryModel, s: &State| s.monitor.saw(Fact::$fact),
        )),*]
    };
}

/// The name of the `eventually` property checking I9.
pub const LIVENESS: &str = "I9 liveness";

impl Model for DeliveryModel {
    type State = State;
    type Action = Action;

    fn format_action(&self, action: &Action) -> String {
        self.action_name(action)
    }

    fn format_step(&self, last: &State, action: Action) -> Option<String> {
        self.next_state(last, action)
            .map(|next| DeliveryModel::step_outcome(last, &next))
    }

    fn init_states(&self) -> Vec<State> {
        vec![State {
            machine: self.machine(),
            monitor: Monitor::with_config(self.config()),
            spec: self.spec(),
            mismatch: None,
            log: JsonLog::default(),
            operations_left: self.bound.operations,
            tool_steps_left: self.bound.tool_steps,
            pool: self.pool.iter().map(|m| m.id().clone()).collect(),
            canonical: None,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.monitor.violation().is_some() || state.mismatch.is_some() {
            return;
        }
        // The host answers whatever is outstanding; answers to nothing exercise S4.
        actions.extend([
            Action::EnterClaimed,
            Action::EnterEmpty,
            Action::EnterWithExtra,
            Action::Reject,
            Action::FailPreStep,
            Action::StepCompleted,
            Action::StepMaxTokens,
            Action::FailStep,
            Action::TurnStoppingDone,
            Action::FailTurnStopping,
            Action::EndMaintenance,
        ]);
        if state.tool_steps_left > 0 {
            actions.push(Action::StepContinue);
        }
        if self.bound.memory > 0 && !state.monitor.entered_claims().is_empty() {
            actions.push(Action::EnterAgain);
        }
        if state.operations_left == 0 {
            return;
        }
        actions.push(Action::Stop);
        let messages = self.bound.messages;
        for i in 0..messages {
            for (target, wakeup) in Target::ALL
                .into_iter()
                .flat_map(|target| [(target, true), (target, false)])
            {
                actions.push(Action::Send {
                    message: i,
                    target,
                    wakeup,
                });
            }
        }
        for i in 0..messages {
            for stale in [false, true] {
                actions.push(Action::GuardedSteer { message: i, stale });
                actions.push(Action::GuardedFollowup { message: i, stale });
            }
            actions.push(Action::Reuse(i));
        }
        for i in 0..messages {
            actions.push(Action::Remove(i));
            actions.extend((0..messages).map(|j| Action::Replace(i, j)));
            actions.push(Action::Prepend(Target::NextTurn, i));
            actions.push(Action::Prepend(Target::NextStep, i));
        }
        actions.push(Action::Clear);
        for cause in Cause::ALL {
            actions.push(Action::Cancel(cause, false));
            actions.push(Action::Cancel(cause, true));
        }
        actions.extend([Action::BeginMaintenance, Action::Dispose, Action::Resume]);
        if self.bound.crashes && !state.machine.is_disposed() {
            actions.push(Action::CrashRestore);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut next = last.clone();
        next.canonical = None;
        match action {
            Action::Stop => {
                next.operations_left = 0;
                return Some(next);
            }
            Action::CrashRestore => {
                next.operations_left = next.operations_left.saturating_sub(1);
                if let Ok((machine, repair)) =
                    next.monitor.crash_and_restore_redelivering(REDELIVERY)
                {
                    next.machine = machine;
                    self.restore_spec(&mut next, &repair);
                    let _ = next.monitor.check_recovery(&next.machine, &self.ids);
                }
                return Some(next);
            }
            Action::StepContinue => next.tool_steps_left = next.tool_steps_left.saturating_sub(1),
            Action::EndMaintenance
            | Action::EnterClaimed
            | Action::EnterEmpty
            | Action::EnterWithExtra
            | Action::EnterAgain
            | Action::Reject
            | Action::FailPreStep
            | Action::StepCompleted
            | Action::StepMaxTokens
            | Action::FailStep
            | Action::TurnStoppingDone
            | Action::FailTurnStopping => {}
            _ => next.operations_left = next.operations_left.saturating_sub(1),
        }
        let input = self.input(last, action)?;
        let (result, outputs) = match next.machine.handle(input.clone()) {
            Ok(transition) => (Ok(()), transition.into_outputs().collect()),
            Err(rejected) => (Err(rejected), Vec::new()),
        };
        let observed =
            next.monitor
                .observe(&last.machine, &input, &result, &outputs, &next.machine);
        let agreed = self.differential(&mut next, &input, result.as_ref().map(|_| ()), &outputs);
        // A rejected input changed nothing (checked): not a new state, unless it broke S5, the
        // spec disagreed, or it is a retry the delivery memory refused (S52), a situation worth
        // reaching; likewise a `turn-mismatch`, `conflict` or `full`, S54–S56).
        if result.is_err() && observed.is_ok() && agreed && !next.monitor.saw_rejection_fact() {
            return None;
        }
        if outputs
            .iter()
            .any(|output| matches!(output, Output::Event(_)))
        {
            // I15, I16: the fates, and the log so far repaired with A = 1 and restored. Only
            // durable events change a fate, the log or what its repair restores (S58): after an
            // input without one, the check would repeat the last state's verdict.
            let _ = next.monitor.check_recovery(&next.machine, &self.ids);
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = always_holds![
            I1SpliceProjection,
            I2Identity,
            I3Conservation,
            I4ClaimShape,
            I5TurnEnclosure,
            I6Cancel,
            I7IdleInjection,
            I8Status,
            I10OneRequest,
            S5Rejection,
            S10SpliceShape,
            S18Retarget,
            S33ToolStepContinues,
            S39OneAbort,
            S49ReplayEquivalence,
            I11Once,
            NoSpuriousActivity,
            I12Guard,
            I13Bound,
            I14NoSilentLoss,
            I15Fate,
            I16NothingUnseenLost,
            S57Resume,
        ];
        // S1–S59: the core agrees with the executable spec in every reachable state.
        properties.push(Property::always(EQUIVALENCE, |_, s: &State| {
            s.mismatch.is_none()
        }));
        // I9: once the environment stops, every waking delivery is claimed or discarded unless
        // the spec lets it park, and the machine is quiescent. The condition can only hold once
        // no operation is left, which every terminal state satisfies (`Stop`), so it is
        // evaluated where the path ends rather than vacuously at its start.
        properties.push(Property::eventually(LIVENESS, |_, s: &State| {
            s.operations_left == 0 && s.machine.is_quiescent() && s.monitor.waking_work_settled()
        }));
        properties.extend(sometimes_reached![
            BlockedTurnContinued,
            CompletedTurnContinued,
            LatchReplayedAtExit,
            LatchReplayedAtMaintenanceEnd,
            WakeLatchedDuringMaintenance,
            KeepInboxParked,
            ToolContextClaimed,
            MaxTokensThenContinue,
            RestoredMidTurn,
            DisposedWhileRunning,
            Disposed,
            TurnFailed,
            SteerRetargeted,
            GuardHeld,
            TurnMismatchRefused,
            ConflictRefused,
            ResumeWoke,
        ]);
        if self.bound.crashes {
            properties.extend(sometimes_reached![Redelivered, AllowanceSpent]);
        }
        if self.bound.memory > 0 {
            properties.extend(sometimes_reached![
                RetryRefused,
                ForgottenIdDeliveredAgain,
                FateSteppedAndEnded
            ]);
        }
        if self.bound.max_pending > 0 {
            properties.extend(sometimes_reached![FullRefused]);
        }
        properties
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The property lists above name each invariant and fact by hand (stateright takes plain
    /// function pointers); this keeps them in step with the monitor's enums.
    #[test]
    fn every_invariant_and_fact_is_a_property_exactly_once() {
        let model = DeliveryModel::new(Bound::CI);
        let names: Vec<&str> = model.properties().iter().map(|p| p.name).collect();
        let mut expected: Vec<&str> = Invariant::ALL.iter().map(|i| i.name()).collect();
        expected.push(LIVENESS);
        expected.push(EQUIVALENCE);
        expected.extend(
            Fact::ALL
                .iter()
                .chain(&Fact::MODEL_ONLY)
                .filter(|f| !f.needs_memory() && !f.needs_bound())
                .map(|f| f.name()),
        );
        let (mut sorted_names, mut sorted_expected) = (names.clone(), expected);
        sorted_names.sort_unstable();
        sorted_expected.sort_unstable();
        assert_eq!(sorted_names, sorted_expected);
        let properties = model.properties();
        for invariant in Invariant::ALL {
            let property = properties
                .iter()
                .find(|p| p.name == invariant.name())
                .expect("listed");
            assert!(matches!(
                property.expectation,
                stateright::Expectation::Always
            ));
        }
    }
}
