//! The invariant monitor: watches one machine's inputs and outputs and checks SPEC §10.
//!
//! The monitor decides nothing about delivery. It keeps a compact, canonical history of what the
//! machine *said* (the durable events through [`coxswain_log::Auditor`], the notifications, the
//! requests) and checks it against the invariants, plus the machine's public projections against
//! that history. The stateright model keeps one in its state; the property tests run one beside
//! the core. Its state is a function of the machine's own when the machine is right, so holding it
//! in a model state does not multiply the state space.

use std::collections::BTreeMap;
use std::fmt;

use coxswain_core::{
    Abort, Batch, CancelCause, Event, Input, Machine, MaintenanceInput, MessageId, Notification,
    Output, Outstanding, Rejected, Request, Status, StepAnswer, Target, TurnEndReason,
};
use coxswain_log::{Auditor, Rule};

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
}

impl Invariant {
    /// Every checked property.
    pub const ALL: [Invariant; 15] = [
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
}

impl Fact {
    /// Every fact.
    pub const ALL: [Fact; 13] = [
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
        }
    }

    fn bit(self) -> u16 {
        1 << (self as u16)
    }
}

/// What the monitor knows about a message it saw inserted and not yet leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Tracked {
    /// Delivered waking (S19): I9 expects it to be claimed or discarded…
    waking: bool,
    /// …unless it was parked (keepInbox cancel, failure, restore, delivery while disposing or
    /// under a `disposed` cause).
    excused: bool,
    /// Inserted while a step was outstanding (tool-produced context, S31).
    during_step: bool,
}

/// The request the machine waits on, as the monitor saw it issued.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Awaited {
    PreStep(Batch),
    Step,
    TurnStopping,
}

/// The current activity as the outputs show it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct ActivityView {
    /// The cause of the activity's `abort` (its first cancel), if one was emitted.
    aborted: Option<CancelCause>,
    /// `dispose` was accepted during this activity.
    disposing: bool,
    /// A step of this turn answered `max-tokens`.
    max_tokens: bool,
}

impl ActivityView {
    /// S24: whether a waking send now would park instead of latching.
    fn parks_wakes(&self) -> bool {
        self.disposing || self.aborted == Some(CancelCause::Disposed)
    }
}

/// Watches one machine and checks the invariants after every input.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Monitor {
    auditor: Auditor,
    live: BTreeMap<MessageId, Tracked>,
    /// The last status notification of this process (`None` before the first, or after a
    /// restore).
    status: Option<Status>,
    awaited: Option<Awaited>,
    activity: Option<ActivityView>,
    violation: Option<Violation>,
    /// Facts of the latest transition.
    facts: u16,
}

impl Default for Monitor {
    fn default() -> Self {
        Monitor::new()
    }
}

type Check = Result<(), Violation>;

fn fail(invariant: Invariant, detail: impl Into<String>) -> Check {
    Err(Violation {
        invariant,
        detail: detail.into(),
    })
}

impl Monitor {
    /// A monitor of a fresh machine.
    pub fn new() -> Self {
        Monitor {
            auditor: Auditor::new(),
            live: BTreeMap::new(),
            status: None,
            awaited: None,
            activity: None,
            violation: None,
            facts: 0,
        }
    }

    /// The first violation seen, if any. After one, the monitor stops checking.
    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    /// Whether this invariant was violated.
    pub fn violated(&self, invariant: Invariant) -> bool {
        self.violation
            .as_ref()
            .is_some_and(|v| v.invariant == invariant)
    }

    /// Whether the latest transition showed this fact.
    pub fn saw(&self, fact: Fact) -> bool {
        self.facts & fact.bit() != 0
    }

    /// The log auditor: the durable history so far.
    pub fn auditor(&self) -> &Auditor {
        &self.auditor
    }

    /// I9's settled condition: every waking message still pending was parked for a reason the
    /// spec allows.
    pub fn waking_work_settled(&self) -> bool {
        self.live.values().all(|t| !t.waking || t.excused)
    }

