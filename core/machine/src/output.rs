//! Outputs: durable events, notifications, requests and the end of the machine's life.
//!
//! Every output serializes exactly as an `"out"` line of the conformance trace format
//! (`docs/FORMAT.md`); an [`Event`] alone serializes as the `{ type, data }` record the host
//! appends to the session's durable log.

use std::fmt;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::input::{CancelCause, ErrorInfo, Target};
use crate::message::{Batch, SharedMessage};

/// One output of the machine, in the order it was emitted: the wire vocabulary of the conformance
/// trace format (an `"out"` line each). A host that drives the machine does not read these:
/// it persists [`Transition::events`](crate::Transition::events) and then acts on the
/// [`Effect`]s of [`Transition::persisted`](crate::Transition::persisted). This ordered view is
/// for recorders, replayers and ports ([`Transition::into_outputs`](crate::Transition::into_outputs)).
///
/// # Examples
///
/// ```
/// use coxswain_core::{Machine, Message, Output, Outputs};
/// use serde_json::json;
///
/// let mut machine = Machine::new();
/// let outputs: Outputs<'_> = machine.inject(Message::user("c1", "notes"))?.into_outputs();
/// let outputs: Vec<Output> = outputs.collect();
/// let wire: Vec<_> = outputs.iter().map(serde_json::to_value).collect::<Result<_, _>>()?;
/// assert_eq!(wire, [
///     json!({"event": {"type": "agent/inbox/spliced", "data": {"target": "next-step", "start": 0,
///         "inserted": [{"id": "c1", "source": {"kind": "user"}, "content": "notes"}]}}}),
///     json!({"notify": {"type": "agent/inbox/inserted",
///         "message": {"id": "c1", "source": {"kind": "user"}, "content": "notes"}}}),
/// ]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "wire::Output", from = "wire::Output")]
pub enum Output {
    /// Append this event to the session's durable log.
    Event(Event),
    /// What the host does once the input's events are persisted ([`Effect`]: a notification,
    /// a request, an abort, the end). The wire order ([`Outputs`](crate::Outputs)) has no
    /// [`Effect::Begin`] (FORMAT.md: where an activity begins is fixed by `turn/start` and
    /// `beginMaintenance`); serialized, one is `{"begin": {"turn": N}}` or
    /// `{"begin": "maintenance"}`, which no trace holds.
    Effect(Effect),
}

/// What the host does once an input's durable events are persisted, in emission order.
///
/// # Examples
///
/// ```
/// use coxswain_core::{Abort, Activity, CancelCause, Effect, Machine, Message, Notification};
/// use coxswain_core::{Outstanding, Request, Status};
///
/// let mut machine = Machine::new();
/// let effects: Vec<Effect> = machine.followup(Message::user("m1", "hi"))?.persisted().collect();
/// assert!(effects.contains(&Effect::Notify(Notification::Status { status: Status::Running })));
/// assert!(effects.contains(&Effect::Begin(Activity::Turn(1)))); // make the turn's token here
/// let Some(Effect::Request(request)) = effects.last() else { panic!("a request") };
/// assert!(matches!(request, Request::PreStep { turn: 1, step: 1, .. }));
/// assert_eq!(request.turn(), 1);
/// assert_eq!(machine.outstanding(), Some(Outstanding::PreStep { turn: 1, step: 1 }));
///
/// let effects: Vec<Effect> = machine.cancel(CancelCause::User, true)?.persisted().collect();
/// assert_eq!(effects, [Effect::Abort(Abort { cause: CancelCause::User })]); // trip the token
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Publish this live, non-durable signal.
    Notify(Notification),
    /// An activity begins: make its cancellation scope (a token) now. The requests and the
    /// [`Abort`] that follow belong to it until the next `Begin` (S39, S42). Not on the wire:
    /// a turn's begins right after its `turn/start` event, a maintenance job's at
    /// `begin_maintenance`.
    Begin(Activity),
    /// Do this asynchronous work and answer it with an input (S4).
    Request(Request),
    /// Stop the current activity's in-flight work (S39). Never answered: the outstanding request
    /// must still be answered (S40).
    Abort(Abort),
    /// The machine is disposed (S45): the last effect it ever emits.
    Disposed,
}

