//! The stateright model of the agent loop ([`coxswain_session::AgentLoop`]), driven as a driver
//! drives it: callers submit commands (deliveries, cancels, maintenance, `pending`, `fate`,
//! `close`, `dispose`, host events inside the released step), also while a batch is being
//! written, so that they meet mid-batch; the host answers the call it was released (an answer,
//! nothing, an answer the core refuses, a failure, and the late answer of a call the loop
//! abandoned); each write the loop seals comes back ok, failed, indeterminate or fenced; time
//! jumps to the loop's next deadline (the retry pause, the abort grace); and after
//! [`Output::Ended`](coxswain_session::Output::Ended) the driver calls `finish`. One run checks
//! a host that wrote both optional hooks and one that wrote neither (two initial states). After
//! every action the model runs the driver contract: drain the outputs, then `poll_append` until
//! a write is sealed (it stays in flight until the environment picks its outcome) or nothing is
//! left.
//!
//! The transition is the real `AgentLoop` over the real `Session` and `Machine`. `AgentLoop` is
//! not `Clone`, so a state keeps the actions that led to it and a successor replays them from
//! the start (paths are short). States are told apart by what the loop shows plus the model's
//! own account: the machine, the machine before the batch being written, the commands queued
//! and in that batch, the running call and the host's answer to it, who waits, the job, the
//! relative deadlines; never by history (batch numbers, caller numbers, the clock). The count
//! is the same on every run, whatever the thread count.
//!
//! Properties (`always`; [`AgentProperty`]): every caller is answered exactly once; a held
//! answer's waiter (a maintenance job's end) survives a failed batch and is answered by its
//! retry; only an indeterminate or fenced append stops the agent; a refused host answer (and a
//! `step` that returned nothing) is answered `fail host-invalid-answer`, so its turn ends; no
//! request for an unwritten hook is released and none is outstanding between batches; `pending`
//! and `fate` answer the durable state; the log written holds the machine's durable state; no
//! turn stalls.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use coxswain_core::{
    Behaviour, Config, Event, Machine, Message, Outstanding, Request, Restorer, SharedMessage,
};
use coxswain_log::Entry;
use coxswain_session::{AgentLoop, BatchNo, Ending, Hooks, LogFailure, Options};
use stateright::{Model, Property};

mod drive;

/// The abort grace and the retry pause of the model's agents, in its time unit (seconds).
const GRACE: u64 = 1;
const RETRY: u64 = 1;

/// The bound of an agent-model run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AgentBound {
    /// Message ids in the pool.
    pub messages: u8,
    /// Commands submitted, append failures (failed, indeterminate, fenced) and refused or
    /// late host answers per path.
    pub operations: u8,
    /// The loop's [`Options::max_batch`].
    pub max_batch: u8,
}

impl AgentBound {
    /// The bound CI checks exhaustively.
    pub const CI: AgentBound = AgentBound {
        messages: 2,
        operations: 4,
        max_batch: 2,
    };
}

/// A command a caller submits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Submit {
    /// `followup(m{i})`.
    Followup(u8),
    /// `steer(m{i})`.
    Steer(u8),
    /// `cancel(user)`.
    Cancel,
    /// A maintenance job.
    Maintenance,
    /// The pending lists.
    Pending,
    /// Close the agent.
    Close,
    /// `dispose` (S45).
    Dispose,
    /// The fate of `m{i}` (S58).
    Fate(u8),
    /// Host events recorded inside the step the host was released.
    Record,
}

/// One choice of the environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AgentAction {
    /// A caller submits a command.
    Submit(Submit),
    /// The host answers the running call: pre-step enters the batch it was given, step
    /// completed, turn-stopping done.
    Answer,
    /// The host's call returned nothing.
    Nothing,
    /// The host answers the running call with an answer of another kind (the core refuses it).
    Refused,
    /// The host's call raised.
    Raised,
    /// The call the loop abandoned answers late.
    Late,
    /// The maintenance job the loop started ends.
    JobEnded,
    /// The write in flight comes back: `None` durable, else how it failed.
    Written(Option<LogFailure>),
    /// Time reaches the loop's next deadline.
    Tick,
    /// The driver has stopped what ran after the ending: `finish`.
    Finish,
}

