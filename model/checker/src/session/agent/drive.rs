//! The driver contract the agent model runs after every action, and the checks on what the
//! loop does: see the [parent module](super).

use std::time::Duration;

use coxswain_core::{
    CancelCause, Effect, Event, Fate, Input, Outstanding, PreStepAnswer, Request, StepAnswer,
    Target, TurnEndReason, TurnStoppingAnswer,
};
use coxswain_log::{Entry, HostEvent};
use coxswain_session::{
    AgentLoop, BatchNo, Command, Ending, Failure, Hooks, HostFailure, HostReply, LogFailure,
    Output, Reply,
};

use super::{AgentAction, AgentModel, AgentProperty, AgentState, Caller, Fed, Job, Submit, GRACE};

impl AgentModel {
    /// One action, then the driver contract.
    pub(super) fn apply(
        &self,
        s: &mut AgentState,
        agent: &mut AgentLoop<u8>,
        action: AgentAction,
    ) -> Option<()> {
        let now = Duration::from_secs(s.now);
        match action {
            AgentAction::Submit(submit) => self.submit(s, agent, submit)?,
            AgentAction::Answer
            | AgentAction::Nothing
            | AgentAction::Refused
            | AgentAction::Raised => self.host_answer(s, agent, action)?,
            AgentAction::Late => {
                s.operations_left = s.operations_left.checked_sub(1)?;
                let request = match &mut s.abandoned {
                    Some((request, late @ false)) => {
                        *late = true;
                        request.clone()
                    }
                    _ => return None,
                };
                let idle = s.writing.is_none() && !agent.has_batch() && agent.queued() == 0;
                s.fed.push(Fed::HostAnswer(action));
                let answer = HostReply::Answer(valid_answer(&request));
                agent.host_answered(request.outstanding(), answer);
                self.drive(s, agent, now);
                // Taken at once, alone: dropped, it staged nothing.
                if idle && !agent.has_batch() {
                    s.reached |= 1 << 8;
                }
                return Some(());
            }
            AgentAction::JobEnded => {
                let Some(Job::Running(caller)) = s.job else {
                    return None;
                };
                s.job = Some(Job::Ending(caller));
                s.fed.push(Fed::JobEnd);
                agent.job_ended(caller);
            }
            AgentAction::Written(outcome) => {
                let (batch, entries) = s.writing.take()?;
                if let Some(failure) = outcome {
                    s.operations_left = s.operations_left.checked_sub(1)?;
                    s.last_failure = Some(failure);
                }
                self.written(s, agent, batch, entries, outcome, now);
            }
            AgentAction::Tick => {
                if s.writing.is_some() || s.ending.is_some() {
                    return None;
                }
                let at = agent.poll_timeout()?;
                s.now = s.now.max(at.as_secs());
                agent.handle_timeout(Duration::from_secs(s.now));
            }
            AgentAction::Finish => {
                if s.finished || s.ending.is_none() {
                    return None;
                }
                s.finished = true;
                s.released = None;
                agent.finish();
            }
        }
        self.drive(s, agent, Duration::from_secs(s.now));
        Some(())
    }

    /// A caller submits a command.
    fn submit(&self, s: &mut AgentState, agent: &mut AgentLoop<u8>, submit: Submit) -> Option<()> {
        s.operations_left = s.operations_left.checked_sub(1)?;
        let command = match submit {
            Submit::Followup(i) => {
                Command::Input(Input::Followup(self.pool.get(usize::from(i))?.clone()))
            }
            Submit::Steer(i) => {
                Command::Input(Input::Steer(self.pool.get(usize::from(i))?.clone()))
            }
            Submit::Cancel => Command::Input(Input::Cancel {
                cause: CancelCause::User,
                keep_inbox: false,
            }),
            Submit::Maintenance => Command::Maintenance,
            Submit::Pending => Command::Pending,
            Submit::Close => Command::Close,
            Submit::Dispose => Command::Input(Input::Dispose {}),
            Submit::Fate(i) => Command::Fate(self.pool.get(usize::from(i))?.id().clone()),
            Submit::Record => {
                let Some(Request::Step { turn, step }) = s.released else {
                    return None;
                };
                let event = HostEvent::new("model/output", serde_json::json!("hi")).ok()?;
                Command::Record {
                    turn,
                    step,
                    events: vec![event],
                }
            }
        };
        let id = u8::try_from(s.callers.len()).ok()?;
        s.callers.push(Caller {
            command: submit,
            answered: false,
        });
        s.fed.push(Fed::Command(submit));
        agent.submit(command, id);
        Some(())
    }