/// An activity (S23, S42): a turn, or a maintenance job. Each has its own cancellation
/// ([example](Effect#examples)). Serialized: `{"turn": N}` or `"maintenance"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Activity {
    /// The turn with this number.
    Turn(u64),
    /// A maintenance job (S43).
    Maintenance,
}

/// The `abort` signal (S39): stop the current activity's in-flight work
/// ([example](Effect#examples)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Abort {
    /// The first cancel cause of the activity.
    pub cause: CancelCause,
}

impl From<Effect> for Option<Output> {
    /// The effect as an output of the wire order: `Begin` is none.
    fn from(effect: Effect) -> Option<Output> {
        match effect {
            Effect::Begin(_) => None,
            effect => Some(Output::Effect(effect)),
        }
    }
}

/// A durable event: the host appends it to the session's append-only log.
///
/// # Examples
///
/// ```
/// use coxswain_core::{Event, Machine, Message, PreStepAnswer, StepAnswer, TurnEndReason};
/// use coxswain_core::TurnStoppingAnswer;
/// use serde_json::json;
///
/// let mut machine = Machine::new();
/// let mut log: Vec<Event> = Vec::new();
/// machine.followup(Message::user("m1", "hi"))?.persist_into(&mut log).for_each(drop);
/// let batch = [Message::user("m1", "hi")].into_iter().collect();
/// machine.answer_pre_step(PreStepAnswer::Enter(batch))?.persist_into(&mut log).for_each(drop);
/// machine.answer_step(StepAnswer::Completed)?.persist_into(&mut log).for_each(drop);
/// machine.answer_turn_stopping(TurnStoppingAnswer::Done)?.persist_into(&mut log).for_each(drop);
///
/// let kinds: Vec<&str> = log.iter().map(Event::kind).collect();
/// assert_eq!(kinds, [
///     Event::SPLICED, Event::TURN_START, Event::SPLICED, // deliver, open, claim
///     Event::STEP_START, Event::USER_MESSAGE, Event::STEP_END, Event::TURN_END,
/// ]);
/// assert_eq!(log[6], Event::TurnEnd { turn: 1, reason: TurnEndReason::Completed });
/// assert_eq!(serde_json::to_value(&log[1])?, json!({"type": "turn/start", "data": {"turn": 1}}));
/// assert!(Event::TYPES.contains(&"step/end")); // any other `type` in a log is the host's
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", content = "data")]
pub enum Event {
    /// `agent/inbox/spliced`: one change to one pending list (S10).
    #[serde(rename = "agent/inbox/spliced")]
    Spliced(Splice),
    /// `turn/start` (S27).
    #[serde(rename = "turn/start")]
    TurnStart {
        /// The turn number.
        turn: u64,
    },
    /// `step/start` (S30).
    #[serde(rename = "step/start")]
    StepStart {
        /// The turn number.
        turn: u64,
        /// The step number within the turn, from 1.
        step: u64,
    },
    /// `user/message`: a message the step enters (S30).
    #[serde(rename = "user/message")]
    UserMessage(SharedMessage),
    /// `step/end` (S32).
    #[serde(rename = "step/end")]
    StepEnd {
        /// The turn number.
        turn: u64,
        /// The step number.
        step: u64,
    },
    /// `turn/end` (S35).
    #[serde(rename = "turn/end")]
    TurnEnd {
        /// The turn number.
        turn: u64,
        /// Why the turn ended.
        reason: TurnEndReason,
    },
}

impl Event {
    /// `agent/inbox/spliced`.
    pub const SPLICED: &'static str = "agent/inbox/spliced";
    /// `turn/start`.
    pub const TURN_START: &'static str = "turn/start";
    /// `step/start`.
    pub const STEP_START: &'static str = "step/start";
    /// `user/message`.
    pub const USER_MESSAGE: &'static str = "user/message";
    /// `step/end`.
    pub const STEP_END: &'static str = "step/end";
    /// `turn/end`.
    pub const TURN_END: &'static str = "turn/end";

