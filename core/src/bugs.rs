//! Deliberately wrong variants of some rules, compiled only with the test-only `seeded-bugs`
//! feature. The model checker and the property tests run against each to prove that their
//! checkers catch it. A machine carries at most one, chosen at construction with
//! [`Machine::with_seeded_bug`](crate::Machine::with_seeded_bug); without one it behaves exactly as
//! the normal build.

/// A seeded bug. Each names the rule it breaks.
#[cfg(feature = "seeded-bugs")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeededBug {
    /// S28: a claim of two or more NS items leaves the last one out of the batch (it vanishes).
    ClaimForgetsStep,
    /// S28: a claim at a turn boundary takes the first two NT items.
    ClaimTakesTwoTurnItems,
    /// S39: a cancel with `keepInbox` still discards NS.
    KeepInboxDropsSteps,
    /// S20: a non-waking send to an idle machine wakes it.
    InjectWakes,
    /// S23: waking from idle emits `status running` twice.
    StatusTwice,
    /// S34: the sticky `max-tokens` also decides the stop: a later tool step ends the turn.
    MaxTokensStopsToolStep,
    /// S18: a waking send after a cancel keeps its target instead of queueing as its own turn.
    SteerJoinsAbortedTurn,
    /// S11: the splice of an append reports `start = len + 1`.
    SpliceStartOffByOne,
    /// S13: the duplicate check ignores ids pending in NS.
    DuplicateInNextStep,
    /// S32: a failed step emits no `step/end`.
    FailedStepNeverEnds,
    /// S24: a waking send during maintenance does not set the latch.
    MaintenanceForgetsWake,
    /// S5: a `replace` rejected `already-pending` still removes the old message.
    RejectedReplaceRemoves,
}

#[cfg(feature = "seeded-bugs")]
impl SeededBug {
    /// Every seeded bug.
    pub const ALL: [SeededBug; 12] = [
        SeededBug::ClaimForgetsStep,
        SeededBug::ClaimTakesTwoTurnItems,
        SeededBug::KeepInboxDropsSteps,
        SeededBug::InjectWakes,
        SeededBug::StatusTwice,
        SeededBug::MaxTokensStopsToolStep,
        SeededBug::SteerJoinsAbortedTurn,
        SeededBug::SpliceStartOffByOne,
        SeededBug::DuplicateInNextStep,
        SeededBug::FailedStepNeverEnds,
        SeededBug::MaintenanceForgetsWake,
        SeededBug::RejectedReplaceRemoves,
    ];
}

/// `seeded_bug!(self, Name)`: whether this machine carries the bug `Name`. Always `false` (and the
/// expression is not even compiled) without the `seeded-bugs` feature.
#[cfg(feature = "seeded-bugs")]
macro_rules! seeded_bug {
    ($machine:expr, $name:ident) => {
        $machine.seeded_bug == Some($crate::bugs::SeededBug::$name)
    };
}

#[cfg(not(feature = "seeded-bugs"))]
macro_rules! seeded_bug {
    ($machine:expr, $name:ident) => {
        false
    };
}

pub(crate) use seeded_bug;
