//! The driver task: one per agent, the only owner of its core and its log.
//!
//! It takes one command at a time (a caller's input, a host event to record, the completion of
//! the running host call or maintenance job), feeds the core, and drains every output in order:
//! the input's durable events are appended as one batch, and only then is anything published,
//! started or acknowledged (nothing is acknowledged that is not durable). It decides nothing:
//! every decision is the core's; this task only translates outputs into IO and back.

use std::sync::{Arc, Weak};

use coxswain_core::{
    Abort, Activity, Effect, ErrorInfo, Event, Input, Machine, Notification, Outstanding,
    PreStepAnswer, Request, StepAnswer, Target, TurnStoppingAnswer,
};
use coxswain_log::{Entry, HostEvent};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::agent::{
    ending_error, Agent, AgentError, Command, Ending, Inner, Job, PendingSnapshot, Reply, State,
    Update, Updates,
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
}

pub(crate) struct Driver<H, L> {
    machine: Machine,
    log: L,
    host: Arc<H>,
    rx: mpsc::Receiver<Command>,
    /// Upgraded to hand host calls an [`Agent`]; weak, so dropping every handle ends the driver.
    handle: Weak<Inner>,
    state: watch::Sender<State>,
    updates: Arc<Updates>,
    /// The current activity's token (S42): fresh at every [`Effect::Begin`].
    token: CancellationToken,
    /// The effects of the input being settled (reused).
    effects: Vec<Effect>,
    inflight: Option<Inflight>,
    span: Span,
    turn_span: Span,
    step_span: Span,
    ending: Option<Ending>,
    close_replies: Vec<oneshot::Sender<()>>,
}