    /// Observes one input: `before` is the machine before it, `after` after it, `outputs`
    /// everything it emitted. Returns the first violation (also kept in the monitor).
    pub fn observe<T>(
        &mut self,
        before: &Machine,
        input: &Input,
        result: &Result<T, Rejected>,
        outputs: &[Output],
        after: &Machine,
    ) -> Result<(), Violation> {
        if let Some(violation) = &self.violation {
            return Err(violation.clone());
        }
        self.facts = 0;
        let checked = match result {
            Err(rejection) => self.check_rejection(before, input, rejection, outputs, after),
            Ok(_) => self
                .observe_accepted(before, input, outputs, after)
                .and_then(|()| self.check_state(after)),
        };
        if let Err(violation) = &checked {
            self.violation = Some(violation.clone());
        }
        checked
    }

    /// Crash repair and restore (S50, S49): closes an open turn in the log, restores a machine
    /// from it, and continues monitoring that machine as a new process.
    pub fn crash_and_restore(&mut self) -> Result<Machine, Violation> {
        let was_running = self.auditor.position().open_turn().is_some();
        for closer in self.auditor.position().closers() {
            if let Err(violation) = self.auditor.push_event(&closer) {
                return Err(self.record(audit_invariant(violation.rule), violation.to_string()));
            }
        }
        let machine = match self.auditor.restore() {
            Ok(machine) => machine,
            Err(error) => {
                return Err(self.record(Invariant::S49ReplayEquivalence, error.to_string()))
            }
        };
        // S48, S50: items pending at the crash park until the next wake.
        for tracked in self.live.values_mut() {
            tracked.excused = true;
        }
        self.status = None;
        self.awaited = None;
        self.activity = None;
        self.facts = if was_running {
            Fact::RestoredMidTurn.bit()
        } else {
            0
        };
        self.check_state(&machine)
            .inspect_err(|v| self.violation = Some(v.clone()))?;
        Ok(machine)
    }

    fn record(&mut self, invariant: Invariant, detail: String) -> Violation {
        let violation = Violation { invariant, detail };
        self.violation = Some(violation.clone());
        violation
    }

    fn note(&mut self, fact: Fact) {
        self.facts |= fact.bit();
    }

    /// S5 (nothing changed, nothing emitted) and S4/S13/S43/S45 (the rejection had a reason).
    fn check_rejection(
        &self,
        before: &Machine,
        input: &Input,
        rejection: &Rejected,
        outputs: &[Output],
        after: &Machine,
    ) -> Check {
        if !outputs.is_empty() {
            return fail(
                Invariant::S5Rejection,
                format!(
                    "rejected {} but emitted {} outputs",
                    rejection.kind(),
                    outputs.len()
                ),
            );
        }
        if before != after {
            return fail(
                Invariant::S5Rejection,
                format!("rejected {} but changed the machine", rejection.kind()),
            );
        }
        let justified = match rejection {
            Rejected::AfterDisposal => before.is_disposed(),
            Rejected::AlreadyPending(id) => self.live.contains_key(id),
            Rejected::Busy => !before.is_quiescent(),
            Rejected::UnexpectedCompletion { .. } => match input {
                Input::PreStep(_) => !matches!(self.awaited, Some(Awaited::PreStep(_))),
                Input::Step(_) => self.awaited != Some(Awaited::Step),
                Input::TurnStopping(_) => self.awaited != Some(Awaited::TurnStopping),
                Input::Maintenance(MaintenanceInput::End) => !before.is_maintenance(),
                _ => false,
            },
            _ => false,
        };
        if justified {
            Ok(())
        } else {
            fail(
                Invariant::S5Rejection,
                format!(
                    "rejected {} without a reason ({rejection})",
                    rejection.kind()
                ),
            )
        }
    }

