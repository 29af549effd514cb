//! [`AgentLoop`]: one agent's loop, sans-IO, for every driver in every language. A driver is
//! then an IO loop over it: it hands over what its callers, its host and its clock bring
//! ([`submit`](AgentLoop::submit), [`host_answered`](AgentLoop::host_answered),
//! [`job_ended`](AgentLoop::job_ended), [`handle_timeout`](AgentLoop::handle_timeout)), writes
//! the batches the loop seals ([`poll_append`](AgentLoop::poll_append),
//! [`appended`](AgentLoop::appended)), and carries out what it is told
//! ([`poll_output`](AgentLoop::poll_output)). The loop decides:
//!
//! * **which commands make a batch**: every command waiting, in arrival order, up to
//!   [`Options::max_batch`]; a `pending`, `fate` or `close` ends the batch before it (it is
//!   answered once that batch is durable, against the durable state), and a `dispose` ends the
//!   batch it joined;
//! * **who waits for what**: each caller's waiter, kept with its member; a member whose answer a
//!   failed batch held keeps its waiter until the session stages the answer again;
//! * **a host answer the session refused**: an invalid answer, answered `fail` on the host's
//!   behalf ([`Session::answer`]); an answer to a request that is no longer running (a call the
//!   session abandoned) is dropped;
//! * **the stop policy**: a failed append fails its members and the agent goes on; an
//!   [`Indeterminate`](LogFailure::Indeterminate) or [`Fenced`](LogFailure::Fenced) one ends
//!   the agent ([`Ending::Stopped`]);
//! * **the defaults** ([`Options::DEFAULT`]), and what a missing hook or one that returns
//!   nothing answers ([`Hooks`](crate::Hooks)).

use std::collections::VecDeque;
use std::time::Duration;

use coxswain_core::{
    Effect, Fate, Input, Machine, MaintenanceInput, MessageId, Outstanding, Pending, Request,
    Target,
};
use coxswain_log::HostEvent;

use crate::admission::Refused;
use crate::batch::{Ack, Append, BatchMismatch, BatchNo, Release, Ticket, Timeout};
use crate::failure::HostFailure;
use crate::session::{Options, Session};

/// What a caller asks of the agent.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// An input for the machine: a delivery, an edit, a cancel, `resume`, `dispose`.
    Input(Input),
    /// Host events of the running step `step` of turn `turn` (model output, tool calls).
    Record {
        /// The turn.
        turn: u64,
        /// The step.
        step: u64,
        /// The events, in order.
        events: Vec<HostEvent>,
    },
    /// A maintenance job: once its beginning is durable the driver runs it
    /// ([`Output::StartJob`]) and reports its end ([`AgentLoop::job_ended`]).
    Maintenance,
    /// The pending lists, as durable (S53).
    Pending,
    /// What became of a message (S58); answered also once the agent has ended.
    Fate(MessageId),
    /// End the agent once what was sent before is durable.
    Close,
}

/// What a host call came back with.
#[derive(Clone, Debug, PartialEq)]
pub enum HostReply {
    /// An answer for the machine.
    Answer(Input),
    /// The call returned nothing ([`Session::returned_nothing`]).
    Nothing,
    /// The call failed ([`HostFailure`]), with the host's detail.
    Failed(HostFailure, String),
}

/// How an append failed, as the log reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogFailure {
    /// Not written: the batch's members fail, and the agent goes on.
    Failed,
    /// May or may not be in the log: the agent stops.
    Indeterminate,
    /// Another writer owns the session: the agent stops.
    Fenced,
}

impl LogFailure {
    /// Whether this failure ends the agent (the stop policy).
    pub fn stops_the_agent(self) -> bool {
        !matches!(self, LogFailure::Failed)
    }
}

/// Why an agent ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// A caller closed it.
    Closed,
    /// It was disposed (S45).
    Disposed,
    /// An append failed in a way that stops it.
    Stopped(LogFailure),
}

