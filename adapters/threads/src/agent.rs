//! [`Agent`]: one driver thread, an IO loop over the session layer's agent loop
//! ([`AgentLoop`]), a blocking [`Log`] and a [`Host`]. The thread moves commands in, batches to
//! the log, host answers and time along; every decision is the loop's (which commands make a
//! batch, who waits for what, refused and stale host answers, the stop policy, the defaults).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use coxswain_core::{
    CancelCause, Effect, Fate, Input, Machine, MessageId, Outstanding, Pending, Request,
};
use coxswain_session::{AgentLoop, Command, Ending, HostReply, Options, Output, Reply};

use crate::error::AgentError;
use crate::host::Host;
use crate::log::{Log, LogError};

/// What the driver thread takes in.
pub(crate) enum Msg {
    Call(Command, Waiter),
    /// A host call came back.
    Answer(Outstanding, HostReply),
    /// Answered once quiescent (`false`) or once ended (`true`), or at once if ended.
    Idle(Sender<Result<(), AgentError>>, bool),
}

/// The pending lists: NT, then NS.
type Lists = (Vec<Pending>, Vec<Pending>);

/// Who waits for a command's answer.
pub(crate) enum Waiter {
    Caller(Sender<Result<Reply, AgentError>>),
    /// The handle was dropped: the thread ends once this close is answered.
    Exit,
}

/// A session served by a driver thread. Dropping it closes the agent and waits for the thread.
#[derive(Debug)]
pub struct Agent {
    pub(crate) tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
}

/// The driver thread's state.
struct Driver<H, L> {
    agent: AgentLoop<Waiter>,
    /// Released when the agent ends.
    log: Option<L>,
    host: Arc<H>,
    tx: Sender<Msg>,
    start: Instant,
    cancelled: Arc<AtomicBool>,
    idle: Vec<(Sender<Result<(), AgentError>>, bool)>,
    /// The last failed append's error, and the final sync's.
    failed: LogError,
    final_sync: Option<LogError>,
    closed: bool,
}

impl Agent {
    /// Starts the driver thread over `machine` (fresh, or [`open_log`](crate::open_log)'s
    /// resumed one), with `options` (every default is [`Options::DEFAULT`]'s; `hooks`: `host`'s).
    pub fn start<H: Host, L: Log>(host: H, log: L, machine: Machine, options: Options) -> Agent {
        let (tx, rx) = channel();
        let hooks = host.hooks();
        let options = Options { hooks, ..options };
        let mut driver = Driver {
            agent: AgentLoop::new(machine, options),
            log: Some(log),
            host: Arc::new(host),
            tx: tx.clone(),
            start: Instant::now(),
            cancelled: Arc::new(AtomicBool::new(false)),
            idle: Vec::new(),
            failed: LogError::Failed, // set before any caller is told an append failed
            final_sync: None,
            closed: false,
        };
        let more = options.max_batch.max(1) - 1;
        let thread = Some(std::thread::spawn(move || {
            while let Some(first) = driver.next(&rx) {
                driver.take(first);
                rx.try_iter().take(more).for_each(|msg| driver.take(msg));
                driver.pump();
            }
        }));
        Agent { tx, thread }
    }

    /// [`start`](Agent::start), then `resume` (S57) before any other input: parked work of a
    /// restored log (S48, S59) runs without waiting for a waking send.
    /// Fails: [`AgentError`] if the resume was not persisted: the agent is closed again.
    pub fn start_resuming<H: Host, L: Log>(
        host: H,
        log: L,
        machine: Machine,
        options: Options,
    ) -> Result<Agent, AgentError> {
        let agent = Agent::start(host, log, machine, options);
        agent.resume().map(|()| agent)
    }

    /// `resume` (S57): starts parked waking work when idle; otherwise writes nothing.
    /// Fails: [`AgentError`]: `disposed` once disposed (S45), or a failed append.
    pub fn resume(&self) -> Result<(), AgentError> {
        self.input(Input::Resume {}).map(drop)
    }

    /// `dispose` (S45): cancels everything and ends the agent; every input is then refused
    /// (`disposed`) but [`fate`](Agent::fate) is answered. Returns once `disposed` is durable
    /// and the agent has ended (the running call answered, or abandoned after the grace), its
    /// log synced and released. Fails: [`AgentError`] (`final-sync` if that sync failed).
    pub fn dispose(&self) -> Result<(), AgentError> {
        self.input(Input::Dispose {})?;
        self.wait(true)
    }

    /// What became of message `id` (S58), from the durable state: pending, claimed (turn, first
    /// step that carried it, the turn's end), discarded, or unknown. Changes and writes
    /// nothing; answered in every phase, also once the agent ended. [`Fate::to_json`] renders
    /// it.
    pub fn fate(&self, id: impl Into<MessageId>) -> Fate {
        match self.ask(Command::Fate(id.into())) {
            Ok(Reply::Fate(fate)) => fate,
            _ => Fate::Unknown,
        }
    }

    /// The pending lists (S53), as durable: NT, then NS.
    /// Fails: [`AgentError`] once the agent has ended.
    pub fn pending(&self) -> Result<Lists, AgentError> {
        match self.ask(Command::Pending)? {
            Reply::Pending {
                next_turn,
                next_step,
            } => Ok((next_turn, next_step)),
            _ => Ok(Lists::default()),
        }
    }

    fn ask(&self, command: Command) -> Result<Reply, AgentError> {
        let (reply, answer) = channel();
        let sent = self.tx.send(Msg::Call(command, Waiter::Caller(reply)));
        sent.map_err(|_| AgentError::Stopped)?;
        answer.recv().unwrap_or(Err(AgentError::Stopped))
    }

