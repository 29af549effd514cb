//! The driver task: one per agent, an IO loop over the session layer
//! ([`coxswain_session::Session`]). It moves commands in, each batch's records to the log and
//! time along, and carries out what a persisted batch releases; every decision (group commit
//! and its rollback, admission, the abort grace, the host-failure codes) is the session's.
//!
//! A group is every input and host event already waiting (up to
//! [`Options::max_batch`](crate::Options::max_batch)), staged as one batch and appended as one
//! write: only once it is durable are its records published, its effects carried out and its
//! callers answered, in order. A failed append fails every member of the batch
//! ([`AgentError::Persistence`]), the session takes the batch back, and the agent goes on: the
//! answers the batch held are the session's to stage again once its retry pause is over
//! ([`Timeout::Retried`]), their waiters with them. Only an append that may or may not be in the log ([`LogError::Indeterminate`]),
//! or one refused because another writer owns the session ([`LogError::Fenced`]), stops the
//! agent; its callers are told once the ending is published and the log released.

use std::sync::{Arc, OnceLock, Weak};

use coxswain_core::{Effect, Input, Machine, MaintenanceInput, Outstanding, Status};
use coxswain_session::{Ack, BatchNo, HostFailure, Refused, Release, Session, Ticket, Timeout};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, Span};

use crate::agent::Agent;
use crate::channel::{Command, Inner, Job, Reply};
use crate::error::{AgentError, Ending};
use crate::host::{call, Host};
use crate::log::{DurableLog, LogError};
use crate::options::Options;
use crate::updates::{PendingSnapshot, State, Update, Updates};

/// The host call or maintenance job running now (at most one: S4).
enum Inflight {
    Request(Outstanding, JoinHandle<Input>),
    Maintenance(JoinHandle<()>, Reply<()>),
}

/// Who waits for a member of the open batch.
enum Waiting {
    Input(Reply<bool>),
    Record(Reply<()>),
    /// Maintenance: the job is spawned once its beginning is durable.
    Begin(Job, Reply<()>),
    /// A job's end: its caller is answered once the end is durable.
    End(Reply<()>),
    /// A host answer: the driver's own.
    Driver,
}

impl Waiting {
    fn answer(self, result: Result<bool, AgentError>) {
        match self {
            Waiting::Input(reply) => drop(reply.send(result)),
            Waiting::Record(reply) | Waiting::Begin(_, reply) | Waiting::End(reply) => {
                drop(reply.send(result.map(drop)))
            }
            Waiting::Driver => {}
        }
    }
}

/// The driver's ties to its handles.
pub(crate) struct Links {
    pub(crate) rx: mpsc::Receiver<Command>,
    /// Upgraded to hand host calls an [`Agent`]; weak, so dropping every handle ends the driver.
    pub(crate) handle: Weak<Inner>,
    /// Tripped when the embedder dropped its last handle (host calls' handles do not count).
    pub(crate) owners_gone: CancellationToken,
    pub(crate) state: watch::Sender<State>,
    pub(crate) updates: Arc<Updates>,
    /// Where the machine goes when the driver ends ([`Inner::last`]).
    pub(crate) last: Arc<OnceLock<Machine>>,
}

pub(crate) struct Driver<H, L> {
    session: Session,
    /// The log; dropped (its lock released) before the ending is published.
    log: Option<L>,
    host: Arc<H>,
    links: Links,
    span: Span,
    /// The current activity's token (S42): fresh at every [`Effect::Begin`].
    token: CancellationToken,
    /// Who waits for each member of the open batch, in order.
    waiting: Vec<Waiting>,
    max_batch: usize,
    /// The session's clock: time is what has passed since then.
    start: Instant,
    /// Who waits for a member whose answer the session holds for its retry.
    held: Vec<(Ticket, Waiting)>,
    /// A command that ended a group; it runs next.
    deferred: Option<Command>,
    inflight: Option<Inflight>,
    ending: Option<Ending>,
    /// Answers held until the ending is published (the calls an indeterminate append failed).
    after_end: Vec<(Waiting, AgentError)>,
}

