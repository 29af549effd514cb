//! [`Agent`]: one driver thread over a [`Session`], a blocking [`Log`] and a [`Host`]. The
//! thread moves inputs in, records out and time along; every decision is the session's.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use coxswain_core::{
    Batch, CancelCause, Effect, Fate, Input, Machine, MessageId, Outstanding, PreStepAnswer,
    Request, StepAnswer, TurnStoppingAnswer,
};
use coxswain_session::{Ack, HostFailure, Options, Refused, Release, Session, Timeout};

use crate::log::{Log, LogError};

/// The embedder's blocking work. Each call runs on a thread of its own; `cancelled` turns true
/// when the turn is aborted. An `Err` answers `fail` (`host-raised`), a panic `host-panicked`.
pub trait Host: Send + Sync + 'static {
    /// Decide the step for the claimed `messages`. Default: enter them.
    fn pre_step(&self, messages: &Batch, _cancelled: &AtomicBool) -> Result<PreStepAnswer, String> {
        Ok(PreStepAnswer::Enter(messages.clone()))
    }
    /// Run step `step` of turn `turn` (the model call and its tools).
    fn step(&self, turn: u64, step: u64, cancelled: &AtomicBool) -> Result<StepAnswer, String>;
    /// Run the turn-stopping hooks. Default: done.
    fn turn_stopping(&self, _cancelled: &AtomicBool) -> Result<TurnStoppingAnswer, String> {
        Ok(TurnStoppingAnswer::Done)
    }
}

/// Why a call to the agent failed.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The session refused the input: nothing changed (S5).
    #[error(transparent)]
    Rejected(#[from] Refused),
    /// The append of the input's batch failed: the input is not in the log and the machine is
    /// as if it had not been fed. The agent goes on; the input may be sent again.
    #[error("the input's batch was not persisted: {0}")]
    Persistence(String),
    /// The append failed and its cut-back too: the input may or may not be in the log, and the
    /// agent stopped. Re-open the log and look before sending it again.
    #[error("the input may or may not be in the log: {0}")]
    Indeterminate(String),
    /// The agent has stopped (closed, or its log cannot say what it holds).
    #[error("the agent has stopped")]
    Stopped,
}

enum Command {
    Input(Input, Sender<Result<bool, AgentError>>),
    /// A host call's answer to its request (or the failure it stands for).
    Answer(Outstanding, Result<Input, (HostFailure, String)>),
    Idle(Sender<()>),
    /// A fate query (S58), answered once the group's batch is settled.
    Fate(MessageId, Sender<Fate>),
    Close,
}

/// The driver's machine as it ended: what [`Agent::fate`] answers from once the thread is gone.
type Last = Arc<Mutex<Option<Machine>>>;

/// A session served by a driver thread.
#[derive(Debug)]
pub struct Agent {
    tx: Sender<Command>,
    thread: Option<JoinHandle<()>>,
    last: Last,
}

/// The driver thread's state.
struct Driver<H, L> {
    session: Session,
    log: L,
    host: Arc<H>,
    tx: Sender<Command>,
    start: Instant,
    cancelled: Arc<AtomicBool>,
    /// Who waits for each member of the open batch (`None`: the driver's own answer).
    replies: Vec<Option<Sender<Result<bool, AgentError>>>>,
    idle: Vec<Sender<()>>,
    /// Fate queries of the group being committed.
    fates: Vec<(MessageId, Sender<Fate>)>,
    max_batch: usize,
    last: Last,
}

impl Agent {
    /// Starts the driver thread over `machine` (fresh, or `FileLog::open`'s resumed one).
    pub fn start<H: Host, L: Log>(host: H, log: L, machine: Machine, options: Options) -> Agent {
        let (tx, rx) = channel();
        let last: Last = Arc::new(Mutex::new(None));
        let mut driver = Driver {
            session: Session::new(machine, options),
            log,
            host: Arc::new(host),
            tx: tx.clone(),
            start: Instant::now(),
            cancelled: Arc::new(AtomicBool::new(false)),
            replies: Vec::new(),
            idle: Vec::new(),
            fates: Vec::new(),
            max_batch: 64,
            last: Arc::clone(&last),
        };
        let thread = std::thread::spawn(move || {
            while let Some(first) = driver.next(&rx) {
                let mut group = vec![first];
                group.extend(rx.try_iter().take(driver.max_batch));
                if !driver.commit(group) {
                    break;
                }
            }
            // The machine is kept (the driver's drop) before the queries still queued are
            // dropped with `rx`: they read it instead.
            drop(driver);
            drop(rx);
        });
        Agent {
            tx,
            thread: Some(thread),
            last,
        }
    }