/// The properties of the agent model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AgentProperty {
    /// Every caller is answered, once.
    AnsweredOnce,
    /// A held answer's waiter survives a failed batch and is answered by the retry.
    HeldWaiterSurvives,
    /// Only an indeterminate or fenced append ends the agent.
    StopPolicy,
    /// A refused host answer is answered `fail host-invalid-answer`.
    RefusedAnswerFails,
    /// Unwritten hooks are answered inside their batch.
    UnwrittenHooks,
    /// `pending` and `fate` answer the durable state.
    QueriesAreDurable,
    /// The log written holds the machine's durable state.
    DurableLog,
    /// An outstanding request always has someone to answer it.
    NoStall,
}

impl AgentProperty {
    /// Every property.
    pub const ALL: [AgentProperty; 8] = [
        AgentProperty::AnsweredOnce,
        AgentProperty::HeldWaiterSurvives,
        AgentProperty::StopPolicy,
        AgentProperty::RefusedAnswerFails,
        AgentProperty::UnwrittenHooks,
        AgentProperty::QueriesAreDurable,
        AgentProperty::DurableLog,
        AgentProperty::NoStall,
    ];

    /// The property's name as the checker reports it.
    pub const fn name(self) -> &'static str {
        match self {
            AgentProperty::AnsweredOnce => "agent: every caller is answered exactly once",
            AgentProperty::HeldWaiterSurvives => {
                "agent: a held answer's waiter is answered by its retry"
            }
            AgentProperty::StopPolicy => "agent: only an indeterminate or fenced append stops it",
            AgentProperty::RefusedAnswerFails => {
                "agent: a refused host answer fails its request (host-invalid-answer)"
            }
            AgentProperty::UnwrittenHooks => {
                "agent: an unwritten hook is answered inside its batch, never released"
            }
            AgentProperty::QueriesAreDurable => "agent: pending and fate answer the durable state",
            AgentProperty::DurableLog => "agent: the log written holds the durable state",
            AgentProperty::NoStall => "agent: an outstanding request always has an answerer",
        }
    }

    /// The property of a name.
    pub fn named(name: &str) -> Option<AgentProperty> {
        AgentProperty::ALL.into_iter().find(|p| p.name() == name)
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// The situations a passing run must reach (`sometimes`), a bit of [`AgentState::reached`]
/// each.
const REACHED: [&str; 11] = [
    "agent: a held job end was retried and answered",
    "agent: a failed append failed a caller and the agent went on",
    "agent: an indeterminate append stopped the agent",
    "agent: a fenced append stopped the agent",
    "agent: a refused answer was failed durably",
    "agent: a turn ran with no hook written",
    "agent: pending was answered after the batch before it",
    "agent: close was answered after finish",
    "agent: a late answer of an abandoned call was dropped",
    "agent: a dispose ended the agent",
    "agent: fate was answered with the id pending",
];

/// What a caller asked and whether it has been answered.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Caller {
    command: Submit,
    answered: bool,
}

/// What went into the loop, in order: what its queue's tail holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Fed {
    Command(Submit),
    HostAnswer(AgentAction),
    JobEnd,
}

/// The maintenance job, as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Job {
    /// Started ([`coxswain_session::Output::StartJob`]) for this caller, not ended.
    Running(u8),
    /// Ended ([`AgentLoop::job_ended`]); the caller waits for its end to be durable.
    Ending(u8),
}

