//! What an [`Agent`](crate::Agent) handle and its driver task share: the command channel (the
//! session layer's [`Command`]s, each with who waits for its answer), the published state's
//! receiver and the updates.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use coxswain_core::{Fate, Machine};
use coxswain_session::Command;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::error::AgentError;
use crate::updates::{PendingSnapshot, State, Updates};

/// A handle's ties to its driver.
#[derive(Debug)]
pub(crate) struct Inner {
    /// Boxed calls: a channel allocates its slots 32 at a time, at once, and a call is 88
    /// bytes; boxed, an idle agent's channel holds 32 pointers (about 2.6 kB less per agent).
    pub(crate) tx: mpsc::Sender<Box<Call>>,
    pub(crate) state: watch::Receiver<State>,
    pub(crate) updates: Arc<Updates>,
    /// The driver's machine as it ended: what [`Agent::fate`](crate::Agent::fate) answers from
    /// once the driver is gone (S58: also after dispose). Set before the ending is published.
    /// Boxed: an agent that is running holds only a pointer's room for it.
    pub(crate) last: Arc<OnceLock<Box<Machine>>>,
}

pub(crate) type Reply<T> = oneshot::Sender<Result<T, AgentError>>;

/// A command for the driver, and who waits for its answer.
pub(crate) type Call = (Command, Waiter);

/// A maintenance job, as the driver spawns it.
pub(crate) type Job =
    Box<dyn FnOnce(CancellationToken) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// Who waits for a command's answer: the agent loop's waiter.
pub(crate) enum Waiter {
    /// An input: whether it found its id (`false` only for an edit of an id not pending).
    Input(Reply<bool>),
    /// Host events, or a maintenance job's end.
    Done(Reply<()>),
    /// A maintenance job: spawned once its beginning is durable.
    Job(Job, Reply<()>),
    /// The pending lists; dropped once the agent has ended (the handle reads the ending).
    Pending(oneshot::Sender<PendingSnapshot>),
    /// A fate (S58); dropped only if the driver vanished (the handle reads its last machine).
    Fate(oneshot::Sender<Fate>),
    /// `close`, or the driver's own (its handles gone): the caller waits for the ending.
    Close,
}