    /// The `type` of every event the machine emits, in the wire vocabulary. Any other `type` in
    /// a log is the host's.
    pub const TYPES: [&'static str; 6] = [
        Event::SPLICED,
        Event::TURN_START,
        Event::STEP_START,
        Event::USER_MESSAGE,
        Event::STEP_END,
        Event::TURN_END,
    ];

    /// This event's `type` on the wire.
    pub fn kind(&self) -> &'static str {
        let index = match self {
            Event::Spliced(_) => 0,
            Event::TurnStart { .. } => 1,
            Event::StepStart { .. } => 2,
            Event::UserMessage(_) => 3,
            Event::StepEnd { .. } => 4,
            Event::TurnEnd { .. } => 5,
        };
        Event::TYPES[index]
    }
}

/// The data of an `agent/inbox/spliced` event: `splice(target, start, removedCount, inserted)`
/// on one list (S10, S11), with coordinates normalised (`start + removed_count <= len`).
///
/// # Examples
///
/// ```
/// use coxswain_core::{Event, Machine, Message, MessageId, SpliceKind, SpliceOutcome, Target};
///
/// let mut machine = Machine::new();
/// machine.inject(Message::user("c1", "notes"))?.persisted().for_each(drop);
/// let removal = machine.remove(&MessageId::new("c1"))?.expect("c1 is pending");
/// let [Event::Spliced(splice)] = removal.events() else { panic!("one splice") };
/// assert_eq!((splice.target, splice.start, splice.removed_count), (Target::NextStep, 0, 1));
/// assert_eq!(splice.outcome, Some(SpliceOutcome::Canceled));
/// assert_eq!(splice.kind(), SpliceKind::Discard);
/// # Ok::<(), coxswain_core::Rejected>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Splice {
    /// The list changed.
    pub target: Target,
    /// Where the change starts.
    pub start: usize,
    /// How many items were removed (omitted on the wire when 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub removed_count: usize,
    /// The messages inserted at `start`, in order.
    pub inserted: SmallVec<[SharedMessage; 1]>,
    /// `canceled` on an ordinary removal that removed something (S12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<SpliceOutcome>,
    /// The inserted item is waking (S10, S19); omitted on the wire when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub wakeup: bool,
    /// `r` on a splice crash repair appends to redeliver a message (S59): the number of such
    /// splices at or after the seed boundary that insert this id, this one included. The
    /// machine never emits one (`None`, omitted on the wire); restore reads it as an extra key
    /// (S46).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redelivery: Option<u64>,
}

impl Splice {
    /// What this splice does, from its shape: the one place that tells the kinds apart (the
    /// auditor, the timeline and the driver ask here instead of re-reading the fields).
    pub fn kind(&self) -> SpliceKind {
        SpliceKind::of(
            self.removed_count,
            self.inserted.len(),
            self.outcome == Some(SpliceOutcome::Canceled),
        )
    }
}

impl SpliceKind {
    /// The kind of a splice that removes `removed` items, inserts `inserted`, and carries
    /// `outcome: canceled` or not (S10, S12). A removal that inserts without `canceled` is not
    /// well formed (S12); it reads as a `Replace`.
    pub fn of(removed: usize, inserted: usize, canceled: bool) -> SpliceKind {
        match (removed, inserted, canceled) {
            (0, _, _) => SpliceKind::Insert,
            (_, 0, false) => SpliceKind::Claim,
            (_, 0, true) => SpliceKind::Discard,
            (_, _, _) => SpliceKind::Replace,
        }
    }
}

/// The kinds of change a splice makes to a list (S10–S12).
///
/// # Examples
///
/// ```
/// use coxswain_core::SpliceKind;
///
/// assert_eq!(SpliceKind::of(0, 1, false), SpliceKind::Insert); // a delivery or a prepend
/// assert_eq!(SpliceKind::of(2, 0, false), SpliceKind::Claim); // a turn claims two items
/// assert_eq!(SpliceKind::of(1, 0, true), SpliceKind::Discard); // remove, clear, cancel
/// assert_eq!(SpliceKind::of(1, 1, true), SpliceKind::Replace);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpliceKind {
    /// Inserts and removes nothing: a delivery (append, S16) or a `prepend` (S15).
    Insert,
    /// Removes without an outcome: a turn claims the items (S28).
    Claim,
    /// Removes with `outcome: canceled`, inserts nothing: `remove`, `clear`, `cancel`, dispose
    /// (S12, S15, S39).
    Discard,
    /// Removes with `outcome: canceled` and inserts in its place: `replace` (S15).
    Replace,
}