impl Ending {
    /// The kind name every language gives it: `closed`, `disposed` or `stopped`.
    pub fn kind(self) -> &'static str {
        match self {
            Ending::Closed => "closed",
            Ending::Disposed => "disposed",
            Ending::Stopped(_) => "stopped",
        }
    }
}

/// A caller's answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// An input is durable; `found` is `false` only for an edit whose id was not pending.
    Delivered {
        /// Whether the edit found its id.
        found: bool,
    },
    /// Host events are durable inside their step.
    Recorded,
    /// A maintenance job's end is durable.
    JobDone,
    /// The pending lists, as durable.
    Pending {
        /// NT, in order.
        next_turn: Vec<Pending>,
        /// NS, in order.
        next_step: Vec<Pending>,
    },
    /// A message's fate (S58).
    Fate(Fate),
    /// The agent has ended: `close`'s answer.
    Closed(Ending),
}

/// Why a caller's command failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// Refused, changing nothing (S5).
    Refused(Refused),
    /// Its batch's append failed: not in the log, and it may be sent again.
    Persistence,
    /// Its batch's append may or may not be in the log; the agent has stopped.
    Indeterminate,
    /// The agent has ended.
    Ended(Ending),
}

impl Failure {
    /// The kind name every language gives it: the refusal's
    /// ([`Refused::kind`]), `persistence`, `indeterminate`, or the ending's.
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Refused(refused) => refused.kind(),
            Failure::Persistence => "persistence",
            Failure::Indeterminate => "indeterminate",
            Failure::Ended(ending) => ending.kind(),
        }
    }
}

/// What the driver must do, in order.
#[derive(Clone, Debug)]
pub enum Output<W> {
    /// Answer a caller.
    Reply(W, Result<Reply, Failure>),
    /// Carry out an effect of a durable batch: `Request` is a host call to start (answer it with
    /// [`AgentLoop::host_answered`]), `Begin` a fresh cancellation scope (S42), `Abort` trips
    /// it, `Notify` is published. (`Disposed` is not passed on: it is [`Output::Ended`].)
    Effect(Effect),
    /// A maintenance job's beginning is durable: run it, then [`AgentLoop::job_ended`] with `W`.
    StartJob(W),
    /// The call for this request outlived the abort grace: drop it; its answer is ignored.
    Abandon(Outstanding),
    /// The agent ends: stop what runs, sync and release the log, publish the ending, then call
    /// [`AgentLoop::finish`].
    Ended(Ending),
}

/// Who waits for a staged member.
#[derive(Clone, Debug)]
enum Waiter<W> {
    /// A caller's input or record.
    Caller(W),
    /// A maintenance job's beginning: the job starts once it is durable.
    Job(W),
    /// A maintenance job's end.
    JobEnd(W),
    /// A host answer, or one the session gave: nobody waits.
    Loop,
}

/// What waits in the loop for the next batch.
#[derive(Clone, Debug)]
enum Queued<W> {
    Command(Command, W),
    Answer(Outstanding, HostReply),
    JobEnded(W),
}

