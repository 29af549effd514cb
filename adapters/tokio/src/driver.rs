//! The driver task: one per agent, an IO loop over the session layer's agent loop
//! ([`AgentLoop`]). It moves commands in, the batches the loop seals to the log, the host's
//! answers and time along, and carries out what the loop says; every decision is the loop's
//! (which commands make a batch, who waits for what, a refused or stale host answer, the stop
//! policy after a failed append, what is answered once the agent has ended, the defaults).
//!
//! A batch is every command already waiting (up to
//! [`Options::max_batch`](crate::Options::max_batch)), appended as one write: only once it is
//! durable are its records published, its effects carried out and its callers answered, in
//! order. A failed append fails its members ([`AgentError::Persistence`]) and the agent goes
//! on; one that may or may not be in the log ([`LogError::Indeterminate`]), or one refused
//! because another writer owns the session ([`LogError::Fenced`]), stops it
//! ([`LogError::failure`] is the mapping; the policy is the loop's). Its callers are told once
//! the ending is published and the log released.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Context, Poll, Waker};

use coxswain_core::{Effect, Input, Machine, Outstanding, Status};
use coxswain_session::{
    AgentLoop, Command, Ending as Ended, Failure, HostFailure, HostReply, Output, Reply as Answer,
};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::agent::Agent;
use crate::channel::{Call, Inner, Reply, Waiter};
use crate::error::{AgentError, Ending};
use crate::host::{call, Host};
use crate::log::{DurableLog, LogError};
use crate::options::Options;
use crate::updates::{PendingSnapshot, State, Update, Updates};

/// At most this many host calls in a row are answered at their first poll, without a task, before
/// the driver goes back to its commands and its runtime (as Python's `Agent.EAGER_CALLS`).
const EAGER_CALLS: usize = 16;

/// The host call or maintenance job running now (at most one: S4).
enum Inflight {
    Request(Outstanding, JoinHandle<Input>),
    Maintenance(JoinHandle<()>, Reply<()>),
}

/// The driver's ties to its handles.
pub(crate) struct Links {
    pub(crate) rx: mpsc::Receiver<Box<Call>>,
    /// Upgraded to hand host calls an [`Agent`]; weak, so dropping every handle ends the driver.
    pub(crate) handle: Weak<Inner>,
    /// Tripped when the embedder dropped its last handle (host calls' handles do not count).
    pub(crate) owners_gone: CancellationToken,
    pub(crate) state: watch::Sender<State>,
    pub(crate) updates: Arc<Updates>,
    /// Where the machine goes when the driver ends ([`Inner::last`]).
    pub(crate) last: Arc<OnceLock<Box<Machine>>>,
}

pub(crate) struct Driver<H, L> {
    agent: AgentLoop<Waiter>,
    /// The log; dropped (its lock released) before the ending is published.
    log: Option<L>,
    host: Arc<H>,
    links: Links,
    span: Span,
    /// The current activity's token (S42): fresh at every [`Effect::Begin`].
    token: CancellationToken,
    /// The session's clock: time is what has passed since then.
    start: Instant,
    inflight: Option<Inflight>,
    /// The last failed append's error: what its members, and a stop, are told.
    failed: Option<LogError>,
    /// Set once the ending is published.
    ending: Option<Ending>,
    /// Host calls answered at their first poll since the driver last waited in its select.
    eager: usize,
    /// What [`publish_state`](Driver::publish_state) published last (at first, what the agent
    /// opened with: [`State::of`]).
    published: (Status, bool, u64),
}

impl<H: Host, L: DurableLog> Driver<H, L> {
    pub(crate) fn new(machine: Machine, options: &Options, log: L, host: H, links: Links) -> Self {
        let published = State::key(&machine);
        Driver {
            agent: AgentLoop::new(machine, options.session(host.hooks())),
            log: Some(log),
            host: Arc::new(host),
            links,
            span: Span::none(),
            token: CancellationToken::new(),
            start: Instant::now(),
            inflight: None,
            failed: None,
            ending: None,
            eager: 0,
            published,
        }
    }