    fn observe_accepted(
        &mut self,
        before: &Machine,
        input: &Input,
        outputs: &[Output],
        after: &Machine,
    ) -> Check {
        // S4: an accepted answer answers the outstanding request.
        let answered = match input {
            Input::PreStep(_) => Some(matches!(self.awaited, Some(Awaited::PreStep(_)))),
            Input::Step(_) => Some(self.awaited == Some(Awaited::Step)),
            Input::TurnStopping(_) => Some(self.awaited == Some(Awaited::TurnStopping)),
            _ => None,
        };
        if answered == Some(false) {
            return fail(
                Invariant::I10OneRequest,
                "an answer was accepted for a request that is not outstanding",
            );
        }
        if answered.is_some() {
            self.awaited = None;
        }
        // S15: a replacement inherits the replaced item's place, so also its parking.
        let replaced_excused = match input {
            Input::Replace { id, .. } => self.live.get(id).is_some_and(|t| t.excused),
            _ => false,
        };
        let cancel_requested = self.activity.as_ref().is_some_and(|a| a.aborted.is_some());
        let parks_wakes = self
            .activity
            .as_ref()
            .is_some_and(ActivityView::parks_wakes);
        let step_outstanding = self.awaited == Some(Awaited::Step);
        match input {
            Input::Maintenance(MaintenanceInput::Begin) => {
                self.activity = Some(ActivityView::default());
            }
            Input::Maintenance(MaintenanceInput::End) => {
                self.activity = None;
            }
            Input::Step(StepAnswer::MaxTokens) => {
                if let Some(activity) = self.activity.as_mut() {
                    activity.max_tokens = true;
                }
            }
            Input::Step(StepAnswer::Continue)
                if self.activity.as_ref().is_some_and(|a| a.max_tokens) =>
            {
                self.note(Fact::MaxTokensThenContinue);
            }
            _ => {}
        }
        if matches!(input, Input::Dispose {}) && before.status() == Status::Running {
            self.note(Fact::DisposedWhileRunning);
        }

        let mut claimed = Vec::new();
        let mut statuses = Vec::new();
        let mut discarded = Vec::new();
        let mut turn_ends = Vec::new();
        let mut turn_starts = 0usize;
        let mut requests = 0usize;
        let mut pre_steps = 0usize;
        for output in outputs {
            match output {
                Output::Event(event) => {
                    self.observe_event(event)?;
                    match event {
                        Event::TurnStart { .. } => turn_starts += 1,
                        Event::TurnEnd { reason, .. } => turn_ends.push(reason.clone()),
                        _ => {}
                    }
                }
                Output::Notify(notification) => self.observe_notification(
                    notification,
                    step_outstanding,
                    &mut claimed,
                    &mut statuses,
                    &mut discarded,
                )?,
                Output::Abort(abort) => self.observe_abort(abort)?,
                Output::Request(request) => {
                    requests += 1;
                    if matches!(request, Request::PreStep { .. }) {
                        pre_steps += 1;
                    }
                    self.observe_request(request, &mut claimed)?;
                }
                Output::Disposed => self.note(Fact::Disposed),
            }
        }
        if !claimed.is_empty() {
            return fail(
                Invariant::I4ClaimShape,
                "claimed messages with no pre-step request after them",
            );
        }

        // Waking flags of newly inserted messages come from their splices (S19).
        for target in [Target::NextTurn, Target::NextStep] {
            for (message, waking) in self.auditor.restorer().pending(target) {
                if let Some(tracked) = self.live.get_mut(message.id()) {
                    tracked.waking = waking;
                }
            }
        }

        match input {
            Input::Replace { message, .. } if replaced_excused => {
                if let Some(tracked) = self.live.get_mut(message.id()) {
                    tracked.excused = true;
                }
            }
            Input::Cancel { keep_inbox, .. } => {
                self.check_cancel(before, after, *keep_inbox, &discarded)?;
                if *keep_inbox {
                    for tracked in self.live.values_mut() {
                        tracked.excused = true;
                    }
                }
            }
            Input::Dispose {} => {
                self.check_cancel(before, after, false, &discarded)?;
                if let Some(activity) = self.activity.as_mut() {
                    activity.disposing = true;
                }
            }
            Input::Send { wakeup: false, .. }
            | Input::Inject(_)
            | Input::Remove(_)
            | Input::Replace { .. }
            | Input::Prepend { .. }
            | Input::Clear {}
                if !statuses.is_empty() || turn_starts > 0 || requests > 0 =>
            {
                return fail(
                    Invariant::I7IdleInjection,
                    "a non-waking send or queue edit opened a turn, changed status or requested",
                );
            }
            _ => {}
        }
        if let Some(message) = waking_send(input) {
            if cancel_requested {
                match outputs.first() {
                    Some(Output::Event(Event::Spliced(splice)))
                        if splice.target == Target::NextTurn =>
                    {
                        if !matches!(input, Input::Followup(_))
                            && !matches!(
                                input,
                                Input::Send {
                                    target: Target::NextTurn,
                                    ..
                                }
                            )
                        {
                            self.note(Fact::SteerRetargeted);
                        }
                    }
                    _ => {
                        return fail(
                            Invariant::S18Retarget,
                            format!(
                                "waking send `{message}` after a cancel did not join the end of NT"
                            ),
                        )
                    }
                }
            }
            if parks_wakes {
                if let Some(tracked) = self.live.get_mut(&message) {
                    tracked.excused = true;
                }
            }
            if before.is_maintenance() && !parks_wakes {
                self.note(Fact::WakeLatchedDuringMaintenance);
            }
        }
        if matches!(input, Input::Step(StepAnswer::Continue))
            && !cancel_requested
            && (requests, pre_steps) != (1, 1)
        {
            return fail(
                Invariant::S33ToolStepContinues,
                "a `continue` step did not lead to the next pre-step",
            );
        }

        // Facts for the `sometimes` properties.
        if matches!(statuses.as_slice(), [.., Status::Idle, Status::Running]) {
            self.note(Fact::LatchReplayedAtExit);
        }
        if matches!(input, Input::Maintenance(MaintenanceInput::End))
            && statuses == [Status::Running]
        {
            self.note(Fact::LatchReplayedAtMaintenanceEnd);
        }
        if turn_starts > 0 && statuses.is_empty() {
            match turn_ends.first() {
                Some(TurnEndReason::Blocked) => self.note(Fact::BlockedTurnContinued),
                Some(TurnEndReason::Completed) => self.note(Fact::CompletedTurnContinued),
                _ => {}
            }
        }
        if turn_ends
            .iter()
            .any(|r| matches!(r, TurnEndReason::Error { .. }))
        {
            self.note(Fact::TurnFailed);
        }
        if turn_ends
            .iter()
            .any(|r| matches!(r, TurnEndReason::Aborted { .. }))
            && statuses.last() == Some(&Status::Idle)
            && self.live.values().any(|t| t.waking && t.excused)
        {
            self.note(Fact::KeepInboxParked);
        }
        Ok(())
    }