impl<H: Host, L: DurableLog> Driver<H, L> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        machine: Machine,
        log: L,
        host: Arc<H>,
        rx: mpsc::Receiver<Command>,
        handle: Weak<Inner>,
        state: watch::Sender<State>,
        updates: Arc<Updates>,
        span: Span,
    ) -> Self {
        Driver {
            machine,
            log,
            host,
            rx,
            handle,
            state,
            updates,
            token: CancellationToken::new(),
            effects: Vec::new(),
            inflight: None,
            span,
            turn_span: Span::none(),
            step_span: Span::none(),
            ending: None,
            close_replies: Vec::new(),
        }
    }

    pub(crate) async fn run(mut self) {
        while self.ending.is_none() {
            let wake = {
                let done = next_done(&mut self.inflight);
                tokio::select! {
                    biased;
                    done = done => Wake::Done(done),
                    command = self.rx.recv() => Wake::Command(command),
                }
            };
            match wake {
                Wake::Done(done) => self.complete(done).await,
                Wake::Command(Some(command)) => self.command(command).await,
                Wake::Command(None) => self.end(Ending::Closed),
            }
        }
        self.finish().await;
    }

    async fn command(&mut self, command: Command) {
        match command {
            Command::Input { input, reply } => {
                let result = self.input(input).await;
                let _ = reply.send(result);
            }
            Command::Maintenance { job, reply } => self.begin_maintenance(job, reply).await,
            Command::Record {
                turn,
                step,
                events,
                reply,
            } => {
                let result = self.record(turn, step, events).await;
                let _ = reply.send(result);
            }
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

    /// A caller's input: the core decides; a rejection changed nothing (S5).
    async fn input(&mut self, input: Input) -> Result<bool, AgentError> {
        let traced = tracing::enabled!(tracing::Level::DEBUG).then(|| input.clone());
        let found = match self.machine.handle(input) {
            Ok(transition) => transition.found(),
            Err(rejected) => {
                tracing::debug!(input = ?traced, %rejected, "rejected");
                return Err(AgentError::Rejected(rejected));
            }
        };
        tracing::debug!(input = ?traced, found, "input");
        self.settle().await?;
        Ok(found)
    }

    async fn begin_maintenance(&mut self, job: Job, reply: Reply<()>) {
        if let Err(rejected) = self.machine.begin_maintenance() {
            let _ = reply.send(Err(AgentError::Rejected(rejected)));
            return;
        }
        // Its one effect, `Begin(Maintenance)`, made the job's token.
        if let Err(error) = self.settle().await {
            let _ = reply.send(Err(error));
            return;
        }
        let span = tracing::info_span!(parent: &self.span, "maintenance");
        tracing::info!(parent: &span, "maintenance began");
        let handle = tokio::spawn(job(self.token.clone()).instrument(span));
        self.inflight = Some(Inflight::Maintenance { handle, reply });
    }

    /// Host events go through here, the single writer, so they land inside their step.
    async fn record(
        &mut self,
        turn: u64,
        step: u64,
        events: Vec<HostEvent>,
    ) -> Result<(), AgentError> {
        if self.machine.outstanding() != Some(Outstanding::Step { turn, step }) {
            return Err(AgentError::StepClosed);
        }
        if events.is_empty() {
            return Ok(());
        }
        let entries: Vec<Entry> = events.into_iter().map(Entry::Host).collect();
        let first = match self.log.append(&entries).await {
            Ok(first) => first,
            Err(error) => return Err(self.stop(error)),
        };
        for (seq, entry) in (first..).zip(entries) {
            tracing::trace!(parent: &self.step_span, seq, kind = entry.kind(), "host event");
            self.updates.send(Update::Recorded { seq, entry });
        }
        Ok(())
    }

    /// The running host call or maintenance job returned: its answer is the next input.
    async fn complete(&mut self, done: Done) {
        let inflight = self.inflight.take();
        match (done, inflight) {
            (Done::Request(result), Some(Inflight::Request { kind, .. })) => {
                let answer = result.unwrap_or_else(|error| panicked(kind, &error));
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
            (Done::Maintenance(result), Some(Inflight::Maintenance { reply, .. })) => {
                if let Err(error) = result {
                    tracing::warn!(%error, "maintenance job failed");
                }
                let result = match self.machine.end_maintenance() {
                    Ok(_) => self.settle().await,
                    Err(rejected) => Err(AgentError::Rejected(rejected)),
                };
                tracing::info!(parent: &self.span, "maintenance ended");
                let _ = reply.send(result);
            }
            (_, inflight) => {
                tracing::error!("a completion that does not match what was running");
                self.inflight = inflight;
            }
        }
    }

    /// Settles the input just applied (the drain contract): its durable events are appended as
    /// one batch; only once they are durable are its effects carried out, in order. On an append
    /// failure nothing is published or started and the agent stops.
    async fn settle(&mut self) -> Result<(), AgentError> {
        let transition = self.machine.drain();
        let entries: Vec<Entry> = transition
            .events()
            .iter()
            .cloned()
            .map(Entry::Machine)
            .collect();
        let first = if entries.is_empty() {
            0
        } else {
            match self.log.append(&entries).await {
                Ok(first) => first,
                Err(error) => {
                    drop(transition);
                    return Err(self.stop(error));
                }
            }
        };
        self.effects.extend(transition.persisted());
        for (seq, entry) in (first..).zip(entries) {
            if let Entry::Machine(event) = &entry {
                self.trace_event(event, seq);
            }
            self.updates.send(Update::Recorded { seq, entry });
        }
        let mut effects = std::mem::take(&mut self.effects);
        for effect in effects.drain(..) {
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
        self.effects = effects;
        self.publish_state();
        Ok(())
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
    }

    /// Starts the host call the core requested, in a task of its own.
    fn start(&mut self, request: Request) {
        let Some(inner) = self.handle.upgrade() else {
            // Nobody holds the agent any more: nothing could ever use the answer.
            self.end(Ending::Closed);
            return;
        };
        let agent = Agent { inner };
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
    }

    fn publish_state(&mut self) {
        let status = self.machine.status();
        let quiescent = self.machine.is_quiescent();
        self.state.send_if_modified(|state| {
            let changed = state.status != status || state.quiescent != quiescent;
            state.status = status;
            state.quiescent = quiescent;
            changed
        });
    }

    /// A failed append: the core is ahead of the log, so the agent stops here.
    fn stop(&mut self, error: LogError) -> AgentError {
        tracing::error!(parent: &self.span, %error, "append failed: the agent stops");
        self.end(Ending::Stopped(error.clone()));
        AgentError::Persistence(error)
    }

    fn end(&mut self, ending: Ending) {
        if self.ending.is_none() {
            self.ending = Some(ending);
        }
    }

    /// Stops what runs, syncs the log, publishes the ending, answers whatever still waits.
    async fn finish(&mut self) {
        let ending = self.ending.clone().unwrap_or(Ending::Closed);
        self.token.cancel();
        if let Some(Inflight::Maintenance { reply, .. }) = self.inflight.take() {
            let _ = reply.send(Err(ending_error(&ending)));
        }
        if !matches!(ending, Ending::Stopped(_)) {
            if let Err(error) = self.log.sync().await {
                tracing::error!(parent: &self.span, %error, "final sync failed");
            }
        }
        tracing::info!(parent: &self.span, ?ending, "driver ended");
        self.state.send_modify(|state| {
            state.status = self.machine.status();
            state.quiescent = self.machine.is_quiescent();
            state.ended = Some(ending.clone());
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
        for reply in self.close_replies.drain(..) {
            let _ = reply.send(());
        }
    }
}

async fn next_done(inflight: &mut Option<Inflight>) -> Done {
    match inflight {
        Some(Inflight::Request { handle, .. }) => Done::Request(handle.await),
        Some(Inflight::Maintenance { handle, .. }) => Done::Maintenance(handle.await),
        None => std::future::pending().await,
    }
}

/// A host call that panicked answers `fail` (S38): the turn ends with an error.
fn panicked(kind: Kind, error: &JoinError) -> Input {
    tracing::error!(?kind, %error, "host call panicked");
    let error = ErrorInfo::new(format!("the host's {kind:?} call panicked"), "host-panic");
    match kind {
        Kind::PreStep => Input::PreStep(PreStepAnswer::Fail(error)),
        Kind::Step => Input::Step(StepAnswer::Fail(error)),
        Kind::TurnStopping => Input::TurnStopping(TurnStoppingAnswer::Fail(error)),
    }
}
