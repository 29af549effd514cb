//! What the monitor reports: the checked properties ([`Invariant`]), a broken one
//! ([`Violation`]), and the situations worth reaching ([`Fact`]).

use std::fmt;

use coxswain_log::Rule;

/// A checked property: the invariants of SPEC §10 and the rules the monitor checks beside them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// I1: the durable splices so far reproduce the live lists.
    I1SpliceProjection,
    /// I2: no id pending twice.
    I2Identity,
    /// I3: every delivered message is pending, claimed once (inside an open turn) or discarded.
    I3Conservation,
    /// I4: a claim takes all of NS and at most one NT item, at boundaries; the pre-step batch is
    /// the claimed batch.
    I4ClaimShape,
    /// I5: turn and step events nest and number correctly; `user/message` inside a step.
    I5TurnEnclosure,
    /// I6: a cancel without `keepInbox` empties both lists with one `discarded` each; with it,
    /// the lists are unchanged.
    I6Cancel,
    /// I7: a non-waking send (or a queue edit) never opens a turn, changes status or requests.
    I7IdleInjection,
    /// I8: status notifications alternate from `running`, and match `status()`.
    I8Status,
    /// I10: at most one of preStep/step/turnStopping outstanding; answered before its turn closes.
    I10OneRequest,
    /// S4, S5: a rejected input changed nothing, emitted nothing, and had a reason to be rejected.
    S5Rejection,
    /// S10, S12: every splice has the shape its kind requires.
    S10SpliceShape,
    /// S18: a waking send after its activity's cancel was requested joins the end of NT.
    S18Retarget,
    /// S33, S34: a `continue` step never ends the turn; the model sees the tool results.
    S33ToolStepContinues,
    /// S39: one `abort` per activity, never while idle.
    S39OneAbort,
    /// S49: restoring from the durable log so far gives the live lists and, once idle, `lastTurn`.
    S49ReplayEquivalence,
    /// I11 (S51–S53): no id is inserted while among the last `W` that left the lists, and the
    /// delivery memory holds exactly those, in order.
    I11Once,
    /// S21, S24, S25, S35: a turn opens only when waking work is pending just before its
    /// `turn/start` (a waking send from idle, a replayed latch, a continuation), never on its own.
    NoSpuriousActivity,
    /// I12 (S54): every accepted guarded send was accepted while its guard held; a
    /// `turn-mismatch` only when it did not.
    I12Guard,
    /// I13 (S55): no accepted send or prepend inserts into a list already holding `P` items; a
    /// `full` only when the resolved list holds `P`.
    I13Bound,
    /// I14 (S56): no `already-pending` or `already-delivered` for a message that differs from
    /// the one pending or held under its id; a `conflict` only when it differs.
    I14NoSilentLoss,
    /// I15 (S58): every id's fate is the one the monitor's own records give (pending, or how it
    /// left, the first step that carried it, its turn's end), and a machine restored from the
    /// log so far (repaired with `A = 1`) answers the same for every id, except what the
    /// repair changes: its interrupted turn's claims end `interrupted`, or are pending again.
    I15Fate,
    /// I16 (S59): after repair with `A = 1` and restore, every message the interrupted turn
    /// claimed after its last `step/start` is pending again, at the front of its list, in claim
    /// order, waking as it was claimed, unless its id was redelivered once already or is pending
    /// at the log's end; and nothing else is inserted.
    I16NothingUnseenLost,
    /// S57: `resume` wakes from idle exactly when there is waking work; otherwise it emits
    /// nothing and changes nothing (no latch).
    S57Resume,
}

impl Invariant {
    /// Every checked property.
    pub const ALL: [Invariant; 23] = [
        Invariant::I1SpliceProjection,
        Invariant::I2Identity,
        Invariant::I3Conservation,
        Invariant::I4ClaimShape,
        Invariant::I5TurnEnclosure,
        Invariant::I6Cancel,
        Invariant::I7IdleInjection,
        Invariant::I8Status,
        Invariant::I10OneRequest,
        Invariant::S5Rejection,
        Invariant::S10SpliceShape,
        Invariant::S18Retarget,
        Invariant::S33ToolStepContinues,
        Invariant::S39OneAbort,
        Invariant::S49ReplayEquivalence,
        Invariant::I11Once,
        Invariant::NoSpuriousActivity,
        Invariant::I12Guard,
        Invariant::I13Bound,
        Invariant::I14NoSilentLoss,
        Invariant::I15Fate,
        Invariant::I16NothingUnseenLost,
        Invariant::S57Resume,
    ];