    fn observe_event(&mut self, event: &Event) -> Check {
        if let Event::TurnEnd { reason, .. } = event {
            if self.awaited.is_some() {
                return fail(
                    Invariant::I10OneRequest,
                    "a turn closed while its request was unanswered",
                );
            }
            // S35: the turn's activity is over (a continuation opens a fresh one).
            self.activity = None;
            if matches!(reason, TurnEndReason::Error { .. }) {
                // S38: pending work parks after a failure.
                for tracked in self.live.values_mut() {
                    tracked.excused = true;
                }
            }
        }
        if let Event::TurnStart { .. } = event {
            self.activity = Some(ActivityView::default());
        }
        self.auditor
            .push_event(event)
            .map_err(|violation| Violation {
                invariant: audit_invariant(violation.rule),
                detail: violation.to_string(),
            })
    }

    fn observe_notification(
        &mut self,
        notification: &Notification,
        step_outstanding: bool,
        claimed: &mut Vec<MessageId>,
        statuses: &mut Vec<Status>,
        discarded: &mut Vec<MessageId>,
    ) -> Check {
        match notification {
            Notification::Inserted { message } => {
                let id = message.id().clone();
                if self.live.contains_key(&id) {
                    return fail(Invariant::I2Identity, format!("`{id}` inserted twice"));
                }
                self.live.insert(
                    id,
                    Tracked {
                        waking: false,
                        excused: false,
                        during_step: step_outstanding,
                    },
                );
            }
            Notification::Discarded { message } => {
                if self.live.remove(message.id()).is_none() {
                    return fail(
                        Invariant::I3Conservation,
                        format!("`{}` discarded but not pending", message.id()),
                    );
                }
                discarded.push(message.id().clone());
            }
            Notification::Claimed { message, turn } => {
                let Some(tracked) = self.live.remove(message.id()) else {
                    return fail(
                        Invariant::I3Conservation,
                        format!("`{}` claimed but not pending", message.id()),
                    );
                };
                if self.auditor.position().open_turn() != Some(*turn) {
                    return fail(
                        Invariant::I3Conservation,
                        format!(
                            "`{}` claimed by turn {turn}, which is not open",
                            message.id()
                        ),
                    );
                }
                if tracked.during_step {
                    self.note(Fact::ToolContextClaimed);
                }
                claimed.push(message.id().clone());
            }
            Notification::Status { status } => {
                let alternates = match self.status {
                    None => *status == Status::Running,
                    Some(previous) => previous != *status,
                };
                if !alternates {
                    return fail(
                        Invariant::I8Status,
                        format!("status {status:?} after {:?}", self.status),
                    );
                }
                self.status = Some(*status);
                statuses.push(*status);
                self.activity = match status {
                    Status::Running => Some(ActivityView::default()),
                    Status::Idle => None,
                };
            }
            Notification::Error { .. } => {}
        }
        Ok(())
    }

