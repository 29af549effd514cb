//! [`Session`]: the core's machine plus what every driver used to decide on its own. Inputs are
//! staged into a numbered batch ([`feed`](Session::feed), [`record`](Session::record)); the
//! driver appends the batch's entries ([`seal`](Session::seal)) and reports how that went:
//! [`persisted`](Session::persisted) releases every staged input's effects and
//! acknowledgement in input order, [`failed`](Session::failed) takes the whole batch back so
//! the machine is exactly as if none of it had been fed. Time is a number the driver passes:
//! the abort grace is [`poll_timeout`](Session::poll_timeout) and
//! [`handle_timeout`](Session::handle_timeout).

use std::time::Duration;

use coxswain_core::{Effect, Input, Machine, Outstanding};
use coxswain_log::{Entry, HostEvent};

use crate::admission::{admit, admit_events, Limits, Refused};
use crate::batch::{
    Ack, Append, BatchMismatch, BatchNo, Failed, Member, Released, Ticket, Timeout,
};
use crate::failure::HostFailure;
use crate::hooks::{default_answer, Hooks};

/// How a session behaves: the abort grace, the retry pause, the admission limits, the hooks the
/// host wrote and the batch size. [`Options::DEFAULT`] holds every driver's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// How long an aborted host call may take to answer before the session answers `fail`
    /// ([`HostFailure::Abandoned`]) on its behalf, so that the cancel ends the turn (S38, S39).
    pub abort_grace: Duration,
    /// The pause after a failed batch before the session stages anything on its own again:
    /// the answers it held ([`Timeout::Retried`]), an abandoned call's `fail` whose grace was
    /// put back. A failing log is not written to again at once; a batch persisted meanwhile
    /// ends the pause.
    pub retry_after: Duration,
    /// The size limits on what sends carry.
    pub limits: Limits,
    /// The optional hooks the host wrote: the session answers the others itself, inside the
    /// batch that requested them ([`Hooks`]).
    pub hooks: Hooks,
    /// The most commands an [`AgentLoop`](crate::AgentLoop) gathers into one batch (at least
    /// 1).
    pub max_batch: usize,
}

impl Options {
    /// Every driver's defaults: a 5-second abort grace, a 100-millisecond retry pause, the
    /// default [`Limits`], both hooks written ([`Hooks::ALL`]) and batches of up to 64
    /// commands.
    pub const DEFAULT: Options = Options {
        abort_grace: Duration::from_secs(5),
        retry_after: Duration::from_millis(100),
        limits: Limits::DEFAULT,
        hooks: Hooks::ALL,
        max_batch: 64,
    };
}

impl Default for Options {
    fn default() -> Self {
        Options::DEFAULT
    }
}

/// The batch being staged, or being persisted once sealed.
#[derive(Clone, Debug, Default)]
struct Staging {
    entries: Vec<Entry>,
    effects: Vec<Effect>,
    members: Vec<Member>,
    /// The answers staged, with their members' places and the request each answers (`None`:
    /// a maintenance job's end): what a failed batch holds for its retry.
    answers: Vec<(usize, Option<Outstanding>, Input)>,
    sealed: bool,
    /// The abort grace as it was when the batch opened: a failed batch puts it back (the
    /// abandoned answer it may hold is taken back too, so the grace must fire again).
    grace_before: Option<Grace>,
}

/// An answer a failed batch held, waiting for its retry: its member's ticket, the request it
/// answers (`None`: a maintenance job's end) and the answer.
#[derive(Clone, Debug, PartialEq)]
struct Held {
    ticket: Ticket,
    request: Option<Outstanding>,
    answer: Input,
}

/// The abort grace running for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Grace {
    request: Outstanding,
    deadline: Duration,
}

