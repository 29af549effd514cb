//! One accepted input's outputs, walked in order: each event goes through the log auditor, each
//! notification and request is checked against the history (I2, I3, I4, I5, I8, I10, S39), and
//! what the later checks need is tallied.

use coxswain_core::{
    CancelCause, Effect, Event, MessageId, Notification, Output, Request, SharedMessage, Status,
    Target, TurnEndReason,
};

use super::memory::SpliceIds;
use super::properties::{fail, Check, Fact, Invariant, Violation};
use super::records::Left;
use super::{ActivityView, Awaited, Monitor, Tracked};

/// What one input's outputs showed, for the checks after them.
#[derive(Default)]
pub(super) struct Tally {
    /// Claimed since the last pre-step request (I4: the next pre-step's batch).
    pub(super) claimed: Vec<MessageId>,
    /// Every status notification, in order.
    pub(super) statuses: Vec<Status>,
    /// Every discarded id, in order.
    pub(super) discarded: Vec<MessageId>,
    /// Every `turn/end` reason, in order.
    pub(super) turn_ends: Vec<TurnEndReason>,
    /// How many `turn/start` events.
    pub(super) turn_starts: usize,
    /// How many preStep, step and turnStopping requests (an abort is not counted).
    pub(super) requests: usize,
    /// How many preStep requests.
    pub(super) pre_steps: usize,
    /// The ids the current splice removed and inserted (I11).
    splice: SpliceIds,
    /// The current splice carries `wakeup: true`: what it inserts is waking (S19, S15).
    splice_wakeup: bool,
    /// The current splice's list (a claim's list, S59).
    splice_target: Option<Target>,
}