    /// S39: one `abort` per activity, and only while one runs.
    fn observe_abort(&mut self, abort: &Abort) -> Check {
        match self.activity.as_mut() {
            None => fail(Invariant::S39OneAbort, "abort with no activity"),
            Some(activity) if activity.aborted.is_some() => {
                fail(Invariant::S39OneAbort, "a second abort in one activity")
            }
            Some(activity) => {
                activity.aborted = Some(abort.cause.clone());
                Ok(())
            }
        }
    }

    fn observe_request(&mut self, request: &Request, claimed: &mut Vec<MessageId>) -> Check {
        let awaited = match request {
            Request::PreStep { messages, .. } => {
                let batch: Vec<&MessageId> = messages.iter().map(|m| m.id()).collect();
                if batch != claimed.iter().collect::<Vec<_>>() {
                    return fail(
                        Invariant::I4ClaimShape,
                        format!("pre-step batch {batch:?} is not the claimed batch {claimed:?}"),
                    );
                }
                claimed.clear();
                Awaited::PreStep(messages.clone())
            }
            Request::Step { .. } => Awaited::Step,
            Request::TurnStopping { .. } => Awaited::TurnStopping,
        };
        if self.awaited.is_some() {
            return fail(
                Invariant::I10OneRequest,
                "a request while another is outstanding",
            );
        }
        self.awaited = Some(awaited);
        Ok(())
    }

    /// I6, for `cancel` and `dispose`.
    fn check_cancel(
        &self,
        before: &Machine,
        after: &Machine,
        keep_inbox: bool,
        discarded: &[MessageId],
    ) -> Check {
        let lists = |machine: &Machine, target| -> Vec<MessageId> {
            machine
                .pending(target)
                .map(|p| p.message().id().clone())
                .collect()
        };
        if keep_inbox {
            let unchanged = [Target::NextTurn, Target::NextStep]
                .into_iter()
                .all(|t| lists(before, t) == lists(after, t));
            if !unchanged || !discarded.is_empty() {
                return fail(Invariant::I6Cancel, "a keepInbox cancel changed the lists");
            }
            return Ok(());
        }
        let mut expected = lists(before, Target::NextStep);
        expected.extend(lists(before, Target::NextTurn));
        if after.pending(Target::NextTurn).len() + after.pending(Target::NextStep).len() != 0 {
            return fail(Invariant::I6Cancel, "a cancel left items pending");
        }
        if expected != discarded {
            return fail(
                Invariant::I6Cancel,
                format!("a cancel discarded {discarded:?}, not {expected:?}"),
            );
        }
        Ok(())
    }

