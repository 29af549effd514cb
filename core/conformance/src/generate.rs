//! The random sessions' input generator, shared by the property tests (`tests/src/harness.rs`),
//! the `inputs` fuzz target and `coxswain fuzz` (the ports kit, PORTS.md).
//!
//! A session is a sequence of abstract [`Choice`]s, each decoded from a weighted code and an
//! argument byte ([`Choice::decode`]); [`input`] maps a choice to a concrete [`Input`] against the
//! state the machine is in *at that point* (answer the outstanding request, deliver message
//! `m2`, …), so a shrunk sequence stays meaningful. Pure: no randomness of its own (the caller
//! draws the codes) and no IO.

use std::sync::Arc;

use coxswain_core::{
    Batch, CancelCause, ErrorInfo, Input, Machine, MaintenanceInput, Message, Outstanding,
    PreStepAnswer, SharedMessage, StepAnswer, Target, TurnStoppingAnswer,
};
use serde_json::json;

/// The delivery memory capacities `W` (S51) of a session with their weights (out of 10): 0
/// (plain S9) in 4 sessions of 10; 1, 2 and 3 (below the pool of 4 ids, so held ids are
/// forgotten and delivered again) in 5; 8 (every pool id held for good once it left) in 1.
pub const MEMORY: [(u32, usize); 5] = [(4, 0), (2, 1), (2, 2), (1, 3), (1, 8)];

/// Message ids in the pool (`m0` … `m3`): small, so duplicates (S9, S13) and, with a delivery
/// memory, retries of ids that left (S52) happen often.
pub const POOL: u8 = 4;

/// One abstract choice of the environment, mapped to an input at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Choice {
    /// The host answers the outstanding request (the selector picks the answer, weighted so that
    /// turns progress), ends the active maintenance job, or — with nothing to answer — sends an
    /// answer to nothing (S4).
    Answer(u8),
    /// An answer of a kind that is not outstanding (S4, always rejected).
    Stray(u8),
    /// `send(m{id}, target, wakeup)`: followup, steer, inject or a quiet next-turn send.
    Send {
        /// Pool index.
        id: u8,
        /// The requested list.
        target: Target,
        /// Whether it wakes.
        wakeup: bool,
        /// Which of the message's shapes (source and content).
        variant: u8,
    },
    /// `remove(m{id})`.
    Remove(u8),
    /// `replace(m{id}, m{with})`.
    Replace {
        /// The id replaced.
        id: u8,
        /// The replacement's id.
        with: u8,
        /// The replacement's shape.
        variant: u8,
    },
    /// `prepend(target, m{id})`.
    Prepend {
        /// The list.
        target: Target,
        /// Pool index.
        id: u8,
        /// The message's shape.
        variant: u8,
    },
    /// `clear()`.
    Clear,
    /// `cancel(cause, keepInbox)`; `cause` indexes user, parent, hook, disposed.
    Cancel {
        /// Cause index.
        cause: u8,
        /// `keepInbox`.
        keep_inbox: bool,
    },
    /// `beginMaintenance()`.
    BeginMaintenance,
    /// `endMaintenance()`.
    EndMaintenance,
    /// `dispose()`.
    Dispose,
    /// Not an input: restore a fresh machine and spec from the log so far and compare (S49).
    CheckRestore,
    /// Not an input: the process crashes; the log is repaired and both sides go on from the
    /// machine restored from it (S49, S50).
    Crash,
}

/// The weight table of [`Choice::decode`]: codes `0..CODES`, simplest first, so that shrinking a
/// code towards 0 turns a choice into a host answer.
const TABLE: [(u16, Kind); 13] = [
    (435, Kind::Answer),
    (30, Kind::Stray),
    (250, Kind::Send),
    (40, Kind::Remove),
    (40, Kind::Replace),
    (30, Kind::Prepend),
    (20, Kind::Clear),
    (45, Kind::Cancel),
    (35, Kind::BeginMaintenance),
    (20, Kind::EndMaintenance),
    (3, Kind::Dispose),
    (37, Kind::CheckRestore),
    (15, Kind::Crash),
];

#[derive(Clone, Copy)]
enum Kind {
    Answer,
    Stray,
    Send,
    Remove,
    Replace,
    Prepend,
    Clear,
    Cancel,
    BeginMaintenance,
    EndMaintenance,
    Dispose,
    CheckRestore,
    Crash,
}

impl Choice {
    /// The number of choice codes [`Choice::decode`] reads (`0..CODES`; larger codes wrap).
    pub const CODES: u16 = 1000;

    /// The choice of a code (its kind, by the weight table) and an argument byte (its details).
    pub fn decode(code: u16, arg: u8) -> Choice {
        let mut code = code % Choice::CODES;
        let mut kind = Kind::Answer;
        for (weight, k) in TABLE {
            if code < weight {
                kind = k;
                break;
            }
            code -= weight;
        }
        let target = if arg & 0b100 == 0 {
            Target::NextTurn
        } else {
            Target::NextStep
        };
        let id = arg % POOL;
        let variant = (arg >> 4) % 3;
        match kind {
            Kind::Answer => Choice::Answer(arg),
            Kind::Stray => Choice::Stray(arg),
            Kind::Send => Choice::Send {
                id,
                target,
                wakeup: arg & 0b1000 != 0,
                variant,
            },
            Kind::Remove => Choice::Remove(id),
            Kind::Replace => Choice::Replace {
                id,
                with: (arg >> 2) % POOL,
                variant,
            },
            Kind::Prepend => Choice::Prepend {
                target,
                id,
                variant,
            },
            Kind::Clear => Choice::Clear,
            Kind::Cancel => Choice::Cancel {
                cause: arg % 4,
                keep_inbox: arg & 0b100 != 0,
            },
            Kind::BeginMaintenance => Choice::BeginMaintenance,
            Kind::EndMaintenance => Choice::EndMaintenance,
            Kind::Dispose => Choice::Dispose,
            Kind::CheckRestore => Choice::CheckRestore,
            Kind::Crash => Choice::Crash,
        }
    }
}