/// One agent's loop over a [`Session`], sans-IO: what it decides is in the [crate](crate)'s
/// overview. `W` is the driver's waiter (a reply channel, a promise's number, a future).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use coxswain_core::{Effect, Input, Machine, Message, Request, StepAnswer};
/// use coxswain_session::{AgentLoop, Command, Hooks, HostReply, Options, Output, Reply};
///
/// let options = Options { hooks: Hooks::NONE, ..Options::DEFAULT };
/// let mut agent = AgentLoop::new(Machine::new(), options);
/// let now = Duration::ZERO;
/// agent.submit(Command::Input(Input::Followup(Message::user("m1", "hi").into())), "caller");
/// // One write: the delivery, the turn's start, the claim and, no pre-step hook being
/// // written, the step's start.
/// let append = agent.poll_append(now).unwrap();
/// let batch = append.batch;
/// agent.appended(batch, Ok(()), now)?;
/// let mut call = None;
/// while let Some(output) = agent.poll_output() {
///     match output {
///         Output::Effect(Effect::Request(request @ Request::Step { .. })) => call = Some(request),
///         Output::Reply(caller, reply) => {
///             assert_eq!(caller, "caller");
///             assert!(matches!(reply, Ok(Reply::Delivered { found: true })));
///         }
///         _ => {}
///     }
/// }
/// let step = call.unwrap().outstanding();
/// agent.host_answered(step, HostReply::Answer(Input::Step(StepAnswer::Completed)));
/// // The second write: the step's end, and (no turn-stopping hook) the turn's end.
/// let batch = agent.poll_append(now).unwrap().batch;
/// agent.appended(batch, Ok(()), now)?;
/// assert!(agent.machine().is_quiescent());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct AgentLoop<W> {
    session: Session,
    queue: VecDeque<Queued<W>>,
    /// Who waits for each member of the open batch, by place.
    members: Vec<Waiter<W>>,
    /// Who waits for a member whose answer the session holds for its retry.
    held: Vec<(Ticket, Waiter<W>)>,
    outputs: VecDeque<Output<W>>,
    /// The host call running: released, not yet answered.
    call: Option<Request>,
    ending: Option<Ending>,
    /// Answered once the ending is published: the members of the append that stopped the agent,
    /// and `close`'s callers.
    after_end: Vec<(W, Result<Reply, Failure>)>,
    /// Whether [`Output::Ended`] was handed out.
    announced: bool,
    finished: bool,
    /// The releases of the batch being persisted, a buffer kept between batches.
    released: Vec<Release>,
}

impl<W> AgentLoop<W> {
    /// A loop over `machine` (fresh, or a resumed one) with `options`.
    pub fn new(machine: Machine, options: Options) -> Self {
        AgentLoop {
            session: Session::new(machine, options),
            queue: VecDeque::new(),
            members: Vec::new(),
            held: Vec::new(),
            outputs: VecDeque::new(),
            call: None,
            ending: None,
            after_end: Vec::new(),
            announced: false,
            finished: false,
            released: Vec::new(),
        }
    }

    /// The machine: while a batch is staged, with its inputs applied (publish state only when
    /// [`has_batch`](AgentLoop::has_batch) is `false`).
    pub fn machine(&self) -> &Machine {
        self.session.machine()
    }

    /// The options.
    pub fn options(&self) -> Options {
        self.session.options()
    }

    /// Whether a batch is staged or being written.
    pub fn has_batch(&self) -> bool {
        self.session.has_batch()
    }

    /// How many commands and answers wait for the next batch (a driver takes in at most
    /// [`Options::max_batch`] more than this before it seals).
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The ending, once the agent has one.
    pub fn ending(&self) -> Option<Ending> {
        self.ending
    }

    /// The host call running, if any.
    pub fn running_call(&self) -> Option<&Request> {
        self.call.as_ref()
    }

    /// A caller's command. Once the agent has finished it is answered at once (a `fate` still
    /// is, S58); else it waits for the next batch.
    pub fn submit(&mut self, command: Command, waiter: W) {
        if self.finished {
            let reply = self.after_finish(&command);
            return self.outputs.push_back(Output::Reply(waiter, reply));
        }
        self.queue.push_back(Queued::Command(command, waiter));
    }

    /// The host call for `request` came back. An answer to a request that is not the running
    /// call is dropped (a call the session abandoned answering late).
    pub fn host_answered(&mut self, request: Outstanding, reply: HostReply) {
        if self.ending.is_some() {
            return; // nothing is staged once the agent ends
        }
        self.queue.push_back(Queued::Answer(request, reply));
    }

    /// The maintenance job started by [`Output::StartJob`] with `waiter` has ended.
    pub fn job_ended(&mut self, waiter: W) {
        if self.finished {
            let failure = Failure::Ended(self.ending.unwrap_or(Ending::Closed));
            return self.outputs.push_back(Output::Reply(waiter, Err(failure)));
        }
        self.queue.push_back(Queued::JobEnded(waiter));
    }