/// The session layer over one [`Machine`]: group commit with rollback, the abort deadline, one
/// host-failure vocabulary and admission. Sans-IO: the driver moves the bytes and the time.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use coxswain_core::{Input, Machine, Message};
/// use coxswain_session::{Ack, Options, Release, Session};
///
/// let mut session = Session::new(Machine::new(), Options::default());
/// let now = Duration::ZERO;
/// let first = session.feed(Input::Followup(Message::user("m1", "hi").into()))?;
/// let second = session.feed(Input::Inject(Message::user("m2", "ctx").into()))?;
/// let Some(append) = session.seal() else { unreachable!() };
/// let batch = append.batch;
/// // m1: its splice, turn/start and the claim's splice; m2: its splice into NS.
/// assert_eq!(append.entries.len(), 4);
/// // The write failed: both inputs fail, and the machine is as before them.
/// let failed = session.failed(batch, now)?;
/// assert_eq!(failed.members, [first, second]);
/// assert!(failed.held.is_empty()); // no host answer was staged
/// assert_eq!(session.machine(), &Machine::new());
///
/// // Staged again, and this time the write succeeds: effects, then acks, in input order.
/// let first = session.feed(Input::Followup(Message::user("m1", "hi").into()))?;
/// let Some(append) = session.seal() else { unreachable!() };
/// let batch = append.batch;
/// let released = session.persisted(batch, now)?;
/// assert_eq!(released.last(), Some(Release::Ack(first, Ack::Input { found: true })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Session {
    machine: Machine,
    options: Options,
    staging: Staging,
    /// The number the batch being staged has (or will have once its first member joins).
    batch: BatchNo,
    grace: Option<Grace>,
    /// The answers failed batches held, staged again at `retry_at`.
    held: Vec<Held>,
    retry_at: Option<Duration>,
}

impl Session {
    /// A session over `machine` (fresh, or a resumed one: [`ResumePlan`](crate::ResumePlan)).
    pub fn new(machine: Machine, options: Options) -> Self {
        Session {
            machine,
            options,
            staging: Staging::default(),
            batch: BatchNo(1),
            grace: None,
            held: Vec::new(),
            retry_at: None,
        }
    }

    /// The machine, for queries. While a batch is staged it shows the staged inputs applied.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The options the session was made with.
    pub fn options(&self) -> Options {
        self.options
    }

    /// Whether members are staged or a batch is being persisted.
    pub fn has_batch(&self) -> bool {
        !self.staging.members.is_empty()
    }

    /// How many members the open batch holds.
    pub fn staged(&self) -> usize {
        self.staging.members.len()
    }

    /// Whether the batch is sealed: being persisted, taking no member.
    pub fn is_sealed(&self) -> bool {
        self.staging.sealed
    }

    /// Stages an input into the open batch: admitted (sizes and depth), then applied by the
    /// core. Its effects wait for the batch to be persisted.
    ///
    /// # Errors
    ///
    /// [`Refused::Sealed`] while a batch is being persisted; an admission refusal; the core's
    /// [`Refused::Rejected`]. A refused input changed nothing (S5).
    pub fn feed(&mut self, input: Input) -> Result<Ticket, Refused> {
        // An answer is kept: should its batch fail, the call (or the job) that gave it will not
        // answer again, so [`failed`](Session::failed) holds it for the retry.
        let again = match input {
            Input::PreStep(_) | Input::Step(_) | Input::TurnStopping(_) => {
                Some((self.machine.outstanding(), input.clone()))
            }
            Input::Maintenance(coxswain_core::MaintenanceInput::End) => Some((None, input.clone())),
            _ => None,
        };
        self.stage(input, again)
    }

