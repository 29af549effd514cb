//! The stateright model of the session layer ([`coxswain_session::Session`]): the environment
//! stages inputs into batches of up to [`SessionBound::batch`] members, seals them, and reports
//! each write `persisted` or `failed`; a host answers only requests it was released; time jumps
//! past the abort grace and the retry pause. The transition is the real `Session` over the real `Machine`; beside it
//! runs a *reference* machine fed, one input at a time and without batches, only the members of
//! persisted batches: what the session must be equivalent to.
//!
//! Properties (`always`, checked at every transition):
//! * [`SessionProperty::DurableBeforeRelease`]: a persisted batch released the effects of
//!   exactly the inputs whose events the write made durable (the durable log equals the
//!   reference's log);
//! * [`SessionProperty::ReleaseOrder`]: it released each member's effects, then its
//!   acknowledgement, in input order (as the reference emitted them);
//! * [`SessionProperty::RolledBack`]: a failed batch left the machine equal to the machine before
//!   it (and to the reference, which never saw it);
//! * [`SessionProperty::AbortEndsByDeadline`]: once an aborted request's grace has run out, it
//!   is no longer outstanding;
//! * [`SessionProperty::AnswersRetried`]: once the retry pause after a failed batch is over, the
//!   answers it held (the host does not answer twice) are staged again, not lost.
//!
//! The agent loop over the session ([`coxswain_session::AgentLoop`]) has a model of its own,
//! driven as a driver drives it: [`check_agent`] (module `agent`, [`AgentProperty`]).

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::{
    Behaviour, CancelCause, Config, Effect, Event, Input, Machine, Message, Outstanding,
    PreStepAnswer, Rejected, Request, SharedMessage, StepAnswer, TurnStoppingAnswer,
};
use coxswain_log::{Entry, HostEvent};
use coxswain_session::{Ack, HostFailure, Options, Refused, Release, Session, Timeout};
use stateright::{Model, Property};

mod agent;
mod report;

pub use report::{ModelReport, ModelVerdict};

pub use agent::{
    check_agent, AgentAction, AgentBound, AgentModel, AgentProperty, AgentReport, AgentState,
    AgentVerdict, Submit,
};

/// The abort grace of the model's sessions, in its time unit (seconds).
const GRACE: u64 = 1;
/// The retry pause of the model's sessions after a failed batch, in the same unit.
const RETRY: u64 = 1;

/// The bound of a session-model run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionBound {
    /// Message ids in the pool.
    pub messages: u8,
    /// User operations per path (sends, cancels), time jumps and failed writes.
    pub operations: u8,
    /// The most members a batch stages before it must be sealed.
    pub batch: u8,
    /// The delivery memory's capacity `W` (S51).
    pub memory: u8,
}

impl SessionBound {
    /// The bound CI checks exhaustively.
    pub const CI: SessionBound = SessionBound {
        messages: 2,
        operations: 5,
        batch: 3,
        memory: 1,
    };
}

/// One choice of the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionAction {
    /// Stage `followup(m{i})`.
    Followup(u8),
    /// Stage `steer(m{i})`.
    Steer(u8),
    /// Stage `inject(m{i})`.
    Inject(u8),
    /// Stage `cancel(user)`.
    Cancel,
    /// The host answers the released `preStep` with the batch it was given.
    EnterClaimed,
    /// The host answers the released `step`: the model stopped.
    StepCompleted,
    /// The host answers the released `turnStopping`: done.
    TurnStoppingDone,
    /// The host's released call raised ([`HostFailure::Raised`]).
    HostRaised,
    /// The host records an event inside the released step.
    Record,
    /// Seal the batch and write it.
    Seal,
    /// The write is durable.
    Persist,
    /// The write failed.
    Fail,
    /// Time jumps past the abort grace; the session handles the timeout.
    Tick,
}

/// The properties of the session model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SessionProperty {
    /// No effect is released before its batch is durable.
    DurableBeforeRelease,
    /// Effects, then acknowledgements, in input order.
    ReleaseOrder,
    /// A failed batch is undone.
    RolledBack,
    /// Every aborted request is answered by its deadline.
    AbortEndsByDeadline,
    /// A failed batch's held answers are staged again once its retry pause is over.
    AnswersRetried,
}