/// A state: the loop (rebuilt by replaying `path`) and the model's own account.
#[derive(Clone, Debug)]
pub struct AgentState {
    hooks: Hooks,
    path: Arc<Vec<AgentAction>>,
    agent: Arc<AgentLoop<u8>>,
    /// The durable log, read back.
    durable: Restorer,
    /// The machine before the batch being written (what the log holds; the restorer does not
    /// show all of it, e.g. whether an activity's abort was signalled).
    before: Machine,
    /// The write in flight: its batch and entries.
    writing: Option<(BatchNo, Vec<Entry>)>,
    callers: Vec<Caller>,
    /// What went into the loop, in order (what its queue's tail holds).
    fed: Vec<Fed>,
    /// Where in `fed` the batch being written took its first command.
    batch_from: usize,
    /// The call the host was released and has not answered.
    released: Option<Request>,
    /// The call the loop abandoned, and whether it has answered late.
    abandoned: Option<(Request, bool)>,
    job: Option<Job>,
    /// A request the host answered invalidly: its `fail` is due.
    invalid: Option<Outstanding>,
    /// The host's answer to a request still outstanding (queued, staged or held for a retry).
    answer: Option<(Request, AgentAction)>,
    /// An aborted request and when its grace runs out (the model's own account); `aborted`
    /// says an abort was just released.
    grace: Option<(Outstanding, u64)>,
    aborted: bool,
    /// The last append failure.
    last_failure: Option<LogFailure>,
    ending: Option<Ending>,
    finished: bool,
    now: u64,
    operations_left: u8,
    /// The broken properties, a bit each.
    violations: u16,
    /// What broke first.
    pub violation: Option<(AgentProperty, Arc<str>)>,
    reached: u16,
}

impl AgentState {
    fn violate(&mut self, property: AgentProperty, detail: String) {
        self.violations |= property.bit();
        if self.violation.is_none() {
            self.violation = Some((property, detail.into()));
        }
    }

    fn machine(&self) -> &Machine {
        self.agent.machine()
    }

    /// The commands still in the loop's queue.
    fn queued(&self) -> &[Fed] {
        &self.fed[self.queue_from()..]
    }

    /// The commands the batch being written took from the queue.
    fn in_batch(&self) -> &[Fed] {
        self.fed
            .get(self.batch_from..self.queue_from())
            .unwrap_or_default()
    }

    fn queue_from(&self) -> usize {
        self.fed.len().saturating_sub(self.agent.queued())
    }

    #[allow(clippy::type_complexity)]
    fn key(
        &self,
    ) -> (
        (Hooks, Behaviour<'_>, Behaviour<'_>),
        (bool, &[Fed], &[Fed], Option<Vec<Option<&Event>>>),
        (Option<&Request>, Option<&Request>, Option<&Request>),
        bool,
        Vec<Submit>,
        (Option<Job>, Option<Outstanding>, Option<LogFailure>),
        (Option<&(Request, AgentAction)>, Option<(Outstanding, u64)>),
        (Option<Ending>, bool, Option<u64>, u8),
        (u16, u16),
    ) {
        (
            (
                self.hooks,
                self.machine().behaviour(),
                self.before.behaviour(),
            ),
            (
                self.agent.has_batch(),
                self.queued(),
                self.in_batch(),
                self.writing.as_ref().map(|(_, entries)| {
                    entries
                        .iter()
                        .map(|entry| match entry {
                            Entry::Machine(event) => Some(event),
                            Entry::Host(_) => None,
                        })
                        .collect()
                }),
            ),
            (
                self.released.as_ref(),
                self.abandoned.as_ref().map(|(request, _)| request),
                self.agent.running_call(),
            ),
            self.abandoned.as_ref().is_some_and(|(_, late)| *late),
            // Who still waits, in order, by what they asked (caller numbers are history).
            self.callers
                .iter()
                .filter(|caller| !caller.answered)
                .map(|caller| caller.command)
                .collect(),
            (
                self.job.map(|job| match job {
                    Job::Running(_) => Job::Running(0),
                    Job::Ending(_) => Job::Ending(0),
                }),
                self.invalid,
                self.last_failure,
            ),
            (
                self.answer.as_ref(),
                self.grace
                    .map(|(request, at)| (request, at.saturating_sub(self.now))),
            ),
            (
                self.ending,
                self.finished,
                // The next deadline, relative to now (the clock is history).
                self.agent
                    .poll_timeout()
                    .map(|at| at.as_secs().saturating_sub(self.now)),
                self.operations_left,
            ),
            (self.violations, self.reached),
        )
    }
}