/// The outcome of an ordinary removal (S12) ([example](Splice#examples)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SpliceOutcome {
    /// The removed items were cancelled (remove, replace, clear, cancel).
    Canceled,
}

/// Why a turn ended (S36) ([example](Event#examples)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TurnEndReason {
    /// The model stopped and no step hit the output limit.
    Completed,
    /// The model stopped and some step of the turn hit the output limit (sticky, S34).
    MaxTokens,
    /// The pre-step decision rejected the step.
    Blocked,
    /// The turn was cancelled.
    Aborted {
        /// The first cancel cause of the turn.
        reason: CancelCause,
    },
    /// A host answer failed (S38).
    Error {
        /// The failure.
        error: ErrorInfo,
    },
    /// Written only by crash repair (S50); never emitted by the machine.
    Interrupted,
}

/// A live, non-durable signal ([example](Effect#examples)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Notification {
    /// A message joined a pending list.
    #[serde(rename = "agent/inbox/inserted")]
    Inserted {
        /// The message.
        message: SharedMessage,
    },
    /// A pending message was removed by an ordinary removal (S12).
    #[serde(rename = "agent/inbox/discarded")]
    Discarded {
        /// The message.
        message: SharedMessage,
    },
    /// A pending message was claimed by a turn (S28).
    #[serde(rename = "agent/inbox/claimed")]
    Claimed {
        /// The message.
        message: SharedMessage,
        /// The claiming turn.
        turn: u64,
    },
    /// The public status changed (S23).
    #[serde(rename = "agent/status")]
    Status {
        /// The new status.
        status: Status,
    },
    /// A turn failed (S38).
    #[serde(rename = "agent/error")]
    Error {
        /// The turn.
        turn: u64,
        /// The last entered step, 0 if none.
        step: u64,
        /// The failure.
        error: ErrorInfo,
    },
}

/// The public status (S23): `running` while a driver runs, `idle` otherwise
/// ([example](Effect#examples)).
///
/// ```
/// use coxswain_core::Status;
///
/// assert_eq!(Status::ALL.map(Status::as_str), ["idle", "running"]);
/// assert_eq!("running".parse(), Ok(Status::Running));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// No driver is running (maintenance and disposal included).
    Idle,
    /// A driver is running a turn.
    Running,
}

impl Status {
    /// Both statuses, `idle` first.
    pub const ALL: [Status; 2] = [Status::Idle, Status::Running];

    /// The status as the wire spells it: `idle` or `running`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Running => "running",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Status {
    type Err = crate::input::UnknownName;

    /// Parses `idle` or `running`; anything else is an error naming it.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Status::ALL
            .into_iter()
            .find(|status| status.as_str() == name)
            .ok_or_else(|| crate::input::UnknownName::new("status", name))
    }
}

/// Work the machine asks the host to do ([example](Effect#examples)).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Request {
    /// Decide the step (hooks, prompt assembly) for the claimed batch; answer with
    /// [`PreStepAnswer`](crate::PreStepAnswer) (S29).
    PreStep {
        /// The turn.
        turn: u64,
        /// The number the step will get if entered.
        step: u64,
        /// The claimed batch: all of NS, then at a turn boundary the first NT item.
        messages: Batch,
    },
    /// Run the step (model call, tools); answer with [`StepAnswer`](crate::StepAnswer) (S32).
    Step {
        /// The turn.
        turn: u64,
        /// The step.
        step: u64,
    },
    /// Run the turn-stopping hooks; answer with [`TurnStoppingAnswer`](crate::TurnStoppingAnswer)
    /// (S33).
    TurnStopping {
        /// The turn.
        turn: u64,
    },
}

impl Request {
    /// The turn this request belongs to.
    pub fn turn(&self) -> u64 {
        self.outstanding().turn()
    }

