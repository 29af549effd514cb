//! The driver task: one per agent, the only owner of its core and its log.
//!
//! It takes commands (a caller's input, a host event to record, the completion of the running
//! host call or maintenance job), feeds the core, and drains every output in order: the durable
//! events are appended, and only then is anything published, started or acknowledged (nothing is
//! acknowledged that is not durable). It decides nothing: every decision is the core's; this
//! task only translates outputs into IO and back.
//!
//! # Group commit
//!
//! One append (one write, one sync) costs far more than feeding the core, so the driver commits
//! in groups: it takes every input and host event already waiting in its channel (up to
//! [`Options::max_batch`](crate::Options::max_batch)), feeds them to the core one at a time in
//! arrival order, appends all of their events as **one** batch, and only once that batch is
//! durable carries out each input's effects and acknowledges it, in order.
//!
//! This keeps the core's drain contract. The core rejects an input while the previous one's
//! outputs are undrained, so before feeding the next input the driver takes the previous one's
//! outputs out: its events are cloned into the group's batch, and its effects are drained (with
//! [`Transition::persisted`](coxswain_core::Transition::persisted)) into a buffer that is
//! **held, not carried out**: nothing is published, no activity begun, no request started, no
//! scope aborted, no caller acknowledged, until the append of the whole group returned `Ok`.
//! `persisted()` is the host's word that the events are durable *before the effects are acted
//! on*; the effects are acted on exactly then, in the core's order, as if each input had been
//! settled alone. The core's state runs ahead of the log only while a group is in flight, as it
//! does for a single input during its append. A failed append fails every input of the group
//! (none of it is in the log: the log cut the whole batch back), drops the held effects and
//! stops the agent, as for a single input. Its callers are told once the agent has ended (the
//! final sync done, the log released, the ending published): a call that returned its error
//! finds [`Agent::ending`](crate::Agent::ending) and
//! [`Agent::when_idle`](crate::Agent::when_idle) saying `Stopped`, and the log free to re-open.
//!
//! A group ends early at a command that reads or changes the driver rather than the log (a
//! snapshot of the pending lists, maintenance, close), which waits until the group is settled,
//! and after an input that disposed the core (no input after it is fed, as before). Host answers
//! are fed one at a time (at most one is ever outstanding, S4).

use std::sync::{Arc, Weak};
use std::time::Duration;

use coxswain_core::{
    Abort, Activity, Effect, Event, Input, Machine, Notification, Outstanding, PreStepAnswer,
    Request, Status, Target,
};
use coxswain_log::{check_message, Entry, HostEvent};
use coxswain_session::HostFailure;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::agent::{
    ending_error, Agent, AgentError, Command, Ending, Inner, Job, Options, PendingSnapshot, Reply,
    State, Update, Updates,
};
use crate::host::{Host, PreStepContext, StepContext, TurnStoppingContext};
use crate::log::{DurableLog, LogError};

/// The host call or maintenance job running now (at most one: S4, and maintenance only while
/// no turn runs).
enum Inflight {
    Request {
        kind: Kind,
        handle: JoinHandle<Input>,
    },
    Maintenance {
        handle: JoinHandle<()>,
        reply: Reply<()>,
    },
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    PreStep,
    Step,
    TurnStopping,
}

enum Done {
    Request(Result<Input, JoinError>),
    Maintenance(Result<(), JoinError>),
}

enum Wake {
    Done(Done),
    Command(Option<Command>),
    /// The aborted host call outlived [`Options::abort_grace`]: drop it and answer for it.
    Abandon,
    /// The embedder dropped its last handle: close (the running call's token trips).
    OwnersGone,
}

/// One member of a group: who waits for it, what the core said, and where its outputs end in
/// the group's buffers.
struct Member {
    reply: MemberReply,
    /// Refused before anything was written (its reply does not wait for the append's result);
    /// `Ok(found)` when accepted.
    outcome: Result<bool, AgentError>,
    /// One past its last entry in [`Driver::entries`].
    entries_end: usize,
    /// One past its last effect in [`Driver::effects`].
    effects_end: usize,
}