    /// The driver task. An `async` block, not an `async fn`: the driver is then held once in the
    /// task, not twice (an `async fn` keeps its argument beside the local it is moved into), which
    /// is about a kilobyte per agent.
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn would hold the driver twice"
    )]
    pub(crate) fn run(mut self) -> impl Future<Output = ()> {
        async move {
            self.span = Span::current();
            while self.ending.is_none() {
                self.eager = 0;
                let deadline = self
                    .agent
                    .poll_timeout()
                    .and_then(|at| self.start.checked_add(at));
                tokio::select! {
                    biased;
                    done = next_done(&mut self.inflight) => self.complete(done),
                    () = sleep_until(deadline) => self.agent.handle_timeout(self.start.elapsed()),
                    call = self.links.rx.recv() => match call {
                        Some(call) => self.take_in(call).await,
                        None => self.agent.submit(Command::Close, Waiter::Close),
                    },
                    () = self.links.owners_gone.cancelled() => {
                        self.agent.submit(Command::Close, Waiter::Close);
                    }
                }
                self.pump().await;
            }
            // What was sent meanwhile is answered by the ended loop (a `fate` from its machine).
            self.links.rx.close();
            while let Ok(call) = self.links.rx.try_recv() {
                let (command, waiter) = *call;
                self.agent.submit(command, waiter);
            }
            self.carry_out_all().await;
        }
    }

    /// Takes `first` and the commands already waiting, up to `max_batch`, into the loop; a
    /// query or `close` ends the intake (what follows waits for the next turn of the select, so
    /// a host answer or a deadline due meanwhile goes first).
    async fn take_in(&mut self, first: Box<Call>) {
        let max = self.agent.options().max_batch.max(1);
        let (mut taken, mut yielded) = (1, max == 1);
        let mut grouped = self.submit(*first);
        while grouped && taken < max {
            let call = match self.links.rx.try_recv() {
                Ok(call) => call,
                Err(_) if !yielded => {
                    // Callers answered by the last batch may be about to send again: let them
                    // run once (a yield costs microseconds; the append it shares, a sync).
                    yielded = true;
                    tokio::task::yield_now().await;
                    match self.links.rx.try_recv() {
                        Ok(call) => call,
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            };
            grouped = self.submit(*call);
            taken += 1;
        }
    }

    /// Hands one command to the loop; whether more may join its batch (a query or `close` ends
    /// it).
    fn submit(&mut self, (command, waiter): Call) -> bool {
        let joins = matches!(
            command,
            Command::Input(_) | Command::Record { .. } | Command::Maintenance
        );
        self.agent.submit(command, waiter);
        joins
    }

    /// The running host call or maintenance job returned: the loop takes its answer.
    fn complete(&mut self, done: Result<Option<Input>, JoinError>) {
        match (done, self.inflight.take()) {
            (Ok(Some(answer)), Some(Inflight::Request(request, _))) => {
                self.agent.host_answered(request, HostReply::Answer(answer));
            }
            (Err(error), Some(Inflight::Request(..))) if error.is_cancelled() => {
                // The runtime is shutting down: no answer.
                self.agent.submit(Command::Close, Waiter::Close);
            }
            (Err(error), Some(Inflight::Request(request, _))) => {
                tracing::error!(parent: &self.span, %error, "host call panicked");
                let failed = HostReply::Failed(HostFailure::Panicked, String::new());
                self.agent.host_answered(request, failed);
            }
            (done, Some(Inflight::Maintenance(_, reply))) => {
                if let Err(error) = done {
                    tracing::warn!(parent: &self.span, %error, "maintenance job failed");
                }
                self.agent.job_ended(Waiter::Done(reply));
            }
            (_, inflight) => self.inflight = inflight, // a stray completion
        }
    }

    /// The driver contract: carry out what the loop says, write each batch it seals and report
    /// it, until nothing is left to write. Records are published once durable, then the state
    /// (a caller answered next must find it: `status`, `when_idle`), then the batch's outputs.
    async fn pump(&mut self) {
        loop {
            self.carry_out_all().await;
            let Some(batch) = self
                .agent
                .poll_append(self.start.elapsed())
                .map(|a| a.batch)
            else {
                break;
            };
            // The loop tells a refused command at once: answer it before the write, as this
            // driver always has (not after a sync); then the sealed batch is written.
            self.carry_out_all().await;
            let entries = self.agent.sealed().map_or(&[][..], |append| append.entries);
            let written = match self.log.as_mut() {
                _ if entries.is_empty() => Ok(0), // nothing to write
                Some(log) => log.append(entries).await,
                None => Err(LogError::Failed),
            };
            let updates = &self.links.updates;
            if let (Ok(first), true) = (&written, updates.watched()) {
                for (seq, entry) in (*first..).zip(entries.iter().cloned()) {
                    updates.send(Update::Recorded { seq, entry });
                }
            }
            let result = written.map(drop).map_err(|error| {
                let failure = error.failure();
                let stop = failure.stops_the_agent();
                tracing::error!(parent: &self.span, %error, stop, "append failed");
                self.failed = Some(error);
                failure
            });
            let _ = self.agent.appended(batch, result, self.start.elapsed());
            self.publish_state();
        }
        self.carry_out_all().await;
        self.publish_state();
    }

    /// Carries out the loop's outputs, in order, the ending's too.
    async fn carry_out_all(&mut self) {
        while let Some(ending) = self.carry_out() {
            // Boxed: it runs once, and keeps the hot futures small.
            Box::pin(self.finish(ending)).await;
        }
    }

    /// Carries out the loop's outputs, in order, up to an ending (returned: the caller
    /// finishes, then carries out the rest).
    fn carry_out(&mut self) -> Option<Ended> {
        while let Some(output) = self.agent.poll_output() {
            match output {
                Output::Reply(waiter, answer) => self.reply(waiter, answer),
                Output::Effect(effect) => self.effect(effect),
                Output::StartJob(Waiter::Job(job, reply)) => {
                    let job = job(self.token.clone()).instrument(self.span.clone());
                    self.inflight = Some(Inflight::Maintenance(tokio::spawn(job), reply));
                }
                Output::StartJob(_) => {}
                Output::Abandon(request) => {
                    tracing::warn!(parent: &self.span, ?request, "the aborted call outlived the grace");
                    match self.inflight.take() {
                        Some(Inflight::Request(running, handle)) if running == request => {
                            handle.abort();
                        }
                        other => self.inflight = other,
                    }
                }
                Output::Ended(ending) => return Some(ending),
            }
        }
        None
    }

    /// Answers a caller in the handle's vocabulary.
    fn reply(&self, waiter: Waiter, answer: Result<Answer, Failure>) {
        let answer = answer.map_err(|failure| self.error(failure));
        match (waiter, answer) {
            (Waiter::Input(reply), answer) => {
                let found = |a| !matches!(a, Answer::Delivered { found: false });
                drop(reply.send(answer.map(found)));
            }
            (Waiter::Done(reply) | Waiter::Job(_, reply), answer) => {
                drop(reply.send(answer.map(drop)));
            }
            (
                Waiter::Pending(reply),
                Ok(Answer::Pending {
                    next_turn,
                    next_step,
                }),
            ) => {
                drop(reply.send(PendingSnapshot {
                    next_turn,
                    next_step,
                }));
            }
            (Waiter::Fate(reply), Ok(Answer::Fate(fate))) => drop(reply.send(fate)),
            // Dropped: the handle reads the published ending (`close` waits for it).
            _ => {}
        }
    }

    /// A failure in the handle's vocabulary: the failed append's own error, or the ending's.
    fn error(&self, failure: Failure) -> AgentError {
        let log_error = || self.failed.clone().unwrap_or(LogError::Failed);
        match failure {
            Failure::Refused(refused) => AgentError::refused(refused),
            Failure::Persistence => AgentError::Persistence(log_error()),
            Failure::Indeterminate => AgentError::Indeterminate(log_error()),
            Failure::Ended(ending) => self.ending(ending).error(),
        }
    }

    fn ending(&self, ending: Ended) -> Ending {
        match ending {
            Ended::Closed => Ending::Closed,
            Ended::Disposed => Ending::Disposed,
            Ended::Stopped(_) => Ending::Stopped(self.failed.clone().unwrap_or(LogError::Failed)),
        }
    }

    /// Carries out one released effect.
    fn effect(&mut self, effect: Effect) {
        match effect {
            Effect::Notify(notification) => self.links.updates.send(Update::Notified(notification)),
            Effect::Begin(_) => self.token = CancellationToken::new(),
            Effect::Request(request) => {
                let Some(inner) = self.links.handle.upgrade() else {
                    // Nobody holds the agent any more: nothing could ever use the answer.
                    return self.agent.submit(Command::Close, Waiter::Close);
                };
                let (outstanding, token) = (request.outstanding(), self.token.clone());
                let host = call(self.host.clone(), request, token, Agent::for_host(inner));
                let mut host = Box::pin(host.instrument(self.span.clone()));
                // A call that answers without waiting for anything needs no task of its own: its
                // answer is taken at once. One that waits runs on in a task, and so does every
                // call after EAGER_CALLS answered at once in a row: a host that never waits
                // cannot keep the driver from its commands (a `cancel`) and its runtime.
                let first = if self.eager < EAGER_CALLS {
                    self.eager += 1;
                    poll_once(host.as_mut())
                } else {
                    Poll::Pending
                };
                match first {
                    Poll::Ready(Ok(answer)) => {
                        self.agent
                            .host_answered(outstanding, HostReply::Answer(answer));
                    }
                    Poll::Ready(Err(panic)) => {
                        let panic = panic_message(panic.as_ref());
                        tracing::error!(parent: &self.span, panic, "host call panicked");
                        let failed = HostReply::Failed(HostFailure::Panicked, String::new());
                        self.agent.host_answered(outstanding, failed);
                    }
                    Poll::Pending => {
                        let handle = tokio::spawn(host);
                        self.inflight = Some(Inflight::Request(outstanding, handle));
                    }
                }
            }
            Effect::Abort(abort) => {
                tracing::info!(parent: &self.span, cause = ?abort.cause, "abort");
                self.token.cancel();
            }
            Effect::Disposed => {} // the loop's `Ended`
        }
    }

    /// Publishes the durable state (a staged batch's is not: it may yet fail).
    fn publish_state(&mut self) {
        if self.agent.has_batch() || self.ending.is_some() {
            return;
        }
        let machine = self.agent.machine();
        // Only this driver changes the published state before it ends: when what it would
        // publish is what it published last, the channel's lock is not taken.
        let now = State::key(machine);
        if now == self.published {
            return;
        }
        self.published = now;
        self.links
            .state
            .send_if_modified(|state| state.update(machine));
    }

    /// The agent ends: stops what runs, syncs and releases the log, publishes the ending, then
    /// lets the loop answer whoever still waits. The sync runs after a failed append too: what
    /// was acknowledged before it under a lazy policy must still be made durable.
    async fn finish(&mut self, ending: Ended) {
        let ending = self.ending(ending);
        self.token.cancel();
        let job = match self.inflight.take() {
            Some(Inflight::Maintenance(_, reply)) => Some(reply),
            Some(Inflight::Request(_, handle)) => {
                // Its answer is ignored; a call that ignores its token too is dropped after the
                // grace, so a deaf host does not keep a task alive for every agent closed.
                let grace = self.agent.options().abort_grace;
                if let Some(deadline) = Instant::now().checked_add(grace) {
                    tokio::spawn(async move {
                        tokio::time::sleep_until(deadline).await;
                        handle.abort();
                    });
                }
                None
            }
            None => None,
        };
        let final_sync = match self.log.as_mut() {
            Some(log) => log.sync().await.err(),
            None => None,
        };
        if let Some(error) = &final_sync {
            tracing::error!(parent: &self.span, %error, "final sync failed");
        }
        drop(self.log.take()); // the log (and its lock) before anyone learns the driver ended
        self.keep_last();
        tracing::info!(parent: &self.span, ?ending, "driver ended");
        let quiescent = self.agent.machine().is_quiescent();
        self.links.state.send_modify(|state| {
            // Nothing runs any more, whatever the core was in the middle of.
            (state.status, state.quiescent) = (Status::Idle, quiescent);
            (state.ended, state.final_sync) = (Some(ending.clone()), final_sync);
        });
        self.links.updates.send(Update::Ended(ending.clone()));
        self.links.updates.end();
        self.ending = Some(ending);
        self.agent.finish();
        if let Some(reply) = job {
            self.agent.job_ended(Waiter::Done(reply));
        }
    }
}

impl<H, L> Driver<H, L> {
    /// Keeps the machine for the handles' [`fate`](Agent::fate) once the driver is gone (S58:
    /// answered also after dispose): before the ending is published, and when the task is
    /// dropped without finishing (its runtime shut down).
    fn keep_last(&self) {
        if self.links.last.get().is_none() {
            let _ = self.links.last.set(Box::new(self.agent.machine().clone()));
        }
    }
}

impl<H, L> Drop for Driver<H, L> {
    fn drop(&mut self) {
        self.keep_last();
    }
}

/// The completion of what runs: a host call's answer, or a job's end (`None`).
async fn next_done(inflight: &mut Option<Inflight>) -> Result<Option<Input>, JoinError> {
    match inflight {
        Some(Inflight::Request(_, handle)) => handle.await.map(Some),
        Some(Inflight::Maintenance(handle, _)) => handle.await.map(|()| None),
        None => std::future::pending().await,
    }
}

/// Polls `future` once, with a waker that does nothing (a future still pending is spawned, and
/// its task's first poll registers the task's own waker); a panic is caught and returned.
fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<Result<F::Output, Box<dyn Any + Send>>> {
    let mut cx = Context::from_waker(Waker::noop());
    match std::panic::catch_unwind(AssertUnwindSafe(|| future.poll(&mut cx))) {
        Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
        Ok(Poll::Pending) => Poll::Pending,
        Err(panic) => Poll::Ready(Err(panic)),
    }
}

/// A panic's message, as a task's panic reports it.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(message), _) => message,
        (_, Some(message)) => message,
        _ => "Box<dyn Any>",
    }
}

/// Fires at `at`; never without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
