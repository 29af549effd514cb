//! What an agent publishes: live updates ([`Update`]) and the state its handles read.

use std::future::Future;

use coxswain_core::{Machine, Notification, Pending, Status, Target};
use coxswain_log::Entry;
use tokio::sync::broadcast;

use crate::agent::Agent;
use crate::error::{AgentError, Ending};
use crate::log::LogError;
#[cfg(doc)]
use crate::Options;

/// A live update from an agent ([`Agent::subscribe`]), in the core's output order.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Update {
    /// A record was appended to the durable log (the machine's event or the host's).
    Recorded {
        /// Its `seq` in the log.
        seq: u64,
        /// The record.
        entry: Entry,
    },
    /// A live notification of the core: inserted, discarded, claimed, status, error.
    Notified(Notification),
    /// The driver task ended; no update follows.
    Ended(Ending),
}

/// The pending lists at one moment ([`Agent::pending`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct PendingSnapshot {
    /// NT, in order.
    pub next_turn: Vec<Pending>,
    /// NS, in order.
    pub next_step: Vec<Pending>,
}

impl PendingSnapshot {
    pub(crate) fn of(machine: &Machine) -> Self {
        PendingSnapshot {
            next_turn: machine.pending(Target::NextTurn).cloned().collect(),
            next_step: machine.pending(Target::NextStep).cloned().collect(),
        }
    }
}

/// The live-update channel. A tokio broadcast channel allocates all its slots up front, so it is
/// created at the first [`Agent::subscribe`]: an agent nobody watches costs no buffer (100k idle
/// agents would otherwise hold 100k buffers).
#[derive(Debug)]
pub(crate) struct Updates {
    capacity: usize,
    channel: std::sync::Mutex<Channel>,
}

#[derive(Debug)]
enum Channel {
    Unused,
    Open(broadcast::Sender<Update>),
    Ended,
}

impl Updates {
    pub(crate) fn new(capacity: usize) -> Self {
        Updates {
            capacity,
            channel: std::sync::Mutex::new(Channel::Unused),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Channel> {
        self.channel
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Update> {
        let mut channel = self.lock();
        match &*channel {
            Channel::Open(sender) => sender.subscribe(),
            Channel::Unused => {
                let (sender, receiver) = broadcast::channel(self.capacity);
                *channel = Channel::Open(sender);
                receiver
            }
            // The driver ended: a receiver that reports the channel closed.
            Channel::Ended => broadcast::channel(1).1,
        }
    }

    /// Whether anyone subscribed (the driver builds no update for nobody).
    pub(crate) fn watched(&self) -> bool {
        matches!(&*self.lock(), Channel::Open(_))
    }

    /// Publishes an update to the subscribers, if there are any.
    pub(crate) fn send(&self, update: Update) {
        if let Channel::Open(sender) = &*self.lock() {
            let _ = sender.send(update);
        }
    }

    /// The driver ended: subscribers get what is buffered, then the channel closes.
    pub(crate) fn end(&self) {
        *self.lock() = Channel::Ended;
    }
}

/// What the driver publishes after every input.
#[derive(Clone, Debug)]
pub(crate) struct State {
    pub(crate) status: Status,
    pub(crate) quiescent: bool,
    /// The core's last turn (the running turn's number while running, S27).
    pub(crate) last_turn: u64,
    /// Set once the driver has ended and released its log.
    pub(crate) ended: Option<Ending>,
    /// The final sync's failure, if it failed.
    pub(crate) final_sync: Option<LogError>,
}

impl State {
    /// The state of a driver whose machine is `machine`.
    pub(crate) fn of(machine: &Machine) -> Self {
        State {
            status: machine.status(),
            quiescent: machine.is_quiescent(),
            last_turn: machine.last_turn(),
            ended: None,
            final_sync: None,
        }
    }

    /// Takes `machine`'s state; whether it changed.
    pub(crate) fn update(&mut self, machine: &Machine) -> bool {
        let now = (
            machine.status(),
            machine.is_quiescent(),
            machine.last_turn(),
        );
        let changed = (self.status, self.quiescent, self.last_turn) != now;
        (self.status, self.quiescent, self.last_turn) = now;
        changed
    }
}

/// What a handle reads of what its driver published.
impl Agent {
    /// Resolves once the agent is quiescent (S44): no turn and no maintenance running. Fails if
    /// the agent stopped or was closed first; succeeds if it was disposed. Once a call has
    /// returned the error that stopped the agent ([`AgentError::Indeterminate`]) this fails
    /// with [`AgentError::Stopped`] at once. Never
    /// await it inside a host call or a maintenance job: the activity it waits for includes
    /// that call.
    pub async fn when_idle(&self) -> Result<(), AgentError> {
        let mut state = self.inner.state.clone();
        let ended = match state.wait_for(|s| s.quiescent || s.ended.is_some()).await {
            Ok(s) => s.ended.clone(),
            Err(_) => Some(Ending::Closed),
        };
        match ended {
            None | Some(Ending::Disposed) => Ok(()),
            Some(ending) => Err(ending.error()),
        }
    }

    /// Live updates from now on: every durable record as it is appended and every notification,
    /// in the core's order, then [`Update::Ended`]. A subscriber that falls more than
    /// [`Options::update_capacity`] behind lags (it skips).
    pub fn subscribe(&self) -> broadcast::Receiver<Update> {
        self.inner.updates.subscribe()
    }

    /// Resolves with how the driver ended, once it has ended and released its log (the lock of a
    /// [`FileLog`](crate::FileLog) included), so the same log can be opened again. Holds no
    /// handle: get it, drop every [`Agent`], and await it.
    pub fn finished(&self) -> impl Future<Output = Ending> + Send + 'static {
        let mut state = self.inner.state.clone();
        async move {
            match state.wait_for(|s| s.ended.is_some()).await {
                Ok(s) => s.ended.clone().unwrap_or(Ending::Closed),
                Err(_) => Ending::Closed,
            }
        }
    }

    /// The public status (S23). `Idle` once the driver has ended: nothing runs any more.
    pub fn status(&self) -> Status {
        self.inner.state.borrow().status
    }

    /// The number of the last turn opened (0 before the first, S27): the running turn while
    /// [`status`](Agent::status) is running, as of the last input made durable. It is what a
    /// guarded send names ([`steer_expecting`](Agent::steer_expecting),
    /// [`followup_if_idle_after`](Agent::followup_if_idle_after)); the core checks the guard
    /// against its own state when the send arrives, so a turn that moved on meanwhile is
    /// refused, not guessed (S54).
    pub fn last_turn(&self) -> u64 {
        self.inner.state.borrow().last_turn
    }

    /// How the driver ended, if it did. `Some(Stopped(..))` as soon as a call has returned the
    /// error that stopped the agent: the driver ends (and releases its log) before it tells the
    /// calls of a failed append.
    pub fn ending(&self) -> Option<Ending> {
        self.inner.state.borrow().ended.clone()
    }

    pub(crate) fn ended_error(&self) -> AgentError {
        match &self.inner.state.borrow().ended {
            Some(ending) => ending.error(),
            None => AgentError::Closed,
        }
    }

    pub(crate) async fn wait_ended(&self) -> (Ending, Option<LogError>) {
        let mut state = self.inner.state.clone();
        let ended = match state.wait_for(|s| s.ended.is_some()).await {
            Ok(s) => (
                s.ended.clone().unwrap_or(Ending::Closed),
                s.final_sync.clone(),
            ),
            Err(_) => (Ending::Closed, None),
        };
        ended
    }
}