    /// The property's name as the model checker reports it.
    pub fn name(self) -> &'static str {
        match self {
            Invariant::I1SpliceProjection => "I1 splice projection",
            Invariant::I2Identity => "I2 identity",
            Invariant::I3Conservation => "I3 conservation",
            Invariant::I4ClaimShape => "I4 claim shape",
            Invariant::I5TurnEnclosure => "I5 turn enclosure",
            Invariant::I6Cancel => "I6 cancel",
            Invariant::I7IdleInjection => "I7 idle injection",
            Invariant::I8Status => "I8 status",
            Invariant::I10OneRequest => "I10 one request",
            Invariant::S5Rejection => "S5 rejection changes nothing",
            Invariant::S10SpliceShape => "S10 splice shape",
            Invariant::S18Retarget => "S18 steer after cancel queues",
            Invariant::S33ToolStepContinues => "S33 tool step continues",
            Invariant::S39OneAbort => "S39 one abort per activity",
            Invariant::S49ReplayEquivalence => "S49 replay equivalence",
            Invariant::I11Once => "I11 once",
            Invariant::NoSpuriousActivity => "S21 S24 S25 S35 no turn without waking work",
            Invariant::I12Guard => "I12 guard",
            Invariant::I13Bound => "I13 bound",
            Invariant::I14NoSilentLoss => "I14 no silent loss by reuse",
            Invariant::I15Fate => "I15 fate",
            Invariant::I16NothingUnseenLost => "I16 nothing unseen is lost",
            Invariant::S57Resume => "S57 resume",
        }
    }

    /// The property a log auditor's rule belongs to.
    pub(super) fn of_audit_rule(rule: Rule) -> Invariant {
        match rule {
            Rule::I1 => Invariant::I1SpliceProjection,
            Rule::I2 => Invariant::I2Identity,
            Rule::I3 => Invariant::I3Conservation,
            Rule::I4 => Invariant::I4ClaimShape,
            Rule::I5 => Invariant::I5TurnEnclosure,
            Rule::S10 | Rule::S46 => Invariant::S10SpliceShape,
        }
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A broken invariant, with what the monitor saw.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Violation {
    /// The property.
    pub invariant: Invariant,
    /// What happened.
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

/// The result of one check: the first violation it found, if any.
pub(super) type Check = Result<(), Violation>;

/// A failed check of `invariant`.
pub(super) fn fail<T>(invariant: Invariant, detail: impl Into<String>) -> Result<T, Violation> {
    Err(Violation {
        invariant,
        detail: detail.into(),
    })
}

/// Something worth reaching, seen in the latest transition (the model's `sometimes` properties).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fact {
    /// A turn ended `blocked` and the next queued follow-up's turn opened at once (S35).
    BlockedTurnContinued,
    /// A turn ended `completed` and the next turn opened in the same running interval (S35).
    CompletedTurnContinued,
    /// A latched wake was replayed at a driver exit: `status idle` then `status running` (S25).
    LatchReplayedAtExit,
    /// A latched wake was replayed at maintenance end (S25, S43).
    LatchReplayedAtMaintenanceEnd,
    /// A waking send during maintenance latched (S24).
    WakeLatchedDuringMaintenance,
    /// A turn aborted by a `keepInbox` cancel left waking work parked (S26, S41).
    KeepInboxParked,
    /// Context injected during a step was claimed at the next boundary (S31).
    ToolContextClaimed,
    /// A `continue` step followed a `max-tokens` step in the same turn (S34).
    MaxTokensThenContinue,
    /// The machine was restored from its log in the middle of a turn (S49, S50).
    RestoredMidTurn,
    /// `dispose` while a turn ran (S45).
    DisposedWhileRunning,
    /// The machine reached `disposed` (S45).
    Disposed,
    /// A turn ended with an error (S38).
    TurnFailed,
    /// A steer after a cancel was retargeted to NT (S18).
    SteerRetargeted,
    /// A delivery of a held id was refused `already-delivered` (S52).
    RetryRefused,
    /// An id the delivery memory had forgotten was delivered again (S51).
    ForgottenIdDeliveredAgain,
    /// A guarded send was accepted, its guard holding (S54).
    GuardHeld,
    /// A guarded send was refused `turn-mismatch` (S54).
    TurnMismatchRefused,
    /// A reused id with a different message was refused `conflict` (S56).
    ConflictRefused,
    /// A send or prepend was refused `full` (S55).
    FullRefused,
    /// A `resume` woke parked waking work (S57).
    ResumeWoke,
    /// Crash repair redelivered a claimed message no model call saw (S59).
    Redelivered,
    /// Crash repair skipped a message its allowance was spent on (S59: `r > A`).
    AllowanceSpent,
    /// A held id's fate shows both its step and its turn's end (S58).
    FateSteppedAndEnded,
}

impl Fact {
    /// Every fact the property tests' random sessions reach too (tests/src/proptests.rs checks
    /// they reach each); [`Fact::MODEL_ONLY`] holds the others.
    pub const ALL: [Fact; 19] = [
        Fact::BlockedTurnContinued,
        Fact::CompletedTurnContinued,
        Fact::LatchReplayedAtExit,
        Fact::LatchReplayedAtMaintenanceEnd,
        Fact::WakeLatchedDuringMaintenance,
        Fact::KeepInboxParked,
        Fact::ToolContextClaimed,
        Fact::MaxTokensThenContinue,
        Fact::RestoredMidTurn,
        Fact::DisposedWhileRunning,
        Fact::Disposed,
        Fact::TurnFailed,
        Fact::SteerRetargeted,
        Fact::RetryRefused,
        Fact::ForgottenIdDeliveredAgain,
        Fact::GuardHeld,
        Fact::TurnMismatchRefused,
        Fact::ConflictRefused,
        Fact::FullRefused,
    ];

    /// SPEC §13's facts, which only the model checker reaches: its environment sends `resume`
    /// and crashes with a redelivery allowance (the property tests' sessions do neither).
    pub const MODEL_ONLY: [Fact; 4] = [
        Fact::ResumeWoke,
        Fact::Redelivered,
        Fact::AllowanceSpent,
        Fact::FateSteppedAndEnded,
    ];

    /// The fact's name as the model checker reports it.
    pub fn name(self) -> &'static str {
        match self {
            Fact::BlockedTurnContinued => "reach: blocked turn continues to a queued follow-up",
            Fact::CompletedTurnContinued => "reach: completed turn continues to the next",
            Fact::LatchReplayedAtExit => "reach: latched wake replayed at driver exit",
            Fact::LatchReplayedAtMaintenanceEnd => {
                "reach: latched wake replayed at maintenance end"
            }
            Fact::WakeLatchedDuringMaintenance => "reach: maintenance with a latched wake",
            Fact::KeepInboxParked => "reach: keepInbox cancel parks waking work",
            Fact::ToolContextClaimed => "reach: tool context claimed at the next boundary",
            Fact::MaxTokensThenContinue => "reach: max-tokens then continue",
            Fact::RestoredMidTurn => "reach: restore mid-session",
            Fact::DisposedWhileRunning => "reach: dispose while running",
            Fact::Disposed => "reach: disposed",
            Fact::TurnFailed => "reach: turn ends in error",
            Fact::SteerRetargeted => "reach: steer after cancel retargeted",
            Fact::RetryRefused => "reach: a retry refused already-delivered",
            Fact::ForgottenIdDeliveredAgain => "reach: a forgotten id delivered again",
            Fact::GuardHeld => "reach: a guarded send accepted",
            Fact::TurnMismatchRefused => "reach: a guarded send refused turn-mismatch",
            Fact::ConflictRefused => "reach: a reused id refused conflict",
            Fact::FullRefused => "reach: a delivery refused full",
            Fact::ResumeWoke => "reach: a resume wakes parked work",
            Fact::Redelivered => "reach: repair redelivers an unseen claim",
            Fact::AllowanceSpent => "reach: repair skips a claim whose allowance is spent",
            Fact::FateSteppedAndEnded => "reach: a fate with its step and its turn's end",
        }
    }

    /// Whether only a machine with a delivery memory can show it.
    pub fn needs_memory(self) -> bool {
        matches!(
            self,
            Fact::RetryRefused | Fact::ForgottenIdDeliveredAgain | Fact::FateSteppedAndEnded
        )
    }

    /// Whether only a machine with an admission bound can show it (S55).
    pub fn needs_bound(self) -> bool {
        matches!(self, Fact::FullRefused)
    }

    /// A fact of a rejected input: the model keeps the state it reaches (a rejection changes
    /// nothing else, so without it the state would be the one before).
    pub fn of_rejection(self) -> bool {
        matches!(
            self,
            Fact::RetryRefused
                | Fact::TurnMismatchRefused
                | Fact::ConflictRefused
                | Fact::FullRefused
        )
    }

    /// The fact's bit in the monitor's set of facts.
    pub(super) fn bit(self) -> u32 {
        1 << (self as u32)
    }
}