    /// The host answers the call it was released.
    fn host_answer(
        &self,
        s: &mut AgentState,
        agent: &mut AgentLoop<u8>,
        action: AgentAction,
    ) -> Option<()> {
        let request = s.released.take()?;
        let outstanding = request.outstanding();
        let reply = match action {
            AgentAction::Answer => HostReply::Answer(valid_answer(&request)),
            AgentAction::Nothing => {
                if matches!(request, Request::Step { .. }) {
                    s.invalid = Some(outstanding);
                }
                HostReply::Nothing
            }
            AgentAction::Refused => {
                s.operations_left = s.operations_left.checked_sub(1)?;
                s.invalid = Some(outstanding);
                HostReply::Answer(match request {
                    Request::Step { .. } => Input::TurnStopping(TurnStoppingAnswer::Done),
                    _ => Input::Step(StepAnswer::Completed),
                })
            }
            _ => HostReply::Failed(HostFailure::Raised, "model".into()),
        };
        s.fed.push(Fed::HostAnswer(action));
        s.answer = Some((request.clone(), action));
        agent.host_answered(outstanding, reply);
        Some(())
    }

    /// A write came back.
    fn written(
        &self,
        s: &mut AgentState,
        agent: &mut AgentLoop<u8>,
        batch: BatchNo,
        entries: Vec<Entry>,
        outcome: Option<LogFailure>,
        now: Duration,
    ) {
        let result = outcome.map_or(Ok(()), Err);
        if outcome.is_none() {
            self.made_durable(s, &entries);
        }
        if let Err(mismatch) = agent.appended(batch, result, now) {
            s.violate(AgentProperty::DurableLog, format!("appended: {mismatch}"));
            return;
        }
        s.batch_from = s.fed.len().saturating_sub(agent.queued());
        // The outputs of the outcome itself, before anything else is staged.
        let mut stopped = None;
        let mut failed_callers = 0;
        while let Some(output) = agent.poll_output() {
            if let Output::Ended(ending) = &output {
                stopped = Some(*ending);
            }
            if matches!(&output, Output::Reply(_, Err(Failure::Persistence))) {
                failed_callers += 1;
            }
            self.carry(s, output);
        }
        match outcome {
            Some(LogFailure::Failed) => {
                if let Some(ending) = stopped.or(agent.ending()) {
                    s.violate(
                        AgentProperty::StopPolicy,
                        format!("a failed append ended the agent ({ending:?})"),
                    );
                } else if failed_callers > 0 {
                    s.reached |= 1 << 1;
                }
            }
            Some(failure) => {
                if stopped != Some(Ending::Stopped(failure)) {
                    s.violate(
                        AgentProperty::StopPolicy,
                        format!("a {failure:?} append did not stop the agent (ended {stopped:?})"),
                    );
                } else if failure == LogFailure::Indeterminate {
                    s.reached |= 1 << 2;
                } else {
                    s.reached |= 1 << 3;
                }
            }
            None => {}
        }
    }

    /// The durable log took `entries`: read them back, and settle an invalid answer's `fail`.
    fn made_durable(&self, s: &mut AgentState, entries: &[Entry]) {
        for entry in entries {
            let read = match entry {
                Entry::Machine(event) => s.durable.push_event(event),
                Entry::Host(_) => s.durable.skip_host_event(),
            };
            if let Err(invalid) = read {
                s.violate(
                    AgentProperty::DurableLog,
                    format!("the log written does not read back: {invalid}"),
                );
            }
        }
        let Some(request) = s.invalid else {
            return;
        };
        let ended = entries.iter().find_map(|entry| match entry {
            Entry::Machine(Event::TurnEnd { turn, reason }) if *turn == request.turn() => {
                Some(reason)
            }
            _ => None,
        });
        match ended {
            None => {}
            Some(TurnEndReason::Error { error }) if &*error.code == "host-invalid-answer" => {
                s.invalid = None;
                s.reached |= 1 << 4;
            }
            Some(TurnEndReason::Aborted { .. }) => s.invalid = None,
            Some(reason) => s.violate(
                AgentProperty::RefusedAnswerFails,
                format!("the invalid answer to {request:?} ended its turn {reason:?}"),
            ),
        }
    }