    /// The [`Outstanding`] this request makes (what [`Machine::outstanding`](crate::Machine::outstanding)
    /// says until it is answered).
    ///
    /// ```
    /// use coxswain_core::{Effect, Machine, Message, Outstanding, Request};
    ///
    /// let mut machine = Machine::new();
    /// let effects: Vec<Effect> = machine.followup(Message::user("m1", "hi"))?.persisted().collect();
    /// let Some(Effect::Request(request)) = effects.last() else { unreachable!() };
    /// assert_eq!(request.outstanding(), Outstanding::PreStep { turn: 1, step: 1 });
    /// assert_eq!(machine.outstanding(), Some(request.outstanding()));
    /// # Ok::<(), coxswain_core::Rejected>(())
    /// ```
    pub fn outstanding(&self) -> Outstanding {
        match *self {
            Request::PreStep { turn, step, .. } => Outstanding::PreStep { turn, step },
            Request::Step { turn, step } => Outstanding::Step { turn, step },
            Request::TurnStopping { turn } => Outstanding::TurnStopping { turn },
        }
    }
}

/// The request the machine waits on (S4): at most one at a time ([example](Effect#examples)).
/// Its [`kind`](Outstanding::kind) is one of the [`RequestKind`]s; it displays as the rejection
/// texts name it.
///
/// ```
/// use coxswain_core::{Outstanding, RequestKind};
///
/// let outstanding = Outstanding::PreStep { turn: 2, step: 1 };
/// assert_eq!(outstanding.kind(), RequestKind::PreStep);
/// assert_eq!(outstanding.turn(), 2);
/// assert_eq!(outstanding.to_string(), "preStep (turn 2, step 1)");
/// assert_eq!(Outstanding::TurnStopping { turn: 3 }.to_string(), "turnStopping (turn 3)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outstanding {
    /// A `preStep` request for this turn and prospective step.
    PreStep {
        /// The turn.
        turn: u64,
        /// The number the step will get if entered.
        step: u64,
    },
    /// A `step` request.
    Step {
        /// The turn.
        turn: u64,
        /// The step.
        step: u64,
    },
    /// A `turnStopping` request.
    TurnStopping {
        /// The turn.
        turn: u64,
    },
}

impl Outstanding {
    /// Which request this is ([example](Outstanding)).
    pub fn kind(&self) -> RequestKind {
        match self {
            Outstanding::PreStep { .. } => RequestKind::PreStep,
            Outstanding::Step { .. } => RequestKind::Step,
            Outstanding::TurnStopping { .. } => RequestKind::TurnStopping,
        }
    }

    /// The turn the request belongs to ([example](Outstanding)).
    pub fn turn(&self) -> u64 {
        match *self {
            Outstanding::PreStep { turn, .. }
            | Outstanding::Step { turn, .. }
            | Outstanding::TurnStopping { turn } => turn,
        }
    }
}

impl fmt::Display for Outstanding {
    /// `preStep (turn 2, step 1)`, `step (turn 2, step 1)`, `turnStopping (turn 2)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Outstanding::PreStep { turn, step } | Outstanding::Step { turn, step } => {
                write!(f, "{} (turn {turn}, step {step})", self.kind())
            }
            Outstanding::TurnStopping { turn } => write!(f, "{} (turn {turn})", self.kind()),
        }
    }
}

/// The kinds of request the host answers: what can be outstanding (S4). The one list of them
/// that [`Outstanding`], the machine's own bookkeeping and [`Completion`](crate::Completion) are
/// built from.
///
/// ```
/// use coxswain_core::RequestKind;
///
/// let names = RequestKind::ALL.map(RequestKind::as_str);
/// assert_eq!(names, ["preStep", "step", "turnStopping"]); // FORMAT.md's request keys
/// assert_eq!(RequestKind::Step.to_string(), "step");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// The pre-step decision (S29), answered with [`PreStepAnswer`](crate::PreStepAnswer).
    PreStep,
    /// The step (S32), answered with [`StepAnswer`](crate::StepAnswer).
    Step,
    /// The turn-stopping hooks (S33), answered with
    /// [`TurnStoppingAnswer`](crate::TurnStoppingAnswer).
    TurnStopping,
}