impl Hash for AgentState {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialEq for AgentState {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for AgentState {}

/// The model of one agent loop under every environment the bound allows.
#[derive(Clone, Debug)]
pub struct AgentModel {
    bound: AgentBound,
    pool: Vec<SharedMessage>,
}

impl AgentModel {
    /// A model with this bound.
    pub fn new(bound: AgentBound) -> Self {
        AgentModel {
            bound,
            pool: (1..=bound.messages)
                .map(|i| Arc::new(Message::user(format!("m{i}"), "hello")))
                .collect(),
        }
    }

    fn options(&self, hooks: Hooks) -> Options {
        Options {
            abort_grace: Duration::from_secs(GRACE),
            retry_after: Duration::from_secs(RETRY),
            hooks,
            max_batch: usize::from(self.bound.max_batch.max(1)),
            ..Options::DEFAULT
        }
    }

    fn fresh(&self, hooks: Hooks) -> AgentState {
        AgentState {
            hooks,
            path: Arc::new(Vec::new()),
            agent: Arc::new(AgentLoop::new(Machine::new(), self.options(hooks))),
            durable: Restorer::with_config(Config::new(), 0),
            before: Machine::new(),
            writing: None,
            callers: Vec::new(),
            fed: Vec::new(),
            batch_from: 0,
            released: None,
            abandoned: None,
            job: None,
            invalid: None,
            answer: None,
            grace: None,
            aborted: false,
            last_failure: None,
            ending: None,
            finished: false,
            now: 0,
            operations_left: self.bound.operations,
            violations: 0,
            violation: None,
            reached: 0,
        }
    }

    /// Replays `path` from a fresh loop: `None` if some action of it is not possible.
    fn replay(&self, hooks: Hooks, path: &[AgentAction]) -> Option<AgentState> {
        let mut state = self.fresh(hooks);
        let mut agent = AgentLoop::new(Machine::new(), self.options(hooks));
        for action in path {
            self.apply(&mut state, &mut agent, *action)?;
        }
        state.agent = Arc::new(agent);
        state.path = Arc::new(path.to_vec());
        Some(state)
    }
}

impl Model for AgentModel {
    type State = AgentState;
    type Action = AgentAction;

    fn init_states(&self) -> Vec<AgentState> {
        vec![self.fresh(Hooks::ALL), self.fresh(Hooks::NONE)]
    }

    fn actions(&self, state: &AgentState, actions: &mut Vec<AgentAction>) {
        if state.violations != 0 {
            return;
        }
        if state.writing.is_some() {
            actions.push(AgentAction::Written(None));
            if state.operations_left > 0 {
                actions.extend(
                    [
                        LogFailure::Failed,
                        LogFailure::Indeterminate,
                        LogFailure::Fenced,
                    ]
                    .map(|failure| AgentAction::Written(Some(failure))),
                );
            }
        }
        if state.operations_left > 0 {
            for i in 0..self.bound.messages {
                actions.extend([
                    AgentAction::Submit(Submit::Followup(i)),
                    AgentAction::Submit(Submit::Steer(i)),
                ]);
            }
            actions.extend(
                [
                    Submit::Cancel,
                    Submit::Maintenance,
                    Submit::Pending,
                    Submit::Fate(0),
                    Submit::Close,
                    Submit::Dispose,
                ]
                .map(AgentAction::Submit),
            );
            if matches!(state.released, Some(Request::Step { .. })) && !state.finished {
                actions.push(AgentAction::Submit(Submit::Record));
            }
        }
        if state.released.is_some() && !state.finished {
            actions.extend([
                AgentAction::Answer,
                AgentAction::Nothing,
                AgentAction::Raised,
            ]);
            if state.operations_left > 0 {
                actions.push(AgentAction::Refused);
            }
        }
        if matches!(state.abandoned, Some((_, false)))
            && state.ending.is_none()
            && state.operations_left > 0
        {
            actions.push(AgentAction::Late);
        }
        if matches!(state.job, Some(Job::Running(_))) {
            actions.push(AgentAction::JobEnded);
        }
        if state.writing.is_none() && state.ending.is_none() && state.agent.poll_timeout().is_some()
        {
            actions.push(AgentAction::Tick);
        }
        if state.ending.is_some() && !state.finished {
            actions.push(AgentAction::Finish);
        }
    }