impl<H: Host, L: DurableLog> Driver<H, L> {
    pub(crate) fn new(machine: Machine, options: &Options, log: L, host: H, links: Links) -> Self {
        Driver {
            session: Session::new(machine, options.session()),
            log: Some(log),
            host: Arc::new(host),
            links,
            span: Span::none(),
            token: CancellationToken::new(),
            waiting: Vec::new(),
            max_batch: options.max_batch.max(1),
            start: Instant::now(),
            held: Vec::new(),
            deferred: None,
            inflight: None,
            ending: None,
            after_end: Vec::new(),
        }
    }

    pub(crate) async fn run(mut self) {
        self.span = Span::current();
        while self.ending.is_none() {
            if let Some(command) = self.deferred.take() {
                self.command(command).await;
                continue;
            }
            let deadline = (self.session.poll_timeout()).and_then(|at| self.start.checked_add(at));
            tokio::select! {
                biased;
                done = next_done(&mut self.inflight) => self.complete(done).await,
                () = sleep_until(deadline) => self.timer().await,
                command = self.links.rx.recv() => match command {
                    Some(command) => self.command(command).await,
                    None => self.end(Ending::Closed),
                },
                () = self.links.owners_gone.cancelled() => self.end(Ending::Closed),
            }
        }
        self.finish().await;
    }

    /// Time passed: the session stages the answers a failed batch held (their waiters wait on)
    /// or the `fail` of a call that outlived its abort grace (the call is dropped, S38), and
    /// whatever is staged is committed.
    async fn timer(&mut self) {
        match self.session.handle_timeout(self.start.elapsed()) {
            Some(Timeout::Retried { answers }) => {
                for (held, staged) in answers {
                    let at = self.held.iter().position(|(ticket, _)| *ticket == held);
                    let waiting = at.map_or(Waiting::Driver, |at| self.held.remove(at).1);
                    self.stage(staged, waiting);
                }
            }
            Some(Timeout::Abandoned { request, .. }) => {
                tracing::warn!(parent: &self.span, ?request, "the aborted call outlived the grace");
                if let Some(Inflight::Request(_, handle)) = self.inflight.take() {
                    handle.abort();
                }
                self.waiting.push(Waiting::Driver);
            }
            None => {}
        }
        self.commit().await;
    }

    async fn command(&mut self, command: Command) {
        match command {
            Command::Pending { reply } => {
                let _ = reply.send(PendingSnapshot::of(self.session.machine()));
            }
            // A query (S58): changes nothing, emits nothing; no batch is staged here.
            Command::Fate { id, reply } => {
                let _ = reply.send(self.session.machine().fate(&id));
            }
            // Its caller waits for the ending, published once the log is released.
            Command::Close => self.end(Ending::Closed),
            grouped => self.group(grouped).await,
        }
    }

    /// Group commit: stages `first` and every input or host event already waiting (up to
    /// `max_batch`) in arrival order, then commits them as one batch.
    async fn group(&mut self, first: Command) {
        let (mut next, mut taken, mut yielded) = (Some(first), 0, false);
        while let Some(command) = next.take() {
            let (fed, waiting) = match command {
                Command::Input { input, reply } => {
                    (self.session.feed(input), Waiting::Input(reply))
                }
                Command::Maintenance { job, reply } => {
                    let begin = Input::Maintenance(MaintenanceInput::Begin);
                    (self.session.feed(begin), Waiting::Begin(job, reply))
                }
                Command::Record {
                    turn,
                    step,
                    events,
                    reply,
                } => (
                    self.session.record(turn, step, events),
                    Waiting::Record(reply),
                ),
                other => {
                    self.deferred = Some(other); // it runs once the group is settled
                    break;
                }
            };
            self.stage(fed, waiting);
            taken += 1;
            if taken >= self.max_batch || self.session.machine().is_disposed() {
                break;
            }
            next = self.links.rx.try_recv().ok();
            if next.is_none() && !yielded && self.max_batch > 1 {
                // Callers answered by the last group may be about to send again: let them run
                // once (a yield costs microseconds; the append it shares, a sync).
                yielded = true;
                tokio::task::yield_now().await;
                next = self.links.rx.try_recv().ok();
            }
        }
        self.commit().await;
    }