    /// The next thing to do, in order. [`Output::Ended`] comes once, after everything the batch
    /// that ended the agent released.
    pub fn poll_output(&mut self) -> Option<Output<W>> {
        if let Some(output) = self.outputs.pop_front() {
            return Some(output);
        }
        match self.ending {
            Some(ending) if !self.announced => {
                self.announced = true;
                Some(Output::Ended(ending))
            }
            _ => None,
        }
    }

    /// Stages what is due at `now` ([`handle_timeout`](AgentLoop::handle_timeout)) and what
    /// waits into one batch and seals it: append its entries as one write (none:
    /// nothing to write, still call [`appended`](AgentLoop::appended)), then report. `None`
    /// when nothing is to be written (commands may still have been answered: poll the outputs),
    /// while a batch is being written, and once the agent ends.
    pub fn poll_append(&mut self, now: Duration) -> Option<Append<'_>> {
        if self.poll_timeout().is_some_and(|at| at <= now) {
            self.handle_timeout(now); // what is due joins this batch
        }
        if self.session.is_sealed() {
            return None;
        }
        let max = self.session.options().max_batch.max(1);
        while self.ending.is_none() && self.session.staged() < max {
            let Some(queued) = self.queue.pop_front() else {
                break;
            };
            let ends_batch = matches!(
                &queued,
                Queued::Command(Command::Pending | Command::Fate(_) | Command::Close, _)
            );
            if ends_batch && self.session.has_batch() {
                self.queue.push_front(queued); // answered once the batch before it is durable
                break;
            }
            self.take(queued);
            if self.session.machine().is_disposed() {
                break; // nothing joins a batch after a dispose
            }
        }
        self.session.seal()
    }

    /// The batch [`poll_append`](AgentLoop::poll_append) sealed, handed out again until it is
    /// reported: a driver carries out the outputs that staging it produced (a refused command
    /// is told before the write), then writes it.
    pub fn sealed(&self) -> Option<Append<'_>> {
        self.session.sealed()
    }

    /// The batch sealed by [`poll_append`](AgentLoop::poll_append) is durable (`Ok`) or its
    /// append failed (`Err`) at `now`.
    ///
    /// # Errors
    ///
    /// [`BatchMismatch`] unless `batch` is the sealed batch; nothing changes then.
    pub fn appended(
        &mut self,
        batch: BatchNo,
        result: Result<(), LogFailure>,
        now: Duration,
    ) -> Result<(), BatchMismatch> {
        match result {
            Ok(()) => {
                // The releases and the waiters leave their buffers, which stay allocated for
                // the next batch: a persisted batch allocates nothing here.
                let mut released = std::mem::take(&mut self.released);
                released.extend(self.session.persisted(batch, now)?);
                let mut waiters = std::mem::take(&mut self.members);
                let mut members = waiters.drain(..);
                for release in released.drain(..) {
                    match release {
                        Release::Effect(effect) => self.effect(effect),
                        Release::Ack(_, ack) => {
                            if let Some(waiter) = members.next() {
                                self.acknowledge(waiter, ack);
                            }
                        }
                    }
                }
                drop(members);
                self.released = released;
                if self.members.is_empty() {
                    self.members = waiters;
                }
            }
            Err(failure) => self.fail(batch, failure, now)?,
        }
        Ok(())
    }

    /// When to call [`handle_timeout`](AgentLoop::handle_timeout) next.
    pub fn poll_timeout(&self) -> Option<Duration> {
        match self.ending {
            Some(_) => None,
            None => self.session.poll_timeout(),
        }
    }

    /// Time has reached `now`: the answers a failed batch held are staged again, or an aborted
    /// call that outlived the grace is answered `fail` ([`Output::Abandon`]). Then
    /// [`poll_append`](AgentLoop::poll_append).
    pub fn handle_timeout(&mut self, now: Duration) {
        if self.ending.is_some() {
            return;
        }
        match self.session.handle_timeout(now) {
            Some(Timeout::Retried { answers }) => {
                for (held, staged) in answers {
                    let at = self.held.iter().position(|(ticket, _)| *ticket == held);
                    let waiter = match at {
                        Some(at) => self.held.remove(at).1,
                        None => Waiter::Loop,
                    };
                    self.staged(staged, waiter);
                }
            }
            Some(Timeout::Abandoned { request, .. }) => {
                self.members.push(Waiter::Loop);
                // Once per call: a grace that fires again (its batch failed) has nothing to drop.
                if self.call.take().is_some() {
                    self.outputs.push_back(Output::Abandon(request));
                }
            }
            None => {}
        }
    }

    /// The driver has stopped what ran and released the log after [`Output::Ended`]: every
    /// caller still waiting is answered. Later commands are answered at once.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let ending = self.ending.get_or_insert(Ending::Closed);
        let ended = Failure::Ended(*ending);
        for waiter in self
            .members
            .drain(..)
            .chain(self.held.drain(..).map(|(_, w)| w))
        {
            if let Waiter::Caller(w) | Waiter::Job(w) | Waiter::JobEnd(w) = waiter {
                self.outputs.push_back(Output::Reply(w, Err(ended.clone())));
            }
        }
        for (w, reply) in self.after_end.drain(..) {
            self.outputs.push_back(Output::Reply(w, reply));
        }
        for queued in std::mem::take(&mut self.queue) {
            match queued {
                Queued::Command(command, w) => {
                    let reply = self.after_finish(&command);
                    self.outputs.push_back(Output::Reply(w, reply));
                }
                Queued::JobEnded(w) => {
                    self.outputs.push_back(Output::Reply(w, Err(ended.clone())));
                }
                Queued::Answer(..) => {}
            }
        }
    }

    /// Hands the machine back.
    pub fn into_machine(self) -> Machine {
        self.session.into_machine()
    }

    /// Stages one waiting command or answer.
    fn take(&mut self, queued: Queued<W>) {
        match queued {
            Queued::Command(Command::Input(input), w) => {
                let fed = self.session.feed(input);
                self.staged(fed, Waiter::Caller(w));
            }
            Queued::Command(Command::Record { turn, step, events }, w) => {
                let fed = self.session.record(turn, step, events);
                self.staged(fed, Waiter::Caller(w));
            }
            Queued::Command(Command::Maintenance, w) => {
                let begin = Input::Maintenance(MaintenanceInput::Begin);
                let fed = self.session.feed(begin);
                self.staged(fed, Waiter::Job(w));
            }
            Queued::Command(Command::Pending, w) => {
                let machine = self.session.machine();
                let reply = Reply::Pending {
                    next_turn: machine.pending(Target::NextTurn).cloned().collect(),
                    next_step: machine.pending(Target::NextStep).cloned().collect(),
                };
                self.outputs.push_back(Output::Reply(w, Ok(reply)));
            }
            Queued::Command(Command::Fate(id), w) => {
                let fate = self.session.machine().fate(&id);
                self.outputs
                    .push_back(Output::Reply(w, Ok(Reply::Fate(fate))));
            }
            Queued::Command(Command::Close, w) => {
                self.end(Ending::Closed);
                self.after_end.push((w, Ok(Reply::Closed(Ending::Closed))));
            }
            Queued::Answer(request, reply) => self.answer(request, reply),
            Queued::JobEnded(w) => {
                let end = Input::Maintenance(MaintenanceInput::End);
                let fed = self.session.feed(end);
                self.staged(fed, Waiter::JobEnd(w));
            }
        }
    }

    /// A host call's answer: staged if its request is the running call, else dropped.
    fn answer(&mut self, request: Outstanding, reply: HostReply) {
        let running = self.call.as_ref().map(Request::outstanding);
        if running != Some(request) {
            return; // a call the session abandoned, answering late
        }
        let Some(call) = self.call.take() else {
            return;
        };
        let fed = match reply {
            HostReply::Answer(answer) => self.session.answer(request, answer),
            HostReply::Nothing => self.session.returned_nothing(&call),
            HostReply::Failed(failure, detail) => {
                self.session.host_failed(request, failure, &detail)
            }
        };
        self.staged(fed, Waiter::Loop);
    }

    /// A staged member waits for its batch; a refused one changed nothing (S5) and is told now.
    fn staged(&mut self, fed: Result<Ticket, Refused>, waiter: Waiter<W>) {
        match fed {
            Ok(_) => self.members.push(waiter),
            Err(refused) => self.tell(waiter, Err(Failure::Refused(refused))),
        }
    }

    fn acknowledge(&mut self, waiter: Waiter<W>, ack: Ack) {
        let reply = match ack {
            Ack::Refused(refused) => Err(Failure::Refused(refused)),
            Ack::Input { found } => Ok(Reply::Delivered { found }),
            Ack::Recorded => Ok(Reply::Recorded),
        };
        match (waiter, reply) {
            (Waiter::Job(w), Ok(_)) => self.outputs.push_back(Output::StartJob(w)),
            (Waiter::JobEnd(w), Ok(_)) => {
                self.outputs.push_back(Output::Reply(w, Ok(Reply::JobDone)))
            }
            (waiter, reply) => self.tell(waiter, reply),
        }
    }

    fn tell(&mut self, waiter: Waiter<W>, reply: Result<Reply, Failure>) {
        if let Waiter::Caller(w) | Waiter::Job(w) | Waiter::JobEnd(w) = waiter {
            self.outputs.push_back(Output::Reply(w, reply));
        }
    }

    /// The stop policy: a failed append fails its members (a held answer's waiter waits for
    /// the retry) and the agent goes on; an indeterminate or fenced one ends the agent.
    fn fail(
        &mut self,
        batch: BatchNo,
        failure: LogFailure,
        now: Duration,
    ) -> Result<(), BatchMismatch> {
        let failed = self.session.failed(batch, now)?;
        let stop = failure.stops_the_agent();
        let why = match failure {
            LogFailure::Indeterminate => Failure::Indeterminate,
            LogFailure::Failed | LogFailure::Fenced => Failure::Persistence,
        };
        for (index, waiter) in std::mem::take(&mut self.members).into_iter().enumerate() {
            let held = failed.held.iter().find(|ticket| ticket.index == index);
            match (held, waiter) {
                (Some(ticket), waiter) if !stop => self.held.push((*ticket, waiter)),
                (_, Waiter::Caller(w) | Waiter::Job(w) | Waiter::JobEnd(w)) if stop => {
                    self.after_end.push((w, Err(why.clone())))
                }
                (_, waiter) => self.tell(waiter, Err(why.clone())),
            }
        }
        if stop {
            self.end(Ending::Stopped(failure));
        }
        Ok(())
    }

    fn effect(&mut self, effect: Effect) {
        match effect {
            Effect::Disposed => self.end(Ending::Disposed),
            Effect::Request(request) => {
                self.call = Some(request.clone());
                self.outputs
                    .push_back(Output::Effect(Effect::Request(request)));
            }
            effect => self.outputs.push_back(Output::Effect(effect)),
        }
    }

    fn end(&mut self, ending: Ending) {
        if self.ending.is_none() {
            self.ending = Some(ending);
            self.call = None;
        }
    }

    /// A command's answer once the agent has finished.
    fn after_finish(&self, command: &Command) -> Result<Reply, Failure> {
        let ending = self.ending.unwrap_or(Ending::Closed);
        match command {
            Command::Fate(id) => Ok(Reply::Fate(self.session.machine().fate(id))),
            Command::Close => Ok(Reply::Closed(ending)),
            _ => Err(Failure::Ended(ending)),
        }
    }
}

#[cfg(test)]
mod tests;