    fn stage(
        &mut self,
        input: Input,
        again: Option<(Option<Outstanding>, Input)>,
    ) -> Result<Ticket, Refused> {
        self.check_open()?;
        admit(&input, self.options.limits)?;
        self.open_batch()?;
        // Only a remove or a replace can find its id not pending (S15): no transition then.
        let applied = match input {
            Input::Remove(id) => self.machine.remove(&id),
            Input::Replace { id, message } => self.machine.replace(&id, message),
            input => self.machine.handle(input).map(Some),
        };
        let transition = match applied {
            Ok(transition) => transition,
            Err(rejected) => {
                let ticket = self.refuse(rejected.into())?;
                // Refused against staged members, an answer stands only if they do: should the
                // batch fail, it is held like any other (its call will not answer twice).
                self.staging
                    .answers
                    .extend(again.map(|(request, input)| (ticket.index, request, input)));
                return Ok(ticket);
            }
        };
        let found = transition.is_some();
        if let Some(transition) = transition {
            let from = self.staging.effects.len();
            // The events move into the staged records (no clone), the effects are staged.
            let effects = transition.persist_into(&mut Records(&mut self.staging.entries));
            self.staging.effects.extend(effects);
            self.answer_unwritten_hooks(from);
        }
        let ticket = self.join(Ack::Input { found });
        self.staging
            .answers
            .extend(again.map(|(request, input)| (ticket.index, request, input)));
        Ok(ticket)
    }

    /// Answers, inside the member being staged, every request among its effects from `from` on
    /// whose hook the host did not write ([`Hooks`]): the request is not released (no host
    /// call), and the answer's records and effects join the member. Answers chain (a turn's end
    /// may open the next turn and request its pre-step) until a request the host answers.
    fn answer_unwritten_hooks(&mut self, mut from: usize) {
        let hooks = self.options.hooks;
        while let Some(at) = self.staging.effects[from..]
            .iter()
            .position(|effect| matches!(effect, Effect::Request(request) if !hooks.writes(request.outstanding())))
        {
            let at = from + at;
            let Effect::Request(request) = self.staging.effects.remove(at) else {
                return;
            };
            let Some(answer) = hooks.answer_unwritten(&request) else {
                return;
            };
            // The answer to the request the machine just made cannot be refused; were it, the
            // request would stay outstanding and the host is asked after all.
            match self.machine.handle(answer) {
                Ok(transition) => {
                    self.staging
                        .entries
                        .extend(transition.events().iter().cloned().map(Entry::Machine));
                    self.staging.effects.splice(at..at, transition.persisted());
                    from = at;
                }
                Err(_) => {
                    self.staging.effects.insert(at, Effect::Request(request));
                    return;
                }
            }
        }
    }

    /// Stages host events of the running step `step` of turn `turn` (model output, tool calls):
    /// they are written inside their step, in order with the inputs around them.
    ///
    /// # Errors
    ///
    /// [`Refused::Sealed`] while a batch is being persisted; [`Refused::StepClosed`] unless
    /// that step is the outstanding request (with members staged, as the member
    /// [`Ack::Refused`]); [`Refused::TooDeep`] for data a record cannot hold.
    pub fn record(
        &mut self,
        turn: u64,
        step: u64,
        events: Vec<HostEvent>,
    ) -> Result<Ticket, Refused> {
        self.check_open()?;
        match admit_events(self.machine.outstanding(), turn, step, &events) {
            Err(closed @ Refused::StepClosed { .. }) => return self.refuse(closed),
            admitted => admitted?,
        }
        self.open_batch()?;
        self.staging
            .entries
            .extend(events.into_iter().map(Entry::Host));
        Ok(self.join(Ack::Recorded))
    }

    /// Stages the host's answer to `request`. An answer the session cannot admit (a message in
    /// an entered batch nests deeper than a record holds) is no answer: the session answers
    /// `fail` with [`HostFailure::InvalidAnswer`] for it instead (S38), so the turn goes on to
    /// its end.
    ///
    /// # Errors
    ///
    /// [`Refused::Stale`] when `request` is not the outstanding request (a late answer of an
    /// abandoned call: S4); otherwise as [`feed`](Session::feed).
    pub fn answer(&mut self, request: Outstanding, answer: Input) -> Result<Ticket, Refused> {
        self.check_outstanding(request)?;
        let invalid = match self.feed(answer) {
            Err(refused @ Refused::Sealed) => return Err(refused),
            Err(refused) => refused,
            Ok(ticket) => match self.staging.members.last() {
                // Refused against staged members: not a member, but an invalid answer.
                Some(Member {
                    ack: Ack::Refused(_),
                    ..
                }) => {
                    let Some(Member {
                        ack: Ack::Refused(refused),
                        ..
                    }) = self.staging.members.pop()
                    else {
                        return Ok(ticket);
                    };
                    self.staging
                        .answers
                        .retain(|(index, ..)| *index != ticket.index);
                    refused
                }
                _ => return Ok(ticket),
            },
        };
        self.host_failed(request, HostFailure::InvalidAnswer, &invalid.to_string())
    }

