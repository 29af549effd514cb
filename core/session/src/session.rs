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
use crate::failure::HostFailure;

/// How a session behaves: the abort grace and the admission limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// How long an aborted host call may take to answer before the session answers `fail`
    /// ([`HostFailure::Abandoned`]) on its behalf, so that the cancel ends the turn (S38, S39).
    pub abort_grace: Duration,
    /// The size limits on what sends carry.
    pub limits: Limits,
}

impl Options {
    /// A 5-second abort grace and the default [`Limits`].
    pub const DEFAULT: Options = Options {
        abort_grace: Duration::from_secs(5),
        limits: Limits::DEFAULT,
    };
}

impl Default for Options {
    fn default() -> Self {
        Options::DEFAULT
    }
}

/// The number of a batch, counting from 1 over the session's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchNo(pub u64);

/// A staged input or host-event group: its batch and its place in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    /// The batch it joined.
    pub batch: BatchNo,
    /// Its place in the batch, from 0, in the order it was staged.
    pub index: usize,
}

/// What one staged member turned into once its batch was persisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ack {
    /// An input; `found` is [`Transition::found`](coxswain_core::Transition::found) (`false`
    /// only for a `remove` or `replace` of an id that was not pending).
    Input {
        /// Whether the edit found its id.
        found: bool,
    },
    /// Host events, now durable inside their step.
    Recorded,
    /// Refused, changing nothing (S5), against a state that held the batch's earlier members:
    /// the refusal stands only once they are durable (if the batch fails, so does this member,
    /// and it may be sent again).
    Refused(Refused),
}

/// What a persisted batch releases, in input order: each member's effects, then its
/// acknowledgement.
#[derive(Clone, Debug, PartialEq)]
pub enum Release {
    /// Carry this effect out.
    Effect(Effect),
    /// The member is durable: answer its caller.
    Ack(Ticket, Ack),
}

/// The entries of a sealed batch: append them as one write, then call
/// [`persisted`](Session::persisted) or [`failed`](Session::failed) with its number.
#[derive(Debug)]
pub struct Append<'s> {
    /// The batch.
    pub batch: BatchNo,
    /// Its records, in order (empty when its inputs emitted no event: nothing to write).
    pub entries: &'s [Entry],
}

/// A batch call that does not fit the session's state. It changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchMismatch {
    /// No batch is sealed (nothing is being persisted).
    #[error("no batch is being persisted")]
    NotSealed,
    /// Another batch is being persisted.
    #[error("batch {expected:?} is being persisted, not {given:?}")]
    Other {
        /// The sealed batch.
        expected: BatchNo,
        /// The batch the call named.
        given: BatchNo,
    },
}

/// What a failed batch hands back ([`Session::failed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failed {
    /// Every member, in order: answer each with the persistence failure.
    pub members: Vec<Ticket>,
    /// The answers the batch held, each with its member's ticket, in order: the host's answers
    /// and the end of a maintenance job. After the rollback their requests are outstanding
    /// again (the job is running again) and the calls that gave them will not answer twice:
    /// feed them again. (An answer the session gave on an abandoned call's behalf is not among
    /// them: its grace fires again instead.)
    pub answers: Vec<(Ticket, Input)>,
}

