//! What an agent publishes: live updates ([`Update`]) and the state its handles read.

use std::sync::atomic::{AtomicBool, Ordering};

use coxswain_core::{Machine, Notification, Pending, Status};
use coxswain_log::Entry;
use tokio::sync::broadcast;

use crate::error::Ending;
use crate::log::LogError;
#[cfg(doc)]
use crate::{Agent, Options};

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

/// The live-update channel. A tokio broadcast channel allocates all its slots up front, so it is
/// created at the first [`Agent::subscribe`]: an agent nobody watches costs no buffer (100k idle
/// agents would otherwise hold 100k buffers).
#[derive(Debug)]
pub(crate) struct Updates {
    capacity: usize,
    channel: std::sync::Mutex<Channel>,
    /// Whether the channel is open (someone subscribed, and the driver has not ended): read
    /// without the lock, so an agent nobody watches takes no lock per update it does not send.
    /// Written under the lock.
    open: AtomicBool,
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
            open: AtomicBool::new(false),
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
                self.open.store(true, Ordering::Release);
                receiver
            }
            // The driver ended: a receiver that reports the channel closed.
            Channel::Ended => broadcast::channel(1).1,
        }
    }

    /// Whether anyone subscribed (the driver builds no update for nobody).
    pub(crate) fn watched(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Publishes an update to the subscribers, if there are any.
    pub(crate) fn send(&self, update: Update) {
        if !self.watched() {
            return;
        }
        if let Channel::Open(sender) = &*self.lock() {
            let _ = sender.send(update);
        }
    }

    /// The driver ended: subscribers get what is buffered, then the channel closes.
    pub(crate) fn end(&self) {
        let mut channel = self.lock();
        *channel = Channel::Ended;
        self.open.store(false, Ordering::Release);
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

    /// What of `machine` is published: its status, whether it is quiescent, its last turn.
    pub(crate) fn key(machine: &Machine) -> (Status, bool, u64) {
        (
            machine.status(),
            machine.is_quiescent(),
            machine.last_turn(),
        )
    }

    /// Takes `machine`'s state; whether it changed.
    pub(crate) fn update(&mut self, machine: &Machine) -> bool {
        let now = State::key(machine);
        let changed = (self.status, self.quiescent, self.last_turn) != now;
        (self.status, self.quiescent, self.last_turn) = now;
        changed
    }
}
