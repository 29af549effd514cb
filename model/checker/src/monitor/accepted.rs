//! An accepted input: the answer it gives, the activity it changes, its outputs, and then the
//! rules its kind implies (S4, S15, S18, S19, S24, S33, I6, I7, I10).

use coxswain_core::{
    Event, Input, Machine, MaintenanceInput, MessageId, Output, Status, StepAnswer, Target,
};

use super::outputs::Tally;
use super::properties::{fail, Check, Fact, Invariant};
use super::{ActivityView, Awaited, Monitor};

/// What the monitor knew before an input's outputs that its checks need after them.
struct Prior {
    /// S15: the input replaces a parked item, so its replacement is parked too.
    replaced_excused: bool,
    /// S18: the activity's cancel was already requested (its `abort` was emitted).
    cancel_requested: bool,
    /// S24: a waking send now parks instead of latching.
    parks_wakes: bool,
    /// S31: a step is outstanding, so what is inserted is tool context.
    step_outstanding: bool,
}

impl Monitor {
    /// Observes an accepted input: checks its outputs and what its kind implies, and notes the
    /// facts the transition shows.
    pub(super) fn observe_accepted(
        &mut self,
        before: &Machine,
        input: &Input,
        outputs: &[Output],
        after: &Machine,
    ) -> Check {
        self.take_answer(input)?;
        self.check_admitted(before, input, outputs)?;
        // S57: idle (no driver, no maintenance, not disposed) with waking work pending (S19).
        let resume_wakes = before.is_quiescent()
            && !before.is_maintenance()
            && !before.is_disposed()
            && self.live.values().any(|tracked| tracked.waking);
        let resume = matches!(input, Input::Resume {});
        if resume && !resume_wakes {
            // Before the outputs are walked: what a resume must not emit is S57's to report.
            self.check_resume_changes_nothing(before, after, outputs.len())?;
        }
        let prior = self.prior(input);
        self.track_activity(before, input);
        let tally = self.observe_outputs(outputs, prior.step_outstanding)?;
        self.refresh_waking_flags();
        self.check_by_input_kind(before, input, after, &prior, &tally)?;
        if resume && resume_wakes {
            self.check_resume_wakes(&tally)?;
        }
        if let Some(message) = waking_send(input) {
            self.check_retarget(input, &message, outputs, &prior)?;
            self.park_or_latch(before, &message, &prior);
        }
        check_tool_step_continues(input, &prior, &tally)?;
        self.note_reached_facts(input, &tally);
        Ok(())
    }

    /// S4, I10: an accepted answer answers the outstanding request, which it clears.
    fn take_answer(&mut self, input: &Input) -> Check {
        let answered = match input {
            Input::PreStep(_) => matches!(self.awaited, Some(Awaited::PreStep(_))),
            Input::Step(_) => self.awaited == Some(Awaited::Step),
            Input::TurnStopping(_) => self.awaited == Some(Awaited::TurnStopping),
            _ => return Ok(()),
        };
        if !answered {
            return fail(
                Invariant::I10OneRequest,
                "an answer was accepted for a request that is not outstanding",
            );
        }
        self.awaited = None;
        Ok(())
    }

    /// What the checks after the outputs need from before them (once the answer is taken).
    fn prior(&self, input: &Input) -> Prior {
        let activity = self.activity.as_ref();
        Prior {
            replaced_excused: match input {
                Input::Replace { id, .. } => self.live.get(id).is_some_and(|t| t.excused),
                _ => false,
            },
            cancel_requested: activity.is_some_and(|a| a.aborted.is_some()),
            parks_wakes: activity.is_some_and(ActivityView::parks_wakes),
            step_outstanding: self.awaited == Some(Awaited::Step),
        }
    }