/// What [`handle_timeout`](Session::handle_timeout) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timeout {
    /// The aborted call did not answer within the grace: the session staged its `fail` answer
    /// ([`HostFailure::Abandoned`]) as `ticket`. Drop the host's call; a late answer is rejected.
    Abandoned {
        /// The request given up on.
        request: Outstanding,
        /// The staged answer.
        ticket: Ticket,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Member {
    ack: Ack,
    /// One past this member's last effect in `effects`.
    effects_end: usize,
}

/// The batch being staged, or being persisted once sealed.
#[derive(Clone, Debug, Default)]
struct Staging {
    entries: Vec<Entry>,
    effects: Vec<Effect>,
    members: Vec<Member>,
    /// The answers staged, with their members' places (what a failed batch hands back).
    answers: Vec<(usize, Input)>,
    sealed: bool,
    /// The abort grace as it was when the batch opened: a failed batch puts it back (the
    /// abandoned answer it may hold is taken back too, so the grace must fire again).
    grace_before: Option<Grace>,
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
/// let failed = session.failed(batch)?;
/// assert_eq!(failed.members, [first, second]);
/// assert!(failed.answers.is_empty()); // no host answer was staged
/// assert_eq!(session.machine(), &Machine::new());
///
/// // Staged again, and this time the write succeeds: effects, then acks, in input order.
/// let first = session.feed(Input::Followup(Message::user("m1", "hi").into()))?;
/// let Some(append) = session.seal() else { unreachable!() };
/// let batch = append.batch;
/// let released = session.persisted(batch, now)?;
/// assert_eq!(released.last(), Some(&Release::Ack(first, Ack::Input { found: true })));
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
        // answer again, so [`failed`](Session::failed) hands it back to be fed again.
        let again = matches!(
            input,
            Input::PreStep(_)
                | Input::Step(_)
                | Input::TurnStopping(_)
                | Input::Maintenance(coxswain_core::MaintenanceInput::End)
        )
        .then(|| input.clone());
        self.stage(input, again)
    }

    fn stage(&mut self, input: Input, again: Option<Input>) -> Result<Ticket, Refused> {
        self.check_open()?;
        admit(&input, self.options.limits)?;
        self.open_batch()?;
        let transition = match self.machine.handle(input) {
            Ok(transition) => transition,
            Err(rejected) => return self.refuse(rejected.into()),
        };
        let found = transition.found();
        self.staging
            .entries
            .extend(transition.events().iter().cloned().map(Entry::Machine));
        self.staging.effects.extend(transition.persisted());
        let ticket = self.join(Ack::Input { found });
        self.staging
            .answers
            .extend(again.map(|input| (ticket.index, input)));
        Ok(ticket)
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
        match self.feed(answer) {
            Err(Refused::TooDeep(deep)) => {
                self.host_failed(request, HostFailure::InvalidAnswer, &deep.to_string())
            }
            fed => fed,
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

    /// The sealed batch is durable: releases every member's effects, then its acknowledgement,
    /// in input order. An abort among them starts the abort grace at `now`.
    ///
    /// # Errors
    ///
    /// [`BatchMismatch`] unless `batch` is the sealed batch; nothing changes then.
    pub fn persisted(
        &mut self,
        batch: BatchNo,
        now: Duration,
    ) -> Result<Vec<Release>, BatchMismatch> {
        self.check_sealed(batch)?;
        // A batch is open in the machine whenever members are staged.
        let _ = self.machine.commit_batch();
        let staging = &mut self.staging;
        let mut released = Vec::with_capacity(staging.effects.len() + staging.members.len());
        let mut aborted = false;
        let mut effects = staging.effects.drain(..);
        let mut start = 0;
        for (index, member) in staging.members.drain(..).enumerate() {
            for effect in effects.by_ref().take(member.effects_end - start) {
                aborted |= matches!(effect, Effect::Abort(_));
                released.push(Release::Effect(effect));
            }
            start = member.effects_end;
            released.push(Release::Ack(Ticket { batch, index }, member.ack));
        }
        drop(effects);
        // The buffers stay for the next batch.
        staging.members.clear();
        staging.entries.clear();
        staging.answers.clear();
        staging.sealed = false;
        self.batch = BatchNo(batch.0 + 1);
        if aborted {
            self.start_grace(now);
        }
        // A grace whose request this batch answered is over: no deadline is left to poll.
        if self
            .grace
            .is_some_and(|grace| self.machine.outstanding() != Some(grace.request))
        {
            self.grace = None;
        }
        Ok(released)
    }

    /// The sealed batch could not be made durable: every member is taken back, the machine is
    /// exactly as before the batch (S5 extended to a failed persistence), and the held effects
    /// are dropped. Answer each of [`Failed::members`] with the failure, and feed
    /// [`Failed::answers`] again.
    ///
    /// # Errors
    ///
    /// [`BatchMismatch`] unless `batch` is the sealed batch; nothing changes then.
    pub fn failed(&mut self, batch: BatchNo) -> Result<Failed, BatchMismatch> {
        self.check_sealed(batch)?;
        let _ = self.machine.roll_back_batch();
        let staging = &mut self.staging;
        let members = staging.members.len();
        staging.members.clear();
        staging.entries.clear();
        staging.effects.clear();
        staging.sealed = false;
        let answers = staging
            .answers
            .drain(..)
            .map(|(index, input)| (Ticket { batch, index }, input))
            .collect();
        self.grace = staging.grace_before;
        self.batch = BatchNo(batch.0 + 1);
        Ok(Failed {
            members: (0..members).map(|index| Ticket { batch, index }).collect(),
            answers,
        })
    }

    /// When the driver must call [`handle_timeout`](Session::handle_timeout) next: the abort
    /// grace's deadline, if one runs.
    pub fn poll_timeout(&self) -> Option<Duration> {
        self.grace.map(|grace| grace.deadline)
    }

    /// Time has reached `now`. Once the abort grace has run out and the aborted request is
    /// still outstanding, stages its `fail` answer ([`HostFailure::Abandoned`]); while a batch
    /// is being persisted it waits for the next call.
    pub fn handle_timeout(&mut self, now: Duration) -> Option<Timeout> {
        let grace = self.grace?;
        if now < grace.deadline || self.staging.sealed {
            return None;
        }
        if self.machine.outstanding() != Some(grace.request) {
            self.grace = None;
            return None; // answered meanwhile
        }
        // Fed while the grace still runs, so a batch opened by this answer remembers it.
        // Not handed back by a failed batch: the grace is, and fires again.
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

#[cfg(test)]
mod tests {
    use super::*;
    use coxswain_core::{
        CancelCause, Event, Message, Notification, PreStepAnswer, Rejected, Request, TurnEndReason,
    };
    use serde_json::json;

    fn followup(id: &str) -> Input {
        Input::Followup(Message::user(id, "hi").into())
    }

    fn inject(id: &str) -> Input {
        Input::Inject(Message::user(id, "ctx").into())
    }

    fn cancel() -> Input {
        Input::Cancel {
            cause: CancelCause::User,
            keep_inbox: false,
        }
    }

    /// S38: an entered batch too deep for a record is answered `fail` (`host-invalid-answer`).
    #[test]
    fn an_answer_too_deep_for_the_log_fails_the_step_instead() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(followup("m1")).unwrap();
        sealed_events(&mut session);
        session.persisted(BatchNo(1), Duration::ZERO).unwrap();
        let mut deep = json!(1);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        let batch = [Message::user("m1", deep)].into_iter().collect();
        let request = Outstanding::PreStep { turn: 1, step: 1 };
        let answer = Input::PreStep(PreStepAnswer::Enter(batch));
        session.answer(request, answer).unwrap();
        let codes: Vec<String> = sealed_events(&mut session)
            .into_iter()
            .filter_map(|event| match event {
                Event::TurnEnd {
                    reason: TurnEndReason::Error { error },
                    ..
                } => Some(error.code.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(codes, ["host-invalid-answer"]);
    }

    /// S4: the late answer of a call the session gave up on is not taken for the next one's.
    #[test]
    fn a_stale_answer_is_refused_and_changes_nothing() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(followup("m1")).unwrap();
        persist(&mut session, Duration::ZERO);
        let stale = Outstanding::PreStep { turn: 7, step: 1 };
        let before = session.machine().clone();
        assert_eq!(
            session.answer(stale, Input::PreStep(PreStepAnswer::Reject)),
            Err(Refused::Stale { request: stale })
        );
        assert_eq!(
            session.host_failed(stale, HostFailure::Panicked, ""),
            Err(Refused::Stale { request: stale })
        );
        assert_eq!(session.machine(), &before);
        assert!(!session.has_batch());
    }

    /// A refusal judged against staged members stands only once they are durable.
    #[test]
    fn a_refusal_against_staged_members_waits_for_their_batch() {
        let mut session = Session::new(Machine::new(), Options::default());
        let first = session.feed(inject("c")).unwrap();
        // `c` is pending only in the staged batch: the retry's refusal joins it.
        let second = session.feed(inject("c")).unwrap();
        let refused = Refused::Rejected(Rejected::AlreadyPending("c".into()));
        let batch = session.seal().map(|append| append.batch).unwrap();
        let failed = session.failed(batch).unwrap();
        assert_eq!(failed.members, [first, second]);
        // Fed again after the failure, the first is accepted and the second refused at once.
        let first = session.feed(inject("c")).unwrap();
        let batch = session.seal().map(|append| append.batch).unwrap();
        session.persisted(batch, Duration::ZERO).unwrap();
        assert_eq!(session.feed(inject("c")), Err(refused.clone()));
        // Staged behind another member, the refusal is released in its place.
        let other = session.feed(inject("d")).unwrap();
        let again = session.feed(inject("c")).unwrap();
        let batch = session.seal().map(|append| append.batch).unwrap();
        let acks: Vec<Release> = session
            .persisted(batch, Duration::ZERO)
            .unwrap()
            .into_iter()
            .filter(|release| matches!(release, Release::Ack(..)))
            .collect();
        assert_eq!(
            acks,
            [
                Release::Ack(other, Ack::Input { found: true }),
                Release::Ack(again, Ack::Refused(refused)),
            ]
        );
        assert_eq!(
            first,
            Ticket {
                batch: BatchNo(2),
                index: 0
            }
        );
    }

    /// Seals the staged batch and returns the machine's events in it.
    fn sealed_events(session: &mut Session) -> Vec<Event> {
        session
            .seal()
            .map(|append| {
                append
                    .entries
                    .iter()
                    .filter_map(|entry| match entry {
                        Entry::Machine(event) => Some(event.clone()),
                        Entry::Host(_) => None,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Seals and persists the staged batch at `now`.
    fn persist(session: &mut Session, now: Duration) -> Vec<Release> {
        let Some(append) = session.seal() else {
            return Vec::new();
        };
        let batch = append.batch;
        session.persisted(batch, now).unwrap()
    }

    /// What a release list says, one word per release: `ack`, or the effect's kind.
    fn shape(released: &[Release]) -> Vec<String> {
        released
            .iter()
            .map(|release| match release {
                Release::Ack(ticket, _) => format!("ack{}", ticket.index),
                Release::Effect(Effect::Notify(Notification::Inserted { message })) => {
                    format!("inserted:{}", message.id())
                }
                Release::Effect(Effect::Notify(Notification::Claimed { .. })) => "claimed".into(),
                Release::Effect(Effect::Notify(Notification::Status { .. })) => "status".into(),
                Release::Effect(Effect::Begin(_)) => "begin".into(),
                Release::Effect(Effect::Request(Request::PreStep { .. })) => "preStep".into(),
                Release::Effect(Effect::Abort(_)) => "abort".into(),
                Release::Effect(other) => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_persisted_batch_releases_each_members_effects_then_its_ack_in_input_order() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(followup("m1")).unwrap();
        session.feed(inject("m2")).unwrap();
        let released = persist(&mut session, Duration::ZERO);
        assert_eq!(
            shape(&released),
            [
                "inserted:m1",
                "status",
                "begin",
                "claimed",
                "preStep",
                "ack0",
                "inserted:m2",
                "ack1"
            ]
        );
        assert!(!session.has_batch() && !session.machine().is_batch_open());
        // The next batch has the next number.
        let ticket = session.feed(inject("m3")).unwrap();
        assert_eq!(
            ticket,
            Ticket {
                batch: BatchNo(2),
                index: 0
            }
        );
    }

    #[test]
    fn s5_a_failed_batch_takes_every_member_back() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(inject("c")).unwrap();
        persist(&mut session, Duration::ZERO);
        let before = session.machine().clone();
        let first = session.feed(followup("m1")).unwrap();
        let second = session.feed(inject("m2")).unwrap();
        assert_eq!(session.machine().last_turn(), 1);
        let batch = session.seal().map(|append| append.batch).unwrap();
        let failed = session.failed(batch).unwrap();
        assert_eq!(failed.members, [first, second]);
        assert!(failed.answers.is_empty());
        assert_eq!(session.machine(), &before);
        assert!(!session.machine().is_batch_open());
        // The same inputs are accepted again (the ids are not pending or held), in batch 3.
        assert_eq!(
            session.feed(followup("m1")),
            Ok(Ticket {
                batch: BatchNo(3),
                index: 0
            })
        );
    }

    #[test]
    fn a_sealed_batch_takes_no_member_and_batch_calls_must_name_it() {
        let mut session = Session::new(Machine::new(), Options::default());
        assert_eq!(session.seal().map(|append| append.batch), None);
        assert_eq!(
            session.persisted(BatchNo(1), Duration::ZERO),
            Err(BatchMismatch::NotSealed)
        );
        session.feed(followup("m1")).unwrap();
        let batch = session.seal().map(|append| append.batch).unwrap();
        let before = session.machine().clone();
        assert_eq!(session.feed(inject("m2")), Err(Refused::Sealed));
        assert_eq!(session.record(1, 1, Vec::new()), Err(Refused::Sealed));
        assert_eq!(
            session.failed(BatchNo(9)),
            Err(BatchMismatch::Other {
                expected: batch,
                given: BatchNo(9)
            })
        );
        assert_eq!(session.machine(), &before);
        assert!(session.persisted(batch, Duration::ZERO).is_ok());
    }

    #[test]
    fn a_rejected_first_member_leaves_no_batch_open() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(inject("m1")).unwrap();
        persist(&mut session, Duration::ZERO);
        assert_eq!(
            session.feed(inject("m1")),
            Err(Refused::Rejected(Rejected::AlreadyPending("m1".into())))
        );
        assert!(!session.has_batch() && !session.machine().is_batch_open());
        assert_eq!(session.seal().map(|append| append.batch), None);
    }

    #[test]
    fn host_events_join_the_batch_inside_their_step() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(followup("m1")).unwrap();
        persist(&mut session, Duration::ZERO);
        let claimed: coxswain_core::Batch = [Message::user("m1", "hi")].into_iter().collect();
        session
            .feed(Input::PreStep(PreStepAnswer::Enter(claimed)))
            .unwrap();
        let event = HostEvent::new("model/output", json!({"text": "hello"})).unwrap();
        // The step opened in the staged batch: its events may join the same batch.
        let ticket = session.record(1, 1, vec![event]).unwrap();
        assert_eq!(ticket.index, 1);
        let entries: Vec<&str> = session
            .seal()
            .map(|append| append.entries.iter().map(Entry::kind).collect())
            .unwrap_or_default();
        assert_eq!(entries.last(), Some(&"model/output"));
        let released = persist(&mut session, Duration::ZERO);
        assert_eq!(released.last(), Some(&Release::Ack(ticket, Ack::Recorded)));
        assert_eq!(
            session.record(1, 2, Vec::new()),
            Err(Refused::StepClosed { turn: 1, step: 2 })
        );
    }

    #[test]
    fn an_aborted_call_that_outlives_the_grace_is_answered_abandoned() {
        let options = Options {
            abort_grace: Duration::from_secs(5),
            ..Options::default()
        };
        let mut session = Session::new(Machine::new(), options);
        session.feed(followup("m1")).unwrap();
        persist(&mut session, Duration::from_secs(1));
        assert_eq!(session.poll_timeout(), None);
        session.feed(cancel()).unwrap();
        // No deadline before the abort is released: the batch may still fail.
        assert_eq!(session.poll_timeout(), None);
        let released = persist(&mut session, Duration::from_secs(10));
        assert_eq!(shape(&released), ["abort", "ack0"]);
        assert_eq!(session.poll_timeout(), Some(Duration::from_secs(15)));
        assert_eq!(session.handle_timeout(Duration::from_secs(14)), None);
        let request = Outstanding::PreStep { turn: 1, step: 1 };
        let Some(Timeout::Abandoned {
            request: gave_up,
            ticket,
        }) = session.handle_timeout(Duration::from_secs(15))
        else {
            panic!("the grace ran out");
        };
        assert_eq!((gave_up, ticket.index), (request, 0));
        assert_eq!(session.poll_timeout(), None);
        // A failure after a cancel ends the turn aborted (S38).
        assert_eq!(
            sealed_events(&mut session),
            [Event::TurnEnd {
                turn: 1,
                reason: TurnEndReason::Aborted {
                    reason: CancelCause::User
                }
            }]
        );
        persist(&mut session, Duration::from_secs(15));
        assert_eq!(session.machine().outstanding(), None);
    }

    #[test]
    fn a_failed_batch_hands_back_the_host_answers_it_held_to_be_fed_again() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(followup("m1")).unwrap();
        persist(&mut session, Duration::ZERO);
        let claimed: coxswain_core::Batch = [Message::user("m1", "hi")].into_iter().collect();
        let enter = Input::PreStep(PreStepAnswer::Enter(claimed));
        session.feed(inject("c")).unwrap();
        session.feed(enter.clone()).unwrap();
        let batch = session.seal().map(|append| append.batch).unwrap();
        let failed = session.failed(batch).unwrap();
        assert_eq!(failed.members.len(), 2);
        assert_eq!(
            failed.answers,
            [(Ticket { batch, index: 1 }, enter.clone())]
        );
        // Fed again, the answer is accepted: its request was outstanding again.
        assert_eq!(
            session.machine().outstanding(),
            Some(Outstanding::PreStep { turn: 1, step: 1 })
        );
        assert_eq!(session.feed(enter).map(|ticket| ticket.index), Ok(0));
    }

    #[test]
    fn a_failed_batch_holding_the_abandoned_answer_puts_the_grace_back() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(followup("m1")).unwrap();
        persist(&mut session, Duration::ZERO);
        session.feed(cancel()).unwrap();
        persist(&mut session, Duration::ZERO);
        let deadline = session.poll_timeout().unwrap();
        assert!(session.handle_timeout(deadline).is_some());
        let batch = session.seal().map(|append| append.batch).unwrap();
        // The session's own answer is not handed back: the grace fires again instead.
        assert_eq!(
            session.failed(batch).map(|failed| failed.answers),
            Ok(Vec::new())
        );
        // The answer was taken back: the request is outstanding and the grace fires again.
        assert_eq!(session.poll_timeout(), Some(deadline));
        assert!(matches!(
            session.handle_timeout(deadline),
            Some(Timeout::Abandoned { .. })
        ));
    }

    #[test]
    fn a_call_answered_within_the_grace_is_not_abandoned() {
        let mut session = Session::new(Machine::new(), Options::default());
        session.feed(followup("m1")).unwrap();
        persist(&mut session, Duration::ZERO);
        session.feed(cancel()).unwrap();
        persist(&mut session, Duration::ZERO);
        let deadline = session.poll_timeout().unwrap();
        session.feed(Input::PreStep(PreStepAnswer::Reject)).unwrap();
        persist(&mut session, Duration::ZERO);
        // Answered: the grace is over at once, so no driver wakes for it.
        assert_eq!(session.poll_timeout(), None);
        assert_eq!(session.handle_timeout(deadline), None);
    }

    #[test]
    fn a_host_failure_is_answered_with_its_code() {
        let mut session = Session::new(Machine::new(), Options::default());
        let request = Outstanding::PreStep { turn: 1, step: 1 };
        assert_eq!(
            session.host_failed(request, HostFailure::Raised, "x"),
            Err(Refused::Stale { request })
        );
        session.feed(followup("m1")).unwrap();
        persist(&mut session, Duration::ZERO);
        session
            .host_failed(request, HostFailure::Panicked, "boom")
            .unwrap();
        let codes: Vec<String> = sealed_events(&mut session)
            .into_iter()
            .filter_map(|event| match event {
                Event::TurnEnd {
                    reason: TurnEndReason::Error { error },
                    ..
                } => Some(format!("{}: {}", error.code, error.message)),
                _ => None,
            })
            .collect();
        assert_eq!(
            codes,
            ["host-panicked: the host's preStep call panicked: boom"]
        );
    }
}
