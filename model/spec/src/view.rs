//! The observable state (S23, S24–S26, S39, S44, S45, S51, S55, S56): what a host can ask a
//! machine between inputs, as the spec's own state answers it. The differential property
//! compares it with the core's after every input.

use std::fmt;

use serde_json::Value;

use super::lists::Item;
use super::turns::Awaiting;
use super::{Phase, Spec};

/// One pending list as (message id, waking flag) in list order (S10, S19).
pub type Pending = Vec<(String, bool)>;

/// The public status (S23).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// No driver runs (also in maintenance and once disposed).
    Idle,
    /// A driver runs.
    Running,
}

impl Status {
    /// The status as the `agent/status` notification spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Idle => "idle",
            Status::Running => "running",
        }
    }
}

/// The request the machine waits on (S4, I10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outstanding {
    /// `preStep` of this turn, for the step it would enter.
    PreStep {
        /// The turn.
        turn: u64,
        /// The number the step gets if entered.
        step: u64,
    },
    /// `step` of this turn and step.
    Step {
        /// The turn.
        turn: u64,
        /// The step.
        step: u64,
    },
    /// `turnStopping` of this turn.
    TurnStopping {
        /// The turn.
        turn: u64,
    },
}

/// Everything observable about a machine between inputs, field by field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// NT with waking flags.
    pub next_turn: Pending,
    /// NS with waking flags.
    pub next_step: Pending,
    /// The public status (S23).
    pub status: Status,
    /// A maintenance job is active (S43).
    pub maintenance: bool,
    /// `disposed` was emitted (S45).
    pub disposed: bool,
    /// No driver and no maintenance (S44).
    pub quiescent: bool,
    /// The current activity's wake latch (S24–S26).
    pub wake_latched: bool,
    /// The current activity's first cancel cause, as JSON (S39).
    pub cancel_cause: Option<Value>,
    /// `dispose` was accepted and the machine is not disposed yet (S45).
    pub disposing: bool,
    /// `lastTurn` (S23, S27, S46).
    pub last_turn: u64,
    /// The outstanding request (S4).
    pub outstanding: Option<Outstanding>,
    /// The ids the delivery memory holds, oldest first (S51).
    pub delivered: Vec<String>,
    /// The admission bound `maxPending = P` (S55); `None`: unbounded.
    pub max_pending: Option<usize>,
}

impl View {
    /// The fields in which two views differ: (field, this view's value, the other's).
    pub fn differences(&self, other: &View) -> Vec<(&'static str, String, String)> {
        let mut found = Vec::new();
        let mut field = |name: &'static str, a: &dyn fmt::Debug, b: &dyn fmt::Debug| {
            let (a, b) = (format!("{a:?}"), format!("{b:?}"));
            if a != b {
                found.push((name, a, b));
            }
        };
        field("next-turn", &self.next_turn, &other.next_turn);
        field("next-step", &self.next_step, &other.next_step);
        field("status", &self.status, &other.status);
        field("maintenance", &self.maintenance, &other.maintenance);
        field("disposed", &self.disposed, &other.disposed);
        field("quiescent", &self.quiescent, &other.quiescent);
        field("wake latch", &self.wake_latched, &other.wake_latched);
        let cause = |v: &Option<Value>| v.as_ref().map(ToString::to_string);
        field(
            "cancel cause",
            &cause(&self.cancel_cause),
            &cause(&other.cancel_cause),
        );
        field("disposing", &self.disposing, &other.disposing);
        field("lastTurn", &self.last_turn, &other.last_turn);
        field("outstanding", &self.outstanding, &other.outstanding);
        field("delivery memory", &self.delivered, &other.delivered);
        field("maxPending", &self.max_pending, &other.max_pending);
        found
    }
}

impl Spec {
    /// Every observable field at once.
    pub fn view(&self) -> View {
        let (next_turn, next_step) = self.pending();
        View {
            next_turn,
            next_step,
            status: self.status(),
            maintenance: self.is_maintenance(),
            disposed: self.is_disposed(),
            quiescent: self.is_quiescent(),
            wake_latched: self.is_wake_latched(),
            cancel_cause: self.cancel_cause().cloned(),
            disposing: self.is_disposing(),
            last_turn: self.last_turn(),
            outstanding: self.outstanding(),
            delivered: self.delivered(),
            max_pending: self.max_pending(),
        }
    }

    /// The pending lists (NT, NS), each as (id, waking) in list order (S10, S19).
    pub fn pending(&self) -> (Pending, Pending) {
        let view = |l: &Vec<Item>| l.iter().map(|i| (i.id().to_string(), i.waking)).collect();
        (view(&self.nt), view(&self.ns))
    }

    /// `lastTurn` (S23, S27, S46). While a turn is running this is that turn's number.
    pub fn last_turn(&self) -> u64 {
        self.last_turn
    }

    /// The ids the delivery memory holds (S51), oldest first.
    pub fn delivered(&self) -> Vec<String> {
        self.memory.held()
    }

    /// The held ids with the message each left the lists as (S51, S56), oldest first: what a
    /// retry of that id is compared with (`already-delivered` or `conflict`). Not part of
    /// [`View`]: S56 lets a machine keep a digest instead of the message.
    pub fn delivered_messages(&self) -> Vec<(String, Value)> {
        self.memory.held_messages()
    }

    /// The admission bound `maxPending = P` (S55); `None`: unbounded.
    pub fn max_pending(&self) -> Option<usize> {
        self.max_pending.map(std::num::NonZeroUsize::get)
    }

    /// The public status (S23): `running` when running, otherwise `idle` (also when disposed,
    /// S45).
    pub fn status(&self) -> Status {
        match self.phase {
            Phase::Running(_) => Status::Running,
            _ => Status::Idle,
        }
    }

    /// S44: no driver and no maintenance active.
    pub fn is_quiescent(&self) -> bool {
        matches!(self.phase, Phase::Idle | Phase::Disposed)
    }

    /// S43: a maintenance job is active.
    pub fn is_maintenance(&self) -> bool {
        self.phase == Phase::Maintenance
    }

    /// S45: `disposed` was emitted; every input is rejected `disposed`.
    pub fn is_disposed(&self) -> bool {
        self.phase == Phase::Disposed
    }

    /// S24–S26: the current activity's wake latch (always false while idle).
    pub fn is_wake_latched(&self) -> bool {
        self.wake_requested
    }

    /// S18, S39: the current activity's cancellation was requested.
    pub fn is_cancel_requested(&self) -> bool {
        self.cancel.is_some()
    }

    /// S39: the current activity's first cancel cause, if its cancellation was requested.
    pub fn cancel_cause(&self) -> Option<&Value> {
        self.cancel.as_ref()
    }

    /// S45: `dispose` was accepted while an activity ran, which has not ended yet.
    pub fn is_disposing(&self) -> bool {
        self.disposing
    }

    /// S4: the request the machine waits on, if any.
    pub fn outstanding(&self) -> Option<Outstanding> {
        let Phase::Running(t) = &self.phase else {
            return None;
        };
        Some(match t.awaiting {
            Awaiting::PreStep => Outstanding::PreStep {
                turn: t.turn,
                step: t.step + 1,
            },
            Awaiting::Step => Outstanding::Step {
                turn: t.turn,
                step: t.step,
            },
            Awaiting::TurnStopping => Outstanding::TurnStopping { turn: t.turn },
        })
    }
}