impl RequestKind {
    /// Every kind, in the order a step asks for them.
    pub const ALL: [RequestKind; 3] = [
        RequestKind::PreStep,
        RequestKind::Step,
        RequestKind::TurnStopping,
    ];

    /// The request's name on the wire: `preStep`, `step` or `turnStopping`
    /// ([example](RequestKind)).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestKind::PreStep => "preStep",
            RequestKind::Step => "step",
            RequestKind::TurnStopping => "turnStopping",
        }
    }
}

impl fmt::Display for RequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RequestKind {
    type Err = crate::input::UnknownName;

    /// Parses a request's wire name (`preStep`, `step`, `turnStopping`); anything else is an
    /// error naming it (`unknown request `stop``).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        RequestKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| crate::input::UnknownName::new("request", name))
    }
}

impl RequestKind {
    /// The request of this kind for turn `turn`, step `step` (a `turnStopping` request has no
    /// step: `step` is ignored).
    pub const fn outstanding(self, turn: u64, step: u64) -> Outstanding {
        match self {
            RequestKind::PreStep => Outstanding::PreStep { turn, step },
            RequestKind::Step => Outstanding::Step { turn, step },
            RequestKind::TurnStopping => Outstanding::TurnStopping { turn },
        }
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The wire shape of [`Output`]: `abort` travels as a request (FORMAT.md), and `disposed` is
/// `{"disposed": {}}`.
mod wire {
    use serde::{Deserialize, Serialize};

    use super::{Abort, Activity, Effect, Event, Notification};

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) enum Output {
        Event(Event),
        Notify(Notification),
        Request(Request),
        Begin(Activity),
        #[serde(with = "super::empty_object")]
        Disposed,
    }

    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub(super) enum Request {
        Abort(Abort),
        #[serde(untagged)]
        Work(super::Request),
    }

    impl From<super::Output> for Output {
        fn from(output: super::Output) -> Self {
            match output {
                super::Output::Event(event) => Output::Event(event),
                super::Output::Effect(Effect::Notify(notification)) => Output::Notify(notification),
                super::Output::Effect(Effect::Request(request)) => {
                    Output::Request(Request::Work(request))
                }
                super::Output::Effect(Effect::Abort(abort)) => {
                    Output::Request(Request::Abort(abort))
                }
                super::Output::Effect(Effect::Begin(activity)) => Output::Begin(activity),
                super::Output::Effect(Effect::Disposed) => Output::Disposed,
            }
        }
    }

    impl From<Output> for super::Output {
        fn from(output: Output) -> Self {
            super::Output::Effect(match output {
                Output::Event(event) => return super::Output::Event(event),
                Output::Notify(notification) => Effect::Notify(notification),
                Output::Request(Request::Work(request)) => Effect::Request(request),
                Output::Request(Request::Abort(abort)) => Effect::Abort(abort),
                Output::Begin(activity) => Effect::Begin(activity),
                Output::Disposed => Effect::Disposed,
            })
        }
    }
}

/// `Output::Effect(Effect::Disposed)` is `{"disposed": {}}` on the wire.
mod empty_object {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Empty {}