    /// The machine's projections against the history (I1, I2, I3, I8, I10, S49).
    pub fn check_state(&self, machine: &Machine) -> Result<(), Violation> {
        let restorer = self.auditor.restorer();
        for target in [Target::NextTurn, Target::NextStep] {
            let live = machine
                .pending(target)
                .map(|p| (p.message(), p.is_waking()));
            if !live.eq(restorer.pending(target)) {
                return fail(
                    Invariant::I1SpliceProjection,
                    format!("the durable splices do not reproduce {}", target.as_str()),
                );
            }
        }
        let mut ids: Vec<&MessageId> = [Target::NextTurn, Target::NextStep]
            .into_iter()
            .flat_map(|t| machine.pending(t).map(|p| p.message().id()))
            .collect();
        let count = ids.len();
        ids.sort();
        ids.dedup();
        if ids.len() != count {
            return fail(Invariant::I2Identity, "an id is pending twice");
        }
        if !ids.iter().copied().eq(self.live.keys()) {
            return fail(
                Invariant::I3Conservation,
                format!(
                    "pending {ids:?} but the notifications leave {:?} pending",
                    self.live.keys().collect::<Vec<_>>()
                ),
            );
        }
        if machine.status() != self.status.unwrap_or(Status::Idle) {
            return fail(
                Invariant::I8Status,
                format!(
                    "status() is {:?}, the last notification {:?}",
                    machine.status(),
                    self.status
                ),
            );
        }
        let outstanding = match machine.outstanding() {
            None => None,
            Some(Outstanding::PreStep { .. }) => Some("preStep"),
            Some(Outstanding::Step { .. }) => Some("step"),
            Some(Outstanding::TurnStopping { .. }) => Some("turnStopping"),
        };
        let awaited = self.awaited.as_ref().map(|a| match a {
            Awaited::PreStep(_) => "preStep",
            Awaited::Step => "step",
            Awaited::TurnStopping => "turnStopping",
        });
        if outstanding != awaited {
            return fail(
                Invariant::I10OneRequest,
                format!("outstanding() is {outstanding:?}, the requests say {awaited:?}"),
            );
        }
        if machine.is_quiescent() && !machine.is_disposed() {
            if self.auditor.position().open_turn().is_some() {
                return fail(Invariant::S49ReplayEquivalence, "idle inside an open turn");
            }
            if machine.last_turn() != restorer.position().last_turn() {
                return fail(
                    Invariant::S49ReplayEquivalence,
                    format!(
                        "lastTurn {} but the log restores {}",
                        machine.last_turn(),
                        restorer.position().last_turn()
                    ),
                );
            }
        }
        Ok(())
    }

    /// The batch of the outstanding pre-step request, if one is outstanding.
    pub fn pre_step_batch(&self) -> Option<&Batch> {
        match &self.awaited {
            Some(Awaited::PreStep(batch)) => Some(batch),
            _ => None,
        }
    }
}

/// The id of a waking send, if the input is one.
fn waking_send(input: &Input) -> Option<MessageId> {
    match input {
        Input::Send {
            message,
            wakeup: true,
            ..
        }
        | Input::Followup(message)
        | Input::Steer(message) => Some(message.id().clone()),
        _ => None,
    }
}