    /// The host's call for `request` returned nothing (Python's `None`, JavaScript's
    /// `undefined`): a hook answers what the missing hook answers ([`Hooks`]); a `step` gave
    /// no answer, and the session answers `fail` ([`HostFailure::InvalidAnswer`]) for it.
    ///
    /// # Errors
    ///
    /// As [`answer`](Session::answer).
    pub fn returned_nothing(
        &mut self,
        request: &coxswain_core::Request,
    ) -> Result<Ticket, Refused> {
        let outstanding = request.outstanding();
        match default_answer(request) {
            Some(answer) => self.answer(outstanding, answer),
            None => self.host_failed(
                outstanding,
                HostFailure::InvalidAnswer,
                "it returned nothing",
            ),
        }
    }

    /// Answers `request` `fail` with `failure`'s code on the host's behalf: the one way a
    /// driver reports a host call that panicked, raised, was cancelled or answered nonsense.
    ///
    /// # Errors
    ///
    /// [`Refused::Stale`] when `request` is not the outstanding request; otherwise as
    /// [`feed`](Session::feed).
    pub fn host_failed(
        &mut self,
        request: Outstanding,
        failure: HostFailure,
        detail: &str,
    ) -> Result<Ticket, Refused> {
        self.check_outstanding(request)?;
        self.feed(failure.answer(request, detail))
    }

    fn check_outstanding(&self, request: Outstanding) -> Result<(), Refused> {
        match self.machine.outstanding() {
            Some(outstanding) if outstanding == request => Ok(()),
            _ => Err(Refused::Stale { request }),
        }
    }