    /// A staged member waits for its batch; a refused one changed nothing (S5) and is told now.
    fn stage(&mut self, fed: Result<Ticket, Refused>, waiting: Waiting) {
        match fed {
            Ok(_) => self.waiting.push(waiting),
            Err(refused) => waiting.answer(Err(AgentError::refused(refused))),
        }
    }

    /// The running host call or maintenance job returned: its answer is staged and committed.
    async fn complete(&mut self, done: Result<Option<Input>, JoinError>) {
        let (fed, waiting) = match (done, self.inflight.take()) {
            (Ok(Some(answer)), Some(Inflight::Request(request, _))) => {
                (self.session.answer(request, answer), Waiting::Driver)
            }
            (Err(error), Some(Inflight::Request(..))) if error.is_cancelled() => {
                return self.end(Ending::Closed); // the runtime is shutting down: no answer
            }
            (Err(error), Some(Inflight::Request(request, _))) => {
                tracing::error!(parent: &self.span, %error, "host call panicked");
                let failed = self.session.host_failed(request, HostFailure::Panicked, "");
                (failed, Waiting::Driver)
            }
            (done, Some(Inflight::Maintenance(_, reply))) => {
                if let Err(error) = done {
                    tracing::warn!(parent: &self.span, %error, "maintenance job failed");
                }
                let end = Input::Maintenance(MaintenanceInput::End);
                (self.session.feed(end), Waiting::End(reply))
            }
            (_, inflight) => return self.inflight = inflight, // a stray completion
        };
        self.stage(fed, waiting);
        self.commit().await;
    }

    /// Appends the staged batch; once it is durable publishes its records and carries out what
    /// the session releases, in order. A failed append fails every member and the session
    /// takes the batch back; an indeterminate one stops the agent.
    async fn commit(&mut self) {
        let Some(append) = self.session.seal() else {
            return self.publish_state();
        };
        let (batch, log) = (append.batch, self.log.as_mut());
        let appended = match log {
            _ if append.entries.is_empty() => Ok(0), // nothing to write (refusals, no-op edits)
            Some(log) => log.append(append.entries).await,
            None => Err(LogError::Failed),
        };
        match appended {
            Ok(first) => self.release(batch, first),
            Err(error) => return self.fail(batch, error),
        }
        self.publish_state();
    }

    fn release(&mut self, batch: BatchNo, first: u64) {
        let updates = &self.links.updates;
        if let (true, Some(append)) = (updates.watched(), self.session.seal()) {
            for (seq, entry) in (first..).zip(append.entries.iter().cloned()) {
                updates.send(Update::Recorded { seq, entry });
            }
        }
        let released = self.session.persisted(batch, self.start.elapsed());
        // The state first: a caller answered below must find it (`status`, `when_idle`).
        self.publish_state();
        let mut members = std::mem::take(&mut self.waiting).into_iter();
        for release in released.unwrap_or_default() {
            match release {
                Release::Effect(effect) => self.carry_out(effect),
                Release::Ack(_, ack) => match (members.next(), ack) {
                    (Some(member), Ack::Refused(why)) => {
                        member.answer(Err(AgentError::refused(why)))
                    }
                    (Some(Waiting::Begin(job, reply)), _) => {
                        let job = job(self.token.clone()).instrument(self.span.clone());
                        self.inflight = Some(Inflight::Maintenance(tokio::spawn(job), reply));
                    }
                    (Some(member), Ack::Input { found }) => member.answer(Ok(found)),
                    (Some(member), _) => member.answer(Ok(true)),
                    (None, _) => {}
                },
            }
        }
    }