    /// [`start`](Agent::start), then `resume` (S57) before any other input: parked work of a
    /// restored log (S48; a redelivered message, S59) runs its turn without waiting for a new
    /// waking send. Returns once the resume's events are durable. The threads driver's
    /// `resume_on_open`: its open is the embedder's [`FileLog::open`](crate::FileLog::open),
    /// then this.
    ///
    /// # Errors
    ///
    /// [`AgentError`] if the resume's batch was not persisted: the agent is closed again.
    pub fn start_resuming<H: Host, L: Log>(
        host: H,
        log: L,
        machine: Machine,
        options: Options,
    ) -> Result<Agent, AgentError> {
        let agent = Agent::start(host, log, machine, options);
        match agent.resume() {
            Ok(()) => Ok(agent),
            Err(error) => {
                agent.close();
                Err(error)
            }
        }
    }

    /// `resume` (S57): starts parked waking work when idle, exactly as a waking send would;
    /// otherwise changes and writes nothing. Returns once its events are durable.
    ///
    /// # Errors
    ///
    /// [`AgentError::Rejected`] once disposed (S45); [`AgentError`] for a failed append.
    pub fn resume(&self) -> Result<(), AgentError> {
        self.input(Input::Resume {}).map(drop)
    }

    /// `dispose` (S45): cancels everything; the session then refuses every input but still
    /// answers [`fate`](Agent::fate). Returns once `disposed` is durable.
    ///
    /// # Errors
    ///
    /// [`AgentError`].
    pub fn dispose(&self) -> Result<(), AgentError> {
        self.input(Input::Dispose {}).map(drop)
    }

    /// What became of message `id` (S58), from the session's durable state: pending, claimed
    /// (turn, first step that carried it, the turn's end), discarded, or unknown. A query: it
    /// changes and writes nothing. Answered in every phase, also after dispose, and after the
    /// driver stopped (from the machine as it left it). [`Fate::to_json`] renders it.
    pub fn fate(&self, id: impl Into<MessageId>) -> Fate {
        let id = id.into();
        let (reply, answer) = channel();
        if self.tx.send(Command::Fate(id.clone(), reply)).is_ok() {
            if let Ok(fate) = answer.recv() {
                return fate;
            }
        }
        // The thread ended: it kept its machine before it dropped this query.
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        last.as_ref()
            .map_or(Fate::Unknown, |machine| machine.fate(&id))
    }

    /// Feeds one input; returns once its batch is durable (`false`: a `remove`/`replace` found
    /// nothing).
    ///
    /// # Errors
    ///
    /// [`AgentError`].
    pub fn input(&self, input: Input) -> Result<bool, AgentError> {
        let (reply, answer) = channel();
        self.tx
            .send(Command::Input(input, reply))
            .map_err(|_| AgentError::Stopped)?;
        answer.recv().unwrap_or(Err(AgentError::Stopped))
    }

    /// `cancel(user)`: the running turn is aborted (S39).
    ///
    /// # Errors
    ///
    /// [`AgentError`].
    pub fn cancel(&self) -> Result<bool, AgentError> {
        self.input(Input::Cancel {
            cause: CancelCause::User,
            keep_inbox: false,
        })
    }

    /// Waits until no turn runs and nothing is being persisted.
    pub fn when_idle(&self) {
        let (reply, idle) = channel();
        if self.tx.send(Command::Idle(reply)).is_ok() {
            let _ = idle.recv();
        }
    }