fn audit_invariant(rule: Rule) -> Invariant {
    match rule {
        Rule::I1 => Invariant::I1SpliceProjection,
        Rule::I2 => Invariant::I2Identity,
        Rule::I3 => Invariant::I3Conservation,
        Rule::I4 => Invariant::I4ClaimShape,
        Rule::I5 => Invariant::I5TurnEnclosure,
        Rule::S10 | Rule::S46 => Invariant::S10SpliceShape,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::{
        CancelCause, Message, Notification, PreStepAnswer, StepAnswer, TurnStoppingAnswer,
    };
    use std::sync::Arc;

    /// Applies `input` to `machine` and shows the monitor what happened.
    fn feed(monitor: &mut Monitor, machine: &mut Machine, input: Input) -> Result<(), Violation> {
        let before = machine.clone();
        let (result, outputs) = match machine.handle(input.clone()) {
            Ok(transition) => (Ok(()), transition.into_outputs().collect()),
            Err(rejected) => (Err(rejected), Vec::new()),
        };
        monitor.observe(&before, &input, &result, &outputs, machine)
    }

    fn user(id: &str) -> Arc<Message> {
        Arc::new(Message::user(id, id))
    }

    #[test]
    fn a_clean_session_passes_and_shows_its_facts() {
        let (mut monitor, mut machine) = (Monitor::new(), Machine::new());
        let inputs = [
            Input::Followup(user("a")),
            Input::Followup(user("b")),
            Input::PreStep(PreStepAnswer::Reject),
        ];
        for input in inputs {
            feed(&mut monitor, &mut machine, input).unwrap();
        }
        assert!(monitor.saw(Fact::BlockedTurnContinued));
        feed(
            &mut monitor,
            &mut machine,
            Input::Step(StepAnswer::Completed),
        )
        .unwrap();
        assert!(
            !monitor.saw(Fact::BlockedTurnContinued),
            "facts are per transition"
        );
        let batch = monitor.pre_step_batch().cloned().unwrap();
        feed(
            &mut monitor,
            &mut machine,
            Input::PreStep(PreStepAnswer::Enter(batch)),
        )
        .unwrap();
        feed(
            &mut monitor,
            &mut machine,
            Input::Step(StepAnswer::Completed),
        )
        .unwrap();
        feed(
            &mut monitor,
            &mut machine,
            Input::TurnStopping(TurnStoppingAnswer::Done),
        )
        .unwrap();
        assert!(machine.is_quiescent());
        assert!(monitor.waking_work_settled());
        assert_eq!(monitor.violation(), None);
    }

    #[test]
    fn i9_keep_inbox_parking_is_excused_and_a_crash_restores_the_lists() {
        let (mut monitor, mut machine) = (Monitor::new(), Machine::new());
        feed(&mut monitor, &mut machine, Input::Followup(user("a"))).unwrap();
        feed(&mut monitor, &mut machine, Input::Followup(user("b"))).unwrap();
        assert!(!monitor.waking_work_settled(), "b waits for its turn");
        let cancel = Input::Cancel {
            cause: CancelCause::User,
            keep_inbox: true,
        };
        feed(&mut monitor, &mut machine, cancel).unwrap();
        assert!(
            monitor.waking_work_settled(),
            "b is parked by the keepInbox cancel"
        );
        let restored = monitor.crash_and_restore().unwrap();
        assert!(monitor.saw(Fact::RestoredMidTurn));
        let ids: Vec<_> = restored
            .pending(coxswain_core::Target::NextTurn)
            .map(|p| p.message().id().to_string())
            .collect();
        assert_eq!(ids, ["b"]);
        assert_eq!(restored.last_turn(), 1);
    }

    #[test]
    fn forged_outputs_are_caught_by_the_right_invariant() {
        let machine = Machine::new();
        let status = |status| Output::Notify(Notification::Status { status });
        let cases = [
            (vec![status(Status::Idle)], Invariant::I8Status),
            (
                vec![Output::Notify(Notification::Discarded {
                    message: user("x"),
                })],
                Invariant::I3Conservation,
            ),
            (
                vec![
                    Output::Request(Request::PreStep {
                        turn: 1,
                        step: 1,
                        messages: Batch::new(),
                    }),
                    Output::Request(Request::Step { turn: 1, step: 1 }),
                ],
                Invariant::I10OneRequest,
            ),
            (
                vec![Output::Abort(Abort {
                    cause: CancelCause::User,
                })],
                Invariant::S39OneAbort,
            ),
            (
                vec![Output::Event(Event::TurnStart { turn: 2 })],
                Invariant::I5TurnEnclosure,
            ),
        ];
        for (outputs, invariant) in cases {
            let mut monitor = Monitor::new();
            // `dispose` on an empty idle machine: outputs beyond `disposed` are forged.
            let violation = monitor
                .observe(&machine, &Input::Dispose {}, &Ok(true), &outputs, &machine)
                .unwrap_err();
            assert_eq!(violation.invariant, invariant, "{outputs:?}: {violation}");
            assert!(monitor.violated(invariant));
        }
        // A rejection must change nothing, emit nothing, and have a reason.
        let mut monitor = Monitor::new();
        let unjustified: Result<bool, Rejected> = Err(Rejected::Busy);
        let violation = monitor
            .observe(&machine, &Input::Clear {}, &unjustified, &[], &machine)
            .unwrap_err();
        assert_eq!(violation.invariant, Invariant::S5Rejection);
    }
}