/// Who waits for a member's acknowledgement.
enum MemberReply {
    Input(Reply<bool>),
    Record(Reply<()>),
    /// A host answer or a maintenance boundary: the driver itself.
    Driver,
}

impl MemberReply {
    fn send(self, result: Result<bool, AgentError>) {
        match self {
            MemberReply::Input(reply) => drop(reply.send(result)),
            MemberReply::Record(reply) => drop(reply.send(result.map(drop))),
            MemberReply::Driver => {}
        }
    }
}

pub(crate) struct Driver<H, L> {
    machine: Machine,
    /// The log; dropped (its lock released) before the ending is published.
    log: Option<L>,
    host: Arc<H>,
    rx: mpsc::Receiver<Command>,
    /// Upgraded to hand host calls an [`Agent`]; weak, so dropping every handle ends the driver.
    handle: Weak<Inner>,
    /// Tripped when the embedder dropped its last handle (host calls' handles do not count).
    owners_gone: CancellationToken,
    state: watch::Sender<State>,
    updates: Arc<Updates>,
    /// The current activity's token (S42): fresh at every [`Effect::Begin`].
    token: CancellationToken,
    /// The group being committed: every member's events, in order (reused).
    entries: Vec<Entry>,
    /// Every member's effects, held until the group is durable (reused).
    effects: Vec<Effect>,
    /// The group's members, in arrival order (reused).
    members: Vec<Member>,
    /// The most inputs one group takes (at least 1: one append per input).
    max_batch: usize,
    /// [`Options::abort_grace`].
    abort_grace: Duration,
    /// When the running host call, aborted, is dropped and answered `fail` for.
    abandon_at: Option<Instant>,
    /// A command taken from the channel that ended a group; it runs next.
    deferred: Option<Command>,
    inflight: Option<Inflight>,
    span: Span,
    turn_span: Span,
    step_span: Span,
    ending: Option<Ending>,
    close_replies: Vec<oneshot::Sender<()>>,
    /// Replies decided after the driver decided to end (the calls a failed append failed, a
    /// maintenance boundary that could not be appended): sent by [`finish`](Driver::finish)
    /// once the ending is published, so a caller told the agent stopped finds
    /// [`Agent::ending`] and [`Agent::when_idle`] saying so, and the log released.
    after_end: Vec<Deferred>,
}

/// A reply held until the ending is published.
enum Deferred {
    Member(MemberReply, Result<bool, AgentError>),
    Unit(Reply<()>, Result<(), AgentError>),
}

impl Deferred {
    fn send(self) {
        match self {
            Deferred::Member(reply, result) => reply.send(result),
            Deferred::Unit(reply, result) => drop(reply.send(result)),
        }
    }
}