    /// Stops the driver thread and waits for it.
    pub fn close(mut self) {
        let _ = self.tx.send(Command::Close);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<H: Host, L: Log> Driver<H, L> {
    /// The next command, or `None` to stop; a deadline passing in between (the retry of held
    /// answers, an abort grace: the session's rules) stages what the session says, and commits.
    fn next(&mut self, rx: &std::sync::mpsc::Receiver<Command>) -> Option<Command> {
        loop {
            let at = self.session.poll_timeout();
            let wait = at.map(|at| at.saturating_sub(self.start.elapsed()));
            match wait.map_or_else(
                || rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                |wait| rx.recv_timeout(wait),
            ) {
                Ok(command) => return Some(command),
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {
                    // What the session staged is the driver's own: no caller waits for it.
                    match self.session.handle_timeout(self.start.elapsed()) {
                        Some(Timeout::Abandoned { .. }) => self.replies.push(None),
                        Some(Timeout::Retried { answers }) => self.replies.extend(
                            answers
                                .iter()
                                .filter(|(_, staged)| staged.is_ok())
                                .map(|_| None),
                        ),
                        None => {}
                    }
                    if !self.commit(Vec::new()) {
                        return None;
                    }
                }
            }
        }
    }

    /// Stages `group`, appends the batch, and settles it. `false`: the agent stops.
    fn commit(&mut self, group: Vec<Command>) -> bool {
        let mut closing = false;
        for command in group {
            match command {
                Command::Input(input, reply) => match self.session.feed(input) {
                    Ok(_) => self.replies.push(Some(reply)),
                    Err(refused) => drop(reply.send(Err(refused.into()))),
                },
                // A late answer of an abandoned call is refused as stale (S4): nothing to do.
                Command::Answer(request, answer) => {
                    let fed = match answer {
                        Ok(input) => self.session.answer(request, input),
                        Err((failure, why)) => self.session.host_failed(request, failure, &why),
                    };
                    self.replies.extend(fed.ok().map(|_| None));
                }
                Command::Idle(reply) => self.idle.push(reply),
                Command::Fate(id, reply) => self.fates.push((id, reply)),
                Command::Close => closing = true,
            }
        }
        if let Some(append) = self.session.seal() {
            let batch = append.batch;
            match self.log.append(append.entries) {
                Ok(()) => {
                    let released = self
                        .session
                        .persisted(batch, self.start.elapsed())
                        .unwrap_or_default();
                    released
                        .into_iter()
                        .for_each(|release| self.release(release));
                }
                Err(error) => {
                    // The answers it held are the session's to stage again (`Timeout::Retried`).
                    let _ = self.session.failed(batch, self.start.elapsed());
                    let stop = matches!(error, LogError::Indeterminate { .. });
                    let why = match stop {
                        true => AgentError::Indeterminate(error.to_string()),
                        false => AgentError::Persistence(error.to_string()),
                    };
                    for reply in self.replies.drain(..).flatten() {
                        let _ = reply.send(Err(why.clone()));
                    }
                    if stop {
                        for (id, reply) in self.fates.drain(..) {
                            let _ = reply.send(self.session.machine().fate(&id));
                        }
                        return false;
                    }
                }
            }
        }
        // Queries see the group's settled state (persisted, or taken back).
        for (id, reply) in self.fates.drain(..) {
            let _ = reply.send(self.session.machine().fate(&id));
        }
        if self.session.machine().is_quiescent() && !self.session.has_batch() {
            for reply in self.idle.drain(..) {
                let _ = reply.send(());
            }
        }
        !closing
    }

    fn release(&mut self, release: Release) {
        match release {
            Release::Ack(ticket, ack) => {
                let answer = match ack {
                    Ack::Refused(refused) => Err(refused.into()),
                    ack => Ok(matches!(ack, Ack::Input { found: true } | Ack::Recorded)),
                };
                if let Some(Some(reply)) = self.replies.get_mut(ticket.index).map(Option::take) {
                    let _ = reply.send(answer);
                }
                if ticket.index + 1 == self.replies.len() {
                    self.replies.clear();
                }
            }
            Release::Effect(Effect::Begin(_)) => self.cancelled = Arc::new(AtomicBool::new(false)),
            Release::Effect(Effect::Abort(_)) => self.cancelled.store(true, Ordering::SeqCst),
            Release::Effect(Effect::Request(request)) => self.call(request),
            Release::Effect(_) => {}
        }
    }
}

impl<H, L> Drop for Driver<H, L> {
    /// Keeps the machine for [`Agent::fate`] (S58: answered after the driver is gone too).
    fn drop(&mut self) {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        *last = Some(self.session.machine().clone());
    }
}

impl<H: Host, L: Log> Driver<H, L> {
    /// Runs a host call on a thread of its own; its answer comes back as a command.
    fn call(&self, request: Request) {
        let (host, cancelled, tx) = (self.host.clone(), self.cancelled.clone(), self.tx.clone());
        std::thread::spawn(move || {
            let outstanding = request.outstanding();
            let answer = catch_unwind(AssertUnwindSafe(|| match &request {
                Request::PreStep { messages, .. } => {
                    host.pre_step(messages, &cancelled).map(Input::PreStep)
                }
                Request::Step { turn, step } => {
                    host.step(*turn, *step, &cancelled).map(Input::Step)
                }
                Request::TurnStopping { .. } => {
                    host.turn_stopping(&cancelled).map(Input::TurnStopping)
                }
            }));
            let answer = match answer {
                Ok(Ok(input)) => Ok(input),
                Ok(Err(detail)) => Err((HostFailure::Raised, detail)),
                Err(_) => Err((HostFailure::Panicked, String::new())),
            };
            let _ = tx.send(Command::Answer(outstanding, answer));
        });
    }
}
