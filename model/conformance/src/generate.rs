//! The random sessions' input generator, shared by the property tests (`tests/src/harness.rs`),
//! the `inputs` fuzz target and `coxswain fuzz` (the ports kit, PORTS.md).
//!
//! A session is a sequence of abstract [`Choice`]s, each decoded from a weighted code and an
//! argument byte ([`Choice::decode`]); [`input`] maps a choice to a concrete [`Input`] against the
//! state the machine is in *at that point* (answer the outstanding request, deliver message
//! `m2`, …), so a shrunk sequence stays meaningful. Pure: no randomness of its own (the caller
//! draws the codes) and no IO.

use std::num::NonZeroUsize;
use std::sync::Arc;

use coxswain_core::{
    Batch, CancelCause, ErrorInfo, Expect, Input, Machine, MaintenanceInput, Message, Outstanding,
    PreStepAnswer, SharedMessage, Status, StepAnswer, Target, TurnStoppingAnswer,
};
use serde_json::json;

/// The delivery memory capacities `W` (S51) of a session with their weights (out of 10): 0
/// (plain S9) in 4 sessions of 10; 1, 2 and 3 (below the pool of 4 ids, so held ids are
/// forgotten and delivered again) in 5; 8 (every pool id held for good once it left) in 1.
pub const MEMORY: [(u32, usize); 5] = [(4, 0), (2, 1), (2, 2), (1, 3), (1, 8)];

/// The admission bounds `P` (S55) of a `coxswain fuzz` session with their weights (out of 10):
/// unbounded in 5 sessions of 10; 1, 2 and 3 (below the pool of 4 ids, so a list fills and
/// sends are refused `full`) in the other 5.
pub const MAX_PENDING: [(u32, Option<NonZeroUsize>); 4] = [
    (5, None),
    (2, NonZeroUsize::new(1)),
    (2, NonZeroUsize::new(2)),
    (1, NonZeroUsize::new(3)),
];

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
    /// `send(m{id}, target, wakeup, expect)`: followup, steer, inject or a quiet next-turn send,
    /// unguarded or with an expected-turn guard (S54).
    Send {
        /// Pool index.
        id: u8,
        /// The requested list.
        target: Target,
        /// Whether it wakes.
        wakeup: bool,
        /// Which of the message's shapes (source and content): the same id in another shape is
        /// a different message (S56).
        variant: u8,
        /// The expected-turn guard the caller sends.
        guard: Guard,
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

/// The expected-turn guard (S54) of a generated send, as a caller who looked at the machine
/// would send it; [`input`] turns it into an [`Expect`] against the machine's last turn `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Guard {
    /// No guard (the presets' case).
    None,
    /// What a caller looking now sends: `{turn: T}` while the status is running, `{idleAfter:
    /// T}` otherwise. It holds unless the turn's cancel was requested or maintenance runs.
    Current,
    /// What a caller who looked before the latest turn change sends: `{idleAfter: T - 1}` while
    /// running (a turn started since), `{turn: T}` while idle (turn `T` ended since: the
    /// overtaken steer). It never holds.
    Stale,
    /// `{turn: T + 1}`: a turn that has not started (a caller's bug). It never holds.
    Future,
}

impl Guard {
    /// The guard of an argument byte's high nibble `k` (`0..16`), which [`Choice::decode`]
    /// also reads the message's shape from (`k % 3`): none for `k < 9`, then current, stale
    /// (three values each) and future (`k = 15`).
    fn of(k: u8) -> Guard {
        match k / 3 {
            0..=2 => Guard::None,
            3 => Guard::Current,
            4 => Guard::Stale,
            _ => Guard::Future,
        }
    }