/// An output as the monitor sorts it.
enum Seen<'a> {
    Event(&'a Event),
    Notification(&'a Notification),
    /// A request the machine then waits on (I10).
    Request(Awaited),
    /// The activity's `abort` (S39): fire and forget, never awaited.
    Abort(&'a CancelCause),
    Disposed,
    /// An activity's begin: no output of the wire order the monitor reads (FORMAT.md), so
    /// nothing to tally.
    Begin,
}

/// Sorts an output. The one place that matches how the core spells an `abort`.
fn sort(output: &Output) -> Seen<'_> {
    match output {
        Output::Event(event) => Seen::Event(event),
        Output::Effect(Effect::Notify(notification)) => Seen::Notification(notification),
        Output::Effect(Effect::Abort(abort)) => Seen::Abort(&abort.cause),
        Output::Effect(Effect::Request(Request::PreStep { messages, .. })) => {
            Seen::Request(Awaited::PreStep(messages.clone()))
        }
        Output::Effect(Effect::Request(Request::Step { .. })) => Seen::Request(Awaited::Step),
        Output::Effect(Effect::Request(Request::TurnStopping { .. })) => {
            Seen::Request(Awaited::TurnStopping)
        }
        Output::Effect(Effect::Disposed) => Seen::Disposed,
        Output::Effect(Effect::Begin(_)) => Seen::Begin,
    }
}

impl Monitor {
    /// Walks an accepted input's outputs in order and tallies them. `step_outstanding`: a step
    /// was outstanding when the input arrived, so inserted items are tool context (S31).
    pub(super) fn observe_outputs(
        &mut self,
        outputs: &[Output],
        step_outstanding: bool,
    ) -> Result<Tally, Violation> {
        let mut tally = Tally::default();
        for output in outputs {
            match sort(output) {
                Seen::Event(event) => {
                    match event {
                        Event::Spliced(splice) => {
                            self.close_splice(&mut tally.splice);
                            tally.splice_wakeup = splice.wakeup;
                            tally.splice_target = Some(splice.target);
                        }
                        // The records of a claim the turn ends exist before its end (S58).
                        Event::TurnEnd { .. } => self.close_splice(&mut tally.splice),
                        _ => {}
                    }
                    self.observe_event(event, &mut tally)?
                }
                Seen::Notification(notification) => {
                    self.observe_notification(notification, step_outstanding, &mut tally)?
                }
                Seen::Request(awaited) => self.observe_request(awaited, &mut tally)?,
                Seen::Abort(cause) => self.observe_abort(cause)?,
                Seen::Disposed => self.note(Fact::Disposed),
                Seen::Begin => {}
            }
        }
        self.close_splice(&mut tally.splice);
        if !tally.claimed.is_empty() {
            return fail(
                Invariant::I4ClaimShape,
                "claimed messages with no pre-step request after them",
            );
        }
        Ok(tally)
    }

    /// A durable event: I10 at a turn's end, the activity it opens or closes, then the log
    /// auditor (I1–I5, S10).
    fn observe_event(&mut self, event: &Event, tally: &mut Tally) -> Check {
        match event {
            Event::TurnEnd { reason, .. } => self.observe_turn_end(reason)?,
            Event::TurnStart { .. } => self.activity = Some(ActivityView::default()),
            _ => {}
        }
        self.auditor
            .push_event(event)
            .map_err(|violation| Violation {
                invariant: Invariant::of_audit_rule(violation.rule),
                detail: violation.to_string(),
            })?;
        match event {
            Event::TurnStart { .. } => {
                // After the auditor, so a misplaced `turn/start` is reported as I5 first.
                self.check_waking_work_pending()?;
                tally.turn_starts += 1;
            }
            Event::TurnEnd { reason, .. } => tally.turn_ends.push(reason.clone()),
            _ => {}
        }
        self.observe_record_event(event);
        Ok(())
    }

    /// S21, S24, S25, S35: a turn opens only for waking work. Just before its `turn/start`, some
    /// pending message (as the notifications left them) was delivered waking; nothing between
    /// the input and the `turn/start` claims anything, so this is the work the turn is for.
    fn check_waking_work_pending(&self) -> Check {
        if self.live.values().any(|tracked| tracked.waking) {
            return Ok(());
        }
        fail(
            Invariant::NoSpuriousActivity,
            format!(
                "turn/start with no waking work pending (pending: {:?})",
                self.live.keys().collect::<Vec<_>>()
            ),
        )
    }

    /// I10: a turn closes only with no request unanswered. S35: its activity is over. S38: after
    /// a failure, pending work parks.
    fn observe_turn_end(&mut self, reason: &TurnEndReason) -> Check {
        if self.awaited.is_some() {
            return fail(
                Invariant::I10OneRequest,
                "a turn closed while its request was unanswered",
            );
        }
        self.activity = None;
        if matches!(reason, TurnEndReason::Error { .. }) {
            self.excuse_all();
        }
        Ok(())
    }

    fn observe_notification(
        &mut self,
        notification: &Notification,
        step_outstanding: bool,
        tally: &mut Tally,
    ) -> Check {
        match notification {
            Notification::Inserted { message } => {
                self.observe_memory_insert(message.id(), &mut tally.splice)?;
                let target = tally.splice_target.unwrap_or(Target::NextTurn);
                self.observe_inserted(message, tally.splice_wakeup, target, step_outstanding)
            }
            Notification::Discarded { message } => self.observe_discarded(message, tally),
            Notification::Claimed { message, turn } => self.observe_claimed(message, *turn, tally),
            Notification::Status { status } => self.observe_status(*status, tally),
            Notification::Error { .. } => Ok(()),
        }
    }

    /// I2: an id is inserted only while it is not pending. S19: it is waking when its splice
    /// says `wakeup`.
    fn observe_inserted(
        &mut self,
        message: &SharedMessage,
        waking: bool,
        target: Target,
        step_outstanding: bool,
    ) -> Check {
        let id = message.id().clone();
        if self.live.contains_key(&id) {
            return fail(Invariant::I2Identity, format!("`{id}` inserted twice"));
        }
        let tracked = Tracked {
            waking,
            excused: false,
            during_step: step_outstanding,
            target,
        };
        self.live.insert(id, tracked);
        Ok(())
    }

    /// I3: only a pending message is discarded.
    fn observe_discarded(&mut self, message: &SharedMessage, tally: &mut Tally) -> Check {
        if self.live.remove(message.id()).is_none() {
            return fail(
                Invariant::I3Conservation,
                format!("`{}` discarded but not pending", message.id()),
            );
        }
        tally.discarded.push(message.id().clone());
        Monitor::observe_memory_leave(message, Left::Discarded, &mut tally.splice);
        Ok(())
    }

    /// I3: only a pending message is claimed, and only by the open turn.
    fn observe_claimed(&mut self, message: &SharedMessage, turn: u64, tally: &mut Tally) -> Check {
        let Some(tracked) = self.live.remove(message.id()) else {
            return fail(
                Invariant::I3Conservation,
                format!("`{}` claimed but not pending", message.id()),
            );
        };
        if self.auditor.position().open_turn() != Some(turn) {
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
        tally.claimed.push(message.id().clone());
        Monitor::observe_memory_leave(message, Left::Claimed(turn), &mut tally.splice);
        self.note_unseen_claim(message, tracked);
        Ok(())
    }

    /// I8: status notifications alternate, starting from `running`. Each opens or closes an
    /// activity.
    fn observe_status(&mut self, status: Status, tally: &mut Tally) -> Check {
        let alternates = match self.status {
            None => status == Status::Running,
            Some(previous) => previous != status,
        };
        if !alternates {
            return fail(
                Invariant::I8Status,
                format!("status {status:?} after {:?}", self.status),
            );
        }
        self.status = Some(status);
        tally.statuses.push(status);
        self.activity = match status {
            Status::Running => Some(ActivityView::default()),
            Status::Idle => None,
        };
        Ok(())
    }

    /// I4: a pre-step's batch is the batch claimed just before it. I10: one request at a time.
    fn observe_request(&mut self, awaited: Awaited, tally: &mut Tally) -> Check {
        tally.requests += 1;
        if let Awaited::PreStep(messages) = &awaited {
            tally.pre_steps += 1;
            let batch: Vec<&MessageId> = messages.iter().map(|m| m.id()).collect();
            if batch != tally.claimed.iter().collect::<Vec<_>>() {
                return fail(
                    Invariant::I4ClaimShape,
                    format!(
                        "pre-step batch {batch:?} is not the claimed batch {:?}",
                        tally.claimed
                    ),
                );
            }
            tally.claimed.clear();
        }
        if self.awaited.is_some() {
            return fail(
                Invariant::I10OneRequest,
                "a request while another is outstanding",
            );
        }
        self.awaited = Some(awaited);
        Ok(())
    }

    /// S39: one `abort` per activity, never while idle.
    fn observe_abort(&mut self, cause: &CancelCause) -> Check {
        match self.activity.as_mut() {
            None => fail(Invariant::S39OneAbort, "abort with no activity"),
            Some(activity) if activity.aborted.is_some() => {
                fail(Invariant::S39OneAbort, "a second abort in one activity")
            }
            Some(activity) => {
                activity.aborted = Some(cause.clone());
                Ok(())
            }
        }
    }
}