/// Pool message `m{id}` in one of three shapes (the machine carries source and content verbatim).
pub fn message(id: u8, variant: u8) -> SharedMessage {
    let id = format!("m{}", id % POOL);
    Arc::new(match variant % 3 {
        0 => Message::user(id, "hello"),
        1 => Message::new(
            id,
            json!({"kind": "plugin", "name": "ctx"}),
            json!({"text": "context", "n": 1}),
        ),
        _ => Message::new(id, json!({"kind": "user"}), json!(["two", {"parts": 2}])),
    })
}

/// The message a pre-step hook adds to the batch it enters (S29).
pub fn hook_extra() -> SharedMessage {
    Arc::new(Message::new(
        "hook-extra",
        json!({"kind": "plugin", "name": "hook"}),
        json!("added by the pre-step hook"),
    ))
}

/// The error a failing host answer carries.
pub fn error(what: &str) -> ErrorInfo {
    ErrorInfo::new(format!("{what} failed"), "E_PROP")
}

/// Cancel cause `index`: user, parent, hook (`stop`), disposed.
pub fn cause(index: u8) -> CancelCause {
    match index % 4 {
        0 => CancelCause::User,
        1 => CancelCause::Parent,
        2 => CancelCause::Hook {
            reason: "stop".into(),
        },
        _ => CancelCause::Disposed,
    }
}

/// The input a choice stands for against `machine`, whose latest `preStep` request claimed
/// `claimed` (what a host enters). [`Choice::CheckRestore`] and [`Choice::Crash`] are not inputs
/// (a session driver acts on them itself); here they stand for `endMaintenance`.
pub fn input(choice: Choice, machine: &Machine, claimed: &Batch) -> Input {
    let outstanding = machine.outstanding();
    match choice {
        Choice::Answer(selector) => match outstanding {
            Some(Outstanding::PreStep { .. }) => Input::PreStep(match selector % 12 {
                0..=7 => PreStepAnswer::Enter(claimed.clone()),
                8 => PreStepAnswer::Enter(Batch::new()),
                9 => {
                    let mut batch = claimed.clone();
                    batch.push(hook_extra());
                    PreStepAnswer::Enter(batch)
                }
                10 => PreStepAnswer::Reject,
                _ => PreStepAnswer::Fail(error("pre-step")),
            }),
            Some(Outstanding::Step { .. }) => Input::Step(match selector % 12 {
                0..=3 => StepAnswer::Completed,
                4 | 5 => StepAnswer::MaxTokens,
                6..=10 => StepAnswer::Continue,
                _ => StepAnswer::Fail(error("step")),
            }),
            Some(Outstanding::TurnStopping { .. }) => Input::TurnStopping(match selector % 8 {
                0..=6 => TurnStoppingAnswer::Done,
                _ => TurnStoppingAnswer::Fail(error("turn-stopping")),
            }),
            None if machine.is_maintenance() => Input::Maintenance(MaintenanceInput::End),
            None => stray(selector, machine),
        },
        Choice::Stray(selector) => stray(selector, machine),
        Choice::Send {
            id,
            target,
            wakeup,
            variant,
        } => Input::delivery(message(id, variant), target, wakeup),
        Choice::Remove(id) => Input::Remove(message(id, 0).id().clone()),
        Choice::Replace { id, with, variant } => Input::Replace {
            id: message(id, 0).id().clone(),
            message: message(with, variant),
        },
        Choice::Prepend {
            target,
            id,
            variant,
        } => Input::Prepend {
            target,
            message: message(id, variant),
        },
        Choice::Clear => Input::Clear {},
        Choice::Cancel {
            cause: index,
            keep_inbox,
        } => Input::Cancel {
            cause: cause(index),
            keep_inbox,
        },
        Choice::BeginMaintenance => Input::Maintenance(MaintenanceInput::Begin),
        Choice::EndMaintenance | Choice::CheckRestore | Choice::Crash => {
            Input::Maintenance(MaintenanceInput::End)
        }
        Choice::Dispose => Input::Dispose {},
    }
}

/// An answer to a request that is not outstanding (S4).
fn stray(selector: u8, machine: &Machine) -> Input {
    let outstanding = machine.outstanding();
    let mut strays = Vec::with_capacity(4);
    if !matches!(outstanding, Some(Outstanding::PreStep { .. })) {
        strays.push(Input::PreStep(PreStepAnswer::Reject));
    }
    if !matches!(outstanding, Some(Outstanding::Step { .. })) {
        strays.push(Input::Step(StepAnswer::Completed));
    }
    if !matches!(outstanding, Some(Outstanding::TurnStopping { .. })) {
        strays.push(Input::TurnStopping(TurnStoppingAnswer::Done));
    }
    if !machine.is_maintenance() {
        strays.push(Input::Maintenance(MaintenanceInput::End));
    }
    strays.swap_remove(usize::from(selector) % strays.len())
}