    /// The driver contract: carry out every output; seal and start the next write; repeat.
    fn drive(&self, s: &mut AgentState, agent: &mut AgentLoop<u8>, now: Duration) {
        loop {
            while let Some(output) = agent.poll_output() {
                self.carry(s, output);
            }
            if s.writing.is_some() {
                break;
            }
            if !agent.has_batch() {
                s.before = agent.machine().clone();
            }
            let Some(append) = agent.poll_append(now) else {
                break;
            };
            let (batch, entries) = (append.batch, append.entries.to_vec());
            if entries.is_empty() {
                // Nothing to write: durable at once.
                self.written(s, agent, batch, entries, None, now);
            } else {
                s.writing = Some((batch, entries));
            }
        }
        while let Some(output) = agent.poll_output() {
            self.carry(s, output);
        }
        self.check_between_batches(s, agent);
    }

    /// Carries out one output, checking it.
    fn carry(&self, s: &mut AgentState, output: Output<u8>) {
        match output {
            Output::Reply(caller, reply) => self.reply(s, caller, reply),
            Output::Effect(Effect::Request(request)) => {
                if !writes(s.hooks, request.outstanding()) {
                    s.violate(
                        AgentProperty::UnwrittenHooks,
                        format!("{request:?} was released, but the host did not write its hook"),
                    );
                }
                if !s.hooks.pre_step && matches!(request, Request::Step { .. }) {
                    s.reached |= 1 << 5;
                }
                s.released = Some(request);
            }
            Output::Effect(Effect::Abort(_)) => s.aborted = true,
            Output::Effect(_) => {}
            Output::StartJob(caller) => {
                let maintenance = s
                    .callers
                    .get(usize::from(caller))
                    .is_some_and(|c| c.command == Submit::Maintenance && !c.answered);
                if !maintenance || s.job.is_some() {
                    s.violate(
                        AgentProperty::AnsweredOnce,
                        format!("a job started for caller {caller}, who did not ask for one"),
                    );
                }
                s.job = Some(Job::Running(caller));
            }
            Output::Abandon(request) => {
                match s.released.take() {
                    Some(call) if call.outstanding() == request => {
                        s.abandoned = Some((call, false));
                    }
                    // Abandoned again: its `fail` was in a failed batch, and the grace fired
                    // again after the pause.
                    None if s
                        .abandoned
                        .as_ref()
                        .is_some_and(|(call, _)| call.outstanding() == request) => {}
                    other => s.violate(
                        AgentProperty::NoStall,
                        format!("abandoned {request:?}, but the call released was {other:?}"),
                    ),
                }
            }
            Output::Ended(ending) => {
                if s.ending.is_some() {
                    s.violate(
                        AgentProperty::StopPolicy,
                        format!("ended twice ({:?}, then {ending:?})", s.ending),
                    );
                }
                let expected = match ending {
                    Ending::Stopped(failure) => {
                        failure.stops_the_agent() && s.last_failure == Some(failure)
                    }
                    Ending::Closed => s.callers.iter().any(|c| c.command == Submit::Close),
                    Ending::Disposed => {
                        s.reached |= 1 << 9;
                        s.callers.iter().any(|c| c.command == Submit::Dispose)
                    }
                };
                if !expected {
                    s.violate(
                        AgentProperty::StopPolicy,
                        format!("ended {ending:?} with no cause for it"),
                    );
                }
                s.ending = Some(ending);
                s.released = None;
                s.invalid = None;
            }
        }
    }