    /// Seals the staged batch for its write: no member joins it until it is persisted or
    /// failed. `None` with nothing staged. Sealing a sealed batch hands it out again.
    pub fn seal(&mut self) -> Option<Append<'_>> {
        if self.staging.members.is_empty() {
            return None;
        }
        self.staging.sealed = true;
        Some(Append {
            batch: self.batch,
            entries: &self.staging.entries,
        })
    }

    /// The batch being persisted, handed out again (`None` unless one is sealed): a driver that
    /// did something else between [`seal`](Session::seal) and its write.
    pub fn sealed(&self) -> Option<Append<'_>> {
        self.staging.sealed.then_some(Append {
            batch: self.batch,
            entries: &self.staging.entries,
        })
    }

    /// The sealed batch is durable: releases every member's effects, then its acknowledgement,
    /// in input order. An abort among them starts the abort grace at `now`. It ends a retry
    /// pause: the answers a failed batch held are due at once ([`poll_timeout`] is `now`).
    ///
    /// [`poll_timeout`]: Session::poll_timeout
    ///
    /// # Errors
    ///
    /// [`BatchMismatch`] unless `batch` is the sealed batch; nothing changes then.
    pub fn persisted(
        &mut self,
        batch: BatchNo,
        now: Duration,
    ) -> Result<Released<'_>, BatchMismatch> {
        self.check_sealed(batch)?;
        // A batch is open in the machine whenever members are staged.
        let _ = self.machine.commit_batch();
        let aborted = self
            .staging
            .effects
            .iter()
            .any(|effect| matches!(effect, Effect::Abort(_)));
        let staging = &mut self.staging;
        staging.entries.clear();
        staging.answers.clear();
        staging.sealed = false;
        staging.grace_before = None;
        self.batch = BatchNo(batch.0 + 1);
        if aborted {
            self.start_grace(now);
        }
        // The log took a write again: the pause after a failed batch is over, and the answers
        // it held back are due at once.
        if self.retry_at.is_some() {
            self.retry_at = Some(now);
        }
        // A grace whose request this batch answered is over: no deadline is left to poll.
        if self
            .grace
            .is_some_and(|grace| self.machine.outstanding() != Some(grace.request))
        {
            self.grace = None;
        }
        // The effects and members leave the buffers as they are released; the buffers stay
        // for the next batch.
        let staging = &mut self.staging;
        Ok(Released::new(
            batch,
            staging.effects.drain(..),
            staging.members.drain(..),
        ))
    }

    /// The sealed batch could not be made durable at `now`: every member is taken back, the
    /// machine is exactly as before the batch (S5 extended to a failed persistence), and the
    /// held effects are dropped. Answer each of [`Failed::members`] with the failure; the
    /// answers of [`Failed::held`] are staged again once
    /// [`retry_after`](Options::retry_after) has passed ([`Timeout::Retried`]).
    ///
    /// # Errors
    ///
    /// [`BatchMismatch`] unless `batch` is the sealed batch; nothing changes then.
    pub fn failed(&mut self, batch: BatchNo, now: Duration) -> Result<Failed, BatchMismatch> {
        self.check_sealed(batch)?;
        let _ = self.machine.roll_back_batch();
        let staging = &mut self.staging;
        let mut members: Vec<Ticket> = (0..staging.members.len())
            .map(|index| Ticket { batch, index })
            .collect();
        staging.members.clear();
        staging.entries.clear();
        staging.effects.clear();
        staging.sealed = false;
        let mut held = Vec::with_capacity(staging.answers.len());
        for (index, request, answer) in staging.answers.drain(..) {
            let ticket = Ticket { batch, index };
            members.retain(|member| *member != ticket);
            held.push(ticket);
            self.held.push(Held {
                ticket,
                request,
                answer,
            });
        }
        // Nothing the session stages on its own (a held answer, an abandoned call's `fail`
        // whose grace was put back) is staged before the pause is over: any failed batch
        // restarts it while answers are held, and a grace put back waits it out.
        let pause_end = now.saturating_add(self.options.retry_after);
        self.grace = staging.grace_before.take().map(|grace| Grace {
            deadline: grace.deadline.max(pause_end),
            ..grace
        });
        if !self.held.is_empty() {
            self.retry_at = Some(pause_end);
        }
        self.batch = BatchNo(batch.0 + 1);
        Ok(Failed { members, held })
    }

    /// When the driver must call [`handle_timeout`](Session::handle_timeout) next: the end of
    /// the retry pause after a failed batch (an abort grace waits behind it: the held answer
    /// may be the aborted call's, and a failing log is not written to again at once), else
    /// the abort grace's deadline, if one runs and its request is still unanswered. `None`
    /// while a batch is being persisted: [`persisted`](Session::persisted) or
    /// [`failed`](Session::failed) comes first.
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.staging.sealed {
            return None; // `persisted` or `failed` comes first, and settles the deadlines
        }
        let outstanding = self.machine.outstanding();
        // A grace whose request a staged member answered has nothing to time (should that
        // batch fail, the grace is back).
        let grace = self
            .grace
            .filter(|grace| outstanding == Some(grace.request));
        self.retry_at.or(grace.map(|grace| grace.deadline))
    }

    /// The abort grace's deadline, if one runs: its request is answered `fail` on the host's
    /// behalf at this time. [`poll_timeout`](Session::poll_timeout) may be earlier (a retry
    /// pause the grace waits behind).
    pub fn abort_deadline(&self) -> Option<Duration> {
        self.grace.map(|grace| grace.deadline)
    }

    /// Time has reached `now`. Once the retry pause is over, stages the held answers again
    /// ([`Timeout::Retried`]); else (and with nothing held, at once), once the abort grace has run out and the aborted request
    /// is still outstanding, stages its `fail` answer ([`HostFailure::Abandoned`]). One of
    /// them per call: call again while [`poll_timeout`](Session::poll_timeout) is not after
    /// `now`. While a batch is being persisted it waits for the next call.
    pub fn handle_timeout(&mut self, now: Duration) -> Option<Timeout> {
        if self.staging.sealed {
            return None;
        }
        if let Some(at) = self.retry_at {
            if now < at {
                return None;
            }
            self.retry_at = None;
            let answers = std::mem::take(&mut self.held)
                .into_iter()
                .map(|held| {
                    let staged = match held.request {
                        Some(request) => self.answer(request, held.answer),
                        None => self.feed(held.answer),
                    };
                    (held.ticket, staged)
                })
                .collect();
            return Some(Timeout::Retried { answers });
        }
        let grace = self.grace?;
        if now < grace.deadline {
            return None;
        }
        if self.machine.outstanding() != Some(grace.request) {
            // Answered meanwhile. A staged answer may yet fail: its batch's end settles it.
            if !self.has_batch() {
                self.grace = None;
            }
            return None;
        }
        // Fed while the grace still runs, so a batch opened by this answer remembers it.
        // Not held by a failed batch: the grace is put back, and fires again.
        let fed = self.stage(HostFailure::Abandoned.answer(grace.request, ""), None);
        self.grace = None;
        Some(Timeout::Abandoned {
            request: grace.request,
            ticket: fed.ok()?,
        })
    }

    /// Hands the machine back (a driver closing down).
    pub fn into_machine(self) -> Machine {
        self.machine
    }

    fn check_open(&self) -> Result<(), Refused> {
        if self.staging.sealed {
            Err(Refused::Sealed)
        } else {
            Ok(())
        }
    }

    fn check_sealed(&self, batch: BatchNo) -> Result<(), BatchMismatch> {
        if !self.staging.sealed {
            return Err(BatchMismatch::NotSealed);
        }
        if batch != self.batch {
            return Err(BatchMismatch::Other {
                expected: self.batch,
                given: batch,
            });
        }
        Ok(())
    }

    /// Opens the machine's batch for the first member.
    fn open_batch(&mut self) -> Result<(), Refused> {
        if self.staging.members.is_empty() && !self.machine.is_batch_open() {
            self.machine
                .begin_batch()
                .map_err(|_| Refused::Rejected(coxswain_core::Rejected::Undrained))?;
            self.staging.grace_before = self.grace;
        }
        Ok(())
    }

    /// A refusal against the durable state is the caller's at once (a first member leaves no
    /// batch open); one against a state holding staged members joins the batch as
    /// [`Ack::Refused`], since it stands only once they are durable.
    fn refuse(&mut self, refused: Refused) -> Result<Ticket, Refused> {
        if self.staging.members.is_empty() {
            let _ = self.machine.commit_batch();
            return Err(refused);
        }
        Ok(self.join(Ack::Refused(refused)))
    }

    fn join(&mut self, ack: Ack) -> Ticket {
        let index = self.staging.members.len();
        self.staging.members.push(Member {
            ack,
            effects_end: self.staging.effects.len(),
        });
        Ticket {
            batch: self.batch,
            index,
        }
    }

    /// An abort was released: the outstanding request has `abort_grace` to answer.
    fn start_grace(&mut self, now: Duration) {
        self.grace = self.machine.outstanding().map(|request| Grace {
            request,
            deadline: now.saturating_add(self.options.abort_grace),
        });
    }
}

/// The staged records, as the machine's transitions persist into them
/// ([`Transition::persist_into`](coxswain_core::Transition::persist_into)).
struct Records<'a>(&'a mut Vec<Entry>);

impl Extend<coxswain_core::Event> for Records<'_> {
    fn extend<I: IntoIterator<Item = coxswain_core::Event>>(&mut self, events: I) {
        self.0.extend(events.into_iter().map(Entry::Machine));
    }
}

#[cfg(test)]
mod tests;