    fn fail(&mut self, batch: BatchNo, error: LogError) {
        let failed = self.session.failed(batch, self.start.elapsed());
        let stop = error.stops_the_agent();
        tracing::error!(parent: &self.span, %error, stop, "append failed");
        if stop {
            self.end(Ending::Stopped(error.clone()));
        }
        let why = match error.is_indeterminate() {
            true => AgentError::Indeterminate(error),
            false => AgentError::Persistence(error), // not in the log (fenced: the agent stops)
        };
        let held = failed.map(|failed| failed.held).unwrap_or_default();
        for (index, member) in std::mem::take(&mut self.waiting).into_iter().enumerate() {
            match held.iter().find(|ticket| ticket.index == index) {
                // Its answer is the session's to stage again: its waiter waits for that.
                Some(ticket) if !stop => self.held.push((*ticket, member)),
                _ if stop => self.after_end.push((member, why.clone())),
                _ => member.answer(Err(why.clone())),
            }
        }
        self.publish_state();
    }

    /// Carries out one released effect.
    fn carry_out(&mut self, effect: Effect) {
        match effect {
            Effect::Notify(notification) => self.links.updates.send(Update::Notified(notification)),
            Effect::Begin(_) => self.token = CancellationToken::new(),
            Effect::Request(request) => {
                let Some(inner) = self.links.handle.upgrade() else {
                    // Nobody holds the agent any more: nothing could ever use the answer.
                    return self.end(Ending::Closed);
                };
                let (outstanding, token) = (request.outstanding(), self.token.clone());
                let host = call(self.host.clone(), request, token, Agent::for_host(inner));
                let handle = tokio::spawn(host.instrument(self.span.clone()));
                self.inflight = Some(Inflight::Request(outstanding, handle));
            }
            Effect::Abort(abort) => {
                tracing::info!(parent: &self.span, cause = ?abort.cause, "abort");
                self.token.cancel();
            }
            Effect::Disposed => self.end(Ending::Disposed),
        }
    }

    /// Publishes the durable state (a staged batch's is not: it may yet fail).
    fn publish_state(&mut self) {
        if self.session.has_batch() {
            return;
        }
        let machine = self.session.machine();
        self.links
            .state
            .send_if_modified(|state| state.update(machine));
    }

    fn end(&mut self, ending: Ending) {
        self.ending.get_or_insert(ending);
    }

    /// Stops what runs, syncs and releases the log, publishes the ending, answers whatever still
    /// waits. The sync runs after a failed append too: what was acknowledged before it under a
    /// lazy policy must still be made durable.
    async fn finish(&mut self) {
        let ending = self.ending.clone().unwrap_or(Ending::Closed);
        self.token.cancel();
        match self.inflight.take() {
            Some(Inflight::Maintenance(_, reply)) => {
                self.after_end.push((Waiting::End(reply), ending.error()));
            }
            Some(Inflight::Request(_, handle)) => {
                // Its answer is ignored; a call that ignores its token too is dropped after the
                // grace, so a deaf host does not keep a task alive for every agent closed.
                let grace = self.session.options().abort_grace;
                if let Some(deadline) = Instant::now().checked_add(grace) {
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
        drop(self.log.take()); // the log (and its lock) before anyone learns the driver ended
        self.keep_last();
        tracing::info!(parent: &self.span, ?ending, "driver ended");
        let quiescent = self.session.machine().is_quiescent();
        self.links.state.send_modify(|state| {
            // Nothing runs any more, whatever the core was in the middle of.
            (state.status, state.quiescent) = (Status::Idle, quiescent);
            (state.ended, state.final_sync) = (Some(ending.clone()), final_sync);
        });
        self.links.updates.send(Update::Ended(ending.clone()));
        self.links.updates.end();
        // What still waits (queued commands, staged members) is dropped: its caller reads the
        // ending just published. The answers held for after the ending are sent.
        self.links.rx.close();
        while self.links.rx.try_recv().is_ok() {}
        self.waiting.clear();
        for (member, error) in self.after_end.drain(..) {
            member.answer(Err(error));
        }
    }
}

impl<H, L> Driver<H, L> {
    /// Keeps the machine for the handles' [`fate`](Agent::fate) once the driver is gone (S58:
    /// answered also after dispose): before the ending is published, and when the task is
    /// dropped without finishing (its runtime shut down).
    fn keep_last(&self) {
        if self.links.last.get().is_none() {
            let _ = self.links.last.set(self.session.machine().clone());
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

/// Fires at `at`; never without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