    /// The [`Expect`] this guard stands for against `machine`.
    pub fn expect(self, machine: &Machine) -> Option<Expect> {
        let turn = machine.last_turn();
        let running = machine.status() == Status::Running;
        match self {
            Guard::None => None,
            Guard::Current if running => Some(Expect::Turn(turn)),
            Guard::Current => Some(Expect::IdleAfter(turn)),
            Guard::Stale if running => Some(Expect::IdleAfter(turn.saturating_sub(1))),
            Guard::Stale => Some(Expect::Turn(turn)),
            Guard::Future => Some(Expect::Turn(turn.saturating_add(1))),
        }
    }
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
        let guard = Guard::of(arg >> 4);
        match kind {
            Kind::Answer => Choice::Answer(arg),
            Kind::Stray => Choice::Stray(arg),
            Kind::Send => Choice::Send {
                id,
                target,
                wakeup: arg & 0b1000 != 0,
                variant,
                guard,
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
            guard,
        } => match guard.expect(machine) {
            None => Input::delivery(message(id, variant), target, wakeup),
            Some(expect) => Input::Send {
                message: message(id, variant),
                target,
                wakeup,
                expect: Some(expect),
            },
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settle(machine: &mut Machine, input: Input) {
        let transition = machine.handle(input);
        assert!(transition.is_ok(), "accepted");
        if let Ok(transition) = transition {
            transition.into_outputs().for_each(drop);
        }
    }

    /// S54: each guard stands for the same expectation in every phase, and the core accepts
    /// exactly the current one while running or idle.
    #[test]
    fn s54_guards_stand_for_the_expectations_of_a_caller_who_looked_now_before_or_never() {
        let mut machine = Machine::new();
        let expect = |machine: &Machine, guard: Guard| guard.expect(machine);
        // Idle after turn 0.
        assert_eq!(expect(&machine, Guard::None), None);
        assert_eq!(expect(&machine, Guard::Current), Some(Expect::IdleAfter(0)));
        assert_eq!(expect(&machine, Guard::Stale), Some(Expect::Turn(0)));
        assert_eq!(expect(&machine, Guard::Future), Some(Expect::Turn(1)));
        // Running turn 1.
        settle(&mut machine, Input::Followup(message(0, 0)));
        assert_eq!(expect(&machine, Guard::Current), Some(Expect::Turn(1)));
        assert_eq!(expect(&machine, Guard::Stale), Some(Expect::IdleAfter(0)));
        assert_eq!(expect(&machine, Guard::Future), Some(Expect::Turn(2)));
        let guarded = |id, guard| {
            input(
                Choice::Send {
                    id,
                    target: Target::NextStep,
                    wakeup: true,
                    variant: 0,
                    guard,
                },
                &machine,
                &Batch::new(),
            )
        };
        assert_eq!(
            crate::input_json(&guarded(1, Guard::Current)),
            json!({"send": {"message": {"id": "m1", "source": {"kind": "user"}, "content": "hello"},
                            "target": "next-step", "wakeup": true, "expect": {"turn": 1}}})
        );
        assert_eq!(
            crate::input_json(&guarded(1, Guard::None)),
            json!({"steer": {"id": "m1", "source": {"kind": "user"}, "content": "hello"}})
        );
        let kinds: Vec<Result<(), &str>> = [Guard::Current, Guard::Stale, Guard::Future]
            .into_iter()
            .map(|guard| {
                machine
                    .clone()
                    .handle(guarded(1, guard))
                    .map(drop)
                    .map_err(|rejected| rejected.kind())
            })
            .collect();
        assert_eq!(kinds, [Ok(()), Err("turn-mismatch"), Err("turn-mismatch")]);
    }

    /// The high nibble of a send's argument byte picks the guard: none in 9 of 16, current and
    /// stale in 3 each, future in 1; the shape (`k % 3`) is independent of it.
    #[test]
    fn a_sends_argument_picks_its_guard_and_shape() {
        let guards: Vec<Guard> = (0..16u8).map(Guard::of).collect();
        let count = |guard| guards.iter().filter(|g| **g == guard).count();
        assert_eq!(
            [Guard::None, Guard::Current, Guard::Stale, Guard::Future].map(count),
            [9, 3, 3, 1]
        );
        // Code 500 is a send (after 435 answers and 30 strays); arg 0xC9: m1, next-turn, waking.
        assert_eq!(
            Choice::decode(500, 0xC9),
            Choice::Send {
                id: 1,
                target: Target::NextTurn,
                wakeup: true,
                variant: 0,
                guard: Guard::Stale,
            }
        );
        assert_eq!(MAX_PENDING.iter().map(|(w, _)| w).sum::<u32>(), 10);
    }
}