impl<H: Host, L: DurableLog> Driver<H, L> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        machine: Machine,
        log: L,
        host: Arc<H>,
        rx: mpsc::Receiver<Command>,
        handle: Weak<Inner>,
        owners_gone: CancellationToken,
        state: watch::Sender<State>,
        updates: Arc<Updates>,
        span: Span,
        options: &Options,
    ) -> Self {
        Driver {
            machine,
            log: Some(log),
            host,
            rx,
            handle,
            owners_gone,
            state,
            updates,
            token: CancellationToken::new(),
            entries: Vec::new(),
            effects: Vec::new(),
            members: Vec::new(),
            max_batch: options.max_batch.max(1),
            abort_grace: options.abort_grace,
            abandon_at: None,
            deferred: None,
            inflight: None,
            span,
            turn_span: Span::none(),
            step_span: Span::none(),
            ending: None,
            close_replies: Vec::new(),
            after_end: Vec::new(),
        }
    }

    pub(crate) async fn run(mut self) {
        while self.ending.is_none() {
            if let Some(command) = self.deferred.take() {
                self.command(command).await;
                continue;
            }
            let wake = {
                let done = next_done(&mut self.inflight);
                let abandon = abandon_timer(self.abandon_at);
                tokio::select! {
                    biased;
                    done = done => Wake::Done(done),
                    () = abandon => Wake::Abandon,
                    command = self.rx.recv() => Wake::Command(command),
                    () = self.owners_gone.cancelled() => Wake::OwnersGone,
                }
            };
            match wake {
                Wake::Done(done) => self.complete(done).await,
                Wake::Abandon => self.abandon().await,
                Wake::Command(Some(command)) => self.command(command).await,
                Wake::Command(None) | Wake::OwnersGone => self.end(Ending::Closed),
            }
        }
        self.finish().await;
    }

    async fn command(&mut self, command: Command) {
        match command {
            command @ (Command::Input { .. } | Command::Record { .. }) => self.group(command).await,
            Command::Maintenance { job, reply } => self.begin_maintenance(job, reply).await,
            Command::Pending { reply } => {
                let snapshot = PendingSnapshot {
                    next_turn: self.machine.pending(Target::NextTurn).cloned().collect(),
                    next_step: self.machine.pending(Target::NextStep).cloned().collect(),
                };
                let _ = reply.send(snapshot);
            }
            Command::Close { reply } => {
                self.close_replies.push(reply);
                self.end(Ending::Closed);
            }
        }
    }

    /// Group commit: feeds `first` and every input or host event already waiting (up to
    /// `max_batch`) to the core in arrival order, holding their outputs, then commits them as
    /// one append (see the module documentation).
    async fn group(&mut self, first: Command) {
        let mut next = Some(first);
        let mut taken = 0;
        let mut yielded = false;
        while let Some(command) = next.take() {
            match command {
                Command::Input { input, reply } => self.input(input, reply),
                Command::Record {
                    turn,
                    step,
                    events,
                    reply,
                } => self.record(turn, step, events, reply),
                other => {
                    // Reads or changes the driver: it runs once the group is settled.
                    self.deferred = Some(other);
                    break;
                }
            }
            taken += 1;
            if taken >= self.max_batch || self.machine.is_disposed() {
                break;
            }
            next = self.rx.try_recv().ok();
            if next.is_none() && !yielded && self.max_batch > 1 {
                // Callers acknowledged by the last group may be about to send again: let them
                // run once (a yield costs microseconds; the append it shares, a sync).
                yielded = true;
                tokio::task::yield_now().await;
                next = self.rx.try_recv().ok();
            }
        }
        let _ = self.commit().await;
    }

    /// A caller's input: the core decides, the admission bound and a send's guard included
    /// (S54, S55); a rejection changed nothing (S5). An accepted input's outputs join the group,
    /// held until it is durable.
    fn input(&mut self, input: Input, reply: Reply<bool>) {
        let traced = tracing::enabled!(tracing::Level::DEBUG).then(|| input.clone());
        let outcome = match self.machine.handle(input) {
            Ok(transition) => {
                let found = transition.found();
                tracing::debug!(input = ?traced, found, "input");
                Ok(found)
            }
            Err(rejected) => {
                tracing::debug!(input = ?traced, %rejected, "rejected");
                Err(AgentError::rejected(rejected))
            }
        };
        if outcome.is_ok() {
            self.hold();
        }
        self.join(MemberReply::Input(reply), outcome);
    }

    /// Takes the outputs of the input just applied out of the core (so the next input may be
    /// fed): its events into the group's batch, its effects into the held buffer. Nothing is
    /// carried out here: [`commit`](Driver::commit) does, once the batch is durable.
    fn hold(&mut self) {
        let transition = self.machine.drain();
        self.entries
            .extend(transition.events().iter().cloned().map(Entry::Machine));
        self.effects.extend(transition.persisted());
    }

    /// Adds a member whose outputs (if any) were just held.
    fn join(&mut self, reply: MemberReply, outcome: Result<bool, AgentError>) {
        self.members.push(Member {
            reply,
            outcome,
            entries_end: self.entries.len(),
            effects_end: self.effects.len(),
        });
    }

    async fn begin_maintenance(&mut self, job: Job, reply: Reply<()>) {
        if let Err(rejected) = self.machine.begin_maintenance() {
            let _ = reply.send(Err(AgentError::Rejected(rejected)));
            return;
        }
        // Its one effect, `Begin(Maintenance)`, made the job's token.
        if let Err(error) = self.settle().await {
            self.reply_unit(reply, Err(error));
            return;
        }
        let span = tracing::info_span!(parent: &self.span, "maintenance");
        tracing::info!(parent: &span, "maintenance began");
        let handle = tokio::spawn(job(self.token.clone()).instrument(span));
        self.inflight = Some(Inflight::Maintenance { handle, reply });
    }

    /// Host events go through here, the single writer, so they land inside their step: they
    /// join the group (their step is still open once the inputs before them were fed).
    fn record(&mut self, turn: u64, step: u64, events: Vec<HostEvent>, reply: Reply<()>) {
        if self.machine.outstanding() != Some(Outstanding::Step { turn, step }) {
            self.join(MemberReply::Record(reply), Err(AgentError::StepClosed));
            return;
        }
        self.entries.extend(events.into_iter().map(Entry::Host));
        self.join(MemberReply::Record(reply), Ok(true));
    }

    /// The running host call or maintenance job returned: its answer is the next input.
    async fn complete(&mut self, done: Done) {
        let inflight = self.inflight.take();
        self.abandon_at = None;
        match (done, inflight) {
            (Done::Request(result), Some(Inflight::Request { kind, .. })) => {
                let Some(answer) = host_answer(kind, result) else {
                    // The host task was cancelled (the runtime is shutting down): no answer.
                    tracing::info!(parent: &self.span, ?kind, "host call cancelled; closing");
                    self.end(Ending::Closed);
                    return;
                };
                self.answer(answer).await;
            }
            (Done::Maintenance(result), Some(Inflight::Maintenance { reply, .. })) => {
                if let Err(error) = result {
                    tracing::warn!(%error, "maintenance job failed");
                }
                let result = match self.machine.end_maintenance() {
                    Ok(_) => self.settle().await,
                    Err(rejected) => Err(AgentError::Rejected(rejected)),
                };
                tracing::info!(parent: &self.span, "maintenance ended");
                self.reply_unit(reply, result);
            }
            (_, inflight) => {
                tracing::error!("a completion that does not match what was running");
                self.inflight = inflight;
            }
        }
    }

    /// The aborted host call outlived the grace: it is dropped (its task aborted) and answered
    /// `fail` on its behalf. A failure after a cancel ends the turn `aborted` (S38), so the
    /// cancel ends the turn even though the host ignored its token.
    async fn abandon(&mut self) {
        self.abandon_at = None;
        match self.inflight.take() {
            Some(Inflight::Request { kind, handle }) => {
                handle.abort();
                tracing::warn!(parent: &self.span, ?kind, grace = ?self.abort_grace,
                    "the aborted host call did not return within the grace: dropped");
                let detail = format!("it did not return within {:?}", self.abort_grace);
                self.answer(failed(kind, HostFailure::Abandoned, &detail))
                    .await;
            }
            other => self.inflight = other,
        }
    }

    /// Feeds the answer to the running request (the host's, or the driver's on its behalf).
    async fn answer(&mut self, answer: Input) {
        match self.machine.handle(answer) {
            Ok(_) => {
                let _ = self.settle().await;
            }
            Err(rejected) => {
                // The driver answers only the request the core made (S4): a bug.
                tracing::error!(%rejected, "the core rejected the host's answer");
                self.end(Ending::Closed);
            }
        }
    }

    /// Settles the input just applied (a host answer or a maintenance boundary) as a group of
    /// its own.
    async fn settle(&mut self) -> Result<(), AgentError> {
        self.hold();
        self.join(MemberReply::Driver, Ok(true));
        self.commit().await
    }

    /// Commits the group: appends every member's events as one batch; only once it is durable
    /// publishes each member's records, carries out its effects and acknowledges it, member by
    /// member in arrival order. On an append failure nothing is published or started, every
    /// accepted member is told the append's error, and the agent stops.
    async fn commit(&mut self) -> Result<(), AgentError> {
        let mut members = std::mem::take(&mut self.members);
        let first = if self.entries.is_empty() {
            Ok(0)
        } else {
            append_to(&mut self.log, &self.entries).await
        };
        let first = match first {
            Ok(first) => first,
            Err(error) => {
                let error = self.stop(error);
                self.entries.clear();
                self.effects.clear();
                for member in members.drain(..) {
                    let outcome = match member.outcome {
                        Ok(_) => Err(error.clone()),
                        refused => refused,
                    };
                    // Told once the ending is published (the agent stopped).
                    self.after_end.push(Deferred::Member(member.reply, outcome));
                }
                self.members = members;
                return Err(error);
            }
        };
        let mut entries = std::mem::take(&mut self.entries);
        let mut effects = std::mem::take(&mut self.effects);
        {
            let mut seqs = crate::log::seqs(first, entries.len());
            let mut records = entries.drain(..);
            let mut held = effects.drain(..);
            let (mut entries_at, mut effects_at) = (0, 0);
            for member in &members {
                for entry in records.by_ref().take(member.entries_end - entries_at) {
                    let seq = seqs.next().unwrap_or(0);
                    match &entry {
                        Entry::Machine(event) => self.trace_event(event, seq),
                        Entry::Host(_) => tracing::trace!(
                            parent: &self.step_span, seq, kind = entry.kind(), "host event"
                        ),
                    }
                    self.updates.send(Update::Recorded { seq, entry });
                }
                for effect in held.by_ref().take(member.effects_end - effects_at) {
                    self.carry_out(effect);
                }
                (entries_at, effects_at) = (member.entries_end, member.effects_end);
            }
        }
        self.entries = entries;
        self.effects = effects;
        self.publish_state();
        for member in members.drain(..) {
            member.reply.send(member.outcome);
        }
        self.members = members;
        Ok(())
    }

    /// Carries out one effect of a durable input (the drain contract's second half).
    fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::Notify(notification) => {
                if let Notification::Error { turn, step, error } = &notification {
                    tracing::warn!(parent: &self.turn_span, turn, step, ?error, "turn failed");
                }
                self.updates.send(Update::Notified(notification));
            }
            Effect::Begin(activity) => self.begin(activity),
            Effect::Request(request) => self.start(request),
            Effect::Abort(abort) => self.abort(&abort),
            Effect::Disposed => self.end(Ending::Disposed),
        }
    }

    /// A new activity (S42): a fresh cancellation token, and for a turn its tracing span.
    fn begin(&mut self, activity: Activity) {
        self.token = CancellationToken::new();
        if let Activity::Turn(turn) = activity {
            self.turn_span = tracing::info_span!(parent: &self.span, "turn", turn);
        }
    }

    /// Tracing spans follow the core's steps; turns are logged where they start and end.
    fn trace_event(&mut self, event: &Event, seq: u64) {
        match event {
            Event::TurnStart { turn } => {
                tracing::debug!(parent: &self.span, seq, turn, "turn started")
            }
            Event::StepStart { step, .. } => {
                self.step_span = tracing::info_span!(parent: &self.turn_span, "step", step);
            }
            Event::StepEnd { .. } => self.step_span = Span::none(),
            Event::TurnEnd { reason, .. } => {
                tracing::info!(parent: &self.turn_span, seq, ?reason, "turn ended");
                self.turn_span = Span::none();
            }
            Event::Spliced(_) | Event::UserMessage(_) => {}
        }
    }

    fn abort(&mut self, abort: &Abort) {
        tracing::info!(parent: &self.span, cause = ?abort.cause, "abort: cancelling the current activity");
        self.token.cancel();
        if matches!(self.inflight, Some(Inflight::Request { .. })) {
            self.start_grace();
        }
    }

    /// The aborted host call has [`Options::abort_grace`] from now to return.
    fn start_grace(&mut self) {
        if self.abandon_at.is_none() {
            self.abandon_at = Instant::now().checked_add(self.abort_grace);
        }
    }

    /// Starts the host call the core requested, in a task of its own.
    fn start(&mut self, request: Request) {
        let Some(inner) = self.handle.upgrade() else {
            // Nobody holds the agent any more: nothing could ever use the answer.
            self.end(Ending::Closed);
            return;
        };
        let agent = Agent::for_host(inner);
        let host = Arc::clone(&self.host);
        let cancel = self.token.clone();
        let (kind, handle) = match request {
            Request::PreStep {
                turn,
                step,
                messages,
            } => {
                let cx = PreStepContext {
                    turn,
                    step,
                    messages,
                    cancel,
                    agent,
                };
                let call = async move { Input::PreStep(host.pre_step(cx).await) };
                let span = tracing::debug_span!(parent: &self.turn_span, "pre_step", step);
                (Kind::PreStep, tokio::spawn(call.instrument(span)))
            }
            Request::Step { turn, step } => {
                let cx = StepContext {
                    turn,
                    step,
                    cancel,
                    agent,
                };
                let call = async move { Input::Step(host.step(cx).await) };
                (
                    Kind::Step,
                    tokio::spawn(call.instrument(self.step_span.clone())),
                )
            }
            Request::TurnStopping { turn } => {
                let cx = TurnStoppingContext {
                    turn,
                    cancel,
                    agent,
                };
                let call = async move { Input::TurnStopping(host.turn_stopping(cx).await) };
                let span = tracing::debug_span!(parent: &self.turn_span, "turn_stopping");
                (Kind::TurnStopping, tokio::spawn(call.instrument(span)))
            }
        };
        if self.inflight.is_some() {
            tracing::error!(?kind, "a request while another call runs (S4)");
        }
        self.inflight = Some(Inflight::Request { kind, handle });
        self.abandon_at = None;
        if self.token.is_cancelled() {
            // Requested inside an aborted activity: it gets the grace from its start.
            self.start_grace();
        }
    }

    fn publish_state(&mut self) {
        let status = self.machine.status();
        let quiescent = self.machine.is_quiescent();
        let last_turn = self.machine.last_turn();
        self.state.send_if_modified(|state| {
            let changed = state.status != status
                || state.quiescent != quiescent
                || state.last_turn != last_turn;
            state.status = status;
            state.quiescent = quiescent;
            state.last_turn = last_turn;
            changed
        });
    }

    /// A failed append: the core is ahead of the log, so the agent stops here.
    fn stop(&mut self, error: LogError) -> AgentError {
        tracing::error!(parent: &self.span, %error, "append failed: the agent stops");
        self.end(Ending::Stopped(error.clone()));
        if error.is_indeterminate() {
            AgentError::Indeterminate(error)
        } else {
            AgentError::Persistence(error)
        }
    }

    fn end(&mut self, ending: Ending) {
        if self.ending.is_none() {
            self.ending = Some(ending);
        }
    }

    /// Sends a maintenance reply now, or, once the driver is ending, after the ending is
    /// published.
    fn reply_unit(&mut self, reply: Reply<()>, result: Result<(), AgentError>) {
        if self.ending.is_some() {
            self.after_end.push(Deferred::Unit(reply, result));
        } else {
            let _ = reply.send(result);
        }
    }

    /// Stops what runs, syncs and releases the log, publishes the ending, answers whatever still
    /// waits. The sync runs after a failed append too: what was acknowledged before it under a
    /// lazy policy must still be made durable.
    async fn finish(&mut self) {
        let ending = self.ending.clone().unwrap_or(Ending::Closed);
        self.token.cancel();
        match self.inflight.take() {
            Some(Inflight::Maintenance { reply, .. }) => {
                self.after_end
                    .push(Deferred::Unit(reply, Err(ending_error(&ending))));
            }
            Some(Inflight::Request { handle, .. }) => {
                // Its answer is ignored; a call that ignores its token too is dropped after the
                // grace, so a deaf host does not keep a task alive for every agent closed.
                if let Some(deadline) = Instant::now().checked_add(self.abort_grace) {
                    tokio::spawn(async move {
                        tokio::time::sleep_until(deadline).await;
                        handle.abort();
                    });
                }
            }
            None => {}
        }
        let final_sync = match self.log.as_mut() {
            Some(log) => log.sync().await.err(),
            None => None,
        };
        if let Some(error) = &final_sync {
            tracing::error!(parent: &self.span, %error, "final sync failed");
        }
        // Release the log (and its lock) before anyone learns the driver ended.
        drop(self.log.take());
        tracing::info!(parent: &self.span, ?ending, "driver ended");
        self.state.send_modify(|state| {
            // Nothing runs any more, whatever the core was in the middle of.
            state.status = Status::Idle;
            state.quiescent = self.machine.is_quiescent();
            state.ended = Some(ending.clone());
            state.final_sync = final_sync;
        });
        self.updates.send(Update::Ended(ending.clone()));
        self.updates.end();
        self.rx.close();
        while let Ok(command) = self.rx.try_recv() {
            let error = ending_error(&ending);
            match command {
                Command::Input { reply, .. } => drop(reply.send(Err(error))),
                Command::Maintenance { reply, .. } | Command::Record { reply, .. } => {
                    drop(reply.send(Err(error)))
                }
                Command::Pending { .. } => {}
                Command::Close { reply } => self.close_replies.push(reply),
            }
        }
        // The replies decided after the ending, now that it is published (`ending()` and
        // `when_idle()` say it) and the log released.
        for deferred in self.after_end.drain(..) {
            deferred.send();
        }
        for reply in self.close_replies.drain(..) {
            let _ = reply.send(());
        }
    }
}