    /// Feeds one input; returns once its batch is durable (`false`: a `remove`/`replace` found
    /// nothing).
    /// Fails: [`AgentError`].
    pub fn input(&self, input: Input) -> Result<bool, AgentError> {
        let answer = self.ask(Command::Input(input))?;
        Ok(!matches!(answer, Reply::Delivered { found: false }))
    }

    /// `cancel(user)`: the running turn is aborted (S39).
    /// Fails: [`AgentError`].
    pub fn cancel(&self) -> Result<bool, AgentError> {
        let (cause, keep_inbox) = (CancelCause::User, false);
        self.input(Input::Cancel { cause, keep_inbox })
    }

    /// Waits until no turn runs and nothing is being persisted, or the agent has ended.
    /// Fails: [`AgentError`] once the agent has ended (`stopped`, `closed`; disposed: `Ok`).
    pub fn when_idle(&self) -> Result<(), AgentError> {
        self.wait(false)
    }

    fn wait(&self, ended: bool) -> Result<(), AgentError> {
        let (reply, idle) = channel();
        let sent = self.tx.send(Msg::Idle(reply, ended));
        sent.map_err(|_| AgentError::Stopped)?;
        idle.recv().unwrap_or(Err(AgentError::Stopped))
    }

    /// Closes the agent once what was sent before is durable: the log is synced and released,
    /// later inputs fail `closed`, [`fate`](Agent::fate) is still answered.
    pub fn close(&self) {
        let _ = self.close_checked();
    }

    /// [`close`](Agent::close), saying whether the log's final sync failed (`final-sync`, also
    /// when the agent had ended before). Fails: [`AgentError`].
    pub fn close_checked(&self) -> Result<(), AgentError> {
        self.ask(Command::Close).map(drop)
    }
}

impl Drop for Agent {
    /// Closes the agent and waits for its thread.
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Call(Command::Close, Waiter::Exit));
        let _ = self.thread.take().map(JoinHandle::join);
    }
}

impl<H: Host, L: Log> Driver<H, L> {
    /// The next message, or `None` once closed; a deadline passing meanwhile (a retry pause, an
    /// abort grace: the loop's) is handed to the loop.
    fn next(&mut self, rx: &Receiver<Msg>) -> Option<Msg> {
        while !self.closed {
            let at = self.agent.poll_timeout();
            let got = match at.map(|at| at.saturating_sub(self.start.elapsed())) {
                Some(wait) => rx.recv_timeout(wait),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match got {
                Ok(msg) => return Some(msg),
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {
                    self.agent.handle_timeout(self.start.elapsed());
                    self.pump();
                }
            }
        }
        None
    }

    fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Call(command, waiter) => self.agent.submit(command, waiter),
            Msg::Answer(request, reply) if self.agent.ending().is_none() => {
                self.agent.host_answered(request, reply);
            }
            Msg::Answer(..) => {} // the agent ended: nobody takes it
            Msg::Idle(reply, ended) => self.idle.push((reply, ended)),
        }
    }

    /// Carries out the loop's outputs and writes the batches it seals, until none is left.
    fn pump(&mut self) {
        loop {
            while let Some(output) = self.agent.poll_output() {
                self.carry_out(output);
            }
            let Some(append) = self.agent.poll_append(self.start.elapsed()) else {
                break;
            };
            let batch = append.batch;
            let written = match (append.entries, self.log.as_mut()) {
                ([], _) => Ok(()),
                (entries, Some(log)) => log.append(entries),
                (_, None) => Err(LogError::Failed), // released: the loop seals nothing then
            };
            let result = written.map_err(|error| {
                let failure = error.failure();
                self.failed = error;
                failure
            });
            let _ = self.agent.appended(batch, result, self.start.elapsed());
        }
        while let Some(output) = self.agent.poll_output() {
            self.carry_out(output);
        }
        let (ending, quiet) = (self.agent.ending(), self.agent.machine().is_quiescent());
        self.idle.retain(|(reply, until_ended)| {
            let idle = match ending {
                Some(Ending::Disposed) if *until_ended => AgentError::synced(&self.final_sync),
                Some(Ending::Disposed) => Ok(()),
                Some(ending) => Err(AgentError::ended(ending)),
                None if quiet && !until_ended => Ok(()),
                None => return true,
            };
            drop(reply.send(idle));
            false
        });
    }

    fn carry_out(&mut self, output: Output<Waiter>) {
        match output {
            Output::Reply(Waiter::Caller(reply), answer) => {
                drop(reply.send(AgentError::answer(answer, &self.failed, &self.final_sync)));
            }
            Output::Reply(Waiter::Exit, _) => self.closed = true,
            Output::Effect(Effect::Begin(_)) => self.cancelled = Arc::new(AtomicBool::new(false)),
            Output::Effect(Effect::Abort(_)) => self.cancelled.store(true, Ordering::SeqCst),
            Output::Effect(Effect::Request(request)) => self.call(request),
            Output::Ended(_) => {
                // The call's token trips; the log is synced (a failed append too) and released.
                self.cancelled.store(true, Ordering::SeqCst);
                self.final_sync = self.log.take().and_then(|mut log| log.sync().err());
                self.agent.finish();
            }
            // An abandoned call's thread runs on; the loop drops its late answer.
            _ => {}
        }
    }

    /// Runs a host call on a thread of its own; its answer comes back as a message.
    fn call(&self, request: Request) {
        let (host, cancelled, tx) = (self.host.clone(), self.cancelled.clone(), self.tx.clone());
        std::thread::spawn(move || {
            let reply = crate::host::call(&*host, &request, &cancelled);
            let _ = tx.send(Msg::Answer(request.outstanding(), reply));
        });
    }
}