    fn reply(&self, s: &mut AgentState, caller: u8, reply: Result<Reply, Failure>) {
        let Some(asked) = s.callers.get(usize::from(caller)).cloned() else {
            return s.violate(
                AgentProperty::AnsweredOnce,
                format!("answered caller {caller}, who never asked"),
            );
        };
        if asked.answered {
            return s.violate(
                AgentProperty::AnsweredOnce,
                format!(
                    "answered caller {caller} ({:?}) twice: {reply:?}",
                    asked.command
                ),
            );
        }
        if let Some(c) = s.callers.get_mut(usize::from(caller)) {
            c.answered = true;
        }
        let job_end = matches!(s.job, Some(Job::Ending(w)) if w == caller);
        if job_end {
            s.job = None;
            match &reply {
                Ok(Reply::JobDone) => {}
                Err(Failure::Ended(_) | Failure::Indeterminate) if s.ending.is_some() => {}
                Err(Failure::Persistence) if s.ending.is_some() => {}
                other => s.violate(
                    AgentProperty::HeldWaiterSurvives,
                    format!("the job's end was answered {other:?}, not by its retry"),
                ),
            }
            if matches!(reply, Ok(Reply::JobDone)) && s.last_failure.is_some() {
                s.reached |= 1;
            }
        }
        self.check_reply(s, caller, asked.command, &reply);
    }

    /// What a reply must be, by what was asked and what happened.
    fn check_reply(
        &self,
        s: &mut AgentState,
        caller: u8,
        command: Submit,
        reply: &Result<Reply, Failure>,
    ) {
        match (command, reply) {
            (
                Submit::Pending,
                Ok(Reply::Pending {
                    next_turn,
                    next_step,
                }),
            ) => {
                let durable = |target, got: &[coxswain_core::Pending]| {
                    s.durable
                        .pending(target)
                        .eq(got.iter().map(|p| (p.message(), p.is_waking())))
                };
                if !durable(Target::NextTurn, next_turn) || !durable(Target::NextStep, next_step) {
                    s.violate(
                        AgentProperty::QueriesAreDurable,
                        format!(
                            "pending answered NT {next_turn:?}, NS {next_step:?}; the log holds \
                             NT {:?}, NS {:?}",
                            s.durable.pending(Target::NextTurn).collect::<Vec<_>>(),
                            s.durable.pending(Target::NextStep).collect::<Vec<_>>()
                        ),
                    );
                } else if !next_turn.is_empty() || !next_step.is_empty() {
                    s.reached |= 1 << 6;
                }
            }
            (Submit::Fate(i), Ok(Reply::Fate(fate))) => {
                let durable = self
                    .pool
                    .get(usize::from(i))
                    .map(|message| s.before.fate(message.id()));
                if durable != Some(*fate) {
                    s.violate(
                        AgentProperty::QueriesAreDurable,
                        format!("fate answered {fate:?}; the log holds {durable:?}"),
                    );
                } else if matches!(fate, Fate::Pending { .. }) {
                    s.reached |= 1 << 10;
                }
            }
            (Submit::Close, Ok(Reply::Closed(_))) if s.finished => s.reached |= 1 << 7,
            (Submit::Close, Ok(Reply::Closed(_))) => s.violate(
                AgentProperty::AnsweredOnce,
                "close was answered before finish".into(),
            ),
            (_, Err(Failure::Persistence))
                if !matches!(
                    s.last_failure,
                    Some(LogFailure::Failed | LogFailure::Fenced)
                ) =>
            {
                s.violate(
                    AgentProperty::StopPolicy,
                    format!("caller {caller} failed `persistence` with no failed append"),
                );
            }
            (_, Err(Failure::Indeterminate))
                if s.last_failure != Some(LogFailure::Indeterminate) =>
            {
                s.violate(
                    AgentProperty::StopPolicy,
                    format!("caller {caller} failed `indeterminate` with no such append"),
                );
            }
            _ => {}
        }
    }