    /// The activity the input opens (maintenance, S43) or closes, and what it shows of the
    /// turn's steps (S34) and of disposal (S45).
    fn track_activity(&mut self, before: &Machine, input: &Input) {
        match input {
            Input::Maintenance(MaintenanceInput::Begin) => {
                self.activity = Some(ActivityView::default());
            }
            Input::Maintenance(MaintenanceInput::End) => self.activity = None,
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
    }

    /// S19: the waking flags of newly inserted messages come from their splices.
    fn refresh_waking_flags(&mut self) {
        for target in [Target::NextTurn, Target::NextStep] {
            for (message, waking) in self.auditor.restorer().pending(target) {
                if let Some(tracked) = self.live.get_mut(message.id()) {
                    tracked.waking = waking;
                }
            }
        }
    }

    /// The rules of the input's kind: S15 for a replacement of a parked item (which takes
    /// precedence, so such a replacement is not checked against I7), I6 for `cancel` and
    /// `dispose`, I7 for a non-waking send or a queue edit.
    fn check_by_input_kind(
        &mut self,
        before: &Machine,
        input: &Input,
        after: &Machine,
        prior: &Prior,
        tally: &Tally,
    ) -> Check {
        match input {
            Input::Replace { message, .. } if prior.replaced_excused => {
                self.excuse(message.id());
                Ok(())
            }
            Input::Cancel { keep_inbox, .. } => {
                check_cancel(before, after, *keep_inbox, &tally.discarded)?;
                if *keep_inbox {
                    self.excuse_all();
                }
                Ok(())
            }
            Input::Dispose {} => {
                check_cancel(before, after, false, &tally.discarded)?;
                if let Some(activity) = self.activity.as_mut() {
                    activity.disposing = true;
                }
                Ok(())
            }
            _ if is_idle_injection(input) => check_idle_injection(tally),
            _ => Ok(()),
        }
    }

    /// S18: a waking send after its activity's cancel was requested joins the end of NT (for a
    /// steer or an NS send, by retargeting).
    fn check_retarget(
        &mut self,
        input: &Input,
        message: &MessageId,
        outputs: &[Output],
        prior: &Prior,
    ) -> Check {
        if !prior.cancel_requested {
            return Ok(());
        }
        match outputs.first() {
            Some(Output::Event(Event::Spliced(splice))) if splice.target == Target::NextTurn => {
                let asked_for_nt = matches!(
                    input,
                    Input::Followup(_)
                        | Input::Send {
                            target: Target::NextTurn,
                            ..
                        }
                );
                if !asked_for_nt {
                    self.note(Fact::SteerRetargeted);
                }
                Ok(())
            }
            _ => fail(
                Invariant::S18Retarget,
                format!("waking send `{message}` after a cancel did not join the end of NT"),
            ),
        }
    }

    /// S24: a waking send parks while disposing or under a `disposed` cancel; during
    /// maintenance otherwise, it latches.
    fn park_or_latch(&mut self, before: &Machine, message: &MessageId, prior: &Prior) {
        if prior.parks_wakes {
            self.excuse(message);
        }
        if before.is_maintenance() && !prior.parks_wakes {
            self.note(Fact::WakeLatchedDuringMaintenance);
        }
    }
}

/// I6, for `cancel` and `dispose`: without `keepInbox`, both lists empty with one `discarded`
/// each, NS first; with it, the lists are unchanged and nothing is discarded.
fn check_cancel(
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

/// I7's inputs: a non-waking send and the queue edits.
fn is_idle_injection(input: &Input) -> bool {
    matches!(
        input,
        Input::Send { wakeup: false, .. }
            | Input::Inject(_)
            | Input::Remove(_)
            | Input::Replace { .. }
            | Input::Prepend { .. }
            | Input::Clear {}
    )
}

/// I7: a non-waking send or a queue edit never opens a turn, changes status or requests.
fn check_idle_injection(tally: &Tally) -> Check {
    if !tally.statuses.is_empty() || tally.turn_starts > 0 || tally.requests > 0 {
        return fail(
            Invariant::I7IdleInjection,
            "a non-waking send or queue edit opened a turn, changed status or requested",
        );
    }
    Ok(())
}

/// S33, S34: a `continue` step (unless a cancel was requested) leads to exactly one request, the
/// next pre-step.
fn check_tool_step_continues(input: &Input, prior: &Prior, tally: &Tally) -> Check {
    if matches!(input, Input::Step(StepAnswer::Continue))
        && !prior.cancel_requested
        && (tally.requests, tally.pre_steps) != (1, 1)
    {
        return fail(
            Invariant::S33ToolStepContinues,
            "a `continue` step did not lead to the next pre-step",
        );
    }
    Ok(())
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