/// Appends to the log (gone only once the driver finished).
async fn append_to<L: DurableLog>(log: &mut Option<L>, entries: &[Entry]) -> Result<u64, LogError> {
    match log.as_mut() {
        Some(log) => log.append(entries).await,
        None => Err(LogError::Failed),
    }
}

/// Fires at the abandon deadline; never without one.
async fn abandon_timer(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn next_done(inflight: &mut Option<Inflight>) -> Done {
    match inflight {
        Some(Inflight::Request { handle, .. }) => Done::Request(handle.await),
        Some(Inflight::Maintenance { handle, .. }) => Done::Maintenance(handle.await),
        None => std::future::pending().await,
    }
}

/// The host call's answer: what it returned (a message too deep for the log fails the call,
/// S38), `fail` if it panicked (S38), `None` if its task was cancelled (runtime shutdown): that
/// is no answer, and no panic.
fn host_answer(kind: Kind, result: Result<Input, JoinError>) -> Option<Input> {
    match result {
        Ok(Input::PreStep(PreStepAnswer::Enter(batch))) => {
            let deep = batch
                .iter()
                .find_map(|message| check_message(message).err());
            Some(match deep {
                None => Input::PreStep(PreStepAnswer::Enter(batch)),
                Some(deep) => failed(kind, HostFailure::InvalidAnswer, &deep.to_string()),
            })
        }
        Ok(answer) => Some(answer),
        Err(error) if error.is_cancelled() => None,
        Err(error) => Some(panicked(kind, &error)),
    }
}

/// A host call that panicked answers `fail` (S38): the turn ends with an error.
fn panicked(kind: Kind, error: &JoinError) -> Input {
    tracing::error!(?kind, %error, "host call panicked");
    failed(kind, HostFailure::Panicked, "")
}

/// The `fail` answer to a request of this kind for `failure`: the code is the session layer's
/// (one vocabulary for every driver), the message names the call.
fn failed(kind: Kind, failure: HostFailure, detail: &str) -> Input {
    // Only the call's kind shows in the answer; the numbers do not.
    let request = match kind {
        Kind::PreStep => Outstanding::PreStep { turn: 0, step: 0 },
        Kind::Step => Outstanding::Step { turn: 0, step: 0 },
        Kind::TurnStopping => Outstanding::TurnStopping { turn: 0 },
    };
    failure.answer(request, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Item 10: a host task cancelled by a runtime shutdown gives no answer, not a `host-panicked`.
    #[tokio::test]
    async fn a_cancelled_host_task_is_no_answer_and_no_panic() {
        let task = tokio::spawn(std::future::pending::<Input>());
        task.abort();
        let error = task.await.unwrap_err();
        assert!(error.is_cancelled());
        assert_eq!(host_answer(Kind::Step, Err(error)), None);

        let task = tokio::spawn(async { panic!("boom") });
        let error = task.await.unwrap_err();
        match host_answer(Kind::Step, Err(error)) {
            Some(Input::Step(coxswain_core::StepAnswer::Fail(error))) => {
                assert_eq!(&*error.code, "host-panicked");
                assert_eq!(&*error.message, "the host's step call panicked");
            }
            other => panic!("{other:?}"),
        }
    }
}