    fn next_state(&self, last: &AgentState, action: AgentAction) -> Option<AgentState> {
        let mut path = Vec::with_capacity(last.path.len() + 1);
        path.extend_from_slice(&last.path);
        path.push(action);
        self.replay(last.hooks, &path)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        fn holds(property: AgentProperty) -> Property<AgentModel> {
            // `always` takes a plain fn: one closure per property, each reading its own bit.
            macro_rules! always {
                ($p:expr) => {
                    Property::always($p.name(), |_: &AgentModel, s: &AgentState| {
                        s.violations & $p.bit() == 0
                    })
                };
            }
            match property {
                AgentProperty::AnsweredOnce => always!(AgentProperty::AnsweredOnce),
                AgentProperty::HeldWaiterSurvives => always!(AgentProperty::HeldWaiterSurvives),
                AgentProperty::StopPolicy => always!(AgentProperty::StopPolicy),
                AgentProperty::RefusedAnswerFails => always!(AgentProperty::RefusedAnswerFails),
                AgentProperty::UnwrittenHooks => always!(AgentProperty::UnwrittenHooks),
                AgentProperty::QueriesAreDurable => always!(AgentProperty::QueriesAreDurable),
                AgentProperty::DurableLog => always!(AgentProperty::DurableLog),
                AgentProperty::NoStall => always!(AgentProperty::NoStall),
            }
        }
        fn reached(at: usize) -> Property<AgentModel> {
            macro_rules! sometimes {
                ($i:expr) => {
                    Property::sometimes(REACHED[$i], |_: &AgentModel, s: &AgentState| {
                        s.reached & (1 << $i) != 0
                    })
                };
            }
            match at {
                0 => sometimes!(0),
                1 => sometimes!(1),
                2 => sometimes!(2),
                3 => sometimes!(3),
                4 => sometimes!(4),
                5 => sometimes!(5),
                6 => sometimes!(6),
                7 => sometimes!(7),
                8 => sometimes!(8),
                9 => sometimes!(9),
                _ => sometimes!(10),
            }
        }
        let mut properties: Vec<_> = AgentProperty::ALL.into_iter().map(holds).collect();
        properties.extend((0..REACHED.len()).map(reached));
        properties
    }
}

/// An agent-model property's verdict; its counterexample is the path's actions (from a host
/// with both hooks written, or none) and what broke.
pub type AgentVerdict = super::ModelVerdict<(Hooks, Vec<AgentAction>, Arc<str>)>;

/// What an agent-model run proved.
pub type AgentReport = super::ModelReport<(Hooks, Vec<AgentAction>, Arc<str>)>;

/// Checks the agent model exhaustively (breadth first) on `threads` threads; with `stop_at`,
/// stops at that property's first counterexample (the mutant runner's killer).
pub fn check_agent(
    bound: AgentBound,
    threads: usize,
    stop_at: Option<&'static str>,
) -> AgentReport {
    super::report::check(AgentModel::new(bound), threads, stop_at, |path| {
        let last = path.last_state();
        let detail = last
            .violation
            .as_ref()
            .map_or_else(|| Arc::from(""), |(_, detail)| detail.clone());
        (last.hooks, last.path.to_vec(), detail)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_model_passes_at_a_small_bound() {
        let report = check_agent(
            AgentBound {
                messages: 1,
                operations: 3,
                max_batch: 2,
            },
            1,
            None,
        );
        let broken: Vec<_> = report.properties.iter().filter(|p| !p.ok).collect();
        assert!(broken.is_empty(), "{broken:#?}");
        assert!(report.exhaustive);
        assert_eq!(report.unique_states, 10_679);
    }
}