impl SessionProperty {
    /// Every property.
    pub const ALL: [SessionProperty; 5] = [
        SessionProperty::DurableBeforeRelease,
        SessionProperty::ReleaseOrder,
        SessionProperty::RolledBack,
        SessionProperty::AbortEndsByDeadline,
        SessionProperty::AnswersRetried,
    ];

    /// The property's name as the checker reports it.
    pub const fn name(self) -> &'static str {
        match self {
            SessionProperty::DurableBeforeRelease => {
                "session: no effect before its batch is durable"
            }
            SessionProperty::ReleaseOrder => "session: effects and acks in input order",
            SessionProperty::RolledBack => "session: a failed batch is undone",
            SessionProperty::AbortEndsByDeadline => "session: an aborted call ends by its deadline",
            SessionProperty::AnswersRetried => "session: a failed batch's held answers are retried",
        }
    }

    /// The property of a name.
    pub fn named(name: &str) -> Option<SessionProperty> {
        SessionProperty::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// The situations a passing run must reach (`sometimes`), so that it is not vacuous: a bit of
/// [`SessionState::reached`] each.
const REACHED: [&str; 5] = [
    "session: a batch of the full size persisted",
    "session: a batch with a claim failed and was undone",
    "session: an aborted call was abandoned",
    "session: a batch holding an abandoned answer failed",
    "session: a failed batch's held answer was staged again",
];

/// A state: the session, the reference, and what the environment knows.
#[derive(Clone, Debug)]
pub struct SessionState {
    /// The session under check.
    pub session: Session,
    /// The machine fed only the members of persisted batches, one input at a time.
    pub reference: Machine,
    /// The members staged in the open batch: an input, or `None` for host events.
    staged: Vec<Option<Input>>,
    /// The machine before the open batch.
    before: Option<Machine>,
    /// The machine events the sealed batch's write holds, as handed out at the seal.
    writing: Vec<Event>,
    /// The durable log: the writes of persisted batches.
    durable: Vec<Event>,
    /// The reference's log.
    reference_log: Vec<Event>,
    /// The latest request the host was released (what it may answer).
    released: Option<Request>,
    /// Now, in the model's time unit.
    now: u64,
    /// An aborted request and when its grace runs out (the model's own account).
    deadline: Option<(Outstanding, u64)>,
    /// The answers failed batches held, with their tickets (the host gave them once and will
    /// not again), and when the retry pause ends (the model's own account).
    held: Vec<(coxswain_session::Ticket, Input)>,
    retry_due: Option<u64>,
    operations_left: u8,
    /// The first broken property on this path, with what broke it.
    pub violation: Option<(SessionProperty, Arc<str>)>,
    /// The [`REACHED`] situations this path reached, a bit each.
    reached: u8,
}

impl SessionState {
    /// What tells two states apart: the logs and the clock are history (the deadline counts
    /// relative to now); the machines count by their [`Machine::behaviour`].
    #[allow(clippy::type_complexity)]
    fn key(
        &self,
    ) -> (
        Behaviour<'_>,
        Behaviour<'_>,
        &[Option<Input>],
        bool,
        &Option<Request>,
        Option<(Outstanding, u64)>,
        Vec<&Input>,
        (Option<u64>, Option<u64>, Option<u64>),
        u8,
        Option<SessionProperty>,
        u8,
    ) {
        (
            self.session.machine().behaviour(),
            self.reference.behaviour(),
            &self.staged,
            self.session.is_sealed(),
            &self.released,
            self.deadline
                .map(|(request, at)| (request, at.saturating_sub(self.now))),
            // The held answers, not their tickets: batch numbers are history.
            self.held.iter().map(|(_, input)| input).collect(),
            // The deadlines, relative to now: the model's retry, the session's next one and its
            // grace (a retry pause hides the grace from `poll_timeout`).
            (
                self.retry_due.map(|at| at.saturating_sub(self.now)),
                self.session
                    .poll_timeout()
                    .map(|at| (at.as_secs()).saturating_sub(self.now)),
                self.session
                    .abort_deadline()
                    .map(|at| (at.as_secs()).saturating_sub(self.now)),
            ),
            self.operations_left,
            self.violation.as_ref().map(|(property, _)| *property),
            self.reached,
        )
    }

    fn violate(&mut self, property: SessionProperty, detail: String) {
        if self.violation.is_none() {
            self.violation = Some((property, detail.into()));
        }
    }
}

impl Hash for SessionState {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialEq for SessionState {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for SessionState {}

/// The model of one session under every environment the bound allows.
#[derive(Clone, Debug)]
pub struct SessionModel {
    bound: SessionBound,
    pool: Vec<SharedMessage>,
}

impl SessionModel {
    /// A model with this bound.
    pub fn new(bound: SessionBound) -> Self {
        SessionModel {
            bound,
            pool: (1..=bound.messages)
                .map(|i| Arc::new(Message::user(format!("m{i}"), "hello")))
                .collect(),
        }
    }

    fn config(&self) -> Config {
        Config::new().with_delivery_memory(usize::from(self.bound.memory))
    }

    fn options() -> Options {
        Options {
            abort_grace: Duration::from_secs(GRACE),
            retry_after: Duration::from_secs(RETRY),
            ..Options::default()
        }
    }

    fn message(&self, i: u8) -> Option<SharedMessage> {
        self.pool.get(usize::from(i)).cloned()
    }

    /// The input a staging action stands for, if the environment can give it now.
    fn input(&self, state: &SessionState, action: SessionAction) -> Option<Input> {
        let answering = |request: &Request| {
            state.session.machine().outstanding() == Some(request.outstanding())
        };
        Some(match action {
            SessionAction::Followup(i) => Input::Followup(self.message(i)?),
            SessionAction::Steer(i) => Input::Steer(self.message(i)?),
            SessionAction::Inject(i) => Input::Inject(self.message(i)?),
            SessionAction::Cancel => Input::Cancel {
                cause: CancelCause::User,
                keep_inbox: false,
            },
            SessionAction::EnterClaimed => match &state.released {
                Some(request @ Request::PreStep { messages, .. }) if answering(request) => {
                    Input::PreStep(PreStepAnswer::Enter(messages.clone()))
                }
                _ => return None,
            },
            SessionAction::StepCompleted => match &state.released {
                Some(request @ Request::Step { .. }) if answering(request) => {
                    Input::Step(StepAnswer::Completed)
                }
                _ => return None,
            },
            SessionAction::TurnStoppingDone => match &state.released {
                Some(request @ Request::TurnStopping { .. }) if answering(request) => {
                    Input::TurnStopping(TurnStoppingAnswer::Done)
                }
                _ => return None,
            },
            SessionAction::HostRaised => match &state.released {
                Some(request) if answering(request) => {
                    HostFailure::Raised.answer(request.outstanding(), "model")
                }
                _ => return None,
            },
            _ => return None,
        })
    }

    /// Feeds the reference one input and collects whether it found its id, its effects, and
    /// (into the reference's log) its events.
    fn feed_reference(
        next: &mut SessionState,
        input: &Input,
    ) -> Result<(bool, Vec<Effect>), Rejected> {
        // Only a remove or a replace can find its id not pending (S15).
        let transition = match input.clone() {
            Input::Remove(id) => next.reference.remove(&id)?,
            Input::Replace { id, message } => next.reference.replace(&id, message)?,
            input => Some(next.reference.handle(input)?),
        };
        let Some(transition) = transition else {
            return Ok((false, Vec::new()));
        };
        next.reference_log
            .extend(transition.events().iter().cloned());
        Ok((true, transition.persisted().collect()))
    }

    fn persist(&self, next: &mut SessionState) {
        let Some(batch) = next.session.seal().map(|append| append.batch) else {
            return;
        };
        let now = Duration::from_secs(next.now);
        let persisted = next
            .session
            .persisted(batch, now)
            .map(|released| released.collect::<Vec<_>>());
        let released = match persisted {
            Ok(released) => released,
            Err(error) => {
                next.violate(SessionProperty::ReleaseOrder, format!("persisted: {error}"));
                return;
            }
        };
        next.durable.append(&mut next.writing);
        // The log took a write: the retry pause is over, the held answers due at once.
        if next.retry_due.is_some() {
            next.retry_due = (!next.held.is_empty()).then_some(next.now);
        }
        // What the reference says the batch must release: each member's effects, then its ack.
        let mut expected = Vec::new();
        for (index, member) in std::mem::take(&mut next.staged).into_iter().enumerate() {
            let ticket = coxswain_session::Ticket { batch, index };
            match member {
                Some(input) => match SessionModel::feed_reference(next, &input) {
                    Ok((found, effects)) => {
                        expected.extend(effects.into_iter().map(Release::Effect));
                        expected.push(Release::Ack(ticket, Ack::Input { found }));
                    }
                    // A member refused against the staged batch: the reference, fed the batch's
                    // durable members only, must refuse it the same way.
                    Err(rejected) => {
                        let refused = Refused::Rejected(rejected);
                        expected.push(Release::Ack(ticket, Ack::Refused(refused)));
                    }
                },
                None => expected.push(Release::Ack(ticket, Ack::Recorded)),
            }
        }
        let acked = released
            .iter()
            .filter(|release| matches!(release, Release::Ack(..)))
            .count();
        if acked == usize::from(self.bound.batch) {
            next.reached |= 1;
        }
        if next.durable != next.reference_log {
            next.violate(
                SessionProperty::DurableBeforeRelease,
                format!(
                    "batch {batch:?} released {acked} members, but the durable log holds {} \
                     events where the reference emitted {}",
                    next.durable.len(),
                    next.reference_log.len()
                ),
            );
        }
        if released != expected {
            next.violate(
                SessionProperty::ReleaseOrder,
                format!("batch {batch:?} released {released:?}, expected {expected:?}"),
            );
        }
        if next.session.machine().behaviour() != next.reference.behaviour() {
            next.violate(
                SessionProperty::ReleaseOrder,
                "the persisted session differs from the reference".into(),
            );
        }
        for release in &released {
            match release {
                Release::Effect(Effect::Request(request)) => next.released = Some(request.clone()),
                Release::Effect(Effect::Abort(_)) => {
                    next.deadline = next
                        .session
                        .machine()
                        .outstanding()
                        .map(|request| (request, next.now + GRACE));
                }
                _ => {}
            }
        }
        next.before = None;
    }

    fn fail(next: &mut SessionState) {
        let Some(batch) = next.session.seal().map(|append| append.batch) else {
            return;
        };
        // A claim inside the batch changed the delivery memory (S51): the rollback undoes it.
        let claimed = next
            .before
            .as_ref()
            .is_some_and(|before| !before.delivered().eq(next.session.machine().delivered()));
        let failed = match next.session.failed(batch, Duration::from_secs(next.now)) {
            Ok(failed) => failed,
            Err(_) => {
                next.violate(SessionProperty::RolledBack, "failed() refused".into());
                return;
            }
        };
        // The answers it held are the session's now: the host gave them and will not again.
        for ticket in &failed.held {
            if let Some(Some(answer)) = next.staged.get(ticket.index) {
                next.held.push((*ticket, answer.clone()));
                next.released = None;
            }
        }
        // Any failed batch restarts the pause while answers are held (a failing log is not
        // written to again at once).
        if !next.held.is_empty() {
            next.retry_due = Some(next.now + RETRY);
        }
        let abandoned = next.staged.iter().flatten().any(|input| {
            matches!(input, Input::PreStep(PreStepAnswer::Fail(e)) if &*e.code == "host-abandoned")
        });
        next.staged.clear();
        next.writing.clear();
        let before = next.before.take();
        if before.as_ref() != Some(next.session.machine()) {
            next.violate(
                SessionProperty::RolledBack,
                format!(
                    "after the failed batch {batch:?} the machine is {:?}, before it {before:?}",
                    next.session.machine()
                ),
            );
        } else if next.session.machine().behaviour() != next.reference.behaviour() {
            next.violate(
                SessionProperty::RolledBack,
                "after the failed batch the machine differs from the reference".into(),
            );
        } else if claimed {
            next.reached |= 2;
        }
        if abandoned {
            next.reached |= 8;
        }
    }

    fn tick(next: &mut SessionState) {
        next.now += GRACE;
        let before = next.session.machine().clone();
        let now = Duration::from_secs(next.now);
        // One deadline per call: the retry, then a grace it held back.
        for _ in 0..2 {
            match next.session.handle_timeout(now) {
                Some(Timeout::Abandoned { request, .. }) => {
                    next.before.get_or_insert_with(|| before.clone());
                    next.staged
                        .push(Some(HostFailure::Abandoned.answer(request, "")));
                    next.reached |= 4;
                }
                Some(Timeout::Retried { answers }) => {
                    for (held, staged) in answers {
                        let at = next.held.iter().position(|(ticket, _)| *ticket == held);
                        let Some((_, answer)) = at.map(|at| next.held.remove(at)) else {
                            let detail = format!("retried {held:?}, which no failed batch held");
                            next.violate(SessionProperty::AnswersRetried, detail);
                            continue;
                        };
                        if staged.is_ok() {
                            next.before.get_or_insert_with(|| before.clone());
                            next.staged.push(Some(answer));
                            next.reached |= 16;
                        }
                    }
                }
                None => break,
            }
        }
        if next.retry_due.is_some_and(|at| next.now >= at) {
            next.retry_due = None;
            if !next.held.is_empty() {
                let detail = format!("{:?} still held past the retry pause", next.held);
                next.violate(SessionProperty::AnswersRetried, detail);
            }
        }
        if let Some((request, at)) = next.deadline {
            if next.now >= at && next.session.machine().outstanding() == Some(request) {
                next.violate(
                    SessionProperty::AbortEndsByDeadline,
                    format!("{request:?} is still outstanding past its deadline"),
                );
            }
            if next.session.machine().outstanding() != Some(request) {
                next.deadline = None;
            }
        }
    }
}

impl Model for SessionModel {
    type State = SessionState;
    type Action = SessionAction;

    fn init_states(&self) -> Vec<SessionState> {
        let machine = Machine::with_config(self.config());
        vec![SessionState {
            session: Session::new(machine.clone(), SessionModel::options()),
            reference: machine,
            staged: Vec::new(),
            before: None,
            writing: Vec::new(),
            durable: Vec::new(),
            reference_log: Vec::new(),
            released: None,
            now: 0,
            deadline: None,
            held: Vec::new(),
            retry_due: None,
            operations_left: self.bound.operations,
            violation: None,
            reached: 0,
        }]
    }

    fn actions(&self, state: &SessionState, actions: &mut Vec<SessionAction>) {
        if state.violation.is_some() {
            return;
        }
        if state.session.is_sealed() {
            actions.push(SessionAction::Persist);
            if state.operations_left > 0 {
                actions.push(SessionAction::Fail);
            }
        } else if state.session.has_batch() {
            actions.push(SessionAction::Seal);
        }
        // Inputs keep arriving while a write is in flight: the session must refuse them
        // (`Refused::Sealed`), so they make no new state.
        if state.staged.len() < usize::from(self.bound.batch) {
            actions.extend([
                SessionAction::EnterClaimed,
                SessionAction::StepCompleted,
                SessionAction::TurnStoppingDone,
                SessionAction::HostRaised,
                SessionAction::Record,
            ]);
            if state.operations_left > 0 {
                for i in 0..self.bound.messages {
                    actions.extend([
                        SessionAction::Followup(i),
                        SessionAction::Steer(i),
                        SessionAction::Inject(i),
                    ]);
                }
                actions.push(SessionAction::Cancel);
            }
        }
        // Time passes whenever a grace runs, by the session's account or the model's own.
        let waiting = state.session.poll_timeout().is_some() || state.deadline.is_some();
        if state.operations_left > 0 && waiting && !state.session.is_sealed() {
            actions.push(SessionAction::Tick);
        }
    }

    fn next_state(&self, last: &SessionState, action: SessionAction) -> Option<SessionState> {
        let mut next = last.clone();
        match action {
            SessionAction::Seal => {
                let entries = next.session.seal()?.entries;
                next.writing = entries
                    .iter()
                    .filter_map(|entry| match entry {
                        Entry::Machine(event) => Some(event.clone()),
                        Entry::Host(_) => None,
                    })
                    .collect();
            }
            SessionAction::Persist => self.persist(&mut next),
            SessionAction::Fail => {
                next.operations_left -= 1;
                SessionModel::fail(&mut next);
            }
            SessionAction::Tick => {
                next.operations_left -= 1;
                SessionModel::tick(&mut next);
            }
            SessionAction::Record => {
                let Some(Outstanding::Step { turn, step }) = next.session.machine().outstanding()
                else {
                    return None;
                };
                if !matches!(last.released, Some(Request::Step { .. })) {
                    return None;
                }
                let event = HostEvent::new("model/output", serde_json::json!("hi")).ok()?;
                let before = next.session.machine().clone();
                next.session.record(turn, step, vec![event]).ok()?;
                next.before.get_or_insert(before);
                next.staged.push(None);
            }
            staging => {
                let input = self.input(last, staging)?;
                if matches!(
                    staging,
                    SessionAction::Followup(_)
                        | SessionAction::Steer(_)
                        | SessionAction::Inject(_)
                        | SessionAction::Cancel
                ) {
                    next.operations_left -= 1;
                }
                let before = next.session.machine().clone();
                // A refused input changed nothing: not a new state.
                next.session.feed(input.clone()).ok()?;
                next.before.get_or_insert(before);
                next.staged.push(Some(input));
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(
                SessionProperty::DurableBeforeRelease.name(),
                |_: &SessionModel, s: &SessionState| {
                    !matches!(
                        &s.violation,
                        Some((SessionProperty::DurableBeforeRelease, _))
                    )
                },
            ),
            Property::always(
                SessionProperty::ReleaseOrder.name(),
                |_: &SessionModel, s: &SessionState| {
                    !matches!(&s.violation, Some((SessionProperty::ReleaseOrder, _)))
                },
            ),
            Property::always(
                SessionProperty::RolledBack.name(),
                |_: &SessionModel, s: &SessionState| {
                    !matches!(&s.violation, Some((SessionProperty::RolledBack, _)))
                },
            ),
            Property::always(
                SessionProperty::AbortEndsByDeadline.name(),
                |_: &SessionModel, s: &SessionState| {
                    !matches!(
                        &s.violation,
                        Some((SessionProperty::AbortEndsByDeadline, _))
                    )
                },
            ),
            Property::always(
                SessionProperty::AnswersRetried.name(),
                |_: &SessionModel, s: &SessionState| {
                    !matches!(&s.violation, Some((SessionProperty::AnswersRetried, _)))
                },
            ),
        ];
        properties.extend([
            Property::sometimes(REACHED[0], |_: &SessionModel, s: &SessionState| {
                s.reached & 1 != 0
            }),
            Property::sometimes(REACHED[1], |_: &SessionModel, s: &SessionState| {
                s.reached & 2 != 0
            }),
            Property::sometimes(REACHED[2], |_: &SessionModel, s: &SessionState| {
                s.reached & 4 != 0
            }),
            Property::sometimes(REACHED[3], |_: &SessionModel, s: &SessionState| {
                s.reached & 8 != 0
            }),
            Property::sometimes(REACHED[4], |_: &SessionModel, s: &SessionState| {
                s.reached & 16 != 0
            }),
        ]);
        properties
    }
}

/// A session-model property's verdict; its counterexample is the path's actions and what broke.
pub type SessionVerdict = ModelVerdict<(Vec<SessionAction>, Arc<str>)>;

/// What a session-model run proved.
pub type SessionReport = ModelReport<(Vec<SessionAction>, Arc<str>)>;

/// Checks the session model exhaustively (breadth first) on `threads` threads; with `stop_at`,
/// stops at that property's first counterexample (the mutant runner's killer).
pub fn check_session(
    bound: SessionBound,
    threads: usize,
    stop_at: Option<&'static str>,
) -> SessionReport {
    report::check(SessionModel::new(bound), threads, stop_at, |path| {
        let detail = path
            .last_state()
            .violation
            .as_ref()
            .map_or_else(|| Arc::from(""), |(_, detail)| detail.clone());
        let steps: Vec<(SessionState, Option<SessionAction>)> = path.clone().into();
        let actions = steps.into_iter().filter_map(|(_, action)| action).collect();
        (actions, detail)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_model_passes_at_a_small_bound() {
        let report = check_session(
            SessionBound {
                messages: 1,
                operations: 4,
                batch: 2,
                memory: 1,
            },
            1,
            None,
        );
        let broken: Vec<_> = report.properties.iter().filter(|p| !p.ok).collect();
        assert!(broken.is_empty(), "{broken:#?}");
        assert!(report.exhaustive);
        assert_eq!(report.unique_states, 3_098);
    }
}