    /// What holds whenever the loop has no batch: the log's read-back is the machine, no
    /// unwritten hook is outstanding, and at quiescence nobody waits for nothing.
    fn check_between_batches(&self, s: &mut AgentState, agent: &AgentLoop<u8>) {
        let machine = agent.machine();
        let outstanding = machine.outstanding();
        if std::mem::take(&mut s.aborted) {
            s.grace = outstanding.map(|request| (request, s.now + GRACE));
        }
        if agent.has_batch() {
            return;
        }
        if s.grace
            .is_some_and(|(request, _)| outstanding != Some(request))
        {
            s.grace = None;
        }
        let settled = s.writing.is_none() && agent.queued() == 0;
        if settled
            && s.answer
                .as_ref()
                .is_some_and(|(request, _)| outstanding != Some(request.outstanding()))
        {
            s.answer = None;
        }
        for target in [Target::NextTurn, Target::NextStep] {
            let live = machine
                .pending(target)
                .map(|p| (p.message(), p.is_waking()));
            if !live.eq(s.durable.pending(target)) {
                s.violate(
                    AgentProperty::DurableLog,
                    format!(
                        "the log written does not hold the machine's {}",
                        target.as_str()
                    ),
                );
            }
        }
        if let Some(request) = outstanding {
            if s.durable.position().open_turn() != Some(request.turn()) {
                s.violate(
                    AgentProperty::DurableLog,
                    format!("{request:?} is outstanding, but the log leaves no such turn open"),
                );
            }
            if !writes(s.hooks, request) && s.ending.is_none() {
                s.violate(
                    AgentProperty::UnwrittenHooks,
                    format!(
                        "{request:?} is outstanding between batches, but its hook is unwritten"
                    ),
                );
            }
        }
        let quiescent =
            s.writing.is_none() && agent.queued() == 0 && (s.ending.is_none() || s.finished);
        if quiescent {
            check_settled(s, agent, outstanding);
        }
    }
}

/// What holds once the loop is settled (no write in flight, nothing queued, no batch, and not
/// between the ending and `finish`): nobody waits for nothing.
fn check_settled(s: &mut AgentState, agent: &AgentLoop<u8>, outstanding: Option<Outstanding>) {
    let timer = agent.poll_timeout().is_some();
    if s.ending.is_none() {
        if let Some(request) = outstanding {
            let asked = s.released.as_ref().map(Request::outstanding) == Some(request);
            if !asked && !timer {
                s.violate(
                    AgentProperty::NoStall,
                    format!("{request:?} is outstanding and nobody will answer it"),
                );
            }
        }
        if let Some(request) = s.invalid {
            if !timer {
                s.violate(
                    AgentProperty::RefusedAnswerFails,
                    format!("the invalid answer to {request:?} was not answered `fail`"),
                );
            }
        }
    }
    let waiting: Vec<(usize, Submit)> = s
        .callers
        .iter()
        .enumerate()
        .filter(|(_, asked)| !asked.answered)
        .map(|(caller, asked)| (caller, asked.command))
        .collect();
    for (caller, command) in waiting {
        let waits = match s.job {
            // The job runs: its caller waits for the driver's `job_ended`.
            Some(Job::Running(w)) => usize::from(w) == caller,
            // Its end is held for the retry.
            Some(Job::Ending(w)) => usize::from(w) == caller && timer && s.ending.is_none(),
            None => false,
        };
        if !waits {
            let property = match s.job {
                Some(Job::Ending(w)) if usize::from(w) == caller => {
                    AgentProperty::HeldWaiterSurvives
                }
                _ => AgentProperty::AnsweredOnce,
            };
            s.violate(
                property,
                format!("caller {caller} ({command:?}) is never answered"),
            );
        }
    }
}

/// Whether the host answers `request` itself: the model's own reading of [`Hooks`] (not
/// [`Hooks::writes`], which a mutant may change).
fn writes(hooks: Hooks, request: Outstanding) -> bool {
    match request {
        Outstanding::PreStep { .. } => hooks.pre_step,
        Outstanding::Step { .. } => true,
        Outstanding::TurnStopping { .. } => hooks.turn_stopping,
    }
}

/// The answer a well-behaved host gives.
fn valid_answer(request: &Request) -> Input {
    match request {
        Request::PreStep { messages, .. } => Input::PreStep(PreStepAnswer::Enter(messages.clone())),
        Request::Step { .. } => Input::Step(StepAnswer::Completed),
        Request::TurnStopping { .. } => Input::TurnStopping(TurnStoppingAnswer::Done),
    }
}