    pub(super) fn serialize<S: Serializer>(serializer: S) -> Result<S::Ok, S::Error> {
        Empty {}.serialize(serializer)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<(), D::Error> {
        Empty::deserialize(deserializer).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;
    use serde_json::{json, Value};
    use std::sync::Arc;

    fn round_trip(output: Output, wire: Value) {
        assert_eq!(serde_json::to_value(&output).unwrap(), wire);
        assert_eq!(serde_json::from_value::<Output>(wire).unwrap(), output);
    }

    #[test]
    fn request_kinds_and_statuses_parse_back_and_unknown_names_are_errors() {
        let kinds: Vec<_> = RequestKind::ALL.map(RequestKind::as_str).to_vec();
        assert_eq!(kinds, ["preStep", "step", "turnStopping"]);
        for kind in RequestKind::ALL {
            assert_eq!(kind.as_str().parse::<RequestKind>(), Ok(kind));
            assert_eq!(kind.outstanding(4, 2).kind(), kind);
        }
        assert_eq!(
            RequestKind::TurnStopping.outstanding(4, 2),
            Outstanding::TurnStopping { turn: 4 }
        );
        assert_eq!(
            "pre-step".parse::<RequestKind>().unwrap_err().to_string(),
            "unknown request `pre-step`"
        );
        let statuses: Vec<_> = Status::ALL.map(Status::as_str).to_vec();
        assert_eq!(statuses, ["idle", "running"]);
        for status in Status::ALL {
            assert_eq!(status.as_str().parse::<Status>(), Ok(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                json!(status.as_str())
            );
            assert_eq!(status.to_string(), status.as_str());
        }
        assert_eq!(
            "Running".parse::<Status>().unwrap_err().to_string(),
            "unknown status `Running`"
        );
    }

    #[test]
    fn disposed_is_an_empty_object_and_nothing_else_on_the_wire() {
        let read = |wire: Value| serde_json::from_value::<Output>(wire).ok();
        assert_eq!(
            read(json!({"disposed": {}})),
            Some(Output::Effect(Effect::Disposed))
        );
        assert_eq!(read(json!({"disposed": {"x": 1}})), None);
        assert_eq!(read(json!({"disposed": 1})), None);
    }

    #[test]
    fn every_request_names_its_turn() {
        let requests = [
            Request::PreStep {
                turn: 3,
                step: 1,
                messages: Batch::new(),
            },
            Request::Step { turn: 4, step: 2 },
            Request::TurnStopping { turn: 5 },
        ];
        assert_eq!(requests.clone().map(|r| r.turn()), [3, 4, 5]);
        // The kind's name is the request's key on the wire.
        for (request, kind) in requests.iter().zip(RequestKind::ALL) {
            assert_eq!(request.outstanding().kind(), kind);
            let wire =
                serde_json::to_value(Output::Effect(Effect::Request(request.clone()))).unwrap();
            assert!(wire["request"].get(kind.as_str()).is_some(), "{wire}");
        }
    }

    #[test]
    fn a_splice_reads_its_kind_from_its_shape_s10_s12() {
        let m = Arc::new(Message::user("a", "hi"));
        let splice = |removed_count, inserted: &[SharedMessage], outcome| Splice {
            target: Target::NextTurn,
            start: 0,
            removed_count,
            inserted: inserted.iter().cloned().collect(),
            outcome,
            wakeup: false,
            redelivery: None,
        };
        let canceled = Some(SpliceOutcome::Canceled);
        assert_eq!(
            splice(0, std::slice::from_ref(&m), None).kind(),
            SpliceKind::Insert
        );
        assert_eq!(splice(1, &[], None).kind(), SpliceKind::Claim);
        assert_eq!(splice(1, &[], canceled).kind(), SpliceKind::Discard);
        assert_eq!(splice(1, &[m], canceled).kind(), SpliceKind::Replace);
    }

    #[test]
    fn event_kinds_are_the_serialized_types() {
        let m: SharedMessage = Arc::new(Message::user("a", "hi"));
        let events = [
            Event::Spliced(Splice {
                target: Target::NextTurn,
                start: 0,
                removed_count: 0,
                inserted: SmallVec::from_elem(m.clone(), 1),
                outcome: None,
                wakeup: false,
                redelivery: None,
            }),
            Event::TurnStart { turn: 1 },
            Event::StepStart { turn: 1, step: 1 },
            Event::UserMessage(m),
            Event::StepEnd { turn: 1, step: 1 },
            Event::TurnEnd {
                turn: 1,
                reason: TurnEndReason::Completed,
            },
        ];
        for (event, kind) in events.iter().zip(Event::TYPES) {
            assert_eq!(event.kind(), kind);
            assert_eq!(serde_json::to_value(event).unwrap()["type"], kind);
        }
    }

    #[test]
    fn outputs_serialize_as_format_md_out_lines() {
        let m: SharedMessage = Arc::new(Message::user("a", "hi"));
        let mj = json!({"id": "a", "source": {"kind": "user"}, "content": "hi"});
        round_trip(
            Output::Event(Event::Spliced(Splice {
                target: Target::NextTurn,
                start: 0,
                removed_count: 0,
                inserted: SmallVec::from_elem(m.clone(), 1),
                outcome: None,
                wakeup: true,
                redelivery: None,
            })),
            json!({"event": {"type": "agent/inbox/spliced", "data": {"target": "next-turn", "start": 0, "inserted": [mj], "wakeup": true}}}),
        );
        round_trip(
            Output::Event(Event::Spliced(Splice {
                target: Target::NextStep,
                start: 1,
                removed_count: 2,
                inserted: SmallVec::new(),
                outcome: Some(SpliceOutcome::Canceled),
                wakeup: false,
                redelivery: None,
            })),
            json!({"event": {"type": "agent/inbox/spliced", "data": {"target": "next-step", "start": 1, "removedCount": 2, "inserted": [], "outcome": "canceled"}}}),
        );
        round_trip(
            Output::Event(Event::TurnStart { turn: 1 }),
            json!({"event": {"type": "turn/start", "data": {"turn": 1}}}),
        );
        round_trip(
            Output::Event(Event::StepStart { turn: 1, step: 2 }),
            json!({"event": {"type": "step/start", "data": {"turn": 1, "step": 2}}}),
        );
        round_trip(
            Output::Event(Event::UserMessage(m.clone())),
            json!({"event": {"type": "user/message", "data": mj}}),
        );
        round_trip(
            Output::Event(Event::TurnEnd {
                turn: 3,
                reason: TurnEndReason::Aborted {
                    reason: CancelCause::User,
                },
            }),
            json!({"event": {"type": "turn/end", "data": {"turn": 3, "reason": {"kind": "aborted", "reason": {"kind": "user"}}}}}),
        );
        round_trip(
            Output::Event(Event::TurnEnd {
                turn: 3,
                reason: TurnEndReason::Error {
                    error: ErrorInfo::new("boom", "E1"),
                },
            }),
            json!({"event": {"type": "turn/end", "data": {"turn": 3, "reason": {"kind": "error", "error": {"message": "boom", "code": "E1"}}}}}),
        );
        round_trip(
            Output::Event(Event::TurnEnd {
                turn: 1,
                reason: TurnEndReason::MaxTokens,
            }),
            json!({"event": {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "max-tokens"}}}}),
        );
        round_trip(
            Output::Effect(Effect::Notify(Notification::Claimed {
                message: m.clone(),
                turn: 1,
            })),
            json!({"notify": {"type": "agent/inbox/claimed", "message": mj, "turn": 1}}),
        );
        round_trip(
            Output::Effect(Effect::Notify(Notification::Status {
                status: Status::Running,
            })),
            json!({"notify": {"type": "agent/status", "status": "running"}}),
        );
        round_trip(
            Output::Effect(Effect::Notify(Notification::Error {
                turn: 1,
                step: 0,
                error: ErrorInfo::new("m", "c"),
            })),
            json!({"notify": {"type": "agent/error", "turn": 1, "step": 0, "error": {"message": "m", "code": "c"}}}),
        );
        round_trip(
            Output::Effect(Effect::Request(Request::PreStep {
                turn: 1,
                step: 1,
                messages: [m.clone()].into_iter().collect(),
            })),
            json!({"request": {"preStep": {"turn": 1, "step": 1, "messages": [mj]}}}),
        );
        round_trip(
            Output::Effect(Effect::Request(Request::TurnStopping { turn: 2 })),
            json!({"request": {"turnStopping": {"turn": 2}}}),
        );
        round_trip(
            Output::Effect(Effect::Abort(Abort {
                cause: CancelCause::Disposed,
            })),
            json!({"request": {"abort": {"cause": {"kind": "disposed"}}}}),
        );
        round_trip(Output::Effect(Effect::Disposed), json!({"disposed": {}}));
        // A begin is no output of the wire order (a transition's outputs hold none), but an
        // `Output` holding one serializes and reads back.
        round_trip(
            Output::Effect(Effect::Begin(Activity::Turn(3))),
            json!({"begin": {"turn": 3}}),
        );
        round_trip(
            Output::Effect(Effect::Begin(Activity::Maintenance)),
            json!({"begin": "maintenance"}),
        );
    }
}
